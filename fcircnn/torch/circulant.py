"""Block-circulant convolution and fully connected layers, computed on slots.

Both layers hold their generators as one :class:`torch.nn.Parameter` in the weights file's
layout ``[M'/B, N'/B, B, Kd, Kr, Kc]`` (``M'``, ``N'``: the channel counts padded up to
multiples of ``B``; dense block ``W_pq[r][c] = w[p, q, (r - c) mod B]``) and compute the layer
in the frequency domain exactly as :func:`fcircnn.models.spectral.conv3d_slots` does: weight
slots are the packed ``rfft`` of the generators, slot ``k >= 1`` is a complex product and
slot 0 a component-wise one. Inputs and outputs are slot tensors ``[N, 2, S, D, H, W]``
(:mod:`fcircnn.torch.slots`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from fcircnn.models.resolve import round_up
from fcircnn.models.spectral import accumulator_bound

from .fakequant import quantize_weight_slots
from .slots import _check_block_size, slot_conv3d, weight_slots

__all__ = ["BlockCirculantConv3d", "BlockCirculantLinear"]


def _triple(value: int | Sequence[int], name: str) -> tuple[int, int, int]:
    out = (int(value),) * 3 if isinstance(value, int) else tuple(int(v) for v in value)
    if len(out) != 3 or min(out) < 0:
        raise ValueError(f"{name} must be a non-negative int or a 3-sequence (d, h, w), "
                         f"not {value!r}")
    return out  # type: ignore[return-value]


class BlockCirculantConv3d(nn.Module):
    """3D convolution whose ``B x B`` weight blocks are circulant, on slots.

    Parameters
    ----------
    in_channels, out_channels : int
        ``N`` and ``M`` (real counts; the layer pads both up to multiples of ``B`` as the
        golden model does: the padded input slots are zero, the padded output channels are
        computed like the others and carried along).
    kernel_size, stride, padding : int or (d, h, w)
        As :class:`torch.nn.Conv3d` (cross-correlation, zero padding).
    block_size : int
        ``B``: 4, 8 or 16.

    Attributes
    ----------
    generators : Parameter ``[M'/B, N'/B, B, Kd, Kr, Kc]``
        He-initialised (``std = sqrt(2 / (N * Kd*Kr*Kc))``, the golden model's
        :func:`~fcircnn.models.network.random_weights`) from torch's default generator.

    Notes
    -----
    :meth:`forward` maps slots ``[N, 2, N'/2, D, H, W]`` to slots ``[N, 2, M'/2, Do, Ho, Wo]``.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int | Sequence[int],
                 stride: int | Sequence[int] = 1, padding: int | Sequence[int] = 0, *,
                 block_size: int = 8) -> None:
        super().__init__()
        _check_block_size(block_size)
        if in_channels < 1 or out_channels < 1:
            raise ValueError(f"in_channels and out_channels must be >= 1, not {in_channels} "
                             f"and {out_channels}")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.block_size = block_size
        self.kernel_size = _triple(kernel_size, "kernel_size")
        self.stride = _triple(stride, "stride")
        self.padding = _triple(padding, "padding")
        if min(self.kernel_size) < 1 or min(self.stride) < 1:
            raise ValueError(f"kernel_size and stride must be >= 1, not {self.kernel_size} and "
                             f"{self.stride}")
        shape = (round_up(out_channels, block_size) // block_size,
                 round_up(in_channels, block_size) // block_size, block_size, *self.kernel_size)
        std = math.sqrt(2.0 / (in_channels * math.prod(self.kernel_size)))
        self.generators = nn.Parameter(torch.randn(shape) * std)

    @property
    def generator_shape(self) -> tuple[int, ...]:
        """``(M'/B, N'/B, B, Kd, Kr, Kc)``: the shape of the weights file's generators."""
        return tuple(self.generators.shape)

    @property
    def accumulator_bound(self) -> int:
        """Largest ``|acc|`` of the integer contract
        (:func:`fcircnn.models.spectral.accumulator_bound`)."""
        return accumulator_bound(self.generators.shape[1], self.kernel_size)

    def weight_slots(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Weight slots ``(re, im)``, each ``[P, Q, B/2, Kd, Kr, Kc]``."""
        return weight_slots(self.generators)

    def forward(self, xs: torch.Tensor) -> torch.Tensor:
        """Float slot convolution: slots ``[N, 2, N'/2, ...]`` -> ``[N, 2, M'/2, ...]``."""
        w_re, w_im = self.weight_slots()
        return slot_conv3d(xs, w_re, w_im, self.stride, self.padding)

    def accumulate(self, q: torch.Tensor) -> tuple[torch.Tensor, float]:
        """The integer contract's accumulator, for quantization-aware training.

        Parameters
        ----------
        q : Tensor ``[N, 2, N'/2, D, H, W]``
            Integer-valued activation slot parts in ``[-127, 127]`` (gradients pass through).

        Returns
        -------
        acc : Tensor, float64, ``[N, 2, M'/2, Do, Ho, Wo]``
            The exact integer sums of the int8 weight slots (per-tensor scale, round half to
            even, as :func:`fcircnn.models.quant.quantize_slots`) times ``q``; float64 holds
            them exactly. Gradients reach the generators through a straight-through estimator.
        w_scale : float
            The weight slots' scale (``value ~ int * w_scale``).
        """
        w_re, w_im = self.weight_slots()
        q_re, q_im, w_scale = quantize_weight_slots(w_re, w_im)
        acc = slot_conv3d(q.double(), q_re.double(), q_im.double(), self.stride, self.padding)
        return acc, w_scale

    def extra_repr(self) -> str:
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, padding={self.padding}, block_size={self.block_size}")


class BlockCirculantLinear(BlockCirculantConv3d):
    """Fully connected block-circulant layer: the conv whose kernel covers its whole input map.

    The flatten order is channel-minor (``((d*H + h)*W + w)*C + c``), so the channel blocks
    stay blocks and the layer never leaves the frequency domain (docs/contract.md section 4).

    Parameters
    ----------
    in_features, out_features : int
        Channels of the input map and outputs (``N``, ``M``).
    in_shape : (D, H, W)
        Spatial shape of the input map; ``(1, 1, 1)`` for an ordinary linear layer.
    block_size : int
        ``B``.

    Notes
    -----
    :meth:`forward` maps slots ``[N, 2, N'/2, *in_shape]`` to ``[N, 2, M'/2, 1, 1, 1]``;
    generators are ``[M'/B, N'/B, B, *in_shape]``.
    """

    def __init__(self, in_features: int, out_features: int, *,
                 in_shape: Sequence[int] = (1, 1, 1), block_size: int = 8) -> None:
        super().__init__(in_features, out_features, _triple(in_shape, "in_shape"),
                         block_size=block_size)
        self.in_shape = self.kernel_size

    def _check(self, xs: torch.Tensor) -> None:
        if tuple(xs.shape[3:]) != self.in_shape:
            raise ValueError(f"input map {tuple(xs.shape[3:])} is not the {self.in_shape} "
                             "this fully connected layer covers")

    def forward(self, xs: torch.Tensor) -> torch.Tensor:
        self._check(xs)
        return super().forward(xs)

    def accumulate(self, q: torch.Tensor) -> tuple[torch.Tensor, float]:
        self._check(q)
        return super().accumulate(q)

    def extra_repr(self) -> str:
        return (f"{self.in_channels}, {self.out_channels}, in_shape={self.in_shape}, "
                f"block_size={self.block_size}")
