"""cocotb testbench of :class:`fcircnn.hw.axi_dma.AxiDma` (toplevel ``axi_dma``).

DDR is cocotbext-axi's ``AxiRam`` (subclassed by :class:`FaultRam` to answer SLVERR on chosen
addresses and to add random read latency). Tiles are drawn from the real layer shapes of C3D and
3D ResNet-18 on their ZCU102 accelerators (edge tiles and padded borders included) and compared
byte for byte with :mod:`fcircnn.models.layout`. :class:`ProtocolMonitor` watches every channel
and checks the AXI4 rules the DMA promises.

Parameters (:func:`fcircnn.sim.runner.tb_params`): ``seed``, ``boxes`` (tiles per test).
"""

from __future__ import annotations

import random
import warnings
from collections import deque

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge, ReadOnly, RisingEdge

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from cocotbext.axi import AxiBus
    from cocotbext.axi.axi_ram import AxiRamRead, AxiRamWrite
    from cocotbext.axi.memory import Memory

from fcircnn.arch.geometry import CoreGeometry
from fcircnn.gen.dma_plan import FeatureMap, conv_input_range, plan_read_box, plan_write_box
from fcircnn.hw.axi_dma_box import Status, box_layout, status_layout
from fcircnn.hw.axi_dma_read import read_beat_layout
from fcircnn.models.config import builtin_path, load_accelerator
from fcircnn.models.layout import pack_box, pack_ncdhw8, unpack_ncdhw8
from fcircnn.sim.runner import pack, tb_params, unpack

warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"cocotbext\..*")
warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"cocotb_bus\..*")

AW = 40
#: Cycles the DMA may take to return to idle after the last outstanding response of a failed
#: transfer (checked by the fault tests).
IDLE_BOUND = 64


# ------------------------------------------------------------------------------------------
# DDR model with faults


class _Faults:
    def __init__(self):
        self.ranges: list[tuple[int, int]] = []
        self.rng = random.Random(0)
        self.max_latency = 0

    def hit(self, addr: int) -> bool:
        return any(lo <= addr < hi for lo, hi in self.ranges)


class FaultRamRead(AxiRamRead):
    """AxiRamRead that answers SLVERR inside ``faults.ranges`` and waits a random 0..
    ``faults.max_latency`` cycles before some beats (random read latency)."""

    def __init__(self, *args, faults: _Faults, **kwargs):
        self.faults = faults
        super().__init__(*args, **kwargs)

    async def _read(self, address, length):
        f = self.faults
        if f.max_latency and f.rng.random() < 0.2:
            await ClockCycles(self.clock, f.rng.randint(1, f.max_latency))
        if f.hit(address):
            raise OSError(f"injected read fault at {address:#x}")
        return await super()._read(address, length)


class FaultRamWrite(AxiRamWrite):
    """AxiRamWrite that answers SLVERR for bursts touching ``faults.ranges`` (and drops those
    beats)."""

    def __init__(self, *args, faults: _Faults, **kwargs):
        self.faults = faults
        super().__init__(*args, **kwargs)

    async def _write(self, address, data):
        if self.faults.hit(address):
            raise OSError(f"injected write fault at {address:#x}")
        await super()._write(address, data)


class FaultRam(Memory):
    """``AxiRam`` with fault injection (:class:`FaultRamRead`, :class:`FaultRamWrite`)."""

    def __init__(self, bus, clock, reset, size):
        super().__init__(size)
        self.faults = _Faults()
        self.write_if = FaultRamWrite(bus.write, clock, reset, mem=self.mem, faults=self.faults)
        self.read_if = FaultRamRead(bus.read, clock, reset, mem=self.mem, faults=self.faults)

    def channels(self):
        """The five cocotbext-axi channel objects (for pause generators)."""
        return (self.read_if.ar_channel, self.read_if.r_channel, self.write_if.aw_channel,
                self.write_if.w_channel, self.write_if.b_channel)


# ------------------------------------------------------------------------------------------
# Protocol monitor


