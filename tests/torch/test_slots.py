"""fcircnn.torch.slots against the golden model's slot functions (fcircnn.models.spectral)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the PyTorch front end needs the [torch] extra")
torch.set_num_threads(1)

from fcircnn.models import spectral as sp  # noqa: E402
from fcircnn.torch import slots  # noqa: E402


def _complex(parts: "torch.Tensor") -> np.ndarray:
    """``[2, S, ...]`` parts -> complex ``[S, ...]``."""
    a = parts.detach().numpy()
    return a[0] + 1j * a[1]


@pytest.mark.parametrize("B", [4, 8, 16])
def test_to_slots_is_the_golden_packing_and_from_slots_inverts_it(B):
    rng = np.random.default_rng(B)
    x = rng.standard_normal((3, 2 * B, 2, 3, 4))
    xs = slots.to_slots(torch.from_numpy(x), B)
    assert xs.shape == (3, 2, B, 2, 3, 4)
    for n in range(3):
        np.testing.assert_allclose(_complex(xs[n]), sp.to_slots(x[n], B), atol=1e-12)
    np.testing.assert_allclose(slots.from_slots(xs, B).numpy(), x, atol=1e-12)


def test_pad_channels_pads_the_channel_axis_with_zeros():
    x = torch.ones(2, 5, 1, 1, 1)
    padded = slots.pad_channels(x, 4)
    assert padded.shape == (2, 8, 1, 1, 1)
    assert padded[:, 5:].abs().sum() == 0 and padded[:, :5].sum() == 10
    assert slots.pad_channels(padded, 8) is padded
    with pytest.raises(ValueError, match="B must be an even power of two: 4, 8 or 16, not 6"):
        slots.pad_channels(x, 6)


def test_weight_slots_are_the_packed_rfft_of_the_generators():
    w = np.random.default_rng(0).standard_normal((2, 3, 8, 3, 1, 2))
    re, im = slots.weight_slots(torch.from_numpy(w))
    ref = sp.weight_slots(w)
    np.testing.assert_allclose(re.numpy(), ref.real, atol=1e-12)
    np.testing.assert_allclose(im.numpy(), ref.imag, atol=1e-12)


@pytest.mark.parametrize(("B", "stride", "padding"), [(4, (1, 1, 1), (1, 1, 1)),
                                                      (8, (1, 2, 2), (0, 1, 2)),
                                                      (16, (2, 1, 1), (1, 0, 0))])
def test_slot_conv_is_the_golden_slot_conv_and_the_dense_circulant_conv(B, stride, padding):
    rng = np.random.default_rng(B)
    P, Q = 2, 3
    w = rng.standard_normal((P, Q, B, 3, 2, 3))
    x = rng.standard_normal((2, Q * B, 4, 5, 6))
    xs = slots.to_slots(torch.from_numpy(x), B)
    w_re, w_im = slots.weight_slots(torch.from_numpy(w))
    y = slots.slot_conv3d(xs, w_re, w_im, stride, padding)
    ws = sp.weight_slots(w)
    for n in range(2):
        ref = sp.conv3d_slots(sp.to_slots(x[n], B), ws, stride, padding)
        np.testing.assert_allclose(_complex(y[n]), ref, rtol=1e-9, atol=1e-9)
    # and in the time domain: the dense conv3d of the expanded circulant weights
    dense = torch.nn.functional.conv3d(torch.from_numpy(x),
                                       torch.from_numpy(sp.expand_circulant(w)),
                                       stride=stride, padding=padding)
    np.testing.assert_allclose(slots.from_slots(y, B).numpy(), dense.numpy(), atol=1e-9)


def test_slot_conv_refuses_slots_the_weights_do_not_take():
    w_re = w_im = torch.zeros(1, 2, 4, 1, 1, 1)
    with pytest.raises(ValueError, match="activations have 4 slots, weights expect Q\\*B/2 = 8"):
        slots.slot_conv3d(torch.zeros(1, 2, 4, 1, 1, 1), w_re, w_im)
    with pytest.raises(ValueError, match=r"must be \[N, 2, S, D, H, W\]"):
        slots.slot_conv3d(torch.zeros(1, 8, 1, 1, 1), w_re, w_im)
