"""A compiled DDR image as the host sees it: bytes, descriptors, outputs and expected results.

:class:`CompiledImage` is what a driver (:mod:`fcircnn.runtime.driver`) needs to run a network
and check it: the image bytes and their base address, the ``DESC_PTR`` value, one typed record per
descriptor (:class:`DescriptorInfo`) and the golden int8 outputs of every layer. It is built
from an in-memory :class:`~fcircnn.gen.compiler.DdrImage`
(:meth:`CompiledImage.from_ddr_image`) or read back from the three files
:meth:`DdrImage.save <fcircnn.gen.compiler.DdrImage.save>` writes
(:meth:`CompiledImage.load`): ``image.bin``, ``memory_map.json`` and ``expected.npz``.

A layer owns one or more consecutive descriptors (for instance a convolution and then a pool
pass); its output is the ``out_base``/``out_slots``/``out_shape`` of the *last* descriptor
carrying its name, and its cycle count is the sum of the cycles entries of all of them.

Cycles entry
------------
For every descriptor the engine writes a 16-byte entry at ``cycles_addr`` (little-endian):

======  =====  ===================================================
offset  bytes  contents
======  =====  ===================================================
0x00    8      total cycles of the descriptor (uint64)
0x08    4      cycles with the PE array busy (uint32)
0x0C    4      cycles stalled on the DMA (uint32)
======  =====  ===================================================

The compiler leaves the entries zero, so a non-zero entry means "this descriptor finished".
"""

from __future__ import annotations

import dataclasses
import json
import os
import struct
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fcircnn.arch.descriptor import (
    DESCRIPTOR_BYTES,
    STREAM_REGIONS,
    LayerDescriptor,
    region_pages,
    stored_map,
    used_regions,
)
from fcircnn.arch.geometry import PAGE_BYTES
from fcircnn.models.layout import ncdhw8_size, unpack_ncdhw8

__all__ = [
    "CYCLES_ENTRY_BYTES",
    "CompiledImage",
    "CycleEntry",
    "DescriptorInfo",
    "ImageError",
    "LayerOutput",
    "RegionInfo",
]

#: Bytes of one cycles entry (one 128-bit beat).
CYCLES_ENTRY_BYTES = 16
_CYCLES = struct.Struct("<QII")
assert _CYCLES.size == CYCLES_ENTRY_BYTES

#: Names of the three files written by ``DdrImage.save``.
IMAGE_FILE, MAP_FILE, EXPECTED_FILE = "image.bin", "memory_map.json", "expected.npz"

Vec3 = tuple[int, int, int]
#: ``(addr, size) -> bytes``: reads memory at absolute addresses.
ReadFn = Callable[[int, int], bytes]


class ImageError(ValueError):
    """A compiled image (its files or its contents) is missing or inconsistent; the message
    names the file or the field."""


@dataclass(frozen=True)
class CycleEntry:
    """One decoded cycles entry (module docstring): total, PE-busy and DMA-stall cycles."""

    cycles: int
    pe_busy: int
    dma_stall: int

    @property
    def finished(self) -> bool:
        """Whether the engine has written the entry (a written entry is never all zero)."""
        return bool(self.cycles or self.pe_busy or self.dma_stall)

    def __add__(self, other: CycleEntry) -> CycleEntry:
        return CycleEntry(self.cycles + other.cycles, self.pe_busy + other.pe_busy,
                          self.dma_stall + other.dma_stall)


@dataclass(frozen=True)
class DescriptorInfo:
    """What the host needs to know about one descriptor of the list.

    Attributes
    ----------
    name : str
        Name of the network layer the descriptor belongs to.
    layer : int
        The descriptor's ``layer`` field (layer index).
    op, flags : int
        The descriptor's ``op`` and ``flags`` fields.
    out_base : int
        Address of the map the descriptor writes (NC/8DHW8).
    out_slots : int
        The descriptor's ``out_slots``: the map's slots (half of them with ``FLAG_DFOLD``, a
        ``k``-th of them for a gap layer read as ``k`` planes; :attr:`stored`).
    out_shape : (int, int, int)
        The descriptor's ``out_shape``: the map's ``D, H, W`` (half the depth with
        ``FLAG_DFOLD``, ``(k, 1, 1)`` for a gap layer read as ``k`` planes).
    cycles_addr : int
        Address of the descriptor's cycles entry.
    """

    name: str
    layer: int
    op: int
    flags: int
    out_base: int
    out_slots: int
    out_shape: Vec3
    cycles_addr: int

    @property
    def stored(self) -> tuple[int, Vec3]:
        """Slots and ``D, H, W`` of the map at ``out_base``
        (:func:`~fcircnn.arch.descriptor.stored_map`)."""
        return stored_map(self.flags, self.out_slots, self.out_shape, self.op)

    @property
    def out_bytes(self) -> int:
        """Bytes of the output map (slots padded to a multiple of 8)."""
        slots, shape = self.stored
        return ncdhw8_size(slots, *shape)


