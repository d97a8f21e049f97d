"""Quantization-aware training: the int8 slot contract faked in floating point.

What is faked, and how exactly (docs/contract.md section 5, :mod:`fcircnn.models.quant`)
----------------------------------------------------------------------------------------
* **Scales** are per tensor (the golden contract's ``granularity="tensor"``): one scale shared
  by the real and imaginary parts of every slot, ``scale = max|part| / 127`` (1 for an all-zero
  tensor). Weight scales come from the current weight slots at every step; activation scales
  from an :class:`ActObserver` (a running maximum while training, the maximum over a
  calibration set after :meth:`fcircnn.torch.SlotNetwork.calibrate`, as ``fcircnn golden
  --calibration``). Scales are not learned (no gradient).
* **Quantization** is ``clip(round(v / scale), -127, 127)``, round half to even
  (``numpy.rint``, ``torch.round``); ``-128`` never occurs.
* **The post-unit** is run in integers, not approximated: :func:`requantize` folds CBN, the
  residual and the scales with :func:`fcircnn.models.quant.fold_post` (the same ``mult``,
  ``bias``, ``shift`` and ``res_mult`` the compiler writes) and evaluates
  ``floor((acc*mult + bias + res*res_mult + round) / 2**shift)`` clamped to ``[lo, 127]`` in
  float64, which holds every int48 value exactly. With the same weights, CBN and scales the
  forward pass therefore equals the golden integer contract bit for bit.
* **Gradients** use the straight-through estimator: through ``round`` as the identity, through
  the clamp only inside ``[lo, 127]``, and through the post-unit as through its float
  counterpart ``gain * acc * acc_scale + offset + residual`` (the rounding of ``mult`` and the
  shift are invisible to the gradient).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from fcircnn.models import quant
from fcircnn.models.spectral import INT8_MAX

__all__ = [
    "ActObserver",
    "fake_quantize",
    "quantize_weight_slots",
    "requantize",
    "round_ste",
    "tensor_scale",
]


def round_ste(x: torch.Tensor) -> torch.Tensor:
    """``round(x)`` (half to even) forward, exactly; the identity backward."""
    return torch.round(x).detach() + (x - x.detach())


def tensor_scale(*parts: torch.Tensor) -> float:
    """The per-tensor scale of slot parts: ``max |value| / 127``, or 1 if all are zero
    (:func:`fcircnn.models.quant.slot_scales` with ``granularity="tensor"``)."""
    peak = max(float(p.detach().abs().max()) if p.numel() else 0.0 for p in parts)
    return peak / INT8_MAX if peak > 0 else 1.0


def fake_quantize(v: torch.Tensor, scale: float) -> torch.Tensor:
    """Integer parts ``clip(round(v / scale), -127, 127)`` as a float tensor (same dtype as
    ``v``); gradient ``1/scale`` inside the range, 0 where the clamp saturates."""
    return torch.clamp(round_ste(v / scale), -INT8_MAX, INT8_MAX)


def quantize_weight_slots(w_re: torch.Tensor, w_im: torch.Tensor
                          ) -> tuple[torch.Tensor, torch.Tensor, float]:
    """Weight slots -> integer-valued parts and their shared per-tensor scale
    (:func:`fcircnn.models.quant.weight_scales`, then :func:`fake_quantize`)."""
    scale = tensor_scale(w_re, w_im)
    return fake_quantize(w_re, scale), fake_quantize(w_im, scale), scale


class ActObserver(nn.Module):
    """The scale of one activation tensor: ``running_max / 127``.

    In training mode each observed batch updates ``running_max`` (its first batch sets it,
    later ones move it by ``momentum`` toward the batch's maximum magnitude); in eval mode it
    stays fixed. While :attr:`calibrating` is set (:meth:`fcircnn.torch.SlotNetwork
    .calibrate`), it keeps the maximum over everything observed instead, as the golden
    model's calibration does.
    """

    running_max: torch.Tensor
    initialized: torch.Tensor

    def __init__(self, momentum: float = 0.1) -> None:
        super().__init__()
        self.momentum = momentum
        self.calibrating = False
        self.register_buffer("running_max", torch.zeros((), dtype=torch.float64))
        self.register_buffer("initialized", torch.zeros((), dtype=torch.bool))

    @property
    def scale(self) -> float:
        """``running_max / 127`` (1 while nothing nonzero was observed)."""
        peak = float(self.running_max)
        return peak / INT8_MAX if peak > 0 else 1.0

    def reset(self) -> None:
        """Forget everything observed."""
        self.running_max.zero_()
        self.initialized.fill_(False)

    @torch.no_grad()
    def observe(self, v: torch.Tensor) -> None:
        """Take ``v``'s largest magnitude into account (see the class description)."""
        if not (self.calibrating or self.training):
            return
        peak = v.detach().abs().max().double() if v.numel() else self.running_max.new_zeros(())
        if self.calibrating or not bool(self.initialized):
            self.running_max.copy_(torch.maximum(self.running_max, peak) if self.calibrating
                                   else peak)
        else:
            self.running_max.mul_(1 - self.momentum).add_(self.momentum * peak)
        self.initialized.fill_(True)

    def extra_repr(self) -> str:
        return f"scale={self.scale:.4g}, momentum={self.momentum}"


def _per_slot(a: np.ndarray, like: torch.Tensor) -> torch.Tensor:
    """``[2, S]`` -> a float64 tensor shaped to broadcast over ``[N, 2, S, D, H, W]``."""
    return torch.from_numpy(a.astype(np.float64)).to(like.device).reshape(1, *a.shape, 1, 1, 1)


def requantize(acc: torch.Tensor, acc_scale: float, gain: torch.Tensor, offset: torch.Tensor,
               out_scale: float, acc_bound: int, *, res: torch.Tensor | None = None,
               res_scale: float | None = None, relu: bool = False) -> torch.Tensor:
    """The post-unit in integers, with a straight-through gradient.

    Parameters
    ----------
    acc : Tensor ``[N, 2, S, D, H, W]``
        Integer-valued accumulator (float64, exact), carrying gradients.
    acc_scale, out_scale : float
        Scales of the accumulator (``w_scale * in_scale``) and of the int8 output.
    gain, offset : Tensor ``[2, S]``
        Float CBN (1 and 0 without CBN).
    acc_bound : int
        The layer's proved ``|acc|`` bound (chooses the shift, as the compiler does).
    res, res_scale : Tensor ``[N, 2, S, D, H, W]`` and float, optional
        The shortcut, dequantized (``int * res_scale``), and its scale.
    relu : bool
        CReLU (the clamp's low end is 0 instead of -127).

    Returns
    -------
    Tensor, float64, ``[N, 2, S, D, H, W]``
        The dequantized output ``y * out_scale``, ``y`` the int8 the post-unit produces
        (:func:`fcircnn.models.spectral.post_process` before the pool) with the parameters of
        :func:`fcircnn.models.quant.fold_post`.

    Raises
    ------
    OverflowError
        From :func:`~fcircnn.models.quant.fold_post`, when the folded parameters do not fit.
    """
    if (res is None) != (res_scale is None):
        raise ValueError("res and res_scale must be given together")
    const = np.ones((2, 1))
    post = quant.fold_post(gain.detach().double().cpu().numpy(),
                           offset.detach().double().cpu().numpy(), const * acc_scale,
                           const * out_scale, acc_bound,
                           None if res_scale is None else const * res_scale)
    acc_exact = acc.detach()
    t = acc_exact * _per_slot(post.mult, acc) + _per_slot(post.bias, acc)
    g = gain.double().reshape(1, *gain.shape, 1, 1, 1)
    b = offset.double().reshape(1, *offset.shape, 1, 1, 1)
    y_float = g * acc * acc_scale + b
    if res is not None:
        assert post.res_mult is not None and res_scale is not None
        t = t + torch.round(res.detach().double() / res_scale) * _per_slot(post.res_mult, acc)
        y_float = y_float + res.double()
    shift = _per_slot(post.shift, acc)
    rounding = torch.where(shift > 0, torch.exp2(shift - 1), torch.zeros_like(shift))
    lo = 0 if relu else -INT8_MAX
    y_int = torch.clamp(torch.floor((t + rounding) / torch.exp2(shift)), lo, INT8_MAX)
    y_float = torch.clamp(y_float / out_scale, lo, INT8_MAX)
    # The value is exactly y_int * out_scale; the gradient is the float path's.
    return y_int * out_scale + (y_float - y_float.detach()) * out_scale