class ProtocolMonitor:
    """Check the DMA's AXI4 traffic: INCR, 16-byte beats, 1..256 beats, no 4 KB crossing, RLAST
    and WLAST on the right beats, one response per burst, nothing left outstanding."""

    def __init__(self, dut):
        self.dut = dut
        self.errors: list[str] = []
        self.reads: list[tuple[int, int]] = []
        self.writes: list[tuple[int, int]] = []
        self.read_done = 0
        self.write_done = 0
        self.w_beats = 0
        self._r = deque()
        self._w = deque()
        self._b = 0
        self.strobes: list[int] = []
        self.cycle = 0
        self.error_cycle: int | None = None
        cocotb.start_soon(self._run())

    def _burst(self, what, addr, length, size, burst):
        beats = length + 1
        if burst != 1 or size != 4 or addr % 16:
            self.errors.append(f"{what} {addr:#x}: burst {burst} size {size}")
        if addr // 4096 != (addr + 16 * beats - 1) // 4096:
            self.errors.append(f"{what} {addr:#x}+{beats} beats crosses 4 KB")
        return beats

    async def _run(self):
        d = self.dut
        while True:
            await FallingEdge(d.clk)
            await ReadOnly()
            self.cycle += 1
            if int(d.rst.value):
                continue
            if self.error_cycle is None and (
                    (int(d.m_axi__rvalid.value) and int(d.m_axi__rready.value)
                     and int(d.m_axi__rresp.value) >= 2)
                    or (int(d.m_axi__bvalid.value) and int(d.m_axi__bready.value)
                        and int(d.m_axi__bresp.value) >= 2)):
                self.error_cycle = self.cycle
            if int(d.m_axi__arvalid.value) and int(d.m_axi__arready.value):
                a = int(d.m_axi__araddr.value)
                n = self._burst("AR", a, int(d.m_axi__arlen.value), int(d.m_axi__arsize.value),
                                int(d.m_axi__arburst.value))
                self.reads.append((a, n))
                self._r.append([n, 0])
            if int(d.m_axi__rvalid.value) and int(d.m_axi__rready.value):
                if not self._r:
                    self.errors.append("R beat without an outstanding AR")
                else:
                    head = self._r[0]
                    head[1] += 1
                    last = int(d.m_axi__rlast.value)
                    if last != (head[1] == head[0]):
                        self.errors.append(f"RLAST {last} on beat {head[1]} of {head[0]}")
                    if head[1] == head[0]:
                        self._r.popleft()
                        self.read_done += 1
            if int(d.m_axi__awvalid.value) and int(d.m_axi__awready.value):
                a = int(d.m_axi__awaddr.value)
                n = self._burst("AW", a, int(d.m_axi__awlen.value), int(d.m_axi__awsize.value),
                                int(d.m_axi__awburst.value))
                self.writes.append((a, n))
                self._w.append([n, 0])
            if int(d.m_axi__wvalid.value) and int(d.m_axi__wready.value):
                self.w_beats += 1
                self.strobes.append(int(d.m_axi__wstrb.value))
                if not self._w:
                    self.errors.append("W beat before its AW")
                else:
                    head = self._w[0]
                    head[1] += 1
                    last = int(d.m_axi__wlast.value)
                    if last != (head[1] == head[0]):
                        self.errors.append(f"WLAST {last} on beat {head[1]} of {head[0]}")
                    if head[1] == head[0]:
                        self._w.popleft()
                        self._b += 1
            if int(d.m_axi__bvalid.value) and int(d.m_axi__bready.value):
                self.write_done += 1
                if self.write_done > len(self.writes):
                    self.errors.append("B response without a burst")

    def check(self):
        """Assert no rule was broken and every burst was completed exactly once."""
        assert not self.errors, "; ".join(self.errors[:5])
        assert self.read_done == len(self.reads), (self.read_done, len(self.reads))
        assert self.write_done == len(self.writes), (self.write_done, len(self.writes))
        assert not self._r and not self._w


# ------------------------------------------------------------------------------------------
# DUT drivers


