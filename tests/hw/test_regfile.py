"""AXI4-Lite control registers (:mod:`fcircnn.hw.regfile`) on Amaranth's simulator and, through
cocotb with cocotbext-axi's ``AxiLiteMaster``, on Verilator and Icarus."""

import random

import pytest
from amaranth.sim import Simulator
from conftest import unit_simulators

from fcircnn.hw.regfile import (
    FIELDS,
    IDENT,
    REGISTERS,
    RESP_OKAY,
    RESP_SLVERR,
    VERSION,
    AXI4LiteSignature,
    ControlRegisters,
    offset,
)
from fcircnn.sim.runner import SIMULATORS, require_simulator, run_cocotb, to_verilog

OFF = {reg.name: reg.offset for reg in REGISTERS}
UNMAPPED = (0x1C, 0x68, 0x6C, 0x100, 0xFFC)


# ------------------------------------------------------------------------------------------
# Bus functional model (Amaranth testbench side)


async def axi_write(ctx, dut, addr, data, strb=0xF, *, aw_delay=0, w_delay=0, b_delay=0):
    """One AXI4-Lite write: AW valid after ``aw_delay`` cycles, W after ``w_delay``, BREADY
    after ``b_delay``. Returns BRESP. Checks that nothing takes effect before both AW and W
    were accepted and that VALIDs are held until their handshakes."""
    bus = dut.s_axi_control
    aw_done = w_done = False
    cycle = 0
    while True:
        aw_on = not aw_done and cycle >= aw_delay
        w_on = not w_done and cycle >= w_delay
        ctx.set(bus.awaddr, addr)
        ctx.set(bus.awvalid, aw_on)
        ctx.set(bus.wdata, data)
        ctx.set(bus.wstrb, strb)
        ctx.set(bus.wvalid, w_on)
        ctx.set(bus.bready, cycle >= b_delay)
        _, _, awready, wready, bvalid, bready, bresp = await ctx.tick().sample(
            bus.awready, bus.wready, bus.bvalid, bus.bready, bus.bresp)
        if bvalid:
            assert aw_done and w_done, "BVALID before AW and W were accepted"
        if bvalid and bready:
            ctx.set(bus.bready, 0)
            return bresp
        aw_done |= aw_on and bool(awready)
        w_done |= w_on and bool(wready)
        if aw_done:
            ctx.set(bus.awvalid, 0)
        if w_done:
            ctx.set(bus.wvalid, 0)
        cycle += 1
        assert cycle < 100, "write hang"


async def axi_read(ctx, dut, addr, *, ar_delay=0, r_delay=0):
    """One AXI4-Lite read; returns ``(RDATA, RRESP)``."""
    bus = dut.s_axi_control
    ar_done = False
    cycle = 0
    while True:
        ar_on = not ar_done and cycle >= ar_delay
        ctx.set(bus.araddr, addr)
        ctx.set(bus.arvalid, ar_on)
        ctx.set(bus.rready, cycle >= r_delay)
        _, _, arready, rvalid, rready, rdata, rresp = await ctx.tick().sample(
            bus.arready, bus.rvalid, bus.rready, bus.rdata, bus.rresp)
        if rvalid and rready:
            ctx.set(bus.rready, 0)
            return int(rdata), int(rresp)
        ar_done |= ar_on and bool(arready)
        if ar_done:
            ctx.set(bus.arvalid, 0)
        cycle += 1
        assert cycle < 100, "read hang"


async def rd(ctx, dut, name):
    data, resp = await axi_read(ctx, dut, OFF[name])
    assert resp == RESP_OKAY, name
    return data


async def wr(ctx, dut, name, data, strb=0xF):
    resp = await axi_write(ctx, dut, OFF[name], data, strb)
    assert resp == RESP_OKAY, name


async def pulse(ctx, signal, *values):
    """Drive ``signal`` high for one cycle; ``values`` are ``(signal, value)`` pairs to set."""
    ctx.set(signal, 1)
    for sig, value in values:
        ctx.set(sig, value)
    await ctx.tick()
    ctx.set(signal, 0)


def run(bench, dut=None):
    dut = dut or ControlRegisters()
    sim = Simulator(dut)
    sim.add_clock(1e-8)

    async def main(ctx):
        await bench(ctx, dut)

    sim.add_testbench(main)
    sim.run()
    return dut


def ctrl(busy=0, done=0, error=0):
    return busy << 1 | done << 2 | error << 3


