"""The accelerator top level ``fcircnn_accel``: register file, descriptor sequencer, DMA and
one layer engine per core, with Vivado-style flat ports."""

from __future__ import annotations

from amaranth.hdl import (
    Cat,
    ClockDomain,
    ClockSignal,
    Module,
    Mux,
    ResetInserter,
    ResetSignal,
    Signal,
)
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from fcircnn.arch.descriptor import (
    ADDRESS_FIELDS,
    DESCRIPTOR_BYTES,
    FLAG_LANE0,
    FLAG_LAST,
    FLAG_RFFT,
    FLAG_SPREAD,
    OP_POOL,
    READ_REGIONS,
    WRITE_REGIONS,
    descriptor_layout,
    flags_fault,
    region_fault,
)
from fcircnn.arch.geometry import BEAT_BYTES
from fcircnn.arch.ip import CONTROL_BUS, TOP_NAME
from fcircnn.arch.registers import (
    CONTROL_ADDR_WIDTH,
    ERROR_ABORTED,
    ERROR_BAD_DESCRIPTOR,
    ERROR_CODES,
    WINDOW_PAGE_BITS,
    WINDOWS,
)

from .axi4 import AXI4Signature
from .axi_dma import AxiDma
from .axi_dma_box import Status, box_layout, linear_box, open_window, window_layout
from .common import rejecting
from .engine_walk import RowLanes
from .layer_engine import LayerEngine
from .regfile import AXI4LiteSignature, ControlRegisters

__all__ = ["CONTROL_ADDR_WIDTH", "ERROR_CODES", "TOP_NAME", "Accelerator"]

#: Verilog module name of the top level.
#: Address width of ``s_axi_control`` (a 4 KiB window).

_DESC_BEATS = DESCRIPTOR_BYTES // BEAT_BYTES


def _flat_members(prefix: str, signature, *, flip: bool) -> dict:
    members = {}
    for name, member in signature.members.items():
        flow = member.flow
        if flip:
            flow = In if flow == Out else Out
        members[f"{prefix}_{name}"] = flow(member.shape)
    return members


