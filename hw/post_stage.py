"""The shape every post-unit stage shares (``docs/contract.md`` section 6): a stream of beats of
``lanes`` output slots in, the stream of its results out, and a configuration static during a
layer. The stages subclass :class:`PostStage`; this file holds no hardware of its own."""

from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .common import rejecting

__all__ = ["MAX_LANES", "PostStage", "check_lanes"]

#: Largest accepted ``lanes``.
MAX_LANES = 64


def check_lanes(lanes):
    """Validate the ``lanes`` parameter shared by every post-unit stage."""
    if not isinstance(lanes, int) or isinstance(lanes, bool):
        raise TypeError(f"lanes must be an integer, not {lanes!r}")
    if not 1 <= lanes <= MAX_LANES:
        raise ValueError(f"lanes must be in 1..{MAX_LANES}, not {lanes}")


class PostStage(wiring.Component):
    """A post-unit stage: ``i`` (beats of ``i_layout(lanes)``), ``o`` (beats of
    ``o_layout(lanes)``) and ``cfg`` (``cfg_layout``).

    Parameters
    ----------
    lanes : int
        Slots per beat, 1..:data:`MAX_LANES`.
    i_layout, o_layout : callable
        The input and output beat layouts as functions of ``lanes``.
    cfg_layout : Layout
        The configuration port's layout.
    *checks : callable
        The stage's own parameter checks, run after ``lanes``'s: a ``TypeError`` or
        ``ValueError`` they raise propagates, and the half-built component is never reported
        as unelaborated (:func:`~fcircnn.hw.common.rejecting`).
    """

    def __init__(self, lanes, i_layout, o_layout, cfg_layout, *checks):
        with rejecting(self):
            check_lanes(lanes)
            for check in checks:
                check()
        self.lanes = lanes
        super().__init__({
            "i": In(stream.Signature(i_layout(lanes))),
            "o": Out(stream.Signature(o_layout(lanes))),
            "cfg": In(cfg_layout),
        })
