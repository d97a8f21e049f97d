"""The rfft post-unit (:mod:`fcircnn.hw.post_rfft`), with the quantizer after it, against the
golden ``rfft_int`` and ``quantize``."""

import numpy as np
import pytest
from conftest import unit_simulators

from fcircnn.arch.transforms import RFFT_SLOTS
from fcircnn.hw.post_rfft import DSP_PER_LANE, RfftSum
from fcircnn.models import spectral, timedomain
from fcircnn.sim.runner import require_simulator, run_cocotb
from fcircnn.sim.tb_post_util import from_beats, run_amaranth, slot_cases, to_beats


def make_case(seed, beats, lanes, B, extreme=False):
    """int8 time lanes (every lane at +-127 with the signs of a bin's twiddles, the largest
    sums, with ``extreme``), multipliers and a shift."""
    rng = np.random.default_rng(seed)
    re, im = slot_cases(rng, (beats, lanes)), slot_cases(rng, (beats, lanes))
    if extreme:
        signs = np.where(rng.random((beats, lanes, 2)) < 0.5, -127, 127)
        re, im = signs[..., 0], signs[..., 1]
        re[::3], im[::3] = 127, -127  # bin B/2 at its largest
    mult = rng.integers(-32768, 32768, 2 * RFFT_SLOTS)
    mult[:2] = (32767, -32768)
    return (re, im), [int(v) for v in mult], int(rng.integers(0, 48))


def ref_rfft(y, mult, B):
    """``t = v * mult`` per slot of each block (``v``: :func:`timedomain.rfft_int`)."""
    half = B // 2
    beats, lanes = y[0].shape
    v = timedomain.rfft_int(y[0].reshape(-1), y[1].reshape(-1), B)
    k = np.arange(beats * lanes) % half
    m = np.asarray(mult).reshape(2, RFFT_SLOTS)[:, :half]
    return tuple((v[c] * m[c][k]).reshape(beats, lanes) for c in (0, 1))


@pytest.mark.parametrize("B", [4, 8, 16])
@pytest.mark.parametrize("extreme", [False, True])
def test_rfft_matches_golden(B, extreme):
    lanes = 8
    y, mult, shift = make_case(B + 2 * extreme, 40, lanes, B, extreme)
    cfg = {"enable": 1, "mult": mult, "shift": shift}
    out, _ = run_amaranth(RfftSum(lanes, B), cfg, to_beats({None: y}), 40, seed=B)
    t, s = from_beats(out, "t"), from_beats(out, "shift")
    ref = ref_rfft(y, mult, B)
    for k in range(2):
        np.testing.assert_array_equal(t[k], ref[k])
        assert np.all(s[k] == shift)


def test_rfft_then_quantize_is_the_contract():
    # The stage and the quantizer as the post chain joins them: the golden rfft requantized.
    from fcircnn.hw.post_quantize import Quantize
    from fcircnn.sim.tb_post_util import ref_quantize

    y, mult, shift = make_case(7, 30, 8, 8)
    mult = [min(abs(m), 32767) for m in mult]  # the contract's are positive
    shift = 22
    out, _ = run_amaranth(RfftSum(8, 8), {"enable": 1, "mult": mult, "shift": shift},
                          to_beats({None: y}), 30, seed=2)
    t, s = from_beats(out, "t"), from_beats(out, "shift")
    beats = to_beats({"t": t, "shift": s})
    q, _ = run_amaranth(Quantize(8), {"bypass": 0}, beats, 30, seed=3)
    got = from_beats(q)
    ref = ref_quantize(ref_rfft(y, mult, 8), (np.full_like(t[0], shift),) * 2)
    for k in range(2):
        np.testing.assert_array_equal(got[k], ref[k])
        assert got[k].min() >= -127 and got[k].max() <= 127
    # and the golden model's own form of it
    v = timedomain.rfft_int(y[0].reshape(-1), y[1].reshape(-1), 8)
    k4 = np.arange(v[0].size) % 4
    m = np.asarray(mult).reshape(2, RFFT_SLOTS)[:, :4]
    np.testing.assert_array_equal(
        got[0].reshape(-1), spectral.quantize(v[0] * m[0][k4], shift))


def test_rfft_disabled_passes_the_slots():
    y, mult, _ = make_case(3, 30, 4, 8)
    out, _ = run_amaranth(RfftSum(4, 8), {"enable": 0, "mult": mult, "shift": 17},
                          to_beats({None: y}), 30, seed=1)
    t, s = from_beats(out, "t"), from_beats(out, "shift")
    for k in range(2):
        np.testing.assert_array_equal(t[k], y[k])
        assert not s[k].any()


def test_rfft_full_rate():
    y, mult, shift = make_case(4, 20, 4, 8)
    _, cycles = run_amaranth(RfftSum(4, 8), {"enable": 1, "mult": mult, "shift": shift},
                             to_beats({None: y}), 20, p_idle=0, p_stall=0)
    assert cycles == 20 + 2


@pytest.mark.parametrize(("kwargs", "exc", "match"), [
    ({"lanes": 4, "B": 16}, ValueError, "multiple of B/2 = 8"),
    ({"lanes": 8, "B": 32}, ValueError, "B must be one of"),
    ({"lanes": 1.0, "B": 8}, TypeError, "lanes"),
])
def test_bad_parameters(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        RfftSum(**kwargs)


@pytest.mark.parametrize("simulator", unit_simulators())
def test_rfft_cocotb(simulator):
    require_simulator(simulator)
    run_cocotb(RfftSum(8, 8), "post_rfft", "fcircnn.sim.tb_post_rfft", simulator,
               parameters={"lanes": 8, "B": 8, "beats": 60, "seed": 11})


def test_rfft_synthesis_dsp_count(tmp_path):
    # One DSP48E2 per part and slot (the products by the multipliers); the twiddles in LUTs.
    from fcircnn.gen.synth import synthesize

    report = synthesize(RfftSum(4, 8), "post_rfft", workdir=tmp_path)
    report.check_multipliers(expected_dsp=4 * DSP_PER_LANE)
    assert report.dsp == 8
