"""Layer descriptors: the binary contract between the compiler and the layer engine.

The engine reads a linked list of fixed-size descriptors from DDR, starting at the register
``DESC_PTR`` (:mod:`fcircnn.hw.regfile`), one descriptor per layer. A descriptor is
:data:`DESCRIPTOR_BYTES` = 256 bytes (sixteen 128-bit beats), stored at a 16-byte aligned
address, little-endian; every field is an unsigned integer at a fixed byte offset.
:func:`descriptor_layout` is the same layout as an Amaranth ``data.StructLayout`` (field
``f`` occupies bits ``[8*offset +: 8*size]`` of the 2048-bit little-endian descriptor word).

======  =====  ================  ===========================================================
offset  bytes  field             contents
======  =====  ================  ===========================================================
0x00    2      ``layer``         layer index in the network (0-based)
0x02    1      ``core``          index of the core (``AcceleratorConfig.cores``) that runs it
0x03    1      ``op``            :data:`OP_CONV` (0) conv / fc, :data:`OP_GAP` (1) global
                                 average pooling lowered to a conv (see the compiler)
0x04    2      ``flags``         bit 0 :data:`FLAG_CBN`, bit 1 :data:`FLAG_CRELU`, bit 2
                                 :data:`FLAG_RESIDUAL`, bit 3 :data:`FLAG_POOL`, bit 4
                                 :data:`FLAG_LAST`, bit 5 :data:`FLAG_WSPLIT`, bit 6
                                 :data:`FLAG_ISPLIT`, bit 7 :data:`FLAG_DFOLD`, bit 8
                                 :data:`FLAG_WQUARTER`, bit 9 :data:`FLAG_IQUARTER`, bit
                                 10 :data:`FLAG_MINNER`, bit 11 :data:`FLAG_ROWLANES`, bit
                                 12 :data:`FLAG_RFFT`, bit 13 :data:`FLAG_LANE0`, bit
                                 14 :data:`FLAG_SPREAD`; other bits 0
0x06    2      ``in_slots``      slots of the input map (``N/2``, ``N`` padded to ``B``)
0x08    2x3    ``in_shape``      input map ``D, H, W``
0x0E    2      ``out_slots``     slots of the output map (``M/2``)
0x10    2x3    ``conv_shape``    ``D, H, W`` after the convolution (= the residual map's)
0x16    2x3    ``out_shape``     ``D, H, W`` after the pool (the map written to DDR)
0x1C    2x3    ``kernel``        ``Kd, Kr, Kc`` (fc and gap: the whole input map)
0x22    1x3    ``stride``        conv stride ``d, h, w``
0x25    1x3    ``padding``       conv zero padding ``d, h, w``
0x28    1x3    ``pool_window``   CMaxPool window (1, 1, 1 without pool)
0x2B    1x3    ``pool_stride``   CMaxPool stride (1, 1, 1 without pool)
0x2E    1x3    ``pool_padding``  CMaxPool padding, padded voxels never win (0 without pool)
0x31    7      (reserved)        0
0x38    8      ``in_base``       byte address of the input map (NC/8DHW8)
0x40    8      ``out_base``      byte address of the output map (NC/8DHW8, ``out_shape``)
0x48    8      ``res_base``      byte address of the residual map (``out_slots`` x
                                 ``conv_shape``), 0 without residual
0x50    8      ``weight_base``   byte address of the layer's weight image
0x58    8      ``post_base``     byte address of the post-parameter table
0x60    8      ``cycles_addr``   where the engine writes the layer's cycle count (uint64)
0x68    8      ``next_desc``     address of the next descriptor, 0 after the last
0x70    4      ``weight_bytes``  bytes of the weight image
0x74    2      ``m_tiles``       output-channel tiles ``ceil(M / Tm)``
0x76    2      ``n_tiles``       input-channel tiles ``ceil(N / Tn)``
0x78    8      (reserved)        0
0x80    1x3    ``tile``          conv output tile ``d, h, w`` of this layer (<= the core's
                                 ``Td, Tr, Tc``); pool pass: 0
0x83    1      (reserved)        0
0x84    2x3    ``tiles``         tiles per axis, ``ceil(conv_shape / tile)``; pool pass: 0
0x8A    2      (reserved)        0
0x8C    4x3    ``in_stride``     byte strides of the input map: slot group, depth plane, row
0x98    4x3    ``out_stride``    byte strides of the output map (conv: ``conv_shape``, also
                                 the residual map's; fused pool and pool pass:
                                 ``out_shape``)
0xA4    4x3    ``in_step``       input bytes per tile step: ``tile*stride*in_stride`` per axis
                                 (``d``, ``h``; ``w`` with a 16-byte voxel stride)
0xB0    4x3    ``in_pad_bytes``  ``padding * in_stride`` per axis (the first tile is clipped)
0xBC    4x3    ``out_step``      output bytes per tile step: ``tile * out_stride`` per axis
0xC8    4      ``weight_tile_bytes`` bytes of one ``(mt, nt)`` weight tile
0xCC    4      ``in_nt_step``    input bytes per input-channel tile step (``max(1, Tn/16)``
                                 groups; with ``Tn < 16``, every ``16/Tn`` tiles)
0xD0    4      ``out_mt_step``   output bytes per output-channel tile (``Tm/16`` groups)
0xD4    2x16   ``rfft_mult``     with :data:`FLAG_RFFT`: the rfft's multiplier of slot
                                 position ``k`` and part ``p`` at index ``p*8 + k`` (int16,
                                 two's complement); 0 otherwise
0xF4    1      ``rfft_shift``    with :data:`FLAG_RFFT`: its rounding shift, 0..47
0xF5    1      (reserved)        0
0xF6    2x5    ``*_pages``       the stream regions: ``in_pages``, ``out_pages``,
                                 ``res_pages``, ``weight_pages``, ``post_pages``, each the
                                 4 KiB pages of the region its stream may touch, from the
                                 page of its ``*_base`` on (:data:`STREAM_REGIONS`); 0 for a
                                 stream the op does not use
======  =====  ================  ===========================================================

**Stream regions.** Each DMA stream of a descriptor (:data:`STREAM_REGIONS`: the input, the
output, the residual, the weights and the post records) may touch only the pages from the page
of its ``*_base`` to that page plus ``*_pages - 1``; the compiler writes the region of the map
or table the stream belongs to. The hardware refuses a descriptor whose op uses a stream
(:func:`used_regions`) with no region (``*_pages = 0``: bad descriptor) before any transfer,
and checks every burst of the stream, before it is issued, against its region narrowed to the
memory window of its direction (:mod:`fcircnn.arch.registers`): a burst outside is not issued
(error 2 or 6). A descriptor therefore moves bytes only inside its own regions, whatever its
tile counts, strides and steps say.

The fields from 0x80 on are *derived*: the compiler computes them from the others and the core
(:func:`fcircnn.gen.plan.plan_network`), so the engine needs no multiplier or divider for
its tile walk. A pool that fits the conv tiles
(:func:`fcircnn.arch.geometry.pool_fuses`: window = stride, 1 or 2, no padding, or every axis
of stride 2 with window 2 or window 3 and padding 1; even tiles and map on the axes of stride
2) is *fused*: the conv descriptor carries :data:`FLAG_POOL` and the pool's window, stride and
padding, the drain pools each tile (a 3-wide window's first voxel carried from the tile
before, :func:`carried_axes`), and ``out_shape``, ``out_base``, ``out_stride``, ``out_step``
and ``out_mt_step`` describe the pooled map (``out_step``: ``tile / stride`` pooled
voxels). A pool pass (:data:`OP_POOL`) runs the CMaxPool of a layer whose pool does not
fit the conv tiles as its own descriptor: it reads ``in_slots x in_shape`` at ``in_base`` and
writes the pooled ``out_slots x out_shape`` at ``out_base``, slot group by slot group.

Addresses are 16-byte aligned and below ``2**address_width`` (checked by the compiler; the
fields hold 64 bits). Every field is validated on construction: a value outside its field
raises ``ValueError`` naming the field and its limit.
"""

