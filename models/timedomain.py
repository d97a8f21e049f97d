"""Time-domain layers in the slot contract: the layouts, the dense layers' exact mappings onto
the block-circulant datapath, and the integer transforms between the domains.

Every map of the integer contract is int8 slot parts ``[S, D, H, W]``, whatever its domain;
its layout (:data:`~.resolve.LAYOUTS`) says what the parts hold:

``slots``
    The packed half spectrum of each block of ``B`` channels (:func:`~.spectral.to_slots`).
``lanes``
    Time domain: channel ``c`` is part ``c % 2`` of slot ``c // 2`` (lane ``c % B`` of block
    ``c // B``); channels padded with zeros to a multiple of ``B``.
``lane0``
    Time domain: channel ``m`` is the real part of slot ``m*B/2``, lane 0 of a block of its
    own; every other part is zero.
``deferred``
    Time domain whose irfft is not taken yet: the slots of its spectrum, as an irfft's input.
``spread``
    The slots of each real channel placed at lane 0 of a block of its own: ``rfft([x, 0, ...,
    0])`` puts ``x`` in every bin, so slot 0 is ``x + i*x`` and slot ``k >= 1`` is ``x``.

A dense layer runs on the block-circulant datapath exactly in one of two ways:

reading ``spread`` (the network input, written so by the host), writing ``lanes``
    Each output slot part is a free linear combination of the input channels, because each
    input channel has a block of its own and every bin of it is the real channel value:
    slot ``k >= 1`` gives ``(Wr + i*Wi) * x = Wr*x + i*Wi*x`` and slot 0 (component-wise)
    ``Wr*x + i*Wi*x`` too. So weight slot ``(p, n, s)`` is ``w[p*B + 2s, n] + i*w[p*B + 2s +
    1, n]`` (:func:`lane_weight_slots`) and the accumulators are the output channels in
    ``lanes``: no transform at all.
reading ``deferred`` (an irfft's input, through gap layers), writing ``lane0``
    Output channel ``m`` gets a block of its own whose generator against input block ``q`` is
    ``g[m, q, i] = w[m, q*B + (-i mod B)]`` (:func:`lane0_generators`): lane 0 of the circulant
    product ``circ(g) x_q`` is then ``sum_j w[m, q*B + j] x_q[j]``, and the datapath computes
    that product on the slots of ``x_q``, so lane 0 of the irfft of the accumulators
    (:func:`irfft_lane0`) is the dense layer on the irfft of its input.

The integer rfft (:func:`rfft_int`) and the lane-0 irfft (:func:`irfft_lane0`) use the
constants of :mod:`fcircnn.arch.transforms`.
"""

from __future__ import annotations

import numpy as np

from fcircnn.arch.transforms import irfft_lane0_weights, rfft_twiddles

from . import spectral
from .resolve import DEFERRED, LANE0, LANES, SLOTS, SPREAD

__all__ = ["from_layout", "irfft_lane0", "lane0_generators", "lane_weight_slots", "rfft_int",
           "to_layout"]


def to_layout(x: np.ndarray, layout: str, B: int) -> np.ndarray:
    """A real time-domain map ``[C, ...]`` as complex slots ``[S, ...]`` in ``layout``
    (``deferred`` and ``slots`` both take the rfft; channels padded to a multiple of ``B``)."""
    x = np.asarray(x, dtype=np.float64)
    half = B // 2
    if layout in (SLOTS, DEFERRED):
        return spectral.to_slots(spectral.pad_channels(x, B), B)
    if layout == LANES:
        x = spectral.pad_channels(x, B)
        return x[0::2] + 1j * x[1::2]
    if layout in (LANE0, SPREAD):
        out = np.zeros((x.shape[0] * half, *x.shape[1:]), dtype=np.complex128)
        out[::half] = x
        if layout == SPREAD:
            out.real = np.repeat(x, half, axis=0)
            out[::half] += 1j * x
        return out
    raise ValueError(f"unknown layout {layout!r}")


