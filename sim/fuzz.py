"""Corrupted images for the fail-safe fuzzing campaign (issue 46): what a stale image, a bad
write to DDR or a crafted list can put in front of the engine.

:func:`corrupt` takes a compiled image and a seeded generator and damages its descriptor list
in one of :data:`KINDS`:

``bits``
    1 to 8 random bits of one descriptor flipped.
``field``
    One element of one field (:data:`~fcircnn.arch.descriptor.FIELD_NAMES`) of one descriptor
    set to a random value of its width, or to an extreme (0, 1, the largest, half of it).
``address``
    One address field of one descriptor set to a random 16-byte aligned address: anywhere in
    the address space, or inside the image (its read-only descriptors, weights and post
    tables among them).
``truncate``
    One descriptor before the last marked last (``FLAG_LAST``), or its ``next_desc`` set to
    0: the list ends early.
``loop``
    One descriptor's ``next_desc`` pointed at itself or an earlier one and its ``FLAG_LAST``
    cleared: a list that never ends.
``garbage``
    One descriptor's ``next_desc`` pointed at 256 bytes of the image that are not a
    descriptor (weights, post tables, maps or cycle entries), ``FLAG_LAST`` cleared.
``bytes``
    One whole descriptor replaced by random bytes.

The engine must end every such run within a bound (done, an error, or stopped by CTRL.abort
after the testbench's timeout) and never access memory outside the image's windows
(:mod:`fcircnn.sim.tb_accelerator`, parameter ``fuzz``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fcircnn.arch.descriptor import (
    ADDRESS_FIELDS,
    DESCRIPTOR_BYTES,
    FIELD_NAMES,
    FLAG_LAST,
    field_layout,
    field_offset,
)

__all__ = ["KINDS", "Corruption", "corrupt"]

#: The kinds of damage :func:`corrupt` does, drawn uniformly.
KINDS = ("bits", "field", "address", "truncate", "loop", "garbage", "bytes")

@dataclass(frozen=True)
class Corruption:
    """One damaged image: its bytes, the kind of damage and what was done (for the log)."""

    data: bytes
    kind: str
    detail: str


def _put(data: bytearray, at: int, value: int, size: int) -> None:
    data[at:at + size] = (value & ((1 << (8 * size)) - 1)).to_bytes(size, "little")


def _get(data: bytearray, at: int, size: int) -> int:
    return int.from_bytes(data[at:at + size], "little")


def corrupt(data: bytes, base: int, desc_ptr: int, descriptors: int, address_width: int,
            rng: np.random.Generator, kind: str | None = None) -> Corruption:
    """``data``, an image placed at ``base`` whose list of ``descriptors`` starts at
    ``desc_ptr``, with one corruption of ``kind`` (drawn from :data:`KINDS` if ``None``).

    Raises
    ------
    ValueError
        If ``kind`` is not one of :data:`KINDS`, or the list does not lie in ``data``.
    """
    if kind is None:
        kind = KINDS[int(rng.integers(len(KINDS)))]
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
    first = desc_ptr - base
    if first < 0 or descriptors < 1 or first + descriptors * DESCRIPTOR_BYTES > len(data):
        raise ValueError("the descriptor list does not lie in the image")
    out = bytearray(data)
    k = int(rng.integers(descriptors))
    at = first + k * DESCRIPTOR_BYTES

    def field(name: str, element: int = 0) -> tuple[int, int]:
        size = field_layout(name)[1]
        return at + field_offset(name) + element * size, size

    flags_at, _ = field("flags")
    next_at, _ = field("next_desc")
    if kind == "bits":
        bits = rng.choice(8 * DESCRIPTOR_BYTES, size=int(rng.integers(1, 9)), replace=False)
        for bit in bits:
            out[at + bit // 8] ^= 1 << (bit % 8)
        detail = f"bits {sorted(int(b) for b in bits)}"
    elif kind == "field":
        name = FIELD_NAMES[int(rng.integers(len(FIELD_NAMES)))]
        count, size = field_layout(name)
        element = int(rng.integers(count))
        top = (1 << (8 * size)) - 1
        choices = [0, 1, top, top >> 1,
                   int(rng.integers(0, top, dtype=np.uint64, endpoint=True))]
        value = choices[int(rng.integers(len(choices)))]  # Python ints: all 64 bits kept
        where, _ = field(name, element)
        _put(out, where, value, size)
        detail = f"{name}[{element}] = {value:#x}"
    elif kind == "address":
        name = ADDRESS_FIELDS[int(rng.integers(len(ADDRESS_FIELDS)))]
        if rng.random() < 0.5:
            value = int(rng.integers(0, 1 << address_width, dtype=np.uint64)) & ~15
        else:
            value = base + (int(rng.integers(0, len(data))) & ~15)
        where, size = field(name)
        _put(out, where, value, size)
        detail = f"{name} = {value:#x}"
    elif kind == "truncate":
        if descriptors > 1:  # (drawn after the first k: the seeded sequences stay as recorded)
            k = int(rng.integers(descriptors - 1))
            at = first + k * DESCRIPTOR_BYTES
            (flags_at, _), (next_at, _) = field("flags"), field("next_desc")
        if rng.random() < 0.5:
            _put(out, flags_at, _get(out, flags_at, 2) | FLAG_LAST, 2)
            detail = "FLAG_LAST"
        else:
            _put(out, next_at, 0, 8)
            detail = "next_desc = 0"
    elif kind == "loop":
        target = desc_ptr + int(rng.integers(k + 1)) * DESCRIPTOR_BYTES
        _put(out, next_at, target, 8)
        _put(out, flags_at, _get(out, flags_at, 2) & ~FLAG_LAST, 2)
        detail = f"next_desc = {target:#x}"
    elif kind == "garbage":
        end = first + descriptors * DESCRIPTOR_BYTES
        if len(data) - end < DESCRIPTOR_BYTES:
            raise ValueError("no bytes past the descriptor list to point at")
        target = base + (int(rng.integers(end, len(data) - DESCRIPTOR_BYTES + 1)) & ~15)
        _put(out, next_at, target, 8)
        _put(out, flags_at, _get(out, flags_at, 2) & ~FLAG_LAST, 2)
        detail = f"next_desc = {target:#x}"
    else:  # bytes
        out[at:at + DESCRIPTOR_BYTES] = rng.integers(0, 256, DESCRIPTOR_BYTES,
                                                     dtype=np.uint8).tobytes()
        detail = "random bytes"
    return Corruption(bytes(out), kind, f"descriptor {k}: {detail}")
