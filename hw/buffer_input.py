"""Input (activation) tile buffer: DMA beats in, ``Td`` voxels x ``Tn/2`` slots out per cycle."""

from __future__ import annotations

from amaranth.hdl import Const, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from fcircnn.arch.geometry import (
    MAX_KERNEL,
    CoreGeometry,
    EngineGeometry,
    box_span,
    engine_geometry,
    input_buffer_geometry,
)
from fcircnn.models.layout import SLOTS_PER_BEAT

from .axi_dma_read import read_beat_layout
from .buffer_pingpong import PingPongBanks
from .common import check_block_size, check_positive, mul_small, rejecting
from .complex_mul_pair import ACT_WIDTH, complex_layout

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
    * ``conflict`` (sticky) rises if either side breaks the handshake; never otherwise.

    Parameters
    ----------
    Tn, Td, Tr, Tc : int
        Channel tile and output tile sizes (``Tn`` a multiple of ``B``).
    B : int
        Block size (4, 8, 16).
    kernel, stride : int or (d, r, c)
        Largest kernel and stride the buffer must hold a tile for.

    Ports
    -----
    i : In(stream.Signature(read_beat_layout()))
    box : In(input_box_layout(...))
    stride_d : In(range(1, sd + 1)), reset value ``sd``
    r_addr : In(range(depth)); r_en : In(1); r_sub : In(range(subs)); r_release : In(1)
    r_valid : Out(1); act : Out(ArrayLayout(ArrayLayout(complex int8, Tn/2), Td))
    conflict : Out(1)
    """

    def __init__(self, Tn: int, Td: int, Tr: int, Tc: int, *, B: int = 8, kernel=3, stride=1):
        with rejecting(self):
            for name, value in (("Tn", Tn), ("Td", Td), ("Tr", Tr), ("Tc", Tc)):
                check_positive(name, value, 1024)
            check_block_size(B)
            if Tn % B:
                raise ValueError(f"Tn must be a multiple of B ({B}), not {Tn}")
            self.kernel = _vec3("kernel", kernel)
            self.stride = _vec3("stride", stride)
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
        super().__init__({
            "i": In(stream.Signature(read_beat_layout())),
            "box": In(input_box_layout(self.groups, self.tile_depth, self.height, self.width)),
            "stride_d": In(range(1, self.stride[0] + 1), init=self.stride[0]),
            "r_addr": In(range(self.depth)), "r_en": In(1), "r_sub": In(range(self.subs)),
            "r_release": In(1), "r_valid": Out(1), "act": Out(act),
            "conflict": Out(1),
        })

    @classmethod
    def of(cls, core: CoreGeometry, geometry: EngineGeometry) -> InputBuffer:
        """The input buffer of a core's engine built for ``geometry``
        (:func:`~fcircnn.arch.geometry.input_buffer_geometry`: ``Td`` lanes of ``Kd``
        planes, or one lane of the tile's whole depth span)."""
        ib = input_buffer_geometry(core, geometry)
        return cls(core.tn, ib.lanes, core.tr, core.tc, B=core.B, kernel=ib.kernel,
                   stride=ib.stride)

    @classmethod
    def from_config(cls, accelerator, core) -> InputBuffer:
        """The input buffer the engine of ``core`` of an accelerator builds: sized for the
        layers the accelerator places on the core
        (:func:`~fcircnn.arch.geometry.engine_geometry`, FC and GAP layers reading their
        whole input map as one box)."""
        return cls.of(CoreGeometry.of(core, accelerator.block_size),
                      engine_geometry(accelerator, core))

    def lanes_of_plane(self, d: int, stride_d: int | None = None) -> list[tuple[int, int]]:
        """``(lane, kd)`` pairs that store tile plane ``d`` for a layer of depth stride
        ``stride_d`` (default: the buffer's largest, ``stride[0]``)."""
        kd, sd = self.kernel[0], self.stride[0] if stride_d is None else stride_d
        return [(v, d - v * sd) for v in range(self.Td) if 0 <= d - v * sd < kd]

    def elaborate(self, platform):
        m = Module()
        m.submodules.store = store = PingPongBanks(banks=self.Td * self.groups, width=128,
                                                   depth=self.depth)
        G, Td = self.groups, self.Td
        kd_max, sd_max = self.kernel[0], self.stride[0]

        # Write side, two stages: box-order counters compute each beat's bank enables and
        # addresses, which are written one cycle later from registers (the path from the counters
        # through the plane-base table and the address adder ends in a register, not in the
        # block RAMs' write-address decode). The commit moves with the last write; no beat is
        # taken in the cycle it is pending, so the half it fills is still ``w_ready`` when the
        # registered write lands.
        g = Signal(range(G + 1))
        d = Signal(range(self.tile_depth + 1))
        h = Signal(range(self.height + 1))
        w = Signal(range(self.width + 1))
        hw = Signal(range(self.plane + 1))  # h * Win + w
        row = Signal(range(self.plane + 1))  # h * Win
        commit_pending = Signal()
        w_data = Signal(128)
        w_en = Signal(Td * G)
        w_addr = [Signal(range(self.depth), name=f"w_addr{v}") for v in range(Td)]
        ready = store.w_ready & ~commit_pending
        take = self.i.valid & ready
        m.d.comb += self.i.ready.eq(ready)
        m.d.sync += commit_pending.eq(take & self.i.payload.last)
        with m.If(take):
            m.d.sync += w_data.eq(self.i.payload.data)
        kd_bits = max(1, (kd_max - 1).bit_length())
        for v in range(Td):
            # Lane v stores tile plane d as its plane kd = d - v*stride_d, if 0 <= kd < Kd (the
            # layer's stride, not the largest: lane v's first output voxel reads plane
            # v*stride_d). v*stride_d is a register (stride_d is static during a layer).
            lane_off = Signal(range(v * sd_max + 1), name=f"lane_off{v}",
                              init=v * sd_max)
            m.d.sync += lane_off.eq(mul_small(Const(v), self.stride_d, sd_max))
            kd = Signal(range(-v * sd_max, self.tile_depth + 1), name=f"kd{v}")
            m.d.comb += kd.eq(d - lane_off)
            hit = (kd >= 0) & (kd < kd_max)
            # kd * (Hin*Win) from a table of constants: no multiplier.
            plane_base = Signal(range(self.depth), name=f"plane_base{v}")
            with m.Switch(kd[:kd_bits]):
                for k in range(kd_max):
                    with m.Case(k):
                        m.d.comb += plane_base.eq(k * self.plane)
            with m.If(take):
                m.d.sync += w_addr[v].eq(plane_base + hw)
            for gg in range(G):
                b = self.banks[(v, gg)]
                m.d.sync += w_en[b].eq(take & hit & (g == gg))
                m.d.comb += [
                    store.w_data[b].eq(w_data),
                    store.w_en[b].eq(w_en[b]),
                    store.w_addr[b].eq(w_addr[v]),
                ]
        m.d.comb += store.w_commit.eq(commit_pending)
        with m.If(take):
            last_w = w == self.box.w - 1
            last_h = h == self.box.h - 1
            last_d = d == self.box.d - 1
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
            with m.If(self.i.payload.last):
                m.d.sync += [g.eq(0), d.eq(0), h.eq(0), w.eq(0), hw.eq(0), row.eq(0)]

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
                else:
                    m.d.comb += self.act[v][s].eq(words[s // SLOTS_PER_BEAT][s % SLOTS_PER_BEAT])
        return m
