"""Post-unit stage 0 of a dense layer on an irfft's slots: lane 0 of each block's inverse
transform, ``u = Y0.re + Y0.im + 2 * sum_{k>=1} Yk.re``, into the block's first part."""

from amaranth.hdl import Module, Mux, Signal, signed
from amaranth.lib import data

from fcircnn.arch.transforms import irfft_lane0_weights

from .common import check_block_lanes, stall_pipeline
from .post_cbn import ACC_WIDTH, cbn_input_layout
from .post_stage import PostStage

__all__ = ["LATENCY", "IrfftLane0", "lane0_config_layout"]

#: Cycles from an accepted input beat to its output beat (no stall).
LATENCY = 1

#: Runtime configuration of :class:`IrfftLane0` (static during a layer).
#: ``enable``: replace the accumulators by the lane-0 sums (else they pass unchanged).
lane0_config_layout = data.StructLayout({"enable": 1})


class IrfftLane0(PostStage):
    """Lane 0 of the inverse transform of each block's accumulators, for a dense layer that
    reads an irfft's deferred slots (``lane0`` layout, ``docs/golden.md``).

    Each beat holds ``lanes`` output slots with their post parameters
    (:func:`~fcircnn.hw.post_cbn.cbn_input_layout`); a block is ``B/2`` consecutive slots of
    the beat. With ``cfg.enable`` the first slot's real accumulator becomes ``u = sum_k
    (w_re[k] * acc.re[k] + w_im[k] * acc.im[k])`` over the block's slots (weights
    :func:`~fcircnn.arch.transforms.irfft_lane0_weights`: 1 and 1 for slot 0, 2 and 0 for each
    other slot) and every other accumulator part of the block 0; the post parameters pass
    unchanged. Bit-exact with :func:`fcircnn.models.timedomain.irfft_lane0` (the compiler
    proves ``|u| < 2**31``, ``ResolvedLayer.accumulator_bound``; wider sums wrap modulo
    ``2**32``, outside the contract).

    Contract
    --------
    * Latency :data:`LATENCY` (1) cycle, initiation interval 1: one output register,
      ``i.ready = ~o.valid | o.ready`` (full back-pressure).
    * Without ``cfg.enable`` the payload passes unchanged (same latency).
    * Adders only, no multiplier; ``cfg`` static while beats are in flight.

    Parameters
    ----------
    lanes : int
        Slots per beat, 1..64, a multiple of ``B/2``.
    B : int
        Block size, 4, 8 or 16.

    Ports
    -----
    i : In(stream.Signature(cbn_input_layout(lanes)))
    o : Out(stream.Signature(cbn_input_layout(lanes)))
    cfg : In(lane0_config_layout)
    """

    def __init__(self, lanes=8, B=8):
        super().__init__(lanes, cbn_input_layout, cbn_input_layout, lane0_config_layout,
                         lambda: check_block_lanes(lanes, B))
        self.B = B

    def elaborate(self, platform):
        m = Module()

        enable = stall_pipeline(m, self.i, self.o, LATENCY)
        half = self.B // 2
        w_re, w_im = irfft_lane0_weights(self.B)
        on = self.cfg.enable
        with m.If(enable):
            m.d.sync += self.o.payload.eq(self.i.payload)
            for first in range(0, self.lanes, half):
                u = Signal(signed(ACC_WIDTH), name=f"u_{first // half}")
                terms = []
                for k in range(half):
                    acc = self.i.payload[first + k].acc
                    terms += [acc.re * w_re[k]] + ([acc.im * w_im[k]] if w_im[k] else [])
                m.d.comb += u.eq(sum(terms[1:], terms[0]))
                for k in range(half):
                    dst = self.o.payload[first + k].acc
                    src = self.i.payload[first + k].acc
                    m.d.sync += [dst.re.eq(Mux(on, u if k == 0 else 0, src.re)),
                                 dst.im.eq(Mux(on, 0, src.im))]
        return m
