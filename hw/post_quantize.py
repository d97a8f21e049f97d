"""Post-unit stage 2: rounding shift and clamp, ``y = clip(floor((t + round) / 2**shift))``."""

from amaranth.hdl import Module, Mux, Signal, signed
from amaranth.lib import data

from fcircnn.arch.geometry import INT8_MAX

from .common import stall_pipeline
from .post_cbn import SHIFT_WIDTH, T_WIDTH, cbn_output_layout
from .post_stage import PostStage, check_lanes

__all__ = [
    "INT8_MAX",
    "LATENCY",
    "Quantize",
    "quantize_config_layout",
    "quantize_input_layout",
    "slot_layout",
]

#: Cycles from an accepted input beat to its output beat (no stall).
LATENCY = 2

# Range of the intermediate t >> (shift - 1) after the first clamp.
_V_MIN, _V_MAX = -256, 255
_V_WIDTH = 10


def quantize_input_layout(lanes):
    """Payload of :class:`Quantize`'s input: per lane ``t`` (signed 48) and ``shift`` (0..47)."""
    return cbn_output_layout(lanes)


def slot_layout(lanes):
    """Payload of int8 slots: ``lanes`` slots, each ``{"re", "im"}`` signed 8-bit.

    The output of :class:`Quantize`, and input and output of the CReLU and CMaxPool stages.
    """
    check_lanes(lanes)
    return data.ArrayLayout(data.StructLayout({"re": signed(8), "im": signed(8)}), lanes)


#: Runtime configuration of :class:`Quantize` (static during a layer).
#: ``bypass``: the per-slot shift is ignored (taken as 0): ``y = clip(t, -127, 127)``.
quantize_config_layout = data.StructLayout({"bypass": 1})


class Quantize(PostStage):
    """Quantizer post-unit: ``y = clip(floor((t + round) / 2**shift), -127, 127)``.

    ``round = 2**(shift - 1)`` if ``shift > 0`` else 0 (round half up), per slot and part with the
    part's own ``shift`` (0..47) from the payload. The clamp's lower bound is always -127; the
    CReLU stage that follows raises it to 0 (``quantize(lo=-127)`` then ``crelu`` equals
    ``quantize(lo=0)``, as in the golden model). Bit-exact with
    :func:`fcircnn.models.spectral.quantize` for any int48 ``t`` and shift 0..47; shift values
    48..63 are outside the contract.

    Contract
    --------
    * Latency :data:`LATENCY` (2) cycles, initiation interval 1: register after the arithmetic
      shift by ``shift - 1`` and a first clamp, register after the rounding (``(v + 1) >> 1``)
      and the final clamp, so the wide rounding add is not needed. One shared enable,
      ``i.ready = ~o.valid | o.ready`` (full back-pressure, nothing lost or duplicated).
    * ``cfg.bypass``: the shift is taken as 0, i.e. a saturating pass-through ``clip(t)``.
    * No multipliers; ``cfg`` static while beats are in flight.

    Parameters
    ----------
    lanes : int
        Slots per beat, 1..64.

    Ports
    -----
    i : In(stream.Signature(quantize_input_layout(lanes)))
    o : Out(stream.Signature(slot_layout(lanes)))
    cfg : In(quantize_config_layout)
    """

    def __init__(self, lanes=8):
        super().__init__(lanes, quantize_input_layout, slot_layout, quantize_config_layout)

    def elaborate(self, platform):
        m = Module()

        enable = stall_pipeline(m, self.i, self.o, LATENCY)

        # floor((t + 2**(s-1)) / 2**s) == (floor(t / 2**(s-1)) + 1) >> 1 for s > 0, so the
        # rounding add moves behind the shifter. Stage 1: v = t >> (s-1) (arithmetic), clamped
        # to [-256, 255]; (v + 1) >> 1 is monotonic and maps those bounds beyond [-127, 127], so
        # the early clamp does not change the result. Stage 2: round, clamp to [-127, 127].
        for lane in range(self.lanes):
            src = self.i.payload[lane]
            dst = self.o.payload[lane]
            for part in ("re", "im"):
                shift = src.shift[part]
                rounds = Signal(name=f"rounds_{lane}_{part}")
                m.d.comb += rounds.eq(~self.cfg.bypass & (shift != 0))
                shifted = Signal(signed(T_WIDTH), name=f"shifted_{lane}_{part}")
                m.d.comb += shifted.eq(src.t[part] >> Mux(rounds, (shift - 1)[:SHIFT_WIDTH], 0))
                v = Signal(signed(_V_WIDTH), name=f"v_{lane}_{part}")
                rounds_r = Signal(name=f"rounds_r_{lane}_{part}")
                y = Signal(signed(_V_WIDTH), name=f"y_{lane}_{part}")
                m.d.comb += y.eq(Mux(rounds_r, (v + 1) >> 1, v))
                with m.If(enable):
                    m.d.sync += [
                        v.eq(Mux(shifted > _V_MAX, _V_MAX, Mux(shifted < _V_MIN, _V_MIN, shifted))),
                        rounds_r.eq(rounds),
                        dst[part].eq(Mux(y > INT8_MAX, INT8_MAX, Mux(y < -INT8_MAX, -INT8_MAX, y))),
                    ]
        return m
