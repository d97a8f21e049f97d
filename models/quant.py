"""Quantization calibration for the integer slot contract.

Scales
------
Every scale array has shape ``[2, B/2]``: axis 0 is the part (0 = real, 1 = imaginary), axis 1 the
slot position ``k = s % (B/2)`` inside a block. The real and imaginary parts of a slot ``k >= 1``
always share one scale (``scale[0, k] == scale[1, k]``) because the integer complex MAC sums
cross terms of both parts; slot 0's parts are the real bins 0 and B/2, which may differ.
``granularity="tensor"`` uses one scale for the whole tensor, ``"bin"`` one per bin.
Quantization is symmetric: ``q = clip(rint(v / scale), -127, 127)``; ``v ~ q * scale``.

Post-processing parameters
--------------------------
For an output slot ``s`` and part ``c`` the float post stage ``t = g*Y + b + r`` (CBN, residual)
with ``Y = acc * s_acc``, ``r = res * s_res`` and output scale ``s_y`` becomes the integer stage
``t = acc*mult + bias + res*res_mult`` followed by a rounding shift by ``shift``::

    mult = rint(g * s_acc / s_y * 2**shift)        (int16)
    bias = rint(b / s_y * 2**shift)                 (int48)
    res_mult = rint(s_res / s_y * 2**shift)         (int16)

``shift`` is the largest value in ``[0, 47]`` that keeps every field in range and the worst-case
``|t|`` (from the layer's accumulator bound) inside int48.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

import numpy as np

from .spectral import INT8_MAX, T_BITS

__all__ = [
    "TINY",
    "Granularity",
    "PostParams",
    "calibration_percentile",
    "dequantize_slots",
    "fold_post",
    "fold_uniform",
    "quantize_slots",
    "slot_scales",
    "weight_scales",
]

Granularity = Literal["tensor", "bin"]

_INT16_MAX = 2**15 - 1
_T_MAX = 2 ** (T_BITS - 1) - 1


def _bin_max(re: np.ndarray, im: np.ndarray, half: int, axis: int) -> np.ndarray:
    """Largest magnitude per ``[part, k]``; slot axis ``axis`` of length ``n*half``."""
    def per_k(a: np.ndarray) -> np.ndarray:
        a = np.moveaxis(np.abs(a), axis, 0)
        a = a.reshape(a.shape[0] // half, half, -1)
        return a.max(axis=(0, 2)) if a.size else np.zeros(half)

    mre, mim = per_k(re), per_k(im)
    shared = np.maximum(mre, mim)
    out = np.stack([shared, shared])
    out[0, 0], out[1, 0] = mre[0], mim[0]
    return out


def _bin_percentile(re: np.ndarray, im: np.ndarray, half: int, axis: int,
                    q: float) -> np.ndarray:
    """As :func:`_bin_max`, with the ``q``-th percentile of the magnitudes for the maximum."""
    def per_k(a: np.ndarray) -> np.ndarray:
        a = np.moveaxis(np.abs(a), axis, 0)
        a = a.reshape(a.shape[0] // half, half, -1).transpose(1, 0, 2).reshape(half, -1)
        return np.percentile(a, q, axis=1) if a.size else np.zeros(half)

    mre, mim = per_k(re), per_k(im)
    shared = np.maximum(mre, mim)
    out = np.stack([shared, shared])
    out[0, 0], out[1, 0] = mre[0], mim[0]
    return out


def calibration_percentile(statistic: str) -> float | None:
    """The percentile a calibration ``statistic`` names: ``"max"`` (``None``: the maximum)
    or ``"pQ"`` with ``0 < Q <= 100`` (``"p99.9"``: the 99.9th percentile of the magnitudes).

    Raises
    ------
    ValueError
        Naming the allowed forms.
    """
    if statistic == "max":
        return None
    # Q as written in decimal ASCII (float() also reads " 50", "1e2", "5_0" and other
    # scripts' digits)
    q = (float(statistic[1:]) if re.fullmatch(r"p[0-9]+(?:\.[0-9]*)?|p\.[0-9]+", statistic)
         else None)
    if q is None or not 0 < q <= 100:
        raise ValueError(f"calibration statistic must be 'max' or 'pQ' with 0 < Q <= 100 "
                         f"(e.g. p99.9), not {statistic!r}")
    return q


#: The smallest normal float64: the smallest quantization step.
TINY = float(np.finfo(np.float64).tiny)


def _scales_from_max(peak: np.ndarray, granularity: Granularity) -> np.ndarray:
    if granularity == "tensor":
        peak = np.full_like(peak, peak.max())
    elif granularity != "bin":
        raise ValueError(f"granularity must be 'tensor' or 'bin', not {granularity!r}")
    # A part that is identically zero gets scale 1: any scale represents it exactly. A step
    # below the smallest normal float (a peak of subnormal values, e.g. 5e-324 / 127 = 0)
    # cannot be represented: the step is that smallest float and the part quantizes to the
    # integers it gives (zero for such a peak), as a float64 contract must.
    return np.where(peak > 0, np.maximum(peak / INT8_MAX, TINY), 1.0)


def slot_scales(xs: np.ndarray, B: int, granularity: Granularity = "tensor",
                percentile: float | None = None) -> np.ndarray:
    """Symmetric scales ``[2, B/2]`` for activation slots ``[S, ...]`` (complex), from the
    largest magnitude or, with ``percentile``, that percentile of the magnitudes (values above
    it saturate at +-127)."""
    xs = np.asarray(xs)
    if percentile is None:
        peak = _bin_max(xs.real, xs.imag, B // 2, 0)
    else:
        peak = _bin_percentile(xs.real, xs.imag, B // 2, 0, percentile)
    return _scales_from_max(peak, granularity)


def weight_scales(ws: np.ndarray, granularity: Granularity = "tensor") -> np.ndarray:
    """Symmetric scales ``[2, B/2]`` for weight slots ``[P, Q, B/2, *K]`` (complex)."""
    ws = np.asarray(ws)
    half = ws.shape[2]
    return _scales_from_max(_bin_max(ws.real, ws.imag, half, 2), granularity)


def _broadcast(scale: np.ndarray, slots: int, ndim: int, axis: int) -> tuple[np.ndarray, ...]:
    """Per-slot scales of each part, shaped to broadcast along ``axis`` of an ``ndim`` array."""
    half = scale.shape[1]
    shape = [1] * ndim
    shape[axis] = slots
    return tuple(np.tile(scale[c], slots // half).reshape(shape) for c in (0, 1))


def quantize_slots(
    xs: np.ndarray, scale: np.ndarray, axis: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Complex slots -> int64 parts in ``[-127, 127]`` (round half to even, then clip).

    ``axis`` is the slot axis (0 for maps ``[S, D, H, W]``, 2 for weights ``[P, Q, B/2, *K]``
    where the slot position is the axis itself).
    """
    xs = np.asarray(xs)
    s_re, s_im = _broadcast(scale, xs.shape[axis], xs.ndim, axis)
    q_re = np.clip(np.rint(xs.real / s_re), -INT8_MAX, INT8_MAX).astype(np.int64)
    q_im = np.clip(np.rint(xs.imag / s_im), -INT8_MAX, INT8_MAX).astype(np.int64)
    return q_re, q_im


