"""Accumulator tile buffer (:mod:`fcircnn.hw.buffer_accumulator`) on Amaranth's simulator."""

import random

import numpy as np
import pytest
from amaranth.sim import Simulator

from fcircnn.hw.buffer_accumulator import AccumulatorBuffer
from fcircnn.models.config import builtin_path, load_accelerator


def test_tiles_round_trip_with_overlap():
    Tm, Td, Tr, Tc = 32, 2, 3, 2
    buf = AccumulatorBuffer(Tm, Td, Tr, Tc)
    nrng = np.random.default_rng(0)
    rng = random.Random(0)
    tiles = [nrng.integers(-(2**31), 2**31, size=(2, Td, Tm // 2, Tr * Tc)) for _ in range(3)]
    got = []

    async def writer(ctx):
        for t in tiles:
            order = list(range(Tr * Tc))
            rng.shuffle(order)
            for k, a in enumerate(order):
                acc = [[{"re": int(t[0, v, s, a]), "im": int(t[1, v, s, a])}
                        for s in range(Tm // 2)] for v in range(Td)]
                ctx.set(buf.i.payload, {"addr": a, "acc": acc, "last": int(k == len(order) - 1)})
                ctx.set(buf.i.valid, 1)
                await ctx.tick().until(buf.i.ready)
            ctx.set(buf.i.valid, 0)

    async def reader(ctx):
        for _ in tiles:
            await ctx.tick().until(buf.r_valid)
            out = np.zeros((2, Td, Tm // 2, Tr * Tc), dtype=np.int64)
            for a in range(Tr * Tc):
                ctx.set(buf.r_addr, a)
                ctx.set(buf.r_en, 1)
                await ctx.tick()
                value = ctx.get(buf.acc)
                for v in range(Td):
                    for s in range(Tm // 2):
                        out[0, v, s, a], out[1, v, s, a] = value[v][s].re, value[v][s].im
            ctx.set(buf.r_en, 0)
            got.append(out)
            ctx.set(buf.r_release, 1)
            await ctx.tick()
            ctx.set(buf.r_release, 0)
        assert not ctx.get(buf.conflict)

    sim = Simulator(buf)
    sim.add_clock(1e-8)
    sim.add_testbench(writer, background=True)
    sim.add_testbench(reader)
    sim.run()
    for t, out in zip(tiles, got, strict=True):
        np.testing.assert_array_equal(out, t)


@pytest.mark.parametrize(("kwargs", "exc", "match"), [
    ({"Tm": 12}, ValueError, "Tm must be a multiple of 8"),
    ({"acc_width": 16}, ValueError, "acc_width must be in 32..48"),
    ({"Tr": None}, TypeError, "Tr must be an integer"),
])
def test_bad_parameters(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        AccumulatorBuffer(**({"Tm": 16, "Td": 1, "Tr": 2, "Tc": 2} | kwargs))


@pytest.mark.slow
def test_c3d_buffer_maps_to_block_ram():
    """The paper's C3D configuration: every bank in block RAM, none in LUTs or FFs."""
    from fcircnn.gen.synth import synthesize

    acc = load_accelerator(builtin_path("c3d_zcu102"))
    report = synthesize(AccumulatorBuffer.from_config(acc.cores[0]), "buffer_accumulator")
    lutram, bram36 = report.lutram, report.bram36
    print(f"C3D accumulator buffer: {report.bram}, {bram36:g} BRAM36-equivalent, "
          f"{report.lut} LUT, {report.ff} FF")
    assert not lutram, lutram
    assert report.ff < 100
    assert bram36 > 0
