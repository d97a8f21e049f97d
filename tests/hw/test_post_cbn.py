"""CBN + residual post-unit (:mod:`fcircnn.hw.post_cbn`) against the golden ``cbn``."""

import numpy as np
import pytest
from conftest import unit_simulators

from fcircnn.hw.post_cbn import DSP_PER_LANE, CBNResidual, cbn_input_layout, dsp_per_lane
from fcircnn.sim.runner import require_simulator, run_cocotb
from fcircnn.sim.tb_post_util import cbn_cases, from_beats, ref_cbn, run_amaranth, to_beats

FIELDS = ("acc", "mult", "bias", "res", "res_mult", "shift")


def make_case(seed, beats, lanes, acc_width=32):
    rng = np.random.default_rng(seed)
    re, im = cbn_cases(rng, (beats, lanes), acc_width), cbn_cases(rng, (beats, lanes), acc_width)
    return {name: (re[name], im[name]) for name in FIELDS}


def rtl_cbn(case, cfg, seed, acc_width=32, **kw):
    lanes = case["acc"][0].shape[1]
    dut = CBNResidual(lanes, acc_width)
    out, _ = run_amaranth(dut, cfg, to_beats(case), len(case["acc"][0]), seed=seed, **kw)
    return from_beats(out, "t"), from_beats(out, "shift")


@pytest.mark.parametrize(("bypass", "residual"), [(0, 1), (0, 0), (1, 1)])
def test_cbn_matches_golden(bypass, residual):
    case = make_case(seed=10 + 2 * bypass + residual, beats=40, lanes=3)
    t, shift = rtl_cbn(case, {"bypass": bypass, "residual": residual}, seed=bypass)
    ref = ref_cbn(case, bypass=bool(bypass), residual=bool(residual))
    for k in range(2):
        np.testing.assert_array_equal(t[k], ref[k])
        np.testing.assert_array_equal(shift[k], case["shift"][k])


@pytest.mark.parametrize("acc_width", [27, 20, 2])
@pytest.mark.parametrize(("bypass", "residual"), [(0, 1), (0, 0)])
def test_cbn_narrow_matches_golden(acc_width, bypass, residual):
    # Built for narrower accumulators, the multiply takes one DSP per part; every accumulator
    # within the width (the extremes +-(2**(w-1) - 1) included) gives the golden t.
    case = make_case(seed=acc_width + bypass, beats=40, lanes=3, acc_width=acc_width)
    assert np.abs(case["acc"][0]).max() == 2 ** (acc_width - 1) - 1
    t, _ = rtl_cbn(case, {"bypass": bypass, "residual": residual}, seed=acc_width,
                   acc_width=acc_width)
    ref = ref_cbn(case, bypass=False, residual=bool(residual))
    for k in range(2):
        np.testing.assert_array_equal(t[k], ref[k])


def test_cbn_narrow_bypass_passes_all_bits():
    # Bypass passes the whole 32-bit accumulator whatever width the multiply is built for.
    case = make_case(seed=4, beats=30, lanes=2)
    t, _ = rtl_cbn(case, {"bypass": 1, "residual": 0}, seed=4, acc_width=27)
    ref = ref_cbn(case, bypass=True)
    for k in range(2):
        np.testing.assert_array_equal(t[k], ref[k])


def test_cbn_full_rate_without_backpressure():
    case = make_case(seed=3, beats=30, lanes=1)
    dut = CBNResidual(1)
    out, cycles = run_amaranth(dut, {"bypass": 0, "residual": 1}, to_beats(case), 30,
                               p_idle=0, p_stall=0)
    np.testing.assert_array_equal(from_beats(out, "t")[0], ref_cbn(case)[0])
    assert cycles == 30 + 2  # latency 2, initiation interval 1


@pytest.mark.parametrize("lanes", [0, 65, -1])
def test_bad_lanes_value(lanes):
    with pytest.raises(ValueError, match=r"lanes must be in 1\.\.64"):
        CBNResidual(lanes)


@pytest.mark.parametrize("lanes", [2.0, "8", None, True])
def test_bad_lanes_type(lanes):
    with pytest.raises(TypeError, match="lanes must be an integer"):
        CBNResidual(lanes)


@pytest.mark.parametrize("width", [1, 33, 0, -5])
def test_bad_acc_width_value(width):
    with pytest.raises(ValueError, match=r"acc_width must be in 2\.\.32"):
        CBNResidual(2, width)


@pytest.mark.parametrize("width", [27.0, "27", None, True])
def test_bad_acc_width_type(width):
    with pytest.raises(TypeError, match="acc_width must be an integer"):
        CBNResidual(2, width)


def test_dsp_per_lane():
    assert dsp_per_lane() == DSP_PER_LANE == 6
    assert dsp_per_lane(27) == 4 and dsp_per_lane(28) == 6
    assert dsp_per_lane(27, residual=False) == 2 and dsp_per_lane(32, residual=False) == 4


def test_layout_width():
    # Per lane and part: acc 32 + res 8 + mult 16 + res_mult 16 + bias 48 + shift 6.
    assert cbn_input_layout(2).size == 2 * 2 * 126
    assert DSP_PER_LANE == 6


@pytest.mark.parametrize("acc_width", [32, 27])
@pytest.mark.parametrize("simulator", unit_simulators())
def test_cbn_cocotb(simulator, acc_width):
    require_simulator(simulator)
    run_cocotb(CBNResidual(2, acc_width), "post_cbn", "fcircnn.sim.tb_post_cbn", simulator,
               parameters={"lanes": 2, "beats": 60, "seed": 5, "acc_width": acc_width})


@pytest.mark.parametrize(("acc_width", "dsp"), [(32, 12), (27, 8)])
def test_cbn_synthesis_dsp_count(tmp_path, acc_width, dsp):
    # Exactly dsp_per_lane DSP48E2 per lane, one per multiply, no multiplier in LUTs.
    from fcircnn.gen.synth import synthesize

    report = synthesize(CBNResidual(2, acc_width), "post_cbn", workdir=tmp_path)
    report.check_multipliers(expected_dsp=2 * dsp_per_lane(acc_width))
    assert report.dsp == dsp
