"""Post-unit stage 4: CMaxPool, a windowed max over a 3D map on re and im independently."""

from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for

from fcircnn.arch.geometry import LUTRAM_MAX_DEPTH
from fcircnn.arch.geometry import MAX_POOL_MAP as MAX_MAP_SIZE
from fcircnn.arch.geometry import MAX_POOL_WINDOW as MAX_WINDOW

from .common import rejecting
from .post_quantize import slot_layout
from .post_stage import check_lanes
from .skid_buffer import LATENCY as SKID_LATENCY
from .skid_buffer import SkidBuffer

__all__ = [
    "LATENCY",
    "MAX_GROUPS",
    "MAX_MAP_SIZE",
    "MAX_WINDOW",
    "CMaxPool",
    "carry_layout",
    "check_carry",
    "check_max_groups",
    "check_max_size",
    "maxpool_config",
    "maxpool_config_layout",
]

#: Cycles from the beat completing a window to its output beat: one per axis stage, one for
#: the output register slice.
LATENCY = 3 + SKID_LATENCY
#: Largest elaboration-time number of interleaved slot groups.
MAX_GROUPS = 256

# A value below every int8 slot part that can win: stands for padded (excluded) voxels. Every
# window holds at least one real voxel (padding < window), and a real -128 would give the same max.
_MINUS_INF = -128


def maxpool_config_layout(max_size, max_groups=1):
    """Runtime configuration of :class:`CMaxPool` (static during a layer).

    Fields (arrays are indexed by axis: 0 = d, 1 = h, 2 = w):

    ``bypass``
        1: the stream passes through unchanged (combinationally).
    ``window``
        Window per axis, 1..3.
    ``stride``
        Stride per axis, 1..3.
    ``padding``
        Padding per axis, ``0 <= padding < window`` (padded voxels never win).
    ``size``
        Input map size per axis, ``1 <= size <= max_size`` and ``size + 2*padding >= window``.
    ``groups``
        Slot groups per voxel, interleaved (``1..max_groups``), see :class:`CMaxPool`.
    """
    width = bits_for(max(max_size))
    axes3 = 3
    return data.StructLayout({
        "bypass": 1,
        "groups": unsigned(bits_for(max_groups)),
        "window": data.ArrayLayout(unsigned(2), axes3),
        "stride": data.ArrayLayout(unsigned(2), axes3),
        "padding": data.ArrayLayout(unsigned(2), axes3),
        "size": data.ArrayLayout(unsigned(width), axes3),
    })


def maxpool_config(max_size, size, window=(1, 1, 1), stride=None, padding=(0, 0, 0), *,
                   groups=1, max_groups=1, bypass=False):
    """A validated value of :func:`maxpool_config_layout` (for the control unit and tests).

    ``size``, ``window``, ``stride`` (default: ``window``) and ``padding`` are ``(d, h, w)``
    triples. Raises :class:`ValueError` naming the field and the allowed values.
    """
    if not isinstance(groups, int) or not 1 <= groups <= max_groups:
        raise ValueError(f"pool groups must be in 1..max_groups ({max_groups}), not {groups!r}")
    stride = window if stride is None else stride
    fields = {"size": size, "window": window, "stride": stride, "padding": padding}
    for name, value in fields.items():
        if len(value) != 3 or not all(isinstance(v, int) for v in value):
            raise ValueError(f"pool {name} must be three integers (d, h, w), not {value!r}")
    for axis in range(3):
        k, s, p, n = window[axis], stride[axis], padding[axis], size[axis]
        if not 1 <= k <= MAX_WINDOW:
            raise ValueError(
                f"pool window must be in 1..{MAX_WINDOW} per axis, not {tuple(window)}")
        if not 1 <= s <= MAX_WINDOW:
            raise ValueError(
                f"pool stride must be in 1..{MAX_WINDOW} per axis, not {tuple(stride)}")
        if not 0 <= p < k:
            raise ValueError(
                f"pool padding must be in 0..window-1 per axis, not {tuple(padding)} for window "
                f"{tuple(window)}")
        if not 1 <= n <= max_size[axis]:
            raise ValueError(
                f"pool size must be in 1..max_size {tuple(max_size)} per axis, not {tuple(size)}")
        if n + 2 * p < k:
            raise ValueError(
                f"pool size {tuple(size)} plus padding {tuple(padding)} on both sides must cover "
                f"the window {tuple(window)}")
    return {"bypass": int(bool(bypass)), "groups": groups,
            **{k: list(v) for k, v in fields.items()}}


