"""Write half of the AXI DMA: a beat stream to a box of an NC/8DHW8 map."""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from .axi4 import BURST_INCR, AXI4WriteSignature
from .axi_dma_box import (
    COUNT_WIDTH,
    BoxWalker,
    Status,
    box_layout,
    check_addr_width,
    check_regions,
    open_window,
    region_windows_layout,
    status_layout,
    window_layout,
)
from .axi_dma_read import DATA_WIDTH, BeatCounter, check_outstanding, command_ready
from .common import rejecting

__all__ = ["AxiDmaWrite", "write_beat_layout"]


def write_beat_layout() -> data.StructLayout:
    """One beat to write: 8 slots of ``data`` (NC/8DHW8 lanes)."""
    return data.StructLayout({"data": DATA_WIDTH})


class AxiDmaWrite(wiring.Component):
    """AXI4 write DMA: one box command and its beats in, bursts out, one status out.

    Contract
    --------
    * Takes exactly ``groups x d_len x h_len x w_len`` beats from ``i`` in NC/8DHW8 order
      (group, d, h, w) and writes them to the box. ``WSTRB`` is all ones except in the box's
      last slot group, where only the bytes of the first ``last_lanes`` slots are written, so the
      padding slots of a map stay untouched.
    * Bursts: INCR, 128-bit, 1..256 beats, never across a 4 KB boundary, ID 0; ``AW`` runs up to
      ``outstanding`` bursts ahead of ``B``; ``W`` follows ``AW`` order with ``WLAST`` on each
      burst's final beat, and a burst's first W beat never precedes its AW handshake.
    * One ``status`` per command once every ``B`` response is in. On ``SLVERR``/``DECERR`` no new
      burst is issued; the W beats of bursts already issued are still sent (AXI requires them),
      the remaining beats of the box are taken from ``i`` and dropped (the producer never
      hangs), and ``BUS_ERROR`` is reported with the address of the failing burst.
    * A write box must not contain padding: a command with a non-zero ``pre``/``post`` count, a
      ``last_lanes`` outside 1..8, or any :class:`BoxWalker` bad-command case is reported as
      ``BAD_COMMAND`` without taking beats or issuing bursts. Address overflow stops the box at
      the offending burst (``OVERFLOW``); its remaining beats are not taken.
    * A new command is accepted once the previous status has been taken (not in the first cycle
      out of reset); ``cmd.ready`` is a register, it does not look at the payload.

    Parameters
    ----------
    addr_width : int
        AXI address width, 32..64.
    outstanding : int
        Write bursts in flight (AW issued, B not yet received), 1..64.

    Ports
    -----
    cmd : In(stream.Signature(box_layout(addr_width)))
    i : In(stream.Signature(write_beat_layout()))
    status : Out(stream.Signature(status_layout(addr_width)))
    m_axi : Out(AXI4WriteSignature(addr_width=addr_width))
    busy : Out(1)
    window : In(window_layout(addr_width))
        The memory window every burst must lie in (:class:`~fcircnn.hw.axi_dma_box.BoxWalker`;
        a burst outside ends the command with ``OVERFLOW``); every page when unconnected.
    regions : In(region_windows_layout(addr_width, regions))
        Only with ``regions > 0``: the windows a command's region code chooses
        (:class:`~fcircnn.hw.axi_dma_box.BoxWalker`).
    """

    def __init__(self, addr_width: int = 40, *, outstanding: int = 8, regions: int = 0):
        with rejecting(self):
            check_addr_width(addr_width)
            check_regions(regions)
            check_outstanding("outstanding", outstanding)
        self.addr_width = addr_width
        self.outstanding = outstanding
        self.region_count = regions
        super().__init__({
            "cmd": In(stream.Signature(box_layout(addr_width))),
            "i": In(stream.Signature(write_beat_layout())),
            "status": Out(stream.Signature(status_layout(addr_width))),
            "m_axi": Out(AXI4WriteSignature(addr_width=addr_width)),
            "busy": Out(1),
            "window": In(window_layout(addr_width), init=open_window(addr_width)),
        } | ({"regions": In(region_windows_layout(addr_width, regions),
                            init=[open_window(addr_width)] * regions)} if regions else {}))

    def elaborate(self, platform):
        m = Module()
        aw = self.addr_width
        m.submodules.walker = walker = BoxWalker(aw, regions=self.region_count)
        m.d.comb += walker.window.eq(self.window)
        if self.region_count:
            m.d.comb += walker.regions.eq(self.regions)
        went = data.StructLayout({
            "beats": COUNT_WIDTH + 2, "burst": 1, "last": 1, "last_group": 1, "status": Status,
            "addr": aw, "one": 1,
        })
        depth = 2 * self.outstanding + 2
        m.submodules.wq = wq = fifo.SyncFIFO(width=went.size, depth=depth)
        m.submodules.bq = bq = fifo.SyncFIFO(width=aw, depth=self.outstanding + 1)
        axi = self.m_axi

        busy = Signal()
        err = Signal()
        err_addr = Signal(aw)
        code = Signal(Status)
        inflight = Signal(range(self.outstanding + 1))
        st_valid = Signal()
        strobe_last = Signal(16)

        # Command: padding and lane checks here, the rest in the walker.
        c = self.cmd.payload
        bad_cmd = ((c.d_pre != 0) | (c.d_post != 0) | (c.h_pre != 0) | (c.h_post != 0)
                   | (c.w_pre != 0) | (c.w_post != 0) | (c.last_lanes == 0)
                   | (c.last_lanes > 8))
        cmd_ready = command_ready(m, busy)
        m.d.comb += [
            walker.cmd.payload.eq(c),
            walker.cmd.valid.eq(self.cmd.valid & cmd_ready & ~bad_cmd),
            self.cmd.ready.eq(cmd_ready),
            self.busy.eq(busy),
        ]
        with m.If(cmd_ready):
            # Taken in every idle cycle (used once the command is accepted), so cmd.valid does
            # not reach them. WSTRB of the last group: the two bytes of each of the first
            # last_lanes slots; the status address is 0 unless the command is rejected.
            m.d.sync += [strobe_last.eq(Cat(*(c.last_lanes > k for k in range(8)
                                              for _ in range(2)))),
                         err_addr.eq(Mux(bad_cmd, c.addr, 0))]
        with m.If(self.cmd.valid & self.cmd.ready):
            m.d.sync += [busy.eq(1), cmd_ready.eq(0)]
            with m.If(bad_cmd):
                m.d.sync += [st_valid.eq(1), code.eq(Status.BAD_COMMAND)]

        # Segment issue: AW (registered), W-order FIFO, B-order FIFO.
        seg = walker.seg.payload
        aw_pending = Signal()
        m.d.comb += [
            axi.awid.eq(0), axi.awsize.eq(4), axi.awburst.eq(BURST_INCR),
            axi.awcache.eq(0b0011), axi.awprot.eq(0), axi.awlock.eq(0),
            axi.awvalid.eq(aw_pending),
        ]
        with m.If(axi.awvalid & axi.awready):
            m.d.sync += aw_pending.eq(0)
        issue = seg.burst & ~err        # a burst segment has status OK
        aw_free = ~aw_pending | axi.awready
        can = wq.w_rdy & (~issue | (aw_free & bq.w_rdy & (inflight < self.outstanding)))
        m.d.comb += walker.seg.ready.eq(can)
        wentry = data.View(went, wq.w_data)
        m.d.comb += [
            wentry.beats.eq(seg.beats), wentry.burst.eq(issue), wentry.last.eq(seg.last),
            wentry.last_group.eq(seg.last_group), wentry.status.eq(seg.status),
            wentry.addr.eq(seg.addr), wentry.one.eq(seg.beats <= 1),
            wq.w_en.eq(walker.seg.valid & can),
        ]
        push = walker.seg.valid & can & issue
        m.d.comb += [bq.w_en.eq(push), bq.w_data.eq(seg.addr)]
        with m.If(push):
            m.d.sync += [aw_pending.eq(1), axi.awaddr.eq(seg.addr), axi.awlen.eq(seg.beats - 1)]

        aw_credit = Signal(range(self.outstanding + 2))
        aw_taken = axi.awvalid & axi.awready
        w_done = axi.wvalid & axi.wready & axi.wlast
        with m.If(aw_taken & ~w_done):
            m.d.sync += aw_credit.eq(aw_credit + 1)
        with m.Elif(~aw_taken & w_done):
            m.d.sync += aw_credit.eq(aw_credit - 1)

        # W path: bursts pass beats to W; drained entries (after an error) drop them.
        head = data.View(went, wq.r_data)
        counter = BeatCounter(head.beats, head.one)
        at_end = counter.at_end
        finish = Signal()
        # W payload: meaningful with WVALID only, so not gated.
        m.d.comb += [axi.wdata.eq(self.i.payload.data), axi.wlast.eq(at_end),
                     axi.wstrb.eq(Mux(head.last_group, strobe_last, 0xFFFF))]
        with m.If(wq.r_rdy):
            with m.If(head.status != Status.OK):
                m.d.comb += [wq.r_en.eq(1), finish.eq(1)]
                with m.If(~err):
                    m.d.sync += [err.eq(1), err_addr.eq(head.addr), code.eq(head.status)]
            with m.Elif(head.burst):
                # W of a burst only after its AW was accepted (aw_credit counts accepted AWs
                # whose W burst is not finished; bursts are in order).
                go = aw_credit != 0
                m.d.comb += [axi.wvalid.eq(self.i.valid & go),
                             self.i.ready.eq(axi.wready & go)]
            with m.Else():
                m.d.comb += self.i.ready.eq(1)
            step = Mux(head.burst, axi.wvalid & axi.wready, self.i.valid)
            with m.If((head.status == Status.OK) & step):
                m.d.sync += counter.step()
                with m.If(at_end):
                    m.d.sync += counter.restart()
                    m.d.comb += [wq.r_en.eq(1), finish.eq(head.last)]

        # B path.
        m.d.comb += [axi.bready.eq(1), bq.r_en.eq(axi.bvalid)]
        got_b = axi.bvalid & axi.bready
        with m.If(got_b & axi.bresp[1] & ~err):
            m.d.sync += [err.eq(1), err_addr.eq(bq.r_data), code.eq(Status.BUS_ERROR)]
        with m.If(push & ~got_b):
            m.d.sync += inflight.eq(inflight + 1)
        with m.Elif(~push & got_b):
            m.d.sync += inflight.eq(inflight - 1)

        # Status once the last entry is out and every B is in.
        done_wait = Signal()
        with m.If(finish):
            m.d.sync += done_wait.eq(1)
        with m.If(done_wait & (inflight == 0) & ~aw_pending & ~st_valid):
            m.d.sync += [st_valid.eq(1), done_wait.eq(0)]
            with m.If(~err):
                m.d.sync += code.eq(Status.OK)
        m.d.comb += [self.status.valid.eq(st_valid), self.status.payload.code.eq(code),
                     self.status.payload.addr.eq(err_addr)]
        with m.If(self.status.valid & self.status.ready):
            m.d.sync += [st_valid.eq(0), busy.eq(0), cmd_ready.eq(1), err.eq(0),
                         err_addr.eq(0)]
        return m
