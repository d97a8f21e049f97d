"""The feature maps' layout in the DDR image (:mod:`fcircnn.gen.plan`): one after another, or
by liveness (:func:`reused_layout`: maps never live together share bytes). Each map is
anything with ``span`` (its bytes in whole pages) and ``live`` (its first and last
descriptor index, inclusive).
"""

from __future__ import annotations

__all__ = ["reused_layout", "separate_layout"]


def separate_layout(specs) -> tuple[list[int], int]:
    """Offsets of ``specs`` (anything with ``span``) laid out one after another, in order, and
    the bytes they take."""
    offsets, cursor = [], 0
    for spec in specs:
        offsets.append(cursor)
        cursor += spec.span
    return offsets, cursor


def reused_layout(specs) -> tuple[list[int], int]:
    """Offsets of ``specs`` (anything with ``span`` and ``live``) where maps whose live ranges
    do not meet share bytes, and the bytes they take.

    Greedy by size: largest map first (then earliest written), each at the lowest offset
    free of every map already placed whose live range meets its own. Two maps live in the
    same descriptor never share a byte, so a pass never reads what it writes (no in-place
    output: the engine reads a tile's input box, halo included, while it stores earlier
    tiles, and the next tile's box while it computes)."""
    order = sorted(range(len(specs)), key=lambda k: (-specs[k].span, specs[k].live, k))
    offsets: list[int | None] = [None] * len(specs)
    for k in order:
        lo, hi = specs[k].live
        taken = sorted((offsets[j], offsets[j] + specs[j].span) for j in range(len(specs))
                       if offsets[j] is not None and specs[j].live[0] <= hi
                       and lo <= specs[j].live[1])
        at = 0
        for start, stop in taken:
            if at + specs[k].span <= start:
                break
            at = max(at, stop)
        offsets[k] = at
    total = max((o + s.span for o, s in zip(offsets, specs, strict=True)), default=0)
    return offsets, total
