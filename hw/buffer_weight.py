"""Weight tile buffer: DMA beats in, the Gauss terms of every block pair out per cycle."""

from amaranth.hdl import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from fcircnn.arch.geometry import MAX_TAPS, engine_geometry
from fcircnn.models.layout import SLOTS_PER_BEAT

from .axi_dma_read import read_beat_layout
from .buffer_pingpong import PingPongBanks
from .common import check_block_size, check_positive, rejecting
from .complex_mul_pair import ACT_WIDTH, WEIGHT_TERMS, complex_layout

__all__ = ["WeightBuffer"]


class WeightBuffer(wiring.Component):
    """Double-buffered weight tile of ``Tm x Tn`` channels, one bank per block pair.

    Organisation: ``P = (Tm/B) x (Tn/B)`` banks, bank ``p*(Tn/B) + q`` holding block pair
    ``(p, q)``; a word is the ``B/2`` weight slots of one kernel tap as
    :data:`~fcircnn.hw.complex_mul_pair.WEIGHT_TERMS` (``c``, ``c+d``, ``d``, INT9 each), so one
    read at the tap's address delivers everything :class:`~fcircnn.hw.pe_array.PEArray` needs in
    a cycle (its ``w`` field) with no bank conflict: each bank is read by exactly one block pair.
    The pre-add ``c + d`` is done once per slot on the write side (8 adders for a beat) instead of
    on the ``P*B/2`` read lanes.

    Weight image (the compiler writes it; one tile of ``taps`` kernel taps, contiguous, read
    with :func:`fcircnn.gen.dma_plan.plan_block`): tap-major, then block pair ``j = p*(Tn/B) +
    q``, then bin slot ``k``; each slot two int8 bytes ``re`` (= ``c``), ``im`` (= ``d``), eight
    slots per 128-bit beat. A beat therefore holds ``16/B`` consecutive block pairs of one tap,
    which requires ``P`` to be a multiple of ``16/B``.

    Contract
    --------
    * Load: beats on ``i`` in image order; the beat with ``last`` commits the tile (a tile is
      ``taps_used * P*B/16`` beats, ``taps_used <= taps``). ``i.ready`` is low while both halves
      are full.
    * Compute: while ``r_valid``, ``r_en`` with ``r_addr = tap`` gives ``w[p][q][k]`` one cycle
      later, held while ``r_en`` is low; ``r_release`` frees the tile.
    * ``conflict`` (sticky) rises only if a side breaks the handshake.

    Parameters
    ----------
    Tn, Tm : int
        Channel tiles, multiples of ``B``.
    B : int
        4, 8 or 16.
    taps : int
        Kernel taps per tile (the largest ``Kd*Kr*Kc`` of the layers run), 1..:data:`MAX_TAPS`.

    Ports
    -----
    i : In(stream.Signature(read_beat_layout()))
    r_addr : In(range(taps)); r_en : In(1); r_release : In(1); r_valid : Out(1)
    w : Out(ArrayLayout(ArrayLayout(ArrayLayout(WEIGHT_TERMS, B/2), Tn/B), Tm/B))
    conflict : Out(1)
    """

    def __init__(self, Tn: int, Tm: int, *, B: int = 8, taps: int = 27):
        with rejecting(self):
            check_positive("Tn", Tn, 1024)
            check_positive("Tm", Tm, 1024)
            check_positive("taps", taps, MAX_TAPS)
            check_block_size(B)
            for name, value in (("Tn", Tn), ("Tm", Tm)):
                if value % B:
                    raise ValueError(f"{name} must be a multiple of B ({B}), not {value}")
            pairs, per_beat = (Tm // B) * (Tn // B), 16 // B
            if pairs % per_beat:
                raise ValueError(f"(Tm/B)*(Tn/B) must be a multiple of 16/B = {per_beat} "
                                 f"(whole block pairs per beat), not {pairs}")
        self.Tn, self.Tm, self.B, self.taps = Tn, Tm, B, taps
        self.pairs, self.per_beat = pairs, per_beat
        self.word_layout = data.ArrayLayout(WEIGHT_TERMS, B // 2)
        w = data.ArrayLayout(data.ArrayLayout(self.word_layout, Tn // B), Tm // B)
        super().__init__({
            "i": In(stream.Signature(read_beat_layout())),
            "r_addr": In(range(taps)), "r_en": In(1), "r_release": In(1), "r_valid": Out(1),
            "w": Out(w),
            "conflict": Out(1),
        })

    @classmethod
    def from_config(cls, accelerator, core) -> "WeightBuffer":
        """Size the buffer for ``core``: ``taps`` = the largest kernel volume it runs, as the
        layer engine sizes it (:func:`~fcircnn.hw.layer_engine.engine_geometry`)."""
        return cls(core.tn, core.tm, B=accelerator.block_size,
                   taps=engine_geometry(accelerator, core).taps)

    @property
    def beats_per_tap(self) -> int:
        """Image beats per kernel tap."""
        return self.pairs // self.per_beat

    def elaborate(self, platform):
        m = Module()
        m.submodules.store = store = PingPongBanks(banks=self.pairs, width=self.word_layout.size,
                                                   depth=self.taps)
        half = self.B // 2
        beat = data.View(data.ArrayLayout(complex_layout(ACT_WIDTH), SLOTS_PER_BEAT),
                         self.i.payload.data)
        # Gauss terms of the 8 slots of the beat.
        terms = Signal(data.ArrayLayout(WEIGHT_TERMS, SLOTS_PER_BEAT))
        for s in range(SLOTS_PER_BEAT):
            re, im = beat[s].re, beat[s].im
            m.d.comb += [terms[s].c.eq(re), terms[s].d.eq(im), terms[s].cd.eq(re + im)]

        j = Signal(range(self.beats_per_tap))
        tap = Signal(range(self.taps))
        take = self.i.valid & store.w_ready
        m.d.comb += self.i.ready.eq(store.w_ready)
        for b in range(self.pairs):
            e = b % self.per_beat
            word = data.View(self.word_layout, store.w_data[b])
            for k in range(half):
                m.d.comb += word[k].eq(terms[e * half + k])
            m.d.comb += [store.w_addr[b].eq(tap),
                         store.w_en[b].eq(take & (j == b // self.per_beat))]
        with m.If(take):
            with m.If(j == self.beats_per_tap - 1):
                m.d.sync += [j.eq(0), tap.eq(tap + 1)]
            with m.Else():
                m.d.sync += j.eq(j + 1)
            with m.If(self.i.payload.last):
                m.d.sync += [j.eq(0), tap.eq(0)]
                m.d.comb += store.w_commit.eq(1)

        m.d.comb += [store.r_addr.eq(self.r_addr), store.r_en.eq(self.r_en),
                     store.r_release.eq(self.r_release), self.r_valid.eq(store.r_valid),
                     self.conflict.eq(store.conflict)]
        qn = self.Tn // self.B
        for p in range(self.Tm // self.B):
            for q in range(qn):
                m.d.comb += self.w[p][q].as_value().eq(store.r_data[p * qn + q])
        return m