@dataclass(frozen=True)
class LayerOutput:
    """Where a layer's output lives: ``size`` bytes at ``addr``, ``slots`` x ``shape``."""

    name: str
    addr: int
    size: int
    slots: int
    shape: Vec3

    def decode(self, raw: bytes) -> tuple[np.ndarray, np.ndarray]:
        """The ``size`` bytes of the map -> ``(re, im)`` int8 ``[slots, D, H, W]``.

        Raises
        ------
        ImageError
            If ``raw`` is not ``size`` bytes long.
        """
        if len(raw) != self.size:
            raise ImageError(f"output of layer {self.name!r} is {self.size} bytes, "
                             f"got {len(raw)}")
        re, im = unpack_ncdhw8(raw, self.slots, self.shape)
        return re.astype(np.int8), im.astype(np.int8)


def _int(value: Any, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ImageError(f"{what} must be a non-negative integer, not {value!r}")
    return value


def _vec3(value: Any, what: str) -> Vec3:
    if not isinstance(value, (list, tuple)) or len(value) != 3:
        raise ImageError(f"{what} must be three integers (d, h, w), not {value!r}")
    return tuple(_int(v, what) for v in value)  # type: ignore[return-value]


def _descriptor_info(entry: Any, index: int, where: str) -> DescriptorInfo:
    what = f"{where}: descriptors[{index}]"
    if not isinstance(entry, Mapping):
        raise ImageError(f"{what} must be an object, not {type(entry).__name__}")
    missing = [k for k in ("name", "layer", "op", "flags", "out_base", "out_slots", "out_shape",
                           "cycles_addr") if k not in entry]
    if missing:
        raise ImageError(f"{what} lacks {', '.join(missing)}")
    name = entry["name"]
    if not isinstance(name, str) or not name:
        raise ImageError(f"{what}.name must be a non-empty string, not {name!r}")
    return DescriptorInfo(
        name=name,
        layer=_int(entry["layer"], f"{what}.layer"),
        op=_int(entry["op"], f"{what}.op"),
        flags=_int(entry["flags"], f"{what}.flags"),
        out_base=_int(entry["out_base"], f"{what}.out_base"),
        out_slots=_int(entry["out_slots"], f"{what}.out_slots"),
        out_shape=_vec3(entry["out_shape"], f"{what}.out_shape"),
        cycles_addr=_int(entry["cycles_addr"], f"{what}.cycles_addr"),
    )


@dataclass(frozen=True)
class RegionInfo:
    """One region of the image as its memory map lists it: ``[base, base + size)`` holding
    ``kind`` (:data:`REGION_KINDS`); for a map of an image laid out by liveness, ``live``: the
    first and last descriptor index (inclusive) between which it holds data the run needs."""

    name: str
    base: int
    size: int
    kind: str
    live: tuple[int, int] | None = None

    @property
    def end(self) -> int:
        """First byte after the region."""
        return self.base + self.size

    def shares(self, other: RegionInfo) -> bool:
        """Whether the two may overlap: both maps whose live ranges do not meet."""
        if self.live is None or other.live is None:
            return False
        return self.live[1] < other.live[0] or other.live[1] < self.live[0]

    def __str__(self) -> str:
        return f"region {self.name!r} ({self.kind}) [{self.base:#x}, {self.end:#x})"


#: The kinds of region an image holds (``memory_map.json``'s ``regions``, laid out by
#: :func:`fcircnn.gen.plan.plan_network`).
REGION_KINDS = ("descriptors", "weights", "post", "cycles", "input", "conv", "output")
#: The kinds holding feature maps, which an image laid out by liveness lets share bytes.
MAP_KINDS = ("input", "conv", "output")
#: The kinds the engine never writes: the write window (:attr:`CompiledImage.windows`) must not
#: cover them. (The input map is only read too, but it lies among the maps the engine writes.)
READ_ONLY_KINDS = ("descriptors", "weights", "post")
#: The region kinds each address field of a descriptor may point into.
_FIELD_KINDS = {"in_base": ("input", "conv", "output"), "res_base": ("input", "conv", "output"),
                "weight_base": ("weights",), "post_base": ("post",)}


def _region_info(entry: Any, index: int, where: str) -> RegionInfo:
    what = f"{where}: regions[{index}]"
    if not isinstance(entry, Mapping) or any(k not in entry for k in ("name", "base", "size",
                                                                       "kind")):
        raise ImageError(f"{what} must be an object with name, base, size and kind")
    if entry["kind"] not in REGION_KINDS:
        raise ImageError(f"{what}.kind is {entry['kind']!r}, not one of "
                         f"{', '.join(REGION_KINDS)}")
    live = entry.get("live")
    if live is not None:
        if entry["kind"] not in MAP_KINDS:
            raise ImageError(f"{what}.live is for maps ({', '.join(MAP_KINDS)}), not "
                             f"{entry['kind']!r}")
        if (not isinstance(live, (list, tuple)) or len(live) != 2
                or _int(live[0], f"{what}.live") > _int(live[1], f"{what}.live")):
            raise ImageError(f"{what}.live must be two descriptor indices [first, last], "
                             f"first <= last, not {live!r}")
        live = (live[0], live[1])
    return RegionInfo(str(entry["name"]), _int(entry["base"], f"{what}.base"),
                      _int(entry["size"], f"{what}.size"), entry["kind"], live)


@dataclass(frozen=True, eq=False)
class CompiledImage:
    """A compiled network ready to be loaded and checked by a host driver.

    Attributes
    ----------
    data : bytes
        The image; ``data[0]`` lives at address ``base``.
    base : int
        Address of the image (4 KB aligned by the compiler).
    desc_ptr : int
        Address of the first descriptor (the value for ``DESC_PTR``).
    descriptors : tuple of DescriptorInfo
        The descriptor list in list order.
    expected : dict of str to (ndarray, ndarray)
        Per layer name, the golden int8 output slots ``(re, im)`` ``[out_slots, D, H, W]``.
    input_parts : (ndarray, ndarray) or None
        The quantized input slots, if known.
    network, accelerator : str
        Names (empty if unknown).
    regions : tuple of RegionInfo
        The memory map's regions (empty when unknown: then only the checks above run).
    address_width : int
        The accelerator's address width in bits (0 when unknown).

    Raises
    ------
    ImageError
        On construction, naming the descriptor or layer, if ``desc_ptr``, an output map or a
        cycles entry is outside the image, there is no descriptor, or a layer has no expected
        output of shape ``[out_slots, *out_shape]``; naming the region or descriptor, if the
        image passes the address space or the regions do not hold together
        (:meth:`_check_regions`).
    """

    data: bytes = field(repr=False)
    base: int
    desc_ptr: int
    descriptors: tuple[DescriptorInfo, ...] = field(repr=False)
    expected: dict[str, tuple[np.ndarray, np.ndarray]] = field(repr=False)
    input_parts: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False)
    network: str = ""
    accelerator: str = ""
    regions: tuple[RegionInfo, ...] = field(default=(), repr=False)
    address_width: int = 0
    _outputs: dict[str, LayerOutput] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "data", bytes(self.data))
        object.__setattr__(self, "descriptors", tuple(self.descriptors))
        _int(self.base, "base")
        if not self.descriptors:
            raise ImageError("the image has no descriptors")
        self._check_range(self.desc_ptr, 1, "desc_ptr")
        outputs: dict[str, LayerOutput] = {}
        for i, d in enumerate(self.descriptors):
            self._check_range(d.out_base, d.out_bytes, f"descriptor {i} ({d.name}) output map")
            self._check_range(d.cycles_addr, CYCLES_ENTRY_BYTES,
                              f"descriptor {i} ({d.name}) cycles entry")
            outputs[d.name] = LayerOutput(d.name, d.out_base, d.out_bytes, *d.stored)
        expected: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for name, out in outputs.items():
            if name not in self.expected:
                raise ImageError(f"layer {name!r} has no expected output")
            shape = (out.slots, *out.shape)
            parts = []
            for part_name, part in zip(("re", "im"), self.expected[name], strict=True):
                part = np.asarray(part)
                if part.shape != shape:
                    raise ImageError(f"expected {name}.{part_name} has shape {part.shape}, the "
                                     f"descriptor says {shape}")
                parts.append(part.astype(np.int8))
            expected[name] = (parts[0], parts[1])
        object.__setattr__(self, "expected", expected)
        object.__setattr__(self, "_outputs", outputs)
        object.__setattr__(self, "regions", tuple(self.regions))
        if self.address_width and self.end > 1 << self.address_width:
            raise ImageError(f"the image [{self.base:#x}, {self.end:#x}) passes the "
                             f"{self.address_width}-bit address space of its accelerator")
        if self.regions:
            self._check_regions()

    def _check_regions(self) -> None:
        """The regions against each other, the windows and the descriptor list in the bytes:
        every region inside the image and none overlapping another (but maps whose live
        ranges do not meet, in an image laid out by liveness); the list inside a
        ``descriptors`` region; each descriptor in the bytes the one :attr:`descriptors` lists
        (op, flags, layer, output and cycles addresses, the next descriptor right after it or
        0 at the end), its output map in a ``conv`` or ``output`` region, its cycles entry in
        the ``cycles`` region, and each address it reads from in a region of the kind that
        field reads (:data:`_FIELD_KINDS`), each map it reads or writes live at its index
        (where the map says), each stream's region (``*_pages``) non-empty and inside the
        region its base lies in (0 pages for a stream its op does not use); no descriptor,
        weight or post region inside the write window. Reads are checked by their first
        address and their regions: the extent a descriptor's tiles read is the hardware's
        business (it refuses any burst outside its stream's region and window)."""
        ordered = sorted(self.regions, key=lambda r: (r.base, r.end))
        for r in ordered:
            self._check_range(r.base, r.size, str(r))
            if r.live is not None and r.live[1] >= len(self.descriptors):
                raise ImageError(f"{r} is live to descriptor {r.live[1]}, past the list's "
                                 f"{len(self.descriptors)}")
        for i, a in enumerate(ordered):
            for b in ordered[i + 1:]:
                if b.base >= a.end:
                    break
                if not a.shares(b):
                    raise ImageError(f"{a} overlaps {b}" + (
                        f" while both are live (descriptors {a.live[0]}..{a.live[1]} and "
                        f"{b.live[0]}..{b.live[1]})" if a.live and b.live else ""))
        write_lo = self.windows[1][0]
        for r in ordered:
            if r.kind in READ_ONLY_KINDS and r.end > write_lo:
                raise ImageError(f"{r} is inside the write window, which starts at "
                                 f"{write_lo:#x} (the engine may write it)")
        self._region_of(self.desc_ptr, len(self.descriptors) * DESCRIPTOR_BYTES, ("descriptors",),
                        f"the descriptor list ({len(self.descriptors)} descriptors)")
        for k, info in enumerate(self.descriptors):
            self._check_descriptor(k, info)

    def _check_descriptor(self, k: int, info: DescriptorInfo) -> None:
        what = f"descriptor {k} ({info.name})"
        at = self.desc_ptr - self.base + k * DESCRIPTOR_BYTES
        try:
            d = LayerDescriptor.unpack(self.data[at:at + DESCRIPTOR_BYTES])
        except ValueError as exc:
            raise ImageError(f"{what} in the image: {exc}") from None
        last = k == len(self.descriptors) - 1
        listed = {"op": info.op, "flags": info.flags, "layer": info.layer,
                  "out_base": info.out_base, "cycles_addr": info.cycles_addr,
                  "next_desc": 0 if last else self.desc_ptr + (k + 1) * DESCRIPTOR_BYTES}
        for name, want in listed.items():
            if getattr(d, name) != want:
                raise ImageError(f"{what}: {name} is {getattr(d, name):#x} in the image, "
                                 f"{want:#x} in its memory map")
        out = self._region_of(info.out_base, info.out_bytes, ("conv", "output"),
                              f"{what} output map", k)
        self._region_of(info.cycles_addr, CYCLES_ENTRY_BYTES, ("cycles",),
                        f"{what} cycles entry")
        used = used_regions(d.op, d.flags)
        for name in STREAM_REGIONS:
            field, pages = f"{name}_base", getattr(d, f"{name}_pages")
            if not used[name]:
                if pages:
                    raise ImageError(f"{what}: {name}_pages is {pages}, for a stream its op "
                                     "does not use (it must be 0)")
                continue
            base = getattr(d, field)
            r = out if name == "out" else self._region_of(base, 1, _FIELD_KINDS[field],
                                                          f"{what} {field}", k)
            room = region_pages(base, r.end)
            if not 1 <= pages <= room:
                raise ImageError(f"{what}: {name}_pages is {pages}; its stream's region from "
                                 f"{field} = {base:#x} must be 1..{room} pages, inside {r}")

    def _region_of(self, addr: int, size: int, kinds: Sequence[str], what: str,
                   at: int | None = None) -> RegionInfo:
        """The region of a kind in ``kinds`` holding ``[addr, addr + size)`` (of those, one live
        at descriptor ``at`` where regions say when they are live), else an
        :class:`ImageError` naming ``what``."""
        holding = [r for r in self.regions if r.base <= addr and addr + size <= r.end]
        if not holding:
            raise ImageError(f"{what} [{addr:#x}, {addr + size:#x}) is in no region of the "
                             f"image (it needs one of kind {' or '.join(kinds)})")
        for r in holding:
            if r.kind in kinds and (at is None or r.live is None
                                    or r.live[0] <= at <= r.live[1]):
                return r
        r = holding[0]
        if r.kind not in kinds:
            raise ImageError(f"{what} [{addr:#x}, {addr + size:#x}) is in {r}, not in a "
                             f"region of kind {' or '.join(kinds)}")
        raise ImageError(f"{what} [{addr:#x}, {addr + size:#x}) is in {r}, live only from "
                         f"descriptor {r.live[0]} to {r.live[1]}")

    def survives(self, name: str) -> bool:
        """Whether layer ``name``'s output still holds it after the run: no later map shares
        its bytes (always, in an image whose maps each have their own)."""
        out = self.output(name)
        if not self.regions:
            return True
        k = max(i for i, d in enumerate(self.descriptors) if d.name == name)
        mine = self._region_of(out.addr, out.size, ("conv", "output"), f"layer {name!r}", k)
        return not any(r.live is not None and mine.live is not None and r.live[0] > mine.live[1]
                       and r.base < mine.end and mine.base < r.end for r in self.regions)

    @property
    def windows(self) -> tuple[tuple[int, int], tuple[int, int]]:
        """The memory windows the image needs, ``(read, write)``, each ``(first byte, last
        byte)``: the whole image for reads; for writes, from the lowest address the engine
        writes (a cycle entry or an output map) to the end (the compiler lays what is only
        read before what is written: ``NetworkPlan.windows``)."""
        writes = [d.cycles_addr for d in self.descriptors] + [d.out_base
                                                              for d in self.descriptors]
        return (self.base, self.end - 1), (min(writes), self.end - 1)

    def relocated(self, base: int) -> CompiledImage:
        """This image placed at ``base`` (4 KB aligned) instead of :attr:`base`.

        The compiler lays the image out relative to its base and only the descriptors hold
        absolute addresses: every address field of every descriptor in the list (input, output,
        residual, weight, post-table and cycles-entry addresses, the next descriptor) moves by
        ``base - self.base``, and so do ``desc_ptr`` and the outputs; everything else is the
        same bytes. A board driver places an image compiled anywhere in the buffer it is given.

        Raises
        ------
        ImageError
            If ``base`` is not a non-negative multiple of 4096.
        """
        if isinstance(base, bool) or not isinstance(base, int) or base < 0 or base % PAGE_BYTES:
            raise ImageError(f"an image is placed at a non-negative multiple of {PAGE_BYTES}, not "
                             f"{base!r}")
        delta = base - self.base
        data = bytearray(self.data)
        for k in range(len(self.descriptors)):
            at = self.desc_ptr - self.base + k * DESCRIPTOR_BYTES
            d = LayerDescriptor.unpack(bytes(data[at:at + DESCRIPTOR_BYTES]))
            used = used_regions(d.op, d.flags)
            moved = {f"{name}_base": getattr(d, f"{name}_base") + delta
                     for name in STREAM_REGIONS if used[name]}
            moved["cycles_addr"] = d.cycles_addr + delta
            if d.next_desc:
                moved["next_desc"] = d.next_desc + delta
            data[at:at + DESCRIPTOR_BYTES] = dataclasses.replace(d, **moved).pack()
        infos = tuple(dataclasses.replace(d, out_base=d.out_base + delta,
                                          cycles_addr=d.cycles_addr + delta)
                      for d in self.descriptors)
        regions = tuple(dataclasses.replace(r, base=r.base + delta) for r in self.regions)
        return CompiledImage(bytes(data), base, self.desc_ptr + delta, infos, self.expected,
                             input_parts=self.input_parts, network=self.network,
                             accelerator=self.accelerator, regions=regions,
                             address_width=self.address_width)

    def _check_range(self, addr: int, size: int, what: str) -> None:
        end = self.base + len(self.data)
        if not (self.base <= addr and addr + size <= end):
            raise ImageError(f"{what} [{addr:#x}, {addr + size:#x}) is outside the image "
                             f"[{self.base:#x}, {end:#x})")

    # ---------------------------------------------------------------------------- construction

    @classmethod
    def from_ddr_image(cls, img: Any) -> CompiledImage:
        """From an in-memory :class:`~fcircnn.gen.compiler.DdrImage` (``data``, ``base``,
        ``desc_ptr``, ``memory_map()``, ``expected``, ``input_parts``)."""
        mm = img.memory_map()
        infos = cls._parse_descriptors(mm, "memory map")
        parts = getattr(img, "input_parts", None)
        return cls(img.data, img.base, img.desc_ptr, infos, dict(img.expected),
                   input_parts=tuple(parts) if parts is not None else None,
                   network=str(mm.get("network", "")), accelerator=str(mm.get("accelerator", "")),
                   **cls._parse_regions(mm, "memory map"))

    @classmethod
    def load(cls, directory: str | os.PathLike[str]) -> CompiledImage:
        """Read ``image.bin``, ``memory_map.json`` and ``expected.npz`` from ``directory``.

        Raises
        ------
        ImageError
            Naming the file, if one is missing, unreadable or inconsistent with the others.
        """
        folder = Path(directory)
        if not folder.is_dir():
            raise ImageError(f"{folder}: no such directory (expected the output of "
                             f"'fcircnn compile')")
        paths = {name: folder / name for name in (IMAGE_FILE, MAP_FILE, EXPECTED_FILE)}
        for path in paths.values():
            if not path.is_file():
                raise ImageError(f"{path}: missing (a compiled image has {IMAGE_FILE}, "
                                 f"{MAP_FILE} and {EXPECTED_FILE})")
        try:
            data = paths[IMAGE_FILE].read_bytes()
        except OSError as exc:
            raise ImageError(f"{paths[IMAGE_FILE]}: cannot read: {exc.strerror}") from None
        where = str(paths[MAP_FILE])
        try:
            mm = json.loads(paths[MAP_FILE].read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ImageError(f"{where}: not a readable JSON file: {exc}") from None
        if not isinstance(mm, dict):
            raise ImageError(f"{where}: must hold a JSON object")
        for key in ("base", "desc_ptr", "descriptors"):
            if key not in mm:
                raise ImageError(f"{where}: lacks {key!r}")
        base = _int(mm["base"], f"{where}: base")
        desc_ptr = _int(mm["desc_ptr"], f"{where}: desc_ptr")
        if "size" in mm and mm["size"] != len(data):
            raise ImageError(f"{paths[IMAGE_FILE]}: {len(data)} bytes, {MAP_FILE} says "
                             f"{mm['size']}")
        infos = cls._parse_descriptors(mm, where)
        expected, input_parts = cls._load_expected(paths[EXPECTED_FILE])
        try:
            return cls(data, base, desc_ptr, infos, expected, input_parts=input_parts,
                       network=str(mm.get("network", "")),
                       accelerator=str(mm.get("accelerator", "")),
                       **cls._parse_regions(mm, where))
        except ImageError as exc:
            raise ImageError(f"{folder}: {exc}") from None

    @staticmethod
    def _parse_descriptors(mm: Mapping[str, Any], where: str) -> tuple[DescriptorInfo, ...]:
        entries = mm.get("descriptors")
        if not isinstance(entries, Sequence) or isinstance(entries, (str, bytes)):
            raise ImageError(f"{where}: 'descriptors' must be a list")
        return tuple(_descriptor_info(e, i, where) for i, e in enumerate(entries))

    @staticmethod
    def _parse_regions(mm: Mapping[str, Any], where: str) -> dict[str, Any]:
        """``regions`` and ``address_width`` of a memory map (a map without them, as
        written before they were checked, gives none)."""
        entries = mm.get("regions", [])
        if not isinstance(entries, Sequence) or isinstance(entries, (str, bytes)):
            raise ImageError(f"{where}: 'regions' must be a list")
        width = _int(mm.get("address_width", 0), f"{where}: address_width")
        return {"regions": tuple(_region_info(e, i, where) for i, e in enumerate(entries)),
                "address_width": width}

    @staticmethod
    def _load_expected(path: Path) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]],
                                            tuple[np.ndarray, np.ndarray] | None]:
        try:
            with np.load(path, allow_pickle=False) as npz:
                arrays = {key: npz[key] for key in npz.files}
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
            raise ImageError(f"{path}: not a readable .npz file: {exc}") from None
        pairs: dict[str, dict[str, np.ndarray]] = {}
        for key, array in arrays.items():
            name, dot, part = key.rpartition(".")
            if not dot or part not in ("re", "im") or not name:
                raise ImageError(f"{path}: unexpected array {key!r} (want <layer>.re/.im)")
            pairs.setdefault(name, {})[part] = array
        for name, parts in pairs.items():
            if set(parts) != {"re", "im"}:
                raise ImageError(f"{path}: {name!r} lacks its "
                                 f"{'im' if 're' in parts else 're'} part")
        input_parts = None
        if "input" in pairs:
            input_parts = (pairs["input"]["re"], pairs["input"]["im"])
        expected = {name: (p["re"], p["im"]) for name, p in pairs.items() if name != "input"}
        return expected, input_parts

    # -------------------------------------------------------------------------------- queries

    @property
    def end(self) -> int:
        """First address after the image."""
        return self.base + len(self.data)

    def layer_names(self) -> list[str]:
        """Layer names in list order (each once, in the order of its first descriptor)."""
        return list(dict.fromkeys(d.name for d in self.descriptors))

    def layer_descriptors(self, name: str) -> tuple[DescriptorInfo, ...]:
        """The descriptors of layer ``name`` in list order (``KeyError`` if there is none)."""
        found = tuple(d for d in self.descriptors if d.name == name)
        if not found:
            raise KeyError(f"no layer {name!r} in the image (layers: "
                           f"{', '.join(self.layer_names())})")
        return found

    def output(self, name: str) -> LayerOutput:
        """Where layer ``name``'s output lives (its last descriptor's map)."""
        if name not in self._outputs:
            raise KeyError(f"no layer {name!r} in the image (layers: "
                           f"{', '.join(self.layer_names())})")
        return self._outputs[name]

    def read(self, addr: int, size: int) -> bytes:
        """``size`` bytes of the image at absolute address ``addr``."""
        self._check_range(addr, size, "read")
        return self.data[addr - self.base:addr - self.base + size]

    def decode_output(self, source: bytes | bytearray | memoryview | ReadFn,
                      name: str) -> tuple[np.ndarray, np.ndarray]:
        """Layer ``name``'s output slots ``(re, im)`` int8 ``[out_slots, D, H, W]``.

        Parameters
        ----------
        source : bytes-like or callable
            Either a snapshot of memory starting at ``base`` (at least up to the end of the
            layer's map, e.g. the whole image after a run), or ``read(addr, size) -> bytes``
            reading absolute addresses.
        name : str
            Layer name.
        """
        out = self.output(name)
        if callable(source):
            raw = bytes(source(out.addr, out.size))
        else:
            start = out.addr - self.base
            if len(source) < start + out.size:
                raise ImageError(f"memory snapshot of {len(source)} bytes from {self.base:#x} "
                                 f"does not reach the end of layer {name!r}'s output "
                                 f"({out.addr + out.size:#x})")
            raw = bytes(source[start:start + out.size])
        return out.decode(raw)

    @staticmethod
    def decode_cycles(entry: bytes) -> CycleEntry:
        """Decode one 16-byte cycles entry (module docstring)."""
        if len(entry) != CYCLES_ENTRY_BYTES:
            raise ImageError(f"a cycles entry is {CYCLES_ENTRY_BYTES} bytes, not {len(entry)}")
        return CycleEntry(*_CYCLES.unpack(bytes(entry)))

    @staticmethod
    def encode_cycles(entry: CycleEntry) -> bytes:
        """Inverse of :meth:`decode_cycles` (for models of the engine)."""
        return _CYCLES.pack(entry.cycles, entry.pe_busy, entry.dma_stall)
