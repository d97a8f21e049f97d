"""Post-unit stage 5 of a time-domain layer: the integer rfft of each block of time lanes,
times its slot's multiplier (``docs/golden.md``, "The integer rfft")."""

from collections import defaultdict

from amaranth.hdl import Module, Mux, Signal, signed
from amaranth.lib import data

from fcircnn.arch.transforms import RFFT_BITS, RFFT_SLOTS, rfft_twiddles

from .common import check_block_lanes, mul_const, stall_pipeline
from .post_cbn import SHIFT_WIDTH, cbn_output_layout
from .post_quantize import slot_layout
from .post_stage import PostStage

__all__ = ["DSP_PER_LANE", "LATENCY", "RfftSum", "rfft_config_layout"]

#: Cycles from an accepted input beat to its output beat (no stall).
LATENCY = 2
#: DSP48E2 per lane: one multiply ``v * mult`` (26 x 16 bits signed) per part.
DSP_PER_LANE = 2
#: Width of the signed multiplier of each slot position and part.
MULT_WIDTH = 16

#: Runtime configuration of :class:`RfftSum` (static during a layer): ``enable``; ``mult``,
#: the multiplier of slot position ``k`` of a block and part ``p`` at index ``p *
#: RFFT_SLOTS + k`` (signed 16-bit); ``shift``, the rounding shift of every slot (0..47), for
#: the quantizer that follows.
rfft_config_layout = data.StructLayout({
    "enable": 1,
    "mult": data.ArrayLayout(signed(MULT_WIDTH), 2 * RFFT_SLOTS),
    "shift": SHIFT_WIDTH,
})


def _terms(coefficients):
    """``coefficients[n]`` grouped by magnitude: ``{|c|: [(n, sign), ...]}`` (0 left out)."""
    groups = defaultdict(list)
    for n, c in enumerate(coefficients):
        if c:
            groups[abs(c)].append((n, 1 if c > 0 else -1))
    return groups


class RfftSum(PostStage):
    """The integer rfft of each block of ``B`` int8 time lanes, each output part times its
    multiplier: ``t = mult[part, k] * sum_n lane[n] * T[part][k][n]`` (the twiddles of
    :func:`~fcircnn.arch.transforms.rfft_twiddles`), with the shift for the quantizer.

    A beat holds ``lanes`` slots; a block is ``B/2`` consecutive slots, its lane ``n`` part
    ``n % 2`` of slot ``n // 2``. The twiddle sums are constants (shifts and adds: the lanes
    with the same twiddle magnitude summed first), the product by ``mult`` one DSP48E2 per
    part. Followed by :class:`~fcircnn.hw.post_quantize.Quantize`, this is
    :func:`fcircnn.models.timedomain.rfft_int` then the contract's requantization, bit for
    bit. Without ``cfg.enable`` the slots pass as ``t`` (sign-extended) with shift 0, which
    the quantizer passes unchanged.

    Contract
    --------
    * Latency :data:`LATENCY` (2) cycles, initiation interval 1: the twiddle sums, then the
      products; ``i.ready = ~o.valid | o.ready`` (full back-pressure).
    * DSP48E2: :data:`DSP_PER_LANE` (2) per lane; ``cfg`` static while beats are in flight.

    Parameters
    ----------
    lanes : int
        Slots per beat, 1..64, a multiple of ``B/2``.
    B : int
        Block size, 4, 8 or 16.

    Ports
    -----
    i : In(stream.Signature(slot_layout(lanes)))
    o : Out(stream.Signature(cbn_output_layout(lanes)))
    cfg : In(rfft_config_layout)
    """

    def __init__(self, lanes=8, B=8):
        super().__init__(lanes, slot_layout, cbn_output_layout, rfft_config_layout,
                         lambda: check_block_lanes(lanes, B))
        self.B = B

    def elaborate(self, platform):
        m = Module()

        enable = stall_pipeline(m, self.i, self.o, LATENCY)
        half = self.B // 2
        table = rfft_twiddles(self.B)
        on = self.cfg.enable
        for first in range(0, self.lanes, half):
            lane = [self.i.payload[first + n // 2]["re" if n % 2 == 0 else "im"]
                    for n in range(self.B)]
            for k in range(half):
                for p, part in enumerate(("re", "im")):
                    # Stage 1: the twiddle sum (or the slot part itself), registered.
                    v = Signal(signed(RFFT_BITS), name=f"v_{first + k}_{part}")
                    total = None
                    for c, members in sorted(_terms(table[p][k]).items()):
                        group = sum((x if s > 0 else -x for x, s in
                                     ((lane[n], s) for n, s in members)), start=0)
                        term = mul_const(group, c)
                        total = term if total is None else total + term
                    src = self.i.payload[first + k][part]
                    # Stage 2: the product with the slot's multiplier (one DSP48E2).
                    dst = self.o.payload[first + k]
                    mult = self.cfg.mult[p * RFFT_SLOTS + k]
                    with m.If(enable):
                        m.d.sync += [
                            v.eq(Mux(on, total, src)),
                            dst.t[part].eq(Mux(on, v * mult, v)),
                            dst.shift[part].eq(Mux(on, self.cfg.shift, 0)),
                        ]
        return m