from __future__ import annotations

import functools
import operator
import struct
from dataclasses import astuple, dataclass, fields
from typing import TYPE_CHECKING

from .geometry import PAGE_BITS

if TYPE_CHECKING:
    from amaranth.lib import data

__all__ = [
    "ADDRESS_FIELDS",
    "DESCRIPTOR_BYTES",
    "DFOLD_DEPTHS",
    "FIELD_NAMES",
    "FLAG_CBN",
    "FLAG_CRELU",
    "FLAG_DFOLD",
    "FLAG_IQUARTER",
    "FLAG_ISPLIT",
    "FLAG_LANE0",
    "FLAG_LAST",
    "FLAG_MINNER",
    "FLAG_POOL",
    "FLAG_RESIDUAL",
    "FLAG_RFFT",
    "FLAG_ROWLANES",
    "FLAG_SPREAD",
    "FLAG_WQUARTER",
    "FLAG_WSPLIT",
    "MINNER_M_TILES",
    "NEEDED_FLAGS",
    "OP_CONV",
    "OP_GAP",
    "OP_POOL",
    "READ_REGIONS",
    "STREAM_REGIONS",
    "WRITE_REGIONS",
    "LayerDescriptor",
    "balances_tiles",
    "carried_axes",
    "descriptor_layout",
    "field_layout",
    "field_offset",
    "flags_fault",
    "region_code",
    "region_fault",
    "region_pages",
    "reuses_inputs",
    "row_groups_of",
    "row_lanes_fault",
    "spread_fault",
    "stored_map",
    "transform_fault",
    "used_regions",
    "weight_parts",
]

#: Bytes of one descriptor (sixteen 128-bit beats).
DESCRIPTOR_BYTES = 256

