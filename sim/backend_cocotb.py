"""Driver backend for a cocotb simulation of the accelerator top level ``fcircnn_accel``.

:class:`CocotbBackend` puts cocotbext-axi models on the top level's flat ports: an
``AxiLiteMaster`` on ``s_axi_control_*`` (the driver's registers) and a RAM on ``m_axi_*`` (DDR),
both reset by the active-low ``ap_rst_n`` and clocked by ``ap_clk``; on a two-port top level
the same RAM also answers ``m_axi1_*`` .. ``m_axi3_*`` (one memory, several ports, as HP0..HP3
share the DDR). Memory accesses of the driver go straight into the RAM model (zero simulated
time, as a host writing DDR before the start). The RAM can add random pauses on every AXI
channel, a fixed latency before the first beat of every read burst, and answer ``SLVERR`` for
reads or writes inside chosen address ranges (:meth:`CocotbBackend.inject_fault`).

Use with :class:`fcircnn.runtime.driver.Driver` inside a cocotb test (see
:mod:`fcircnn.sim.tb_accelerator`); the clock and the reset are the testbench's.
"""

from __future__ import annotations

import logging
import math
import random
import warnings
from dataclasses import dataclass

import cocotb
from cocotb.triggers import ClockCycles, RisingEdge, SimTimeoutError, with_timeout
from cocotb.utils import get_sim_time

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from cocotbext.axi import AxiBus, AxiLiteBus, AxiLiteMaster, AxiResp
    from cocotbext.axi.axi_ram import AxiRamRead, AxiRamWrite
    from cocotbext.axi.memory import Memory

from fcircnn.arch.ip import CONTROL_BUS
from fcircnn.arch.ports import MANAGERS
from fcircnn.arch.registers import WINDOW_PAGE_BITS, WINDOWS, offset
from fcircnn.runtime.driver import DriverError
from fcircnn.runtime.image import CYCLES_ENTRY_BYTES, CompiledImage

warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"cocotbext\..*")
warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"cocotb_bus\..*")

__all__ = ["CocotbBackend", "Fault", "FaultAxiRam"]


@dataclass(frozen=True)
class Fault:
    """Answer ``SLVERR`` for ``kind`` (``"read"`` or ``"write"``) beats in
    ``[addr, addr + size)``."""

    addr: int
    size: int
    kind: str

    def __post_init__(self) -> None:
        if self.kind not in ("read", "write"):
            raise ValueError(f"fault kind must be 'read' or 'write', not {self.kind!r}")
        if self.addr < 0 or self.size <= 0:
            raise ValueError(f"fault range must be addr >= 0 and size > 0, not "
                             f"addr={self.addr:#x} size={self.size}")

    def hit(self, addr: int, size: int, kind: str) -> bool:
        """Whether ``size`` bytes at ``addr`` accessed as ``kind`` overlap the fault."""
        return kind == self.kind and addr < self.addr + self.size and self.addr < addr + size


class _RamState:
    def __init__(self, latency: int):
        self.faults: list[Fault] = []
        self.latency = latency
        self.hits = 0
        # The memory windows as the host programmed them (register writes the backend saw),
        # [first byte, last byte] per kind, and every access the model saw outside them.
        self.windows = {"read": [0, (1 << 64) - 1], "write": [0, (1 << 64) - 1]}
        self.outside: list[tuple[str, int, int]] = []
        # Output maps to copy when a cycles entry is written: {cycles_addr: (addr, size)}, and
        # the copies, {cycles_addr: bytes} (CocotbBackend.keep_outputs; maps that share bytes
        # may have the same address and size).
        self.watched: dict[int, tuple[int, int]] = {}
        self.kept: dict[int, bytes] = {}

    def written(self, mem, address: int, size: int) -> None:
        """After a write: copy the output maps of the layers whose cycles entry it holds."""
        for at in [a for a in self.watched if address <= a < address + size]:
            addr, n = self.watched[at]
            self.kept[at] = bytes(mem[addr:addr + n])

    def check(self, addr: int, size: int, kind: str) -> None:
        lo, hi = self.windows[kind]
        if not (lo >> WINDOW_PAGE_BITS << WINDOW_PAGE_BITS <= addr
                and addr + size - 1 <= (hi >> WINDOW_PAGE_BITS << WINDOW_PAGE_BITS)
                + (1 << WINDOW_PAGE_BITS) - 1):
            self.outside.append((kind, addr, size))
        for fault in self.faults:
            if fault.hit(addr, size, kind):
                self.hits += 1
                raise OSError(f"injected {kind} fault at {addr:#x}")


class _Read(AxiRamRead):
    def __init__(self, *args, state: _RamState, **kwargs):
        self.state = state
        self._next = None
        self.bytes_read = 0
        super().__init__(*args, **kwargs)

    async def _read(self, address, length):
        if self.state.latency and address != self._next:  # first beat of a burst
            await ClockCycles(self.clock, self.state.latency)
        self._next = address + length
        self.state.check(address, length, "read")
        self.bytes_read += length
        return await super()._read(address, length)


