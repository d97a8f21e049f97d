"""Quantization-aware training's fake int8 contract against the golden integer functions."""

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the PyTorch front end needs the [torch] extra")
torch.set_num_threads(1)

from fcircnn.models import quant  # noqa: E402
from fcircnn.models import spectral as sp  # noqa: E402
from fcircnn.torch.fakequant import (  # noqa: E402
    ActObserver,
    fake_quantize,
    requantize,
    round_ste,
    tensor_scale,
)


def test_round_is_half_to_even_exact_and_straight_through():
    x = torch.tensor([0.5, 1.5, -2.5, 2.4999, 100.7], requires_grad=True)
    y = round_ste(x)
    np.testing.assert_array_equal(y.detach().numpy(), np.rint(x.detach().numpy()))
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), 1)


def test_fake_quantize_is_the_golden_quantizer_with_a_clipped_gradient():
    rng = np.random.default_rng(0)
    v = rng.standard_normal((2, 8, 3)) * 2
    scale = 3.0 / 127  # values beyond 3 saturate
    v_t = torch.from_numpy(v).requires_grad_()
    q = fake_quantize(v_t, scale)
    ref_re, ref_im = quant.quantize_slots(v[0] + 1j * v[1], np.full((2, 4), scale))
    np.testing.assert_array_equal(q.detach().numpy(), np.stack([ref_re, ref_im]))
    q.sum().backward()
    inside = np.abs(v / scale) < 127
    np.testing.assert_allclose(v_t.grad.numpy(), np.where(inside, 1 / scale, 0))
    assert (~inside).any() and inside.any()


def test_tensor_scale_is_the_golden_per_tensor_scale():
    rng = np.random.default_rng(1)
    ws = rng.standard_normal((2, 3, 4, 3, 3, 3)) + 1j * rng.standard_normal((2, 3, 4, 3, 3, 3))
    expected = quant.weight_scales(ws, "tensor")
    assert np.all(expected == expected[0, 0])
    got = tensor_scale(torch.from_numpy(ws.real), torch.from_numpy(ws.imag))
    assert got == pytest.approx(expected[0, 0], rel=1e-15)
    assert tensor_scale(torch.zeros(3)) == 1.0


def test_observer_keeps_a_running_maximum_in_training_the_maximum_when_calibrating():
    obs = ActObserver(momentum=0.5)
    obs.observe(torch.tensor([-4.0, 1.0]))
    assert obs.scale == pytest.approx(4 / 127)
    obs.observe(torch.tensor([2.0]))
    assert obs.scale == pytest.approx(3 / 127)
    obs.eval()
    obs.observe(torch.tensor([100.0]))
    assert obs.scale == pytest.approx(3 / 127)
    obs.reset()
    obs.calibrating = True
    for peak in (2.0, 7.0, 5.0):
        obs.observe(torch.tensor([peak]))
    assert obs.scale == pytest.approx(7 / 127)


@pytest.mark.parametrize(("residual", "relu"), [(False, False), (True, True), (True, False)])
def test_requantize_is_the_integer_post_unit_bit_for_bit(residual, relu):
    rng = np.random.default_rng(2)
    S, bound = 6, sp.accumulator_bound(2, (3, 3, 3))
    acc = rng.integers(-200_000, 200_000, (2, 2, S, 2, 3, 3))
    gain, offset = rng.uniform(0.5, 2, (2, S)), rng.standard_normal((2, S))
    acc_scale, out_scale, res_scale = 1e-5, 0.02, 0.03
    res = rng.integers(-127, 128, acc.shape) if residual else None
    acc_t = torch.from_numpy(acc).double().requires_grad_()
    gain_t = torch.from_numpy(gain).requires_grad_()
    out = requantize(acc_t, acc_scale, gain_t, torch.from_numpy(offset), out_scale, bound,
                     res=None if res is None else torch.from_numpy(res * res_scale),
                     res_scale=res_scale if residual else None, relu=relu)
    const = np.ones((2, 1))
    post = quant.fold_post(gain, offset, const * acc_scale, const * out_scale, bound,
                           const * res_scale if residual else None)
    for n in range(2):
        for c in range(2):
            ref = sp.post_process(acc[n, c], **post.part(c),
                                  res=None if res is None else res[n, c], relu=relu)
            got = out[n, c].detach().numpy() / out_scale  # int8 times the scale, exactly
            np.testing.assert_allclose(got, np.rint(got), atol=1e-9)
            np.testing.assert_array_equal(np.rint(got), ref)
    out.sum().backward()
    # the gradient is the float post stage's, zero where the output saturates
    y_float = (gain[None, :, :, None, None, None] * acc * acc_scale
               + offset[None, :, :, None, None, None]
               + (0 if res is None else res * res_scale)) / out_scale
    live = (y_float > (0 if relu else -127)) & (y_float < 127)
    expected = np.where(live, gain[None, :, :, None, None, None] * acc_scale, 0)
    np.testing.assert_allclose(acc_t.grad.numpy(), expected, rtol=1e-12)
    assert gain_t.grad is not None and live.any() and (~live).any()
