"""Slots in PyTorch: the packed half spectrum of :mod:`fcircnn.models.spectral`, batched and
differentiable.

Layout
------
A time-domain map is ``[N, C, D, H, W]`` (``C`` a multiple of ``B``). Its slots are a real
tensor ``[N, 2, C/2, D, H, W]``: axis 1 is the part (0 = real, 1 = imaginary), axis 2 the slot
``s = q*(B/2) + k`` of channel block ``q``, with the packing of docs/contract.md section 2
(``slot 0 = Re X[0] + i*Re X[B/2]``, ``slot k = X[k]``, ``X = rfft`` over the block's ``B``
channels, unnormalised). Keeping the two parts on their own axis lets CBN, CReLU and CMaxPool
act on each part as the post-units do, and keeps every operation real except the FFTs.

Every function here computes what its namesake in :mod:`fcircnn.models.spectral` computes
(tested to float64 rounding), on a batch, with gradients.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from fcircnn.models.spectral import BLOCK_SIZES

__all__ = [
    "from_slots",
    "pad_channels",
    "slot_conv3d",
    "slot_gemm_weights",
    "to_slots",
    "weight_slots",
]

Triple = tuple[int, int, int]


def _check_block_size(B: int) -> None:
    if B not in BLOCK_SIZES:
        raise ValueError(f"B must be an even power of two: 4, 8 or 16, not {B}")


def pad_channels(x: torch.Tensor, B: int, dim: int = 1) -> torch.Tensor:
    """Zero-pad dimension ``dim`` of ``x`` up to a multiple of ``B`` (``x`` itself if aligned).

    The default ``dim = 1`` is the channel axis of a batch ``[N, C, D, H, W]``.
    """
    _check_block_size(B)
    extra = -x.shape[dim] % B
    if extra == 0:
        return x
    shape = list(x.shape)
    shape[dim] = extra
    return torch.cat([x, x.new_zeros(shape)], dim=dim)


def _pack(spec: torch.Tensor, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``B/2 + 1`` rfft bins along ``dim`` -> ``B/2`` slots as ``(re, im)`` along ``dim``."""
    half = spec.shape[dim] - 1
    re = spec.real.narrow(dim, 0, half)
    im = torch.cat([spec.real.narrow(dim, half, 1), spec.imag.narrow(dim, 1, half - 1)],
                   dim=dim)
    return re, im


