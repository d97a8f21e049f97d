"""The post-processing pipeline (:mod:`fcircnn.hw.post_chain`) against ``post_process``."""

import numpy as np
import pytest
from conftest import unit_simulators

from fcircnn.hw.post_chain import DSP_PER_LANE, LATENCY_NO_POOL, PostChain
from fcircnn.models import spectral
from fcircnn.sim.runner import require_simulator, run_cocotb
from fcircnn.sim.tb_post_util import (
    beats_to_map,
    cbn_cases,
    chain_config,
    from_beats,
    map_to_beats,
    ref_chain,
    run_amaranth,
    to_beats,
)

FIELDS = ("acc", "mult", "bias", "res", "res_mult", "shift")
MAX_SIZE = (4, 6, 6)


def make_case(seed, lanes, size):
    rng = np.random.default_rng(seed)
    re, im = cbn_cases(rng, (lanes, *size)), cbn_cases(rng, (lanes, *size))
    return {name: (re[name], im[name]) for name in FIELDS}


def rtl_chain(case, cfg, n_out, seed=0, lanes=None, max_groups=1, build=None, **kw):
    lanes = lanes or case["acc"][0].shape[0]
    beats = to_beats({name: map_to_beats(pair, lanes) for name, pair in case.items()})
    dut = PostChain(lanes, MAX_SIZE, max_groups, **(build or {}))
    out, cycles = run_amaranth(dut, cfg, beats, n_out, seed=seed, **kw)
    return from_beats(out), cycles


@pytest.mark.parametrize(("residual", "relu", "pool"), [
    (True, True, ((3, 3, 3), (2, 2, 2), (1, 1, 1))),
    (False, False, None),
    (True, False, ((1, 2, 2), (1, 2, 2), (0, 0, 0))),
    (False, True, ((2, 2, 2), (2, 2, 2), (0, 1, 1))),
])
def test_chain_matches_post_process(residual, relu, pool):
    size = (3, 5, 5)
    case = make_case(int(residual) + 2 * int(relu), lanes=2, size=size)
    ref = tuple(spectral.post_process(
        case["acc"][k], case["mult"][k], case["bias"][k], case["shift"][k],
        res=case["res"][k] if residual else None,
        res_mult=case["res_mult"][k] if residual else None,
        relu=relu, pool=pool) for k in range(2))
    cfg = chain_config(size, residual=residual, relu=relu, pool=pool)
    got, _ = rtl_chain(case, cfg, ref[0][0].size, seed=3)
    got = beats_to_map(got, ref[0].shape[1:])
    for k in range(2):
        np.testing.assert_array_equal(got[k], ref[k])