#: ``op``: convolution (also fully connected layers: the conv over the whole map).
OP_CONV = 0
#: ``op``: global average pooling, executed as a conv with block-diagonal identity weights.
#: With an output depth ``k > 1`` its input is a one-plane map read as ``k`` planes of one
#: channel tile (:meth:`fcircnn.models.config.ResolvedLayer.view_gap_input`): the map it
#: writes is the ``1 x 1 x 1`` map of ``k * out_slots`` slots (:func:`stored_map`).
OP_GAP = 1
#: ``op``: a pool pass (CMaxPool over a whole map, no PE array).
OP_POOL = 2

FLAG_CBN = 1 << 0
FLAG_CRELU = 1 << 1
FLAG_RESIDUAL = 1 << 2
FLAG_POOL = 1 << 3
FLAG_LAST = 1 << 4
#: Each weight tile is read in two halves, one on each AXI port of a two-port accelerator
#: (:meth:`fcircnn.arch.ports.PortMap.splits_weights`); its image is laid out half-major.
FLAG_WSPLIT = 1 << 5
#: Each input box is read in two halves of its slot groups, one on each AXI port of a two-port
#: accelerator (:meth:`fcircnn.arch.ports.PortMap.splits_inputs`).
FLAG_ISPLIT = 1 << 6
#: The output channels are two depths of the stored map (a first layer whose output depth
#: pairs fold into the core's idle output lanes, :meth:`fcircnn.models.config.ResolvedLayer.
#: fold_depth_taps`): slot group ``j*G/2 + g`` of the tile at depth ``d`` is group ``g`` of the
#: stored map at depth ``2*d + j``. The store writes each half of a tile's groups as its own
#: box, half ``j`` at ``out_stride[1] / 2 * j`` bytes further (``out_stride[1]``: two depth
#: planes of the stored map); :meth:`LayerDescriptor.stored_output` is that map.
FLAG_DFOLD = 1 << 7
#: With :data:`FLAG_WSPLIT` on a four-port accelerator: each weight tile is read in four
#: quarters, one on each AXI port (:meth:`fcircnn.arch.ports.PortMap.quarters_weights`); its
#: image is laid out quarter-major (:func:`fcircnn.arch.ports.weight_quarters`). Never without
#: :data:`FLAG_WSPLIT`; with :data:`FLAG_ISPLIT` port 2 reads the upper half of each input box,
#: then its quarter of the weight tile.
FLAG_WQUARTER = 1 << 8
#: With :data:`FLAG_ISPLIT` on a four-port accelerator: each input box is read in four
#: quarters of its slot groups, one on each AXI port (:meth:`fcircnn.arch.ports.PortMap.
#: quarters_inputs`, :func:`fcircnn.arch.ports.input_quarters`): the first on port 0 (the input
#: loader), the second on port 1 (the weight loader, before its weight tile), the third on port
#: 2 (where the upper half of a split box starts) and the fourth on port 3 (after the tile's
#: residual box, before the pass's weight half). The image does not change. Never without
#: :data:`FLAG_ISPLIT`.
FLAG_IQUARTER = 1 << 9
#: The output-channel tiles are the innermost loop of the walk, ``(td, th, tw) > mt`` (else
#: ``mt > (td, th, tw)``): each input box is read once and serves every m-tile of its tile
#: (the compute releases it after the last m-tile's pass), each pass then reads its m-tile's
#: weight tile. Only where :func:`reuses_inputs` allows it: one n-tile (the box is the tile's
#: whole input) and two m-tiles (the parameter memory's two halves then hold both m-tiles'
#: post records for the whole layer, loaded on the first tile).
FLAG_MINNER = 1 << 10
#: The core's depth lanes take rows of the tile as well (*row lanes*): the layer's whole
#: output depth is one tile ``tile[0]`` deep, fewer depths than the core's ``L`` lanes
#: (ResNet-18's stages 3 and 4: 2 and 1 deep on 4 lanes), and its ``R = L / tile[0]`` row
#: groups (:func:`row_groups_of`) split each tile's rows: lane ``v`` computes output depth
#: ``v mod tile[0]`` at rows ``(v div tile[0]) * Rh ..`` of the tile, ``Rh = ceil(tile[1] /
#: R)`` (:func:`fcircnn.arch.geometry.lane_rows`), so a tile takes ``min(Rh, ext_h) * ext_w``
#: beats per tap instead of ``ext_h * ext_w``. The walk, the boxes and the maps do not
#: change; the input buffer stores each lane's rows, the drain maps each lane's sums back.
#: Only on a conv descriptor without :data:`FLAG_POOL` or :data:`FLAG_DFOLD`, of one depth
#: tile, ``tile[0]`` a power of two (the engine also needs ``tile[0] < L``, ``L`` a power of
#: two, and a core built for it: :func:`fcircnn.arch.geometry.row_groups`).
FLAG_ROWLANES = 1 << 11
#: The output map is the integer rfft of the post chain's time lanes, each block's ``B``
#: lanes requantized into its ``B/2`` slots with ``rfft_mult`` and ``rfft_shift`` (a dense
#: layer's time-domain output with the rfft step after it; ``docs/golden.md``, "The integer
#: rfft"). Not on a pool pass; the engine needs a core built with the rfft stage.
FLAG_RFFT = 1 << 12
#: The post chain takes lane 0 of the inverse transform of each block's accumulators (a
#: dense layer on an irfft's slots, ``lane0`` layout). Only on a conv descriptor without
#: :data:`FLAG_POOL` (a pool on the partial sums would take the maximum of each part, not of
#: their sum); the engine needs a core built with the lane-0 stage.
FLAG_LANE0 = 1 << 13
#: The input map is ``spread`` (each real channel a block of its own, the same value in every
#: bin; a dense first layer's input) stored *compact*: one slot group per n-tile, whose slot
#: ``j`` holds in its real part the real channel of the n-tile's block ``j`` (``Tn/B`` blocks,
#: at most 8: :func:`fcircnn.arch.geometry.spreads`; the imaginary parts and the slots past
#: ``Tn/B`` are ignored). The loader reads one group per n-tile, ``in_nt_step`` bytes apart;
#: the input buffer spreads each slot into its block as the PE array reads it (slot 0 ``x +
#: i*x``, slots ``1 .. B/2-1`` ``x``), so the PE array computes what it would on the spread
#: map, from ``2*B`` times fewer bytes. ``in_slots`` stays the spread map's (the n-tiles and
#: weights do not change). Only on a conv descriptor without :data:`FLAG_ISPLIT`; the engine
#: needs a core built for it.
FLAG_SPREAD = 1 << 14
#: Output depths per folded depth with :data:`FLAG_DFOLD`.
DFOLD_DEPTHS = 2
_FLAGS_MASK = 0x7FFF