def check_max_groups(max_groups):
    """Validate the ``max_groups`` parameter: an integer 1..256."""
    if not isinstance(max_groups, int) or isinstance(max_groups, bool):
        raise TypeError(f"max_groups must be an integer, not {max_groups!r}")
    if not 1 <= max_groups <= MAX_GROUPS:
        raise ValueError(f"max_groups must be in 1..{MAX_GROUPS}, not {max_groups}")


def check_max_size(max_size):
    """Validate the ``max_size`` parameter: three integers ``(D, H, W)``, each 1..1024."""
    if (not isinstance(max_size, tuple | list) or len(max_size) != 3
            or not all(isinstance(n, int) and not isinstance(n, bool) for n in max_size)):
        raise TypeError(f"max_size must be a tuple of three integers (D, H, W), not {max_size!r}")
    if not all(1 <= n <= MAX_MAP_SIZE for n in max_size):
        raise ValueError(
            f"max_size must have every axis in 1..{MAX_MAP_SIZE}, not {tuple(max_size)}")


def check_carry(carry):
    """Validate the ``carry`` parameter: three non-negative integers ``(d, h, w)``, the words
    of each axis' carry memory, all 0 (no carry) or all positive."""
    if (not isinstance(carry, tuple | list) or len(carry) != 3
            or not all(isinstance(n, int) and not isinstance(n, bool) for n in carry)):
        raise TypeError(f"carry must be three integers (d, h, w), not {carry!r}")
    if (any(carry) and not all(n > 0 for n in carry)) or min(carry) < 0:
        raise ValueError(f"carry must be all 0 or all positive, not {tuple(carry)}")


def carry_layout(carry):
    """Per-map controls of :class:`CMaxPool`'s carry memories (``carry``: their words per
    axis). Arrays are indexed by axis (0 = d, 1 = h, 2 = w).

    ``restart``
        Strobe, while no beat of a map is in the pool: the next map's carried lines start at
        ``base`` (read and written in the order the map's sweeps reach them).
    ``use``
        Per axis: the position before the map's first (the padding of a 3-wide window with
        padding 1) is the carried line, not padding.
    ``save``
        Per axis: the map's last position is written to the carry memory.
    ``base``
        Per axis: the carry memory's word of the map's first line item.
    """
    width = bits_for(max(max(carry) - 1, 1))
    return data.StructLayout({
        "restart": 1,
        "use": data.ArrayLayout(1, 3),
        "save": data.ArrayLayout(1, 3),
        "base": data.ArrayLayout(unsigned(width), 3),
    })


def _axis_beat_layout(lanes):
    return data.StructLayout({"data": slot_layout(lanes), "last": 1})


def _axis_config_layout(size_width):
    return data.StructLayout({
        "size": unsigned(size_width),
        "window": unsigned(2),
        "stride": unsigned(2),
        "padding": unsigned(2),
    })


