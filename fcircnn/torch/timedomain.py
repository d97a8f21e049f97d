"""The time-domain layers in PyTorch: layouts, the dense layer and the integer transforms of
:mod:`fcircnn.models.timedomain`, batched and differentiable.

Every map between layers is a slot tensor ``[N, 2, S, D, H, W]`` in the layout the network file
resolves for it (``slots``, ``lanes``, ``lane0``, ``deferred``, ``spread``: ``docs/golden.md``,
"Time-domain layers"). :class:`DenseConv3d` computes a dense conv or fc layer on the time
domain in float, and its accumulators as the block-circulant datapath does in the integer
contract (:meth:`DenseConv3d.accumulate`); :func:`rfft_int` is the contract's integer rfft.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from fcircnn.arch.transforms import irfft_lane0_weights, rfft_twiddles
from fcircnn.models.config import ResolvedLayer
from fcircnn.models.resolve import DEFERRED, LANE0, LANES, SLOTS, SPREAD

from .fakequant import quantize_weight_slots
from .slots import from_slots, pad_channels, slot_conv3d, to_slots, weight_slots

__all__ = ["DenseConv3d", "from_layout", "irfft_lane0", "rfft_int", "to_layout"]


def to_layout(x: torch.Tensor, layout: str, B: int) -> torch.Tensor:
    """A time-domain batch ``[N, C, D, H, W]`` as slots ``[N, 2, S, D, H, W]`` in ``layout``
    (:func:`fcircnn.models.timedomain.to_layout`)."""
    if layout in (SLOTS, DEFERRED):
        return to_slots(pad_channels(x, B), B)
    n, c = x.shape[:2]
    if layout == LANES:
        x = pad_channels(x, B)
        return x.reshape(n, x.shape[1] // 2, 2, *x.shape[2:]).transpose(1, 2)
    if layout in (LANE0, SPREAD):
        half = B // 2
        re = x.unsqueeze(2).expand(n, c, half, *x.shape[2:]) if layout == SPREAD else \
            torch.cat([x.unsqueeze(2), x.new_zeros(n, c, half - 1, *x.shape[2:])], dim=2)
        im = torch.cat([x.unsqueeze(2), x.new_zeros(n, c, half - 1, *x.shape[2:])], dim=2) \
            if layout == SPREAD else torch.zeros_like(re)
        return torch.stack([re, im], dim=1).reshape(n, 2, c * half, *x.shape[2:])
    raise ValueError(f"unknown layout {layout!r}")


def from_layout(xs: torch.Tensor, layout: str, B: int, channels: int) -> torch.Tensor:
    """The time-domain batch ``[N, channels, D, H, W]`` slots ``xs`` hold in ``layout``
    (:func:`fcircnn.models.timedomain.from_layout`)."""
    if layout in (SLOTS, DEFERRED):
        return from_slots(xs, B)[:, :channels]
    n, _, s = xs.shape[:3]
    if layout == LANES:
        return xs.transpose(1, 2).reshape(n, 2 * s, *xs.shape[3:])[:, :channels]
    if layout in (LANE0, SPREAD):
        return xs[:, 0, :: B // 2][:, :channels]
    raise ValueError(f"unknown layout {layout!r}")


def irfft_lane0(acc: torch.Tensor, B: int) -> torch.Tensor:
    """A ``lane0`` layer's accumulators ``[N, 2, S, ...]`` as its post stage takes them: each
    block's ``u = Y0.re + Y0.im + 2 * sum_{k>=1} Yk.re`` in its first part, zero elsewhere
    (:func:`fcircnn.models.timedomain.irfft_lane0`)."""
    half = B // 2
    w_re, w_im = (acc.new_tensor(w) for w in irfft_lane0_weights(B))
    n, _, s = acc.shape[:3]
    blocks = acc.reshape(n, 2, s // half, half, *acc.shape[3:])
    shape = (1, half) + (1,) * (acc.ndim - 3)
    u = (blocks[:, 0] * w_re.reshape(shape) + blocks[:, 1] * w_im.reshape(shape)).sum(dim=2)
    out = torch.zeros_like(blocks)
    out[:, 0, :, 0] = u
    return out.reshape(acc.shape)


def rfft_int(t: torch.Tensor, B: int) -> torch.Tensor:
    """The integer rfft of int time lanes ``[N, 2, S, ...]`` (float64, exact): ``v[part]`` per
    slot, each block's lanes times the twiddles (:func:`fcircnn.models.timedomain.rfft_int`)."""
    half = B // 2
    table = t.new_tensor(rfft_twiddles(B))  # [part, k, n]
    n, _, s = t.shape[:3]
    lanes = t.transpose(1, 2).reshape(n, s // half, B, *t.shape[3:])  # lane 2s + part
    v = torch.einsum("ckl,nql...->ncqk...", table, lanes)  # [N, part, Q, k, ...]
    return v.reshape(n, 2, s, *t.shape[3:])


class DenseConv3d(nn.Module):
    """A dense conv or fc layer of a network file (``dense: true``): weight ``[M, N, *K]``
    (an fc layer's kernel is its input map) and, with ``bias: true``, a bias ``[M]``.

    :meth:`forward` takes slots in the layer's input layout (``spread`` or ``deferred``) and
    gives the time-domain conv with its bias in its output layout (``lanes`` or ``lane0``);
    :meth:`accumulate` gives the integer contract's accumulators, the layer on the
    block-circulant datapath (:mod:`fcircnn.models.timedomain`).

    Parameters
    ----------
    layer : ResolvedLayer
        A dense layer.
    """

    def __init__(self, layer: ResolvedLayer) -> None:
        super().__init__()
        if not layer.dense:
            raise ValueError(f"layer {layer.name!r} is not dense")
        self.layer = layer
        shape = (layer.out_channels, layer.in_channels, *layer.kernel)
        std = math.sqrt(2.0 / (layer.in_channels * math.prod(layer.kernel)))
        self.weight = nn.Parameter(torch.randn(shape) * std)
        self.bias = nn.Parameter(torch.zeros(layer.out_channels)) if layer.bias else None

    def time_input(self, xs: torch.Tensor) -> torch.Tensor:
        L = self.layer
        return from_layout(xs, L.in_layout, L.block_size, L.in_channels)

    def forward(self, xs: torch.Tensor) -> torch.Tensor:
        """The time-domain conv with its bias ``[N, M, Do, Ho, Wo]`` of slots ``xs``."""
        L = self.layer
        return F.conv3d(self.time_input(xs), self.weight, self.bias, L.stride, L.padding)

    def _datapath_slots(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The weight slots ``(re, im)`` the datapath multiplies (before quantization)."""
        L, B = self.layer, self.layer.block_size
        if L.in_layout == SPREAD:
            w = pad_channels(self.weight, B, dim=0)
            M = w.shape[0]
            lanes = w.reshape(M // B, B // 2, 2, *w.shape[1:])  # [P, s, part, N, *K]
            return lanes[:, :, 0].transpose(1, 2), lanes[:, :, 1].transpose(1, 2)
        w = pad_channels(self.weight, B, dim=1)
        blocks = w.reshape(w.shape[0], w.shape[1] // B, B, *w.shape[2:])
        return weight_slots(blocks[:, :, (-torch.arange(B)) % B])

    def accumulate(self, q: torch.Tensor) -> tuple[torch.Tensor, float]:
        """The integer contract's accumulators of int slot parts ``q`` (float64, exact, with
        straight-through gradients to the weight) and their scale per unit of the input's:
        the weight slots' per-tensor scale, over ``B`` for a ``lane0`` layer, whose
        accumulators are each block's lane-0 sums (:func:`irfft_lane0`). The bias is the post
        stage's."""
        L = self.layer
        w_re, w_im = self._datapath_slots()
        q_re, q_im, w_scale = quantize_weight_slots(w_re, w_im)
        acc = slot_conv3d(q.double(), q_re.double(), q_im.double(), L.stride, L.padding)
        if L.out_layout == LANE0:
            return irfft_lane0(acc, L.block_size), w_scale / L.block_size
        return acc, w_scale

    def extra_repr(self) -> str:
        L = self.layer
        return (f"{L.in_channels}, {L.out_channels}, kernel_size={L.kernel}, stride={L.stride}, "
                f"padding={L.padding}, bias={L.bias}, {L.in_layout} -> {L.out_layout}")