def to_slots(x: torch.Tensor, B: int) -> torch.Tensor:
    """Time-domain maps ``[N, C, D, H, W]`` -> slots ``[N, 2, C/2, D, H, W]``.

    ``C`` must be a multiple of ``B`` (:func:`pad_channels`). The same values as
    :func:`fcircnn.models.spectral.to_slots` per clip.
    """
    _check_block_size(B)
    n, c = x.shape[:2]
    if c % B:
        raise ValueError(f"channel count {c} must be a multiple of B ({B}); pad first")
    blocks = x.reshape(n, c // B, B, *x.shape[2:])
    re, im = _pack(torch.fft.rfft(blocks, dim=2), dim=2)
    return torch.stack([re, im], dim=1).reshape(n, 2, c // 2, *x.shape[2:])


def from_slots(xs: torch.Tensor, B: int) -> torch.Tensor:
    """Slots ``[N, 2, S, D, H, W]`` -> time-domain maps ``[N, 2*S, D, H, W]``; the inverse of
    :func:`to_slots` (the imaginary parts of bins 0 and ``B/2`` are not stored, as in
    :func:`fcircnn.models.spectral.from_slots`)."""
    _check_block_size(B)
    half = B // 2
    n, _, s = xs.shape[:3]
    if s % half:
        raise ValueError(f"slot count {s} must be a multiple of B/2 ({half})")
    spatial = xs.shape[3:]
    parts = xs.reshape(n, 2, s // half, half, *spatial)
    re, im = parts[:, 0], parts[:, 1]
    zero = torch.zeros_like(re.narrow(2, 0, 1))
    spec = torch.complex(torch.cat([re, im.narrow(2, 0, 1)], dim=2),
                         torch.cat([zero, im.narrow(2, 1, half - 1), zero], dim=2))
    x = torch.fft.irfft(spec, n=B, dim=2)
    return x.reshape(n, 2 * s, *spatial)


def weight_slots(generators: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Generators ``[P, Q, B, Kd, Kr, Kc]`` -> weight slots ``(re, im)``, each
    ``[P, Q, B/2, Kd, Kr, Kc]`` (:func:`fcircnn.models.spectral.weight_slots`)."""
    _check_block_size(generators.shape[2])
    return _pack(torch.fft.rfft(generators, dim=2), dim=2)


def slot_gemm_weights(w_re: torch.Tensor, w_im: torch.Tensor) -> torch.Tensor:
    """Weight slots ``[P, Q, B/2, *K]`` -> the real weights ``[B/2 * 2P, 2Q, *K]`` of one
    grouped conv (``groups = B/2``) that computes the slot products.

    Group ``k`` maps ``[re; im]`` of the ``Q`` input blocks to ``[re; im]`` of the ``P`` output
    blocks with ``[[Wr, -Wi], [Wi, Wr]]`` (complex product) for ``k >= 1`` and
    ``[[Wr, 0], [0, Wi]]`` (component-wise product of the two real bins) for slot 0.
    """
    wr = w_re.movedim(2, 0)  # [B/2, P, Q, *K]
    wi = w_im.movedim(2, 0)
    half = wr.shape[0]
    shape = (half, *([1] * (wr.ndim - 1)))
    cross = (torch.arange(half, device=wr.device) > 0).to(wr.dtype).reshape(shape)
    diag_im = torch.where(cross.bool(), wr, wi)
    top = torch.cat([wr, -wi * cross], dim=2)
    bottom = torch.cat([wi * cross, diag_im], dim=2)
    big = torch.cat([top, bottom], dim=1)  # [B/2, 2P, 2Q, *K]
    return big.reshape(half * big.shape[1], *big.shape[2:])


def slot_conv3d(xs: torch.Tensor, w_re: torch.Tensor, w_im: torch.Tensor,
                stride: Sequence[int] = (1, 1, 1),
                padding: Sequence[int] = (0, 0, 0)) -> torch.Tensor:
    """Convolution in the slot domain (:func:`fcircnn.models.spectral.conv3d_slots`).

    Parameters
    ----------
    xs : Tensor ``[N, 2, Q*B/2, D, H, W]``
        Activation slots.
    w_re, w_im : Tensor ``[P, Q, B/2, Kd, Kr, Kc]``
        Weight slots (:func:`weight_slots`).
    stride, padding : (d, h, w)
        As in an ordinary conv3d; padding is zeros.

    Returns
    -------
    Tensor ``[N, 2, P*B/2, Do, Ho, Wo]``
        ``Y[p, k] = sum_q sum_kernel Wf[p, q, k] (*) Xf[q, k]``, ``(*)`` the complex product for
        ``k >= 1`` and the component-wise product for slot 0.
    """
    P, Q, half = w_re.shape[:3]
    n, parts, s = xs.shape[:3]
    if parts != 2 or xs.ndim != 6:
        raise ValueError(f"activation slots must be [N, 2, S, D, H, W], got {list(xs.shape)}")
    if s != Q * half:
        raise ValueError(f"activations have {s} slots, weights expect Q*B/2 = {Q * half}")
    spatial = xs.shape[3:]
    # [N, 2, Q, B/2, ...] -> [N, B/2, 2, Q, ...]: one group of 2Q channels per slot position.
    grouped = xs.reshape(n, 2, Q, half, *spatial).permute(0, 3, 1, 2, 4, 5, 6)
    grouped = grouped.reshape(n, half * 2 * Q, *spatial)
    y = F.conv3d(grouped, slot_gemm_weights(w_re, w_im), stride=tuple(stride),
                 padding=tuple(padding), groups=half)
    out = y.shape[2:]
    y = y.reshape(n, half, 2, P, *out).permute(0, 2, 3, 1, 4, 5, 6)
    return y.reshape(n, 2, P * half, *out)
