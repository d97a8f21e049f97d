"""The layer engine's walk of one layer descriptor, in Python: every DMA box the engine issues
and every pass it computes, in order.

The RTL walks the same nest (:class:`fcircnn.hw.engine_walk.TileWalk` in each walker); the
engine's component tests hold each walker's output equal to this. The performance model
(:mod:`fcircnn.gen.perf_model`) times the same tiles: it run-length encodes
:func:`axis_tiles` and :func:`m_tile_slots`. A conv layer (``op`` conv or
gap) runs the tile loop nest ``mt`` (output-channel tiles) > ``(td, th, tw)`` (output tiles of
the descriptor's ``tile``, ``w`` fastest, clipped at the map's edge) > ``nt`` (input-channel
tiles), with ``FLAG_MINNER`` ``(td, th, tw) > mt > nt``:

* reads (:func:`conv_reads`): per m-tile its post records (before its first tile), per tile the
  residual box (``FLAG_RESIDUAL``, before its first ``nt``), per ``(tile, nt)`` the input box
  (conv padding as the DMA's zero padding; with ``FLAG_ISPLIT`` its two halves of slot groups,
  :func:`~fcircnn.arch.ports.input_halves`, with ``FLAG_IQUARTER`` too its four quarters,
  :func:`~fcircnn.arch.ports.input_quarters`; with ``FLAG_MINNER`` for the first m-tile of
  each tile only) then the ``(mt, nt)`` weight tile (with
  ``FLAG_WSPLIT`` its two halves, :func:`~fcircnn.arch.ports.weight_halves`, with
  ``FLAG_WQUARTER`` too its four quarters, :func:`~fcircnn.arch.ports.weight_quarters`);
* compute passes (:func:`conv_passes`): one per ``(tile, nt)``;
* writes (:func:`conv_writes`): one box per tile (the pooled tile with a fused pool); with
  ``FLAG_DFOLD`` two, one per half of the tile's slot groups (each half one depth of a pair).

A pool pass (:func:`pool_boxes`) reads and writes one slot group's whole map at a time.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from .descriptor import (
    DFOLD_DEPTHS,
    FLAG_DFOLD,
    FLAG_IQUARTER,
    FLAG_ISPLIT,
    FLAG_MINNER,
    FLAG_POOL,
    FLAG_RESIDUAL,
    FLAG_SPREAD,
    OP_POOL,
    LayerDescriptor,
    weight_parts,
)
from .geometry import BEAT_BYTES, SLOT_GROUP_CHANNELS, SLOTS_PER_BEAT, CoreGeometry, box_span
from .ports import WEIGHT_PART_KINDS, input_halves, input_quarters

__all__ = [
    "READ_KIND_STREAMS",
    "AxisTile",
    "Box",
    "Tile",
    "axis_tiles",
    "conv_passes",
    "conv_reads",
    "conv_tiles",
    "conv_writes",
    "halved_axes",
    "input_groups",
    "m_tile_slots",
    "pool_boxes",
    "quarters_inputs",
    "splits_input_slots",
    "splits_inputs",
    "stream_boxes",
]


class Box(NamedTuple):
    """One DMA box, field for field the hardware's ``box_layout``
    (:mod:`fcircnn.hw.axi_dma_box`): the address of its first in-map voxel, the byte strides of
    a slot group, a plane and a row, the slot groups, per axis (``d``, ``h``, ``w``) the
    padding voxels before, the voxels inside the map and the padding after, and the slots of
    the last group's beats the write keeps."""

    addr: int
    stride_g: int
    stride_d: int
    stride_h: int
    groups: int
    pre: tuple[int, int, int]
    len: tuple[int, int, int]
    post: tuple[int, int, int]
    last_lanes: int = SLOTS_PER_BEAT

    def byte_range(self) -> tuple[int, int] | None:
        """``[first, end)`` of the bytes the box moves (its in-map voxels; padding moves
        none), or ``None`` if it moves none. The walker's addresses only grow from ``addr``,
        so this is every burst's."""
        if min(self.len) == 0:
            return None
        last = ((self.groups - 1) * self.stride_g + (self.len[0] - 1) * self.stride_d
                + (self.len[1] - 1) * self.stride_h + self.len[2] * BEAT_BYTES)
        return self.addr, self.addr + last

    @classmethod
    def block(cls, addr: int, nbytes: int) -> Box:
        """A contiguous block of ``nbytes`` (a multiple of 16) as one row of beats."""
        return cls(addr, BEAT_BYTES, BEAT_BYTES, BEAT_BYTES, 1, (0, 0, 0),
                   (1, 1, nbytes // BEAT_BYTES), (0, 0, 0))


class Tile(NamedTuple):
    """One iteration ``(mt, t)`` of the nest (without ``nt``): the m-tile, the tile index per
    axis, its first conv voxel and extent per axis, its output slot groups and the slots of
    the last one."""

    mt: int
    t: tuple[int, int, int]
    lo: tuple[int, int, int]
    ext: tuple[int, int, int]
    groups: int
    last_lanes: int


class AxisTile(NamedTuple):
    """One tile position along an axis: its first conv voxel and extent, and its input
    box's padding before, voxels inside the map and padding after (the conv's input range,
    ``box_span(ext, stride, kernel)`` voxels from ``lo * stride - padding``)."""

    lo: int
    ext: int
    pre: int
    len: int
    post: int


def axis_tiles(desc: LayerDescriptor, a: int) -> tuple[AxisTile, ...]:
    """The tiles of a conv descriptor along axis ``a`` (0 = d, 1 = h, 2 = w), in order."""
    tile, conv, s, pad, k, size = (desc.tile[a], desc.conv_shape[a], desc.stride[a],
                                   desc.padding[a], desc.kernel[a], desc.in_shape[a])
    out = []
    for i in range(desc.tiles[a]):
        lo = i * tile
        ext = min(tile, conv - lo)
        start = lo * s - pad
        end = start + box_span(ext, s, k)
        out.append(AxisTile(lo, ext, max(0, -start), min(end, size) - max(start, 0),
                            max(0, end - size)))
    return tuple(out)


def m_tile_slots(desc: LayerDescriptor, tm: int) -> tuple[int, ...]:
    """Output slots of each m-tile of a conv descriptor on a core with ``Tm = tm``."""
    half = tm // 2
    return tuple(min(half, desc.out_slots - mt * half) for mt in range(desc.m_tiles))


def _check(desc: LayerDescriptor, core: CoreGeometry) -> None:
    if not isinstance(desc, LayerDescriptor) or not isinstance(core, CoreGeometry):
        raise TypeError("the walk needs a LayerDescriptor and a CoreGeometry")
    if desc.op == OP_POOL:
        raise ValueError("a pool descriptor has no tile walk: see pool_boxes")


def conv_tiles(desc: LayerDescriptor, core: CoreGeometry) -> Iterator[Tile]:
    """The tiles of a conv descriptor in the walk's order: ``mt``, then ``td``, ``th``,
    ``tw`` (fastest); with :data:`~fcircnn.arch.descriptor.FLAG_MINNER` ``td``, ``th``,
    ``tw``, then ``mt`` (fastest)."""
    _check(desc, core)
    axes = [axis_tiles(desc, a) for a in range(3)]
    m_tiles = [(mt, -(-slots // SLOTS_PER_BEAT), (slots - 1) % SLOTS_PER_BEAT + 1)
               for mt, slots in enumerate(m_tile_slots(desc, core.tm))]
    spatial = [((td, th, tw), (d.lo, h.lo, w.lo), (d.ext, h.ext, w.ext))
               for td, d in enumerate(axes[0]) for th, h in enumerate(axes[1])
               for tw, w in enumerate(axes[2])]
    if desc.flags & FLAG_MINNER:
        order = ((m, s) for s in spatial for m in m_tiles)
    else:
        order = ((m, s) for m in m_tiles for s in spatial)
    for (mt, groups, last_lanes), (t, lo, ext) in order:
        yield Tile(mt, t, lo, ext, groups, last_lanes)


def _out_addr(desc: LayerDescriptor, tile: Tile, base: int) -> int:
    return base + tile.mt * desc.out_mt_step + sum(
        i * s for i, s in zip(tile.t, desc.out_step, strict=True))


def input_groups(desc: LayerDescriptor, core: CoreGeometry) -> tuple[int, ...]:
    """The input slot groups each n-tile's input box loads: the core's ``Tn/16``, fewer in a
    last n-tile the layer does not fill; one when ``Tn < 16`` (a group holds several
    n-tiles) or with ``FLAG_SPREAD`` (the n-tile's compact group)."""
    if desc.flags & FLAG_SPREAD:
        return (1,) * desc.n_tiles
    return _input_groups(desc.in_slots, desc.n_tiles, core)


def _input_groups(in_slots: int, n_tiles: int, core: CoreGeometry) -> tuple[int, ...]:
    total = -(-in_slots // SLOTS_PER_BEAT)
    if core.tn <= SLOT_GROUP_CHANNELS:
        return (1,) * n_tiles
    return tuple(min(core.in_groups, total - nt * core.in_groups) for nt in range(n_tiles))


def splits_inputs(desc: LayerDescriptor, core: CoreGeometry) -> bool:
    """Whether the input boxes of conv descriptor ``desc`` can be read in two halves of slot
    groups (``FLAG_ISPLIT``) on ``core``: :func:`splits_input_slots` of its input. The port
    side of the rule is :meth:`~fcircnn.arch.ports.PortMap.splits_inputs`."""
    return (desc.op != OP_POOL and not desc.flags & FLAG_SPREAD
            and splits_input_slots(desc.in_slots, desc.n_tiles, core))


def quarters_inputs(desc: LayerDescriptor, core: CoreGeometry) -> bool:
    """Whether the input boxes of conv descriptor ``desc`` can be read in four quarters of slot
    groups (``FLAG_IQUARTER``) on ``core``: :func:`splits_input_slots` of its input in four
    parts. The port side of the rule is :meth:`~fcircnn.arch.ports.PortMap.quarters_inputs`."""
    return (desc.op != OP_POOL and not desc.flags & FLAG_SPREAD
            and splits_input_slots(desc.in_slots, desc.n_tiles, core, parts=4))


def splits_input_slots(in_slots: int, n_tiles: int, core: CoreGeometry, *,
                       parts: int = 2) -> bool:
    """Whether input boxes of ``in_slots`` slots in ``n_tiles`` n-tiles can be read in
    ``parts`` (2 or 4) equal parts of slot groups on ``core``: ``Tn/16`` is a multiple of
    ``parts`` and every n-tile loads all of its groups (the parts are the input buffer's fixed
    sets of banks)."""
    if parts not in (2, 4):
        raise ValueError(f"parts must be 2 or 4, not {parts!r}")
    G = core.in_groups
    return (core.tn > SLOT_GROUP_CHANNELS and G % parts == 0
            and all(g == G for g in _input_groups(in_slots, n_tiles, core)))


def _input_box(desc: LayerDescriptor, core: CoreGeometry, tile: Tile, nt: int,
               axes: list[tuple[AxisTile, ...]]) -> Box:
    pre, length, post, addr = [], [], [], desc.in_base
    addr += (nt // core.subs) * desc.in_nt_step
    for a in range(3):
        at = axes[a][tile.t[a]]
        pre.append(at.pre)
        length.append(at.len)
        post.append(at.post)
        if tile.lo[a] * desc.stride[a] > desc.padding[a]:
            addr += tile.t[a] * desc.in_step[a] - desc.in_pad_bytes[a]
    groups = input_groups(desc, core)[nt]
    return Box(addr, *desc.in_stride, groups, tuple(pre), tuple(length), tuple(post))


def conv_reads(desc: LayerDescriptor, core: CoreGeometry) -> Iterator[tuple[str, Box]]:
    """The reads of a conv descriptor in the loader's order, each ``(kind, box)`` with kind
    ``"params"``, ``"residual"``, ``"input"``, ``"weights"``, with ``FLAG_ISPLIT``
    ``"input_half"`` (``"input"`` is then the lower half of the box's slot groups,
    ``"input_half"`` the upper) and with ``FLAG_WSPLIT`` ``"weight_half"`` (``"weights"`` is
    then the first half of the tile, ``"weight_half"`` the second, each half the tile's
    bytes); with ``FLAG_WQUARTER`` too the four quarters in image order ``"weights"``,
    ``"weight_quarter1"``, ``"weight_half"``, ``"weight_quarter3"``
    (:func:`~fcircnn.arch.ports.weight_quarters`); with ``FLAG_IQUARTER`` the input box's four
    quarters of slot groups in the order ``"input"``, ``"input_quarter1"``, ``"input_half"``,
    ``"input_quarter3"`` (:func:`~fcircnn.arch.ports.input_quarters`)."""
    weight_tile = desc.weight_tile_bytes
    kinds = WEIGHT_PART_KINDS[weight_parts(desc.flags)]
    part = weight_tile // len(kinds)
    i_split = bool(desc.flags & FLAG_ISPLIT)
    if i_split and not splits_inputs(desc, core):
        raise ValueError("FLAG_ISPLIT on a descriptor whose input boxes cannot split")
    i_quarter = bool(desc.flags & FLAG_IQUARTER)
    if i_quarter and not quarters_inputs(desc, core):
        raise ValueError("FLAG_IQUARTER on a descriptor whose input boxes cannot be quartered")
    axes = [axis_tiles(desc, a) for a in range(3)]
    for tile in conv_tiles(desc, core):
        for nt in range(desc.n_tiles):
            if tile.t == (0, 0, 0) and nt == 0:
                yield "params", Box.block(desc.post_base + tile.mt * core.tm * 16,
                                          core.tm * BEAT_BYTES)
            if desc.flags & FLAG_RESIDUAL and nt == 0:
                yield "residual", Box(_out_addr(desc, tile, desc.res_base), *desc.out_stride,
                                      tile.groups, (0, 0, 0), tile.ext, (0, 0, 0))
            if not (tile.mt and desc.flags & FLAG_MINNER):  # else the first m-tile's box
                yield from _input_parts(_input_box(desc, core, tile, nt, axes), i_split,
                                        i_quarter)
            w_addr = desc.weight_base + (tile.mt * desc.n_tiles + nt) * weight_tile
            for k, kind in enumerate(kinds):
                yield kind, Box.block(w_addr + k * part, part)


def _input_parts(box: Box, i_split: bool, i_quarter: bool) -> Iterator[tuple[str, Box]]:
    """The reads of one input box: whole, in two halves or in four quarters of slot groups."""
    if i_quarter:
        for kind, groups in zip(_INPUT_PART_KINDS, input_quarters(box.groups), strict=True):
            yield kind, box._replace(addr=box.addr + groups.start * box.stride_g,
                                     groups=len(groups))
    elif i_split:
        lower, upper = input_halves(box.groups)
        yield "input", box._replace(groups=len(lower))
        yield "input_half", box._replace(addr=box.addr + upper.start * box.stride_g,
                                         groups=len(upper))
    else:
        yield "input", box


#: The read kinds of an input box's quarters (``FLAG_IQUARTER``), in slot-group order.
_INPUT_PART_KINDS = ("input", "input_quarter1", "input_half", "input_quarter3")


def conv_passes(desc: LayerDescriptor, core: CoreGeometry) -> Iterator[tuple[Tile, int]]:
    """The compute passes of a conv descriptor in order: ``(tile, nt)``."""
    for tile in conv_tiles(desc, core):
        for nt in range(desc.n_tiles):
            yield tile, nt


def halved_axes(desc: LayerDescriptor, fused_pool: bool) -> tuple[bool, bool, bool]:
    """Per axis, whether a pool fused into the drain halves the tile (``FLAG_POOL`` on a conv
    descriptor of a core built with a fused pool, stride 2: a window of 2, or a carried window
    of 3)."""
    fused = fused_pool and desc.op != OP_POOL and bool(desc.flags & FLAG_POOL)
    return tuple(fused and s == 2 for s in desc.pool_stride)


def conv_writes(desc: LayerDescriptor, core: CoreGeometry, *, fused_pool: bool = False
                ) -> Iterator[Box]:
    """The write boxes of a conv descriptor in order, one per tile, with
    :data:`~fcircnn.arch.descriptor.FLAG_DFOLD` one per half of its slot groups (the lower
    half first, the upper ``out_stride[1] / 2`` bytes, one stored plane, further on);
    ``fused_pool``: the core is built with a pool fused into its drain
    (:attr:`~fcircnn.arch.geometry.EngineGeometry.fused_pool`)."""
    halved = halved_axes(desc, fused_pool)
    folds = DFOLD_DEPTHS if desc.flags & FLAG_DFOLD else 1
    plane = desc.out_stride[1] // DFOLD_DEPTHS
    for tile in conv_tiles(desc, core):
        ext = tuple(e >> 1 if h else e for e, h in zip(tile.ext, halved, strict=True))
        addr = _out_addr(desc, tile, desc.out_base)
        for j in range(folds):
            yield Box(addr + j * plane, *desc.out_stride, tile.groups // folds, (0, 0, 0), ext,
                      (0, 0, 0), tile.last_lanes if j == folds - 1 else SLOTS_PER_BEAT)


def pool_boxes(desc: LayerDescriptor) -> Iterator[tuple[Box, Box]]:
    """The ``(read, write)`` boxes of a pool descriptor, one pair per input slot group."""
    if not isinstance(desc, LayerDescriptor) or desc.op != OP_POOL:
        raise ValueError("pool_boxes needs a pool descriptor")
    groups = -(-desc.in_slots // SLOTS_PER_BEAT)
    for g in range(groups):
        last = desc.out_slots - g * SLOTS_PER_BEAT if g == groups - 1 else SLOTS_PER_BEAT
        yield (Box(desc.in_base + g * desc.in_stride[0], *desc.in_stride, 1, (0, 0, 0),
                   desc.in_shape, (0, 0, 0)),
               Box(desc.out_base + g * desc.out_stride[0], *desc.out_stride, 1, (0, 0, 0),
                   desc.out_shape, (0, 0, 0), last))


#: The stream (:data:`~fcircnn.arch.descriptor.STREAM_REGIONS`) of each read kind of
#: :func:`conv_reads`.
READ_KIND_STREAMS = {"params": "post", "residual": "res", "input": "in", "input_half": "in",
                     "input_quarter1": "in", "input_quarter3": "in", "weights": "weight",
                     "weight_half": "weight", "weight_quarter1": "weight",
                     "weight_quarter3": "weight"}


def stream_boxes(desc: LayerDescriptor, core: CoreGeometry, *, fused_pool: bool = False
                 ) -> Iterator[tuple[str, Box]]:
    """Every box descriptor ``desc`` moves, each with its stream: the reads of
    :func:`conv_reads` (:data:`READ_KIND_STREAMS`) then the writes of :func:`conv_writes`
    (``"out"``) of a conv or gap, the read (``"in"``) and write (``"out"``) boxes of a pool
    pass (:func:`pool_boxes`)."""
    if desc.op == OP_POOL:
        for read, write in pool_boxes(desc):
            yield "in", read
            yield "out", write
        return
    for kind, box in conv_reads(desc, core):
        yield READ_KIND_STREAMS[kind], box
    for box in conv_writes(desc, core, fused_pool=fused_pool):
        yield "out", box
