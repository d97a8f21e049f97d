"""arch/transforms.py: the integer transforms' constants."""

import numpy as np
import pytest

from fcircnn.arch.transforms import (
    RFFT_BITS,
    RFFT_FRACTION_BITS,
    irfft_lane0_weights,
    rfft_twiddles,
)


@pytest.mark.parametrize("B", [4, 8, 16])
def test_twiddles_are_the_rounded_packed_rfft(B):
    table = np.asarray(rfft_twiddles(B), dtype=np.float64) / 2**RFFT_FRACTION_BITS
    eye = np.fft.rfft(np.eye(B), axis=0)  # [bin, lane]: the transform of each lane alone
    np.testing.assert_allclose(table[0, 1:], eye[1:B // 2].real, atol=2**-RFFT_FRACTION_BITS)
    np.testing.assert_allclose(table[1, 1:], eye[1:B // 2].imag, atol=2**-RFFT_FRACTION_BITS)
    np.testing.assert_array_equal(table[0, 0], eye[0].real)  # slot 0: bin 0 and bin B/2
    np.testing.assert_array_equal(table[1, 0], eye[B // 2].real)


@pytest.mark.parametrize("B", [4, 8, 16])
def test_the_rfft_sum_fits_its_width(B):
    worst = np.abs(np.asarray(rfft_twiddles(B))).sum(axis=2).max() * 127
    assert worst < 2 ** (RFFT_BITS - 1)


@pytest.mark.parametrize("B", [4, 8, 16])
def test_lane0_weights_give_lane_0_of_the_irfft(B):
    rng = np.random.default_rng(B)
    x = rng.standard_normal(B)
    spec = np.fft.rfft(x)
    re, im = irfft_lane0_weights(B)
    slots_re = np.r_[spec[0].real, spec[1:B // 2].real]
    slots_im = np.r_[spec[B // 2].real, spec[1:B // 2].imag]
    assert np.dot(re, slots_re) + np.dot(im, slots_im) == pytest.approx(B * x[0])


@pytest.mark.parametrize("B", [2, 6, 12, "8"])
def test_a_block_size_that_is_no_power_of_two_is_refused(B):
    with pytest.raises(ValueError, match="power of two"):
        rfft_twiddles(B)
    with pytest.raises(ValueError, match="power of two"):
        irfft_lane0_weights(B)
