"""Quantizer post-unit (:mod:`fcircnn.hw.post_quantize`) against the golden ``quantize``."""

import numpy as np
import pytest
from conftest import unit_simulators
from hypothesis import given, settings
from hypothesis import strategies as st

from fcircnn.hw.post_quantize import Quantize
from fcircnn.models import spectral
from fcircnn.sim.runner import require_simulator, run_cocotb
from fcircnn.sim.tb_post_util import (
    T_MAX,
    T_MIN,
    from_beats,
    quantize_cases,
    ref_quantize,
    run_amaranth,
    to_beats,
)


def make_case(seed, beats, lanes):
    rng = np.random.default_rng(seed)
    (t_re, s_re), (t_im, s_im) = (quantize_cases(rng, (beats, lanes)) for _ in range(2))
    return (t_re, t_im), (s_re, s_im)


def rtl_quantize(t, shift, bypass=0, seed=0, **kw):
    lanes = t[0].shape[1]
    out, cycles = run_amaranth(Quantize(lanes), {"bypass": bypass},
                               to_beats({"t": t, "shift": shift}), t[0].shape[0], seed=seed, **kw)
    return from_beats(out), cycles


@pytest.mark.parametrize("bypass", [0, 1])
def test_quantize_matches_golden(bypass):
    t, shift = make_case(seed=20 + bypass, beats=50, lanes=3)
    y, _ = rtl_quantize(t, shift, bypass=bypass, seed=bypass)
    ref = ref_quantize(t, shift, bypass=bool(bypass))
    for k in range(2):
        np.testing.assert_array_equal(y[k], ref[k])


def test_quantize_directed_edges():
    # Ties of both signs (round half up), clamp at both ends, int48 edges, shifts 0 and 47.
    cases = [
        (5, 1), (-5, 1), (3, 1), (-3, 1), (-1, 1), (1, 1), (6, 2), (-6, 2), (-2, 2),
        (127, 0), (128, 0), (-127, 0), (-128, 0), (T_MAX, 0), (T_MIN, 0),
        (T_MAX, 47), (T_MIN, 47), (T_MIN + 1, 47), (1 << 46, 47), ((1 << 46) - 1, 47),
        (-(1 << 46), 47), (-(1 << 46) - 1, 47), (255 << 39, 40), (-(255 << 39), 40),
        (253 << 39, 40), (-(253 << 39), 40),
    ]
    t = np.array([c[0] for c in cases], dtype=np.int64).reshape(-1, 1)
    shift = np.array([c[1] for c in cases], dtype=np.int64).reshape(-1, 1)
    y, _ = rtl_quantize((t, -t - 1), (shift, shift))
    np.testing.assert_array_equal(y[0], spectral.quantize(t, shift))
    np.testing.assert_array_equal(y[1], spectral.quantize(-t - 1, shift))
    assert {-127, 127} <= set(y[0].ravel().tolist())


@settings(max_examples=15, deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.integers(-(1 << 47), (1 << 47) - 1), st.integers(0, 47)),
                min_size=1, max_size=12))
def test_quantize_property(pairs):
    t = np.array([p[0] for p in pairs], dtype=np.int64).reshape(-1, 1)
    shift = np.array([p[1] for p in pairs], dtype=np.int64).reshape(-1, 1)
    y, _ = rtl_quantize((t, t // 3), (shift, 47 - shift), p_idle=0.2, p_stall=0.2)
    np.testing.assert_array_equal(y[0], spectral.quantize(t, shift))
    np.testing.assert_array_equal(y[1], spectral.quantize(t // 3, 47 - shift))


def test_quantize_full_rate():
    t, shift = make_case(seed=4, beats=25, lanes=1)
    _, cycles = rtl_quantize(t, shift, p_idle=0, p_stall=0)
    assert cycles == 25 + 2  # latency 2, initiation interval 1


@pytest.mark.parametrize("lanes", [0, 100])
def test_bad_lanes(lanes):
    with pytest.raises(ValueError, match="lanes"):
        Quantize(lanes)


@pytest.mark.parametrize("simulator", unit_simulators())
def test_quantize_cocotb(simulator):
    require_simulator(simulator)
    run_cocotb(Quantize(2), "post_quantize", "fcircnn.sim.tb_post_quantize", simulator,
               parameters={"lanes": 2, "beats": 80, "seed": 7})
