"""CReLU post-unit (:mod:`fcircnn.hw.post_crelu`) against the golden ``crelu``."""

import numpy as np
import pytest
from conftest import unit_simulators

from fcircnn.hw.post_crelu import CReLU
from fcircnn.models import spectral
from fcircnn.sim.runner import require_simulator, run_cocotb
from fcircnn.sim.tb_post_util import from_beats, run_amaranth, slot_cases, to_beats


def make_case(seed, beats, lanes):
    rng = np.random.default_rng(seed)
    return slot_cases(rng, (beats, lanes)), slot_cases(rng, (beats, lanes))


@pytest.mark.parametrize("bypass", [0, 1])
def test_crelu_matches_golden(bypass):
    y = make_case(seed=30 + bypass, beats=60, lanes=4)
    out, _ = run_amaranth(CReLU(4), {"bypass": bypass}, to_beats({None: y}), 60, seed=bypass)
    got = from_beats(out)
    for k in range(2):
        np.testing.assert_array_equal(got[k], y[k] if bypass else spectral.crelu(y[k]))


def test_quantize_then_crelu_is_quantize_with_lo_zero():
    # The golden model's equivalence the hardware split relies on.
    rng = np.random.default_rng(1)
    t = rng.integers(-(1 << 47), 1 << 47, size=2000)
    shift = rng.integers(0, 48, size=2000)
    np.testing.assert_array_equal(spectral.crelu(spectral.quantize(t, shift)),
                                  spectral.quantize(t, shift, lo=0))


def test_crelu_full_rate():
    y = make_case(seed=2, beats=20, lanes=1)
    _, cycles = run_amaranth(CReLU(1), {"bypass": 0}, to_beats({None: y}), 20,
                             p_idle=0, p_stall=0)
    assert cycles == 20 + 1


@pytest.mark.parametrize(("lanes", "exc"), [(0, ValueError), (1.5, TypeError)])
def test_bad_lanes(lanes, exc):
    with pytest.raises(exc, match="lanes"):
        CReLU(lanes)


@pytest.mark.parametrize("simulator", unit_simulators())
def test_crelu_cocotb(simulator):
    require_simulator(simulator)
    run_cocotb(CReLU(3), "post_crelu", "fcircnn.sim.tb_post_crelu", simulator,
               parameters={"lanes": 3, "beats": 80, "seed": 9})
