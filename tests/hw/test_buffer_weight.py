"""Weight tile buffer (:mod:`fcircnn.hw.buffer_weight`) on Amaranth's simulator."""

import numpy as np
import pytest
from amaranth.hdl import Fragment
from amaranth.sim import Simulator

from fcircnn.arch.geometry import weight_image_beats
from fcircnn.hw.buffer_weight import WeightBuffer
from fcircnn.models.config import builtin_path, load_accelerator


def weight_image(rng, Tn, Tm, B, taps):
    """Random weight slots [tap, p, q, k] (re, im) and their image beats."""
    shape = (taps, Tm // B, Tn // B, B // 2)
    re = rng.integers(-127, 128, size=shape)
    im = rng.integers(-127, 128, size=shape)
    flat = np.stack([re, im], axis=-1).astype(np.int8).reshape(-1, 16)
    return (re, im), [int.from_bytes(row.tobytes(), "little") for row in flat]


def random_tiles(rng, Tn, Tm, B, taps, n=4):
    """``n`` random tiles: their slots (for :func:`check_terms`) and their image beats."""
    pairs = [weight_image(rng, Tn, Tm, B, taps) for _ in range(n)]
    return [ref for ref, _ in pairs], [beats for _, beats in pairs]


def feeder(port, tiles, rng=None, stall=0.0):
    """A testbench that offers each tile's beats on ``port`` (``last`` on each tile's final
    beat), idling a cycle before a beat with probability ``stall``."""
    async def feed(ctx):
        for beats in tiles:
            for k, beat in enumerate(beats):
                while rng is not None and rng.random() < stall:
                    ctx.set(port.valid, 0)
                    await ctx.tick()
                ctx.set(port.payload, {"data": beat, "last": int(k == len(beats) - 1)})
                ctx.set(port.valid, 1)
                await ctx.tick().until(port.ready)
            ctx.set(port.valid, 0)
    return feed


def run(dut, tiles, taps_used, *, loaders=None, rng=None, stall=0.0):
    got = []

    async def reader(ctx):
        for _ in tiles:
            await ctx.tick().until(dut.r_valid)
            while rng is not None and rng.random() < stall:
                await ctx.tick()
            words = []
            for t in range(taps_used):
                ctx.set(dut.r_addr, t)
                ctx.set(dut.r_en, 1)
                await ctx.tick()
                ctx.set(dut.r_en, 0)
                await ctx.tick()  # data held while r_en is low
                words.append(ctx.get(dut.w))
            got.append(words)
            ctx.set(dut.r_release, 1)
            await ctx.tick()
            ctx.set(dut.r_release, 0)
        assert not ctx.get(dut.conflict)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    for loader in loaders or [feeder(dut.i, tiles)]:
        sim.add_testbench(loader, background=True)
    sim.add_testbench(reader)
    sim.run()
    return got


@pytest.mark.parametrize(("Tn", "Tm", "B", "taps"), [(16, 16, 8, 3), (8, 32, 8, 2),
                                                     (8, 8, 4, 2), (16, 32, 16, 2)])
def test_gauss_terms_per_block_pair(Tn, Tm, B, taps):
    rng = np.random.default_rng(Tn * Tm + B)
    buf = WeightBuffer(Tn, Tm, B=B, taps=taps)
    tiles, refs = [], []
    for _ in range(3):  # three tiles: both halves, then reuse
        ref, beats = weight_image(rng, Tn, Tm, B, taps)
        assert len(beats) == weight_image_beats(Tn, Tm, B, taps)
        tiles.append(beats)
        refs.append(ref)
    got = run(buf, tiles, taps)
    for (re, im), words in zip(refs, got, strict=True):
        for t, w in enumerate(words):
            for p in range(Tm // B):
                for q in range(Tn // B):
                    for k in range(B // 2):
                        c, d = re[t, p, q, k], im[t, p, q, k]
                        term = w[p][q][k]
                        assert (term.c, term.cd, term.d) == (c, c + d, d)


def check_terms(refs, got, Tn, Tm, B):
    for (re, im), words in zip(refs, got, strict=True):
        for t, w in enumerate(words):
            for p in range(Tm // B):
                for q in range(Tn // B):
                    for k in range(B // 2):
                        term = w[p][q][k]
                        c, d = re[t, p, q, k], im[t, p, q, k]
                        assert (term.c, term.cd, term.d) == (c, c + d, d), (t, p, q, k)


@pytest.mark.parametrize(("Tn", "Tm", "B", "taps", "split"), [
    (16, 16, 8, 3, True), (32, 32, 8, 1, True), (16, 32, 16, 2, True), (16, 16, 8, 3, False)])
def test_split_tiles_load_on_two_streams_at_once(Tn, Tm, B, taps, split):
    """A splittable buffer: with ``split`` the first half of every tap's beats on ``i`` and
    the second on ``i1``, both streams and the reader stalling at random, or (``split`` low)
    the whole tile on ``i``: the same terms as the one-stream buffer."""
    rng = np.random.default_rng(taps * Tm + Tn + split)
    buf = WeightBuffer(Tn, Tm, B=B, taps=taps, splittable=True)
    bpt = buf.beats_per_tap
    refs, tiles = random_tiles(rng, Tn, Tm, B, taps)
    if split:
        lo = [[b for k, b in enumerate(t) if k % bpt < bpt // 2] for t in tiles]
        hi = [[b for k, b in enumerate(t) if k % bpt >= bpt // 2] for t in tiles]
        loaders = [feeder(buf.i, lo, rng, 0.3), feeder(buf.i1, hi, rng, 0.3)]
    else:
        loaders = [feeder(buf.i, tiles, rng, 0.3)]

    async def hold(ctx):
        ctx.set(buf.split, int(split))

    got = run(buf, tiles, taps, loaders=[hold, *loaders], rng=rng, stall=0.3)
    check_terms(refs, got, Tn, Tm, B)


@pytest.mark.parametrize(("Tn", "Tm", "B", "taps", "mode"), [
    (16, 32, 8, 3, "quarter"), (32, 32, 8, 1, "quarter"), (32, 32, 16, 2, "quarter"),
    (16, 32, 8, 3, "split"), (32, 32, 8, 2, "whole")])
def test_quarter_tiles_load_on_four_streams_at_once(Tn, Tm, B, taps, mode):
    """A quarterable buffer: with ``quarter`` (and ``split``) quarter ``k`` of every tap's
    beats (:func:`~fcircnn.arch.ports.weight_quarters`) on ``i``, ``i2``, ``i1``, ``i3`` for
    ``k`` = 0..3, every stream and the reader stalling at random; with ``split`` alone the two
    halves on ``i`` and ``i1``; with neither the whole tile on ``i``: the same terms as the
    one-stream buffer, tile after tile."""
    from fcircnn.arch.ports import weight_halves, weight_quarters

    rng = np.random.default_rng(taps * Tm + Tn + B + len(mode))
    buf = WeightBuffer(Tn, Tm, B=B, taps=taps, splittable=True, quarterable=True)
    bpt = buf.beats_per_tap
    refs, tiles = random_tiles(rng, Tn, Tm, B, taps)

    def part(beats):
        return [[b for k, b in enumerate(t) if k % bpt in beats] for t in tiles]

    if mode == "quarter":
        q = weight_quarters(bpt)
        streams = ((buf.i, q[0]), (buf.i2, q[1]), (buf.i1, q[2]), (buf.i3, q[3]))
    elif mode == "split":
        streams = tuple(zip((buf.i, buf.i1), weight_halves(bpt), strict=True))
    else:
        streams = ((buf.i, range(bpt)),)
    loaders = [feeder(port, part(beats), rng, 0.3) for port, beats in streams]

    async def hold(ctx):
        ctx.set(buf.split, int(mode != "whole"))
        ctx.set(buf.quarter, int(mode == "quarter"))

    got = run(buf, tiles, taps, loaders=[hold, *loaders], rng=rng, stall=0.3)
    check_terms(refs, got, Tn, Tm, B)


def loads_in_one_cycle_per_beat(buf, streams, **modes):
    """Every stream of ``streams`` valid from the first cycle with its part of a one-tap tile
    (``buf``'s modes ``modes`` held): each takes a beat every cycle and the tile commits after
    its part's beats. Returns the cycles the load took."""
    part = buf.beats_per_tap // len(streams)
    cycles = []

    async def bench(ctx):
        for name, value in modes.items():
            ctx.set(getattr(buf, name), value)
        for k in range(part):
            for st in streams:
                ctx.set(st.valid, 1)
                ctx.set(st.payload, {"data": k, "last": int(k == part - 1)})
            assert all(ctx.get(st.ready) for st in streams)
            await ctx.tick()
            cycles.append(k)
        for st in streams:
            ctx.set(st.valid, 0)
        await ctx.tick()
        assert ctx.get(buf.r_valid) and not ctx.get(buf.conflict)

    sim = Simulator(buf)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return len(cycles)


def test_quarters_take_a_beat_each_per_cycle():
    """All four streams always valid: a tile of ``4 * q`` beats loads in ``q`` cycles."""
    buf = WeightBuffer(32, 32, B=8, taps=1, splittable=True, quarterable=True)
    cycles = loads_in_one_cycle_per_beat(buf, (buf.i, buf.i1, buf.i2, buf.i3), split=1,
                                         quarter=1)
    assert cycles == buf.beats_per_tap // 4


def test_split_halves_take_a_beat_each_per_cycle():
    """Both streams always valid: a split tile of ``2 * h`` beats loads in ``h`` cycles."""
    buf = WeightBuffer(32, 32, B=8, taps=1, splittable=True)
    assert loads_in_one_cycle_per_beat(buf, (buf.i, buf.i1), split=1) == buf.beats_per_tap // 2


def test_sizes_from_config():
    acc = load_accelerator(builtin_path("c3d_zcu102"))
    buf = WeightBuffer.from_config(acc, acc.cores[0])
    assert (buf.pairs, buf.taps, buf.word_layout.size) == (32, 27, 4 * 27)
    r3d = load_accelerator(builtin_path("r3d18_zcu102"))
    pointwise = WeightBuffer.from_config(r3d, r3d.cores[0])
    spatial = WeightBuffer.from_config(r3d, r3d.cores[1])
    # the pointwise core also runs the global average pool (a 1x4x4 kernel over its map); the
    # spatial core's conv1 runs folded (1x7x7)
    assert (pointwise.taps, spatial.taps) == (16, 7 * 7)
    for b in (buf, pointwise, spatial):
        Fragment.get(b, None)  # elaborates


@pytest.mark.parametrize(("kwargs", "exc", "match"), [
    ({"Tn": 12}, ValueError, "Tn must be a multiple of B"),
    ({"Tm": 0}, ValueError, "Tm must be in"),
    ({"taps": 1.5}, TypeError, "taps must be an integer"),
    ({"B": 2}, ValueError, "B must be one of"),
    ({"Tn": 4, "Tm": 8, "B": 4}, ValueError, r"multiple of 16/B = 4"),
    ({"Tn": 8, "splittable": True}, ValueError, "even number of beats per tap, not 1"),
    ({"splittable": 1}, TypeError, "splittable must be a bool"),
    ({"Tn": 32, "quarterable": True}, ValueError, "quarterable needs splittable"),
    ({"splittable": True, "quarterable": True}, ValueError,
     "multiple of four beats per tap, not 2"),
    ({"quarterable": 0}, TypeError, "quarterable must be a bool"),
])
def test_bad_parameters(kwargs, exc, match):
    args = {"Tn": 16, "Tm": 16, "B": 8, "taps": 3} | kwargs
    with pytest.raises(exc, match=match):
        WeightBuffer(args.pop("Tn"), args.pop("Tm"), **args)


@pytest.mark.slow
def test_c3d_buffer_maps_to_block_ram():
    """The paper's C3D configuration: every bank in RAMB36E2/RAMB18E2, none in LUTs or FFs."""
    from fcircnn.gen.synth import synthesize

    acc = load_accelerator(builtin_path("c3d_zcu102"))
    report = synthesize(WeightBuffer.from_config(acc, acc.cores[0]), "buffer_weight")
    lutram, bram36 = report.lutram, report.bram36
    print(f"C3D weight buffer: {report.bram}, {bram36:g} BRAM36-equivalent, "
          f"{report.lut} LUT, {report.ff} FF")
    assert not lutram, lutram
    assert report.ff < 100  # the words are not in flip-flops
    # 32 block pairs, 108 bit (4 slots x 3 INT9) x (2 x 27) words: 3 RAMB18 (512 x 36) each.
    assert report.bram == {"RAMB18E2": 96, "RAMB36E2": 0}
