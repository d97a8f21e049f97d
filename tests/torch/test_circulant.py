"""BlockCirculantConv3d and BlockCirculantLinear against the golden model."""

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the PyTorch front end needs the [torch] extra")
torch.set_num_threads(1)

from fcircnn.models import quant  # noqa: E402
from fcircnn.models import spectral as sp  # noqa: E402
from fcircnn.torch import (  # noqa: E402
    BlockCirculantConv3d,
    BlockCirculantLinear,
    from_slots,
    to_slots,
)


def test_conv_pads_channels_and_computes_the_golden_slot_conv():
    torch.manual_seed(0)
    conv = BlockCirculantConv3d(5, 12, 3, stride=(1, 2, 2), padding=1, block_size=4).double()
    assert conv.generator_shape == (3, 2, 4, 3, 3, 3)
    x = torch.randn(2, 8, 3, 6, 6, dtype=torch.float64)  # 5 channels padded to 8
    x[:, 5:] = 0
    xs = to_slots(x, 4)
    y = conv(xs)
    assert y.shape == (2, 2, 6, 3, 3, 3)
    ws = sp.weight_slots(conv.generators.detach().numpy())
    ref = sp.conv3d_slots(sp.to_slots(x[1].numpy(), 4), ws, (1, 2, 2), 1)
    np.testing.assert_allclose(y[1, 0].detach().numpy(), ref.real, atol=1e-9)
    np.testing.assert_allclose(y[1, 1].detach().numpy(), ref.imag, atol=1e-9)


def test_generators_are_he_initialised_like_the_golden_random_weights():
    torch.manual_seed(1)
    conv = BlockCirculantConv3d(64, 64, 3, block_size=8)
    assert conv.generators.std().item() == pytest.approx((2 / (64 * 27)) ** 0.5, rel=0.05)


def test_linear_is_a_dense_linear_over_the_channel_minor_flatten():
    torch.manual_seed(2)
    fc = BlockCirculantLinear(8, 16, in_shape=(1, 2, 2), block_size=8).double()
    x = torch.randn(3, 8, 1, 2, 2, dtype=torch.float64)
    y = fc(to_slots(x, 8))
    assert y.shape == (3, 2, 8, 1, 1, 1)
    dense = sp.expand_circulant(fc.generators.detach().numpy())  # [16, 8, 1, 2, 2]
    # channel-minor flatten: ((d*H + h)*W + w)*C + c
    w_flat = np.moveaxis(dense, 1, -1).reshape(16, -1)
    x_flat = np.moveaxis(x.numpy(), 1, -1).reshape(3, -1)
    ref = x_flat @ w_flat.T
    np.testing.assert_allclose(from_slots(y, 8).detach().numpy()[:, :, 0, 0, 0], ref,
                               atol=1e-9)
    with pytest.raises(ValueError, match=r"input map \(1, 1, 1\) is not the \(1, 2, 2\)"):
        fc(torch.zeros(1, 2, 4, 1, 1, 1, dtype=torch.float64))


def test_gradients_reach_every_generator():
    torch.manual_seed(3)
    conv = BlockCirculantConv3d(8, 8, 3, padding=1, block_size=8)
    y = conv(to_slots(torch.randn(2, 8, 3, 3, 3), 8))
    (y**2).sum().backward()
    grad = conv.generators.grad
    assert grad is not None and grad.shape == conv.generators.shape
    assert (grad != 0).all()


def test_accumulate_is_the_integer_contract_with_the_golden_weight_quantization():
    torch.manual_seed(4)
    conv = BlockCirculantConv3d(16, 8, 3, padding=(1, 0, 1), block_size=8).double()
    rng = np.random.default_rng(4)
    q = rng.integers(-127, 128, (2, 2, 8, 3, 4, 5))
    acc, w_scale = conv.accumulate(torch.from_numpy(q).double())
    ws = sp.weight_slots(conv.generators.detach().numpy())
    scale = quant.weight_scales(ws, "tensor")
    assert w_scale == pytest.approx(scale[0, 0], rel=1e-12)
    wq_re, wq_im = quant.quantize_slots(ws, scale, axis=2)
    for n in range(2):
        acc_re, acc_im = sp.conv3d_slots_int(q[n, 0], q[n, 1], wq_re, wq_im, 1, (1, 0, 1))
        np.testing.assert_array_equal(acc[n, 0].detach().numpy(), acc_re)
        np.testing.assert_array_equal(acc[n, 1].detach().numpy(), acc_im)
    acc.sum().backward()  # the straight-through estimator reaches the generators
    assert conv.generators.grad is not None and conv.generators.grad.abs().sum() > 0


def test_bad_parameters_are_refused_with_the_rule():
    with pytest.raises(ValueError, match="B must be an even power of two: 4, 8 or 16, not 2"):
        BlockCirculantConv3d(8, 8, 3, block_size=2)
    with pytest.raises(ValueError, match="kernel_size must be"):
        BlockCirculantConv3d(8, 8, (3, 3))
    with pytest.raises(ValueError, match="in_channels and out_channels must be >= 1"):
        BlockCirculantConv3d(0, 8, 3)
