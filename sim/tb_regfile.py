"""cocotb testbench of :class:`fcircnn.hw.regfile.ControlRegisters` (toplevel ``regfile``).

The host is cocotbext-axi's ``AxiLiteMaster`` on ``s_axi_control`` with random pauses on all
five channels; every response is compared with :class:`RegisterModel`, a Python model of the
register map. :class:`Engine` stands in for the accelerator: it raises ``busy`` in the cycle of
each ``start`` pulse, drives ``pe_busy``/``dma_stall`` randomly, finishes with a ``done`` or an
``error`` pulse after a random number of cycles, and counts what the performance counters must
show; it also flags a ``start`` pulse while it is busy. After every access the ``interrupt``
line is compared with the model's GIE & |(IER & ISR).

Parameters (:func:`fcircnn.sim.runner.tb_params`): ``seed``, ``runs`` (engine runs), ``ops``
(random register accesses).
"""

from __future__ import annotations

import random
import warnings

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge, ReadOnly, RisingEdge

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from cocotbext.axi import AxiLiteBus, AxiLiteMaster, AxiResp

from fcircnn.arch.registers import WINDOWS
from fcircnn.hw.regfile import IDENT, REGISTERS, VERSION
from fcircnn.sim.runner import tb_params

warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"cocotbext\..*")
warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"cocotb_bus\..*")

OFF = {reg.name: reg.offset for reg in REGISTERS}
NAME = {reg.offset: reg.name for reg in REGISTERS}
UNMAPPED = (0x1C, 0x68, 0x80, 0x7FC, 0xFFC)
COUNTERS = ("CYCLES", "PE_BUSY", "DMA_STALL")
MASK32 = 0xFFFF_FFFF


class RegisterModel:
    """Expected register contents; engine-driven state is updated from :class:`Engine`."""

    def __init__(self):
        self.gie = 0
        self.ier = 0
        self.isr = 0
        self.desc_ptr = 0
        # the 64-bit RW pairs besides DESC_PTR: the memory windows (limits reset to all ones)
        self.wide = {name: (1 << 64) - 1 if name.endswith("LIMIT") else 0
                     for pair in WINDOWS.values() for name in pair}
        self.busy = 0
        self.done = 0
        self.error = 0
        self.error_code = 0
        self.error_addr = 0
        self.counters = dict.fromkeys(COUNTERS, 0)
        self.shadow = dict.fromkeys(COUNTERS, 0)

    @property
    def interrupt(self) -> int:
        return int(self.gie and bool(self.ier & self.isr))

    def read(self, addr: int) -> tuple[int, AxiResp]:
        """Value and response of a read of ``addr`` (updates the HI latches)."""
        name = NAME.get(addr & ~3)
        if name is None:
            return 0, AxiResp.SLVERR
        for counter in COUNTERS:
            if name == f"{counter}_LO":
                self.shadow[counter] = self.counters[counter] >> 32
                return self.counters[counter] & MASK32, AxiResp.OKAY
            if name == f"{counter}_HI":
                return self.shadow[counter], AxiResp.OKAY
        value = {
            "CTRL": self.busy << 1 | self.done << 2 | self.error << 3,
            "GIE": self.gie,
            "IER": self.ier,
            "ISR": self.isr,
            "ERROR_CODE": self.error_code,
            "ERROR_ADDR_LO": self.error_addr & MASK32,
            "ERROR_ADDR_HI": self.error_addr >> 32,
            "DESC_PTR_LO": self.desc_ptr & MASK32,
            "DESC_PTR_HI": self.desc_ptr >> 32,
            **{f"{n}_LO": v & MASK32 for n, v in self.wide.items()},
            **{f"{n}_HI": v >> 32 for n, v in self.wide.items()},
            "ID": IDENT,
            "VERSION": VERSION,
        }[name]
        return value, AxiResp.OKAY

    def write(self, addr: int, data: int, strb: int) -> AxiResp:
        """Apply a write (not CTRL.start: the engine reports starts); return the response."""
        name = NAME.get(addr & ~3)
        if name is None:
            return AxiResp.SLVERR
        mask = sum(0xFF << (8 * i) for i in range(4) if strb >> i & 1)

        def merge(old):
            return (old & ~mask) | (data & mask)

        if name == "GIE":
            self.gie = merge(self.gie) & 1
        elif name == "IER":
            self.ier = merge(self.ier) & 3
        elif name == "ISR" and strb & 1:
            self.isr &= ~data & 3
        elif name == "DESC_PTR_LO":
            self.desc_ptr = (self.desc_ptr & ~MASK32) | merge(self.desc_ptr & MASK32)
        elif name == "DESC_PTR_HI":
            self.desc_ptr = (self.desc_ptr & MASK32) | merge(self.desc_ptr >> 32) << 32
        elif name[:-3] in self.wide:
            old, half = self.wide[name[:-3]], name[-2:]
            if half == "LO":
                self.wide[name[:-3]] = (old & ~MASK32) | merge(old & MASK32)
            else:
                self.wide[name[:-3]] = (old & MASK32) | merge(old >> 32) << 32
        return AxiResp.OKAY