#: Each flag's name, for error messages.
_FLAG_NAMES = {value: name for name, value in list(globals().items())
               if name.startswith("FLAG_") and isinstance(value, int)}
#: The m-tiles of a descriptor with :data:`FLAG_MINNER`.
MINNER_M_TILES = 2


def carried_axes(op, flags, pool_window):
    """Per axis ``(d, h, w)``, whether a descriptor's pool fused into the drain carries its
    windows across tiles: a conv or gap with :data:`FLAG_POOL` and a 3-wide window on that
    axis (stride 2, padding 1: :func:`fcircnn.arch.geometry.pool_carries`; the first window of
    a tile takes its first voxel from the tile before). On ints ``bool``; on Amaranth values
    1-bit values."""
    fused = (op != OP_POOL) & ((flags & FLAG_POOL) != 0)
    return [fused & (pool_window[a] == 3) for a in range(3)]


def reuses_inputs(op, m_tiles, n_tiles, flags, pool_window):
    """Whether a descriptor of ``op`` with ``m_tiles``, ``n_tiles``, ``flags`` and
    ``pool_window`` may walk its m-tiles innermost and keep each input box across them
    (:data:`FLAG_MINNER`): a conv or gap of one n-tile and :data:`MINNER_M_TILES` m-tiles whose
    pool, if fused, carries no window across tiles (none of :func:`carried_axes`; the carry
    memories hold one m-tile's lines). On ints a ``bool``; on Amaranth values (the engine's
    check, :func:`flags_fault`) a 1-bit value."""
    carried = functools.reduce(operator.or_, carried_axes(op, flags, pool_window))
    return (op != OP_POOL) & (n_tiles == 1) & (m_tiles == MINNER_M_TILES) & (carried == 0)


def balances_tiles(op: int, flags: int) -> bool:
    """Whether a descriptor of ``op`` with ``flags`` may have its tile evened out over its
    map's rows and columns (:meth:`~fcircnn.arch.geometry.CoreGeometry.layer_tile` with
    ``balanced``): a conv without a pool in the drain (whose tile the pool's stride must
    divide, and whose carried windows need even tiles) and without row lanes (whose row
    groups come from the unbalanced tile's rows)."""
    return op == OP_CONV and not flags & (FLAG_POOL | FLAG_ROWLANES)


def row_lanes_fault(flags, op, tile_d, tiles_d):
    """Whether :data:`FLAG_ROWLANES` is set where a descriptor cannot have it, whatever the
    core: on a pool pass or gap, with :data:`FLAG_POOL` or :data:`FLAG_DFOLD`, or on a
    descriptor of more than one depth tile or a tile depth that is not a power of two. On ints
    a ``bool``; on Amaranth values a 1-bit value."""
    bad = ((op != OP_CONV) | ((flags & (FLAG_POOL | FLAG_DFOLD)) != 0) | (tiles_d != 1)
           | ((tile_d & (tile_d - 1)) != 0) | (tile_d == 0))
    return ((flags & FLAG_ROWLANES) != 0) & bad


