"""models/timedomain.py: layouts, the dense layers' mappings, the integer transforms."""

import numpy as np
import pytest

from fcircnn.arch.transforms import RFFT_FRACTION_BITS
from fcircnn.models import spectral
from fcircnn.models import timedomain as td

LAYOUTS = ["slots", "lanes", "lane0", "deferred", "spread"]


@pytest.mark.parametrize("B", [4, 8, 16])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_layouts_round_trip(B, layout):
    x = np.random.default_rng(0).standard_normal((13, 2, 3, 1))
    xs = td.to_layout(x, layout, B)
    np.testing.assert_allclose(td.from_layout(xs, layout, B, 13), x, atol=1e-12)


def test_layouts_place_channels_as_documented():
    x = np.arange(1.0, 17.0).reshape(16, 1, 1, 1)
    lanes = td.to_layout(x, "lanes", 8)[:, 0, 0, 0]
    assert lanes[3] == 7 + 8j  # channel 6 real part of slot 3, channel 7 its imaginary part
    lane0 = td.to_layout(x[:2], "lane0", 8)[:, 0, 0, 0]
    np.testing.assert_array_equal(lane0, [1, 0, 0, 0, 2, 0, 0, 0])
    spread = td.to_layout(x[:2], "spread", 8)[:, 0, 0, 0]
    np.testing.assert_array_equal(spread, [1 + 1j, 1, 1, 1, 2 + 2j, 2, 2, 2])
    # spread is the packed rfft of each channel at lane 0 of a block of its own
    blocks = np.zeros((16, 1, 1, 1))
    blocks[0], blocks[8] = 1, 2
    np.testing.assert_allclose(spectral.to_slots(blocks, 8)[:, 0, 0, 0], spread)


@pytest.mark.parametrize("B", [4, 8, 16])
def test_a_dense_conv_on_spread_input_gives_its_output_in_lanes(B):
    rng = np.random.default_rng(B)
    x, w = rng.standard_normal((3, 4, 5, 5)), rng.standard_normal((11, 3, 3, 2, 3))
    ys = spectral.conv3d_slots(td.to_layout(x, "spread", B), td.lane_weight_slots(w, B),
                               (1, 2, 1), (1, 0, 1))
    np.testing.assert_allclose(td.from_layout(ys, "lanes", B, 11),
                               spectral.conv3d_dense(x, w, (1, 2, 1), (1, 0, 1)), atol=1e-12)


@pytest.mark.parametrize("B", [4, 8, 16])
def test_a_dense_layer_on_deferred_slots_gives_its_output_in_lane_0(B):
    rng = np.random.default_rng(B)
    z, w = rng.standard_normal((21, 2, 3, 3)), rng.standard_normal((5, 21, 2, 3, 3))
    ys = spectral.conv3d_slots(td.to_layout(z, "deferred", B),
                               spectral.weight_slots(td.lane0_generators(w, B)), 1, 0)
    u = td.irfft_lane0(ys.real, ys.imag, B) / B
    np.testing.assert_allclose(u, spectral.conv3d_dense(z, w, 1, 0), atol=1e-12)


@pytest.mark.parametrize("B", [4, 8, 16])
@pytest.mark.parametrize("data", ["random", "extreme"])
def test_the_integer_rfft_is_the_rfft_with_14_bit_twiddles(B, data):
    rng = np.random.default_rng(1)
    if data == "random":
        t = rng.integers(-127, 128, (4 * B, 2, 2, 3))
    else:  # every lane at a bound, with alternating signs: the largest sums
        t = np.where(rng.random((4 * B, 2, 2, 3)) < 0.5, -127, 127)
        t[: B] = np.array([127, -127] * (B // 2)).reshape(B, 1, 1, 1)
    t_re, t_im = t[0::2], t[1::2]  # lanes: slot parts
    v_re, v_im = td.rfft_int(t_re, t_im, B)
    assert v_re.dtype == np.int64
    ref = spectral.to_slots(t.astype(np.float64), B) * 2**RFFT_FRACTION_BITS
    # exact in bins with twiddles 0, +-1; within B * 127 / 2 of the exact one elsewhere
    tol = B * 127 / 2 + 1
    assert np.abs(v_re - ref.real).max() <= tol and np.abs(v_im - ref.imag).max() <= tol
    exact = [0] + ([B // 4] if B >= 4 else [])
    for k in exact:
        np.testing.assert_array_equal(v_re[k::B // 2], ref.real[k::B // 2])
