"""AXI4-Lite control register file of the accelerator (``s_axi_control``).

Implements the register map of :mod:`fcircnn.arch.registers` (offsets, fields, access
rules, the unmapped offsets answered ``SLVERR``), which states it once for the hardware, the
generators and the host driver.

(:data:`~fcircnn.arch.registers.REGISTERS`, :data:`~fcircnn.arch.registers.FIELDS`,
:data:`~fcircnn.arch.registers.IDENT`, :data:`~fcircnn.arch.registers.VERSION`.)
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from fcircnn.arch.ip import CONTROL_BUS
from fcircnn.arch.registers import (
    CONTROL_ADDR_WIDTH,
    FIELDS,
    IDENT,
    MIN_ADDR_WIDTH,
    REGISTERS,
    VERSION,
    WINDOWS,
    Field,
    Register,
    offset,
)

from .common import check_positive, rejecting

__all__ = [
    "FIELDS",
    "IDENT",
    "REGISTERS",
    "RESP_OKAY",
    "RESP_SLVERR",
    "VERSION",
    "AXI4LiteSignature",
    "ControlRegisters",
    "Field",
    "Register",
    "offset",
]

def _port(register: str) -> str:
    """The port of a 64-bit register pair: ``RD_BASE`` -> ``rd_base``."""
    return register.lower()


#: ``xRESP`` codes used by the register file.
RESP_OKAY, RESP_SLVERR = 0, 2

def _check_int(name: str, value, lo: int, hi: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an integer, not {value!r}")
    if not lo <= value <= hi:
        raise ValueError(f"{name} must be in {lo}..{hi}, not {value}")


class AXI4LiteSignature(wiring.Signature):
    """AXI4-Lite manager signature (AW, W, B, AR, R channels).

    Member names are the AXI signal names in lower case; directions are the manager's, so a
    subordinate declares ``In(AXI4LiteSignature(...))``. A port ``s_axi_control`` becomes
    ``s_axi_control__awaddr`` etc. in Verilog (cocotbext-axi:
    ``AxiLiteBus.from_prefix(dut, "s_axi_control_")``).

    Parameters
    ----------
    addr_width : int
        1..64.
    data_width : int
        32 or 64.
    """

    def __init__(self, *, addr_width: int = 12, data_width: int = 32):
        _check_int("addr_width", addr_width, 1, 64)
        if not isinstance(data_width, int) or isinstance(data_width, bool):
            raise TypeError(f"data_width must be an integer, not {data_width!r}")
        if data_width not in (32, 64):
            raise ValueError(f"data_width must be 32 or 64, not {data_width}")
        self.addr_width, self.data_width = addr_width, data_width
        super().__init__({
            "awaddr": Out(addr_width), "awprot": Out(3), "awvalid": Out(1), "awready": In(1),
            "wdata": Out(data_width), "wstrb": Out(data_width // 8), "wvalid": Out(1),
            "wready": In(1),
            "bresp": In(2), "bvalid": In(1), "bready": Out(1),
            "araddr": Out(addr_width), "arprot": Out(3), "arvalid": Out(1), "arready": In(1),
            "rdata": In(data_width), "rresp": In(2), "rvalid": In(1), "rready": Out(1),
        })

    def __eq__(self, other):
        return (isinstance(other, AXI4LiteSignature) and other.addr_width == self.addr_width
                and other.data_width == self.data_width)

    def __hash__(self):
        return hash((AXI4LiteSignature, self.addr_width, self.data_width))


class ControlRegisters(wiring.Component):
    """AXI4-Lite register file between the host and the accelerator's engine.

    Contract
    --------
    * The register map is the module's (:data:`REGISTERS`, :data:`FIELDS`).
    * AXI4-Lite subordinate, 32-bit data, one write and one read outstanding (independent of
      each other). AW and W are accepted independently, in either order or together; the
      write takes effect, and ``BVALID`` rises, the cycle after both were accepted; ``AWREADY``
      and ``WREADY`` stay low until the response has been taken. ``RVALID`` rises the cycle
      after the AR handshake, ``ARREADY`` is low while a response is pending. Every READY is
      a function of internal state only, never of a VALID; VALIDs never wait for a READY.
    * ``BRESP``/``RRESP`` are ``OKAY`` for mapped offsets and ``SLVERR`` for unmapped ones
      (writes ignored, reads 0). ``WSTRB`` is honoured byte by byte on every write (RW
      registers, ISR clears, the start bit lives in byte 0).
    * The descriptor pointer and the memory windows are 64-bit RW pairs on the ports of the
      same names (the window limits reset to all ones: the whole address space).
    * Writing 1 to CTRL.start while ``busy`` is low gives a one-cycle ``start`` pulse the
      next cycle and clears CTRL.done, CTRL.error and the three counters. The engine must raise
      ``busy`` no later than the cycle after ``start`` (back-to-back writes commit at least
      three cycles apart); a start written while ``busy`` or ``start`` is high is ignored.
    * Writing 1 to CTRL.abort while ``busy`` is high gives a one-cycle ``abort`` pulse the
      next cycle (ignored while idle; the bit reads 0). A write of both start and abort while
      idle starts.
    * A ``done`` pulse sets CTRL.done and ISR.done; an ``error`` pulse sets CTRL.error and
      ISR.error and captures ``error_code``/``error_addr`` (kept until the next error). An
      event in the same cycle as a start or an ISR clear wins.
    * ``interrupt`` = GIE & |(IER & ISR), a level from registers (no combinational input path).
    * Counters count the cycles ``busy`` (CYCLES), ``busy & pe_busy`` (PE_BUSY), ``busy &
      dma_stall`` (DMA_STALL) is high, 64-bit, wrapping. Reading a ``_LO`` half latches the
      matching ``_HI`` half, so LO-then-HI reads one consistent 64-bit value.

    Parameters
    ----------
    addr_width : int
        AXI address width, 7..32 (default 12: a 4 KiB window).
    error_code_width : int
        Width of ``error_code``, 1..32 (default 8).
    error_addr_width : int
        Width of ``error_addr``, 1..64 (default 64).
    ident : int
        Value of the ID register, 0..2**32-1 (default :data:`IDENT`).
    version : int
        Value of the VERSION register, 0..2**32-1 (default :data:`VERSION`).

    Ports
    -----
    s_axi_control : In(AXI4LiteSignature(addr_width=addr_width))
    start : Out(1)
        One-cycle pulse: run the descriptor list at ``desc_ptr``.
    abort : Out(1)
        One-cycle pulse: stop the running engine (CTRL.abort).
    busy : In(1)
        The engine is running.
    done, error : In(1)
        One-cycle pulses: the list finished / the engine failed.
    error_code : In(error_code_width)
    error_addr : In(error_addr_width)
        Error details, valid with ``error``.
    desc_ptr : Out(64)
        DESC_PTR_HI:DESC_PTR_LO.
    rd_base, rd_limit, wr_base, wr_limit : Out(64)
        The memory windows' registers (RD_BASE_HI:RD_BASE_LO, ...); the limits reset to all
        ones.
    pe_busy, dma_stall : In(1)
        Performance-counter events.
    interrupt : Out(1)
        Level-sensitive interrupt request.
    """

    def __init__(self, addr_width: int = CONTROL_ADDR_WIDTH, *, error_code_width: int = 8,
                 error_addr_width: int = 64, ident: int = IDENT, version: int = VERSION):
        with rejecting(self):
            _check_int("addr_width", addr_width, MIN_ADDR_WIDTH, 32)
            check_positive("error_code_width", error_code_width, 32)
            check_positive("error_addr_width", error_addr_width, 64)
            _check_int("ident", ident, 0, 2**32 - 1)
            _check_int("version", version, 0, 2**32 - 1)
        self.addr_width = addr_width
        self.error_code_width = error_code_width
        self.error_addr_width = error_addr_width
        self.ident = ident
        self.version = version
        # Created here so a testbench can preset them (e.g. just below 2**32).
        self._counters = {name: Signal(64, name=f"cnt_{name.lower()}")
                          for name in ("CYCLES", "PE_BUSY", "DMA_STALL")}
        super().__init__({
            CONTROL_BUS: In(AXI4LiteSignature(addr_width=addr_width)),
            "start": Out(1),
            "abort": Out(1),
            "busy": In(1),
            "done": In(1),
            "error": In(1),
            "error_code": In(error_code_width),
            "error_addr": In(error_addr_width),
            "desc_ptr": Out(64),
            **{_port(name): Out(64) for pair in WINDOWS.values() for name in pair},
            "pe_busy": In(1),
            "dma_stall": In(1),
            "interrupt": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        bus = self.s_axi_control
        words = {reg.name: reg.offset // 4 for reg in REGISTERS}

        ctrl_done = Signal()
        ctrl_error = Signal()
        gie = Signal()
        ier = Signal(2)
        isr = Signal(2)
        err_code = Signal(32)
        err_addr = Signal(64)
        desc_ptr = Signal(64)
        counters = self._counters
        shadows = {name: Signal(32, name=f"hi_{name.lower()}") for name in counters}

        # ---- write channel: hold AW and W independently, commit when both are held
        aw_held, w_held = Signal(), Signal()
        waddr = Signal(self.addr_width)
        wdata = Signal(32)
        wstrb = Signal(4)
        bvalid = Signal()
        bresp = Signal(2)
        m.d.comb += [
            bus.awready.eq(~aw_held & ~bvalid),
            bus.wready.eq(~w_held & ~bvalid),
            bus.bvalid.eq(bvalid),
            bus.bresp.eq(bresp),
        ]
        with m.If(bus.awvalid & bus.awready):
            m.d.sync += [aw_held.eq(1), waddr.eq(bus.awaddr)]
        with m.If(bus.wvalid & bus.wready):
            m.d.sync += [w_held.eq(1), wdata.eq(bus.wdata), wstrb.eq(bus.wstrb)]
        commit = Signal()
        m.d.comb += commit.eq(aw_held & w_held)
        wword = waddr[2:]
        mapped = Signal()
        m.d.comb += mapped.eq(Cat(wword == w for w in words.values()).any())
        with m.If(commit):
            m.d.sync += [aw_held.eq(0), w_held.eq(0), bvalid.eq(1),
                         bresp.eq(Mux(mapped, RESP_OKAY, RESP_SLVERR))]
        with m.If(bvalid & bus.bready):
            m.d.sync += bvalid.eq(0)

        mask = Cat(wstrb[i].replicate(8) for i in range(4))

        def hit(name):
            return commit & (wword == words[name])

        def merge(old):
            return (old & ~mask) | (wdata & mask)

        # ---- CTRL: start pulse, sticky done/error
        start_accept = Signal()
        m.d.comb += start_accept.eq(hit("CTRL") & wstrb[0] & wdata[0] & ~self.busy & ~self.start)
        m.d.sync += [self.start.eq(start_accept),
                     self.abort.eq(hit("CTRL") & wstrb[0] & wdata[4] & self.busy)]
        with m.If(start_accept):
            m.d.sync += [ctrl_done.eq(0), ctrl_error.eq(0)]
            m.d.sync += [counter.eq(0) for counter in counters.values()]
        with m.Elif(self.busy):
            events = {"CYCLES": Const(1, 1), "PE_BUSY": self.pe_busy, "DMA_STALL": self.dma_stall}
            for name, counter in counters.items():
                with m.If(events[name]):
                    m.d.sync += counter.eq(counter + 1)
        with m.If(self.done):
            m.d.sync += ctrl_done.eq(1)
        with m.If(self.error):
            m.d.sync += [ctrl_error.eq(1), err_code.eq(self.error_code),
                         err_addr.eq(self.error_addr)]

        # ---- interrupts
        with m.If(hit("GIE")):
            m.d.sync += gie.eq(merge(gie)[0])
        with m.If(hit("IER")):
            m.d.sync += ier.eq(merge(ier)[:2])
        isr_clear = Signal(2)
        with m.If(hit("ISR") & wstrb[0]):
            m.d.comb += isr_clear.eq(wdata[:2])
        m.d.sync += isr.eq((isr & ~isr_clear) | Cat(self.done, self.error))
        m.d.comb += self.interrupt.eq(gie & (ier & isr).any())

        # ---- descriptor pointer and memory windows: 64-bit RW pairs
        wide = {"DESC_PTR": desc_ptr}
        for pair in WINDOWS.values():
            for name in pair:
                wide[name] = Signal(64, name=name.lower(),
                                    init=(1 << 64) - 1 if name.endswith("LIMIT") else 0)
        for name, reg in wide.items():
            with m.If(hit(f"{name}_LO")):
                m.d.sync += reg[:32].eq(merge(reg[:32]))
            with m.If(hit(f"{name}_HI")):
                m.d.sync += reg[32:].eq(merge(reg[32:]))
            m.d.comb += getattr(self, _port(name)).eq(reg)

        # ---- read channel
        rvalid = Signal()
        rdata = Signal(32)
        rresp = Signal(2)
        m.d.comb += [
            bus.arready.eq(~rvalid),
            bus.rvalid.eq(rvalid),
            bus.rdata.eq(rdata),
            bus.rresp.eq(rresp),
        ]
        values = {
            "CTRL": Cat(Const(0, 1), self.busy, ctrl_done, ctrl_error),
            "GIE": gie,
            "IER": ier,
            "ISR": isr,
            "ERROR_CODE": err_code,
            "ERROR_ADDR_LO": err_addr[:32],
            "ERROR_ADDR_HI": err_addr[32:],
            **{f"{name}_{half}": reg[bits]
               for name, reg in wide.items()
               for half, bits in (("LO", slice(0, 32)), ("HI", slice(32, 64)))},
            "ID": Const(self.ident, 32),
            "VERSION": Const(self.version, 32),
        }
        for name, counter in counters.items():
            values[f"{name}_LO"] = counter[:32]
            values[f"{name}_HI"] = shadows[name]
        with m.If(bus.arvalid & bus.arready):
            m.d.sync += rvalid.eq(1)
            with m.Switch(bus.araddr[2:]):
                for name, value in values.items():
                    with m.Case(words[name]):
                        m.d.sync += [rdata.eq(value), rresp.eq(RESP_OKAY)]
                        if name.removesuffix("_LO") in counters:
                            base = name.removesuffix("_LO")
                            m.d.sync += shadows[base].eq(counters[base][32:])
                with m.Default():
                    m.d.sync += [rdata.eq(0), rresp.eq(RESP_SLVERR)]
        with m.Elif(rvalid & bus.rready):
            m.d.sync += rvalid.eq(0)
        return m
