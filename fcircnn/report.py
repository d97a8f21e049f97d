"""Plain-text report helpers shared by the CLI and the configuration summaries."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

__all__ = ["format_table"]


def format_table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> list[str]:
    """Left-aligned columns separated by two spaces, with a dashed rule under the header.

    Returns the lines (no trailing newline); cells are converted with ``str``.
    """
    rows = [list(map(str, r)) for r in rows]
    widths = [max(len(h), *(len(r[c]) for r in rows)) if rows else len(h)
              for c, h in enumerate(header)]
    line = "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip()
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return out
