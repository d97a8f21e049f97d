"""CMaxPool post-unit (:mod:`fcircnn.hw.post_maxpool`) against the golden ``cmaxpool``."""

import numpy as np
import pytest
from conftest import unit_simulators
from hypothesis import given, settings
from hypothesis import strategies as st

from fcircnn.hw.post_maxpool import LATENCY, CMaxPool, maxpool_config
from fcircnn.sim.runner import require_simulator, run_cocotb
from fcircnn.sim.tb_post_util import (
    beats_to_map,
    from_beats,
    map_to_beats,
    ref_maxpool,
    run_amaranth,
    slot_cases,
    to_beats,
)

# (size, window, stride, padding), sizes (D, H, W).
CASES = [
    pytest.param((3, 5, 7), (3, 3, 3), (2, 2, 2), (1, 1, 1), id="resnet-3s2p1"),
    pytest.param((4, 6, 6), (3, 3, 3), (2, 2, 2), (1, 1, 1), id="resnet-even"),
    pytest.param((3, 7, 5), (1, 2, 2), (1, 2, 2), (0, 0, 0), id="c3d-pool1"),
    pytest.param((2, 7, 7), (2, 2, 2), (2, 2, 2), (0, 1, 1), id="c3d-pool5"),
    pytest.param((3, 5, 5), (2, 2, 2), (2, 2, 2), (0, 0, 0), id="c3d-pool2-odd"),
    pytest.param((3, 4, 5), (3, 3, 3), (1, 1, 1), (2, 2, 2), id="3s1p2"),
    pytest.param((3, 4, 5), (3, 2, 3), (1, 1, 1), (1, 1, 1), id="same"),
    pytest.param((4, 5, 7), (1, 1, 1), (3, 2, 3), (0, 0, 0), id="skip"),
    pytest.param((4, 4, 7), (3, 3, 3), (3, 3, 3), (0, 0, 0), id="3s3-unused-tail"),
    pytest.param((2, 3, 4), (2, 3, 1), (3, 1, 2), (1, 2, 0), id="mixed"),
    pytest.param((1, 1, 2), (3, 3, 3), (2, 1, 3), (1, 1, 2), id="tiny"),
    pytest.param((2, 3, 3), (1, 1, 1), (1, 1, 1), (0, 0, 0), id="identity"),
    # The largest map with the most outputs per axis (n + 2): fills the line and plane buffers.
    pytest.param((4, 7, 7), (3, 3, 3), (1, 1, 1), (2, 2, 2), id="max-size-3s1p2"),
]

MAX_SIZE = (4, 7, 7)


def make_maps(seed, lanes, size, count=1):
    rng = np.random.default_rng(seed)
    return [(slot_cases(rng, (lanes, *size)), slot_cases(rng, (lanes, *size)))
            for _ in range(count)]


def config(size, window, stride, padding, bypass=0):
    return maxpool_config(MAX_SIZE, size, window, stride, padding, bypass=bypass)


def rtl_maxpool(maps, cfg, n_out, seed=0, max_size=MAX_SIZE, **kw):
    """Stream the maps back to back; returns the output beats as ``(re, im)`` of
    ``(n_out, lanes)``."""
    lanes = maps[0][0].shape[0]
    beats = []
    for pair in maps:
        beats += to_beats({None: map_to_beats(pair)})
    out, cycles = run_amaranth(CMaxPool(lanes, max_size), cfg, beats, n_out, seed=seed, **kw)
    return from_beats(out), cycles


@pytest.mark.parametrize(("size", "window", "stride", "padding"), CASES)
def test_maxpool_matches_golden(size, window, stride, padding):
    maps = make_maps(sum(size) + sum(window), lanes=2, size=size, count=2)
    refs = [ref_maxpool(pair, window, stride, padding) for pair in maps]
    out_shape = refs[0][0].shape[1:]
    n = int(np.prod(out_shape))
    got, _ = rtl_maxpool(maps, config(size, window, stride, padding), 2 * n, seed=sum(size))
    for j, ref in enumerate(refs):
        part = tuple(g[j * n:(j + 1) * n] for g in got)
        got_map = beats_to_map(part, out_shape)
        for k in range(2):
            np.testing.assert_array_equal(got_map[k], ref[k])


def test_maxpool_random_configs():
    rng = np.random.default_rng(123)
    for trial in range(6):
        window = tuple(int(v) for v in rng.integers(1, 4, size=3))
        stride = tuple(int(v) for v in rng.integers(1, 4, size=3))
        padding = tuple(int(rng.integers(0, k)) for k in window)
        size = tuple(int(rng.integers(max(1, k - 2 * p), n + 1))
                     for k, p, n in zip(window, padding, MAX_SIZE, strict=True))
        maps = make_maps(trial, lanes=1, size=size)
        ref = ref_maxpool(maps[0], window, stride, padding)
        got, _ = rtl_maxpool(maps, config(size, window, stride, padding),
                             ref[0][0].size, seed=trial)
        got_map = beats_to_map(got, ref[0].shape[1:])
        for k in range(2):
            np.testing.assert_array_equal(got_map[k], ref[k], err_msg=f"{size=} {window=} "
                                          f"{stride=} {padding=}")


