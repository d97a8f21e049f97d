"""Compiler-side DMA transfer descriptors: validation and burst planning.

The AXI DMA (:mod:`fcircnn.hw.axi_dma`) executes *box descriptors*
(:func:`fcircnn.hw.axi_dma_box.box_layout`). A box is a range of slot groups (8 slots, one
128-bit beat per voxel) times ``d x h x w`` voxel ranges of an NC/8DHW8 map (docs/contract.md
section 8). Along each spatial axis the box is described by three counts, ``pre`` (voxels before
the map: convolution padding, delivered as zero beats without a bus read), ``length`` (voxels
inside the map) and ``post`` (padding after the map). The hardware walks the box group-major,
then ``d``, ``h``, ``w`` (the order of :func:`fcircnn.models.layout.pack_ncdhw8`), so the beats a
read delivers are exactly ``pack_ncdhw8`` of the zero-padded map cut to the box.

This module turns map coordinates into descriptors (:func:`plan_read_box`,
:func:`plan_write_box`, :func:`plan_block`), rejects every request the hardware cannot serve with
a ``ValueError`` naming the field and the limit, and models the hardware exactly:
:meth:`BoxDescriptor.segments` is the sequence of zero runs and AXI bursts the DMA issues (INCR,
at most 256 beats, never crossing a 4 KB boundary).

Row merging: when a box covers whole rows of the map (``w`` range = the full width), consecutive
rows are contiguous in DDR and the planner folds the ``h`` axis (and then ``d``) into ``w``, so
bursts run up to 256 beats instead of one row.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field

from fcircnn.arch.geometry import (
    BEAT_BYTES,
    MAX_ADDRESS_WIDTH,
    MIN_ADDRESS_WIDTH,
    PAGE_BYTES,
    SLOTS_PER_BEAT,
)

__all__ = [
    "MAX_BURST_BEATS",
    "PAGE_BYTES",
    "BoxDescriptor",
    "DmaLimits",
    "FeatureMap",
    "Segment",
    "Span",
    "conv_input_range",
    "plan_block",
    "plan_read_box",
    "plan_write_box",
    "split_bursts",
]

#: Longest AXI4 INCR burst.
MAX_BURST_BEATS = 256


@dataclass(frozen=True)
class DmaLimits:
    """What the DMA hardware can express.

    Attributes
    ----------
    address_width : int
        AXI address width in bits, 32..64 (the accelerator's ``address_width``; default 40).
    count_width : int
        Width of every count field of a descriptor (groups, pre/length/post per axis),
        1..32; counts must be ``< 2**count_width``.
    """

    address_width: int = 40
    count_width: int = 16

    def __post_init__(self):
        for name, lo, hi in (("address_width", MIN_ADDRESS_WIDTH, MAX_ADDRESS_WIDTH),
                             ("count_width", 1, 32)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise TypeError(f"{name} must be an integer, not {value!r}")
            if not lo <= value <= hi:
                raise ValueError(f"{name} must be in {lo}..{hi}, not {value}")

    @classmethod
    def from_config(cls, accelerator, count_width: int = 16) -> DmaLimits:
        """Limits of the DMA of an :class:`~fcircnn.models.config.AcceleratorConfig`."""
        return cls(address_width=accelerator.address_width, count_width=count_width)

    @property
    def max_count(self) -> int:
        """Largest count a descriptor field holds."""
        return (1 << self.count_width) - 1

    @property
    def address_limit(self) -> int:
        """First byte address the bus cannot reach (``2**address_width``)."""
        return 1 << self.address_width


@dataclass(frozen=True)
class FeatureMap:
    """An NC/8DHW8 map in DDR: byte address ``base``, ``slots`` slots and ``shape = (D, H, W)``."""

    base: int
    slots: int
    shape: tuple[int, int, int]

    def __post_init__(self):
        if not isinstance(self.base, int) or self.base < 0:
            raise ValueError(f"base must be a non-negative integer, not {self.base!r}")
        if self.base % BEAT_BYTES:
            raise ValueError(f"base must be aligned to {BEAT_BYTES} bytes, not {self.base:#x}")
        if not isinstance(self.slots, int) or self.slots < 1:
            raise ValueError(f"slots must be a positive integer, not {self.slots!r}")
        if len(self.shape) != 3 or any(not isinstance(v, int) or v < 1 for v in self.shape):
            raise ValueError(f"shape must be three positive integers (D, H, W), not {self.shape}")
        object.__setattr__(self, "shape", tuple(self.shape))

    @property
    def groups(self) -> int:
        """Slot groups (beats per voxel)."""
        return -(-self.slots // SLOTS_PER_BEAT)

    @property
    def size(self) -> int:
        """Bytes of the map."""
        return self.groups * math.prod(self.shape) * BEAT_BYTES

    @property
    def strides(self) -> tuple[int, int, int]:
        """Byte strides ``(group, d, h)``; ``w`` is one beat."""
        D, H, W = self.shape
        return (D * H * W * BEAT_BYTES, H * W * BEAT_BYTES, W * BEAT_BYTES)


@dataclass(frozen=True)
class Span:
    """One axis of a box: ``pre`` padding voxels, ``length`` voxels in the map, ``post``."""

    pre: int
    length: int
    post: int

    @property
    def total(self) -> int:
        """``pre + length + post``."""
        return self.pre + self.length + self.post

    def padded(self, i: int) -> bool:
        """Whether index ``i`` of the box (``0 <= i < total``) is padding."""
        return not self.pre <= i < self.pre + self.length


@dataclass(frozen=True)
class Segment:
    """What the DMA does for one step: ``beats`` zero beats (``addr`` None) or one burst."""

    addr: int | None
    beats: int
    last_group: bool

    @property
    def is_burst(self) -> bool:
        return self.addr is not None


@dataclass(frozen=True)
class BoxDescriptor:
    """A validated transfer descriptor (the hardware's ``box_layout`` payload).

    Attributes
    ----------
    addr : int
        Byte address of the first voxel of the box that lies inside the map.
    stride_g, stride_d, stride_h : int
        Byte distance between slot groups, depth planes and rows of the map.
    groups : int
        Slot groups in the box.
    d, h, w : Span
    last_lanes : int
        Slots (lanes, 1..8) written in the box's last slot group; writes only (``WSTRB``).
    extent : (groups, d, h, w)
        The box's logical size (padding included), unchanged by row merging: what the tile
        buffer that receives or sends the beats is configured with.
    """

    addr: int
    stride_g: int
    stride_d: int
    stride_h: int
    groups: int
    d: Span
    h: Span
    w: Span
    last_lanes: int = SLOTS_PER_BEAT
    limits: DmaLimits = field(default_factory=DmaLimits, compare=False, repr=False)
    extent: tuple[int, int, int, int] | None = field(default=None, compare=False)

    def __post_init__(self):
        if self.extent is None:
            object.__setattr__(self, "extent",
                               (self.groups, self.d.total, self.h.total, self.w.total))

    def fields(self) -> dict:
        """Payload of :func:`fcircnn.hw.axi_dma_box.box_layout` (for ``runner.pack``), in
        region 0 (the memory window alone)."""
        out = {
            "region": 0,
            "addr": self.addr,
            "stride_g": self.stride_g,
            "stride_d": self.stride_d,
            "stride_h": self.stride_h,
            "groups": self.groups,
            "last_lanes": self.last_lanes,
        }
        for axis in "dhw":
            span = getattr(self, axis)
            out[f"{axis}_pre"], out[f"{axis}_len"], out[f"{axis}_post"] = (
                span.pre, span.length, span.post)
        return out

    @property
    def beats(self) -> int:
        """Beats delivered (read) or consumed (write), padding included."""
        return self.groups * self.d.total * self.h.total * self.w.total

    @property
    def bus_beats(self) -> int:
        """Beats that cross the bus."""
        return self.groups * self.d.length * self.h.length * self.w.length

    def segments(self) -> Iterator[Segment]:
        """The hardware's sequence of zero runs and bursts, in order.

        A row (fixed group, ``d``, ``h``) that is padding in ``d`` or ``h`` (or has no voxel in
        the map) is one zero run of ``w.total`` beats; any other row is ``w.pre`` zeros (if any),
        the ``w.length`` voxels as bursts (:func:`split_bursts`), ``w.post`` zeros (if any).
        """
        for g in range(self.groups):
            last_group = g == self.groups - 1
            for d in range(self.d.total):
                for h in range(self.h.total):
                    if self.d.padded(d) or self.h.padded(h) or self.w.length == 0:
                        yield Segment(None, self.w.total, last_group)
                        continue
                    row = (self.addr + g * self.stride_g + (d - self.d.pre) * self.stride_d
                           + (h - self.h.pre) * self.stride_h)
                    if self.w.pre:
                        yield Segment(None, self.w.pre, last_group)
                    for addr, beats in split_bursts(row, self.w.length):
                        yield Segment(addr, beats, last_group)
                    if self.w.post:
                        yield Segment(None, self.w.post, last_group)

    def bursts(self) -> list[tuple[int, int]]:
        """``(address, beats)`` of every AXI burst, in issue order."""
        return [(s.addr, s.beats) for s in self.segments() if s.is_burst]

    def strobes(self) -> list[int]:
        """``WSTRB`` of every written beat, in order (writes)."""
        full = (1 << BEAT_BYTES) - 1
        part = (1 << (2 * self.last_lanes)) - 1
        return [part if s.last_group else full
                for s in self.segments() if s.is_burst for _ in range(s.beats)]


def split_bursts(addr: int, beats: int) -> list[tuple[int, int]]:
    """Split a contiguous run of ``beats`` beats at ``addr`` into legal INCR bursts.

    Each burst has at most :data:`MAX_BURST_BEATS` beats and ends at or before the next
    :data:`PAGE_BYTES` boundary (the hardware's rule: ``min(remaining, 256 - addr[4:12])``).
    """
    out = []
    while beats > 0:
        room = (PAGE_BYTES - addr % PAGE_BYTES) // BEAT_BYTES
        n = min(beats, room, MAX_BURST_BEATS)
        out.append((addr, n))
        addr += n * BEAT_BYTES
        beats -= n
    return out


def conv_input_range(out_start: int, out_count: int, kernel: int, stride: int,
                     padding: int) -> tuple[int, int]:
    """Input ``(start, count)`` along one axis that ``out_count`` outputs from ``out_start`` read.

    ``start`` may be negative (padding before the map); ``start + count`` may exceed the map.
    """
    if out_count < 1:
        raise ValueError(f"out_count must be >= 1, not {out_count}")
    return out_start * stride - padding, (out_count - 1) * stride + kernel


def _check_count(name: str, value: int, limits: DmaLimits, minimum: int = 0) -> None:
    if not minimum <= value <= limits.max_count:
        raise ValueError(
            f"{name} must be in {minimum}..{limits.max_count} "
            f"(count_width {limits.count_width}), not {value}")


def _range(name: str, value) -> tuple[int, int]:
    try:
        start, count = value
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a (start, count) pair, not {value!r}") from None
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (start, count)):
        raise TypeError(f"{name} must be a pair of integers, not {value!r}")
    if count < 1:
        raise ValueError(f"{name} count must be >= 1 (an empty box is not a transfer), "
                         f"not {count}")
    return start, count


def _span(name: str, start: int, count: int, size: int, limits: DmaLimits,
          padding: bool) -> Span:
    lo, hi = max(start, 0), min(start + count, size)
    length = max(hi - lo, 0)
    pre = min(max(-start, 0), count)
    post = count - pre - length
    if not padding and (pre or post):
        raise ValueError(f"{name} range [{start}, {start + count}) leaves the map "
                         f"(0..{size}); a write box must lie inside the map")
    for part, value in (("pre", pre), ("len", length), ("post", post)):
        _check_count(f"{name}_{part}", value, limits)
    return Span(pre, length, post)


def _merge_rows(desc: BoxDescriptor, W: int, H: int, D: int) -> BoxDescriptor:
    """Fold ``h`` (then ``d``) into ``w`` when the box covers whole rows (planes)."""
    limits = desc.limits
    d, h, w = desc.d, desc.h, desc.w
    stride_h, stride_d = desc.stride_h, desc.stride_d
    if w.pre == w.post == 0 and w.length == W and stride_h == W * BEAT_BYTES:
        nw = Span(h.pre * W, h.length * W, h.post * W)
        if max(nw.pre, nw.length, nw.post) <= limits.max_count:
            w, h = nw, Span(0, 1, 0)
            rows = H
            if (w.pre == w.post == 0 and w.length == rows * W
                    and stride_d == rows * W * BEAT_BYTES):
                nw = Span(d.pre * w.length, d.length * w.length, d.post * w.length)
                if max(nw.pre, nw.length, nw.post) <= limits.max_count:
                    w, d = nw, Span(0, 1, 0)
    if (w, h, d) == (desc.w, desc.h, desc.d):
        return desc
    return BoxDescriptor(desc.addr, desc.stride_g, stride_d, stride_h, desc.groups, d, h, w,
                         desc.last_lanes, limits, desc.extent)


def _plan_box(fmap: FeatureMap, groups, d, h, w, limits: DmaLimits, padding: bool,
              slots: int | None, merge: bool) -> BoxDescriptor:
    if not isinstance(fmap, FeatureMap):
        raise TypeError(f"fmap must be a FeatureMap, not {type(fmap).__name__}")
    if not isinstance(limits, DmaLimits):
        raise TypeError(f"limits must be a DmaLimits, not {type(limits).__name__}")
    g0, ng = _range("groups", groups)
    if g0 < 0 or g0 + ng > fmap.groups:
        raise ValueError(f"groups range [{g0}, {g0 + ng}) outside the map's "
                         f"{fmap.groups} slot groups")
    _check_count("groups", ng, limits, minimum=1)
    D, H, W = fmap.shape
    spans = [_span(axis, *_range(axis, r), size, limits, padding)
             for axis, r, size in (("d", d, D), ("h", h, H), ("w", w, W))]
    ds, hs, ws = spans
    sg, sd, sh = fmap.strides
    first = [max(_range(a, r)[0], 0) for a, r in (("d", d), ("h", h), ("w", w))]
    first = [min(f, n - 1) for f, n in zip(first, fmap.shape, strict=True)]
    addr = fmap.base + (((g0 * D + first[0]) * H + first[1]) * W + first[2]) * BEAT_BYTES
    # Every byte the box touches must be addressable.
    end = fmap.base + fmap.size
    if end > limits.address_limit:
        raise ValueError(f"address overflow: the map ends at {end:#x}, beyond the "
                         f"{limits.address_width}-bit address space ({limits.address_limit:#x})")
    for name, value in (("addr", addr), ("stride_g", sg), ("stride_d", sd), ("stride_h", sh)):
        if value >= limits.address_limit:
            raise ValueError(f"{name} {value:#x} does not fit address_width "
                             f"{limits.address_width}")
    last_lanes = SLOTS_PER_BEAT
    if slots is not None:
        if not isinstance(slots, int) or not (g0 + ng - 1) * SLOTS_PER_BEAT < slots \
                <= (g0 + ng) * SLOTS_PER_BEAT:
            raise ValueError(f"slots must end inside the box's last group "
                             f"({(g0 + ng - 1) * SLOTS_PER_BEAT + 1}.."
                             f"{(g0 + ng) * SLOTS_PER_BEAT}), not {slots!r}")
        last_lanes = slots - (g0 + ng - 1) * SLOTS_PER_BEAT
    desc = BoxDescriptor(addr, sg, sd, sh, ng, ds, hs, ws, last_lanes, limits)
    return _merge_rows(desc, W, H, D) if merge else desc


def plan_read_box(fmap: FeatureMap, groups: tuple[int, int], d: tuple[int, int],
                  h: tuple[int, int], w: tuple[int, int], *,
                  limits: DmaLimits | None = None, merge: bool = True) -> BoxDescriptor:
    """Descriptor reading a box of ``fmap`` with zero padding outside the map.

    Parameters
    ----------
    fmap : FeatureMap
    groups : (first, count)
        Slot groups (8 slots each) to read, inside the map.
    d, h, w : (start, count)
        Voxel ranges; ``start`` may be negative and ``start + count`` may pass the map's size:
        voxels outside the map read as zero (convolution padding) without a bus read.
    limits : DmaLimits, optional
    merge : bool
        Fold whole rows into longer bursts (see the module docstring).

    Raises
    ------
    ValueError
        Empty ranges, groups outside the map, counts beyond ``limits.count_width``, maps ending
        beyond ``limits.address_width``; the message names the field and the limit.
    """
    return _plan_box(fmap, groups, d, h, w, limits or DmaLimits(), True, None, merge)


def plan_write_box(fmap: FeatureMap, groups: tuple[int, int], d: tuple[int, int],
                   h: tuple[int, int], w: tuple[int, int], *, slots: int | None = None,
                   limits: DmaLimits | None = None, merge: bool = True) -> BoxDescriptor:
    """Descriptor writing a box of ``fmap`` (which must lie inside the map).

    ``slots``, if given, is the map's slot count when it ends inside the box's last group: only
    the lanes of slots ``< slots`` of that group are written (``WSTRB``), the padding slots of
    the DDR image stay untouched. Same ``ValueError`` cases as :func:`plan_read_box`, plus any
    range leaving the map.
    """
    return _plan_box(fmap, groups, d, h, w, limits or DmaLimits(), False, slots, merge)


def plan_block(addr: int, nbytes: int, *, limits: DmaLimits | None = None) -> list[BoxDescriptor]:
    """Descriptors reading ``nbytes`` contiguous bytes at ``addr`` (weights, parameters).

    ``addr`` and ``nbytes`` must be multiples of 16 and the block must end inside the address
    space. Blocks longer than one count field are split into rows (``h``) of ``2**(count_width
    - 1)`` beats plus a remainder descriptor.
    """
    limits = limits or DmaLimits()
    for name, value in (("addr", addr), ("nbytes", nbytes)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"{name} must be an integer, not {value!r}")
    if addr < 0 or addr % BEAT_BYTES:
        raise ValueError(f"addr must be a non-negative multiple of {BEAT_BYTES}, not {addr:#x}")
    if nbytes <= 0 or nbytes % BEAT_BYTES:
        raise ValueError(f"nbytes must be a positive multiple of {BEAT_BYTES}, not {nbytes}")
    if addr + nbytes > limits.address_limit:
        raise ValueError(f"address overflow: block [{addr:#x}, {addr + nbytes:#x}) passes the "
                         f"{limits.address_width}-bit address space")
    beats = nbytes // BEAT_BYTES
    row = 1 << (limits.count_width - 1)
    out = []
    rows, rest = divmod(beats, row)
    one = Span(0, 1, 0)
    while rows:
        n = min(rows, limits.max_count)
        out.append(BoxDescriptor(addr, 0, 0, row * BEAT_BYTES, 1, one, Span(0, n, 0),
                                 Span(0, row, 0), SLOTS_PER_BEAT, limits))
        addr += n * row * BEAT_BYTES
        rows -= n
    if rest:
        out.append(BoxDescriptor(addr, 0, 0, 0, 1, one, one, Span(0, rest, 0),
                                 SLOTS_PER_BEAT, limits))
    return out
