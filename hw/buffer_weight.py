"""Weight tile buffer: DMA beats in, the Gauss terms of every block pair out per cycle."""

from amaranth.hdl import C, Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from fcircnn.arch.geometry import MAX_TAPS, SLOTS_PER_BEAT, engine_geometry
from fcircnn.arch.ports import weight_halves, weight_quarters

from .axi_dma_read import read_beat_layout
from .buffer_pingpong import PingPongBanks
from .common import check_block_size, check_channel_rule, check_positive, check_tiles, rejecting
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
    * Split load (built ``splittable``, used while the ``split`` input is high: a descriptor
      with :data:`~fcircnn.arch.descriptor.FLAG_WSPLIT`): the tile arrives in two halves at
      once (:func:`~fcircnn.arch.ports.weight_halves`), on ``i`` the first ``beats_per_tap/2``
      beats of every tap, on ``i1`` the rest of every tap, each in tap order and ending with
      ``last``. The halves write disjoint banks, so both streams take a beat a cycle; the tile
      commits once both ``last`` beats are in. A stream whose half is in waits (``ready`` low)
      until the tile commits. ``split`` must not change while a tile is partly loaded.
    * Quarter load (built ``quarterable``, used while ``quarter`` and ``split`` are high: a
      descriptor with :data:`~fcircnn.arch.descriptor.FLAG_WQUARTER`): the tile arrives in
      four quarters at once (:func:`~fcircnn.arch.ports.weight_quarters`), on ``i`` the first
      quarter of every tap's beats, on ``i2`` the second, on ``i1`` the third and on ``i3``
      the fourth, each in tap order and ending with ``last``; the four write disjoint banks,
      and the tile commits once all four ``last`` beats are in. ``quarter`` must not change
      while a tile is partly loaded.
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
    splittable : bool
        Build the second load stream ``i1`` and the ``split`` input (needs an even number of
        beats per tap).
    quarterable : bool
        Also build the load streams ``i2``, ``i3`` and the ``quarter`` input (needs
        ``splittable`` and a multiple of four beats per tap).

    Ports
    -----
    i : In(stream.Signature(read_beat_layout()))
    i1 : In(stream.Signature(read_beat_layout())); split : In(1) (only if ``splittable``)
    i2, i3 : In(stream.Signature(read_beat_layout())); quarter : In(1) (only if
    ``quarterable``)
    r_addr : In(range(taps)); r_en : In(1); r_release : In(1); r_valid : Out(1)
    w : Out(ArrayLayout(ArrayLayout(ArrayLayout(WEIGHT_TERMS, B/2), Tn/B), Tm/B))
    conflict : Out(1)
    """

    def __init__(self, Tn: int, Tm: int, *, B: int = 8, taps: int = 27,
                 splittable: bool = False, quarterable: bool = False):
        with rejecting(self):
            check_tiles(Tn=Tn, Tm=Tm)
            check_positive("taps", taps, MAX_TAPS)
            check_block_size(B)
            check_channel_rule("input_blocks", Tn, B)
            check_channel_rule("output_blocks", Tm, B)
            pairs, per_beat = (Tm // B) * (Tn // B), 16 // B
            if pairs % per_beat:
                raise ValueError(f"(Tm/B)*(Tn/B) must be a multiple of 16/B = {per_beat} "
                                 f"(whole block pairs per beat), not {pairs}")
            if not isinstance(splittable, bool):
                raise TypeError(f"splittable must be a bool, not {splittable!r}")
            if splittable:
                weight_halves(pairs // per_beat)
            if not isinstance(quarterable, bool):
                raise TypeError(f"quarterable must be a bool, not {quarterable!r}")
            if quarterable:
                if not splittable:
                    raise ValueError("quarterable needs splittable (a quarter load is a split "
                                     "load of four streams)")
                weight_quarters(pairs // per_beat)
        self.Tn, self.Tm, self.B, self.taps = Tn, Tm, B, taps
        self.splittable, self.quarterable = splittable, quarterable
        self.pairs, self.per_beat = pairs, per_beat
        self.word_layout = data.ArrayLayout(WEIGHT_TERMS, B // 2)
        w = data.ArrayLayout(data.ArrayLayout(self.word_layout, Tn // B), Tm // B)
        members = {
            "i": In(stream.Signature(read_beat_layout())),
            "r_addr": In(range(taps)), "r_en": In(1), "r_release": In(1), "r_valid": Out(1),
            "w": Out(w),
            "conflict": Out(1),
        }
        if splittable:
            members |= {"i1": In(stream.Signature(read_beat_layout())), "split": In(1)}
        if quarterable:
            members |= {"i2": In(stream.Signature(read_beat_layout())),
                        "i3": In(stream.Signature(read_beat_layout())), "quarter": In(1)}
        super().__init__(members)

    @classmethod
    def from_config(cls, accelerator, core) -> "WeightBuffer":
        """Size the buffer for ``core``: ``taps`` = the largest kernel volume it runs, as the
        layer engine sizes it (:func:`~fcircnn.hw.layer_engine.engine_geometry`); the split
        (quarter) load where the accelerator's ports split this core's weight tiles (read them
        in quarters)."""
        from fcircnn.arch.geometry import CoreGeometry
        from fcircnn.arch.ports import PortMap

        bpt = CoreGeometry.of(core, accelerator.block_size).weight_tile_beats(1)
        ports = PortMap(accelerator.axi_ports)
        return cls(core.tn, core.tm, B=accelerator.block_size,
                   taps=engine_geometry(accelerator, core).taps,
                   splittable=ports.splits_weights(bpt),
                   quarterable=ports.quarters_weights(bpt))

    @property
    def beats_per_tap(self) -> int:
        """Image beats per kernel tap."""
        return self.pairs // self.per_beat

    def _terms(self, m, beat_data, name):
        """The Gauss terms ``c``, ``c+d``, ``d`` of the 8 slots of a beat (the pre-add once per
        slot on the write side)."""
        beat = data.View(data.ArrayLayout(complex_layout(ACT_WIDTH), SLOTS_PER_BEAT), beat_data)
        terms = Signal(data.ArrayLayout(WEIGHT_TERMS, SLOTS_PER_BEAT), name=name)
        for s in range(SLOTS_PER_BEAT):
            re, im = beat[s].re, beat[s].im
            m.d.comb += [terms[s].c.eq(re), terms[s].d.eq(im), terms[s].cd.eq(re + im)]
        return terms

    def _counter(self, m, take, last, lo, hi, suffix):
        """Beat ``j`` in ``[lo, hi)`` of the current tap and the tap of a load stream: ``j``
        wraps to ``lo`` and the tap steps after ``hi - 1``; both restart after ``last``."""
        j = Signal(range(self.beats_per_tap), init=lo, name=f"j{suffix}")
        tap = Signal(range(self.taps), name=f"tap{suffix}")
        with m.If(take):
            with m.If(j == hi - 1):
                m.d.sync += [j.eq(lo), tap.eq(tap + 1)]
            with m.Else():
                m.d.sync += j.eq(j + 1)
            with m.If(last):
                m.d.sync += [j.eq(lo), tap.eq(0)]
        return j, tap

    def _one_load(self, m, store):
        """The load of a buffer that is not splittable: ``i`` writes every bank."""
        take = self.i.valid & store.w_ready
        m.d.comb += self.i.ready.eq(store.w_ready)
        j, tap = self._counter(m, take, self.i.payload.last, 0, self.beats_per_tap, "")
        with m.If(take & self.i.payload.last):
            m.d.comb += store.w_commit.eq(1)
        source = (self._terms(m, self.i.payload.data, "terms"), take, j, tap)
        return [source] * self.beats_per_tap

    def _split_loads(self, m, store):
        """The loads of a splittable buffer. Each stream writes its part of every tap's beats
        (``j`` counts in ``[lo, hi)``): ``i`` all of them, or with ``split`` the first half,
        with ``quarter`` the first quarter; ``i1`` with ``split`` the second half, with
        ``quarter`` the third quarter; ``i2`` and ``i3`` with ``quarter`` the second and the
        fourth. Returns per beat index of a tap the terms, take, beat counter and tap of the
        stream that writes it."""
        b = self.beats_per_tap
        lower, upper = weight_halves(b)
        quarterable = self.quarterable
        quarters = weight_quarters(b) if quarterable else None
        split = self.split
        quarter = self.quarter if quarterable else C(0, 1)
        streams = [self.i, self.i1] + ([self.i2, self.i3] if quarterable else [])
        active = [C(1, 1), split, quarter, quarter][: len(streams)]
        q = quarters[1].start if quarterable else upper.start
        bounds = [(0, Mux(quarter, q, Mux(split, upper.start, b))),
                  (upper.start, Mux(quarter, upper.start + q, b)),
                  (q, upper.start), (upper.start + q, b)]
        done = Signal(len(streams))  # per stream: its part of the tile is in, waiting
        ins, sources = [], []
        for k, (st, act, (lo, hi)) in enumerate(zip(streams, active, bounds, strict=False)):
            suffix = str(k) if k else ""
            ready = Signal(name=f"ready{suffix}")
            m.d.comb += [ready.eq(store.w_ready & ~done[k] & act), st.ready.eq(ready)]
            take = st.valid & ready
            last = take & st.payload.last
            hi_sig = Signal(range(b + 1), name=f"hi{suffix}")
            m.d.comb += hi_sig.eq(hi)
            j, tap = self._counter(m, take, st.payload.last, lo, hi_sig, suffix)
            ins.append(done[k] | last | ~act)
            sources.append((st.payload.data, take, j, tap))
        commit = Signal()
        m.d.comb += [commit.eq(Cat(*ins).all()), store.w_commit.eq(commit)]
        m.d.sync += done.eq(Mux(commit, 0, Cat(*(i & a for i, a in zip(ins, active,
                                                                        strict=True)))))
        # Which stream writes each part of a tap's beats (the first option whose condition
        # holds, else i): one multiplexer per part.
        if quarterable:
            parts = [(quarters[0], []), (quarters[1], [(quarter, 2)]),
                     (quarters[2], [(split, 1)]), (quarters[3], [(quarter, 3), (split, 1)])]
        else:
            parts = [(lower, []), (upper, [(split, 1)])]
        loads = []
        for n, (beats, options) in enumerate(parts):
            loads += [self._part_source(m, sources, options, n)] * len(beats)
        return loads

    def _part_source(self, m, sources, options, n):
        """The terms, take, beat counter and tap of part ``n``: the source of the first
        ``(condition, stream)`` of ``options`` that holds, else stream 0's."""
        data_, take, j, tap = sources[0]
        if options:
            sel = [Signal.like(v, name=f"part{n}_{name}") for v, name in
                   ((data_, "data"), (take, "take"), (j, "j"), (tap, "tap"))]
            chosen = list(sources[0])
            for cond, k in reversed(options):
                chosen = [Mux(cond, a, b) for a, b in zip(sources[k], chosen, strict=True)]
            m.d.comb += [s.eq(c) for s, c in zip(sel, chosen, strict=True)]
            data_, take, j, tap = sel
        return (self._terms(m, data_, f"terms{n}"), take, j, tap)

    def elaborate(self, platform):
        m = Module()
        m.submodules.store = store = PingPongBanks(banks=self.pairs, width=self.word_layout.size,
                                                   depth=self.taps)
        half = self.B // 2
        loads = self._split_loads(m, store) if self.splittable else self._one_load(m, store)
        for b in range(self.pairs):
            e = b % self.per_beat
            terms, take, j, tap = loads[b // self.per_beat]
            word = data.View(self.word_layout, store.w_data[b])
            for k in range(half):
                m.d.comb += word[k].eq(terms[e * half + k])
            m.d.comb += [store.w_addr[b].eq(tap),
                         store.w_en[b].eq(take & (j == b // self.per_beat))]

        m.d.comb += [store.r_addr.eq(self.r_addr), store.r_en.eq(self.r_en),
                     store.r_release.eq(self.r_release), self.r_valid.eq(store.r_valid),
                     self.conflict.eq(store.conflict)]
        qn = self.Tn // self.B
        for p in range(self.Tm // self.B):
            for q in range(qn):
                m.d.comb += self.w[p][q].as_value().eq(store.r_data[p * qn + q])
        return m
