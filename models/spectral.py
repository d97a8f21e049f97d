"""Spectral golden model: the numeric contract the RTL must match bit for bit.

Conventions (docs/contract.md sections 1 to 6)
----------------------------------------------
* Shapes are channels-first with no batch axis: a feature map is ``[C, D, H, W]``.
* ``B`` is the circulant block size (4, 8 or 16). Channel block ``q`` holds channels
  ``q*B .. q*B + B - 1``; its spectrum is ``numpy.fft.rfft`` over those channels (unnormalised).
* A block's half spectrum is packed into ``B/2`` complex *slots*:
  ``slot 0 = Re X[0] + i*Re X[B/2]`` and ``slot k = X[k]`` for ``1 <= k < B/2``.
  Slot index in a map is ``s = q*(B/2) + k``, so a map of ``C`` channels has ``C/2`` slots.
* Generators ``w[p, q, :, kd, kr, kc]`` (length ``B``) define the dense block
  ``W_pq[r][c] = w[p, q, (r - c) mod B]``; weight slots are the packed rfft of the generators,
  shape ``[P, Q, B/2, Kd, Kr, Kc]`` with ``P = M/B`` and ``Q = N/B``.
* Convolution in slots multiplies slot ``k >= 1`` as complex numbers and slot 0 component-wise
  (``re*re + i*im*im``, because its two parts are the two real bins 0 and B/2).
* Integers: activation and weight slot parts are int8 in ``[-127, 127]``; accumulators are exact.
  Post-processing works on one part (re or im) at a time, in this order: CBN with the residual
  term, quantize (rounding shift and clamp), CReLU, CMaxPool.

Every function is pure NumPy and vectorised; none keeps state.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fcircnn.arch.geometry import ACC_BITS, BLOCK_SIZES, INT8_MAX

__all__ = [
    "ACC_BITS",
    "BLOCK_SIZES",
    "INT8_MAX",
    "T_BITS",
    "accumulator_bound",
    "cbn",
    "cmaxpool",
    "conv3d_dense",
    "conv3d_slots",
    "conv3d_slots_int",
    "crelu",
    "expand_circulant",
    "from_slots",
    "pad_channels",
    "post_process",
    "project_circulant",
    "quantize",
    "residual_term",
    "to_slots",
    "weight_slots",
]

T_BITS = 48
"""Width of the signed CBN result ``t``."""

Triple = tuple[int, int, int]

# Upper bound on the im2col buffer of one conv chunk, in bytes.
_COL_BUDGET = 192 * 2**20


def _triple(value: int | Sequence[int], name: str) -> Triple:
    if isinstance(value, (int, np.integer)):
        out = (int(value),) * 3
    else:
        out = tuple(int(v) for v in value)
    if len(out) != 3:
        raise ValueError(f"{name} must be an int or a 3-sequence (d, h, w), not {value!r}")
    return out  # type: ignore[return-value]


def _check_block_size(B: int) -> None:
    if B not in BLOCK_SIZES:
        raise ValueError(f"B must be an even power of two: 4, 8 or 16, not {B}")


# --------------------------------------------------------------------------------------------
# Slots
# --------------------------------------------------------------------------------------------


def pad_channels(x: np.ndarray, B: int, axis: int = 0) -> np.ndarray:
    """Zero-pad axis ``axis`` of ``x`` up to a multiple of ``B`` (no copy if already aligned)."""
    _check_block_size(B)
    extra = -x.shape[axis] % B
    if extra == 0:
        return x
    widths = [(0, 0)] * x.ndim
    widths[axis] = (0, extra)
    return np.pad(x, widths)


def _pack_half_spectrum(spec: np.ndarray, axis: int) -> np.ndarray:
    """Pack ``B/2 + 1`` rfft bins along ``axis`` into ``B/2`` slots along the same axis."""
    spec = np.moveaxis(spec, axis, 0)
    half = spec.shape[0] - 1
    slots = np.empty((half, *spec.shape[1:]), dtype=np.complex128)
    slots[0] = spec[0].real + 1j * spec[half].real
    slots[1:] = spec[1:half]
    return np.moveaxis(slots, 0, axis)


def _unpack_half_spectrum(slots: np.ndarray, axis: int) -> np.ndarray:
    """Inverse of :func:`_pack_half_spectrum`: ``B/2`` slots -> ``B/2 + 1`` bins."""
    slots = np.moveaxis(slots, axis, 0)
    half = slots.shape[0]
    spec = np.empty((half + 1, *slots.shape[1:]), dtype=np.complex128)
    spec[0] = slots[0].real
    spec[half] = slots[0].imag
    spec[1:half] = slots[1:]
    return np.moveaxis(spec, 0, axis)


def to_slots(x: np.ndarray, B: int) -> np.ndarray:
    """Real feature map -> packed half-spectrum slots.

    Parameters
    ----------
    x : ndarray, real, shape ``[C, ...]``
        Feature map, channels first; ``C`` must be a multiple of ``B`` (see :func:`pad_channels`).
    B : int
        Block size (4, 8 or 16).

    Returns
    -------
    ndarray, complex128, shape ``[C/2, ...]``
        Slot ``q*(B/2) + k`` is slot ``k`` of channel block ``q``.
    """
    _check_block_size(B)
    x = np.asarray(x)
    if x.shape[0] % B:
        raise ValueError(f"channel count {x.shape[0]} must be a multiple of B ({B}); pad first")
    blocks = x.reshape(x.shape[0] // B, B, *x.shape[1:])
    slots = _pack_half_spectrum(np.fft.rfft(blocks, axis=1), axis=1)
    return slots.reshape(x.shape[0] // 2, *x.shape[1:])


def from_slots(xs: np.ndarray, B: int) -> np.ndarray:
    """Packed slots -> real feature map; exact inverse of :func:`to_slots` (float64)."""
    _check_block_size(B)
    xs = np.asarray(xs)
    half = B // 2
    if xs.shape[0] % half:
        raise ValueError(f"slot count {xs.shape[0]} must be a multiple of B/2 ({half})")
    blocks = xs.reshape(xs.shape[0] // half, half, *xs.shape[1:])
    spec = _unpack_half_spectrum(blocks, axis=1)
    x = np.fft.irfft(spec, n=B, axis=1)
    return x.reshape(xs.shape[0] * 2, *xs.shape[1:])


# --------------------------------------------------------------------------------------------
# Circulant weights
# --------------------------------------------------------------------------------------------


def expand_circulant(w: np.ndarray) -> np.ndarray:
    """Generators ``[P, Q, B, *K]`` -> dense weights ``[P*B, Q*B, *K]``.

    ``dense[p*B + r, q*B + c] = w[p, q, (r - c) mod B]`` (first column = generator).
    """
    w = np.asarray(w)
    P, Q, B = w.shape[:3]
    r = np.arange(B)[:, None]
    c = np.arange(B)[None, :]
    blocks = w[:, :, (r - c) % B]  # [P, Q, B(r), B(c), *K]
    dense = np.moveaxis(blocks, 2, 1)  # [P, B(r), Q, B(c), *K]
    return dense.reshape(P * B, Q * B, *w.shape[3:])


def project_circulant(dense: np.ndarray, B: int) -> np.ndarray:
    """Least-squares block-circulant projection of dense weights ``[M, N, *K]``.

    Each generator entry is the mean of the entries on its circulant diagonal of its ``B x B``
    block, the orthogonal projection onto block-circulant matrices (Frobenius norm). ``M`` and
    ``N`` are padded up to multiples of ``B``; the padded rows and columns are no part of the
    fit (a diagonal is the mean of its real entries; 0 if it has none). Returns generators
    ``[M'/B, N'/B, B, *K]``.
    """
    _check_block_size(B)
    dense = np.asarray(dense, dtype=np.float64)
    M, N = dense.shape[:2]
    padded = pad_channels(pad_channels(dense, B, 0), B, 1)
    real = pad_channels(pad_channels(np.ones((M, N)), B, 0), B, 1)
    P, Q = padded.shape[0] // B, padded.shape[1] // B
    blocks = np.moveaxis(padded.reshape(P, B, Q, B, *dense.shape[2:]), 2, 1)  # [P,Q,r,c,*K]
    weight = np.moveaxis(real.reshape(P, B, Q, B), 2, 1)  # [P, Q, r, c]
    diag = (np.arange(B)[:, None] - np.arange(B)[None, :]) % B  # generator index of (r, c)
    onehot = (diag[None] == np.arange(B)[:, None, None]).astype(np.float64)  # [j, r, c]
    sums = np.einsum("jrc,pqrc...->pqj...", onehot, blocks)
    counts = np.einsum("jrc,pqrc->pqj", onehot, weight)
    return sums / np.maximum(counts, 1).reshape(*counts.shape, *([1] * (dense.ndim - 2)))


def weight_slots(w: np.ndarray) -> np.ndarray:
    """Generators ``[P, Q, B, *K]`` -> complex weight slots ``[P, Q, B/2, *K]``."""
    w = np.asarray(w)
    _check_block_size(w.shape[2])
    return _pack_half_spectrum(np.fft.rfft(w, axis=2), axis=2)


# --------------------------------------------------------------------------------------------
# Convolution
# --------------------------------------------------------------------------------------------


def _output_size(n: int, k: int, s: int, p: int) -> int:
    out = (n + 2 * p - k) // s + 1
    if out < 1:
        raise ValueError(f"kernel {k} with padding {p} does not fit an axis of size {n}")
    return out


def _gemm_conv(
    x: np.ndarray, w: np.ndarray, stride: Triple, padding: Triple
) -> np.ndarray:
    """Batched real convolution ``y[g, o, v] = sum_{i, kvol} w[g, o, i, kvol] * x[g, i, v + k]``.

    ``x``: ``[G, I, D, H, W]`` float64, ``w``: ``[G, O, I, Kd, Kr, Kc]`` float64 ->
    ``[G, O, Do, Ho, Wo]``. ``G`` is a batch of independent convolutions (the slot bins);
    the work is an im2col followed by one batched GEMM per chunk of output depth, so the
    column buffer never exceeds ``_COL_BUDGET`` bytes. Exact for integers below ``2**53``.
    """
    G, n_in, D, H, W = x.shape
    _, n_out, _, Kd, Kr, Kc = w.shape
    sd, sr, sc = stride
    pd, pr, pc = padding
    Do, Ho, Wo = (_output_size(n, k, s, p)
                  for n, k, s, p in zip((D, H, W), (Kd, Kr, Kc), stride, padding, strict=True))
    xp = np.pad(x, ((0, 0), (0, 0), (pd, pd), (pr, pr), (pc, pc)))
    wmat = w.reshape(G, n_out, n_in * Kd * Kr * Kc)
    out = np.empty((G, n_out, Do, Ho, Wo), dtype=np.float64)
    kvol = Kd * Kr * Kc
    per_plane = G * n_in * kvol * Ho * Wo * 8
    depth_chunk = max(1, min(Do, _COL_BUDGET // max(per_plane, 1)))
    for d0 in range(0, Do, depth_chunk):
        d1 = min(Do, d0 + depth_chunk)
        rows = xp[:, :, d0 * sd: (d1 - 1) * sd + Kd]
        win = np.lib.stride_tricks.sliding_window_view(rows, (Kd, Kr, Kc), axis=(2, 3, 4))
        win = win[:, :, ::sd, ::sr, ::sc]  # [G, I, d, Ho, Wo, Kd, Kr, Kc]
        col = np.ascontiguousarray(win.transpose(0, 1, 5, 6, 7, 2, 3, 4))
        col = col.reshape(G, n_in * kvol, (d1 - d0) * Ho * Wo)
        out[:, :, d0:d1] = np.matmul(wmat, col).reshape(G, n_out, d1 - d0, Ho, Wo)
    return out


def conv3d_dense(
    x: np.ndarray,
    w: np.ndarray,
    stride: int | Sequence[int] = 1,
    padding: int | Sequence[int] = 0,
) -> np.ndarray:
    """Time-domain reference conv3d (cross-correlation, as in PyTorch), float64.

    ``x``: ``[N, D, H, W]``, ``w``: ``[M, N, Kd, Kr, Kc]`` -> ``[M, Do, Ho, Wo]``.
    """
    x = np.asarray(x, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    if w.shape[1] != x.shape[0]:
        raise ValueError(f"weights expect {w.shape[1]} input channels, map has {x.shape[0]}")
    y = _gemm_conv(x[None], w[None], _triple(stride, "stride"), _triple(padding, "padding"))
    return y[0]


def _slot_gemm_weights(w_re: np.ndarray, w_im: np.ndarray) -> np.ndarray:
    """Real block weights ``[B/2, 2P, 2Q, *K]`` that realise the slot products as one GEMM.

    Rows ``[:P]`` produce the real parts, rows ``[P:]`` the imaginary parts; columns ``[:Q]``
    read the real parts, ``[Q:]`` the imaginary parts. Slot ``k >= 1`` is the complex product
    ``[[Wr, -Wi], [Wi, Wr]]``; slot 0 is component-wise ``[[Wr, 0], [0, Wi]]``.
    """
    wr = np.moveaxis(np.asarray(w_re, dtype=np.float64), 2, 0)  # [B/2, P, Q, *K]
    wi = np.moveaxis(np.asarray(w_im, dtype=np.float64), 2, 0)
    top = np.concatenate([wr, -wi], axis=2)
    bottom = np.concatenate([wi, wr], axis=2)
    big = np.concatenate([top, bottom], axis=1)  # [B/2, 2P, 2Q, *K]
    P, Q = wr.shape[1:3]
    big[0, :P, Q:] = 0.0
    big[0, P:, :Q] = 0.0
    big[0, P:, Q:] = wi[0]
    return big


def _conv_slot_parts(
    x_re: np.ndarray,
    x_im: np.ndarray,
    w_re: np.ndarray,
    w_im: np.ndarray,
    stride: int | Sequence[int],
    padding: int | Sequence[int],
) -> tuple[np.ndarray, np.ndarray]:
    """Slot convolution on separate real/imaginary parts (float64 in, float64 out)."""
    P, Q, half = w_re.shape[:3]
    if w_re.ndim != 6 or w_im.shape != w_re.shape:
        raise ValueError(f"weight slots must be [P, Q, B/2, Kd, Kr, Kc], got {w_re.shape}")
    if x_re.shape != x_im.shape or x_re.ndim != 4:
        raise ValueError(f"activation slots must be [S, D, H, W], got {x_re.shape}")
    if x_re.shape[0] != Q * half:
        raise ValueError(
            f"activations have {x_re.shape[0]} slots, weights expect Q*B/2 = {Q * half}"
        )
    spatial = x_re.shape[1:]
    # [S, ...] -> [B/2, Q, ...], re and im stacked on the Q axis.
    xr = np.moveaxis(np.asarray(x_re, dtype=np.float64).reshape(Q, half, *spatial), 1, 0)
    xi = np.moveaxis(np.asarray(x_im, dtype=np.float64).reshape(Q, half, *spatial), 1, 0)
    xg = np.concatenate([xr, xi], axis=1)  # [B/2, 2Q, D, H, W]
    wg = _slot_gemm_weights(w_re, w_im)  # [B/2, 2P, 2Q, *K]
    y = _gemm_conv(xg, wg, _triple(stride, "stride"), _triple(padding, "padding"))
    # [B/2, 2P, ...] -> [P*B/2, ...] per part.
    y_re = np.moveaxis(y[:, :P], 0, 1).reshape(P * half, *y.shape[2:])
    y_im = np.moveaxis(y[:, P:], 0, 1).reshape(P * half, *y.shape[2:])
    return y_re, y_im


def conv3d_slots(
    xs: np.ndarray,
    ws: np.ndarray,
    stride: int | Sequence[int] = 1,
    padding: int | Sequence[int] = 0,
) -> np.ndarray:
    """Convolution in the slot domain (float).

    Parameters
    ----------
    xs : ndarray, complex, ``[Q*B/2, D, H, W]``
        Activation slots (:func:`to_slots`).
    ws : ndarray, complex, ``[P, Q, B/2, Kd, Kr, Kc]``
        Weight slots (:func:`weight_slots`).
    stride, padding : int or (d, h, w)
        As in an ordinary conv3d; padding is zeros.

    Returns
    -------
    ndarray, complex128, ``[P*B/2, Do, Ho, Wo]``
        ``Y[p, k] = sum_q sum_kernel Wf[p, q, k] (*) Xf[q, k]``, ``(*)`` the complex product
        for ``k >= 1`` and the component-wise product for ``k = 0``.
    """
    ws = np.asarray(ws)
    xs = np.asarray(xs)
    y_re, y_im = _conv_slot_parts(xs.real, xs.imag, ws.real, ws.imag, stride, padding)
    return y_re + 1j * y_im


def accumulator_bound(q_blocks: int, kernel: int | Sequence[int]) -> int:
    """Largest ``|acc|`` a layer can produce from int8 slots in ``[-127, 127]``.

    A slot ``k >= 1`` sums ``2 * Q * Kd*Kr*Kc`` products (real and imaginary cross terms), each at
    most ``127**2`` in magnitude; slot 0 sums half as many. Padding only removes terms.
    """
    kd, kr, kc = _triple(kernel, "kernel")
    return 2 * q_blocks * kd * kr * kc * INT8_MAX * INT8_MAX


def _check_int8(name: str, a: np.ndarray) -> np.ndarray:
    a = np.asarray(a)
    if not np.issubdtype(a.dtype, np.integer):
        raise TypeError(f"{name} must be an integer array, not {a.dtype}")
    if a.size and (a.min() < -INT8_MAX or a.max() > INT8_MAX):
        raise ValueError(f"{name} must lie in [-127, 127], found [{a.min()}, {a.max()}]")
    return a


def conv3d_slots_int(
    xq_re: np.ndarray,
    xq_im: np.ndarray,
    wq_re: np.ndarray,
    wq_im: np.ndarray,
    stride: int | Sequence[int] = 1,
    padding: int | Sequence[int] = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Integer slot convolution: the PE array's exact contract.

    Parameters
    ----------
    xq_re, xq_im : int arrays ``[Q*B/2, D, H, W]`` in ``[-127, 127]``
    wq_re, wq_im : int arrays ``[P, Q, B/2, Kd, Kr, Kc]`` in ``[-127, 127]``
    stride, padding : int or (d, h, w)

    Returns
    -------
    (acc_re, acc_im) : int64 arrays ``[P*B/2, Do, Ho, Wo]``
        Exact sums (computed with float64 GEMMs, exact because every partial sum is an integer
        far below ``2**53``).

    Raises
    ------
    ValueError
        If an input leaves ``[-127, 127]`` or the layer's accumulator bound
        (:func:`accumulator_bound`) does not fit the signed 32-bit accumulator.
    """
    xq_re, xq_im = _check_int8("xq_re", xq_re), _check_int8("xq_im", xq_im)
    wq_re, wq_im = _check_int8("wq_re", wq_re), _check_int8("wq_im", wq_im)
    bound = accumulator_bound(wq_re.shape[1], wq_re.shape[3:])
    if bound >= 2 ** (ACC_BITS - 1):
        raise ValueError(
            f"accumulator bound {bound} (Q={wq_re.shape[1]}, kernel {wq_re.shape[3:]}) "
            f"does not fit the signed {ACC_BITS}-bit accumulator (< 2**{ACC_BITS - 1})"
        )
    y_re, y_im = _conv_slot_parts(xq_re, xq_im, wq_re, wq_im, stride, padding)
    return np.rint(y_re).astype(np.int64), np.rint(y_im).astype(np.int64)