@pytest.mark.parametrize(("groups", "size", "window", "stride", "padding"), [
    (3, (3, 5, 4), (3, 3, 3), (2, 2, 2), (1, 1, 1)),
    (2, (2, 5, 5), (2, 2, 2), (2, 2, 2), (0, 1, 1)),
    (4, (2, 3, 4), (3, 2, 3), (1, 1, 1), (2, 1, 1)),
    (1, (2, 4, 5), (1, 2, 2), (1, 2, 2), (0, 0, 0)),
])
def test_maxpool_interleaved_groups(groups, size, window, stride, padding):
    # Voxel-major order with several slot groups per voxel (as the PE array emits them).
    lanes, max_groups = 2, 4
    rng = np.random.default_rng(groups)
    maps = [(slot_cases(rng, (groups * lanes, *size)), slot_cases(rng, (groups * lanes, *size)))
            for _ in range(2)]
    refs = [ref_maxpool(pair, window, stride, padding) for pair in maps]
    out_shape = refs[0][0].shape[1:]
    n = int(np.prod(out_shape)) * groups
    beats = [b for pair in maps for b in to_beats({None: map_to_beats(pair, lanes)})]
    cfg = maxpool_config(MAX_SIZE, size, window, stride, padding, groups=groups,
                         max_groups=max_groups)
    out, _ = run_amaranth(CMaxPool(lanes, MAX_SIZE, max_groups), cfg, beats, 2 * n, seed=groups)
    got = from_beats(out)
    for j, ref in enumerate(refs):
        got_map = beats_to_map(tuple(g[j * n:(j + 1) * n] for g in got), out_shape)
        for k in range(2):
            np.testing.assert_array_equal(got_map[k], ref[k])


@st.composite
def pool_configs(draw):
    window = tuple(draw(st.integers(1, 3)) for _ in range(3))
    stride = tuple(draw(st.integers(1, 3)) for _ in range(3))
    padding = tuple(draw(st.integers(0, k - 1)) for k in window)
    size = tuple(draw(st.integers(max(1, k - 2 * p), n))
                 for k, p, n in zip(window, padding, MAX_SIZE, strict=True))
    return size, window, stride, padding


@settings(max_examples=50, deadline=None, derandomize=True)
@given(pool_configs(), st.integers(0, 2**16))
def test_maxpool_property(cfg, seed):
    size, window, stride, padding = cfg
    maps = make_maps(seed, lanes=1, size=size)
    ref = ref_maxpool(maps[0], window, stride, padding)
    got, _ = rtl_maxpool(maps, config(size, window, stride, padding), ref[0][0].size, seed=seed)
    got_map = beats_to_map(got, ref[0].shape[1:])
    for k in range(2):
        np.testing.assert_array_equal(got_map[k], ref[k])


def test_maxpool_minus_128_input():
    # -128 (outside the int8 slot contract) still gives the golden max.
    size = (2, 3, 3)
    maps = [(np.full((1, *size), -128), np.full((1, *size), -128))]
    maps[0][0][0, 1, 2, 2] = -5
    ref = ref_maxpool(maps[0], 3, 2, 1)
    got, _ = rtl_maxpool(maps, config(size, (3, 3, 3), (2, 2, 2), (1, 1, 1)), ref[0].size)
    got_map = beats_to_map(got, ref[0].shape[1:])
    for k in range(2):
        np.testing.assert_array_equal(got_map[k], ref[k])


def test_maxpool_bypass():
    size = (2, 3, 5)
    maps = make_maps(5, lanes=3, size=size)
    got, _ = rtl_maxpool(maps, config(size, (3, 3, 3), (2, 2, 2), (1, 1, 1), bypass=1), 30)
    for k in range(2):
        np.testing.assert_array_equal(got[k], map_to_beats(maps[0])[k])


def test_maxpool_rate_without_padding():
    # 1x1x1 window: one output per input, initiation interval 1, latency LATENCY (4).
    size = (2, 4, 5)
    maps = make_maps(6, lanes=1, size=size)
    _, cycles = rtl_maxpool(maps, config(size, (1, 1, 1), (1, 1, 1), (0, 0, 0)), 40,
                            p_idle=0, p_stall=0)
    assert LATENCY == 4
    assert cycles == 40 + LATENCY