# ------------------------------------------------------------------------------------------
# Register map


def test_register_table():
    offsets = [reg.offset for reg in REGISTERS]
    assert len(set(offsets)) == len(offsets) and all(o % 4 == 0 for o in offsets)
    assert len({reg.name for reg in REGISTERS}) == len(REGISTERS)
    assert {reg.access for reg in REGISTERS} <= {"RW", "RO", "W1C"}
    assert all(field.register in OFF for field in FIELDS)
    assert offset("CTRL") == 0 and offset("ISR") == 0x0C and offset("DESC_PTR_HI") == 0x24
    assert not set(UNMAPPED) & set(offsets)
    for name in ("CYCLES", "PE_BUSY", "DMA_STALL", "ERROR_ADDR", "DESC_PTR"):
        assert OFF[f"{name}_HI"] == OFF[f"{name}_LO"] + 4


def test_port_names():
    text = to_verilog(ControlRegisters(), "regfile")
    for port in ("input [11:0] s_axi_control__awaddr", "input [31:0] s_axi_control__wdata",
                 "input [3:0] s_axi_control__wstrb", "output [1:0] s_axi_control__bresp",
                 "output [31:0] s_axi_control__rdata", "output [63:0] desc_ptr",
                 "output interrupt", "output start", "output abort",
                 "input [7:0] error_code"):
        assert port in text


def test_reset_values():
    async def bench(ctx, dut):
        for reg in REGISTERS:
            expect = {"ID": IDENT, "VERSION": VERSION}.get(reg.name, 0)
            if "_LIMIT_" in reg.name:  # the memory windows reset to the whole address space
                expect = 0xFFFF_FFFF
            assert await rd(ctx, dut, reg.name) == expect, reg.name
        assert ctx.get(dut.desc_ptr) == 0
        assert ctx.get(dut.interrupt) == 0 and ctx.get(dut.start) == 0

    run(bench)


def test_ident_and_version_parameters():
    async def bench(ctx, dut):
        assert await rd(ctx, dut, "ID") == 0xDEADBEEF
        assert await rd(ctx, dut, "VERSION") == 0x0002_0003

    run(bench, ControlRegisters(ident=0xDEADBEEF, version=0x0002_0003))


def test_read_write_registers():
    async def bench(ctx, dut):
        await wr(ctx, dut, "GIE", 0xFFFF_FFFF)
        assert await rd(ctx, dut, "GIE") == 1
        await wr(ctx, dut, "IER", 0xFFFF_FFFF)
        assert await rd(ctx, dut, "IER") == 3
        await wr(ctx, dut, "IER", 2)
        assert await rd(ctx, dut, "IER") == 2
        await wr(ctx, dut, "GIE", 0)
        assert await rd(ctx, dut, "GIE") == 0
        await wr(ctx, dut, "DESC_PTR_LO", 0x89AB_CDEF)
        await wr(ctx, dut, "DESC_PTR_HI", 0x0123_4567)
        assert await rd(ctx, dut, "DESC_PTR_LO") == 0x89AB_CDEF
        assert await rd(ctx, dut, "DESC_PTR_HI") == 0x0123_4567
        assert ctx.get(dut.desc_ptr) == 0x0123_4567_89AB_CDEF
        # Writes to read-only registers and bits are answered OKAY and change nothing.
        for name in ("ERROR_CODE", "ERROR_ADDR_LO", "ERROR_ADDR_HI", "CYCLES_LO", "CYCLES_HI",
                     "PE_BUSY_LO", "DMA_STALL_HI", "ID", "VERSION"):
            await wr(ctx, dut, name, 0xFFFF_FFFF)
            expect = {"ID": IDENT, "VERSION": VERSION}.get(name, 0)
            assert await rd(ctx, dut, name) == expect, name
        await wr(ctx, dut, "CTRL", 0xFFFF_FFFE)  # busy/done/error are read-only, start not set
        assert await rd(ctx, dut, "CTRL") == 0
        assert await rd(ctx, dut, "DESC_PTR_LO") == 0x89AB_CDEF

    run(bench)


