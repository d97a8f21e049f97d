"""Output tile buffer: post-processed ``Td x Tm/2`` int8 slots in, NC/8DHW8 beats out."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from fcircnn.arch.geometry import SLOTS_PER_BEAT

from .axi_dma_write import write_beat_layout
from .buffer_pingpong import PingPongBanks
from .common import check_channel_rule, check_tiles, rejecting
from .complex_mul_pair import ACT_WIDTH, complex_layout

__all__ = ["OutputBuffer", "output_in_layout", "output_shape_layout"]



def output_in_layout(Tm: int, Td: int, Tr: int, Tc: int) -> data.StructLayout:
    """One write: slot group ``group`` (8 int8 slots, one NC/8DHW8 beat) of voxel ``addr =
    r*Tc + c`` of depth lane ``lane``; ``last`` commits the tile."""
    return data.StructLayout({
        "lane": range(Td),
        "group": range(-(-Tm // 16)),
        "addr": range(Tr * Tc),
        "slots": data.ArrayLayout(complex_layout(ACT_WIDTH), SLOTS_PER_BEAT),
        "last": 1,
    })


def output_shape_layout(groups: int, Td: int, Tr: int, Tc: int) -> data.StructLayout:
    """Extent of the tile to store (edge tiles are smaller): groups, d, h, w counts."""
    return data.StructLayout({
        "groups": range(1, groups + 1), "d": range(1, Td + 1),
        "h": range(1, Tr + 1), "w": range(1, Tc + 1),
    })


class OutputBuffer(wiring.Component):
    """Double-buffered output tile: ``Tm`` channels' slots of ``Td x Tr x Tc`` voxels, int8.

    Organisation: ``Td x G`` banks (``G = ceil(Tm/16)`` slot groups), 128-bit words (one
    NC/8DHW8 beat), ``Tr*Tc`` words per half; bank ``(v, g)`` holds group ``g`` of voxel lane
    ``v`` at ``r*Tc + c``. A write (one post-unit output beat: 8 slots of one lane and group)
    touches one bank; the store side reads one bank per cycle. (A whole PE-array output, ``Td``
    voxels x ``Tm/2`` slots, is ``Td x G`` writes.)

    The int32 accumulators stay in :class:`~fcircnn.hw.pe_array.PEArray` (its output register),
    so this buffer holds the results after the post-units (CBN, quantize, CReLU): a quarter of the
    storage an int32 buffer would need.

    Contract
    --------
    * Fill: ``i`` writes ``slots`` (one slot group) at voxel ``addr`` of bank
      ``(lane, group)``; the write with ``last`` commits the tile. ``i.ready`` is low while
      both halves are full.
    * Store: ``shape`` (the tile's extent, edge tiles included) is latched with the tile when
      it is committed, so the next tile's extent can be set while this one is stored. ``o``
      then streams the tile's ``groups x d x h x w`` beats in NC/8DHW8 box order (group, d, h,
      w), one per cycle while ``o.ready``: exactly what
      :class:`~fcircnn.hw.axi_dma_write.AxiDmaWrite` takes for the matching box. The half is
      freed after the last beat.
    * ``conflict`` (sticky) rises only if a side breaks the handshake (never through the
      ports of this component).

    Parameters
    ----------
    Tm, Td, Tr, Tc : int
        Output channel tile (a multiple of 8) and output tile sizes.

    Ports
    -----
    i : In(stream.Signature(output_in_layout(Tm, Td, Tr, Tc)))
    shape : In(output_shape_layout(G, Td, Tr, Tc))
    o : Out(stream.Signature(write_beat_layout()))
    conflict : Out(1)
    """

    def __init__(self, Tm: int, Td: int, Tr: int, Tc: int):
        with rejecting(self):
            check_tiles(Tm=Tm, Td=Td, Tr=Tr, Tc=Tc)
            check_channel_rule("output_half_groups", Tm)
        self.Tm, self.Td, self.Tr, self.Tc = Tm, Td, Tr, Tc
        self.groups = -(-Tm // 16)
        self.depth = Tr * Tc
        super().__init__({
            "i": In(stream.Signature(output_in_layout(Tm, Td, Tr, Tc))),
            "shape": In(output_shape_layout(self.groups, Td, Tr, Tc)),
            "o": Out(stream.Signature(write_beat_layout())),
            "conflict": Out(1),
        })

    @classmethod
    def from_config(cls, core) -> "OutputBuffer":
        """The output buffer of a :class:`~fcircnn.models.config.CoreConfig`."""
        return cls(core.tm, core.td, core.tr, core.tc)

    def elaborate(self, platform):
        m = Module()
        G, Td = self.groups, self.Td
        m.submodules.store = store = PingPongBanks(banks=Td * G, width=128, depth=self.depth)

        # Fill side.
        take = self.i.valid & store.w_ready
        m.d.comb += self.i.ready.eq(store.w_ready)
        for v in range(Td):
            for g in range(G):
                b = v * G + g
                m.d.comb += [store.w_data[b].eq(self.i.payload.slots),
                             store.w_addr[b].eq(self.i.payload.addr),
                             store.w_en[b].eq(take & (self.i.payload.lane == v)
                                              & (self.i.payload.group == g))]
        m.d.comb += store.w_commit.eq(take & self.i.payload.last)
        # The extent travels with its half: latched at commit, used while storing that half.
        shapes = [Signal(self.shape.shape(), name=f"shape{k}") for k in range(2)]
        with m.If(store.w_commit & store.w_ready):
            for k in range(2):
                with m.If(store.w_half == k):
                    m.d.sync += shapes[k].eq(self.shape)
        shape = Signal(self.shape.shape())
        m.d.comb += shape.eq(Mux(store.r_half, shapes[1], shapes[0]))

        # Store side: issue reads in (g, d, h, w) order, one cycle of read latency.
        g = Signal(range(G))
        d = Signal(range(Td))
        h = Signal(range(self.Tr))
        w = Signal(range(self.Tc))
        row = Signal(range(self.depth + 1))  # h * Tc
        issued_all = Signal()
        o_valid = Signal()
        o_last = Signal()
        sel = Signal(range(Td * G))
        advance = ~o_valid | self.o.ready
        issue = store.r_valid & ~issued_all & advance
        m.d.comb += [store.r_addr.eq(row + w), store.r_en.eq(issue)]
        last_w = w == shape.w - 1
        last_h = h == shape.h - 1
        last_d = d == shape.d - 1
        last_g = g == shape.groups - 1
        with m.If(issue):
            m.d.sync += [o_valid.eq(1), sel.eq(d * G + g),
                         o_last.eq(last_w & last_h & last_d & last_g)]
            with m.If(~last_w):
                m.d.sync += w.eq(w + 1)
            with m.Else():
                m.d.sync += w.eq(0)
                with m.If(~last_h):
                    m.d.sync += [h.eq(h + 1), row.eq(row + self.Tc)]
                with m.Else():
                    m.d.sync += [h.eq(0), row.eq(0)]
                    with m.If(~last_d):
                        m.d.sync += d.eq(d + 1)
                    with m.Else():
                        m.d.sync += d.eq(0)
                        with m.If(~last_g):
                            m.d.sync += g.eq(g + 1)
                        with m.Else():
                            m.d.sync += [g.eq(0), issued_all.eq(1)]
        with m.Elif(advance):
            m.d.sync += o_valid.eq(0)
        with m.Switch(sel):
            for b in range(Td * G):
                with m.Case(b):
                    m.d.comb += self.o.payload.data.eq(store.r_data[b])
        m.d.comb += self.o.valid.eq(o_valid)
        with m.If(self.o.valid & self.o.ready & o_last):
            m.d.comb += store.r_release.eq(1)
            m.d.sync += issued_all.eq(0)
        m.d.comb += self.conflict.eq(store.conflict)
        return m