def dequantize_slots(
    q_re: np.ndarray, q_im: np.ndarray, scale: np.ndarray, axis: int = 0
) -> np.ndarray:
    """Integer parts -> complex slots (inverse of :func:`quantize_slots` up to rounding)."""
    s_re, s_im = _broadcast(scale, np.shape(q_re)[axis], np.ndim(q_re), axis)
    return q_re * s_re + 1j * (q_im * s_im)


@dataclass(frozen=True)
class PostParams:
    """Integer post-processing parameters of one layer, each ``[2, S_out]`` int64.

    Axis 0 is the part (re, im), axis 1 the output slot. ``res_mult`` is ``None`` for layers
    without a residual input.
    """

    mult: np.ndarray
    bias: np.ndarray
    shift: np.ndarray
    res_mult: np.ndarray | None

    def part(self, c: int) -> dict[str, np.ndarray | None]:
        """Keyword arguments for :func:`fcircnn.models.spectral.post_process` on part ``c``,
        shaped ``[S, 1, 1, 1]`` to broadcast over a ``[S, D, H, W]`` accumulator map."""
        col = (slice(None), None, None, None)
        return {
            "mult": self.mult[c][col],
            "bias": self.bias[c][col],
            "shift": self.shift[c][col],
            "res_mult": None if self.res_mult is None else self.res_mult[c][col],
        }