# --------------------------------------------------------------------------------------------
# Post-processing (one part at a time; elementwise with broadcasting)
# --------------------------------------------------------------------------------------------


def _as_int64(name: str, a: np.ndarray | int) -> np.ndarray:
    a = np.asarray(a)
    if not np.issubdtype(a.dtype, np.integer):
        raise TypeError(f"{name} must be integer-valued, not {a.dtype}")
    return a.astype(np.int64)


def _check_range(name: str, a: np.ndarray, bits: int) -> None:
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    if a.size and (a.min() < lo or a.max() > hi):
        raise OverflowError(f"{name} leaves signed {bits}-bit range [{lo}, {hi}]")


def residual_term(res: np.ndarray, res_mult: np.ndarray | int) -> np.ndarray:
    """The shortcut contribution ``res * res_mult`` (int8 slot part times int16)."""
    res, res_mult = _as_int64("res", res), _as_int64("res_mult", res_mult)
    _check_range("res_mult", res_mult, 16)
    return res * res_mult


def cbn(
    acc: np.ndarray,
    mult: np.ndarray | int,
    bias: np.ndarray | int,
    res: np.ndarray | None = None,
    res_mult: np.ndarray | int | None = None,
) -> np.ndarray:
    """CBN with the optional residual term: ``t = acc*mult + bias [+ res*res_mult]``.

    ``acc`` int32, ``mult`` and ``res_mult`` int16, ``bias`` int48, ``res`` int8; the result must
    fit int48, else :class:`OverflowError` (the compiler proves this per layer).
    """
    acc, mult, bias = _as_int64("acc", acc), _as_int64("mult", mult), _as_int64("bias", bias)
    _check_range("acc", acc, ACC_BITS)
    _check_range("mult", mult, 16)
    _check_range("bias", bias, T_BITS)
    t = acc * mult + bias
    if (res is None) != (res_mult is None):
        raise ValueError("res and res_mult must be given together")
    if res is not None:
        t = t + residual_term(res, res_mult)
    _check_range("t", t, T_BITS)
    return t