class Dma:
    """Drive the DMA's command and data streams (inputs change on the falling edge)."""

    def __init__(self, dut, rng: random.Random):
        self.dut = dut
        self.rng = rng
        self.stall = 0.0

    async def start(self, size):
        d = self.dut
        Clock(d.clk, 5, unit="ns").start()
        self.ram = FaultRam(AxiBus.from_prefix(d, "m_axi_"), d.clk, d.rst, size)
        for name in ("rd_cmd__valid", "wr_cmd__valid", "wr_data__valid", "rd_data__ready",
                     "rd_status__ready", "wr_status__ready", "rd_cmd__payload",
                     "wr_cmd__payload", "wr_data__payload"):
            getattr(d, name).value = 0
        d.rst.value = 1
        await ClockCycles(d.clk, 4)
        d.rst.value = 0
        await ClockCycles(d.clk, 2)
        self.monitor = ProtocolMonitor(d)
        return self.ram

    async def _command(self, prefix, fields):
        d = self.dut
        await FallingEdge(d.clk)
        getattr(d, f"{prefix}_cmd__payload").value = pack(box_layout(AW), fields)
        getattr(d, f"{prefix}_cmd__valid").value = 1
        while True:
            await ReadOnly()
            ready = int(getattr(d, f"{prefix}_cmd__ready").value)
            await FallingEdge(d.clk)
            if ready:
                break
        getattr(d, f"{prefix}_cmd__valid").value = 0

    async def read(self, fields):
        """Run one read command: (beats bytes, (Status, addr), cycles to status)."""
        d = self.dut
        await self._command("rd", fields)
        data, cycles = bytearray(), 0
        while True:
            ready = int(self.rng.random() >= self.stall)
            d.rd_data__ready.value = ready
            d.rd_status__ready.value = 1
            await ReadOnly()
            cycles += 1
            if ready and int(d.rd_data__valid.value):
                beat = unpack(read_beat_layout(), int(d.rd_data__payload.value.to_unsigned()))
                data += beat["data"].to_bytes(16, "little")
            if int(d.rd_status__valid.value):
                st = unpack(status_layout(AW), int(d.rd_status__payload.value.to_unsigned()))
                await FallingEdge(d.clk)
                d.rd_data__ready.value = 0
                return bytes(data), (Status(st["code"]), st["addr"]), cycles
            await FallingEdge(d.clk)

    async def write(self, fields, payload: bytes):
        """Run one write command: ((Status, addr), beats taken, cycles to status)."""
        d = self.dut
        await self._command("wr", fields)
        i, cycles, n = 0, 0, len(payload) // 16
        while True:
            valid = i < n and self.rng.random() >= self.stall
            if valid:
                d.wr_data__payload.value = int.from_bytes(payload[16 * i:16 * i + 16], "little")
            d.wr_data__valid.value = int(valid)
            d.wr_status__ready.value = 1
            await ReadOnly()
            cycles += 1
            if valid and int(d.wr_data__ready.value):
                i += 1
            if int(d.wr_status__valid.value):
                st = unpack(status_layout(AW), int(d.wr_status__payload.value.to_unsigned()))
                await FallingEdge(d.clk)
                d.wr_data__valid.value = 0
                return (Status(st["code"]), st["addr"]), i, cycles
            await FallingEdge(d.clk)

    def backpressure(self, seed: int, stall: float = 0.3, latency: int = 6):
        """Random pauses on all five AXI channels, random read latency, stream stalls."""
        rng = random.Random(seed)

        def pauses():
            while True:
                yield rng.random() < stall

        for channel in self.ram.channels():
            channel.set_pause_generator(pauses())
        self.ram.faults.max_latency = latency
        self.ram.faults.rng = random.Random(seed + 1)
        self.stall = stall


# ------------------------------------------------------------------------------------------
# Tiles from real layers


def _layers():
    out = []
    for acc_name in ("c3d_zcu102", "r3d18_zcu102"):
        acc = load_accelerator(builtin_path(acc_name))
        for layer in acc.network.resolved:
            if layer.kind == "conv":
                out.append((acc_name, layer, acc.core_for(layer)))
    return out


LAYERS = _layers()
MAX_MAP = 1 << 22  # keep DDR images small: layers with larger input maps are skipped


def _tile(rng: random.Random, accelerator: str):
    """A random (layer, input map, read box, output map, write box) from a real layer of
    ``accelerator``'s network, tiled with the core that runs it."""
    candidates = [entry for entry in LAYERS if entry[0] == accelerator]
    while True:
        _, layer, core = rng.choice(candidates)
        slots_in = layer.padded_in_channels // 2
        slots_out = layer.padded_out_channels // 2
        fin = FeatureMap(0, slots_in, layer.in_shape)
        fout = FeatureMap(0, slots_out, layer.conv_shape)
        if fin.size <= MAX_MAP and fout.size <= MAX_MAP:
            break
    tile = (core.td, core.tr, core.tc)
    out_box, in_box = [], []
    for a in range(3):
        n = layer.conv_shape[a]
        starts = list(range(0, n, tile[a]))
        # Edge tiles (first and last) twice as likely: they carry the padding.
        s = rng.choice([*starts, starts[0], starts[-1]])
        cnt = min(tile[a], n - s)
        out_box.append((s, cnt))
        in_box.append(conv_input_range(s, cnt, layer.kernel[a], layer.stride[a],
                                       layer.padding[a]))
    cg = CoreGeometry.of(core, layer.block_size)
    gin = cg.in_groups
    g0 = rng.randrange(0, fin.groups - gin + 1) if fin.groups > gin else 0
    gin = min(gin, fin.groups)
    gout = min(cg.out_groups, fout.groups)
    h0 = rng.randrange(0, fout.groups - gout + 1)
    return layer, fin, ((g0, gin), *in_box), fout, ((h0, gout), *out_box)