class _AxisPool(wiring.Component):
    """Max pooling along one axis of a stream of "lines" (internal to :class:`CMaxPool`).

    The input is a sequence of sweeps; a sweep is ``size`` positions along the axis, a position is
    a line of ``L`` beats (items), the last beat of each line flagged ``last``. ``L`` is the same
    for every line (learned from the beats, ``L <= line_max``). For every window end the stage
    emits the line of per-item maxima over the window's positions; after the ``size`` real
    positions it inserts virtual (padded, -inf) positions while windows still end in the trailing
    padding. Output ``last`` marks the last beat of the last output line of a sweep.

    History: the two previous lines, in two memories of ``line_max`` words written in turn by
    position parity (in registers if ``line_max == 1``). Latency 1, initiation interval 1 except
    for the cycles of virtual positions, where the input is held.

    Carry (``carry_depth > 0``): with ``use`` the position before a sweep's first (position
    -1, which a 3-wide window with padding 1 reaches) is a line read from the carry memory
    instead of padding; with ``save`` each sweep's last position is written to it. Reads and
    writes each walk the memory one item at a time from ``base``, loaded by ``restart``.
    """

    def __init__(self, lanes, size_max, line_max, carry_depth=0):
        self.lanes = lanes
        self.size_max = size_max
        self.line_max = line_max
        self.carry_depth = carry_depth
        self._size_width = bits_for(size_max)
        ports = {
            "i": In(stream.Signature(_axis_beat_layout(lanes))),
            "o": Out(stream.Signature(_axis_beat_layout(lanes))),
            "cfg": In(_axis_config_layout(self._size_width)),
        }
        if carry_depth:
            ports |= {"restart": In(1), "use": In(1), "save": In(1),
                      "base": In(range(carry_depth))}
        super().__init__(ports)

    def _carry(self, m, real, pos, size_m1, src_data, take_carry):
        """The carry memory's reads (``take_carry``: a real beat at position 1 of a sweep that
        uses the carry) and writes (a real beat at the last position of a sweep that saves
        it); returns the read data (``None`` without a carry)."""
        if not self.carry_depth:
            return None
        m.d.comb += take_carry.eq(real & self.use & (pos == 1))
        put = real & self.save & (pos == size_m1)
        return _carry_memory(m, slot_layout(self.lanes), self.carry_depth, self.restart,
                             self.base, take_carry, put, src_data)

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        layout = slot_layout(self.lanes)
        width = bits_for(self.size_max + 2 * MAX_WINDOW)
        inner_width = bits_for(max(self.line_max - 1, 1))

        pos = Signal(width)
        next_end = Signal(width)
        inner = Signal(inner_width)
        inner_last = Signal(inner_width)  # index of the last item of a line (L - 1)

        # Derived from cfg in registers (cfg is static while a map is in flight and set at least
        # one cycle before its first beat): the window-end arithmetic below starts from them.
        # They follow cfg during reset too, so a cfg held through reset is ready at once.
        size = Signal(width)
        size_m1 = Signal(width, reset_less=True)  # last real position
        limit = Signal(width, reset_less=True)  # last padded position: size - 1 + padding
        first_end = Signal(width, reset_less=True)
        m.d.comb += size.eq(cfg.size)
        m.d.sync += [
            size_m1.eq(cfg.size - 1),
            limit.eq(cfg.size - 1 + cfg.padding),
            first_end.eq(cfg.window - 1 - cfg.padding),
        ]

        # Source: the input, or a virtual (padding) beat after the last real position.
        virtual = Signal()
        src_valid = Signal()
        src_data = Signal(layout)
        src_last = Signal()
        m.d.comb += virtual.eq(pos >= size)
        with m.If(virtual):
            m.d.comb += [
                src_valid.eq(1),
                src_data.eq(layout.const([{"re": _MINUS_INF, "im": _MINUS_INF}] * self.lanes)),
                src_last.eq(inner == inner_last),
            ]
        with m.Else():
            m.d.comb += [
                src_valid.eq(self.i.valid),
                src_data.eq(self.i.payload.data),
                src_last.eq(self.i.payload.last),
            ]

        cur_end = Signal(width)
        is_end = Signal()
        step_end = Signal(width + 1)
        m.d.comb += [
            cur_end.eq(Mux(pos == 0, first_end, next_end)),
            is_end.eq(pos == cur_end),
            step_end.eq(cur_end + cfg.stride),
        ]

        # Stage register.
        s_valid = Signal()
        s_end = Signal()
        s_last = Signal()
        s_use1 = Signal()
        s_use2 = Signal()
        s_parity = Signal()
        s_carried = Signal()  # hist2 is the carried line (position -1)
        s_data = Signal(layout)
        hist1 = Signal(layout)  # the line at position - 1
        hist2 = Signal(layout)  # the line at position - 2

        free = Signal()
        load = Signal()
        m.d.comb += [
            free.eq(~s_valid | ~s_end | self.o.ready),
            load.eq(free & src_valid),
            self.i.ready.eq(free & ~virtual),
        ]
        take_carry = Signal()  # the beat at position 1 reads position -1's item from the carry
        carried = self._carry(m, load & ~virtual, pos, size_m1, src_data, take_carry)
        with m.If(free):
            m.d.sync += s_valid.eq(src_valid)
        with m.If(load):
            m.d.sync += [
                s_data.eq(src_data),
                s_end.eq(is_end),
                s_last.eq(is_end & (step_end > limit) & src_last),
                s_use1.eq((cfg.window >= 2) & (pos >= 1)),
                s_use2.eq((cfg.window >= 3) & ((pos >= 2) | take_carry)),
                s_carried.eq(take_carry),
                s_parity.eq(pos[0]),
            ]
            with m.If(src_last):
                m.d.sync += inner.eq(0)
                with m.If(~virtual):
                    m.d.sync += inner_last.eq(inner)
                with m.If((pos >= size_m1) & (Mux(is_end, step_end, cur_end) > limit)):
                    m.d.sync += pos.eq(0)  # sweep done
                with m.Else():
                    m.d.sync += [
                        pos.eq(pos + 1),
                        next_end.eq(Mux(is_end, step_end, cur_end)),
                    ]
            with m.Else():
                m.d.sync += inner.eq(inner + 1)

        if self.line_max == 1:
            reg1 = Signal(layout)
            reg2 = Signal(layout)
            with m.If(load):
                m.d.sync += [
                    hist1.eq(reg1), hist2.eq(reg2), reg1.eq(src_data), reg2.eq(reg1),
                ]
        else:
            rd = []
            for parity in range(2):
                m.submodules[f"line{parity}"] = mem = Memory(
                    shape=layout, depth=self.line_max, init=[], attrs=_style(self.line_max))
                wr = mem.write_port()
                rp = mem.read_port(transparent_for=())
                m.d.comb += [
                    wr.addr.eq(inner),
                    wr.data.eq(src_data),
                    wr.en.eq(load & (pos[0] == parity)),
                    rp.addr.eq(inner),
                    rp.en.eq(load),
                ]
                rd.append(rp.data)
            # The line written at this parity two positions ago is position - 2.
            m.d.comb += [
                hist2.eq(Mux(s_parity, rd[1], rd[0])),
                hist1.eq(Mux(s_parity, rd[0], rd[1])),
            ]

        m.d.comb += [
            self.o.valid.eq(s_valid & s_end),
            self.o.payload.last.eq(s_last),
        ]
        if carried is not None:
            third = Signal(layout)
            m.d.comb += third.eq(Mux(s_carried, carried, hist2))
            hist2 = third
        for lane in range(self.lanes):
            for part in ("re", "im"):
                v0 = s_data[lane][part]
                v1 = Mux(s_use1, hist1[lane][part], _MINUS_INF)
                v2 = Mux(s_use2, hist2[lane][part], _MINUS_INF)
                v01 = Mux(v0 > v1, v0, v1)
                m.d.comb += self.o.payload.data[lane][part].eq(Mux(v01 > v2, v01, v2))
        return m


