"""The compiler's byte packing: weight tiles, post-parameter records and the network input,
as the engine reads them (:func:`pack_weight_image`, :func:`pack_post_table`,
:func:`pack_network_input`), and each layer's weight slots and post records as its
descriptor runs them (folded, trimmed or viewed: :func:`layer_weight_slots`,
:func:`layer_post_records`).

Weight image (per layer)
------------------------
For the core that runs the layer (``acc.core_for(layer)``, tiles ``Tn``, ``Tm``), output-channel
tile ``mt < m_tiles = ceil(M/Tm)`` outer, input-channel tile ``nt < n_tiles = ceil(N/Tn)`` inner
(``M``, ``N`` padded to ``B``), one :class:`~fcircnn.hw.buffer_weight.WeightBuffer` tile image
each, contiguous, ``weight_image_beats(Tn, Tm, B, taps) * 16`` bytes: tap ``t`` (``kd``, ``kr``,
``kc`` row-major, ``taps = Kd*Kr*Kc``) major, then block pair ``j = p*(Tn/B) + q`` (``p``, ``q``
block indices inside the tile), then bin slot ``k < B/2``; two int8 bytes per slot, ``re``
(= ``c``) then ``im`` (= ``d``) of the integer weight slot ``wq[mt*Tm/B + p, nt*Tn/B + q, k,
kd, kr, kc]``. Block pairs outside the layer (partial tiles) are zero. A layer whose
descriptor has ``FLAG_WSPLIT`` (its weight tiles read in two halves over the two AXI ports,
:func:`fcircnn.arch.ports.weight_halves`) has each tile laid out half-major: the first half of
every tap's beats, tap by tap, then the second half of every tap's beats; with
``FLAG_WQUARTER`` too (read in four quarters over four ports,
:func:`fcircnn.arch.ports.weight_quarters`) quarter-major: the first quarter of every tap's
beats, tap by tap, then the second, the third and the fourth.

A two-port accelerator splits a layer's weight tiles, its input boxes or both where the
performance model says the descriptor runs faster so (:func:`port_split`): in practice the
weight tiles of the fully connected layers, whose weights bound them while port 0 idles, the
input boxes of the folded first layers and the stride-2 layers, whose input binds them while
port 1 idles, and both where the two are close (each port then reads half of each). A split
input box changes nothing in the image. A four-port accelerator can also read a weight tile in
quarters, one per port (``FLAG_WSPLIT | FLAG_WQUARTER``, alone or with ``FLAG_ISPLIT``): the
fully connected layers again, whose halves leave ports 0 and 2 idle.

Global average pooling is lowered to a conv over the whole map (kernel = input shape, stride 1,
no padding) with block-diagonal identity weights: slot 0 of a diagonal block pair is ``1 + 1i``
(component-wise product: ``re*1``, ``im*1``), slots ``k >= 1`` are ``1 + 0i``, every other pair
0. Its accumulator is the voxel sum the golden model requantizes, so its post parameters are the
quantized network's unchanged. On a map one plane deep whose channels are several of its core's
``Tn`` (:func:`~fcircnn.models.placement.views_gap`) it reads the map as ``k`` planes of one
channel tile: one weight tile of identity blocks, the post records of one plane's slots
(:func:`~fcircnn.models.fold.view_gap_post_slots`), its ``k x 1 x 1`` output the bytes of the
network's ``1 x 1 x 1`` map. A conv whose kernel taps at an end of an axis read padding only
runs without them (:func:`~fcircnn.models.placement.trims_taps`): its weight image holds the
kept taps (:func:`~fcircnn.models.fold.trim_weight_slots`). A fully connected layer is the
conv whose kernel covers the input map (channel-minor flatten, as in the golden model).

Post-parameter table (per layer)
--------------------------------
One 32-byte little-endian record per output slot ``s`` (slot count rounded up to a multiple of
8; the extra records are zero and produce zero slots):

======  =====  ===========================================================
offset  bytes  field
======  =====  ===========================================================
0x00    2x2    ``mult`` re, im (int16)
0x04    2x2    ``res_mult`` re, im (int16; 0 without residual)
0x08    6x2    ``bias`` re, im (int48, two's complement)
0x14    1x2    ``shift`` re, im (uint8, 0..47)
0x16    10     reserved, 0
======  =====  ===========================================================

The post stage always applies the table (it carries the requantization even for layers without
CBN): ``t = acc*mult + bias + res*res_mult``, rounding shift, clamp, CReLU if ``FLAG_CRELU``,
CMaxPool if ``FLAG_POOL`` (docs/contract.md section 6).
"""

from __future__ import annotations

import math

import numpy as np