class _Write(AxiRamWrite):
    def __init__(self, *args, state: _RamState, **kwargs):
        self.state = state
        super().__init__(*args, **kwargs)

    async def _write(self, address, data):
        self.state.check(address, len(data), "write")
        await super()._write(address, data)
        if self.state.watched:
            self.state.written(self.mem, address, len(data))


class FaultAxiRam(Memory):
    """cocotbext-axi ``AxiRam`` with read latency and ``SLVERR`` fault ranges.

    Parameters
    ----------
    bus : cocotbext.axi.AxiBus
    clock, reset
        Handles; ``reset_active_level`` as in ``AxiRam``.
    size : int
        Bytes of memory (addresses ``0 .. size-1``; others answer ``SLVERR``).
    latency : int
        Cycles before the first beat of every read burst.
    buses : sequence of cocotbext.axi.AxiBus
        More ports on the same memory (``read_ifs[1:]``, ``write_ifs[1:]``), each with the
        latency and faults of the first.
    """

    def __init__(self, bus, clock, reset=None, *, reset_active_level: bool = True,
                 size: int, latency: int = 0, buses=()):
        super().__init__(size)
        self.state = _RamState(latency)
        self.write_ifs = [_Write(b.write, clock, reset, reset_active_level, mem=self.mem,
                                 state=self.state) for b in (bus, *buses)]
        self.read_ifs = [_Read(b.read, clock, reset, reset_active_level, mem=self.mem,
                               state=self.state) for b in (bus, *buses)]
        self.read_if, self.write_if = self.read_ifs[0], self.write_ifs[0]

    def channels(self):
        """Every channel object (AR, R, AW, W, B of each port), for pause generators."""
        reads = [c for r in self.read_ifs for c in (r.ar_channel, r.r_channel)]
        writes = [c for w in self.write_ifs for c in (w.aw_channel, w.w_channel, w.b_channel)]
        return (*reads, *writes)


#: Register offset -> (access kind, 0 base / 1 limit, bit shift) of the window registers.
_WINDOW_REGS = {offset(f"{reg}_{half}"): (kind, end, 32 * (half == "HI"))
                for kind, pair in WINDOWS.items() for end, reg in enumerate(pair)
                for half in ("LO", "HI")}


