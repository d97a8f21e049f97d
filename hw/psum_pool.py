"""Max pooling on the partial sums: a window's accumulators reduced before the post chain."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from fcircnn.arch.geometry import SLOTS_PER_BEAT

from .buffer_psum import psum_layout
from .common import check_channel_rule, check_positive, check_tiles, rejecting

__all__ = ["PartialSumPool", "sign_group_layout"]


def sign_group_layout() -> data.ArrayLayout:
    """The CBN multipliers' signs of one slot group: per slot ``re``, ``im`` (1: negative)."""
    return data.ArrayLayout(data.StructLayout({"re": 1, "im": 1}), SLOTS_PER_BEAT)


class PartialSumPool(wiring.Component):
    """The windowed max of the post chain's output, taken on the accumulators instead.

    The post chain maps each accumulator part ``a`` (``re`` or ``im`` of one slot) through
    ``crelu(quantize(a * mult + bias))`` with the slot's own ``mult`` and ``bias`` per part
    (no residual: a fused pool never has one, :func:`~fcircnn.arch.geometry.pool_fuses`). That
    map is non-decreasing in ``a`` where ``mult >= 0`` and non-increasing where ``mult < 0``, so
    the max of its outputs over a window is its output of the window's largest accumulator part
    (``mult >= 0``) or smallest (``mult < 0``), bit for bit. This component keeps that
    accumulator part per lane, slot and part over the words of a window: the drain then sends
    one pooled word's beats through the post chain instead of every voxel's.

    Contract
    --------
    * ``sign_en``: the signs of slot group ``sign_group`` (:func:`sign_group_layout`, taken from
      its post records' ``mult``) are stored; they hold until overwritten.
    * ``take``: the word on ``acc`` enters the window; with ``first`` it starts a new window
      (``pooled`` becomes ``acc``), else each part of ``pooled`` becomes the larger of the two
      (the smaller where its slot's sign is set). ``pooled`` changes the cycle after ``take``.

    Parameters
    ----------
    Tm : int
        Output channels of a word (``Tm/2`` complex slots, ``Tm/16`` slot groups), a multiple
        of 16.
    lanes : int
        Depth lanes of a word (:func:`~fcircnn.hw.buffer_psum.psum_layout`).

    Ports
    -----
    acc : In(psum_layout(Tm, lanes)); take : In(1); first : In(1)
    sign_en : In(1); sign_group : In(range(Tm/16)); signs : In(sign_group_layout())
    pooled : Out(psum_layout(Tm, lanes))
    """

    def __init__(self, Tm: int, lanes: int):
        with rejecting(self):
            check_tiles(Tm=Tm)
            check_positive("lanes", lanes, 16)
            check_channel_rule("output_slot_groups", Tm)
        self.Tm, self.lanes = Tm, lanes
        self.groups = Tm // 16
        super().__init__({
            "acc": In(psum_layout(Tm, lanes)), "take": In(1), "first": In(1),
            "sign_en": In(1), "sign_group": In(range(max(self.groups, 2))),
            "signs": In(sign_group_layout()),
            "pooled": Out(psum_layout(Tm, lanes)),
        })

    def elaborate(self, platform):
        m = Module()
        slots = self.Tm // 2
        negative = Signal(data.ArrayLayout(sign_group_layout(), self.groups))
        with m.If(self.sign_en):
            for g in range(self.groups):
                with m.If(self.sign_group == g):
                    m.d.sync += negative[g].eq(self.signs)
        with m.If(self.take):
            for lane in range(self.lanes):
                for s in range(slots):
                    sign = negative[s // SLOTS_PER_BEAT][s % SLOTS_PER_BEAT]
                    for part in ("re", "im"):
                        x = self.acc[lane][s][part]
                        kept = self.pooled[lane][s][part]
                        # x wins where it is larger (smaller with a negative multiplier)
                        wins = self.first | ((x > kept) ^ sign[part])
                        m.d.sync += kept.eq(Mux(wins, x, kept))
        return m
