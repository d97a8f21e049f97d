"""Output tile buffer (:mod:`fcircnn.hw.buffer_output`) on Amaranth's simulator."""

import random

import numpy as np
import pytest
from amaranth.sim import Simulator

from fcircnn.hw.buffer_output import OutputBuffer
from fcircnn.models.config import builtin_path, load_accelerator
from fcircnn.models.layout import pack_ncdhw8


def run(dut, tiles, shapes, seed=0, stall=0.3):
    rng = random.Random(seed)
    got = [bytearray() for _ in tiles]

    async def writer(ctx):
        for (re, im), shape in zip(tiles, shapes, strict=True):
            ctx.set(dut.shape, shape)
            Td, Tr, Tc = dut.Td, dut.Tr, dut.Tc
            G = -(-dut.Tm // 16)
            order = [(v, g, r, c) for v in range(Td) for g in range(G) for r in range(Tr)
                     for c in range(Tc)]
            rng.shuffle(order)  # the post-units may deliver (lane, group, voxel) in any order
            for k, (v, g, r, c) in enumerate(order):
                slots = [{"re": int(re[s, v, r, c]), "im": int(im[s, v, r, c])}
                         if s < dut.Tm // 2 else {"re": 0, "im": 0}
                         for s in range(8 * g, 8 * g + 8)]
                ctx.set(dut.i.payload, {"lane": v, "group": g, "addr": r * Tc + c,
                                        "slots": slots, "last": int(k == len(order) - 1)})
                ctx.set(dut.i.valid, 1)
                await ctx.tick().until(dut.i.ready)
            ctx.set(dut.i.valid, 0)

    async def reader(ctx):
        for t, shape in enumerate(shapes):
            n = shape["groups"] * shape["d"] * shape["h"] * shape["w"]
            while len(got[t]) < 16 * n:
                ready = rng.random() >= stall
                ctx.set(dut.o.ready, ready)
                _, _, valid, payload = await ctx.tick().sample(dut.o.valid, dut.o.payload)
                if valid and ready:
                    got[t] += int(payload.data).to_bytes(16, "little")
            ctx.set(dut.o.ready, 0)
        for _ in range(5):
            _, _, valid = await ctx.tick().sample(dut.o.valid)
            assert not valid  # exactly the tile's beats, nothing more
        assert not ctx.get(dut.conflict)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(writer, background=True)
    sim.add_testbench(reader)
    sim.run()
    return got


@pytest.mark.parametrize(("Tm", "Td", "Tr", "Tc"), [(32, 2, 3, 3), (8, 1, 2, 3), (48, 2, 2, 2)])
def test_store_order_is_ncdhw8(Tm, Td, Tr, Tc):
    nrng = np.random.default_rng(Tm + Tr)
    buf = OutputBuffer(Tm, Td, Tr, Tc)
    tiles, shapes = [], []
    for k in range(3):
        re = nrng.integers(-127, 128, size=(Tm // 2, Td, Tr, Tc))
        im = nrng.integers(-127, 128, size=(Tm // 2, Td, Tr, Tc))
        tiles.append((re, im))
        # Full tile, then edge tiles (fewer voxels / groups).
        shapes.append({"groups": buf.groups if k != 2 else 1, "d": Td if k == 0 else 1,
                       "h": Tr if k != 1 else Tr - 1, "w": Tc if k != 1 else 1})
    got = run(buf, tiles, shapes, seed=Tm)
    for (re, im), shape, data in zip(tiles, shapes, got, strict=True):
        G = buf.groups
        fre = np.zeros((G * 8, Td, Tr, Tc), dtype=np.int64)
        fim = np.zeros_like(fre)
        fre[: Tm // 2], fim[: Tm // 2] = re, im
        cut = (slice(0, 8 * shape["groups"]), slice(0, shape["d"]), slice(0, shape["h"]),
               slice(0, shape["w"]))
        assert bytes(data) == pack_ncdhw8(fre[cut], fim[cut])


def test_full_rate_store():
    buf = OutputBuffer(16, 1, 2, 2)
    nrng = np.random.default_rng(1)
    re = nrng.integers(-127, 128, size=(8, 1, 2, 2))
    got = run(buf, [(re, re)], [{"groups": 1, "d": 1, "h": 2, "w": 2}], stall=0.0)
    assert bytes(got[0]) == pack_ncdhw8(re, re)


@pytest.mark.parametrize(("kwargs", "exc", "match"), [
    ({"Tm": 12}, ValueError, "Tm must be a multiple of 8"),
    ({"Td": 0}, ValueError, "Td must be in"),
    ({"Tc": "7"}, TypeError, "Tc must be an integer"),
])
def test_bad_parameters(kwargs, exc, match):
    args = {"Tm": 16, "Td": 2, "Tr": 2, "Tc": 2} | kwargs
    with pytest.raises(exc, match=match):
        OutputBuffer(**args)


@pytest.mark.slow
def test_c3d_buffer_maps_to_block_ram():
    """The paper's C3D configuration: every bank in RAMB36E2/RAMB18E2, none in LUTs or FFs."""
    from fcircnn.gen.synth import synthesize

    acc = load_accelerator(builtin_path("c3d_zcu102"))
    report = synthesize(OutputBuffer.from_config(acc.cores[0]), "buffer_output")
    lutram, bram36 = report.lutram, report.bram36
    print(f"C3D output buffer: {report.bram}, {bram36:g} BRAM36-equivalent, "
          f"{report.lut} LUT, {report.ff} FF")
    assert not lutram, lutram
    assert report.ff < 100  # the words are not in flip-flops
    # 2 lanes x 4 slot groups, 128 bit x (2 x 49) words: 2 RAMB36 each.
    assert report.bram == {"RAMB18E2": 0, "RAMB36E2": 16}