def test_wstrb():
    async def bench(ctx, dut):
        await wr(ctx, dut, "DESC_PTR_LO", 0x1122_3344)
        await wr(ctx, dut, "DESC_PTR_LO", 0xAABB_CCDD, strb=0b0101)
        assert await rd(ctx, dut, "DESC_PTR_LO") == 0x11BB_33DD
        await wr(ctx, dut, "DESC_PTR_HI", 0xAABB_CCDD, strb=0b1000)
        assert await rd(ctx, dut, "DESC_PTR_HI") == 0xAA00_0000
        await wr(ctx, dut, "DESC_PTR_HI", 0x1234_5678, strb=0)
        assert await rd(ctx, dut, "DESC_PTR_HI") == 0xAA00_0000
        await wr(ctx, dut, "IER", 3, strb=0b1110)  # enables live in byte 0
        assert await rd(ctx, dut, "IER") == 0
        await wr(ctx, dut, "GIE", 1, strb=0b0001)
        assert await rd(ctx, dut, "GIE") == 1
        # The start bit needs byte 0.
        await wr(ctx, dut, "CTRL", 1, strb=0b1110)
        assert ctx.get(dut.start) == 0
        # ISR clears need byte 0.
        await pulse(ctx, dut.done)
        await wr(ctx, dut, "ISR", 1, strb=0b0010)
        assert await rd(ctx, dut, "ISR") == 1
        await wr(ctx, dut, "ISR", 1, strb=0b0001)
        assert await rd(ctx, dut, "ISR") == 0

    run(bench)


def test_unmapped_slverr():
    async def bench(ctx, dut):
        await wr(ctx, dut, "DESC_PTR_LO", 0x5555_5555)
        for addr in UNMAPPED:
            assert await axi_write(ctx, dut, addr, 0xFFFF_FFFF) == RESP_SLVERR, hex(addr)
            assert await axi_read(ctx, dut, addr) == (0, RESP_SLVERR), hex(addr)
        # Aliases of mapped registers do not exist (the whole 4 KiB window is decoded).
        assert await axi_read(ctx, dut, 0x820) == (0, RESP_SLVERR)
        assert await rd(ctx, dut, "DESC_PTR_LO") == 0x5555_5555
        assert await rd(ctx, dut, "GIE") == 0 and await rd(ctx, dut, "IER") == 0
        # The byte address bits 1..0 are ignored.
        assert await axi_read(ctx, dut, OFF["DESC_PTR_LO"] + 2) == (0x5555_5555, RESP_OKAY)

    run(bench)


@pytest.mark.parametrize(("aw_delay", "w_delay", "b_delay"),
                         [(0, 0, 0), (0, 4, 0), (4, 0, 0), (2, 2, 3), (0, 1, 5), (3, 0, 2)])
def test_write_channel_orderings(aw_delay, w_delay, b_delay):
    async def bench(ctx, dut):
        resp = await axi_write(ctx, dut, OFF["DESC_PTR_HI"], 0xCAFE_F00D, aw_delay=aw_delay,
                               w_delay=w_delay, b_delay=b_delay)
        assert resp == RESP_OKAY
        assert ctx.get(dut.desc_ptr) == 0xCAFE_F00D << 32
        resp = await axi_write(ctx, dut, 0x1C, 0, aw_delay=w_delay, w_delay=aw_delay,
                               b_delay=b_delay)
        assert resp == RESP_SLVERR
        data, resp = await axi_read(ctx, dut, OFF["DESC_PTR_HI"], ar_delay=aw_delay,
                                    r_delay=b_delay)
        assert (data, resp) == (0xCAFE_F00D, RESP_OKAY)

    run(bench)


def test_one_channel_waits_for_the_other():
    """AW accepted alone: no effect, W not ready-gated by it, AW not accepted again."""
    async def bench(ctx, dut):
        bus = dut.s_axi_control
        ctx.set(bus.awaddr, OFF["GIE"])
        ctx.set(bus.awvalid, 1)
        await ctx.tick().until(bus.awready)
        ctx.set(bus.awvalid, 0)
        for _ in range(5):
            await ctx.tick()
            assert not ctx.get(bus.awready) and ctx.get(bus.wready)
            assert not ctx.get(bus.bvalid)
        ctx.set(bus.wdata, 1)
        ctx.set(bus.wstrb, 0xF)
        ctx.set(bus.wvalid, 1)
        await ctx.tick().until(bus.wready)
        ctx.set(bus.wvalid, 0)
        await ctx.tick().until(bus.bvalid)
        # The response is held until BREADY, and no new write is accepted meanwhile.
        for _ in range(3):
            assert ctx.get(bus.bvalid) and not ctx.get(bus.awready) and not ctx.get(bus.wready)
            await ctx.tick()
        ctx.set(bus.bready, 1)
        await ctx.tick()
        ctx.set(bus.bready, 0)
        assert not ctx.get(bus.bvalid)
        assert await rd(ctx, dut, "GIE") == 1

    run(bench)


