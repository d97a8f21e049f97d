"""A two-entry register slice (skid buffer) for :mod:`amaranth.lib.stream` with registered ready."""

from amaranth.hdl import Module, Shape, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .common import rejecting

__all__ = ["LATENCY", "SkidBuffer"]

#: Cycles from an accepted input beat to its output beat (no stall).
LATENCY = 1


class SkidBuffer(wiring.Component):
    """Register slice that cuts every combinational path between its two streams.

    Contract
    --------
    * ``i.ready``, ``o.valid`` and ``o.payload`` are register outputs: nothing on ``i`` reaches
      ``o`` and nothing on ``o`` (in particular ``o.ready``) reaches ``i.ready`` within a cycle.
      Inserted into a chain of blocks it bounds the combinational ready path to the blocks on
      one side of it.
    * Latency :data:`LATENCY` (1) cycle; initiation interval 1: with ``o.ready`` held high a beat
      passes every cycle, whatever the input's valid pattern.
    * Two entries: a beat accepted while the output is stalled waits in the second entry (the
      "skid"), and ``i.ready`` falls one cycle later. Under any valid/ready pattern every
      accepted beat leaves exactly once and in order; the payload is not modified.
    * The output follows the stream rules: once ``o.valid`` is high, ``o.valid`` and
      ``o.payload`` hold until the beat is taken.

    Parameters
    ----------
    layout : shape-castable
        The payload shape of both streams (an :mod:`amaranth.lib.data` layout or any shape).

    Ports
    -----
    i : In(stream.Signature(layout))
    o : Out(stream.Signature(layout))
    """

    def __init__(self, layout):
        with rejecting(self):
            if isinstance(layout, bool):
                raise TypeError(f"layout must be a shape-castable object, not {layout!r}")
            try:
                Shape.cast(layout)
            except TypeError as exc:
                raise TypeError(
                    f"layout must be a shape-castable object, not {layout!r}") from exc
        self.layout = layout
        super().__init__({
            "i": In(stream.Signature(layout)),
            "o": Out(stream.Signature(layout)),
        })

    def elaborate(self, platform):
        m = Module()

        # i.ready is the complement of "skid entry full", kept as its own flip-flop.
        ready = Signal(init=1)
        valid = Signal()
        skid = Signal(self.layout)
        m.d.comb += [self.i.ready.eq(ready), self.o.valid.eq(valid)]

        with m.If(~valid | self.o.ready):
            # The output register is free (empty or being taken): refill it from the skid
            # entry first (older beat), else from the input.
            with m.If(~ready):
                m.d.sync += [self.o.payload.eq(skid), valid.eq(1), ready.eq(1)]
            with m.Else():
                m.d.sync += valid.eq(self.i.valid)
                with m.If(self.i.valid):
                    m.d.sync += self.o.payload.eq(self.i.payload)
        with m.Elif(ready & self.i.valid):
            # Output stalled: park the accepted beat in the skid entry, drop ready.
            m.d.sync += [skid.eq(self.i.payload), ready.eq(0)]
        return m
