"""Accumulator tile buffer: ``Td x Tm/2`` complex int32 sums per voxel, double-buffered."""

from amaranth.hdl import Module
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .buffer_pingpong import PingPongBanks
from .common import check_channel_rule, check_positive, check_tiles, rejecting
from .complex_mul_pair import complex_layout

__all__ = ["AccumulatorBuffer", "acc_in_layout", "acc_layout"]

SLOTS_PER_WORD = 8


def acc_layout(Tm: int, Td: int, acc_width: int = 32) -> data.ArrayLayout:
    """``[Td][Tm/2]`` complex ``acc_width``-bit sums (the PE array's output beat)."""
    return data.ArrayLayout(data.ArrayLayout(complex_layout(acc_width), Tm // 2), Td)


def acc_in_layout(Tm: int, Td: int, Tr: int, Tc: int, acc_width: int = 32) -> data.StructLayout:
    """One write: the sums of voxel ``addr = r*Tc + c`` of every lane; ``last`` commits."""
    return data.StructLayout({"addr": range(Tr * Tc), "acc": acc_layout(Tm, Td, acc_width),
                              "last": 1})


class AccumulatorBuffer(wiring.Component):
    """Double-buffered int32 accumulators of an output tile, between the PE array and the
    post-units, so the array starts the next tile while the post-units drain this one.

    Organisation: ``Td x G`` banks (``G = ceil(Tm/16)`` groups of 8 slots), a word is 8 complex
    sums (``16 * acc_width`` bits), ``Tr*Tc`` words per half at ``r*Tc + c``. A write (one PE
    array output beat) and a read (all lanes of one voxel, for lane-parallel post-units) both
    touch exactly one word per bank: no conflict by construction.

    Contract
    --------
    * Fill: ``i`` writes ``acc`` at voxel ``addr``; the write with ``last`` commits the tile;
      ``i.ready`` is low while both halves are full.
    * Drain: while ``r_valid``, ``r_en`` with ``r_addr = r*Tc + c`` gives that voxel's ``acc``
      one cycle later (held while ``r_en`` is low); ``r_release`` frees the tile.
    * ``conflict`` (sticky) rises only if a side breaks the handshake.

    Parameters
    ----------
    Tm, Td, Tr, Tc : int
        Output channel tile (a multiple of 8) and output tile sizes.
    acc_width : int
        Accumulator width, 32..48.

    Ports
    -----
    i : In(stream.Signature(acc_in_layout(Tm, Td, Tr, Tc, acc_width)))
    r_addr : In(range(Tr*Tc)); r_en, r_release : In(1); r_valid : Out(1)
    acc : Out(acc_layout(Tm, Td, acc_width)); conflict : Out(1)
    """

    def __init__(self, Tm: int, Td: int, Tr: int, Tc: int, *, acc_width: int = 32):
        with rejecting(self):
            check_tiles(Tm=Tm, Td=Td, Tr=Tr, Tc=Tc)
            check_positive("acc_width", acc_width, 48)
            check_channel_rule("output_half_groups", Tm)
            if acc_width < 32:
                raise ValueError(f"acc_width must be in 32..48, not {acc_width}")
        self.Tm, self.Td, self.Tr, self.Tc, self.acc_width = Tm, Td, Tr, Tc, acc_width
        self.groups = -(-Tm // 16)
        self.depth = Tr * Tc
        super().__init__({
            "i": In(stream.Signature(acc_in_layout(Tm, Td, Tr, Tc, acc_width))),
            "r_addr": In(range(self.depth)), "r_en": In(1), "r_release": In(1),
            "r_valid": Out(1), "acc": Out(acc_layout(Tm, Td, acc_width)),
            "conflict": Out(1),
        })

    @classmethod
    def from_config(cls, core, **kwargs) -> "AccumulatorBuffer":
        """The accumulator buffer of a :class:`~fcircnn.models.config.CoreConfig`."""
        return cls(core.tm, core.td, core.tr, core.tc, **kwargs)

    def elaborate(self, platform):
        m = Module()
        G, Td, slots = self.groups, self.Td, self.Tm // 2
        word = data.ArrayLayout(complex_layout(self.acc_width), SLOTS_PER_WORD)
        m.submodules.store = store = PingPongBanks(banks=Td * G, width=word.size,
                                                   depth=self.depth)
        take = self.i.valid & store.w_ready
        m.d.comb += [self.i.ready.eq(store.w_ready),
                     store.w_commit.eq(take & self.i.payload.last),
                     store.r_addr.eq(self.r_addr), store.r_en.eq(self.r_en),
                     store.r_release.eq(self.r_release), self.r_valid.eq(store.r_valid),
                     self.conflict.eq(store.conflict)]
        for v in range(Td):
            for g in range(G):
                b = v * G + g
                wv = data.View(word, store.w_data[b])
                rv = data.View(word, store.r_data[b])
                for s in range(SLOTS_PER_WORD):
                    k = g * SLOTS_PER_WORD + s
                    if k < slots:
                        m.d.comb += [wv[s].eq(self.i.payload.acc[v][k]),
                                     self.acc[v][k].eq(rv[s])]
                m.d.comb += [store.w_addr[b].eq(self.i.payload.addr), store.w_en[b].eq(take)]
        return m
