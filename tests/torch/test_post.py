"""CBN, CReLU and CMaxPool3d on slots against the golden post operators."""

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the PyTorch front end needs the [torch] extra")
torch.set_num_threads(1)

from fcircnn.models import spectral as sp  # noqa: E402
from fcircnn.torch import CBN, CMaxPool3d, CReLU  # noqa: E402


def test_cbn_in_eval_mode_is_the_weights_files_gain_and_offset_per_part_and_slot():
    rng = np.random.default_rng(0)
    gain, offset = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    cbn = CBN(3).double()
    cbn.set_affine(torch.from_numpy(gain), torch.from_numpy(offset))
    cbn.eval()
    np.testing.assert_allclose(cbn.gain.numpy(), gain, rtol=1e-14)
    np.testing.assert_allclose(cbn.offset.numpy(), offset, rtol=1e-14)
    y = torch.from_numpy(rng.standard_normal((2, 2, 3, 2, 2, 2)))
    out = cbn(y).detach().numpy()
    for c in range(2):  # part
        for s in range(3):
            np.testing.assert_allclose(out[:, c, s], y[:, c, s].numpy() * gain[c, s]
                                       + offset[c, s], rtol=1e-12)


def test_cbn_trains_on_batch_statistics_and_tracks_them():
    torch.manual_seed(0)
    cbn = CBN(2, momentum=0.5).double()
    y = torch.randn(4, 2, 2, 3, 3, 3, dtype=torch.float64) * 3 + 5
    out = cbn(y)
    dims = (0, 3, 4, 5)
    np.testing.assert_allclose(out.mean(dim=dims).detach().numpy(), 0, atol=1e-12)
    np.testing.assert_allclose(out.var(dim=dims, unbiased=False).detach().numpy(), 1,
                               atol=1e-3)
    np.testing.assert_allclose(cbn.running_mean.numpy(), 0.5 * y.mean(dim=dims).numpy())
    (out * torch.arange(out.numel(), dtype=torch.float64).reshape(out.shape)).sum().backward()
    assert cbn.weight.grad is not None and (cbn.weight.grad != 0).all()
    assert cbn.bias.grad is not None and cbn.bias.grad.shape == (2, 2)
    with pytest.raises(ValueError, match="more than one value per slot part"):
        cbn(torch.zeros(1, 2, 2, 1, 1, 1, dtype=torch.float64))


def test_crelu_acts_on_each_part():
    y = torch.tensor([[[[[[-1.0]]], [[[2.0]]]], [[[[3.0]]], [[[-4.0]]]]]])
    np.testing.assert_array_equal(CReLU()(y).flatten().numpy(), [0, 2, 3, 0])


@pytest.mark.parametrize(("window", "stride", "padding"), [
    ((1, 2, 2), None, (0, 0, 0)), (2, None, (0, 1, 1)), (3, 2, 1),
    (3, 1, 2),  # padding beyond half the window: torch's max_pool3d alone would refuse it
])
def test_cmaxpool_selects_as_the_golden_model_and_passes_the_gradient_to_the_winner(
        window, stride, padding):
    rng = np.random.default_rng(1)
    y = rng.standard_normal((2, 2, 3, 4, 5, 5))
    y_t = torch.from_numpy(y).requires_grad_()
    out = CMaxPool3d(window, stride, padding)(y_t)
    ref = sp.cmaxpool(y, window, stride, padding)
    np.testing.assert_array_equal(out.detach().numpy(), ref)
    out.sum().backward()
    grad = y_t.grad.numpy()
    # each output's gradient lands on one input equal to it: the selected element
    assert grad.sum() == pytest.approx(out.numel())
    assert set(np.unique(y[grad > 0])) <= set(np.unique(ref))


def test_cmaxpool_refuses_padding_not_below_the_window():
    with pytest.raises(ValueError, match=r"pool padding \(2, 2, 2\) must be >= 0 and smaller"):
        CMaxPool3d(2, padding=2)