def from_layout(xs: np.ndarray, layout: str, B: int, channels: int) -> np.ndarray:
    """The real time-domain map ``[channels, ...]`` that slots ``xs`` hold in ``layout``
    (the inverse of :func:`to_layout`; ``slots`` and ``deferred`` take the irfft)."""
    xs = np.asarray(xs)
    if layout in (SLOTS, DEFERRED):
        return spectral.from_slots(xs, B)[:channels]
    if layout == LANES:
        x = np.empty((2 * xs.shape[0], *xs.shape[1:]))
        x[0::2], x[1::2] = xs.real, xs.imag
        return x[:channels]
    if layout in (LANE0, SPREAD):
        return np.asarray(xs[:: B // 2].real, dtype=np.float64)[:channels]
    raise ValueError(f"unknown layout {layout!r}")


def lane_weight_slots(w: np.ndarray, B: int) -> np.ndarray:
    """Dense weights ``[M, N, *K]`` as the weight slots ``[M'/B, N, B/2, *K]`` of a layer that
    reads ``spread`` and writes ``lanes``: slot ``(p, n, s)`` is ``w[p*B + 2s, n] + i*w[p*B +
    2s + 1, n]`` (``M`` padded with zero rows to ``M'``)."""
    w = spectral.pad_channels(np.asarray(w, dtype=np.float64), B)
    M, N = w.shape[:2]
    lanes = w.reshape(M // B, B // 2, 2, N, *w.shape[2:])  # [P, s, part, N, *K]
    return np.moveaxis(lanes[:, :, 0] + 1j * lanes[:, :, 1], 2, 1)  # [P, N, s, *K]


def lane0_generators(w: np.ndarray, B: int) -> np.ndarray:
    """Dense weights ``[M, N, *K]`` as the generators ``[M, N'/B, B, *K]`` of a layer that
    reads ``deferred`` and writes ``lane0``: ``g[m, q, i] = w[m, q*B + (-i mod B)]`` (``N``
    padded with zero columns to ``N'``)."""
    w = spectral.pad_channels(np.asarray(w, dtype=np.float64), B, axis=1)
    M, N = w.shape[:2]
    blocks = w.reshape(M, N // B, B, *w.shape[2:])
    return blocks[:, :, (-np.arange(B)) % B]


def irfft_lane0(y_re: np.ndarray, y_im: np.ndarray, B: int) -> np.ndarray:
    """``u = Y0.re + Y0.im + 2 * sum_{k>=1} Yk.re`` of every block of slot parts ``[S, ...]``
    (``B`` times lane 0 of the block's inverse transform), as ``[S/(B/2), ...]``. Exact for
    integers."""
    half = B // 2
    w_re, w_im = (np.asarray(v).reshape(1, half, *([1] * (np.ndim(y_re) - 1)))
                  for v in irfft_lane0_weights(B))
    re = np.asarray(y_re).reshape(-1, half, *np.shape(y_re)[1:])
    im = np.asarray(y_im).reshape(-1, half, *np.shape(y_im)[1:])
    return (re * w_re + im * w_im).sum(axis=1)


def rfft_int(t_re: np.ndarray, t_im: np.ndarray, B: int) -> tuple[np.ndarray, np.ndarray]:
    """The integer rfft of int time ``lanes`` ``[S, ...]``: ``v[part]`` per slot, each block's
    lanes times :func:`~fcircnn.arch.transforms.rfft_twiddles` (exact, int64)."""
    table = np.asarray(rfft_twiddles(B), dtype=np.int64)  # [part, k, n]
    t_re, t_im = np.asarray(t_re, dtype=np.int64), np.asarray(t_im, dtype=np.int64)
    lanes = np.stack([t_re, t_im], axis=1)  # [S, 2, ...]: lane 2s + part
    blocks = lanes.reshape(-1, B, *t_re.shape[1:])  # [Q, n, ...]
    v = np.einsum("ckn,qn...->cqk...", table, blocks)  # [part, Q, k, ...]
    return (v[0].reshape(-1, *t_re.shape[1:]), v[1].reshape(-1, *t_re.shape[1:]))
