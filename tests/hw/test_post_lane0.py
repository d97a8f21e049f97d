"""Lane-0 post-unit (:mod:`fcircnn.hw.post_lane0`) against the golden ``irfft_lane0``."""

import numpy as np
import pytest
from conftest import unit_simulators

from fcircnn.hw.post_lane0 import IrfftLane0
from fcircnn.models import timedomain
from fcircnn.sim.runner import require_simulator, run_cocotb
from fcircnn.sim.tb_post_util import cbn_cases, from_beats, run_amaranth, to_beats

FIELDS = ("acc", "mult", "bias", "res", "res_mult", "shift")


def make_case(seed, beats, lanes, B, extreme=False):
    """CBN operands whose blocks' lane-0 sums fit int32 (the compiler's bound), or, with
    ``extreme``, accumulators at the largest magnitude that keeps them so."""
    rng = np.random.default_rng(seed)
    re, im = cbn_cases(rng, (beats, lanes)), cbn_cases(rng, (beats, lanes))
    limit = (2**31 - 1) // B
    for part in (re, im):
        part["acc"] = part["acc"] // B
        if extreme:
            part["acc"] = np.where(rng.random((beats, lanes)) < 0.5, limit, -limit)
    return {name: (re[name], im[name]) for name in FIELDS}


def ref_lane0(case, B):
    half = B // 2
    beats, lanes = case["acc"][0].shape
    u = timedomain.irfft_lane0(case["acc"][0].reshape(-1), case["acc"][1].reshape(-1), B)
    re = np.zeros(beats * lanes, dtype=np.int64)
    re[::half] = u
    return re.reshape(beats, lanes), np.zeros((beats, lanes), dtype=np.int64)


@pytest.mark.parametrize("B", [4, 8, 16])
@pytest.mark.parametrize("extreme", [False, True])
def test_lane0_matches_golden(B, extreme):
    lanes = 8
    case = make_case(B + extreme, beats=40, lanes=lanes, B=B, extreme=extreme)
    out, _ = run_amaranth(IrfftLane0(lanes, B), {"enable": 1}, to_beats(case), 40, seed=B)
    acc, ref = from_beats(out, "acc"), ref_lane0(case, B)
    for k in range(2):
        np.testing.assert_array_equal(acc[k], ref[k])
    for name in FIELDS[1:]:  # the post parameters pass unchanged
        for k in range(2):
            np.testing.assert_array_equal(from_beats(out, name)[k], case[name][k])


def test_lane0_disabled_passes_the_payload():
    case = make_case(3, beats=30, lanes=4, B=8)
    out, _ = run_amaranth(IrfftLane0(4, 8), {"enable": 0}, to_beats(case), 30, seed=1)
    for name in FIELDS:
        for k in range(2):
            np.testing.assert_array_equal(from_beats(out, name)[k], case[name][k])


def test_lane0_full_rate():
    case = make_case(4, beats=20, lanes=4, B=8)
    _, cycles = run_amaranth(IrfftLane0(4, 8), {"enable": 1}, to_beats(case), 20, p_idle=0,
                             p_stall=0)
    assert cycles == 20 + 1


@pytest.mark.parametrize(("kwargs", "exc", "match"), [
    ({"lanes": 6, "B": 16}, ValueError, "multiple of B/2 = 8"),
    ({"lanes": 8, "B": 6}, ValueError, "B must be one of 4, 8, 16"),
    ({"lanes": 0, "B": 8}, ValueError, "lanes"),
])
def test_bad_parameters(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        IrfftLane0(**kwargs)


@pytest.mark.parametrize("simulator", unit_simulators())
def test_lane0_cocotb(simulator):
    require_simulator(simulator)
    run_cocotb(IrfftLane0(8, 8), "post_lane0", "fcircnn.sim.tb_post_lane0", simulator,
               parameters={"lanes": 8, "B": 8, "beats": 60, "seed": 5})