def _place(rng, fmap: FeatureMap, limit: int) -> FeatureMap:
    base = 16 * rng.randrange(0, (limit - fmap.size) // 16 + 1)
    return FeatureMap(base, fmap.slots, fmap.shape)


async def _tiles(dut, backpressure: bool):
    params = tb_params()
    seed = params["seed"] + (100 if backpressure else 0)
    rng = random.Random(seed)
    nrng = np.random.default_rng(seed)
    dma = Dma(dut, rng)
    size = 2 * MAX_MAP + 4096
    ram = await dma.start(size)
    if backpressure:
        dma.backpressure(seed)
    for k in range(params["boxes"]):
        layer, fin, rbox, fout, wbox = _tile(rng, ("c3d_zcu102", "r3d18_zcu102")[k % 2])
        dut._log.info("%s: read %s, write %s", layer.name, rbox, wbox)
        # Read: place the input map, fetch the tile box with its padding.
        fin = _place(rng, fin, MAX_MAP)
        re = nrng.integers(-127, 128, size=(fin.slots, *fin.shape))
        im = nrng.integers(-127, 128, size=(fin.slots, *fin.shape))
        ram.write(fin.base, pack_ncdhw8(re, im))
        desc = plan_read_box(fin, *rbox)
        before = len(dma.monitor.reads)
        data, status, _ = await dma.read(desc.fields())
        assert status == (Status.OK, 0), status
        assert data == pack_box(re, im, *rbox), f"{layer.name}: read box {rbox} differs"
        assert dma.monitor.reads[before:] == desc.bursts()
        # Write: an output tile into the output map (slot count not always a multiple of 8).
        fout = _place(rng, fout, MAX_MAP)
        fout = FeatureMap(fout.base + MAX_MAP, fout.slots, fout.shape)
        ore = nrng.integers(-127, 128, size=(fout.slots, *fout.shape))
        oim = nrng.integers(-127, 128, size=(fout.slots, *fout.shape))
        image = bytearray(pack_ncdhw8(ore, oim))
        ram.write(fout.base, bytes(image))
        (g0, ng), *vox = wbox
        last_slots = min(fout.slots, (g0 + ng) * 8)
        desc = plan_write_box(fout, *wbox, slots=last_slots)
        tre = nrng.integers(-127, 128, size=(8 * ng, *(n for _, n in vox)))
        tim = nrng.integers(-127, 128, size=tre.shape)
        before = len(dma.monitor.writes)
        status, taken, _ = await dma.write(desc.fields(), pack_ncdhw8(tre, tim))
        assert status == (Status.OK, 0), status
        assert taken == desc.beats
        assert dma.monitor.writes[before:] == desc.bursts()
        sl = tuple(slice(s, s + n) for s, n in vox)
        s0, s1 = 8 * g0, min(8 * (g0 + ng), fout.slots)
        ore[(slice(s0, s1), *sl)] = tre[: s1 - s0]
        oim[(slice(s0, s1), *sl)] = tim[: s1 - s0]
        got = ram.read(fout.base, fout.size)
        gre, gim = unpack_ncdhw8(got, fout.slots, fout.shape)
        np.testing.assert_array_equal(gre, ore)
        np.testing.assert_array_equal(gim, oim)
        # DDR padding slots (beyond the map's slot count) untouched: WSTRB.
        raw = np.frombuffer(got, np.int8).reshape(fout.groups, *fout.shape, 8, 2)
        tail = fout.slots - 8 * (fout.groups - 1)
        assert not raw[fout.groups - 1, ..., tail:, :].any()
    await ClockCycles(dut.clk, 20)
    dma.monitor.check()


@cocotb.test()
async def tiles(dut):
    """Random C3D / 3D ResNet-18 tiles, read with padding and written back; no back-pressure."""
    await _tiles(dut, backpressure=False)


@cocotb.test()
async def tiles_backpressure(dut):
    """The same under random pauses on AR/R/AW/W/B, random read latency and stream stalls."""
    await _tiles(dut, backpressure=True)


async def _faults(dut, direction):
    seed = tb_params()["seed"] + 7
    rng = random.Random(seed)
    dma = Dma(dut, rng)
    ram = await dma.start(1 << 16)
    dma.backpressure(seed, stall=0.2, latency=3)
    fmap = FeatureMap(0x100, 24, (2, 5, 9))
    image = bytes(random.Random(seed).randrange(256) for _ in range(fmap.size))
    ram.write(fmap.base, image)
    box = ((0, 3), (0, 2), (-1, 6), (-1, 11)) if direction == "read" else \
        ((0, 3), (0, 2), (0, 5), (0, 9))
    plan = plan_read_box if direction == "read" else plan_write_box
    desc = plan(fmap, *box, merge=False)
    for k in (0, 4, len(desc.bursts()) - 1):
        addr, beats = desc.bursts()[k]
        bad = addr + 16 * rng.randrange(beats)
        ram.faults.ranges = [(bad, bad + 16)]
        if direction == "read":
            data, status, _ = await dma.read(desc.fields())
            assert status == (Status.BUS_ERROR, bad), (status, hex(bad))
            assert _ref_box_bytes(image, fmap, box, desc).startswith(data)
        else:
            status, taken, _ = await dma.write(desc.fields(), bytes(16 * desc.beats))
            assert status == (Status.BUS_ERROR, addr), (status, hex(addr))
            assert taken == desc.beats
        # Status (and idle) within a bounded number of cycles of the error response: the
        # outstanding bursts (and, writing, the rest of the box's beats) at <= 4 cycles a beat
        # under this back-pressure.
        ram.faults.ranges = []
        took = dma.monitor.cycle - dma.monitor.error_cycle
        assert took <= IDLE_BOUND + 4 * desc.beats, took
        dma.monitor.error_cycle = None
        await RisingEdge(dut.clk)
        assert not int(dut.rd_busy.value) and not int(dut.wr_busy.value)
    # A clean transfer afterwards works and the protocol stayed legal.
    if direction == "read":
        data, status, _ = await dma.read(desc.fields())
        assert status[0] == Status.OK and data == _ref_box_bytes(image, fmap, box, desc)
    else:
        status, taken, _ = await dma.write(desc.fields(), bytes(16 * desc.beats))
        assert status[0] == Status.OK
    await ClockCycles(dut.clk, 20)
    dma.monitor.check()


def _ref_box_bytes(image, fmap, box, desc):
    re, im = unpack_ncdhw8(image, fmap.groups * 8, fmap.shape)
    return pack_box(re, im, *box)


@cocotb.test()
async def read_faults(dut):
    """SLVERR on a read: error flag with the failing beat's address, drain, idle, recover."""
    await _faults(dut, "read")


@cocotb.test()
async def write_faults(dut):
    """SLVERR on a write: error flag with the failing burst's address, drain, idle, recover."""
    await _faults(dut, "write")


@cocotb.test()
async def bad_commands(dut):
    """Unaligned base, empty box, write box with padding: flagged, no bus traffic."""
    dma = Dma(dut, random.Random(0))
    ram = await dma.start(1 << 12)
    ram.write(0, bytes(range(256)) * 16)
    fmap = FeatureMap(0x100, 8, (2, 2, 2))
    good = plan_read_box(fmap, (0, 1), (0, 2), (0, 2), (0, 2), merge=False).fields()
    for change in ({"addr": 0x108}, {"groups": 0}, {"h_len": 0}, {"stride_d": 0x18}):
        data, status, _ = await dma.read(good | change)
        assert status[0] == Status.BAD_COMMAND and data == b""
        status, taken, _ = await dma.write(good | change, bytes(16 * 8))
        assert status[0] == Status.BAD_COMMAND and taken == 0
    padded = plan_read_box(fmap, (0, 1), (-1, 3), (0, 2), (0, 2)).fields()
    status, taken, _ = await dma.write(padded, bytes(16 * 12))
    assert status[0] == Status.BAD_COMMAND and taken == 0
    assert dma.monitor.reads == [] and dma.monitor.writes == []
    assert ram.read(0, 4096) == bytes(range(256)) * 16