def test_chain_interleaved_groups():
    # Three slot groups of two lanes per voxel, voxel major (the PE array's order).
    size, groups, pool = (2, 5, 4), 3, ((3, 3, 3), (2, 2, 2), (1, 1, 1))
    case = make_case(21, lanes=2 * groups, size=size)
    cfg = chain_config(size, residual=True, relu=True, pool=pool, groups=groups)
    ref = ref_chain(case, cfg)
    got, _ = rtl_chain(case, cfg, ref[0].size // 2, lanes=2, max_groups=4)
    got = beats_to_map(got, ref[0].shape[1:])
    for k in range(2):
        np.testing.assert_array_equal(got[k], ref[k])


def test_chain_bypass_cbn_and_quantize():
    # CBN and quantizer bypassed: y = clip(acc, -127, 127), then ReLU and a pool.
    size = (2, 4, 5)
    case = make_case(9, lanes=1, size=size)
    case["acc"] = tuple(np.clip(a, -300, 300) for a in case["acc"])
    cfg = chain_config(size, residual=True, relu=True, pool=((1, 2, 2), (1, 2, 2), (0, 0, 0)),
                       bypass_cbn=True, bypass_quantize=True)
    ref = ref_chain(case, cfg)
    got, _ = rtl_chain(case, cfg, ref[0][0].size)
    got = beats_to_map(got, ref[0].shape[1:])
    for k in range(2):
        np.testing.assert_array_equal(got[k], ref[k])


def test_chain_rate_and_latency():
    size = (1, 4, 6)
    case = make_case(4, lanes=1, size=size)
    cfg = chain_config(size, residual=True, relu=False, pool=None)
    _, cycles = rtl_chain(case, cfg, 24, p_idle=0, p_stall=0)
    assert cycles == 24 + LATENCY_NO_POOL


@pytest.mark.parametrize("B", [4, 8, 16])
@pytest.mark.parametrize(("stage", "pool"), [
    ("rfft", ((1, 2, 2), (1, 2, 2), (0, 0, 0))),   # a dense stem: ReLU, pool, rfft
    ("rfft", None),
    ("lane0", None),                                # a dense head on an irfft's slots
])
def test_chain_with_time_domain_stages(B, stage, pool):
    size, lanes = (2, 4, 4), 8
    case = make_case(B + len(stage), lanes=lanes, size=size)
    rng = np.random.default_rng(B)
    if stage == "lane0":  # lane-0 sums that fit int32, t = u * mult + bias int48
        case["acc"] = tuple(a // B for a in case["acc"])
        case["bias"] = tuple(rng.integers(-(2**45), 2**45, a.shape) for a in case["bias"])
    rfft = ([int(v) for v in rng.integers(1, 32768, 16)], int(rng.integers(10, 30)))
    cfg = chain_config(size, residual=False, relu=True, pool=pool, lane0=stage == "lane0",
                       rfft=rfft if stage == "rfft" else None)
    ref = ref_chain(case, cfg, B)
    build = {"B": B, "lane0": stage == "lane0", "rfft": stage == "rfft"}
    got, _ = rtl_chain(case, cfg, ref[0][0].size, seed=B, build=build)
    got = beats_to_map(got, ref[0].shape[1:])
    for k in range(2):
        np.testing.assert_array_equal(got[k], ref[k])


def test_chain_built_with_both_stages_runs_a_plain_layer():
    # The lane-0 and rfft stages built but off: a block-circulant layer's post-processing.
    size = (3, 5, 5)
    case = make_case(31, lanes=8, size=size)
    pool = ((2, 2, 2), (2, 2, 2), (0, 1, 1))
    cfg = chain_config(size, residual=True, relu=True, pool=pool)
    ref = ref_chain(case, cfg)
    got, _ = rtl_chain(case, cfg, ref[0][0].size, seed=4,
                       build={"B": 8, "lane0": True, "rfft": True})
    got = beats_to_map(got, ref[0].shape[1:])
    for k in range(2):
        np.testing.assert_array_equal(got[k], ref[k])


def test_chain_latency_with_time_domain_stages():
    size = (1, 4, 6)
    case = make_case(4, lanes=8, size=size)
    cfg = chain_config(size, residual=True, relu=False, pool=None)
    dut = PostChain(8, MAX_SIZE, lane0=True, rfft=True)
    assert dut.latency_no_pool == LATENCY_NO_POOL + 1 + 4
    beats = to_beats({name: map_to_beats(pair, 8) for name, pair in case.items()})
    _, cycles = run_amaranth(dut, cfg, beats, 24, p_idle=0, p_stall=0)
    assert cycles == 24 + dut.latency_no_pool


@pytest.mark.parametrize(("kwargs", "exc"), [
    ({"lanes": 0}, ValueError), ({"max_size": 7}, TypeError), ({"max_size": (1, 2, 0)}, ValueError),
    ({"max_groups": 300}, ValueError), ({"lanes": 2, "B": 8, "rfft": True}, ValueError),
    ({"rfft": 1}, TypeError),
])
def test_bad_parameters(kwargs, exc):
    with pytest.raises(exc, match=r"lanes|max_size|max_groups|rfft"):
        PostChain(**kwargs)


@pytest.mark.parametrize("simulator", unit_simulators())
def test_chain_cocotb(simulator):
    require_simulator(simulator)
    run_cocotb(PostChain(2, MAX_SIZE, 2), "post_chain", "fcircnn.sim.tb_post_chain", simulator,
               parameters={"lanes": 2, "max_size": list(MAX_SIZE), "max_groups": 2, "seed": 13})


@pytest.mark.parametrize("lanes", [
    1, pytest.param(8, marks=pytest.mark.slow, id="8-slow"),
])
def test_chain_synthesis_dsp_count(tmp_path, lanes):
    # The post-units add exactly DSP_PER_LANE (6) DSP48E2 per lane to the PE array's, all of
    # them multiplies (none in LUTs); the line buffers of this size fit in LUT RAM.
    from fcircnn.gen.synth import synthesize

    report = synthesize(PostChain(lanes, (2, 7, 7)), "post_chain", workdir=tmp_path)
    print(report.summary())
    report.check_multipliers(expected_dsp=lanes * DSP_PER_LANE)
    assert report.dsp == 6 * lanes
    assert report.bram == {"RAMB18E2": 0, "RAMB36E2": 0}


def test_chain_ready_is_registered():
    # Neither i.ready (the input skid buffer) nor the shared stage enable of CBN, quantizer and
    # CReLU (CBN's i.ready, cut off by the skid buffer before the pool) follows o.ready within a
    # cycle, whether the chain is empty, filling or stalled (pool bypassed: its ready is o.ready).
    from amaranth.sim import Simulator

    from fcircnn.hw.post_cbn import cbn_input_layout
    from fcircnn.sim.runner import pack

    lanes = 1
    case = make_case(5, lanes=lanes, size=(1, 3, 6))
    beats = to_beats({name: map_to_beats(pair, lanes) for name, pair in case.items()})
    cfg = chain_config((1, 3, 6), residual=True, relu=True, pool=None)
    dut = PostChain(lanes, MAX_SIZE)
    seen = set()

    async def testbench(ctx):
        ctx.set(dut.cfg.as_value(), pack(dut.cfg.shape(), cfg))
        ctx.set(dut.i.valid, 1)
        for cycle, beat in enumerate(beats):
            ctx.set(dut.i.payload.as_value(), pack(cbn_input_layout(lanes), beat))
            ready = cycle >= 12
            ctx.set(dut.o.ready, ready)
            i_ready, enable = ctx.get(dut.i.ready), ctx.get(dut._cbn.i.ready)
            seen.add((i_ready, enable))
            ctx.set(dut.o.ready, not ready)
            assert ctx.get(dut.i.ready) == i_ready, "i.ready follows o.ready"
            assert ctx.get(dut._cbn.i.ready) == enable, "the stage enable follows o.ready"
            ctx.set(dut.o.ready, ready)
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(testbench)
    sim.run()
    assert {i_ready for i_ready, _ in seen} == {0, 1}
    assert {enable for _, enable in seen} == {0, 1}