class Engine:
    """Simulated accelerator engine.

    Inputs are driven at falling edges, so the register file samples each value at exactly one
    rising edge; outputs are sampled there too. A ``start`` pulse makes the engine busy from the
    same cycle for a random 5..40 cycles (or, while :attr:`hold` is set, until it is cleared),
    with random ``pe_busy``/``dma_stall``; it then drops ``busy`` and pulses ``done`` or, at
    random, ``error`` with a random code and address. The model is updated as the values are
    driven (they take effect at the next rising edge).
    """

    def __init__(self, dut, rng: random.Random, model: RegisterModel):
        self.dut = dut
        self.rng = rng
        self.model = model
        self.starts = 0
        self.finished = 0
        self.hold = False
        self.errors: list[str] = []
        for name in ("busy", "done", "error", "pe_busy", "dma_stall", "error_code",
                     "error_addr"):
            getattr(dut, name).value = 0
        cocotb.start_soon(self._run())

    async def _run(self):
        d, m, rng = self.dut, self.model, self.rng
        left = 0
        pulse = None
        while True:
            await FallingEdge(d.clk)
            if pulse is not None:
                pulse.value = 0
                pulse = None
                self.finished += 1
            if int(d.start.value):
                if left:
                    self.errors.append("start pulse while busy")
                self.starts += 1
                # The register file cleared done, error and the counters at the CTRL write.
                m.done = m.error = 0
                m.counters = dict.fromkeys(COUNTERS, 0)
                left = rng.randint(5, 40)
            if left:
                pe, dma = rng.random() < 0.6, rng.random() < 0.3
                d.busy.value, d.pe_busy.value, d.dma_stall.value = 1, int(pe), int(dma)
                m.busy = 1
                m.counters["CYCLES"] += 1
                m.counters["PE_BUSY"] += pe
                m.counters["DMA_STALL"] += dma
                if not self.hold:
                    left -= 1
                continue
            if m.busy:
                d.busy.value, d.pe_busy.value, d.dma_stall.value = 0, 0, 0
                m.busy = 0
                if rng.random() < 0.4:
                    code, addr = rng.getrandbits(8), rng.getrandbits(64)
                    d.error_code.value, d.error_addr.value = code, addr
                    pulse = d.error
                    m.error, m.error_code, m.error_addr = 1, code, addr
                    m.isr |= 2
                else:
                    pulse = d.done
                    m.done = 1
                    m.isr |= 1
                pulse.value = 1


class Host:
    """``AxiLiteMaster`` with random channel pauses, checked against :class:`RegisterModel`."""

    def __init__(self, dut, rng: random.Random, model: RegisterModel):
        self.dut = dut
        self.model = model
        self.rng = rng
        self.axi = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axi_control_"), dut.clk,
                                 dut.rst)
        prng = random.Random(rng.random())

        def pauses(p):
            while True:
                yield prng.random() < p

        for channel in (self.axi.write_if.aw_channel, self.axi.write_if.w_channel,
                        self.axi.write_if.b_channel, self.axi.read_if.ar_channel,
                        self.axi.read_if.r_channel):
            channel.set_pause_generator(pauses(rng.choice((0.0, 0.2, 0.5))))

    async def write(self, addr: int, data: int, strb: int = 0xF, *, check=True):
        """Write the bytes of ``data`` selected by ``strb`` (contiguous) to word ``addr``."""
        lanes = [i for i in range(4) if strb >> i & 1]
        first, count = lanes[0], len(lanes)
        assert lanes == list(range(first, first + count)), "strobes must be contiguous"
        payload = ((data >> (8 * first)) & ((1 << (8 * count)) - 1)).to_bytes(count, "little")
        resp = await self.axi.write(addr + first, payload)
        expect = self.model.write(addr, data, strb)
        if check:
            assert resp.resp == expect, (hex(addr), resp.resp, expect)
        await self.check_interrupt()
        return resp.resp

    async def read(self, addr: int, *, check=True) -> int:
        resp = await self.axi.read(addr, 4)
        value = int.from_bytes(resp.data, "little")
        expect, expect_resp = self.model.read(addr)
        if check:
            name = NAME.get(addr, hex(addr))
            assert (value, resp.resp) == (expect, expect_resp), (name, hex(value), hex(expect))
        return value

    async def check_interrupt(self):
        await ReadOnly()
        assert int(self.dut.interrupt.value) == self.model.interrupt, "interrupt line"
        await RisingEdge(self.dut.clk)