class Accelerator(wiring.Component):
    """The whole accelerator: what Vivado packages as an IP.

    Ports (flat names, as Vivado's interface inference expects)
    -----------------------------------------------------------
    ``ap_clk``, ``ap_rst_n``
        Clock and active-low synchronous reset of everything.
    ``s_axi_control_*``
        AXI4-Lite subordinate, 12-bit address, 32-bit data: the register map of
        :mod:`fcircnn.hw.regfile`.
    ``m_axi_*``
        AXI4 manager, 128-bit data, ``address_width``-bit address: every DDR access (descriptors,
        weights, post records, feature maps, cycle entries) but those of the further ports.
    ``m_axi1_*``, ``m_axi2_*``, ``m_axi3_*``
        With ``axi_ports`` 2..4 (:class:`~fcircnn.arch.ports.PortMap`): further AXI4 managers,
        same widths, each with a DMA of its own (``dma1`` ..): port 1's read engine reads the
        weight tiles (the active engine's weight loader), port 2's the upper halves of split
        input boxes, port 3's the second halves of split weight tiles
        (:meth:`~fcircnn.arch.ports.PortMap.loader_reads`); in a pool pass port ``k`` moves
        lane ``k``'s slot group (:attr:`~fcircnn.arch.ports.PortMap.pool_lanes`).
    ``interrupt``
        Level, active high: ``GIE & (IER & ISR)``.

    Contract
    --------
    * A start (CTRL.start) walks the descriptor list from DESC_PTR: fetch the 256-byte
      descriptor, run it on the engine of core ``desc.core``
      (:class:`~fcircnn.hw.layer_engine.LayerEngine`), write its cycle entry at ``cycles_addr``
      (16 bytes: uint64 cycles from fetch to the entry write, uint32 PE-busy cycles, uint32
      DMA-stall cycles, each modulo its width), then follow ``next_desc`` until a descriptor
      with ``FLAG_LAST`` or ``next_desc = 0``; then ``done``.
    * Errors end the run with CTRL.error, ERROR_CODE (:data:`ERROR_CODES`) and ERROR_ADDR: DMA
      errors of the fetch, of the engine's transfers (after every transfer in flight has
      completed) or of the cycle write, and a descriptor naming a core that does not exist, an
      unknown op, flags that do not go together (:func:`~fcircnn.arch.descriptor.flags_fault`)
      or row lanes its core cannot run (:meth:`~fcircnn.hw.engine_walk.RowLanes.fault`), or
      an address field past the address space (ERROR_ADDR = the descriptor's address); a
      DESC_PTR past the address space is not fetched (code 2, ERROR_ADDR = DESC_PTR). A
      burst of any DMA, on any port, outside its memory window (RD_BASE..RD_LIMIT,
      WR_BASE..WR_LIMIT: :mod:`fcircnn.arch.registers`) is not issued and ends the run with
      code 2 or 6 and its address. The engines are held in reset while idle, so the next
      start begins clean.
    * CTRL.abort while running fails the active engine (``LayerEngine.abort``) and closes
      both windows (registered, a cycle later) until the run ends, as does any failure of the
      active engine (``failing``): no DMA or the sequencer issues a new burst, the bursts in
      flight complete (a write burst whose beats the datapath no longer produces with zero
      beats), and the run ends with ``ERROR_ABORTED``
      (:data:`~fcircnn.arch.registers.ERROR_ABORTED`, in place of a refusal's code 2 or 6; any
      other error that ends it keeps its code) and the address of the descriptor it was
      running or fetching.
    * Layers run one after the other, in list order.

    Parameters
    ----------
    cores : sequence of LayerEngine
        One engine per core, index = the descriptor's ``core``.
    addr_width : int
        AXI address width (32..64).
    """

    def __init__(self, engines, *, addr_width: int = 40):
        with rejecting(self):
            engines = list(engines)
            if not engines or not all(isinstance(e, LayerEngine) for e in engines):
                raise TypeError("engines must be a non-empty sequence of LayerEngine")
            if any(e.addr_width != addr_width for e in engines):
                raise ValueError("every engine must have the accelerator's addr_width "
                                 f"({addr_width})")
            if len({e.ports for e in engines}) != 1:
                raise ValueError("every engine must have the same AXI ports (axi_ports)")
            if len({e.commands for e in engines}) != 1:
                raise ValueError("every engine must have the same command queue (dma_queue)")
        self.engines = engines
        self.addr_width = addr_width
        #: Which port carries which read (every engine's).
        self.ports = engines[0].ports
        #: Read commands each loader keeps in flight (every engine's), so its read engine's
        #: command queue.
        self.commands = engines[0].commands
        members = {"ap_clk": In(1), "ap_rst_n": In(1), "interrupt": Out(1)}
        members |= _flat_members(CONTROL_BUS,
                                 AXI4LiteSignature(addr_width=CONTROL_ADDR_WIDTH), flip=True)
        for name in self.ports.managers:
            members |= _flat_members(name, AXI4Signature(addr_width=addr_width), flip=False)
        super().__init__(members)

    @classmethod
    def from_config(cls, accelerator, geometry=None) -> Accelerator:
        """The accelerator of an :class:`~fcircnn.models.config.AcceleratorConfig`.

        ``geometry`` (one :class:`~fcircnn.hw.layer_engine.EngineGeometry` per core) sizes the
        cores' buffers; by default each core is sized for the layers of the accelerator's own
        network (:func:`~fcircnn.hw.layer_engine.engine_geometry`). Images compiled with the
        same ``geometry`` (:func:`fcircnn.gen.compiler.compile_network`) run on it.
        """
        cores = accelerator.cores
        if geometry is None:
            geometry = [None] * len(cores)
        geometry = list(geometry)
        if len(geometry) != len(cores):
            raise ValueError(f"geometry must have one entry per core ({len(cores)}), not "
                             f"{len(geometry)}")
        engines = [LayerEngine.from_config(accelerator, core, geo)
                   for core, geo in zip(cores, geometry, strict=True)]
        return cls(engines, addr_width=accelerator.address_width)

    def _ports(self, m, closed):
        """The register file and the DMA engines on the flat ports: ``s_axi_control`` and one
        DMA (read and write engine) per AXI port, ``dma`` on ``m_axi``, ``dmak`` on
        ``m_axik``, their windows from the registers or none while ``closed``; returns the
        register file and the DMAs by port."""
        aw = self.addr_width
        m.submodules.regs = regs = ControlRegisters(CONTROL_ADDR_WIDTH, error_addr_width=64)
        buses = [(CONTROL_BUS, AXI4LiteSignature(addr_width=CONTROL_ADDR_WIDTH),
                  regs.s_axi_control)]
        dmas = []
        for k, name in enumerate(self.ports.managers):
            m.submodules[f"dma{k or ''}"] = dma = AxiDma(
                aw, read_commands=self.commands, read_regions=len(READ_REGIONS),
                write_regions=len(WRITE_REGIONS))
            dmas.append(dma)
            buses.append((name, AXI4Signature(addr_width=aw), dma.m_axi))
        for prefix, signature, inner in buses:
            for name, member in signature.members.items():
                ours, theirs = getattr(self, f"{prefix}_{name}"), getattr(inner, name)
                # s_axi_control is a subordinate: its Out members are the top's inputs.
                drives_out = (member.flow == Out) != (prefix == CONTROL_BUS)
                m.d.comb += ours.eq(theirs) if drives_out else theirs.eq(ours)
        m.d.comb += self.interrupt.eq(regs.interrupt)
        windows = {}
        for direction, (base, limit) in WINDOWS.items():
            windows[direction] = window = self._window(
                m, getattr(regs, base.lower()), getattr(regs, limit.lower()), closed)
            for dma in dmas:
                port = {"read": "rd_window", "write": "wr_window"}[direction]
                m.d.comb += getattr(dma, port).eq(window)
        return regs, dmas, windows

    def _regions(self, m, desc, dmas, windows, closed):
        """The running descriptor's stream regions (:data:`~fcircnn.arch.descriptor.
        STREAM_REGIONS`) as the DMAs' region windows: the pages from its ``*_base``'s to
        ``*_pages`` on, narrowed to the memory window of its direction, registered (the
        descriptor is static while it runs); none while ``closed`` or for ``*_pages = 0``. A
        base past the address space gives a meaningless region, but the sequencer refuses such
        a descriptor before it starts (:meth:`_refused`)."""
        aw = self.addr_width
        pw = aw - WINDOW_PAGE_BITS
        last = (1 << pw) - 1
        for direction, streams in (("read", READ_REGIONS), ("write", WRITE_REGIONS)):
            win = windows[direction]
            for k, name in enumerate(streams):
                base, pages = getattr(desc, f"{name}_base"), getattr(desc, f"{name}_pages")
                lo = base[WINDOW_PAGE_BITS:aw]
                span = Signal.like(pages, name=f"{name}_span")  # pages - 1
                m.d.comb += span.eq(pages - 1)
                top = lo + span  # pw + 1 bits: past the address space in its top bit
                hi = Mux(top[pw:].any(), last, top[:pw])
                region = Signal(window_layout(aw), init=open_window(aw), name=f"{name}_region")
                empty = closed | (pages == 0)
                m.d.sync += [region.lo.eq(Mux(empty, last, Mux(lo > win.lo, lo, win.lo))),
                             region.hi.eq(Mux(empty, 0, Mux(hi < win.hi, hi, win.hi)))]
                port = {"read": "rd_regions", "write": "wr_regions"}[direction]
                for dma in dmas:
                    m.d.comb += getattr(dma, port)[k].eq(region)

    def _window(self, m, base, limit, closed):
        """A window's pages from its 64-bit BASE and LIMIT registers, registered (they are
        static while the engine runs): a BASE past the address space, or ``closed``, leaves no
        page, a LIMIT past it ends the window at the last page."""
        aw = self.addr_width
        window = Signal(window_layout(aw), init=open_window(aw))
        last = (1 << (aw - WINDOW_PAGE_BITS)) - 1
        page = slice(WINDOW_PAGE_BITS, aw)
        empty = closed | base[aw:].any()
        m.d.sync += [
            window.lo.eq(Mux(empty, last, base[page])),
            window.hi.eq(Mux(empty, 0, Mux(limit[aw:].any(), last, limit[page]))),
        ]
        return window

    @staticmethod
    def _connect(m, engine, dmas, on):
        """Engine ``engine`` on the DMAs of every port while ``on``: ``dma`` on its ``rd_*``
        and ``wr_*`` streams, ``dmak`` on its ``rdk_*`` and ``wrk_*``."""
        with m.If(on):
            for k, dma in enumerate(dmas):
                def own(name, k=k):  # the engine's member for port k: rd_cmd, rd1_cmd, ...
                    return getattr(engine, name.replace("_", f"{k or ''}_", 1))
                wiring.connect(m, own("rd_cmd"), dma.rd_cmd)
                wiring.connect(m, dma.rd_data, own("rd_data"))
                wiring.connect(m, dma.rd_status, own("rd_status"))
                wiring.connect(m, own("wr_cmd"), dma.wr_cmd)
                wiring.connect(m, own("wr_data"), dma.wr_data)
                wiring.connect(m, dma.wr_status, own("wr_status"))

    @staticmethod
    def _refused(desc, engines, addr_width):
        """Whether the sequencer refuses descriptor ``desc`` (``ERROR_BAD_DESCRIPTOR``): a
        core that does not exist, an unknown op, flags that do not go together
        (:func:`~fcircnn.arch.descriptor.flags_fault`), row lanes its core cannot run
        (:meth:`~fcircnn.hw.engine_walk.RowLanes.fault`), a transform of the post chain its
        core was built without (:data:`~fcircnn.arch.descriptor.FLAG_RFFT`,
        :data:`~fcircnn.arch.descriptor.FLAG_LANE0`, the spreading read of
        :data:`~fcircnn.arch.descriptor.FLAG_SPREAD`), or an address field
        (:data:`~fcircnn.arch.descriptor.ADDRESS_FIELDS`, ``next_desc`` among them) past the
        ``addr_width``-bit address space, which the DMAs would otherwise take modulo it, or a
        stream its op uses without a region (:func:`~fcircnn.arch.descriptor.region_fault`)."""
        far = Cat(getattr(desc, name)[addr_width:] for name in ADDRESS_FIELDS).any()
        unbuilt = [(FLAG_RFFT if not e.geometry.rfft else 0)
                   | (FLAG_LANE0 if not e.geometry.lane0 else 0)
                   | (FLAG_SPREAD if not e.geometry.spread else 0) for e in engines]
        rows = [(desc.core == k) & (RowLanes.fault(desc, e.lanes, e.geometry.row_lanes)
                                    | (desc.flags & unbuilt[k]).bool())
                for k, e in enumerate(engines)]
        return ((desc.core >= len(engines)) | (desc.op > OP_POOL)
                | flags_fault(desc.flags, desc.op, desc.m_tiles, desc.n_tiles,
                              desc.pool_window, desc.tile[0], desc.tiles[0])
                | Cat(*rows).any() | far | region_fault(desc))

    def elaborate(self, platform):
        m = Module()
        aw = self.addr_width
        m.domains.sync = ClockDomain("sync")
        m.d.comb += [ClockSignal("sync").eq(self.ap_clk), ResetSignal("sync").eq(~self.ap_rst_n)]

        aborting = Signal()  # CTRL.abort during this run
        failing = Signal()  # the active engine failed: no new burst
        regs, dmas, windows = self._ports(m, aborting | failing)
        dma = dmas[0]
        with m.If(regs.abort):
            m.d.sync += aborting.eq(1)

        engine_rst = Signal()
        engines = []
        for k, engine in enumerate(self.engines):
            m.submodules[f"core{k}"] = ResetInserter({"sync": engine_rst})(engine)
            engines.append(engine)
        n = len(engines)

        desc = Signal(descriptor_layout())
        self._regions(m, desc, dmas, windows, aborting | failing)
        ptr = Signal(64)
        active = Signal(range(max(n, 2)))
        cycles = Signal(64)
        pe_cycles = Signal(32)
        stall_cycles = Signal(32)
        busy = Signal()
        m.d.comb += regs.busy.eq(busy)

        # The active engine's events feed the counters.
        pe_busy = Signal()
        dma_stall = Signal()
        for k, engine in enumerate(engines):
            with m.If(active == k):
                m.d.comb += [pe_busy.eq(engine.pe_busy), dma_stall.eq(engine.dma_stall)]
        m.d.comb += [regs.pe_busy.eq(pe_busy), regs.dma_stall.eq(dma_stall)]

        top_rd_box = Signal(box_layout(aw))
        top_wr_box = Signal(box_layout(aw))
        beats = Signal(range(_DESC_BEATS + 1))
        error_code = Signal(8)
        error_addr = Signal(64)
        engine_on = Signal()
        for k, engine in enumerate(engines):
            m.d.comb += [engine.desc.eq(desc), engine.abort.eq(aborting)]
            self._connect(m, engine, dmas, engine_on & (active == k))
            with m.If(engine_on & (active == k)):
                m.d.comb += failing.eq(engine.failing)

        def raise_error(code, addr):
            m.d.comb += [regs.error.eq(1), regs.error_code.eq(code), regs.error_addr.eq(addr)]

        with m.If(busy):
            m.d.sync += cycles.eq(cycles + 1)
            with m.If(pe_busy):
                m.d.sync += pe_cycles.eq(pe_cycles + 1)
            with m.If(dma_stall):
                m.d.sync += stall_cycles.eq(stall_cycles + 1)

        with m.FSM(name="sequencer"):
            with m.State("IDLE"):
                m.d.comb += engine_rst.eq(1)
                m.d.sync += aborting.eq(0)
                with m.If(regs.start):
                    m.d.sync += [busy.eq(1), ptr.eq(regs.desc_ptr)]
                    m.next = "FETCH"
            with m.State("FETCH"):
                m.d.comb += engine_rst.eq(1)
                m.d.sync += [linear_box(top_rd_box, ptr, _DESC_BEATS), beats.eq(0), cycles.eq(0),
                             pe_cycles.eq(0), stall_cycles.eq(0)]
                with m.If(ptr[aw:].any()):  # DESC_PTR past the address space: not fetched
                    m.d.sync += [error_code.eq(Status.OVERFLOW.value), error_addr.eq(ptr)]
                    m.next = "ERROR"
                with m.Else():
                    m.next = "FETCH_CMD"
            with m.State("FETCH_CMD"):
                m.d.comb += [dma.rd_cmd.valid.eq(1), dma.rd_cmd.payload.eq(top_rd_box)]
                with m.If(dma.rd_cmd.ready):
                    m.next = "FETCH_DATA"
            with m.State("FETCH_DATA"):
                m.d.comb += [dma.rd_data.ready.eq(1), dma.rd_status.ready.eq(1)]
                with m.If(dma.rd_data.valid):
                    m.d.sync += [desc.eq((desc.as_value() >> 128)
                                         | (dma.rd_data.payload.data << (128 * (_DESC_BEATS - 1))))]
                with m.If(dma.rd_status.valid):
                    with m.If(dma.rd_status.payload.code != Status.OK):
                        m.d.sync += [error_code.eq(dma.rd_status.payload.code.as_value()),
                                     error_addr.eq(dma.rd_status.payload.addr)]
                        m.next = "ERROR"
                    with m.Else():
                        m.next = "DISPATCH"
            with m.State("DISPATCH"):
                with m.If(self._refused(desc, engines, aw)):
                    m.d.sync += [error_code.eq(ERROR_BAD_DESCRIPTOR), error_addr.eq(ptr)]
                    m.next = "ERROR"
                with m.Else():
                    m.d.sync += active.eq(desc.core)
                    m.next = "START"
            with m.State("START"):
                m.d.comb += engine_on.eq(1)
                for k, engine in enumerate(engines):
                    m.d.comb += engine.start.eq(active == k)
                m.next = "RUN"
            with m.State("RUN"):
                m.d.comb += engine_on.eq(1)
                for k, engine in enumerate(engines):
                    with m.If(active == k):
                        with m.If(engine.error):
                            m.d.sync += [error_code.eq(engine.error_code),
                                         error_addr.eq(engine.error_addr)]
                            m.next = "ERROR"
                        with m.Elif(engine.done):
                            m.d.sync += linear_box(top_wr_box, desc.cycles_addr, 1)
                            m.next = "CYCLES_CMD"
            with m.State("CYCLES_CMD"):
                m.d.comb += [dma.wr_cmd.valid.eq(1), dma.wr_cmd.payload.eq(top_wr_box)]
                with m.If(dma.wr_cmd.ready):
                    m.next = "CYCLES_DATA"
            with m.State("CYCLES_DATA"):
                sent = Signal()
                m.d.comb += [dma.wr_data.valid.eq(~sent),
                             dma.wr_data.payload.data.eq(
                                 cycles | (pe_cycles << 64) | (stall_cycles << 96)),
                             dma.wr_status.ready.eq(1)]
                with m.If(dma.wr_data.ready):
                    m.d.sync += sent.eq(1)
                with m.If(dma.wr_status.valid):
                    m.d.sync += sent.eq(0)
                    with m.If(dma.wr_status.payload.code != Status.OK):
                        m.d.sync += [error_code.eq(4 | dma.wr_status.payload.code.as_value()),
                                     error_addr.eq(dma.wr_status.payload.addr)]
                        m.next = "ERROR"
                    with m.Elif((desc.flags & FLAG_LAST).bool() | (desc.next_desc == 0)):
                        m.d.comb += regs.done.eq(1)
                        m.d.sync += busy.eq(0)
                        m.next = "IDLE"
                    with m.Else():
                        m.d.sync += ptr.eq(desc.next_desc)
                        m.next = "FETCH"
            with m.State("ERROR"):
                stopped = aborting & ((error_code == ERROR_ABORTED)
                                      | (error_code == Status.OVERFLOW.value)
                                      | (error_code == (4 | Status.OVERFLOW.value)))
                raise_error(Mux(stopped, ERROR_ABORTED, error_code),
                            Mux(stopped, ptr, error_addr))
                m.d.sync += busy.eq(0)
                m.next = "IDLE"
        return m