def row_groups_of(flags: int, tile_d: int, lanes: int) -> int:
    """The row groups ``R`` of a descriptor with ``flags`` and tile depth ``tile_d`` on a
    core of ``lanes`` depth lanes (:data:`FLAG_ROWLANES`): ``lanes / tile_d``, else 1."""
    return lanes // tile_d if flags & FLAG_ROWLANES else 1


def transform_fault(flags, op):
    """Whether :data:`FLAG_RFFT` or :data:`FLAG_LANE0` is set where a descriptor cannot have
    it, whatever the core: the rfft on a pool pass, the lane-0 sum on anything but a conv or
    with :data:`FLAG_POOL`. On ints a ``bool``; on Amaranth values a 1-bit value."""
    rfft = ((flags & FLAG_RFFT) != 0) & (op == OP_POOL)
    lane0 = ((flags & FLAG_LANE0) != 0) & ((op != OP_CONV) | ((flags & FLAG_POOL) != 0))
    return rfft | lane0


def spread_fault(flags, op):
    """Whether :data:`FLAG_SPREAD` is set where a descriptor cannot have it, whatever the
    core: on anything but a conv, or with :data:`FLAG_ISPLIT` (a compact n-tile is one slot
    group, which does not split). On ints a ``bool``; on Amaranth values a 1-bit value."""
    return ((flags & FLAG_SPREAD) != 0) & ((op != OP_CONV) | ((flags & FLAG_ISPLIT) != 0))


#: A descriptor's DMA streams, each with a region: fields ``<name>_base`` and
#: ``<name>_pages`` (input map, output map, residual map, weight image, post records).
STREAM_REGIONS: tuple[str, ...] = ("in", "out", "res", "weight", "post")
#: The streams the read engines carry and the one the write engines carry, in the order of
#: their region codes in a DMA command (:func:`region_code`); code 0 is the memory window
#: alone (the sequencer's descriptor fetch and cycle-entry write).
READ_REGIONS: tuple[str, ...] = ("in", "res", "weight", "post")
WRITE_REGIONS: tuple[str, ...] = ("out",)


def region_code(name: str) -> int:
    """The region code of stream ``name`` in a DMA command of its direction: 1 + its index
    in :data:`READ_REGIONS` or :data:`WRITE_REGIONS` (``KeyError`` for no stream)."""
    for streams in (READ_REGIONS, WRITE_REGIONS):
        if name in streams:
            return 1 + streams.index(name)
    raise KeyError(name)


def used_regions(op, flags) -> dict:
    """Whether an op with ``flags`` uses each stream of :data:`STREAM_REGIONS`: the input and
    output always, the residual with :data:`FLAG_RESIDUAL`, the weights and the post records
    on anything but a pool pass. Works on integers and on Amaranth values."""
    return {"in": True, "out": True, "res": (flags & FLAG_RESIDUAL) != 0,
            "weight": op != OP_POOL, "post": op != OP_POOL}


def region_fault(desc):
    """Whether descriptor ``desc`` (a :class:`LayerDescriptor` or a
    :func:`descriptor_layout` value) gives a stream its op uses no region (``*_pages = 0``):
    the hardware refuses it before any transfer."""
    used = used_regions(desc.op, desc.flags)
    return functools.reduce(operator.or_, [used[name] & (getattr(desc, f"{name}_pages") == 0)
                                           for name in STREAM_REGIONS])


def region_pages(base: int, end: int) -> int:
    """The ``*_pages`` of a region ``[base, end)`` (``end > base``): its pages from the page of
    ``base`` to the page of its last byte."""
    return ((end - 1) >> PAGE_BITS) - (base >> PAGE_BITS) + 1


#: Flags that are never set without another: ``{flag: the flag it needs}``.
NEEDED_FLAGS = {FLAG_WQUARTER: FLAG_WSPLIT, FLAG_IQUARTER: FLAG_ISPLIT}


def flags_fault(flags, op, m_tiles, n_tiles, pool_window, tile_d, tiles_d):
    """Whether a descriptor's ``flags`` break the rules :class:`LayerDescriptor` checks: a bit
    outside the defined flags, a flag of :data:`NEEDED_FLAGS` without the one it needs,
    :data:`FLAG_MINNER` where :func:`reuses_inputs` does not hold, :data:`FLAG_ROWLANES`
    where :func:`row_lanes_fault` holds, a transform where :func:`transform_fault` holds, or
    :data:`FLAG_SPREAD` where :func:`spread_fault` holds.
    On ints a ``bool``; on Amaranth values a 1-bit value (the accelerator refuses such a
    descriptor with :data:`~fcircnn.arch.registers.ERROR_BAD_DESCRIPTOR`)."""
    fault = (flags & (0xFFFF ^ _FLAGS_MASK)) != 0
    for flag, needed in NEEDED_FLAGS.items():
        fault = fault | (((flags & flag) != 0) & ((flags & needed) == 0))
    fault = (fault | row_lanes_fault(flags, op, tile_d, tiles_d) | transform_fault(flags, op)
             | spread_fault(flags, op))
    return fault | (((flags & FLAG_MINNER) != 0)
                    & (reuses_inputs(op, m_tiles, n_tiles, flags, pool_window) == 0))