def test_ready_does_not_depend_on_valid():
    """Toggling a VALID within a cycle never changes any READY or response VALID."""
    async def bench(ctx, dut):
        bus = dut.s_axi_control
        outs = (bus.awready, bus.wready, bus.arready, bus.bvalid, bus.rvalid)
        for _ in range(3):
            before = [ctx.get(s) for s in outs]
            for valid in (bus.awvalid, bus.wvalid, bus.arvalid, bus.bready, bus.rready):
                ctx.set(valid, 1)
                assert [ctx.get(s) for s in outs] == before
                ctx.set(valid, 0)
            # Move to another state: an accepted AW.
            ctx.set(bus.awvalid, 1)
            await ctx.tick()
            ctx.set(bus.awvalid, 0)

    run(bench)


def test_read_and_write_concurrently():
    async def bench(ctx, dut):
        await wr(ctx, dut, "DESC_PTR_LO", 7)
        bus = dut.s_axi_control
        for name, value in (("awaddr", OFF["DESC_PTR_LO"]), ("wdata", 9), ("wstrb", 0xF),
                            ("araddr", OFF["DESC_PTR_LO"]), ("awvalid", 1), ("wvalid", 1),
                            ("arvalid", 1), ("bready", 1), ("rready", 1)):
            ctx.set(getattr(bus, name), value)
        await ctx.tick()  # AW, W and AR accepted in one cycle
        for name in ("awvalid", "wvalid", "arvalid"):
            ctx.set(getattr(bus, name), 0)
        got = {}
        for _ in range(4):
            _, _, bv, rv, rdata = await ctx.tick().sample(bus.bvalid, bus.rvalid, bus.rdata)
            if bv:
                got["b"] = True
            if rv:
                got["r"] = int(rdata)
        assert got == {"b": True, "r": 7}
        assert await rd(ctx, dut, "DESC_PTR_LO") == 9

    run(bench)


# ------------------------------------------------------------------------------------------
# Control, status and interrupts


async def start(ctx, dut, value=1, port="start"):
    """Write ``value`` to CTRL (default: CTRL.start); return the cycles (relative to the
    response) the ``port`` pulse was high."""
    bus = dut.s_axi_control
    ctx.set(bus.awaddr, 0)
    ctx.set(bus.wdata, value)
    ctx.set(bus.wstrb, 0xF)
    ctx.set(bus.awvalid, 1)
    ctx.set(bus.wvalid, 1)
    ctx.set(bus.bready, 1)
    seen = []
    for cycle in range(8):
        _, _, s = await ctx.tick().sample(getattr(dut, port))
        ctx.set(bus.awvalid, 0)
        ctx.set(bus.wvalid, 0)
        if s:
            seen.append(cycle)
    ctx.set(bus.bready, 0)
    return seen


def test_abort_pulses_only_while_busy():
    """CTRL.abort (bit 4): one ``abort`` pulse when written while ``busy``, nothing while
    idle; it reads 0; start and abort together while idle only start."""
    async def bench(ctx, dut):
        assert await start(ctx, dut, 1 << 4, "abort") == []  # idle: ignored
        ctx.set(dut.busy, 1)
        assert len(await start(ctx, dut, 1 << 4, "abort")) == 1
        assert await rd(ctx, dut, "CTRL") == ctrl(busy=1)  # abort reads 0
        assert await start(ctx, dut, 0x0F, "abort") == []  # bit 4 clear: no abort
        ctx.set(dut.busy, 0)
        assert await start(ctx, dut, 0x11, "abort") == []  # idle: start, no abort
        assert len(await start(ctx, dut, 0x11, "start")) == 1

    run(bench)


