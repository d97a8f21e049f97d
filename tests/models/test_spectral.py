"""Golden model: slot packing, circulant weights, slot and integer convolution, post stages."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fcircnn.models import spectral as sp

# --------------------------------------------------------------------------------------------
# Slot conv == dense time-domain conv of the expanded weights: a seeded sweep of 240 cases.

KERNELS = ((1, 1, 1), (3, 3, 3), (7, 7, 7))
SWEEP = [(B, k, case) for B in (4, 8, 16) for k in KERNELS for case in range(27)]


def _sweep_case(B, kernel, case):
    rng = np.random.default_rng(1000 * B + 10 * kernel[0] + case)
    P, Q = rng.integers(1, 4, size=2)
    stride = tuple(int(s) for s in rng.integers(1, 4, size=3))
    padding = tuple(int(rng.integers(0, k)) for k in kernel)
    # Spatial sizes at least the kernel minus twice the padding (at least one output).
    shape = tuple(int(max(1, k - 2 * p) + rng.integers(0, 5))
                  for k, p in zip(kernel, padding, strict=True))
    # Some cases use anisotropic kernels drawn from the same family.
    if case % 3 == 1:
        kernel = (kernel[0], 1, kernel[2])
        padding = (padding[0], 0, padding[2])
    w = rng.standard_normal((P, Q, B, *kernel))
    x = rng.standard_normal((Q * B, *shape))
    return x, w, stride, padding


@pytest.mark.parametrize(("B", "kernel", "case"), SWEEP)
def test_slot_conv_equals_dense_conv(B, kernel, case):
    x, w, stride, padding = _sweep_case(B, kernel, case)
    ref = sp.conv3d_dense(x, sp.expand_circulant(w), stride, padding)
    ys = sp.conv3d_slots(sp.to_slots(x, B), sp.weight_slots(w), stride, padding)
    got = sp.from_slots(ys, B)
    assert got.shape == ref.shape
    assert np.abs(got - ref).max() <= 1e-9 * np.abs(ref).max()


def test_sweep_is_large_enough():
    assert len(SWEEP) >= 200


def test_dense_conv_matches_direct_loop():
    """The im2col reference itself against a literal loop (cross-correlation convention)."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 4, 5, 3))
    w = rng.standard_normal((3, 2, 2, 3, 2))
    stride, pad = (1, 2, 1), (1, 1, 0)
    got = sp.conv3d_dense(x, w, stride, pad)
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    ref = np.zeros(got.shape)
    for m in range(3):
        for d in range(got.shape[1]):
            for h in range(got.shape[2]):
                for c in range(got.shape[3]):
                    patch = xp[:, d:d + 2, 2 * h:2 * h + 3, c:c + 2]
                    ref[m, d, h, c] = np.sum(patch * w[m])
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)


