"""NC/8DHW8 feature-map layout in DDR (docs/contract.md section 8).

Slots are grouped 8 per 128-bit AXI beat. For slot ``s`` at voxel ``(d, h, w)`` of an
``S x D x H x W`` map (``S`` padded up to a multiple of 8 with zero slots)::

    byte_addr = base + ((((s // 8) * D + d) * H + h) * W + w) * 16 + (s % 8) * 2

byte ``+0`` holds the real part and byte ``+1`` the imaginary part, both int8. The layout is
little-endian, so lane ``s % 8`` is bits ``[16*lane +: 16]`` of the beat.
"""

from __future__ import annotations

import numpy as np

from fcircnn.arch.geometry import BEAT_BYTES, SLOTS_PER_BEAT

__all__ = [
    "BEAT_BYTES",
    "SLOTS_PER_BEAT",
    "ncdhw8_address",
    "ncdhw8_size",
    "pack_box",
    "pack_ncdhw8",
    "unpack_ncdhw8",
]

# Slots and bytes in one 128-bit beat: the architecture's (fcircnn.arch.geometry).


def _groups(slots: int) -> int:
    return -(-slots // SLOTS_PER_BEAT)


def ncdhw8_size(slots: int, depth: int, height: int, width: int) -> int:
    """Bytes occupied by a map of ``slots`` slots (padded to a multiple of 8)."""
    return _groups(slots) * depth * height * width * BEAT_BYTES


def ncdhw8_address(
    s: int, d: int, h: int, w: int, shape: tuple[int, int, int], base: int = 0
) -> int:
    """Byte address of the real part of slot ``s`` at voxel ``(d, h, w)``.

    ``shape`` is the map's ``(D, H, W)``; the imaginary part is at the returned address + 1.
    """
    D, H, W = shape
    if not (0 <= d < D and 0 <= h < H and 0 <= w < W and s >= 0):
        raise ValueError(f"voxel ({d}, {h}, {w}) / slot {s} outside a map of {shape}")
    return base + ((((s // 8) * D + d) * H + h) * W + w) * BEAT_BYTES + (s % 8) * 2


def pack_ncdhw8(xq_re: np.ndarray, xq_im: np.ndarray) -> bytes:
    """Slot parts ``[S, D, H, W]`` (int8-valued) -> NC/8DHW8 bytes.

    The slot count is padded with zero slots to a multiple of 8. Values must lie in
    ``[-128, 127]`` (the contract keeps them in ``[-127, 127]``).
    """
    re = np.asarray(xq_re)
    im = np.asarray(xq_im)
    if re.shape != im.shape or re.ndim != 4:
        raise ValueError(f"slot parts must both be [S, D, H, W], got {re.shape} and {im.shape}")
    for name, part in (("xq_re", re), ("xq_im", im)):
        if not np.issubdtype(part.dtype, np.integer):
            raise TypeError(f"{name} must be an integer array, not {part.dtype}")
        if part.size and (part.min() < -128 or part.max() > 127):
            raise ValueError(f"{name} does not fit int8: [{part.min()}, {part.max()}]")
    S, D, H, W = re.shape
    groups = _groups(S)
    pairs = np.zeros((groups * SLOTS_PER_BEAT, D, H, W, 2), dtype=np.int8)
    pairs[:S, ..., 0] = re
    pairs[:S, ..., 1] = im
    # [G, 8, D, H, W, 2] -> [G, D, H, W, 8, 2]: beat-major, lane-minor, re before im.
    beats = pairs.reshape(groups, SLOTS_PER_BEAT, D, H, W, 2).transpose(0, 2, 3, 4, 1, 5)
    return np.ascontiguousarray(beats).tobytes()


def unpack_ncdhw8(
    data: bytes | np.ndarray, slots: int, shape: tuple[int, int, int]
) -> tuple[np.ndarray, np.ndarray]:
    """NC/8DHW8 bytes -> slot parts ``(re, im)``, each int64 ``[slots, D, H, W]``.

    The padding slots beyond ``slots`` are dropped.
    """
    D, H, W = shape
    expected = ncdhw8_size(slots, D, H, W)
    raw = np.frombuffer(bytes(data) if not isinstance(data, np.ndarray) else data.tobytes(),
                        dtype=np.int8)
    if raw.size != expected:
        raise ValueError(f"a {slots}x{D}x{H}x{W} map needs {expected} bytes, got {raw.size}")
    beats = raw.reshape(_groups(slots), D, H, W, SLOTS_PER_BEAT, 2)
    pairs = beats.transpose(0, 4, 1, 2, 3, 5).reshape(-1, D, H, W, 2)[:slots]
    return pairs[..., 0].astype(np.int64), pairs[..., 1].astype(np.int64)


def pack_box(xq_re: np.ndarray, xq_im: np.ndarray, groups: tuple[int, int],
             d: tuple[int, int], h: tuple[int, int], w: tuple[int, int]) -> bytes:
    """The NC/8DHW8 bytes of a box of a map, zero outside the map (what the read DMA delivers
    for a box command).

    Parameters
    ----------
    xq_re, xq_im : ndarray ``[S, D, H, W]``
        The map's int8 slot parts.
    groups : (first, count)
        Slot groups of the box.
    d, h, w : (start, length)
        The box per axis; a start below 0 or an end past the map reads zero padding.
    """
    G = _groups(xq_re.shape[0])
    out = []
    for part in (xq_re, xq_im):
        full = np.zeros((G * SLOTS_PER_BEAT, *part.shape[1:]), dtype=np.int64)
        full[: part.shape[0]] = part
        pad = [(0, 0)] + [(max(-s, 0), max(s + n - size, 0))
                          for (s, n), size in zip((d, h, w), part.shape[1:], strict=True)]
        padded = np.pad(full, pad)
        cut = [slice(groups[0] * SLOTS_PER_BEAT, (groups[0] + groups[1]) * SLOTS_PER_BEAT)]
        cut += [slice(s + p[0], s + p[0] + n)
                for (s, n), p in zip((d, h, w), pad[1:], strict=True)]
        out.append(padded[tuple(cut)])
    return pack_ncdhw8(*out)