def test_start_pulse_and_sticky_status():
    async def bench(ctx, dut):
        assert len(await start(ctx, dut)) == 1  # exactly one cycle
        ctx.set(dut.busy, 1)
        assert await rd(ctx, dut, "CTRL") == ctrl(busy=1)
        assert await start(ctx, dut) == []  # ignored while busy
        await pulse(ctx, dut.done, (dut.busy, 0))
        assert await rd(ctx, dut, "CTRL") == ctrl(done=1)
        for _ in range(3):  # sticky
            assert await rd(ctx, dut, "CTRL") == ctrl(done=1)
        assert await rd(ctx, dut, "ISR") == 1
        assert len(await start(ctx, dut)) == 1
        assert await rd(ctx, dut, "CTRL") == 0  # done cleared by the start
        ctx.set(dut.busy, 1)
        await pulse(ctx, dut.error, (dut.error_code, 0x5A), (dut.error_addr, 0xAB_1234_5678))
        await pulse(ctx, dut.done, (dut.busy, 0))
        assert await rd(ctx, dut, "CTRL") == ctrl(done=1, error=1)
        assert await rd(ctx, dut, "ERROR_CODE") == 0x5A
        assert await rd(ctx, dut, "ERROR_ADDR_LO") == 0x1234_5678
        assert await rd(ctx, dut, "ERROR_ADDR_HI") == 0xAB
        assert await rd(ctx, dut, "ISR") == 3
        assert len(await start(ctx, dut)) == 1
        assert await rd(ctx, dut, "CTRL") == 0
        # The error details are kept until the next error; ISR until it is cleared.
        assert await rd(ctx, dut, "ERROR_CODE") == 0x5A
        assert await rd(ctx, dut, "ISR") == 3

    run(bench)


def test_start_accepted_again_while_engine_idle():
    """Start is refused only while ``busy`` (or its own pulse) is high: an engine that never
    went busy can be started again."""
    async def bench(ctx, dut):
        assert len(await start(ctx, dut)) == 1
        assert len(await start(ctx, dut)) == 1  # the engine never went busy: accepted again

    run(bench)


def test_interrupt_logic():
    async def bench(ctx, dut):
        await pulse(ctx, dut.done)
        assert await rd(ctx, dut, "ISR") == 1  # status regardless of enables
        assert not ctx.get(dut.interrupt)
        await wr(ctx, dut, "IER", 1)
        assert not ctx.get(dut.interrupt)  # GIE off
        await wr(ctx, dut, "GIE", 1)
        assert ctx.get(dut.interrupt)
        await wr(ctx, dut, "IER", 2)
        assert not ctx.get(dut.interrupt)  # error not pending
        await pulse(ctx, dut.error)
        assert ctx.get(dut.interrupt)
        await wr(ctx, dut, "ISR", 2)  # W1C error only
        assert await rd(ctx, dut, "ISR") == 1
        assert not ctx.get(dut.interrupt)
        await wr(ctx, dut, "IER", 3)
        assert ctx.get(dut.interrupt)  # level: done still pending
        await wr(ctx, dut, "ISR", 0)  # writing 0 clears nothing
        assert ctx.get(dut.interrupt)
        await wr(ctx, dut, "ISR", 0xFFFF_FFFF)
        assert await rd(ctx, dut, "ISR") == 0 and not ctx.get(dut.interrupt)
        await pulse(ctx, dut.error)
        assert ctx.get(dut.interrupt)
        await wr(ctx, dut, "GIE", 0)
        assert not ctx.get(dut.interrupt)

    run(bench)


def test_event_wins_over_isr_clear():
    async def bench(ctx, dut):
        await pulse(ctx, dut.done)
        bus = dut.s_axi_control
        for name, value in (("awaddr", OFF["ISR"]), ("wdata", 1), ("wstrb", 0xF),
                            ("awvalid", 1), ("wvalid", 1), ("bready", 1)):
            ctx.set(getattr(bus, name), value)
        await ctx.tick()  # AW and W accepted
        ctx.set(bus.awvalid, 0)
        ctx.set(bus.wvalid, 0)
        await pulse(ctx, dut.done)  # the commit cycle
        assert await rd(ctx, dut, "ISR") == 1

    run(bench)


def test_counters():
    rng = random.Random(3)

    async def bench(ctx, dut):
        # Nothing counts while idle.
        ctx.set(dut.pe_busy, 1)
        ctx.set(dut.dma_stall, 1)
        await ctx.tick().repeat(10)
        for name in ("CYCLES_LO", "PE_BUSY_LO", "DMA_STALL_LO"):
            assert await rd(ctx, dut, name) == 0
        expect = {"CYCLES": 0, "PE_BUSY": 0, "DMA_STALL": 0}
        for run_index in range(2):
            await start(ctx, dut)
            expect = dict.fromkeys(expect, 0)
            ctx.set(dut.busy, 1)
            for _ in range(50 + 20 * run_index):
                pe, dma = rng.random() < 0.6, rng.random() < 0.3
                ctx.set(dut.pe_busy, pe)
                ctx.set(dut.dma_stall, dma)
                await ctx.tick()
                expect["CYCLES"] += 1
                expect["PE_BUSY"] += pe
                expect["DMA_STALL"] += dma
            ctx.set(dut.busy, 0)
            await pulse(ctx, dut.done)
            ctx.set(dut.pe_busy, 1)
            ctx.set(dut.dma_stall, 1)
            for name, value in expect.items():
                assert await rd(ctx, dut, f"{name}_LO") == value, name
                assert await rd(ctx, dut, f"{name}_HI") == 0, name
        # Cleared by the next start.
        await start(ctx, dut)
        for name in expect:
            assert await rd(ctx, dut, f"{name}_LO") == 0

    run(bench)