def _style(depth):
    """A memory's attributes: deeper than :data:`~fcircnn.arch.geometry.LUTRAM_MAX_DEPTH`,
    block RAM (what Vivado infers; Yosys needs it said)."""
    return {"ram_style": "block"} if depth > LUTRAM_MAX_DEPTH else {}


def _carry_memory(m, layout, depth, restart, base, take, put, data):
    """The carry memory of an axis stage: ``take`` reads the next item (its data the next
    cycle, held until the next read), ``put`` writes ``data`` as the next item; ``restart``
    sets both to ``base``. Returns the read data."""
    m.submodules.carry = mem = Memory(shape=layout, depth=depth, init=[], attrs=_style(depth))
    rd = mem.read_port(transparent_for=())
    wr = mem.write_port()
    rd_addr, wr_addr = Signal(range(depth)), Signal(range(depth))
    with m.If(restart):
        m.d.sync += [rd_addr.eq(base), wr_addr.eq(base)]
    with m.Else():
        with m.If(take):
            m.d.sync += rd_addr.eq(rd_addr + 1)
        with m.If(put):
            m.d.sync += wr_addr.eq(wr_addr + 1)
    m.d.comb += [rd.addr.eq(rd_addr), rd.en.eq(take),
                 wr.addr.eq(wr_addr), wr.data.eq(data), wr.en.eq(put)]
    return rd.data


