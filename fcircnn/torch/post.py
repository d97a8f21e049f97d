"""The frequency-domain post operators on slots ``[N, 2, S, D, H, W]``: CBN, CReLU, CMaxPool.

Each acts on the real and the imaginary part of every slot independently, as the post-units
do (docs/contract.md section 6; :func:`fcircnn.models.spectral.cbn`, :func:`~fcircnn.models.spectral
.crelu`, :func:`~fcircnn.models.spectral.cmaxpool`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["CBN", "CMaxPool3d", "CReLU"]


def _per_slot(a: torch.Tensor) -> torch.Tensor:
    """``[2, S]`` -> ``[1, 2, S, 1, 1, 1]``."""
    return a.reshape(1, *a.shape, 1, 1, 1)


class CBN(nn.Module):
    """Batch normalisation in the frequency domain, per slot and part.

    Trains as :class:`torch.nn.BatchNorm3d` does, with one channel per slot part: in training
    mode it normalises with the batch's mean and (biased) variance over the batch and the
    voxels and updates ``running_mean``/``running_var`` (unbiased variance) by ``momentum``;
    in eval mode it is the affine map of the weights file,
    ``t = gain * y + offset`` with ``gain = weight / sqrt(running_var + eps)`` and
    ``offset = bias - running_mean * gain`` (``<layer>.bn_gain`` and ``<layer>.bn_offset``,
    ``[2, S]``: axis 0 the part, axis 1 the output slot).

    Parameters
    ----------
    slots : int
        ``S``, the output slots of the layer (``M'/2``).
    eps, momentum : float
        As :class:`torch.nn.BatchNorm3d`.
    """

    running_mean: torch.Tensor
    running_var: torch.Tensor

    def __init__(self, slots: int, *, eps: float = 1e-5, momentum: float = 0.1) -> None:
        super().__init__()
        if slots < 1:
            raise ValueError(f"slots must be >= 1, not {slots}")
        self.slots = slots
        self.eps = eps
        self.momentum = momentum
        self.weight = nn.Parameter(torch.ones(2, slots))
        self.bias = nn.Parameter(torch.zeros(2, slots))
        self.register_buffer("running_mean", torch.zeros(2, slots))
        self.register_buffer("running_var", torch.ones(2, slots))

    def affine(self, y: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """``(gain, offset)``, each ``[2, S]``: from the statistics of ``y`` (slots
        ``[N, 2, S, D, H, W]``, updating the running ones) in training mode, from the running
        statistics otherwise (or when ``y`` is ``None``)."""
        if self.training and y is not None:
            if y.shape[1:3] != (2, self.slots):
                raise ValueError(f"CBN of {self.slots} slots got slots {list(y.shape)}")
            count = y.shape[0] * math.prod(y.shape[3:])
            if count < 2:
                raise ValueError(f"CBN needs more than one value per slot part to train, got "
                                 f"input {list(y.shape)} (a batch of one clip on a 1x1x1 map)")
            dims = (0, 3, 4, 5)
            mean = y.mean(dim=dims)
            var = y.var(dim=dims, unbiased=False)
            with torch.no_grad():
                self.running_mean.lerp_(mean.to(self.running_mean.dtype), self.momentum)
                self.running_var.lerp_((var * count / (count - 1)).to(self.running_var.dtype),
                                       self.momentum)
        else:
            mean, var = self.running_mean, self.running_var
        gain = self.weight / torch.sqrt(var + self.eps)
        return gain, self.bias - mean * gain

    @property
    def gain(self) -> torch.Tensor:
        """The inference gain ``[2, S]`` (running statistics), detached."""
        return (self.weight / torch.sqrt(self.running_var + self.eps)).detach()

    @property
    def offset(self) -> torch.Tensor:
        """The inference offset ``[2, S]`` (running statistics), detached."""
        return (self.bias - self.running_mean * self.gain).detach()

    @torch.no_grad()
    def set_affine(self, gain: torch.Tensor, offset: torch.Tensor) -> None:
        """Make the inference form ``gain * y + offset`` (both ``[2, S]``): running mean 0,
        running variance 1, ``weight = gain * sqrt(1 + eps)``, ``bias = offset``."""
        shape = (2, self.slots)
        for name, value in (("gain", gain), ("offset", offset)):
            if tuple(value.shape) != shape:
                raise ValueError(f"CBN {name} must have shape {shape}, not "
                                 f"{tuple(value.shape)}")
        self.running_mean.zero_()
        self.running_var.fill_(1.0)
        self.weight.copy_(gain * math.sqrt(1.0 + self.eps))
        self.bias.copy_(offset)

    def forward(self, y: torch.Tensor) -> torch.Tensor:
        gain, offset = self.affine(y)
        return y * _per_slot(gain) + _per_slot(offset)

    def extra_repr(self) -> str:
        return f"{self.slots}, eps={self.eps}, momentum={self.momentum}"


class CReLU(nn.Module):
    """CReLU: ``max(., 0)`` on the real and the imaginary part of every slot."""

    def forward(self, y: torch.Tensor) -> torch.Tensor:
        return torch.relu(y)


def _triple(value: int | Sequence[int]) -> tuple[int, int, int]:
    out = (int(value),) * 3 if isinstance(value, int) else tuple(int(v) for v in value)
    if len(out) != 3:
        raise ValueError(f"expected an int or (d, h, w), not {value!r}")
    return out  # type: ignore[return-value]


class CMaxPool3d(nn.Module):
    """CMaxPool: the maximum over each window of each part, padded voxels never winning.

    The selection is :func:`fcircnn.models.spectral.cmaxpool`'s (output size
    ``(n + 2p - k) // s + 1`` per axis; ``stride`` defaults to ``window``; ``padding`` below
    the window, which keeps a real voxel in every window); the gradient flows to the selected
    element of each window (to one of them on a tie).
    """

    def __init__(self, window: int | Sequence[int], stride: int | Sequence[int] | None = None,
                 padding: int | Sequence[int] = 0) -> None:
        super().__init__()
        self.window = _triple(window)
        self.stride = self.window if stride is None else _triple(stride)
        self.padding = _triple(padding)
        if any(p >= k or p < 0 for p, k in zip(self.padding, self.window, strict=True)):
            raise ValueError(f"pool padding {self.padding} must be >= 0 and smaller than the "
                             f"window {self.window}")

    def forward(self, y: torch.Tensor) -> torch.Tensor:
        n, parts, s = y.shape[:3]
        flat = y.reshape(n, parts * s, *y.shape[3:])
        pd, ph, pw = self.padding
        if any(self.padding):
            # Padding with -inf: a padded voxel never wins (torch's own padding is limited to
            # half the window).
            flat = F.pad(flat, (pw, pw, ph, ph, pd, pd), value=float("-inf"))
        out = F.max_pool3d(flat, self.window, self.stride)
        return out.reshape(n, parts, s, *out.shape[2:])

    def extra_repr(self) -> str:
        return f"window={self.window}, stride={self.stride}, padding={self.padding}"