def fold_uniform(acc_scale: np.ndarray, out_scale: np.ndarray, acc_bound: int,
                 slots: int) -> PostParams:
    """The requantization ``y = quantize(acc * mult, shift)`` of ``slots`` output slots from
    an accumulator of scale ``acc_scale`` to ``out_scale`` (``[2, B/2]`` each) with one
    ``shift`` for every slot and part (the rfft stage's, whose multipliers sit in the
    descriptor): the largest shift at which every ``mult`` fits int16 and ``acc_bound *
    |mult|`` int48, each ``mult`` rounded at that shift; bias 0.

    Raises
    ------
    OverflowError
        As :func:`fold_post`.
    """
    half = acc_scale.shape[1]
    ones, zeros = np.ones((2, slots)), np.zeros((2, slots))
    shift = int(fold_post(ones, zeros, acc_scale, out_scale, acc_bound).shift.min())
    reps = slots // half
    mult = np.rint(np.tile(acc_scale, reps) / np.tile(out_scale, reps) * 2.0**shift)
    return PostParams(mult=mult.astype(np.int64), bias=np.zeros((2, slots), dtype=np.int64),
                      shift=np.full((2, slots), shift, dtype=np.int64), res_mult=None)


def fold_post(
    gain: np.ndarray,
    offset: np.ndarray,
    acc_scale: np.ndarray,
    out_scale: np.ndarray,
    acc_bound: int,
    res_scale: np.ndarray | None = None,
) -> PostParams:
    """Fold float CBN/residual and the scales into integer ``mult``/``bias``/``shift``.

    Parameters
    ----------
    gain, offset : ``[2, S]`` float
        Float CBN per output slot and part: ``t = gain * Y + offset (+ residual)``.
    acc_scale, out_scale, res_scale : ``[2, B/2]`` float
        Scale of the accumulator, of the output and of the residual input.
    acc_bound : int
        Largest ``|acc|`` of the layer (proved from its shape).

    Raises
    ------
    OverflowError
        If a slot's factors cannot be represented even at ``shift = 0`` (int16 ``mult`` or
        ``res_mult``, int48 ``bias`` or worst-case ``t``).
    """
    slots = gain.shape[1]
    half = acc_scale.shape[1]
    reps = slots // half
    a_s = np.tile(acc_scale, reps)
    o_s = np.tile(out_scale, reps)
    mult_f = gain * a_s / o_s
    bias_f = offset / o_s
    res_f = np.zeros_like(mult_f) if res_scale is None else np.tile(res_scale, reps) / o_s
    shifts = np.arange(T_BITS)[:, None, None]
    pow2 = np.ldexp(1.0, shifts)
    mult = np.rint(mult_f * pow2)
    bias = np.rint(bias_f * pow2)
    res_mult = np.rint(res_f * pow2)
    t_max = acc_bound * np.abs(mult) + np.abs(bias) + INT8_MAX * np.abs(res_mult)
    ok = (
        (np.abs(mult) <= _INT16_MAX)
        & (np.abs(res_mult) <= _INT16_MAX)
        & (np.abs(bias) <= _T_MAX)
        & (t_max <= _T_MAX)
    )
    if not ok[0].all():
        c, s = np.argwhere(~ok[0])[0]
        raise OverflowError(
            f"output slot {s} ({'re' if c == 0 else 'im'}): multiplier {mult_f[c, s]:.3g}, "
            f"bias {bias_f[c, s]:.3g} or residual factor {res_f[c, s]:.3g} does not fit "
            "int16/int48 even without a shift"
        )
    # Largest legal shift: ok is monotone (once a field overflows, larger shifts overflow too).
    shift = T_BITS - 1 - np.argmax(ok[::-1], axis=0)
    pick = np.take_along_axis
    idx = shift[None]
    return PostParams(
        mult=pick(mult, idx, 0)[0].astype(np.int64),
        bias=pick(bias, idx, 0)[0].astype(np.int64),
        shift=shift.astype(np.int64),
        res_mult=None if res_scale is None else pick(res_mult, idx, 0)[0].astype(np.int64),
    )
