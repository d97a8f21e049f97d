"""CBN + residual post-unit (:mod:`fcircnn.hw.post_cbn`) against the golden ``cbn``."""

import numpy as np
import pytest
from conftest import unit_simulators

from fcircnn.hw.post_cbn import DSP_PER_LANE, CBNResidual, cbn_input_layout
from fcircnn.sim.runner import require_simulator, run_cocotb
from fcircnn.sim.tb_post_util import cbn_cases, from_beats, ref_cbn, run_amaranth, to_beats

FIELDS = ("acc", "mult", "bias", "res", "res_mult", "shift")


def make_case(seed, beats, lanes):
    rng = np.random.default_rng(seed)
    re, im = cbn_cases(rng, (beats, lanes)), cbn_cases(rng, (beats, lanes))
    return {name: (re[name], im[name]) for name in FIELDS}


def rtl_cbn(case, cfg, seed, **kw):
    lanes = case["acc"][0].shape[1]
    dut = CBNResidual(lanes)
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


def test_layout_width():
    # Per lane and part: acc 32 + res 8 + mult 16 + res_mult 16 + bias 48 + shift 6.
    assert cbn_input_layout(2).size == 2 * 2 * 126
    assert DSP_PER_LANE == 6


@pytest.mark.parametrize("simulator", unit_simulators())
def test_cbn_cocotb(simulator):
    require_simulator(simulator)
    run_cocotb(CBNResidual(2), "post_cbn", "fcircnn.sim.tb_post_cbn", simulator,
               parameters={"lanes": 2, "beats": 60, "seed": 5})


def test_cbn_synthesis_dsp_count(tmp_path):
    # Exactly DSP_PER_LANE DSP48E2 per lane, one per multiply, no multiplier in LUTs.
    from fcircnn.gen.synth import synthesize

    report = synthesize(CBNResidual(2), "post_cbn", workdir=tmp_path)
    report.check_multipliers(expected_dsp=2 * DSP_PER_LANE)
    assert report.dsp == 12
