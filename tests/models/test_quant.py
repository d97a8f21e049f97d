"""Quantization calibration: scales, slot quantization and CBN folding."""

import numpy as np
import pytest

from fcircnn.models import quant
from fcircnn.models import spectral as sp


def _slots(rng, B=8, groups=3):
    return rng.standard_normal((groups * B // 2, 2, 3, 3)) + 1j * rng.standard_normal(
        (groups * B // 2, 2, 3, 3))


def test_tensor_scale_is_one_value():
    rng = np.random.default_rng(0)
    xs = _slots(rng)
    scale = quant.slot_scales(xs, 8, "tensor")
    assert scale.shape == (2, 4)
    peak = max(np.abs(xs.real).max(), np.abs(xs.imag).max())
    np.testing.assert_allclose(scale, peak / 127)


def test_bin_scales_share_parts_except_slot0():
    rng = np.random.default_rng(1)
    xs = _slots(rng)
    xs[0::4] = xs[0::4].real * 10 + 1j * xs[0::4].imag  # bin 0 much larger than bin B/2
    scale = quant.slot_scales(xs, 8, "bin")
    np.testing.assert_array_equal(scale[0, 1:], scale[1, 1:])
    assert scale[0, 0] == pytest.approx(np.abs(xs[0::4].real).max() / 127)
    assert scale[1, 0] == pytest.approx(np.abs(xs[0::4].imag).max() / 127)
    k2 = xs[2::4]
    assert scale[0, 2] == pytest.approx(max(np.abs(k2.real).max(), np.abs(k2.imag).max()) / 127)


def test_quantize_dequantize_round_trip_and_range():
    rng = np.random.default_rng(2)
    xs = _slots(rng)
    for granularity in ("tensor", "bin"):
        scale = quant.slot_scales(xs, 8, granularity)
        q_re, q_im = quant.quantize_slots(xs, scale)
        assert max(np.abs(q_re).max(), np.abs(q_im).max()) == 127
        back = quant.dequantize_slots(q_re, q_im, scale)
        s = np.tile(scale, 3)[..., None, None, None]
        assert np.all(np.abs(back.real - xs.real) <= s[0] / 2 + 1e-12)
        assert np.all(np.abs(back.imag - xs.imag) <= s[1] / 2 + 1e-12)


def test_weight_scales_and_quantization_along_bin_axis():
    rng = np.random.default_rng(3)
    ws = sp.weight_slots(rng.standard_normal((2, 3, 8, 3, 3, 3)))
    scale = quant.weight_scales(ws, "bin")
    q_re, q_im = quant.quantize_slots(ws, scale, axis=2)
    assert q_re.shape == ws.shape
    for k in range(4):
        assert np.abs(q_re[:, :, k]).max() <= 127
        # The largest part of each bin maps to +-127.
        assert max(np.abs(q_re[:, :, k]).max(), np.abs(q_im[:, :, k]).max()) == 127


def test_zero_tensor_gets_unit_scale():
    scale = quant.slot_scales(np.zeros((4, 1, 1, 1), dtype=complex), 8)
    np.testing.assert_array_equal(scale, 1.0)
    with pytest.raises(ValueError, match="granularity"):
        quant.slot_scales(np.ones((4, 1, 1, 1), dtype=complex), 8, "channel")


def test_fold_post_reproduces_float_stage():
    """Integer t >> shift equals the float CBN divided by the output scale, within rounding."""
    rng = np.random.default_rng(4)
    S, half = 8, 4
    gain = rng.uniform(0.2, 3, (2, S))
    offset = rng.uniform(-2, 2, (2, S))
    acc_scale = rng.uniform(1e-4, 1e-3, (2, half))
    out_scale = rng.uniform(0.01, 0.05, (2, half))
    res_scale = rng.uniform(0.01, 0.05, (2, half))
    bound = sp.accumulator_bound(16, 3)
    p = quant.fold_post(gain, offset, acc_scale, out_scale, bound, res_scale)
    assert p.mult.shape == (2, S) and p.shift.min() >= 0 and p.shift.max() <= 47
    assert np.abs(p.mult).max() <= 2**15 - 1 and np.abs(p.res_mult).max() <= 2**15 - 1
    # At least one field sits near the int16 limit: the shift is as large as allowed.
    assert np.all(np.maximum(np.abs(p.mult), np.abs(p.res_mult)) >= 2**14 - 1)
    acc = rng.integers(-5000, 5000, (S, 1, 1, 1))
    res = rng.integers(-127, 128, (S, 1, 1, 1))
    for c in range(2):
        kw = p.part(c)
        y = sp.quantize(sp.cbn(acc, kw["mult"], kw["bias"], res, kw["res_mult"]), kw["shift"])
        col = (slice(None), None, None, None)
        a_s, o_s, r_s = (np.tile(s[c], 2)[col] for s in (acc_scale, out_scale, res_scale))
        ref = (gain[c][col] * acc * a_s + offset[c][col] + res * r_s) / o_s
        ref = np.clip(ref, -127, 127)
        assert np.abs(y - ref).max() <= 0.51


def test_fold_post_keeps_worst_case_t_in_int48():
    gain = np.full((2, 4), 1.0)
    offset = np.zeros((2, 4))
    bound = sp.accumulator_bound(1024, 1)
    p = quant.fold_post(gain, offset, np.full((2, 4), 1.0), np.full((2, 4), 1e-3), bound)
    assert np.all(bound * np.abs(p.mult) + np.abs(p.bias) < 2**47)


def test_fold_post_rejects_unrepresentable_factor():
    with pytest.raises(OverflowError, match="output slot 0"):
        quant.fold_post(np.full((2, 4), 1e6), np.zeros((2, 4)), np.ones((2, 4)),
                        np.ones((2, 4)), 100)


def test_percentile_scales():
    from fcircnn.models.quant import calibration_percentile, slot_scales

    rng = np.random.default_rng(3)
    xs = rng.standard_normal((8, 4, 5, 5)) + 1j * rng.standard_normal((8, 4, 5, 5))
    xs[2, 0, 0, 0] = 50 + 50j  # one outlier
    full = slot_scales(xs, 8, "bin")
    assert np.array_equal(slot_scales(xs, 8, "bin", 100.0), full)
    p99 = slot_scales(xs, 8, "bin", 99.0)
    assert (p99 <= full).all() and p99[0, 2] < full[0, 2] / 5  # the outlier no longer sets it
    assert calibration_percentile("max") is None and calibration_percentile("p99.9") == 99.9
    for bad in ("p0", "p101", "99", "pmax", "", "P50"):
        with pytest.raises(ValueError, match="must be 'max' or 'pQ'"):
            calibration_percentile(bad)


@pytest.mark.parametrize("peak", [5e-324, 1e-310, 2.2e-308])
def test_a_peak_of_subnormal_values_gets_the_smallest_normal_step(peak):
    # 5e-324 / 127 underflows to a step of 0: every value became NaN and then INT64_MIN.
    ws = np.full((1, 1, 4, 1, 1, 1), peak + 0j)
    scale = quant.weight_scales(ws)
    assert np.all(scale >= np.finfo(np.float64).tiny) and np.all(np.isfinite(1 / scale))
    q_re, q_im = quant.quantize_slots(ws, scale, axis=2)
    assert q_re.min() >= 0 and q_re.max() <= 127 and not q_im.any()
