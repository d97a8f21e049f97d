"""The layer engine's store walker: one DMA write box per finished output tile (two with a
folded output depth)."""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from fcircnn.arch.descriptor import FLAG_DFOLD, OP_POOL, region_code
from fcircnn.arch.geometry import SLOTS_PER_BEAT, CoreGeometry, EngineGeometry

from .axi_dma_box import Status, box_layout, check_addr_width, status_layout
from .axi_dma_write import write_beat_layout
from .common import rejecting
from .engine_walk import TileWalk, control_signature, fail_signature, fused_pool_axes

__all__ = ["EngineStore"]


class EngineStore(wiring.Component):
    """Per output tile of a conv layer (:class:`TileWalk` without ``nt``), once the output
    buffer has it (``out_o.valid``), one write box on ``wr_cmd`` (NC/8DHW8; the pooled tile with
    a fused pool) and the buffer's beats on ``wr_data``, overlapping the next tile's work. With
    ``FLAG_DFOLD`` two boxes per tile, one per half of its slot groups (the lower half first,
    the upper one stored plane further on: :func:`~fcircnn.arch.walk.conv_writes`).

    Contract
    --------
    * ``done`` pulses once, after the status of the layer's last box.
    * A status other than OK pulses ``fail`` (code ``4 | status``) and ends the walk.
    * After ``ctl.failed`` a box under way takes zero beats instead of the output buffer's
      (the datapath may not produce them any more) until its status: the bursts already
      issued complete, the next is refused (the top level closes its windows on a failure).
    * ``idle``: no write in flight.

    Parameters
    ----------
    core : CoreGeometry
    geometry : EngineGeometry
    addr_width : int
    """

    def __init__(self, core: CoreGeometry, geometry: EngineGeometry, *, addr_width: int = 40):
        with rejecting(self):
            if not isinstance(core, CoreGeometry) or not isinstance(geometry, EngineGeometry):
                raise TypeError("core must be a CoreGeometry and geometry an EngineGeometry")
            check_addr_width(addr_width)
        self.core, self.geometry, self.addr_width = core, geometry, addr_width
        beat = stream.Signature(write_beat_layout())
        super().__init__({
            "ctl": In(control_signature()),
            "fail": Out(fail_signature(addr_width)),
            "idle": Out(1),
            "done": Out(1),
            "out_o": In(beat),
            "wr_cmd": Out(stream.Signature(box_layout(addr_width))),
            "wr_data": Out(beat),
            "wr_status": In(stream.Signature(status_layout(addr_width))),
        })

    def elaborate(self, platform):
        m = Module()
        ctl = self.ctl
        d = ctl.desc
        _, halved = fused_pool_axes(m, d, self.geometry.fused_pool)
        st = TileWalk(m, "st", d, self.core, self.geometry.stride, with_nt=False)
        # FLAG_DFOLD: the tile's groups in two boxes; ``upper``: the second is under way.
        fold = (d.flags & FLAG_DFOLD).bool()
        upper = Signal()
        with m.If(ctl.start):
            st.reset(ctl.new_desc)
            m.d.sync += upper.eq(0)

        wr_box = Signal(box_layout(self.addr_width))
        out_box = Signal(box_layout(self.addr_width))
        st.out_box(out_box, d.out_base, write=True, halved=halved)
        m.d.comb += [self.wr_cmd.payload.eq(wr_box),
                     self.wr_cmd.payload.region.eq(region_code("out"))]
        st_data = Signal()
        with m.If(st_data & ctl.failed):
            # After a failure the datapath may never produce the box's beats: the write DMA
            # takes zero beats for the bursts it already issued (AXI needs their W beats) and
            # refuses the next one (the top level's windows are closed), which ends the box.
            m.d.comb += self.wr_data.valid.eq(1)
        with m.Elif(st_data):
            m.d.comb += [self.wr_data.valid.eq(self.out_o.valid),
                         self.wr_data.payload.data.eq(self.out_o.payload.data),
                         self.out_o.ready.eq(self.wr_data.ready)]
        with m.FSM(name="store") as store_fsm:
            with m.State("IDLE"):
                with m.If(ctl.start & (ctl.new_desc.op != OP_POOL)):
                    m.next = "WAIT"
            with m.State("WAIT"):
                with m.If(st.done):
                    m.d.comb += self.done.eq(1)
                    m.next = "IDLE"
                with m.Elif(ctl.failed):
                    m.next = "IDLE"
                with m.Elif(self.out_o.valid):
                    m.d.sync += wr_box.eq(out_box)
                    with m.If(fold):
                        m.d.sync += [wr_box.groups.eq(out_box.groups >> 1),
                                     wr_box.last_lanes.eq(SLOTS_PER_BEAT)]
                    m.next = "CMD"
            with m.State("CMD"):
                m.d.comb += self.wr_cmd.valid.eq(1)
                with m.If(self.wr_cmd.ready):
                    m.next = "DATA"
            with m.State("DATA"):
                status = self.wr_status.payload
                m.d.comb += [st_data.eq(1), self.wr_status.ready.eq(1)]
                with m.If(self.wr_status.valid):
                    with m.If(status.code != Status.OK):
                        m.d.comb += [self.fail.valid.eq(1),
                                     self.fail.code.eq(4 | status.code.as_value()),
                                     self.fail.addr.eq(status.addr)]
                        m.next = "IDLE"
                    with m.Elif(fold & ~upper):
                        # The upper half of the groups: one stored plane further on.
                        plane = d.out_stride[1] >> 1  # out_stride[1] / DFOLD_DEPTHS (2)
                        m.d.sync += [upper.eq(1), wr_box.addr.eq(wr_box.addr + plane),
                                     wr_box.last_lanes.eq(out_box.last_lanes)]
                        m.next = "CMD"
                    with m.Else():
                        m.d.sync += upper.eq(0)
                        st.advance()
                        m.next = "WAIT"
        m.d.comb += self.idle.eq(store_fsm.ongoing("IDLE"))
        return m