from fcircnn.models.fold import (
    compact_spread_slots,
    fold_fc_weight_slots,
    fold_input_slots,
    fold_post_slots,
    fold_weight_slots,
    trim_weight_slots,
    view_gap_post_slots,
)
from fcircnn.models.layout import SLOTS_PER_BEAT, pack_ncdhw8
from fcircnn.models.quant import PostParams

from .plan import POST_RECORD_BYTES, CompileError, LayerPlan, NetworkPlan, PostOverflowError

__all__ = [
    "gap_weight_slots",
    "layer_post_records",
    "layer_weight_slots",
    "network_input_slots",
    "pack_network_input",
    "pack_post_table",
    "pack_weight_image",
]

_INT16 = 1 << 15


_INT48 = 1 << 47


def gap_weight_slots(blocks: int, B: int, kernel: tuple[int, int, int]
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Integer weight slots ``(re, im)`` ``[blocks, blocks, B/2, *kernel]`` of global average
    pooling lowered to a conv: block-diagonal, slot 0 ``1 + 1i``, slots ``k >= 1`` ``1 + 0i``.

    With these weights :func:`~fcircnn.models.spectral.conv3d_slots_int` over a map of shape
    ``kernel`` returns the voxel sum of each slot part.
    """
    half = B // 2
    re = np.zeros((blocks, blocks, half, *kernel), dtype=np.int64)
    im = np.zeros_like(re)
    diag = np.arange(blocks)
    re[diag, diag] = 1
    im[diag, diag, 0] = 1
    return re, im


def pack_weight_image(wq_re: np.ndarray, wq_im: np.ndarray, Tn: int, Tm: int, B: int, *,
                      parts: int = 1) -> bytes:
    """Integer weight slots ``[P, Q, B/2, Kd, Kr, Kc]`` -> the layer's weight image (module
    docstring), ``ceil(P*B/Tm) * ceil(Q*B/Tn)`` tiles; ``parts``: each tile in that many
    parts of every tap's beats, part-major (2: ``FLAG_WSPLIT``, half-major; 4: with
    ``FLAG_WQUARTER``, quarter-major; :func:`~fcircnn.arch.descriptor.weight_parts`)."""
    P, Q, half = wq_re.shape[:3]
    taps = math.prod(wq_re.shape[3:])
    pm, qn = Tm // B, Tn // B
    mt, nt = -(-P // pm), -(-Q // qn)
    both = np.zeros((mt * pm, nt * qn, half, taps, 2), dtype=np.int8)
    both[:P, :Q, ..., 0] = np.asarray(wq_re).reshape(P, Q, half, taps)
    both[:P, :Q, ..., 1] = np.asarray(wq_im).reshape(P, Q, half, taps)
    # [mt, p, nt, q, k, tap, part] -> [mt, nt, tap, p, q, k, part]
    tiles = both.reshape(mt, pm, nt, qn, half, taps, 2).transpose(0, 2, 5, 1, 3, 4, 6)
    if parts not in (1, 2, 4):
        raise ValueError(f"parts must be 1, 2 or 4, not {parts!r}")
    if parts > 1:
        # [mt, nt, tap, part, bytes of the part] -> [mt, nt, part, tap, bytes]
        tap_bytes = pm * qn * half * 2
        if tap_bytes % (parts * 16):
            raise ValueError(f"a tap of {tap_bytes // 16} beats does not split in {parts}")
        tiles = np.ascontiguousarray(tiles).reshape(mt, nt, taps, parts, tap_bytes // parts)
        tiles = tiles.transpose(0, 1, 3, 2, 4)
    return np.ascontiguousarray(tiles).tobytes()


def pack_post_table(post: PostParams, records: int | None = None) -> bytes:
    """Post parameters ``[2, S]`` -> ``records`` (default ``ceil(S/8)*8``) records of 32 bytes
    (module docstring); records beyond ``S`` are zero.

    Raises
    ------
    OverflowError
        If a value leaves its field (cannot happen for :func:`~fcircnn.models.quant.fold_post`
        output).
    """
    S = post.mult.shape[1]
    res_mult = np.zeros_like(post.mult) if post.res_mult is None else post.res_mult
    for name, arr, lo, hi in (("mult", post.mult, -_INT16, _INT16), ("res_mult", res_mult,
                              -_INT16, _INT16), ("bias", post.bias, -_INT48, _INT48),
                              ("shift", post.shift, 0, 48)):
        if arr.size and (arr.min() < lo or arr.max() >= hi):
            raise OverflowError(f"{name} outside [{lo}, {hi - 1}]")
    count = -(-S // SLOTS_PER_BEAT) * SLOTS_PER_BEAT if records is None else records
    if count < S:
        raise ValueError(f"records = {count} is fewer than the {S} slots")
    rec = np.zeros((count, POST_RECORD_BYTES), dtype=np.uint8)

    def le(values: np.ndarray, dtype: str, nbytes: int) -> np.ndarray:
        return np.asarray(values).astype(dtype).view(np.uint8).reshape(S, -1)[:, :nbytes]

    for c in (0, 1):
        rec[:S, 2 * c:2 * c + 2] = le(post.mult[c], "<i2", 2)
        rec[:S, 4 + 2 * c:6 + 2 * c] = le(res_mult[c], "<i2", 2)
        rec[:S, 8 + 6 * c:14 + 6 * c] = le(post.bias[c], "<i8", 6)
        rec[:S, 0x14 + c] = post.shift[c].astype(np.uint8)
    return rec.tobytes()


def pack_network_input(plan: NetworkPlan, xq_re: np.ndarray, xq_im: np.ndarray) -> bytes:
    """The ``input`` region's bytes for the quantized network input ``[S, D, H, W]``
    (:meth:`~fcircnn.models.network.QuantizedNetwork.quantize_input`): NC/8DHW8 of the input,
    or of its depth (and row) copies when the first layer runs folded
    (:func:`network_input_slots`). A host running a new clip on a compiled image writes these
    bytes at the region's base.
    """
    return pack_ncdhw8(*network_input_slots(plan, xq_re, xq_im))


def network_input_slots(plan: NetworkPlan, xq_re: np.ndarray, xq_im: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray]:
    """The slots of the ``input`` region for the quantized network input ``[S, D, H, W]``:
    itself, or its depth (and row) copies when the first layer runs folded
    (:func:`~fcircnn.models.fold.fold_input_slots` with the layer's
    :attr:`LayerPlan.depths` and :attr:`LayerPlan.rows`); stored compact where the layer
    reads it so (:attr:`LayerPlan.spread`, :func:`~fcircnn.models.fold.compact_spread_slots`).

    Raises
    ------
    CompileError
        If the first layer reads its input compact but the slots are not spread (quantized
        with scales that differ between a block's bins).
    """
    first = plan.layers[0]
    if first.folded:
        xq_re, xq_im = fold_input_slots(xq_re, xq_im, first.layer.datapath(), first.depths,
                                        first.rows)
    if first.spread:
        try:
            return compact_spread_slots(xq_re, xq_im, first.core.tn, first.layer.block_size)
        except ValueError as exc:  # input scales that differ between a block's bins
            raise CompileError(f"layer {first.layer.name!r} reads its input compact: {exc} "
                               "Use one input scale for every bin (granularity tensor, or "
                               "a measured calibration).") from None
    return xq_re, xq_im


def layer_weight_slots(lp: LayerPlan, ql, B: int) -> tuple[np.ndarray, np.ndarray]:
    """The integer weight slots ``(re, im)`` of layer ``lp`` as its descriptor runs them, from
    its quantized layer ``ql``: a gap's identity blocks (of one channel tile where viewed), an
    fc's folded onto its ``(1, 4, 4)`` input view, a first layer's with its depth taps (and
    rows) folded, a trimmed kernel's kept taps, else the layer's own."""
    layer = lp.layer
    if layer.kind == "gap":
        run = lp.engine_layer
        return gap_weight_slots(run.padded_in_channels // B, B, run.kernel)
    if lp.folded and layer.kind == "fc":
        return fold_fc_weight_slots(ql.wq_re, ql.wq_im, B)
    if lp.folded:
        return fold_weight_slots(ql.wq_re, ql.wq_im, lp.depths, layer.stride[0], lp.rows)
    if lp.trimmed:
        return trim_weight_slots(ql.wq_re, ql.wq_im, layer)
    return ql.wq_re, ql.wq_im


def layer_post_records(lp: LayerPlan, ql) -> bytes:
    """The post-parameter table of layer ``lp``'s descriptor, from its quantized layer ``ql``:
    the records of both output depths where it folds two, of one plane's slots for a gap
    viewed as planes; zero records to its whole output-channel tiles.

    Raises
    ------
    PostOverflowError
        A parameter does not fit its field, naming the layer.
    """
    post = ql.post
    if lp.depths > 1:
        post = fold_post_slots(post, lp.depths)
    elif lp.layer.kind == "gap" and lp.folded:
        post = view_gap_post_slots(post, lp.engine_layer.padded_out_channels // 2)
    try:
        return pack_post_table(post, records=lp.descriptor.m_tiles * lp.core.tm // 2)
    except (OverflowError, ValueError) as exc:
        raise PostOverflowError(f"layer {lp.layer.name!r}: post parameters: {exc}") from None