class CocotbBackend:
    """:class:`fcircnn.runtime.driver.Backend` on a simulated ``fcircnn_accel``.

    Parameters
    ----------
    dut : cocotb handle
        The top level (ports ``ap_clk``, ``ap_rst_n``, ``s_axi_control_*``, ``m_axi_*``,
        ``interrupt``).
    ram_size : int
        Bytes of the DDR model; the image must lie below it.
    backpressure : float
        Probability, per cycle and channel, that the RAM pauses AR, R, AW, W or B (0 to <1).
    latency : int
        Extra cycles before the first beat of every read burst.
    seed : int
        Seed of the pause generators.
    period_ns : float
        Clock period (converts timeouts in seconds into simulated time).
    verbose : bool
        Keep the cocotbext-axi models' per-transfer INFO logs (default: warnings only).

    Attributes
    ----------
    ram : FaultAxiRam
        The DDR model (read it directly with ``ram.read(addr, size)``).
    interrupts : int
        Rising edges of ``interrupt`` seen since construction.
    """

    def __init__(self, dut, ram_size: int, *, backpressure: float = 0.0, latency: int = 0,
                 seed: int = 0, period_ns: float = 5.0, verbose: bool = False):
        if not isinstance(ram_size, int) or ram_size <= 0:
            raise ValueError(f"ram_size must be a positive number of bytes, not {ram_size!r}")
        if not 0.0 <= backpressure < 1.0:
            raise ValueError(f"backpressure must be in [0, 1), not {backpressure!r}")
        if not isinstance(latency, int) or latency < 0:
            raise ValueError(f"latency must be a non-negative integer, not {latency!r}")
        self.dut = dut
        self.period_ns = float(period_ns)
        more = [AxiBus.from_prefix(dut, name) for name in MANAGERS[1:]
                if hasattr(dut, f"{name}_arvalid")]  # the further ports the top level has
        self.ram = FaultAxiRam(AxiBus.from_prefix(dut, "m_axi"), dut.ap_clk, dut.ap_rst_n,
                               reset_active_level=False, size=ram_size, latency=latency,
                               buses=more)
        self.axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, CONTROL_BUS), dut.ap_clk,
                                  dut.ap_rst_n, reset_active_level=False)
        if not verbose:
            for model in (*self.ram.read_ifs, *self.ram.write_ifs, self.axil.read_if,
                          self.axil.write_if):
                model.log.setLevel(logging.WARNING)
        if backpressure:
            rng = random.Random(seed)

            def pauses():
                while True:
                    yield rng.random() < backpressure

            for channel in self.ram.channels():
                channel.set_pause_generator(pauses())
        self.interrupts = 0
        self._t0 = get_sim_time("ns")
        cocotb.start_soon(self._watch_interrupt())

    async def _watch_interrupt(self) -> None:
        while True:
            await RisingEdge(self.dut.interrupt)
            self.interrupts += 1

    # ------------------------------------------------------------------------- fault injection

    def inject_fault(self, addr: int, size: int, kind: str) -> Fault:
        """Answer ``SLVERR`` for ``kind`` (``"read"``/``"write"``) beats touching
        ``[addr, addr + size)`` until :meth:`clear_faults`."""
        fault = Fault(addr, size, kind)
        self.ram.state.faults.append(fault)
        return fault

    def clear_faults(self) -> None:
        """Remove every injected fault."""
        self.ram.state.faults.clear()

    @property
    def read_bytes(self) -> list[int]:
        """Bytes read so far through each AXI port (``m_axi``, then ``m_axi1`` ..)."""
        return [r.bytes_read for r in self.ram.read_ifs]

    @property
    def fault_hits(self) -> int:
        """Beats answered ``SLVERR`` by an injected fault so far."""
        return self.ram.state.hits

    # --------------------------------------------------------------------------------- Backend

    def elapsed(self) -> float:
        """Simulated seconds since construction."""
        return (get_sim_time("ns") - self._t0) * 1e-9

    def cycles(self) -> int:
        """Simulated clock cycles since construction."""
        return round((get_sim_time("ns") - self._t0) / self.period_ns)

    async def write_reg(self, offset: int, value: int) -> None:
        resp = await self.axil.write(offset, (value & 0xFFFF_FFFF).to_bytes(4, "little"))
        if resp.resp != AxiResp.OKAY:
            raise DriverError(f"register write at {offset:#x} answered {resp.resp.name}")
        if offset in _WINDOW_REGS:  # the memory model checks every access against them
            kind, end, shift = _WINDOW_REGS[offset]
            old = self.ram.state.windows[kind][end]
            mask = 0xFFFF_FFFF << shift
            self.ram.state.windows[kind][end] = (old & ~mask) | ((value & 0xFFFF_FFFF) << shift)

    @property
    def outside_window(self) -> list[tuple[str, int, int]]:
        """Every access the DDR model saw outside the window programmed for its kind:
        ``(kind, address, bytes)``; the hardware must never issue one."""
        return list(self.ram.state.outside)

    async def read_reg(self, offset: int) -> int:
        resp = await self.axil.read(offset, 4)
        if resp.resp != AxiResp.OKAY:
            raise DriverError(f"register read at {offset:#x} answered {resp.resp.name}")
        return int.from_bytes(resp.data, "little")

    def _check(self, addr: int, size: int) -> None:
        if addr < 0 or addr + size > self.ram.size:
            raise DriverError(f"[{addr:#x}, {addr + size:#x}) is outside the simulated DDR "
                              f"(0..{self.ram.size:#x})")

    async def write_mem(self, addr: int, data: bytes) -> None:
        self._check(addr, len(data))
        self.ram.write(addr, bytes(data))

    async def read_mem(self, addr: int, size: int) -> bytes:
        self._check(addr, size)
        return bytes(self.ram.read(addr, size))

    async def wait_interrupt(self, timeout_s: float) -> bool:
        if int(self.dut.interrupt.value):
            return True
        timeout_ns = max(self.period_ns, math.ceil(timeout_s * 1e9 / self.period_ns)
                         * self.period_ns)
        try:
            await with_timeout(RisingEdge(self.dut.interrupt), timeout_ns, "ns")
        except SimTimeoutError:
            return bool(int(self.dut.interrupt.value))
        return True

    def keep_outputs(self, image: CompiledImage) -> None:
        """From now on, copy each layer's output map when its last descriptor writes its cycles
        entry (:meth:`finished_output`; the driver calls this when it loads ``image``)."""
        last = {d.name: d for d in image.descriptors}
        self.ram.state.watched = {d.cycles_addr: (image.output(name).addr,
                                                  image.output(name).size)
                                  for name, d in last.items()}
        self.ram.state.kept = {}

    def finished_output(self, cycles_addr: int) -> bytes | None:
        """The copy of the output map of the layer whose last descriptor has its cycles entry
        at ``cycles_addr``, taken when that entry was written, or ``None``."""
        return self.ram.state.kept.get(cycles_addr)

    # ------------------------------------------------------------------------------- progress

    def finished_descriptors(self, image: CompiledImage) -> int:
        """Descriptors whose cycles entry is non-zero, read from the RAM model directly (no bus
        traffic, no simulated time)."""
        return sum(
            image.decode_cycles(bytes(self.ram.read(d.cycles_addr, CYCLES_ENTRY_BYTES))).finished
            for d in image.descriptors)
