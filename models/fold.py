"""Folded layers: their input and weights as the engine runs them.

Depth-tap folding of the first layer:

A first layer with few input channels (C3D conv1a: 3 channels, one block of ``B = 8``) leaves
most of a core's ``Tn/B`` input blocks idle. Folded (:meth:`ResolvedLayer.fold_depth_taps
<fcircnn.models.config.ResolvedLayer.fold_depth_taps>`), its ``Kd`` depth taps become input
channel blocks: the host writes ``Kd`` depth-shifted copies of the input, and the weight block
of tap ``t`` and input block ``q`` moves to input block ``t*Q + q`` of a ``1 x Kr x Kc`` kernel.
Every product of the original sum appears exactly once in the folded one, so the integer
accumulators are equal (:func:`fcircnn.models.spectral.conv3d_slots_int`, exact in int32):
folding changes where the PE array finds the operands, not the numeric contract.

With ``depths = 2`` (:func:`fcircnn.models.placement.folded_depths`: the layer's output
channels fill at most half the core's output lanes) each folded depth also computes two output
depths: the host writes ``Kd + sd`` copies at twice the depth stride, output block ``j*P + p``
is output block ``p`` at depth ``2*z + j`` (its weight blocks those of depth taps shifted by
``j*sd``, zero where no tap is left; its post records repeated), and the store writes the two
halves back to the depths they belong to (:data:`~fcircnn.arch.descriptor.FLAG_DFOLD`).

With ``rows = U > 1`` (:func:`fcircnn.models.placement.folded_rows`: the depth copies fill
few of the core's input blocks and ``U`` row copies take the PE array fewer steps) each depth
copy is written ``U`` times, shifted by one row each, and the kernel keeps ``Kr - U + 1`` rows:
copy ``u`` takes the original row tap ``k + u`` at folded tap ``k`` (the last copy every tap
beyond, the others only at ``k = 0``), so every original tap is there once. The host writes
about ``U`` times the bytes; the PE array takes ``ceil(T*U*N / Tn) * (Kr - U + 1) * Kc`` steps
per output voxel instead of ``ceil(T*N / Tn) * Kr * Kc``: C3D conv1a with two output depths on a
``Tn = 64`` core, ``U = 2``: 32 channels become 64, a 1x2x3 kernel, 6 steps instead of 9.

A ``spread`` input (a dense first layer's: each real channel a block of its own, its value in
every bin) is stored *compact* where the core can (:func:`compact_spread_slots`,
:data:`~fcircnn.arch.descriptor.FLAG_SPREAD`): one slot group per n-tile, the real channel of
the n-tile's block ``j`` in slot ``j``; the input buffer spreads it back as the PE array
reads it.

Input folding of an fc layer on a 1x1x1 input (:meth:`ResolvedLayer.fold_fc_input
<fcircnn.models.config.ResolvedLayer.fold_fc_input>`): the engine reads the same bytes as a
``(1, 4, 4)`` map of a sixteenth of the channels, so only the weight blocks move
(:func:`fold_fc_weight_slots`); the sums are again the same.

Trimmed kernels (:meth:`ResolvedLayer.trim_taps
<fcircnn.models.config.ResolvedLayer.trim_taps>`): a conv whose kernel has taps that read
padding for every output voxel runs without them; its weights are the kept taps' slice of the
original's (:func:`trim_weight_slots`), its input is the original's.

Gap layers read as planes of one channel tile (:meth:`ResolvedLayer.view_gap_input
<fcircnn.models.config.ResolvedLayer.view_gap_input>`): the weights are the identity blocks of
one tile, the post parameters those of one plane's slots (:func:`view_gap_post_slots`).
"""

from __future__ import annotations

import math

import numpy as np

from fcircnn.arch.geometry import SLOT_GROUP_CHANNELS, SLOTS_PER_BEAT, spreads

from .config import ResolvedLayer
from .quant import PostParams
from .resolve import FC_FOLD_SHAPE

__all__ = ["compact_spread_slots", "fold_fc_weight_slots", "fold_input_slots",
           "fold_post_slots", "fold_weight_slots", "trim_weight_slots", "view_gap_post_slots"]