def weight_parts(flags: int) -> int:
    """The parts a descriptor with ``flags`` reads each weight tile in (the image's layout of
    each tile, part-major): 4 with :data:`FLAG_WQUARTER`, 2 with :data:`FLAG_WSPLIT`, else
    1."""
    return 4 if flags & FLAG_WQUARTER else 2 if flags & FLAG_WSPLIT else 1


def stored_map(flags: int, out_slots: int, out_shape: Vec3, op: int = OP_CONV
               ) -> tuple[int, Vec3]:
    """Slots and ``D, H, W`` of the map a descriptor with these fields writes at
    ``out_base``: ``out_slots`` x ``out_shape``; with :data:`FLAG_DFOLD` the unfolded map of
    ``out_slots / 2`` slots and twice the depth; for an :data:`OP_GAP` descriptor of output
    depth ``k > 1`` (whole slot groups) the ``1 x 1 x 1`` map of ``k * out_slots`` slots, the
    same bytes."""
    if flags & FLAG_DFOLD:
        d, h, w = out_shape
        return out_slots // DFOLD_DEPTHS, (d * DFOLD_DEPTHS, h, w)
    if op == OP_GAP and out_shape[0] > 1:
        return out_slots * out_shape[0], (1, 1, 1)
    return out_slots, tuple(out_shape)

# (field, struct code, count) in byte order; vectors are (d, h, w) tuples.
_FIELDS: tuple[tuple[str, str, int], ...] = (
    ("layer", "H", 1),
    ("core", "B", 1),
    ("op", "B", 1),
    ("flags", "H", 1),
    ("in_slots", "H", 1),
    ("in_shape", "H", 3),
    ("out_slots", "H", 1),
    ("conv_shape", "H", 3),
    ("out_shape", "H", 3),
    ("kernel", "H", 3),
    ("stride", "B", 3),
    ("padding", "B", 3),
    ("pool_window", "B", 3),
    ("pool_stride", "B", 3),
    ("pool_padding", "B", 3),
    ("_reserved0", "7x", 0),
    ("in_base", "Q", 1),
    ("out_base", "Q", 1),
    ("res_base", "Q", 1),
    ("weight_base", "Q", 1),
    ("post_base", "Q", 1),
    ("cycles_addr", "Q", 1),
    ("next_desc", "Q", 1),
    ("weight_bytes", "I", 1),
    ("m_tiles", "H", 1),
    ("n_tiles", "H", 1),
    ("_reserved1", "8x", 0),
    ("tile", "B", 3),
    ("_reserved2", "1x", 0),
    ("tiles", "H", 3),
    ("_reserved3", "2x", 0),
    ("in_stride", "I", 3),
    ("out_stride", "I", 3),
    ("in_step", "I", 3),
    ("in_pad_bytes", "I", 3),
    ("out_step", "I", 3),
    ("weight_tile_bytes", "I", 1),
    ("in_nt_step", "I", 1),
    ("out_mt_step", "I", 1),
    ("rfft_mult", "H", 16),
    ("rfft_shift", "B", 1),
    ("_reserved4", "1x", 0),
    ("in_pages", "H", 1),
    ("out_pages", "H", 1),
    ("res_pages", "H", 1),
    ("weight_pages", "H", 1),
    ("post_pages", "H", 1),
)
_BITS = {"B": 8, "H": 16, "I": 32, "Q": 64}


def _format(fields) -> str:
    return "<" + "".join(code if n == 0 else f"{n}{code}" for _, code, n in fields)


_FORMAT = _format(_FIELDS)
_STRUCT = struct.Struct(_FORMAT)
#: Byte offset of each field in a packed descriptor.
_OFFSETS = {name: struct.calcsize(_format(_FIELDS[:k])) for k, (name, _, _) in enumerate(_FIELDS)
            if not name.startswith("_")}
assert _STRUCT.size == DESCRIPTOR_BYTES
#: The reserved byte ranges ``[start, end)``, which must be 0.
_RESERVED = tuple((struct.calcsize(_format(_FIELDS[:k])), struct.calcsize(_format(_FIELDS[:k + 1])))
                  for k, (name, _, _) in enumerate(_FIELDS) if name.startswith("_"))

#: The descriptor's byte-address fields: each must fit the accelerator's address width (the
#: hardware refuses the descriptor otherwise, :data:`~fcircnn.arch.registers.ERROR_BAD_DESCRIPTOR`).
ADDRESS_FIELDS = ("in_base", "out_base", "res_base", "weight_base", "post_base",
                  "cycles_addr", "next_desc")