class CMaxPool(wiring.Component):
    """CMaxPool post-unit: max over 3D windows, re and im independently, padding excluded.

    Voxel ordering
    --------------
    Input: the voxels of a ``D x H x W`` map (``cfg.size``) in raster order (``d`` outermost,
    then ``h``, then ``w``). Each voxel is ``cfg.groups`` consecutive beats, beat ``g`` carrying
    slots ``g*lanes .. g*lanes + lanes - 1`` of the voxel (voxel major, slot group minor: the
    order in which the PE array's ``Tm/2`` accumulators of a voxel arrive, ``lanes`` per beat).
    With ``groups = 1`` a map of more than ``lanes`` slots can equally be sent as one map per
    slot group (slot-group major, the NC/8DHW8 DDR order with ``lanes = 8``). Maps follow each
    other back to back; the stage counts the beats itself, no framing signal is needed.

    Output: the pooled voxels, ``Do x Ho x Wo`` with ``n_o = (n + 2p - k) // s + 1`` per axis,
    in raster order, each as ``cfg.groups`` beats in the input's group order; bit-exact with
    :func:`fcircnn.models.spectral.cmaxpool` over each map.

    Contract
    --------
    * Any window 1..3, stride 1..3 and padding ``< window`` per axis, chosen at run time in
      ``cfg`` (:func:`maxpool_config_layout`); ``1 <= size <= max_size`` per axis and
      ``size + 2*padding >= window``. ``cfg`` must be static while a map is in flight
      and set at least one clock edge before its first beat (the stages register values derived
      from it; a cfg held through reset counts).
    * Separable: a ``w`` stage (history in registers if ``max_groups == 1``, else two buffers
      of ``G = max_groups`` words), an ``h`` stage (two line buffers of ``(max_size[2] + 2) * G``
      words) and a ``d`` stage (two plane buffers of ``(max_size[1] + 2) * (max_size[2] + 2) *
      G`` words), each a :class:`amaranth.lib.memory.Memory` of ``lanes`` int8 slots per word.
      Stride > window skips voxels; trailing padding is processed as inserted -inf voxels,
      during which the input is held.
    * Latency :data:`LATENCY` (4) cycles from the beat completing a window to its output beat
      (one per axis stage, one for the output register slice); initiation
      interval 1 except for the inserted padding cycles (at most ``padding`` per axis and line);
      full valid/ready back-pressure on both streams.
    * ``cfg.bypass``: ``o`` is ``i`` combinationally (latency 0, every beat passes).
    * Every input value is an int8 slot part; -128 is treated like the padding and loses against
      everything else (the result is the same, a window always holds a real voxel). No
      multipliers.
    * Carry (``carry`` given): the maps may be the tiles of a larger map, walked depth tiles
      outermost, then rows of tiles, then tiles, with windows of 3, stride 2 and padding 1 on
      the axes that ``carry.use`` (even tile sizes, so every window ends inside its tile). Each
      axis stage keeps the last position of a tile's sweeps (``carry.save``) in its carry
      memory at ``carry.base`` on, where the next tile along that axis finds it as its
      position -1 (``carry.use``): the output is then the larger map's pooled tile, bit-exact
      with :func:`fcircnn.models.spectral.cmaxpool` over the larger map
      (:class:`~fcircnn.arch.geometry.PoolCarry` lays the memories out). ``carry`` is static
      while a map is in flight; ``carry.restart`` is strobed before each map's first beat
      enters, while the pool is empty.

    Parameters
    ----------
    lanes : int
        Slots per beat, 1..64.
    max_size : tuple of three int
        Largest map size ``(D, H, W)``, each 1..1024; sizes the counters and line buffers.
    max_groups : int
        Largest ``cfg.groups`` (interleaved slot groups per voxel), 1..256; multiplies the
        buffer sizes.
    carry : tuple of three int
        Words of the carry memory per axis ``(d, h, w)`` (:func:`check_carry`); ``(0, 0, 0)``:
        none, and no ``carry`` port.

    Ports
    -----
    i : In(stream.Signature(slot_layout(lanes)))
    o : Out(stream.Signature(slot_layout(lanes)))
    cfg : In(maxpool_config_layout(max_size, max_groups))
    carry : In(carry_layout(carry)), with a carry
    """

    def __init__(self, lanes=8, max_size=(8, 8, 8), max_groups=1, carry=(0, 0, 0)):
        with rejecting(self):
            check_lanes(lanes)
            check_max_size(max_size)
            check_max_groups(max_groups)
            check_carry(carry)
        self.lanes = lanes
        self.max_size = tuple(max_size)
        self.max_groups = max_groups
        self.carry_depth = tuple(carry)
        ports = {
            "i": In(stream.Signature(slot_layout(lanes))),
            "o": Out(stream.Signature(slot_layout(lanes))),
            "cfg": In(maxpool_config_layout(self.max_size, max_groups)),
        }
        if any(carry):
            ports["carry"] = In(carry_layout(carry))
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        d_max, h_max, w_max = self.max_size
        groups = self.max_groups
        # Outputs per axis are at most n + 2p - k + 1 <= n + 2 (p <= k - 1, k <= 3).
        cd = self.carry_depth
        stages = [
            _AxisPool(self.lanes, w_max, groups, cd[2]),
            _AxisPool(self.lanes, h_max, (w_max + 2) * groups, cd[1]),
            _AxisPool(self.lanes, d_max, (h_max + 2) * (w_max + 2) * groups, cd[0]),
        ]
        for name, axis, stage in zip("whd", (2, 1, 0), stages, strict=True):
            m.submodules[f"pool_{name}"] = stage
            m.d.comb += [
                stage.cfg.size.eq(self.cfg.size[axis]),
                stage.cfg.window.eq(self.cfg.window[axis]),
                stage.cfg.stride.eq(self.cfg.stride[axis]),
                stage.cfg.padding.eq(self.cfg.padding[axis]),
            ]
            if cd[axis]:
                c = self.carry
                m.d.comb += [stage.restart.eq(c.restart), stage.use.eq(c.use[axis]),
                             stage.save.eq(c.save[axis]), stage.base.eq(c.base[axis])]
        pool_w, pool_h, pool_d = stages
        wiring.connect(m, pool_w.o, pool_h.i)
        wiring.connect(m, pool_h.o, pool_d.i)
        # A register slice after the d stage: its max over plane-buffer words (block RAM read
        # data) ends in a register, not in whatever follows the pool.
        m.submodules.out_slice = out_slice = SkidBuffer(slot_layout(self.lanes))
        m.d.comb += [out_slice.i.valid.eq(pool_d.o.valid),
                     out_slice.i.payload.eq(pool_d.o.payload.data),
                     pool_d.o.ready.eq(out_slice.i.ready)]

        # Slot group of the next input beat; the last group ends a voxel (a line of the w stage).
        group = Signal(range(groups))
        group_last = Signal()
        if groups == 1:
            m.d.comb += group_last.eq(1)
        else:
            m.d.comb += group_last.eq(group + 1 >= self.cfg.groups)  # groups 0 acts as 1
            with m.If(pool_w.i.valid & pool_w.i.ready):
                m.d.sync += group.eq(Mux(group_last, 0, group + 1))

        with m.If(self.cfg.bypass):
            m.d.comb += [
                self.o.valid.eq(self.i.valid),
                self.o.payload.eq(self.i.payload),
                self.i.ready.eq(self.o.ready),
            ]
        with m.Else():
            m.d.comb += [
                pool_w.i.valid.eq(self.i.valid),
                pool_w.i.payload.data.eq(self.i.payload),
                pool_w.i.payload.last.eq(group_last),
                self.i.ready.eq(pool_w.i.ready),
                self.o.valid.eq(out_slice.o.valid),
                self.o.payload.eq(out_slice.o.payload),
                out_slice.o.ready.eq(self.o.ready),
            ]
        return m