def test_counter_high_half_is_latched():
    """Reads across the 2**32 boundary: LO then HI always form a value between the counter
    before and after the pair, although HI is read several cycles after LO."""
    async def bench(ctx, dut):
        counter = dut._counters["CYCLES"]
        ctx.set(dut.busy, 1)
        ctx.set(counter, 2**32 - 40)
        await ctx.tick()
        values = []
        for _ in range(12):
            before = ctx.get(counter)
            lo = await rd(ctx, dut, "CYCLES_LO")
            hi = await rd(ctx, dut, "CYCLES_HI")
            value = hi << 32 | lo
            assert before <= value <= ctx.get(counter)
            values.append(value)
        assert values[0] < 2**32 < values[-1]
        assert values == sorted(values)
        # HI without a new LO read keeps the latched half.
        ctx.set(counter, 5 << 32)
        assert await rd(ctx, dut, "CYCLES_HI") == values[-1] >> 32

    run(bench)


# ------------------------------------------------------------------------------------------
# Parameters


@pytest.mark.parametrize(("kwargs", "exc", "name"), [
    ({"addr_width": 6}, ValueError, "addr_width"),
    ({"addr_width": 33}, ValueError, "addr_width"),
    ({"addr_width": 12.0}, TypeError, "addr_width"),
    ({"addr_width": True}, TypeError, "addr_width"),
    ({"error_code_width": 0}, ValueError, "error_code_width"),
    ({"error_code_width": 33}, ValueError, "error_code_width"),
    ({"error_addr_width": 65}, ValueError, "error_addr_width"),
    ({"error_addr_width": "64"}, TypeError, "error_addr_width"),
    ({"ident": -1}, ValueError, "ident"),
    ({"ident": 2**32}, ValueError, "ident"),
    ({"version": 1.5}, TypeError, "version"),
])
def test_bad_parameters(kwargs, exc, name):
    with pytest.raises(exc, match=name):
        ControlRegisters(**kwargs)


@pytest.mark.parametrize(("kwargs", "exc", "name"), [
    ({"addr_width": 0}, ValueError, "addr_width"),
    ({"addr_width": "12"}, TypeError, "addr_width"),
    ({"data_width": 128}, ValueError, "data_width"),
    ({"data_width": None}, TypeError, "data_width"),
])
def test_bad_signature_parameters(kwargs, exc, name):
    with pytest.raises(exc, match=name):
        AXI4LiteSignature(**kwargs)


def test_signature_equality_and_narrow_ports():
    assert AXI4LiteSignature(addr_width=8) == AXI4LiteSignature(addr_width=8)
    assert AXI4LiteSignature(addr_width=8) != AXI4LiteSignature(addr_width=9)
    dut = ControlRegisters(7, error_code_width=3, error_addr_width=20)

    async def bench(ctx, dut):
        await pulse(ctx, dut.error, (dut.error_code, 7), (dut.error_addr, 0xFFFFF))
        assert await rd(ctx, dut, "ERROR_CODE") == 7
        assert await rd(ctx, dut, "ERROR_ADDR_LO") == 0xFFFFF
        assert await rd(ctx, dut, "ERROR_ADDR_HI") == 0
        assert await rd(ctx, dut, "VERSION") == VERSION
        assert await axi_read(ctx, dut, 0x68) == (0, RESP_SLVERR)

    run(bench, dut)


# ------------------------------------------------------------------------------------------
# cocotb on the generated Verilog (cocotbext-axi AxiLiteMaster)


@pytest.mark.parametrize("simulator", unit_simulators())
def test_regfile_cocotb(simulator):
    require_simulator(simulator)
    run_cocotb(ControlRegisters(), "regfile", "fcircnn.sim.tb_regfile", simulator,
               parameters={"seed": 5 + SIMULATORS.index(simulator), "runs": 6, "ops": 120})