def field_offset(name: str) -> int:
    """The byte offset of field ``name`` in a packed descriptor (``KeyError`` if there is
    none)."""
    return _OFFSETS[name]


def field_layout(name: str) -> tuple[int, int]:
    """``(count, bytes)`` of field ``name``: its elements (1, or 3 for a ``(d, h, w)`` vector,
    16 for ``rfft_mult``) and the bytes of each, little-endian (``KeyError`` if there is
    none)."""
    for field, code, count in _FIELDS:
        if field == name and not field.startswith("_"):
            return count, _BITS[code] // 8
    raise KeyError(name)


#: The descriptor's fields, in byte order (reserved bytes left out).
FIELD_NAMES: tuple[str, ...] = tuple(name for name, _, _ in _FIELDS if not name.startswith("_"))

Vec3 = tuple[int, int, int]


@dataclass(frozen=True)
class LayerDescriptor:
    """One layer for the engine (field meanings and byte offsets: module docstring).

    Raises
    ------
    ValueError
        On construction, naming the field and its limit, if a value is not a non-negative
        integer that fits its field, a vector has not three entries, an address is not
        16-byte aligned, a shape or kernel entry is 0, or ``flags``/``op`` is unknown.
    """

    layer: int
    core: int
    op: int
    flags: int
    in_slots: int
    in_shape: Vec3
    out_slots: int
    conv_shape: Vec3
    out_shape: Vec3
    kernel: Vec3
    stride: Vec3
    padding: Vec3
    pool_window: Vec3
    pool_stride: Vec3
    pool_padding: Vec3
    in_base: int
    out_base: int
    res_base: int
    weight_base: int
    post_base: int
    cycles_addr: int
    next_desc: int
    weight_bytes: int
    m_tiles: int
    n_tiles: int
    tile: Vec3 = (0, 0, 0)
    tiles: Vec3 = (0, 0, 0)
    in_stride: Vec3 = (0, 0, 0)
    out_stride: Vec3 = (0, 0, 0)
    in_step: Vec3 = (0, 0, 0)
    in_pad_bytes: Vec3 = (0, 0, 0)
    out_step: Vec3 = (0, 0, 0)
    weight_tile_bytes: int = 0
    in_nt_step: int = 0
    out_mt_step: int = 0
    rfft_mult: tuple[int, ...] = (0,) * 16
    rfft_shift: int = 0
    in_pages: int = 0
    out_pages: int = 0
    res_pages: int = 0
    weight_pages: int = 0
    post_pages: int = 0

    def __post_init__(self) -> None:
        for name, code, count in _FIELDS:
            if count == 0:
                continue
            limit = (1 << _BITS[code]) - 1
            value = getattr(self, name)
            values = value if count > 1 else (value,)
            if count > 1:
                if not isinstance(value, (tuple, list)) or len(value) != count:
                    what = " (d, h, w)" if count == 3 else ""
                    raise ValueError(f"{name} must be {count} integers{what}, not {value!r}")
                object.__setattr__(self, name, tuple(value))
            for v in values:
                if not isinstance(v, int) or isinstance(v, bool):
                    raise ValueError(f"{name} must be an integer, not {v!r}")
                if not 0 <= v <= limit:
                    raise ValueError(f"{name} = {v} does not fit its {_BITS[code]}-bit field "
                                     f"(0..{limit})")
        for name in ("in_slots", "out_slots", "in_shape", "conv_shape", "out_shape", "kernel",
                     "stride", "pool_window", "pool_stride", "m_tiles", "n_tiles"):
            value = getattr(self, name)
            if min(value if isinstance(value, tuple) else (value,)) < 1:
                raise ValueError(f"{name} must be >= 1, not {value!r}")
        for name in ADDRESS_FIELDS:
            if getattr(self, name) % 16:
                raise ValueError(f"{name} = {getattr(self, name):#x} must be 16-byte aligned")
        if self.op not in (OP_CONV, OP_GAP, OP_POOL):
            raise ValueError(f"op must be {OP_CONV} (conv), {OP_GAP} (gap) or {OP_POOL} "
                             f"(pool pass), not {self.op}")
        if self.flags & ~_FLAGS_MASK:
            raise ValueError(f"flags = {self.flags:#x} has bits outside {_FLAGS_MASK:#x}")
        for flag, needed in NEEDED_FLAGS.items():
            if self.flags & flag and not self.flags & needed:
                raise ValueError(f"{_FLAG_NAMES[flag]} needs {_FLAG_NAMES[needed]}")
        if self.flags & FLAG_MINNER and not reuses_inputs(self.op, self.m_tiles, self.n_tiles,
                                                          self.flags, self.pool_window):
            carried = any(carried_axes(self.op, self.flags, self.pool_window))
            raise ValueError(f"FLAG_MINNER needs a conv descriptor of one n-tile and "
                             f"{MINNER_M_TILES} m-tiles without a carried pool, not op "
                             f"{self.op} with {self.n_tiles} n-tiles and {self.m_tiles} "
                             f"m-tiles" + (" and a carried pool" if carried else ""))
        if transform_fault(self.flags, self.op):
            raise ValueError(f"FLAG_RFFT is not allowed on a pool pass, FLAG_LANE0 only on a "
                             f"conv descriptor without FLAG_POOL; not op {self.op} with flags "
                             f"{self.flags:#x}")
        if self.rfft_shift > 47:
            raise ValueError(f"rfft_shift must be in 0..47, not {self.rfft_shift}")
        if not self.flags & FLAG_RFFT and (self.rfft_shift or any(self.rfft_mult)):
            raise ValueError("rfft_mult and rfft_shift must be 0 without FLAG_RFFT")
        if row_lanes_fault(self.flags, self.op, self.tile[0], self.tiles[0]):
            raise ValueError(f"FLAG_ROWLANES needs a conv descriptor without FLAG_POOL or "
                             f"FLAG_DFOLD, of one depth tile of a power-of-two depth, not op "
                             f"{self.op}, flags {self.flags:#x}, tile depth {self.tile[0]} "
                             f"and {self.tiles[0]} depth tiles")
        if spread_fault(self.flags, self.op):
            raise ValueError(f"FLAG_SPREAD needs a conv descriptor without FLAG_ISPLIT, not op "
                             f"{self.op} with flags {self.flags:#x}")

    def check_address_width(self, address_width: int) -> None:
        """Raise ``ValueError`` naming the field if an address is not below
        ``2**address_width`` (the accelerator's AXI address width, 32..64)."""
        if not 1 <= address_width <= 64:
            raise ValueError(f"address_width must be in 1..64, not {address_width}")
        for name in ADDRESS_FIELDS:
            value = getattr(self, name)
            if value >> address_width:
                raise ValueError(f"{name} = {value:#x} does not fit the {address_width}-bit "
                                 f"address space (< 2**{address_width})")

    @property
    def stored_output(self) -> tuple[int, Vec3]:
        """Slots and ``D, H, W`` of the map the descriptor writes at ``out_base``
        (:func:`stored_map`)."""
        return stored_map(self.flags, self.out_slots, self.out_shape, self.op)

    @property
    def last(self) -> bool:
        """Whether this is the last descriptor of the list."""
        return bool(self.flags & FLAG_LAST)

    def pack(self) -> bytes:
        """The 128 descriptor bytes (little-endian, layout of the module docstring)."""
        values: list[int] = []
        for name, _, count in _FIELDS:
            if count == 1:
                values.append(getattr(self, name))
            elif count > 1:
                values.extend(getattr(self, name))
        return _STRUCT.pack(*values)

    @classmethod
    def unpack(cls, raw: bytes) -> LayerDescriptor:
        """Inverse of :meth:`pack`.

        Raises
        ------
        ValueError
            If ``raw`` is not 128 bytes, a reserved byte is not 0, or a field is invalid.
        """
        raw = bytes(raw)
        if len(raw) != DESCRIPTOR_BYTES:
            raise ValueError(f"a descriptor is {DESCRIPTOR_BYTES} bytes, not {len(raw)}")
        if any(any(raw[a:b]) for a, b in _RESERVED):
            spans = ", ".join(f"{a:#04X}" if b == a + 1 else f"{a:#04X}..{b - 1:#04X}"
                              for a, b in _RESERVED).replace("0X", "0x")
            raise ValueError(f"reserved descriptor bytes ({spans}) must be 0")
        flat = iter(_STRUCT.unpack(raw))
        kwargs = {}
        for name, _, count in _FIELDS:
            if count == 1:
                kwargs[name] = next(flat)
            elif count > 1:
                kwargs[name] = tuple(next(flat) for _ in range(count))
        return cls(**kwargs)

    def as_dict(self) -> dict[str, int | list[int]]:
        """Field values by name (JSON-ready: vectors as lists)."""
        return {f.name: list(v) if isinstance(v, tuple) else v
                for f, v in zip(fields(self), astuple(self), strict=True)}


def descriptor_layout() -> data.StructLayout:
    """The descriptor as an Amaranth ``StructLayout`` of 2048 bits.

    Same bit positions as :meth:`LayerDescriptor.pack` read as a little-endian integer;
    vectors are ``ArrayLayout(unsigned(w), 3)`` indexed ``d, h, w``; the reserved bytes are
    fields ``_reserved0`` .. ``_reserved4``. (Amaranth is imported here, not with the module:
    the host side reads descriptors without it.)
    """
    from amaranth.lib import data

    members: dict[str, object] = {}
    for name, code, count in _FIELDS:
        if count == 0:
            members[name] = 8 * int(code[:-1])
        elif count == 1:
            members[name] = _BITS[code]
        else:
            members[name] = data.ArrayLayout(_BITS[code], count)
    layout = data.StructLayout(members)
    assert layout.size == 8 * DESCRIPTOR_BYTES
    return layout