def test_dense_conv_large_map_uses_chunks(monkeypatch):
    """Chunking over output depth (im2col budget) does not change the result."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 9, 6, 6))
    w = rng.standard_normal((5, 4, 3, 3, 3))
    whole = sp.conv3d_dense(x, w, 1, 1)
    monkeypatch.setattr(sp, "_COL_BUDGET", 1)
    np.testing.assert_allclose(sp.conv3d_dense(x, w, 1, 1), whole, rtol=1e-12, atol=1e-12)


# --------------------------------------------------------------------------------------------
# Slots and circulant weights


@pytest.mark.parametrize("B", [4, 8, 16])
@pytest.mark.parametrize("channels", [1, 3, 8, 13, 32])
def test_slots_round_trip_with_channel_padding(B, channels):
    rng = np.random.default_rng(channels * B)
    x = rng.standard_normal((channels, 2, 3, 4))
    padded = sp.pad_channels(x, B)
    assert padded.shape[0] % B == 0 and padded.shape[0] - channels < B
    xs = sp.to_slots(padded, B)
    assert xs.shape == (padded.shape[0] // 2, 2, 3, 4)
    back = sp.from_slots(xs, B)[:channels]
    np.testing.assert_allclose(back, x, rtol=0, atol=1e-13)
    assert np.all(sp.from_slots(xs, B)[channels:] == pytest.approx(0, abs=1e-13))


def test_slot_packing_by_hand():
    """B = 4 block [1, 2, 3, 4]: X = [10, -2+2j, -2]; slots = [10 - 2j, -2 + 2j]."""
    x = np.array([1.0, 2.0, 3.0, 4.0]).reshape(4, 1, 1, 1)
    xs = sp.to_slots(x, 4).ravel()
    np.testing.assert_allclose(xs, [10 - 2j, -2 + 2j])


def test_to_slots_rejects_unpadded_channels():
    with pytest.raises(ValueError, match="multiple of B"):
        sp.to_slots(np.zeros((6, 1, 1, 1)), 4)
    with pytest.raises(ValueError, match="4, 8 or 16"):
        sp.to_slots(np.zeros((6, 1, 1, 1)), 6)


def test_expand_circulant_structure():
    w = np.arange(2 * 1 * 4).reshape(2, 1, 4, 1, 1, 1).astype(float)
    dense = sp.expand_circulant(w)[..., 0, 0, 0]
    assert dense.shape == (8, 4)
    # First column is the generator; each row is the previous one rotated right.
    np.testing.assert_array_equal(dense[:4, 0], w[0, 0, :, 0, 0, 0])
    np.testing.assert_array_equal(dense[1, :4], np.roll(dense[0, :4], 1))
    np.testing.assert_array_equal(dense[4:, 0], w[1, 0, :, 0, 0, 0])


def test_circulant_matvec_is_frequency_product():
    rng = np.random.default_rng(1)
    w = rng.standard_normal(8)
    x = rng.standard_normal(8)
    dense = sp.expand_circulant(w.reshape(1, 1, 8, 1, 1, 1))[..., 0, 0, 0]
    np.testing.assert_allclose(dense @ x, np.fft.irfft(np.fft.rfft(w) * np.fft.rfft(x), 8))


def test_projection_is_least_squares():
    rng = np.random.default_rng(2)
    dense = rng.standard_normal((16, 8, 3, 1, 1))
    gen = sp.project_circulant(dense, 8)
    assert gen.shape == (2, 1, 8, 3, 1, 1)
    proj = sp.expand_circulant(gen)
    # Idempotent, and the residual is orthogonal to every block-circulant matrix.
    np.testing.assert_allclose(sp.project_circulant(proj, 8), gen, atol=1e-12)
    other = sp.expand_circulant(rng.standard_normal(gen.shape))
    assert abs(np.sum((dense - proj) * other)) < 1e-9
    # Padding of non-multiple channel counts.
    assert sp.project_circulant(rng.standard_normal((5, 3, 1, 1, 1)), 4).shape == (2, 1, 4, 1, 1, 1)


def test_weight_slots_shape_and_slot0():
    rng = np.random.default_rng(4)
    w = rng.standard_normal((2, 3, 8, 3, 3, 3))
    ws = sp.weight_slots(w)
    assert ws.shape == (2, 3, 4, 3, 3, 3)
    spec = np.fft.rfft(w, axis=2)
    np.testing.assert_allclose(ws[:, :, 0], spec[:, :, 0].real + 1j * spec[:, :, 4].real)


# --------------------------------------------------------------------------------------------
# Integer convolution


@pytest.mark.parametrize("B", [4, 8, 16])
@pytest.mark.parametrize(("kernel", "stride", "padding"),
                         [(1, 1, 0), (3, 1, 1), (3, 2, 1), ((1, 4, 4), 1, 0)])
def test_int_conv_equals_float_slot_conv(B, kernel, stride, padding):
    rng = np.random.default_rng(B)
    k = sp._triple(kernel, "kernel")
    P, Q = 2, 3
    xr, xi = rng.integers(-127, 128, (2, Q * B // 2, 3, 5, 4))
    xr[0, 0, 0, 0], xi[0, 0, 0, 0] = -127, 127
    wr, wi = rng.integers(-127, 128, (2, P, Q, B // 2, *k))
    wr[..., 0, 0, 0], wi[..., 0, 0, 0] = 127, -127
    acc_re, acc_im = sp.conv3d_slots_int(xr, xi, wr, wi, stride, padding)
    ref = sp.conv3d_slots(xr + 1j * xi, wr + 1j * wi, stride, padding)
    assert acc_re.dtype == np.int64 and acc_im.dtype == np.int64
    np.testing.assert_array_equal(acc_re, ref.real)
    np.testing.assert_array_equal(acc_im, ref.imag)


def test_int_conv_slot0_is_componentwise():
    xr = np.array([3, 5]).reshape(2, 1, 1, 1)
    xi = np.array([-7, 11]).reshape(2, 1, 1, 1)
    wr = np.array([2, 13]).reshape(1, 1, 2, 1, 1, 1)
    wi = np.array([9, -4]).reshape(1, 1, 2, 1, 1, 1)
    acc_re, acc_im = sp.conv3d_slots_int(xr, xi, wr, wi)
    # slot 0: (3*2) + i(-7*9); slot 1: (5 + 11i)(13 - 4i) = 109 + 123i
    assert acc_re.ravel().tolist() == [6, 109]
    assert acc_im.ravel().tolist() == [-63, 123]


def test_int_conv_extremes_are_exact():
    """All-extreme operands reach the bound's order of magnitude and stay exact."""
    B, Q = 8, 64
    xr = np.full((Q * B // 2, 3, 3, 3), 127)
    xi = np.full_like(xr, -127)
    wr = np.full((1, Q, B // 2, 3, 3, 3), 127)
    wi = np.full_like(wr, 127)
    acc_re, acc_im = sp.conv3d_slots_int(xr, xi, wr, wi, 1, 0)
    # slot k >= 1: (127 - 127i)(127 + 127i) = 2*127^2 per term, all real.
    terms = Q * 27
    assert acc_re[1, 0, 0, 0] == 2 * 127**2 * terms and acc_im[1, 0, 0, 0] == 0
    assert acc_re[0, 0, 0, 0] == 127**2 * terms and acc_im[0, 0, 0, 0] == -(127**2) * terms
    assert abs(acc_re).max() <= sp.accumulator_bound(Q, 3)


def test_int_conv_rejects_oversized_layer():
    # 2 * Q * 343 * 127^2 >= 2^31 for Q = 195 (7x7x7 kernel).
    assert sp.accumulator_bound(194, 7) < 2**31 <= sp.accumulator_bound(195, 7)
    B, Q = 8, 195
    x = np.zeros((Q * B // 2, 1, 1, 1), dtype=np.int64)
    w = np.zeros((1, Q, B // 2, 7, 7, 7), dtype=np.int64)
    with pytest.raises(ValueError, match="accumulator bound"):
        sp.conv3d_slots_int(x, x, w, w, 1, 3)


def test_int_conv_rejects_out_of_range_operands():
    x = np.zeros((4, 1, 1, 1), dtype=np.int64)
    w = np.zeros((1, 1, 4, 1, 1, 1), dtype=np.int64)
    with pytest.raises(ValueError, match=r"\[-127, 127\]"):
        sp.conv3d_slots_int(x - 128, x, w, w)
    with pytest.raises(TypeError, match="integer"):
        sp.conv3d_slots_int(x.astype(float), x, w, w)


# --------------------------------------------------------------------------------------------
# Post stages against hand-written cases


def test_cbn_by_hand():
    acc = np.array([10, -10, 2**31 - 1])
    t = sp.cbn(acc, mult=np.array([3, 3, 2]), bias=np.array([-1, 1, 5]))
    assert t.tolist() == [29, -29, 2 * (2**31 - 1) + 5]
    t = sp.cbn(np.array([4]), 2, 1, res=np.array([-127]), res_mult=np.array([100]))
    assert t.tolist() == [4 * 2 + 1 - 12700]
    assert sp.residual_term(np.array([-3, 5]), 7).tolist() == [-21, 35]


def test_cbn_range_checks():
    with pytest.raises(OverflowError, match="t leaves signed 48-bit"):
        sp.cbn(np.array([2**31 - 1]), 2**15 - 1, 2**47 - 1)
    with pytest.raises(OverflowError, match="mult"):
        sp.cbn(np.array([1]), 2**15, 0)
    with pytest.raises(ValueError, match="together"):
        sp.cbn(np.array([1]), 1, 0, res=np.array([1]))


def test_quantize_rounds_half_up_for_both_signs():
    t = np.array([5, -5, 6, -6, 7, -7, 4, -4])
    # shift 1: x / 2 rounded half up: 2.5 -> 3, -2.5 -> -2, 3 -> 3, -3 -> -3, 3.5 -> 4, ...
    assert sp.quantize(t, 1).tolist() == [3, -2, 3, -3, 4, -3, 2, -2]
    # shift 2: 6/4 = 1.5 -> 2, -6/4 = -1.5 -> -1, -10/4 = -2.5 -> -2
    assert sp.quantize(np.array([6, -6, -10, 2, -2]), 2).tolist() == [2, -1, -2, 1, 0]
    # shift 0: no rounding.
    assert sp.quantize(np.array([-3, 3]), 0).tolist() == [-3, 3]


def test_quantize_clamps_both_ends():
    t = np.array([10**9, -(10**9), 127 * 4 + 1, -127 * 4 - 3])
    assert sp.quantize(t, 2).tolist() == [127, -127, 127, -127]
    assert sp.quantize(t, 2, lo=0).tolist() == [127, 0, 127, 0]
    assert sp.quantize(np.array([2**47 - 1, -(2**47)]), 47).tolist() == [1, -1]
    with pytest.raises(ValueError, match="shift"):
        sp.quantize(t, 48)


def test_crelu_and_equivalence_with_lo_zero():
    assert sp.crelu(np.array([-5, 0, 7])).tolist() == [0, 0, 7]
    t = np.random.default_rng(0).integers(-(2**20), 2**20, 1000)
    np.testing.assert_array_equal(sp.crelu(sp.quantize(t, 9)), sp.quantize(t, 9, lo=0))


def test_cmaxpool_with_padding_by_hand():
    y = np.array([[1, 5, 2], [7, -3, 4], [0, 6, -1]]).reshape(1, 1, 3, 3)
    # 2x2 window, stride 2, padding 1 on h and w: windows see [1], [5, 2], [7, 0], [-3, 4, 6, -1]
    got = sp.cmaxpool(y, (1, 2, 2), (1, 2, 2), (0, 1, 1))
    assert got[0, 0].tolist() == [[1, 5], [7, 6]]
    # Negative values: padding never wins.
    neg = -np.arange(1, 10).reshape(1, 1, 3, 3)
    assert sp.cmaxpool(neg, (1, 3, 3), 1, (0, 1, 1))[0, 0, 0, 0] == -1


def test_cmaxpool_shapes_of_the_networks():
    y = np.zeros((4, 2, 7, 7), dtype=np.int64)
    assert sp.cmaxpool(y, 2, 2, (0, 1, 1)).shape == (4, 1, 4, 4)  # C3D pool5
    y = np.zeros((4, 16, 56, 56), dtype=np.int64)
    assert sp.cmaxpool(y, 3, 2, 1).shape == (4, 8, 28, 28)  # ResNet maxpool
    with pytest.raises(ValueError, match="smaller than the window"):
        sp.cmaxpool(y, 2, 2, 2)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(1, 3), st.integers(1, 3), st.integers(0, 2))
def test_cmaxpool_matches_literal_loop(seed, window, stride, pad):
    pad = min(pad, window - 1)
    rng = np.random.default_rng(seed)
    y = rng.integers(-127, 128, (2, 3, 5, 4))
    got = sp.cmaxpool(y, window, stride, pad)
    for c in range(2):
        for idx in np.ndindex(got.shape[1:]):
            lo = [i * stride - pad for i in idx]
            sl = tuple(slice(max(0, a), max(0, a + window)) for a in lo)
            assert got[(c, *idx)] == y[(c, *sl)].max()


@settings(max_examples=200, deadline=None)
@given(st.integers(-(2**47), 2**47 - 1), st.integers(0, 47))
def test_quantize_matches_exact_rational_rounding(t, shift):
    import math
    from fractions import Fraction

    exact = math.floor(Fraction(t, 2**shift) + (Fraction(1, 2) if shift else 0))
    assert sp.quantize(np.array([t]), shift)[0] == max(-127, min(127, exact))


def test_post_process_composes_stages():
    rng = np.random.default_rng(5)
    acc = rng.integers(-(2**20), 2**20, (4, 2, 4, 4))
    res = rng.integers(-127, 128, acc.shape)
    mult = rng.integers(-(2**15), 2**15, (4, 1, 1, 1))
    bias = rng.integers(-(2**30), 2**30, (4, 1, 1, 1))
    shift = rng.integers(10, 20, (4, 1, 1, 1))
    pool = ((1, 2, 2), (1, 2, 2), 0)
    got = sp.post_process(acc, mult, bias, shift, res=res, res_mult=37, relu=True, pool=pool)
    t = acc * mult + bias + res * 37
    y = np.clip(np.floor((t + 2.0 ** (shift - 1)) / 2.0**shift), 0, 127)
    np.testing.assert_array_equal(got, sp.cmaxpool(y.astype(np.int64), *pool))