def fold_input_slots(xq_re: np.ndarray, xq_im: np.ndarray, layer: ResolvedLayer,
                     depths: int = 1, rows: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """The input slots of ``layer`` folded (:meth:`ResolvedLayer.fold_depth_taps
    <fcircnn.models.config.ResolvedLayer.fold_depth_taps>`), from its input ``[S, D, H, W]``:
    ``[T*U*S, Do/depths, H', W]``, ``T = Kd + (depths - 1) * sd`` depth copies, ``U = rows``
    row copies, ``H' = H`` when ``U == 1``, else ``(Ho - 1)*sr + Kr - U + 1``.

    Slot ``(t*U + u)*S + s`` at folded ``(z, y)`` is input slot ``s`` at depth ``z*depths*sd
    + t - pd`` and row ``y + u - pr`` (row ``y`` when ``U == 1``), zero outside the map, ``S =
    padded_in_channels / 2``.

    Raises
    ------
    ValueError
        If the arrays do not have the layer's input shape.
    """
    kd, sd, pd = layer.kernel[0], layer.stride[0], layer.padding[0]
    depth = layer.conv_shape[0] // depths
    copies, step = kd + (depths - 1) * sd, depths * sd
    slots = layer.padded_in_channels // 2
    expected = (slots, *layer.in_shape)
    height = (layer.conv_shape[1] - 1) * layer.stride[1] + layer.kernel[1] - rows + 1
    folded = []
    for part in (xq_re, xq_im):
        part = np.asarray(part)
        if part.shape != expected:
            raise ValueError(f"layer {layer.name!r}: input slots have shape {part.shape}, "
                             f"expected {expected}")
        if rows > 1:  # row copies first, so the depth copy is the outer index
            part = _shifted_copies(part, 2, rows, height, 1, layer.padding[1])
        folded.append(_shifted_copies(part, 1, copies, depth, step, pd))
    return folded[0], folded[1]


def compact_spread_slots(xq_re: np.ndarray, xq_im: np.ndarray, tn: int, B: int
                         ) -> tuple[np.ndarray, np.ndarray]:
    """The compact map :data:`~fcircnn.arch.descriptor.FLAG_SPREAD` reads, from the slots
    ``[S, ...]`` of a ``spread`` map (``S/(B/2)`` blocks): ``[n*8, ...]``, ``n`` n-tiles of
    ``K = tn/B`` blocks (the last zero-filled); slot ``nt*8 + j`` holds the real channel of
    block ``nt*K + j`` in its real part, every other part is zero.

    Raises
    ------
    ValueError
        If ``tn`` cannot read a spread map compact (:func:`~fcircnn.arch.geometry.spreads`)
        or the slots are not spread: every bin of a block the same real value (slot 0's
        imaginary part too), as the input buffer spreads it. Integer slots quantized with
        scales that differ between a block's bins are not.
    """
    half = B // 2
    if not spreads(tn, B):
        raise ValueError(f"a core of Tn = {tn} at B = {B} cannot read a spread input compact")
    re, im = np.asarray(xq_re), np.asarray(xq_im)
    if re.shape != im.shape or re.shape[0] % half:
        raise ValueError(f"spread slots must be two arrays [S, ...], S a multiple of {half}, "
                         f"not {re.shape} and {im.shape}")
    blocks = re.shape[0] // half
    x = re[::half]
    by_block = re.reshape(blocks, half, *re.shape[1:])
    im_blocks = im.reshape(blocks, half, *im.shape[1:])
    if (np.any(by_block != x[:, None]) or np.any(im_blocks[:, 0] != x)
            or np.any(im_blocks[:, 1:] != 0)):
        raise ValueError("the input slots are not spread (every bin of a block the same real "
                         "value): were they quantized with scales that differ between the "
                         "bins of a block?")
    per_tile = tn // B
    tiles = -(-blocks // per_tile)
    out = np.zeros((tiles, SLOTS_PER_BEAT, *re.shape[1:]), dtype=re.dtype)
    block = np.arange(blocks)
    out[block // per_tile, block % per_tile] = x
    out = out.reshape(tiles * SLOTS_PER_BEAT, *re.shape[1:])
    return out, np.zeros_like(out)


def _shifted_copies(part: np.ndarray, axis: int, copies: int, size: int, step: int, pad: int
                    ) -> np.ndarray:
    """``copies`` copies of ``part`` ``[S, ...]`` along ``axis``, stacked on the slot axis:
    copy ``t`` at index ``i < size`` of ``axis`` is ``part`` at ``i*step + t - pad``, zero
    outside the array."""
    # Pad the axis so that every copy's window is inside the array.
    after = max(0, (size - 1) * step + copies - pad - part.shape[axis])
    widths = [(0, 0)] * part.ndim
    widths[axis] = (pad, after)
    padded = np.pad(part, widths)
    end = (size - 1) * step + 1
    return np.concatenate([padded.take(range(t, t + end, step), axis=axis)
                           for t in range(copies)], axis=0)


def fold_weight_slots(wq_re: np.ndarray, wq_im: np.ndarray, depths: int = 1,
                      stride_d: int = 1, rows: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Weight slots ``[P, Q, B/2, Kd, Kr, Kc]`` to the folded ``[depths*P, T*U*Q, B/2, 1,
    Kr - U + 1, Kc]``, ``T = Kd + (depths - 1) * stride_d``, ``U = rows``: block ``(j*P + p,
    (t*U + u)*Q + q)`` at row tap ``k`` of the folded layer is block ``(p, q)`` at depth tap
    ``t - j*stride_d`` and row tap ``k + u``, zero where the depth tap is not in ``[0, Kd)``
    or where ``k > 0`` and ``u < U - 1`` (:meth:`ResolvedLayer.fold_depth_taps
    <fcircnn.models.config.ResolvedLayer.fold_depth_taps>`)."""
    out = []
    for part in (wq_re, wq_im):
        part = np.asarray(part)
        if part.ndim != 6:
            raise ValueError(f"weight slots must be [P, Q, B/2, Kd, Kr, Kc], not {part.shape}")
        p, q, half, kd, kr, kc = part.shape
        if not 1 <= rows <= kr:
            raise ValueError(f"1..{kr} row copies, not {rows!r}")
        copies, k = kd + (depths - 1) * stride_d, kr - rows + 1
        moved = np.moveaxis(part, 3, 1)  # [P, Kd, Q, B/2, Kr, Kc]
        folded = np.zeros((depths, p, copies, rows, q, half, k, kc), dtype=part.dtype)
        for j in range(depths):
            taps = folded[j, :, j * stride_d:j * stride_d + kd]  # [P, Kd, U, Q, B/2, K, Kc]
            for r in range(kr):
                u = min(r, rows - 1)
                taps[:, :, u, :, :, r - u] = moved[..., r, :]
        out.append(folded.reshape(depths * p, copies * rows * q, half, 1, k, kc))
    return out[0], out[1]


def fold_post_slots(post: PostParams, depths: int) -> PostParams:
    """``post`` of a layer whose output depths fold ``depths`` to a layer: every per-slot
    parameter ``[2, S]`` repeated to ``[2, depths*S]`` (slot ``j*S + s`` is slot ``s``)."""
    def rep(a):
        return None if a is None else np.concatenate([np.asarray(a)] * depths, axis=1)
    return PostParams(rep(post.mult), rep(post.bias), rep(post.shift), rep(post.res_mult))


def fold_fc_weight_slots(wq_re: np.ndarray, wq_im: np.ndarray, block_size: int
                         ) -> tuple[np.ndarray, np.ndarray]:
    """Weight slots ``[P, Q, B/2, 1, 1, 1]`` of an fc layer on a 1x1x1 input to the
    ``[P, Q/16, B/2, 1, 4, 4]`` of its folded form: block ``(p, q')`` at tap ``t = 4*h + w``
    is block ``(p, (16*(q' // b) + t) * b + q' % b)``, ``b = 16/B`` blocks per slot group
    (the slot group ``16*g + t`` of the 1x1x1 input is group ``g`` at position ``t`` of the
    map; :meth:`ResolvedLayer.fold_fc_input <fcircnn.models.config.ResolvedLayer.fold_fc_input>`).

    Raises
    ------
    ValueError
        If the arrays are not fc weight slots whose blocks fill whole slot groups at every
        position of the map.
    """
    positions = math.prod(FC_FOLD_SHAPE)
    per_group = SLOT_GROUP_CHANNELS // block_size if block_size > 0 else 0
    out = []
    for part in (wq_re, wq_im):
        part = np.asarray(part)
        if (part.ndim != 6 or part.shape[3:] != (1, 1, 1) or not per_group
                or part.shape[1] % (positions * per_group)):
            raise ValueError(f"fc weight slots [P, Q, B/2, 1, 1, 1] in whole slot groups at "
                             f"{positions} positions (Q a multiple of {positions * per_group} "
                             f"at B = {block_size}), not {part.shape}")
        p, q, half = part.shape[:3]
        # [P, Q/(16 b), 16 positions, b, B/2] -> [P, Q/(16 b), b, B/2, positions]
        grouped = part.reshape(p, q // (positions * per_group), positions, per_group, half)
        moved = grouped.transpose(0, 1, 3, 4, 2)
        out.append(moved.reshape(p, q // positions, half, *FC_FOLD_SHAPE))
    return out[0], out[1]


def trim_weight_slots(wq_re: np.ndarray, wq_im: np.ndarray, layer: ResolvedLayer
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Weight slots ``[P, Q, B/2, Kd, Kr, Kc]`` of conv ``layer`` to those of its trimmed
    kernel (:meth:`ResolvedLayer.trim_taps <fcircnn.models.config.ResolvedLayer.trim_taps>`):
    the taps of :meth:`~fcircnn.models.config.ResolvedLayer.useful_taps` on each axis.

    Raises
    ------
    ValueError
        If the arrays are not ``layer``'s weight slots (kernel axes other than its kernel), or
        ``layer`` is not a conv.
    """
    kept = layer.useful_taps()
    out = []
    for part in (wq_re, wq_im):
        part = np.asarray(part)
        if part.ndim != 6 or part.shape[3:] != layer.kernel:
            raise ValueError(f"layer {layer.name!r}: weight slots [P, Q, B/2, "
                             f"{', '.join(map(str, layer.kernel))}] expected, not {part.shape}")
        (d0, d1), (r0, r1), (c0, c1) = ((r.start, r.stop) for r in kept)
        out.append(part[..., d0:d1, r0:r1, c0:c1])
    return out[0], out[1]


def view_gap_post_slots(post: PostParams, slots: int) -> PostParams:
    """``post`` ``[2, S]`` of a gap layer read as ``k = S / slots`` planes of ``slots`` slots
    (:meth:`ResolvedLayer.view_gap_input
    <fcircnn.models.config.ResolvedLayer.view_gap_input>`) -> ``[2, slots]``: view slot ``8*g +
    r`` applies to original slot ``8*(g*k + j) + r`` of every plane ``j``, so those must be
    equal (per-tensor and per-bin scales are); the result holds plane 0's.

    Raises
    ------
    ValueError
        If ``slots`` is not whole slot groups dividing ``S``, or a parameter differs between
        the slots one view slot stands for.
    """
    size = np.asarray(post.mult).shape[1]
    if slots <= 0 or slots % SLOTS_PER_BEAT or size % slots:
        raise ValueError(f"{size} post slots are not planes of {slots} slots in whole groups")
    k = size // slots

    def view(name, a):
        if a is None:
            return None
        planes = np.asarray(a).reshape(2, slots // SLOTS_PER_BEAT, k, SLOTS_PER_BEAT)
        if not (planes == planes[:, :, :1]).all():
            raise ValueError(f"post parameter {name} differs between the slots of one view "
                             f"slot (the gap's scales must be per tensor or per bin)")
        return planes[:, :, 0].reshape(2, slots)

    return PostParams(view("mult", post.mult), view("bias", post.bias),
                      view("shift", post.shift), view("res_mult", post.res_mult))