@pytest.mark.parametrize(("kwargs", "exc", "match"), [
    ({"lanes": 0}, ValueError, r"lanes must be in 1\.\.64, not 0"),
    ({"lanes": "2"}, TypeError, "lanes must be an integer"),
    ({"max_size": (4, 4)}, TypeError, "max_size must be a tuple of three integers"),
    ({"max_size": (4, 4, 4.0)}, TypeError, "max_size must be a tuple of three integers"),
    ({"max_size": (0, 4, 4)}, ValueError, r"max_size must have every axis in 1\.\.1024"),
    ({"max_size": (4, 4, 2000)}, ValueError, r"max_size must have every axis in 1\.\.1024"),
    ({"max_groups": 0}, ValueError, r"max_groups must be in 1\.\.256, not 0"),
    ({"max_groups": 2.5}, TypeError, "max_groups must be an integer"),
    ({"carry": (4, 4)}, TypeError, r"carry must be three integers \(d, h, w\)"),
    ({"carry": (4, 0, 4)}, ValueError, r"carry must be all 0 or all positive, not \(4, 0, 4\)"),
    ({"carry": (-1, -1, -1)}, ValueError, "carry must be all 0 or all positive"),
])
def test_bad_parameters(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        CMaxPool(**kwargs)


def test_config_helper():
    assert maxpool_config((2, 7, 7), (2, 7, 7), (2, 2, 2), padding=(0, 1, 1)) == {
        "bypass": 0, "groups": 1, "size": [2, 7, 7], "window": [2, 2, 2], "stride": [2, 2, 2],
        "padding": [0, 1, 1]}


@pytest.mark.parametrize(("args", "match"), [
    (((4, 4, 4), (0, 1, 1)), r"pool window must be in 1\.\.3"),
    (((4, 4, 4), (4, 1, 1)), r"pool window must be in 1\.\.3"),
    (((4, 4, 4), (2, 2, 2), (2, 0, 2)), r"pool stride must be in 1\.\.3"),
    (((4, 4, 4), (2, 2, 2), (2, 2, 2), (0, 2, 0)), r"pool padding must be in 0\.\.window-1"),
    (((4, 9, 4), (2, 2, 2)), r"pool size must be in 1\.\.max_size"),
    (((4, 0, 4), (1, 1, 1)), r"pool size must be in 1\.\.max_size"),
    (((1, 4, 4), (3, 3, 3)), "must cover the window"),
    (((4, 4), (3, 3, 3)), "pool size must be three integers"),
])
def test_bad_config(args, match):
    with pytest.raises(ValueError, match=match):
        maxpool_config((4, 8, 8), *args)


def test_bad_config_groups():
    with pytest.raises(ValueError, match=r"pool groups must be in 1\.\.max_groups \(2\), not 3"):
        maxpool_config((4, 8, 8), (4, 4, 4), groups=3, max_groups=2)


@pytest.mark.parametrize("simulator", unit_simulators())
def test_maxpool_cocotb(simulator):
    require_simulator(simulator)
    run_cocotb(CMaxPool(2, (4, 8, 8), 2), "post_maxpool", "fcircnn.sim.tb_post_maxpool",
               simulator, parameters={"lanes": 2, "max_size": [4, 8, 8], "max_groups": 2,
                                      "seed": 11})


# ------------------------------------------------------------------------------------------
# Carried windows: the tiles of a larger map, each pooled as its own map
# ------------------------------------------------------------------------------------------

def _tiles(shape, tile):
    """The tiles of ``shape`` in the drain's walk order (depth, then rows, then columns):
    ``(index, origin, extent)`` per tile, ``index = (td, th, tw)``."""
    axes = [[(i, lo, min(t, n - lo)) for i, lo in enumerate(range(0, n, t))]
            for n, t in zip(shape, tile, strict=True)]
    for d in axes[0]:
        for h in axes[1]:
            for w in axes[2]:
                yield tuple(zip(d, h, w, strict=True))


def rtl_carried_pool(maps, tile, window, groups, carry, *, seed, p_idle=0.3, p_stall=0.3):
    """Stream ``maps`` (``(re, im)`` of ``(groups*lanes, D, H, W)``) tile by tile through a
    :class:`CMaxPool` with carry memories laid out by ``carry``
    (:class:`~fcircnn.arch.geometry.PoolCarry`), each tile's map configured, its carried axes
    used past the map's low edge and saved, with random idle input and output stall cycles;
    a tile starts once the previous one has left. Returns the pooled map ``(re, im)``."""
    import random

    from amaranth.sim import Simulator

    from fcircnn.sim.runner import pack, unpack

    rng = random.Random(seed)
    lanes = maps[0].shape[0] // groups
    shape = maps[0].shape[1:]
    stride = (2, 2, 2)
    padding = tuple(int(k == 3) for k in window)
    out_shape = tuple(n // 2 for n in shape)
    got = [np.zeros((groups * lanes, *out_shape), np.int64) for _ in range(2)]
    max_size = tuple(max(t, 1) for t in tile)
    dut = CMaxPool(lanes, max_size, groups, carry.depth)
    carried = [k == 3 for k in window]

    async def bench(ctx):
        for (td, th, tw), origin, ext in _tiles(shape, tile):
            cfg = maxpool_config(max_size, ext, window, stride, padding, groups=groups,
                                 max_groups=groups)
            ctx.set(dut.cfg.as_value(), pack(dut.cfg.shape(), cfg))
            use = [int(c and i > 0) for c, i in zip(carried, (td, th, tw), strict=True)]
            base = [carry.base(a, th, tw) for a in range(3)]
            ctrl = {"restart": 1, "use": use, "save": [int(c) for c in carried], "base": base}
            ctx.set(dut.carry.as_value(), pack(dut.carry.shape(), ctrl))
            await ctx.tick()
            ctx.set(dut.carry.restart, 0)
            box = tuple(slice(o, o + e) for o, e in zip(origin, ext, strict=True))
            beats = to_beats({None: map_to_beats(tuple(p[(slice(None), *box)] for p in maps),
                                                 lanes)})
            pooled = tuple(e // 2 for e in ext)
            n_out = int(np.prod(pooled)) * groups
            out, sent = [], 0
            while len(out) < n_out:
                if sent < len(beats) and rng.random() >= p_idle:
                    ctx.set(dut.i.payload.as_value(), pack(dut.i.payload.shape(), beats[sent]))
                    ctx.set(dut.i.valid, 1)
                else:
                    ctx.set(dut.i.valid, 0)
                ready = rng.random() >= p_stall
                ctx.set(dut.o.ready, ready)
                _, _, i_ready, o_valid, payload = await ctx.tick().sample(
                    dut.i.ready, dut.o.valid, dut.o.payload.as_value())
                if ctx.get(dut.i.valid) and i_ready:
                    sent += 1
                if ready and o_valid:
                    out.append(unpack(dut.o.payload.shape(), payload))
            ctx.set(dut.i.valid, 0)
            assert sent == len(beats), f"tile {(td, th, tw)}: {sent} of {len(beats)} beats in"
            pair = beats_to_map(from_beats(out), pooled)
            lo = tuple(o // 2 for o in origin)
            for k in range(2):
                got[k][(slice(None), *(slice(a, a + p) for a, p in zip(lo, pooled,
                                                                        strict=True)))] = pair[k]

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return tuple(got)


def _carry_of(tile, groups, shape):
    """The carry layout of a core with ``tile`` and ``groups`` slot groups per voxel for maps
    of ``shape``."""
    from types import SimpleNamespace

    from fcircnn.arch.geometry import EngineGeometry, pool_carry

    core = SimpleNamespace(td=tile[0], tr=tile[1], tc=tile[2], tm=16 * groups)
    geo = EngineGeometry((1, 1, 1), (1, 1, 1), 1, (1, 1, 1), False, True, shape[1:])
    return pool_carry(core, geo)


@pytest.mark.parametrize(("shape", "tile", "window", "groups"), [
    pytest.param((8, 12, 12), (4, 4, 4), (3, 3, 3), 1, id="resnet-3x3x3-tiles"),
    pytest.param((6, 10, 12), (4, 4, 6), (3, 3, 3), 2, id="edge-tiles-two-groups"),
    pytest.param((4, 8, 8), (2, 4, 4), (2, 3, 3), 2, id="depth-2-wide"),
    pytest.param((4, 8, 12), (4, 8, 4), (3, 2, 3), 1, id="rows-2-wide"),
    pytest.param((4, 4, 4), (4, 4, 4), (3, 3, 3), 3, id="one-tile"),
])
def test_carried_windows_match_the_whole_map(shape, tile, window, groups):
    # Every tile pooled as its own map, its first window's first voxel carried from the tile
    # before along each 3-wide axis: the whole map's pool, bit for bit, under back-pressure.
    lanes = 2
    rng = np.random.default_rng(sum(shape) + groups)
    maps = (slot_cases(rng, (groups * lanes, *shape)), slot_cases(rng, (groups * lanes, *shape)))
    carry = _carry_of(tile, groups, shape)  # a word per slot group, whatever its lanes
    got = rtl_carried_pool(maps, tile, window, groups, carry, seed=groups)
    ref = ref_maxpool(maps, window, (2, 2, 2), tuple(int(k == 3) for k in window))
    for k in range(2):
        np.testing.assert_array_equal(got[k], ref[k])