async def setup(dut):
    params = tb_params()
    rng = random.Random(params["seed"])
    Clock(dut.clk, 5, unit="ns").start()
    model = RegisterModel()
    engine = Engine(dut, rng, model)
    dut.rst.value = 1
    host = Host(dut, rng, model)
    await ClockCycles(dut.clk, 4)
    dut.rst.value = 0
    await ClockCycles(dut.clk, 2)
    return params, rng, model, engine, host


def _random_access(rng):
    """A random (addr, data, strb) for a write: mapped or not, any register but CTRL.start."""
    addr = rng.choice([*OFF.values(), *UNMAPPED])
    data = rng.getrandbits(32)
    if addr == OFF["CTRL"]:
        data &= ~1
    first = rng.randrange(4)
    count = rng.randint(1, 4 - first)
    strb = rng.choice((0xF, ((1 << count) - 1) << first))
    return addr, data, strb


@cocotb.test()
async def random_accesses(dut):
    """Random reads and writes (partial strobes, unmapped offsets, reads concurrent with
    writes) against the model, with random pauses on every channel."""
    params, rng, model, engine, host = await setup(dut)
    for reg in REGISTERS:
        await host.read(reg.offset)
    for _ in range(params["ops"]):
        addr, data, strb = _random_access(rng)
        kind = rng.random()
        if kind < 0.4:
            await host.write(addr, data, strb)
        elif kind < 0.7:
            await host.read(addr)
        else:
            # A write and a read of another register at the same time.
            other = rng.choice([a for a in [*OFF.values(), *UNMAPPED] if a != addr])
            task = cocotb.start_soon(host.write(addr, data, strb))
            await host.read(other)
            await task
        assert int(dut.desc_ptr.value) == model.desc_ptr
    assert engine.starts == 0 and not engine.errors


@cocotb.test()
async def engine_runs(dut):
    """Start, busy, done/error, interrupts, counters and the error report over several runs;
    starts written while busy are ignored."""
    params, rng, model, engine, host = await setup(dut)
    await host.write(OFF["DESC_PTR_LO"], 0x1000)
    await host.write(OFF["DESC_PTR_HI"], 0x2)
    assert int(dut.desc_ptr.value) == 0x2_0000_1000
    for run in range(params["runs"]):
        await host.write(OFF["GIE"], rng.getrandbits(1) | (run == 0))
        await host.write(OFF["IER"], 3 if run == 0 else rng.getrandbits(2))
        engine.hold = run % 2 == 1
        starts, finished = engine.starts, engine.finished
        await host.write(OFF["CTRL"], 1)
        if engine.hold:
            for _ in range(100):
                if model.busy:
                    break
                await RisingEdge(dut.clk)
            assert model.busy
            await host.write(OFF["CTRL"], 1)  # ignored: busy
            await host.read(OFF["CTRL"])
            await host.read(OFF["ID"])
            await host.read(OFF["CYCLES_LO"], check=False)  # still counting
            await ClockCycles(dut.clk, rng.randint(1, 30))
            engine.hold = False
        for _ in range(500):
            if engine.finished > finished:
                break
            await RisingEdge(dut.clk)
        assert engine.finished == finished + 1, "engine run did not finish"
        assert engine.starts == starts + 1
        if run == 0:
            assert model.interrupt == 1
        await host.check_interrupt()
        await host.read(OFF["CTRL"])
        await host.read(OFF["ISR"])
        for name in COUNTERS:
            await host.read(OFF[f"{name}_LO"])
            await host.read(OFF[f"{name}_HI"])
        assert model.counters["CYCLES"] >= 5
        for name in ("ERROR_CODE", "ERROR_ADDR_LO", "ERROR_ADDR_HI", "DESC_PTR_LO"):
            await host.read(OFF[name])
        # Clear some or all pending interrupts (W1C).
        await host.write(OFF["ISR"], rng.getrandbits(2) | (run % 3 == 0) * 3)
        await host.read(OFF["ISR"])
    assert not engine.errors, engine.errors