def quantize(t: np.ndarray, shift: np.ndarray | int, lo: int = -INT8_MAX) -> np.ndarray:
    """Rounding shift and clamp: ``clip(floor((t + round) / 2**shift), lo, 127)``.

    ``round = 2**(shift - 1)`` for ``shift > 0``, else 0 (round half up). ``shift`` in [0, 47],
    ``lo`` is -127 (plain) or 0 (CReLU folded in).
    """
    t, shift = _as_int64("t", t), _as_int64("shift", shift)
    if shift.size and (shift.min() < 0 or shift.max() > T_BITS - 1):
        raise ValueError(f"shift must lie in [0, {T_BITS - 1}]")
    if lo not in (-INT8_MAX, 0):
        raise ValueError(f"lo must be -127 or 0, not {lo}")
    rounding = np.where(shift > 0, np.left_shift(np.int64(1), np.maximum(shift - 1, 0)), 0)
    return np.clip(np.right_shift(t + rounding, shift), lo, INT8_MAX)


def crelu(y: np.ndarray) -> np.ndarray:
    """CReLU on one part: ``max(y, 0)`` (applied to re and im independently)."""
    return np.maximum(y, 0)


def cmaxpool(
    y: np.ndarray,
    window: int | Sequence[int],
    stride: int | Sequence[int] | None = None,
    padding: int | Sequence[int] = 0,
) -> np.ndarray:
    """Max over windows of the last three (spatial) axes; padded voxels never win.

    Output size per axis is ``(n + 2*p - k) // s + 1``; ``stride`` defaults to ``window``.
    Works for any leading axes and for both integer and float data.
    """
    y = np.asarray(y)
    k = _triple(window, "window")
    s = k if stride is None else _triple(stride, "stride")
    p = _triple(padding, "padding")
    if any(pi >= ki for pi, ki in zip(p, k, strict=True)):
        raise ValueError(f"pool padding {p} must be smaller than the window {k}")
    lead = y.ndim - 3
    if np.issubdtype(y.dtype, np.integer):
        fill = np.iinfo(y.dtype).min
    else:
        fill = -np.inf
    yp = np.pad(y, [(0, 0)] * lead + [(pi, pi) for pi in p], constant_values=fill)
    for axis in range(3):
        _output_size(y.shape[lead + axis], k[axis], s[axis], p[axis])
    win = np.lib.stride_tricks.sliding_window_view(yp, k, axis=tuple(range(lead, lead + 3)))
    win = win[(Ellipsis, slice(None, None, s[0]), slice(None, None, s[1]), slice(None, None, s[2]))
              + (slice(None),) * 3]
    return win.max(axis=(-3, -2, -1))


def post_process(
    acc: np.ndarray,
    mult: np.ndarray | int,
    bias: np.ndarray | int,
    shift: np.ndarray | int,
    *,
    res: np.ndarray | None = None,
    res_mult: np.ndarray | int | None = None,
    relu: bool = False,
    pool: tuple | None = None,
) -> np.ndarray:
    """All post stages on one part: :func:`cbn` -> :func:`quantize` -> :func:`crelu` -> pool.

    ``pool`` is ``None`` or ``(window, stride, padding)``. Returns int64 values in [-127, 127].
    """
    t = cbn(acc, mult, bias, res, res_mult)
    y = quantize(t, shift)
    if relu:
        y = crelu(y)
    if pool is not None:
        y = cmaxpool(y, *pool)
    return y
