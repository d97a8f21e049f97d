"""Post-unit stage 3: CReLU, ``max(y, 0)`` on the real and imaginary parts independently."""

from amaranth.hdl import Module, Mux
from amaranth.lib import data

from .common import stall_pipeline
from .post_quantize import slot_layout
from .post_stage import PostStage

__all__ = ["LATENCY", "CReLU", "crelu_config_layout"]

#: Cycles from an accepted input beat to its output beat (no stall).
LATENCY = 1

#: Runtime configuration of :class:`CReLU` (static during a layer).
#: ``bypass``: pass-through (the layer has no ReLU; the quantizer's clamp bound -127 stays).
crelu_config_layout = data.StructLayout({"bypass": 1})


class CReLU(PostStage):
    """CReLU post-unit: ``y = max(y, 0)`` for the re and im part of every slot.

    Applied after the quantizer's clamp to ``[-127, 127]`` this gives the clamp to ``[0, 127]``
    (golden :func:`fcircnn.models.spectral.crelu`). Order of beats and slots is irrelevant.

    Contract
    --------
    * Latency :data:`LATENCY` (1) cycle, initiation interval 1: one output register,
      ``i.ready = ~o.valid | o.ready`` (full back-pressure).
    * ``cfg.bypass``: the payload passes unchanged (same latency).
    * ``cfg`` static while beats are in flight.

    Parameters
    ----------
    lanes : int
        Slots per beat, 1..64.

    Ports
    -----
    i : In(stream.Signature(slot_layout(lanes)))
    o : Out(stream.Signature(slot_layout(lanes)))
    cfg : In(crelu_config_layout)
    """

    def __init__(self, lanes=8):
        super().__init__(lanes, slot_layout, slot_layout, crelu_config_layout)

    def elaborate(self, platform):
        m = Module()

        enable = stall_pipeline(m, self.i, self.o, LATENCY)
        with m.If(enable):
            for lane in range(self.lanes):
                for part in ("re", "im"):
                    y = self.i.payload[lane][part]
                    m.d.sync += self.o.payload[lane][part].eq(
                        Mux(~self.cfg.bypass & (y < 0), 0, y))
        return m
