"""Input (activation) tile buffer: DMA beats in, ``Td`` voxels x ``Tn/2`` slots out per cycle."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from fcircnn.arch.geometry import (
    MAX_KERNEL,
    SLOTS_PER_BEAT,
    CoreGeometry,
    EngineGeometry,
    box_span,
    engine_geometry,
    input_buffer_geometry,
    lanes_take_rows,
    row_lane,
    spreads,
)
from fcircnn.arch.ports import PortMap, input_halves, input_quarters

from .axi_dma_read import read_beat_layout
from .buffer_pingpong import PingPongBanks
from .common import (
    check_block_size,
    check_channel_rule,
    check_positive,
    check_tiles,
    first_of,
    mul_const,
    mul_small,
    rejecting,
)
from .complex_mul_pair import ACT_WIDTH, complex_layout
from .engine_walk import RowLanes

__all__ = ["InputBuffer", "input_box_layout"]


def _vec3(name, value):
    if isinstance(value, int) and not isinstance(value, bool):
        value = (value, value, value)
    try:
        value = tuple(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer or three integers, not {value!r}") from None
    if len(value) != 3:
        raise ValueError(f"{name} must have three entries (d, r, c), not {len(value)}")
    for v in value:
        check_positive(name, v, MAX_KERNEL)
    return value


def input_box_layout(groups: int, depth: int, height: int, width: int) -> data.StructLayout:
    """Size of the box being loaded: slot ``groups``, ``d``, ``h``, ``w`` voxel counts."""
    return data.StructLayout({
        "groups": range(1, groups + 1), "d": range(1, depth + 1),
        "h": range(1, height + 1), "w": range(1, width + 1),
    })


class InputBuffer(wiring.Component):
    """Double-buffered input tile of ``Tn`` channels, banked so the PE array reads ``Td`` voxels
    x ``Tn/2`` slots every cycle without conflict.

    Organisation: ``Td x G`` banks (``G = ceil(Tn/16)`` slot groups of 8 slots), 128-bit words.
    Bank ``(v, g)`` serves PE voxel lane ``v``: it holds, for slot group ``g``, the ``Kd`` input
    planes that lane reads (planes ``v*sd .. v*sd + Kd - 1`` of the tile, ``sd`` the depth
    stride), each ``Hin x Win`` words at ``kd * Hin * Win + h * Win + w``
    (``Hin = (Tr-1)*sr + Kr``, ``Win = (Tc-1)*sc + Kc``). Planes shared by two lanes are stored
    in both banks (``Td*Kd / ((Td-1)*sd + Kd)`` replication), which is what makes a read of all
    lanes at one address conflict-free: every bank has its own read port and each lane reads
    only its own banks. Every bank has its own write port too, so one DMA beat is written to all
    the banks that need it in the same cycle.

    Contract
    --------
    * Load: configure ``box`` (groups, d, h, w of the box the DMA delivers: ``d <= (Td-1)*sd +
      Kd``, ``h <= Hin``, ``w <= Win``) before the first beat and ``stride_d`` (the depth
      stride of the layer, ``1 <= stride_d <= sd``; lane ``v`` stores tile plane ``p`` as its
      plane ``p - v*stride_d``) at least one cycle before it (it is registered); beats arrive
      on ``i`` in NC/8DHW8 box order (group, d, h, w, :class:`~fcircnn.hw.axi_dma_read.AxiDmaRead`'s
      ``o``); each beat is written one cycle after it is taken, and the beat with ``last``
      commits the tile with that write (``r_valid`` two cycles after it is taken, if the
      other half is free). ``i.ready`` is low while both halves are full (the DMA waits) and
      in the cycle after a ``last`` beat.
    * Compute: while ``r_valid``, ``r_en`` with ``r_addr = kd*Hin*Win + h*Win + w`` (tile
      coordinates of lane 0's input voxel; lane ``v`` reads plane ``v*stride_d + kd``) gives
      ``act[v][s]``, slot ``s`` of the tile's ``Tn/2`` (group ``s // 8``; when ``Tn < 16`` the
      slots ``r_sub*Tn/2 ..`` of group 0) one cycle later, held while ``r_en`` is low.
      ``r_release`` frees the tile.
    * Split load (built ``splittable``, used while the ``split`` input is high: a descriptor
      with :data:`~fcircnn.arch.descriptor.FLAG_ISPLIT`): the tile arrives in two halves of
      its slot groups at once (:func:`~fcircnn.arch.ports.input_halves`), on ``i`` the lower
      ``G/2`` groups (box ``box``), on ``i1`` the upper ``G/2`` (box ``box1``, its groups
      counted from the first upper one), each in box order and ending with ``last``. The
      halves write disjoint banks, so both streams take a beat a cycle; the tile commits once
      both ``last`` beats are written. A stream whose half is in waits (``ready`` low) until
      the tile commits. ``split`` must not change while a tile is partly loaded.
    * Quartered load (built ``quarterable``, used while ``quarter`` is high, and ``split``
      with it: a descriptor with :data:`~fcircnn.arch.descriptor.FLAG_IQUARTER`): the tile
      arrives in four quarters of its slot groups at once
      (:func:`~fcircnn.arch.ports.input_quarters`): the first on ``i`` (``box``), the second
      on ``i2`` (``box2``), the third on ``i1`` (``box1``), the fourth on ``i3`` (``box3``),
      each with its groups counted from the quarter's first; it commits once all four
      ``last`` beats are written.
    * Row lanes (built ``row_lanes``, used while ``row_shift > 0``: a descriptor with
      :data:`~fcircnn.arch.descriptor.FLAG_ROWLANES`, ``R = 2**row_shift`` row groups of
      ``Td / R`` depths): lane ``v`` is depth ``v mod (Td/R)`` of row group ``u = v div
      (Td/R)`` and stores tile plane ``p`` as its plane ``p - (v mod (Td/R))*stride_d`` and
      box row ``h`` as its row ``h - u*row_step`` (``row_step``: the input rows between two
      row groups' first output rows, ``Rh * sr``), if ``>= 0``; the compute reads every lane
      at its own rows' coordinates. Both are registered like ``stride_d``.
    * Spreading read (built ``spreadable``, used while ``spread`` is high: a descriptor with
      :data:`~fcircnn.arch.descriptor.FLAG_SPREAD`): the tile arrives as one slot group per
      voxel (box ``groups`` 1), slot ``j`` holding in its real part the real channel of block
      ``j``; the compute reads every slot ``s`` of block ``j = s // (B/2)`` as that value,
      ``x + i*x`` at ``s % (B/2) == 0`` and ``x`` (imaginary part 0) elsewhere: the slots of
      the ``spread`` map. ``spread`` is static during a layer.
    * ``conflict`` (sticky) rises if either side breaks the handshake; never otherwise.

    Parameters
    ----------
    Tn, Td, Tr, Tc : int
        Channel tile and output tile sizes (``Tn`` a multiple of ``B``).
    B : int
        Block size (4, 8, 16).
    kernel, stride : int or (d, r, c)
        Largest kernel and stride the buffer must hold a tile for.
    splittable : bool
        Build the second load stream ``i1``, its box ``box1`` and the ``split`` input (needs
        an even number ``G`` of slot groups).
    quarterable : bool
        Also build the streams ``i2`` and ``i3``, their boxes and the ``quarter`` input (needs
        ``splittable`` and a multiple of four slot groups).
    row_lanes : bool
        Build the inputs ``row_shift`` and ``row_step`` (needs ``Td`` a power of two > 1).
    spreadable : bool
        Build the ``spread`` input and the spreading read (needs
        :func:`~fcircnn.arch.geometry.spreads` of ``Tn`` and ``B``).

    Ports
    -----
    i : In(stream.Signature(read_beat_layout()))
    box : In(input_box_layout(...))
    stride_d : In(range(1, sd + 1)), reset value ``sd``
    r_addr : In(range(depth)); r_en : In(1); r_sub : In(range(subs)); r_release : In(1)
    i1 : In(stream.Signature(read_beat_layout())); box1 : In(input_box_layout(...));
    split : In(1) (only if ``splittable``)
    i2, i3 : In(stream.Signature(read_beat_layout())); box2, box3 : In(input_box_layout(...));
    quarter : In(1) (only if ``quarterable``)
    row_shift : In(range(log2(Td) + 1)); row_step : In(range(Hin + 1)) (only if ``row_lanes``)
    spread : In(1) (only if ``spreadable``)
    r_valid : Out(1); act : Out(ArrayLayout(ArrayLayout(complex int8, Tn/2), Td))
    conflict : Out(1)
    """

    def __init__(self, Tn: int, Td: int, Tr: int, Tc: int, *, B: int = 8, kernel=3, stride=1,
                 splittable: bool = False, quarterable: bool = False,
                 row_lanes: bool = False, spreadable: bool = False):
        with rejecting(self):
            check_tiles(Tn=Tn, Td=Td, Tr=Tr, Tc=Tc)
            check_block_size(B)
            check_channel_rule("input_blocks", Tn, B)
            self.kernel = _vec3("kernel", kernel)
            self.stride = _vec3("stride", stride)
            if not isinstance(splittable, bool):
                raise TypeError(f"splittable must be a bool, not {splittable!r}")
            if splittable:
                input_halves(-(-Tn // 16))
            if not isinstance(quarterable, bool):
                raise TypeError(f"quarterable must be a bool, not {quarterable!r}")
            if quarterable:
                if not splittable:
                    raise ValueError("quarterable needs splittable")
                input_quarters(-(-Tn // 16))
            if not isinstance(row_lanes, bool):
                raise TypeError(f"row_lanes must be a bool, not {row_lanes!r}")
            if row_lanes and not lanes_take_rows(Td):
                raise ValueError(f"row_lanes needs Td a power of two > 1, not {Td}")
            if not isinstance(spreadable, bool):
                raise TypeError(f"spreadable must be a bool, not {spreadable!r}")
            if spreadable and not spreads(Tn, B):
                raise ValueError(f"spreadable needs Tn >= 16 and Tn/B <= {SLOTS_PER_BEAT} "
                                 f"blocks, not Tn = {Tn} at B = {B}")
        self.splittable, self.quarterable, self.row_lanes = splittable, quarterable, row_lanes
        self.spreadable = spreadable
        self.Tn, self.Td, self.Tr, self.Tc, self.B = Tn, Td, Tr, Tc, B
        (kd, kr, kc), (sd, sr, sc) = self.kernel, self.stride
        self.groups = -(-Tn // 16)
        self.tile_depth, self.height, self.width = (box_span(t, st, k) for t, st, k in (
            (Td, sd, kd), (Tr, sr, kr), (Tc, sc, kc)))
        self.plane = self.height * self.width
        self.depth = kd * self.plane
        self.subs = max(1, 16 // Tn) if Tn < 16 else 1
        self.banks = {(v, g): v * self.groups + g for v in range(Td) for g in range(self.groups)}
        # Conflict-free by construction: every (lane, group) read in one cycle has its own bank.
        assert len(set(self.banks.values())) == Td * self.groups
        act = data.ArrayLayout(data.ArrayLayout(complex_layout(ACT_WIDTH), Tn // 2), Td)
        box = input_box_layout(self.groups, self.tile_depth, self.height, self.width)
        members = {
            "i": In(stream.Signature(read_beat_layout())),
            "box": In(box),
            "stride_d": In(range(1, self.stride[0] + 1), init=self.stride[0]),
            "r_addr": In(range(self.depth)), "r_en": In(1), "r_sub": In(range(self.subs)),
            "r_release": In(1), "r_valid": Out(1), "act": Out(act),
            "conflict": Out(1),
        }
        if splittable:
            members |= {"i1": In(stream.Signature(read_beat_layout())), "box1": In(box),
                        "split": In(1)}
        if quarterable:
            members |= {"i2": In(stream.Signature(read_beat_layout())), "box2": In(box),
                        "i3": In(stream.Signature(read_beat_layout())), "box3": In(box),
                        "quarter": In(1)}
        if row_lanes:
            members |= {"row_shift": In(range(Td.bit_length())),
                        "row_step": In(range(self.height + 1))}
        if spreadable:
            members["spread"] = In(1)
        super().__init__(members)

    @classmethod
    def of(cls, core: CoreGeometry, geometry: EngineGeometry, *,
           splittable: bool = False, quarterable: bool = False) -> InputBuffer:
        """The input buffer of a core's engine built for ``geometry``
        (:func:`~fcircnn.arch.geometry.input_buffer_geometry`: ``Td`` lanes of ``Kd``
        planes, or one lane of the tile's whole depth span; row lanes where the geometry has
        them and the lanes run them, :meth:`~fcircnn.hw.engine_walk.RowLanes.enabled`; the
        spreading read where it has it)."""
        ib = input_buffer_geometry(core, geometry)
        return cls(core.tn, ib.lanes, core.tr, core.tc, B=core.B, kernel=ib.kernel,
                   stride=ib.stride, splittable=splittable, quarterable=quarterable,
                   row_lanes=RowLanes.enabled(ib.lanes, geometry.row_lanes),
                   spreadable=geometry.spread)

    @classmethod
    def from_config(cls, accelerator, core) -> InputBuffer:
        """The input buffer the engine of ``core`` of an accelerator builds: sized for the
        layers the accelerator places on the core
        (:func:`~fcircnn.arch.geometry.engine_geometry`, FC and GAP layers reading their
        whole input map as one box); the split load where the accelerator's ports split
        this core's input boxes (:meth:`~fcircnn.arch.ports.PortMap.splits_inputs`), the
        quartered load where they read them in quarters
        (:meth:`~fcircnn.arch.ports.PortMap.quarters_inputs`)."""
        cg = CoreGeometry.of(core, accelerator.block_size)
        ports = PortMap(accelerator.axi_ports)
        return cls.of(cg, engine_geometry(accelerator, core),
                      splittable=ports.splits_inputs(cg.in_groups),
                      quarterable=ports.quarters_inputs(cg.in_groups))

    def lanes_of_plane(self, d: int, stride_d: int | None = None) -> list[tuple[int, int]]:
        """``(lane, kd)`` pairs that store tile plane ``d`` for a layer of depth stride
        ``stride_d`` (default: the buffer's largest, ``stride[0]``)."""
        kd, sd = self.kernel[0], self.stride[0] if stride_d is None else stride_d
        return [(v, d - v * sd) for v in range(self.Td) if 0 <= d - v * sd < kd]

    def _row_offsets(self, m):
        """Per lane its depth in the row group (``lane_off``, replacing ``v * stride_d``), its
        row group's first box row (``row_off``) and that row's first word (``row_words``),
        registered from ``row_shift``, ``row_step`` and ``stride_d``."""
        Td, sd_max = self.Td, self.stride[0]
        self.row_off, self.row_words = [], []
        for v in range(Td):
            row_off = Signal(range(Td * self.height + 1), name=f"row_off{v}")
            row_words = Signal(range(Td * self.plane + 1), name=f"row_words{v}")
            with m.Switch(self.row_shift):
                for s in range(1, Td.bit_length()):
                    dv, u = row_lane(Td, 1 << s, v)
                    with m.Case(s):
                        m.d.sync += [self.lane_off[v].eq(mul_small(Const(dv), self.stride_d,
                                                                   sd_max)),
                                     row_off.eq(mul_const(self.row_step, u))]
                with m.Default():
                    m.d.sync += row_off.eq(0)
            m.d.sync += row_words.eq(mul_const(row_off, self.width))
            self.row_off.append(row_off)
            self.row_words.append(row_words)

    def _stream(self, m, i, box, ready, suffix):
        """The write side of one load stream, two stages: box-order counters compute each
        beat's lane hits and addresses, which are written one cycle later from registers (the
        path from the counters through the plane-base table and the address adder ends in a
        register, not in the block RAMs' write-address decode). Returns the take, the group
        counter, the registered data, and per lane the registered address and the hit."""
        kd_max = self.kernel[0]
        S = lambda shape, n: Signal(shape, name=f"{n}{suffix}")  # noqa: E731
        g = S(range(self.groups + 1), "g")
        d = S(range(self.tile_depth + 1), "d")
        h = S(range(self.height + 1), "h")
        w = S(range(self.width + 1), "w")
        hw = S(range(self.plane + 1), "hw")  # h * Win + w
        row = S(range(self.plane + 1), "row")  # h * Win
        w_data = S(128, "w_data")
        take = i.valid & ready
        m.d.comb += i.ready.eq(ready)
        with m.If(take):
            m.d.sync += w_data.eq(i.payload.data)
        kd_bits = max(1, (kd_max - 1).bit_length())
        lanes = []
        for v in range(self.Td):
            # Lane v stores tile plane d as its plane kd = d - v*stride_d, if 0 <= kd < Kd.
            kd = Signal(range(-v * self.stride[0], self.tile_depth + 1), name=f"kd{v}{suffix}")
            m.d.comb += kd.eq(d - self.lane_off[v])
            hit = (kd >= 0) & (kd < kd_max)
            if self.row_lanes:  # its row group's rows from the first (h >= u * row_step)
                hit &= h >= self.row_off[v]
            # kd * (Hin*Win) from a table of constants: no multiplier.
            plane_base = Signal(range(self.depth), name=f"plane_base{v}{suffix}")
            with m.Switch(kd[:kd_bits]):
                for k in range(kd_max):
                    with m.Case(k):
                        m.d.comb += plane_base.eq(k * self.plane)
            w_addr = Signal(range(self.depth), name=f"w_addr{v}{suffix}")
            with m.If(take):
                m.d.sync += w_addr.eq(plane_base + hw - self.row_words[v] if self.row_lanes
                                      else plane_base + hw)
            lanes.append((w_addr, hit))
        with m.If(take):
            last_w, last_h, last_d = w == box.w - 1, h == box.h - 1, d == box.d - 1
            with m.If(~last_w):
                m.d.sync += [w.eq(w + 1), hw.eq(hw + 1)]
            with m.Else():
                m.d.sync += [w.eq(0)]
                with m.If(~last_h):
                    m.d.sync += [h.eq(h + 1), row.eq(row + self.width), hw.eq(row + self.width)]
                with m.Else():
                    m.d.sync += [h.eq(0), row.eq(0), hw.eq(0)]
                    with m.If(~last_d):
                        m.d.sync += d.eq(d + 1)
                    with m.Else():
                        m.d.sync += [d.eq(0), g.eq(g + 1)]
            with m.If(i.payload.last):
                m.d.sync += [g.eq(0), d.eq(0), h.eq(0), w.eq(0), hw.eq(0), row.eq(0)]
        return take, g, w_data, lanes

    def _commit(self, m, store):
        """The streams' ready and the commit: the registered write of a ``last`` beat
        commits the tile, once every part is in (both halves while ``split``, all four
        quarters while ``quarter``). Returns the ready of each stream (``i``, ``i1``, ``i2``,
        ``i3``: as many as are built)."""
        n = 4 if self.quarterable else 2 if self.splittable else 1
        pend = Signal(n)  # per stream: its last beat is being written
        if n == 1:
            ready = store.w_ready & ~pend[0]
            m.d.sync += pend[0].eq(self.i.valid & ready & self.i.payload.last)
            m.d.comb += store.w_commit.eq(pend[0])
            return (ready,)
        done = Signal(n)  # per stream: its part is in, waiting for the others
        # Which streams carry a part of the tile: i always, i1 while split, i2 and i3 while
        # quarter.
        active = Cat(1, self.split, *((self.quarter, self.quarter) if n == 4 else ()))
        streams = [self.i, self.i1, *((self.i2, self.i3) if n == 4 else ())]
        readies = [store.w_ready & ~pend[k] & ~done[k] & active[k] for k in range(n)]
        m.d.sync += pend.eq(Cat(*(st.valid & r & st.payload.last
                                  for st, r in zip(streams, readies, strict=True))))
        commit = (pend.any() & ((pend | done | ~active) == (1 << n) - 1))
        m.d.comb += store.w_commit.eq(commit)
        m.d.sync += done.eq(Mux(commit, 0, (pend | done) & active))
        return tuple(readies)

    def _sources(self, k, parts):
        """The streams that fill part ``k`` of the groups (of ``parts``: 1, the two halves or
        the four quarters) by the load mode, most specific first: ``(condition, stream)``
        pairs (streams 0 ``i``, 1 ``i1``, 2 ``i2``, 3 ``i3``), the last unconditional."""
        if parts == 1 or k == 0:
            return [(None, 0)]
        if parts == 2:  # the upper half: i1 while split
            return [(self.split, 1), (None, 0)]
        return {1: [(self.quarter, 2), (None, 0)],
                2: [(self.split, 1), (None, 0)],
                3: [(self.quarter, 3), (self.split, 1), (None, 0)]}[k]

    def _hit(self, stream, j, v, gg):
        """Whether stream ``j``'s beat taken now writes lane ``v``'s bank of group ``gg``
        (its groups counted from its first: 0, ``G/2``, ``G/4``, ``3G/4`` for ``i``, ``i1``,
        ``i2``, ``i3``)."""
        take, g, _, lanes = stream
        start = (0, self.groups // 2, self.groups // 4, 3 * self.groups // 4)[j]
        return take & lanes[v][1] & (g == gg - start)

    @staticmethod
    def _pick(m, options, name):
        """A signal equal to the first option whose condition holds (``(condition, value)``
        pairs, the last unconditional)."""
        value = first_of(options[:-1], options[-1][1])
        if len(options) == 1:
            return value
        sig = Signal.like(options[-1][1], name=name)
        m.d.comb += sig.eq(value)
        return sig

    def elaborate(self, platform):
        m = Module()
        m.submodules.store = store = PingPongBanks(banks=self.Td * self.groups, width=128,
                                                   depth=self.depth)
        G, Td, sd_max = self.groups, self.Td, self.stride[0]
        # v*stride_d per lane, a register (stride_d is static during a layer; the layer's
        # stride, not the largest: lane v's first output voxel reads plane v*stride_d).
        self.lane_off = []
        for v in range(Td):
            lane_off = Signal(range(v * sd_max + 1), name=f"lane_off{v}", init=v * sd_max)
            m.d.sync += lane_off.eq(mul_small(Const(v), self.stride_d, sd_max))
            self.lane_off.append(lane_off)
        if self.row_lanes:
            self._row_offsets(m)
        # The commit moves with the last write; no beat is taken in the cycle it is pending,
        # so the half it fills is still ``w_ready`` when the registered write lands.
        readies = self._commit(m, store)
        streams = [self._stream(m, self.i, self.box, readies[0], "")]
        if self.splittable:
            streams.append(self._stream(m, self.i1, self.box1, readies[1], "1"))
        if self.quarterable:
            streams += [self._stream(m, self.i2, self.box2, readies[2], "2"),
                        self._stream(m, self.i3, self.box3, readies[3], "3")]
        # Each bank's source by the load mode, per part of the groups (the quarters: each
        # quarter's banks take one stream in each mode); one data and one address mux per
        # lane and part, not per bank.
        parts = (input_quarters(G) if self.quarterable
                 else input_halves(G) if self.splittable else (range(G),))
        w_en = Signal(Td * G)
        for k, part in enumerate(parts):
            sources = self._sources(k, len(parts))
            data_ = self._pick(m, [(c, streams[j][2]) for c, j in sources], f"p{k}_data")
            for v in range(Td):
                addr = self._pick(m, [(c, streams[j][3][v][0]) for c, j in sources],
                                  f"p{k}_addr{v}")
                for gg in part:
                    b = self.banks[(v, gg)]
                    hits = [(c, self._hit(streams[j], j, v, gg)) for c, j in sources]
                    m.d.sync += w_en[b].eq(first_of(hits[:-1], hits[-1][1]))
                    m.d.comb += [store.w_data[b].eq(data_), store.w_en[b].eq(w_en[b]),
                                 store.w_addr[b].eq(addr)]

        # Read side.
        m.d.comb += [store.r_addr.eq(self.r_addr), store.r_en.eq(self.r_en),
                     store.r_release.eq(self.r_release), self.r_valid.eq(store.r_valid),
                     self.conflict.eq(store.conflict)]
        sub = Signal(range(self.subs))
        with m.If(self.r_en):
            m.d.sync += sub.eq(self.r_sub)
        n = self.Tn // 2
        for v in range(Td):
            words = [data.View(data.ArrayLayout(complex_layout(ACT_WIDTH), SLOTS_PER_BEAT),
                               store.r_data[self.banks[(v, gg)]]) for gg in range(G)]
            for s in range(n):
                if self.subs > 1:
                    with m.Switch(sub):
                        for k in range(self.subs):
                            with m.Case(k):
                                m.d.comb += self.act[v][s].eq(words[0][k * n + s])
                elif self.spreadable:
                    self._spread_read(m, self.act[v][s], words, s)
                else:
                    m.d.comb += self.act[v][s].eq(words[s // SLOTS_PER_BEAT][s % SLOTS_PER_BEAT])
        return m

    def _spread_read(self, m, act, words, s):
        """Slot ``s`` of a lane's read: the word's own, or while ``spread`` slot ``s`` of the
        spread block ``j = s // (B/2)``, from slot ``j`` of the lane's first group."""
        half = self.B // 2
        own, x = words[s // SLOTS_PER_BEAT][s % SLOTS_PER_BEAT], words[0][s // half].re
        with m.If(self.spread):
            m.d.comb += [act.re.eq(x), act.im.eq(x if s % half == 0 else 0)]
        with m.Else():
            m.d.comb += act.eq(own)
