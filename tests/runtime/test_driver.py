"""Host driver (:mod:`fcircnn.runtime.driver`) against an in-memory model of the accelerator.

:class:`FakeAccelerator` models the register file of :mod:`fcircnn.hw.regfile` (start pulse
ignored while busy, sticky done/error, W1C ISR, ``interrupt = GIE & |(IER & ISR)``, ``_HI``
counter halves latched by the ``_LO`` read) and an engine that, a few accesses after the start,
writes every descriptor's output map and cycles entry (or fails, or hangs until aborted, or
hangs for good).
"""

from __future__ import annotations

import asyncio
import re
import sys
import types

import numpy as np
import pytest

from fcircnn.arch.registers import ERROR_ABORTED, WINDOWS
from fcircnn.hw.regfile import IDENT, VERSION, offset
from fcircnn.models.layout import ncdhw8_size, pack_ncdhw8
from fcircnn.runtime.driver import (
    CTRL,
    GIE,
    IER,
    ISR,
    Counters,
    Driver,
    DriverError,
    DriverTimeout,
    PynqBackend,
    RunStatus,
    error_name,
)
from fcircnn.runtime.image import CompiledImage, CycleEntry, DescriptorInfo

BASE = 0x4000_0000


def make_image(seed: int = 0) -> CompiledImage:
    """Three layers; ``c2`` owns two descriptors (conv then pool), its output is the second's."""
    rng = np.random.default_rng(seed)
    layout = [("c1", 0, 8, (2, 4, 4)), ("c2", 1, 8, (2, 4, 4)), ("c2", 1, 8, (1, 2, 2)),
              ("fc", 2, 4, (1, 1, 1))]
    cursor = BASE + 0x1000
    cycles = BASE + 0x800
    infos = []
    for i, (name, layer, slots, shape) in enumerate(layout):
        infos.append(DescriptorInfo(name, layer, 0, 0, cursor, slots, shape, cycles + 16 * i))
        cursor += -(-ncdhw8_size(slots, *shape) // 0x1000) * 0x1000
    expected = {}
    for d in infos:
        shape = (d.out_slots, *d.out_shape)
        expected[d.name] = (rng.integers(-127, 128, shape).astype(np.int8),
                            rng.integers(-127, 128, shape).astype(np.int8))
    return CompiledImage(bytes(cursor - BASE), BASE, BASE, tuple(infos), expected,
                         network="tiny", accelerator="fake")


class FakeAccelerator:
    """Backend: register file + DDR + an engine model (``mode``: ok, error, hang, corrupt,
    stuck). A hung engine stops two register accesses after CTRL.abort (error 9 at the first
    descriptor's output); a stuck one (a bus that never answers) does not."""

    def __init__(self, image: CompiledImage, mode: str = "ok", *, latency: int = 3,
                 counters: tuple[int, int, int] = (0x1_2345_6789, 0x2_0000_0001, 7)):
        self.image = image
        self.mode = mode
        self.latency = latency
        self.mem = bytearray(image.end - image.base)
        self.regs = {name: 0 for name in ("GIE", "IER", "ISR", "ERROR_CODE", "DESC_PTR_LO",
                                          "DESC_PTR_HI")}
        # The memory windows (reset: every address), which the engine model enforces.
        self.regs.update({f"{r}_{h}": 0xFFFF_FFFF if "LIMIT" in r else 0
                          for pair in WINDOWS.values() for r in pair for h in ("LO", "HI")})
        self.busy = self.done = self.error = False
        self.error_addr = 0
        self.count_values = counters
        self.counters = [0, 0, 0]
        self.shadows = [0, 0, 0]
        self.pending = -1
        self.aborting = -1
        self.log: list[tuple[str, int, int]] = []
        self.time = 0.0
        self.interrupt_waits = 0

    # -- engine
    def _tick(self):
        self.time += 1e-6
        if self.busy and self.aborting >= 0:
            self.aborting -= 1
            if self.aborting < 0:
                self.busy, self.error = False, True
                self.error_addr = self.image.descriptors[0].out_base
                self.regs["ERROR_CODE"] = ERROR_ABORTED
                self.regs["ISR"] |= 2
            return
        if self.busy and self.mode not in ("hang", "stuck"):
            self.pending -= 1
            if self.pending <= 0:
                self._finish()

    def window(self, direction):
        """A window's (first page, last page), as the hardware reads its registers."""
        base, limit = ((self.regs[f"{r}_HI"] << 32 | self.regs[f"{r}_LO"])
                       for r in WINDOWS[direction])
        return base >> 12, limit >> 12

    def _in_window(self, direction, addr, size):
        lo, hi = self.window(direction)
        return lo <= addr >> 12 and (addr + size - 1) >> 12 <= hi

    def _finish(self):
        img = self.image
        desc_ptr = (self.regs["DESC_PTR_HI"] << 32) | self.regs["DESC_PTR_LO"]
        assert desc_ptr == img.desc_ptr
        if not self._in_window("read", desc_ptr, 256):  # as the hardware: code 2, its address
            self.error, self.error_addr = True, desc_ptr
            self.regs["ERROR_CODE"] = 2
            self.regs["ISR"] |= 2
            self.busy = False
            return
        for i, d in enumerate(img.descriptors):
            if self.mode == "error" and i == 2:
                self.error, self.error_addr = True, d.out_base + 0x40
                self.regs["ERROR_CODE"] = 3
                self.regs["ISR"] |= 2
                break
            if not self._in_window("write", d.out_base, 16):
                self.error, self.error_addr = True, d.out_base
                self.regs["ERROR_CODE"] = 6
                self.regs["ISR"] |= 2
                break
            last = img.output(d.name).addr == d.out_base
            re, im = img.expected[d.name] if last else (
                np.ones((d.out_slots, *d.out_shape), np.int8),) * 2
            if self.mode == "corrupt" and d.name == "c1":
                re = re.copy()
                re[1, 0, 2, 3] ^= 4
                re[5, 1, 0, 0] ^= 1
            self._store(d.out_base, pack_ncdhw8(re, im))
            entry = CycleEntry(100 + i, 50 + i, 3 * i)
            self._store(d.cycles_addr, CompiledImage.encode_cycles(entry))
        else:
            self.done = True
            self.regs["ISR"] |= 1
        self.busy = False
        self.counters = list(self.count_values)

    def _store(self, addr, blob):
        self.mem[addr - self.image.base:addr - self.image.base + len(blob)] = blob

    @property
    def interrupt(self) -> bool:
        return bool(self.regs["GIE"] & 1 and self.regs["IER"] & self.regs["ISR"])

    # -- Backend
    def elapsed(self) -> float:
        return self.time

    async def write_reg(self, off, value):
        self.log.append(("w", off, value))
        self._tick()
        if off == CTRL:
            if value & 1 and not self.busy:
                self.busy, self.done, self.error = True, False, False
                self.counters = [0, 0, 0]
                self.pending, self.aborting = self.latency, -1
            elif value & 0x10 and self.busy and self.mode != "stuck":
                self.aborting = 2
        elif off == ISR:
            self.regs["ISR"] &= ~value & 3
        else:
            name = next(n for n in self.regs if n != "ISR" and offset(n) == off)
            self.regs[name] = value & {"GIE": 1, "IER": 3}.get(name, 0xFFFF_FFFF)

    async def read_reg(self, off):
        self._tick()
        names = ("CYCLES", "PE_BUSY", "DMA_STALL")
        value = {
            CTRL: (self.busy << 1) | (self.done << 2) | (self.error << 3),
            GIE: self.regs["GIE"], IER: self.regs["IER"], ISR: self.regs["ISR"],
            offset("ERROR_CODE"): self.regs["ERROR_CODE"],
            offset("ERROR_ADDR_LO"): self.error_addr & 0xFFFF_FFFF,
            offset("ERROR_ADDR_HI"): self.error_addr >> 32,
            offset("ID"): IDENT, offset("VERSION"): VERSION,
            **{offset(n): v for n, v in self.regs.items() if "_BASE_" in n or "_LIMIT_" in n},
        }.get(off)
        for i, n in enumerate(names):
            if off == offset(f"{n}_LO"):
                self.shadows[i] = self.counters[i] >> 32
                value = self.counters[i] & 0xFFFF_FFFF
            elif off == offset(f"{n}_HI"):
                value = self.shadows[i]
        assert value is not None, f"unmapped read at {off:#x}"
        self.log.append(("r", off, value))
        return value

    async def write_mem(self, addr, data):
        self._store(addr, data)

    async def read_mem(self, addr, size):
        return bytes(self.mem[addr - self.image.base:addr - self.image.base + size])

    async def wait_interrupt(self, timeout_s):
        self.interrupt_waits += 1
        steps = int(timeout_s / 1e-6)
        for _ in range(steps):
            if self.interrupt:
                return True
            self._tick()
        return self.interrupt


def run(coro):
    return asyncio.run(coro)


@pytest.fixture
def image():
    return make_image()


@pytest.mark.parametrize("poll", [False, True])
def test_run_passes_bit_exact(image, poll):
    fake = FakeAccelerator(image)
    report = run(Driver(fake).run(image, 1.0, poll=poll))
    assert report.passed
    assert report.status.done and not report.status.error
    assert report.counters == Counters(0x1_2345_6789, 0x2_0000_0001, 7)
    assert [r.name for r in report.layers] == ["c1", "c2", "fc"]
    c2 = report.layers[1]
    assert (c2.cycles, c2.pe_busy, c2.dma_stall) == (101 + 102, 51 + 52, 3 + 6)
    assert (c2.finished, c2.descriptors) == (2, 2)
    assert all(r.passed and r.mismatches == 0 and r.first_mismatch is None
               for r in report.layers)
    assert report.elapsed is not None and report.elapsed > 0
    assert fake.interrupt_waits == (0 if poll else 1)
    # ISR left clear, and in interrupt mode GIE/IER were enabled
    assert fake.regs["ISR"] == 0
    assert (fake.regs["GIE"], fake.regs["IER"]) == ((0, 0) if poll else (1, 3))
    doc = report.as_dict()
    assert doc["status"] == "done" and doc["total_cycles"] == 0x1_2345_6789
    assert doc["layers"][1]["cycles"] == 203


def test_run_programs_the_images_own_windows(image):
    """The engine may read only the image and write only its cycle entries and maps: the
    driver programs both windows before the start, and a store outside them fails the run
    with the hardware's code and address (the fake enforces the windows)."""
    fake = FakeAccelerator(image)
    assert run(Driver(fake).run(image, 1.0)).passed
    first_write = min(d.cycles_addr for d in image.descriptors)
    assert image.windows == ((BASE, image.end - 1), (first_write, image.end - 1))
    assert fake.window("read") == (BASE >> 12, (image.end - 1) >> 12)
    assert fake.window("write") == (first_write >> 12, (image.end - 1) >> 12)
    writes = [off for kind, off, _ in fake.log if kind == "w"]
    assert writes.index(offset("WR_LIMIT_HI")) < writes.index(CTRL)
    # A write window that misses the first output map: the run stops with code 6 there.
    driver = Driver(fake)
    run(driver.set_windows(image.windows[0], (image.descriptors[1].out_base, image.end - 1)))
    run(driver.start(image.desc_ptr))
    status = run(driver.wait(1.0, poll=True))
    assert status.error and status.error_code == 6
    assert status.error_addr == image.descriptors[0].out_base
    with pytest.raises(ValueError, match="first <= last"):
        run(driver.set_windows((5, 4), (0, 1)))


def test_start_sequence(image):
    fake = FakeAccelerator(image)
    run(Driver(fake).start(0x1_2345_6780))
    writes = [(off, v) for kind, off, v in fake.log if kind == "w"]
    assert writes == [(ISR, 3), (offset("DESC_PTR_LO"), 0x2345_6780),
                      (offset("DESC_PTR_HI"), 1), (CTRL, 1)]


def test_counters_read_lo_then_hi(image):
    fake = FakeAccelerator(image)
    fake.counters = [0xAAAA_BBBB_CCCC_DDDD, 5 << 32, 0xFFFF_FFFF]
    assert run(Driver(fake).counters()) == Counters(0xAAAA_BBBB_CCCC_DDDD, 5 << 32, 0xFFFF_FFFF)
    reads = [off for kind, off, _ in fake.log if kind == "r"]
    assert reads == [offset(n) for n in ("CYCLES_LO", "CYCLES_HI", "PE_BUSY_LO", "PE_BUSY_HI",
                                         "DMA_STALL_LO", "DMA_STALL_HI")]


def test_mismatches_are_counted_and_located(image):
    report = run(Driver(FakeAccelerator(image, "corrupt")).run(image, 1.0))
    assert not report.passed
    c1 = report.layers[0]
    assert not c1.passed and c1.mismatches == 2
    m = c1.first_mismatch
    assert (m.slot, m.d, m.h, m.w) == (1, 0, 2, 3)
    exp_re, exp_im = image.expected["c1"]
    assert m.expected == (int(exp_re[1, 0, 2, 3]), int(exp_im[1, 0, 2, 3]))
    assert m.got == (int(exp_re[1, 0, 2, 3]) ^ 4, m.expected[1])
    assert "slot 1 at (0, 2, 3)" in str(m)
    assert report.layers[1].passed and report.layers[2].passed


@pytest.mark.parametrize("poll", [False, True])
def test_error_is_reported_and_next_start_accepted(image, poll):
    fake = FakeAccelerator(image, "error")
    driver = Driver(fake)
    report = run(driver.run(image, 1.0, poll=poll))
    s = report.status
    assert s.error and not s.done and s.error_code == 3
    assert s.error_addr == image.descriptors[2].out_base + 0x40
    assert s.error_name  # a name or "error 3"
    assert report.as_dict()["status"] == "error"
    assert not report.passed
    c2 = report.layers[1]
    assert (c2.finished, c2.descriptors) == (1, 2) and not c2.passed
    fake.mode = "ok"
    again = run(driver.run(image, 1.0, poll=poll))
    assert again.passed and not again.status.error


@pytest.mark.parametrize("poll", [False, True])
def test_timeout_names_ctrl_and_isr(image, poll):
    fake = FakeAccelerator(image, "hang")
    with pytest.raises(DriverTimeout, match=r"CTRL = 0x00000002 \(busy\), ISR = 0x00000000"):
        run(Driver(fake).run(image, 1e-4, poll=poll))


@pytest.mark.parametrize("poll", [False, True])
def test_timeout_aborts_the_engine_and_says_where_it_stopped(image, poll):
    fake = FakeAccelerator(image, "hang")
    driver = Driver(fake)
    with pytest.raises(DriverTimeout) as info:
        run(driver.run(image, 1e-4, poll=poll))
    out = image.descriptors[0].out_base
    n = len(image.descriptors)
    assert re.search(rf"no done or error within 0\.0001 s .*; 0 of {n} descriptors finished, 0 "
                     rf"cycles counted; aborted: the engine stopped \(aborted by the host "
                     rf"\(CTRL\.abort\), ERROR_ADDR {out:#x}\) and is idle$", str(info.value))
    assert ("w", CTRL, 0x10) in fake.log and not fake.busy and not fake.regs["ISR"]
    fake.mode = "ok"  # the next start runs normally
    assert run(driver.run(image, 1.0, poll=poll)).passed


def test_timeout_whose_abort_does_not_stop_the_engine(image):
    fake = FakeAccelerator(image, "stuck")
    with pytest.raises(DriverTimeout, match=(
            r"cycles counted; abort did not stop the engine within 0\.01 s: CTRL = 0x00000002 "
            r"\(busy\), ISR = 0x00000000 \(none\), 0 cycles counted; a burst in flight is not "
            r"answered by the bus: reload the bitstream$")) as info:
        run(Driver(fake).run(image, 1e-4, poll=True))
    assert "; aborted" not in str(info.value)


def test_abort_of_an_idle_engine_writes_nothing(image):
    fake = FakeAccelerator(image)
    driver = Driver(fake)
    assert run(driver.abort()) == RunStatus(False, False)
    assert not [w for w in fake.log if w[0] == "w"]
    assert run(driver.run(image, 1.0)).passed
    assert run(driver.abort()).done  # the last status, left as it was
    with pytest.raises(ValueError, match="timeout_s must be seconds"):
        run(driver.abort(0))


def test_start_while_busy_and_bad_arguments(image):
    fake = FakeAccelerator(image, "hang")
    driver = Driver(fake)
    run(driver.start(image.desc_ptr))
    with pytest.raises(DriverError, match="busy"):
        run(driver.start(image.desc_ptr))
    with pytest.raises(ValueError, match="16-byte aligned"):
        run(driver.start(0x1008))
    with pytest.raises(ValueError, match="timeout_s"):
        run(driver.wait(0))
    with pytest.raises(TypeError, match="lacks read_reg, write_mem"):
        Driver(types.SimpleNamespace(write_reg=lambda *a: None))


def test_identify(image):
    assert run(Driver(FakeAccelerator(image)).identify()) == (IDENT, VERSION)


def test_progress_counts_written_cycles_entries(image):
    fake = FakeAccelerator(image, "error")
    driver = Driver(fake)
    assert run(driver.progress(image)) == (0, 4)
    run(driver.run(image, 1.0))
    assert run(driver.progress(image)) == (2, 4)


def test_error_name_falls_back_to_the_number():
    name = error_name(250)
    assert name == "error 250" or isinstance(name, str)


# --------------------------------------------------------------------------------------------
# PYNQ backend with a fake pynq module


def test_pynq_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynq", None)
    with pytest.raises(DriverError, match="needs the 'pynq' package"):
        PynqBackend("x.bit")


class _Buffer(np.ndarray):
    pass


def _fake_pynq(calls, *, interrupts=True):
    mod = types.ModuleType("pynq")
    regs = {}

    class MMIO:
        def __init__(self, base, length):
            calls.append(("MMIO", base, length))

        def write(self, off, value):
            calls.append(("write", off, value))
            regs[off] = value

        def read(self, off):
            return regs.get(off, 0)

    class Overlay:
        def __init__(self, path):
            calls.append(("Overlay", path))
            self.ip_dict = {"fcircnn_accel_0": {
                "phys_addr": 0xA000_0000, "addr_range": 0x1000,
                "interrupts": {"interrupt": {}} if interrupts else {}}}

    def allocate(shape, dtype):
        calls.append(("allocate", shape, dtype))
        buf = np.zeros(shape, dtype).view(_Buffer)
        buf.device_address = 0x7000_0000
        buf.flush = lambda: calls.append(("flush",))
        buf.invalidate = lambda: calls.append(("invalidate",))
        buf.freebuffer = lambda: calls.append(("free",))
        return buf

    class Interrupt:
        def __init__(self, pin):
            calls.append(("Interrupt", pin))

        async def wait(self):
            await asyncio.sleep(0)
            regs[ISR] = 1

    mod.MMIO, mod.Overlay, mod.allocate, mod.Interrupt = MMIO, Overlay, allocate, Interrupt
    return mod, regs


@pytest.mark.parametrize("interrupts", [True, False])
def test_pynq_backend_with_fake_module(monkeypatch, interrupts):
    calls = []
    mod, regs = _fake_pynq(calls, interrupts=interrupts)
    monkeypatch.setitem(sys.modules, "pynq", mod)
    be = PynqBackend("design.bit", mem_size=1 << 16)
    assert calls[:3] == [("Overlay", "design.bit"), ("MMIO", 0xA000_0000, 0x1000),
                         ("allocate", (1 << 16,), np.uint8)]
    assert (("Interrupt", "fcircnn_accel_0/interrupt") in calls) == interrupts
    assert be.base == 0x7000_0000
    run(be.write_mem(be.base + 16, b"\x01\x02\x03"))
    assert ("flush",) in calls
    assert run(be.read_mem(be.base + 15, 5)) == b"\x00\x01\x02\x03\x00"
    assert ("invalidate",) in calls
    with pytest.raises(DriverError, match="compile the image with base=0x70000000"):
        run(be.read_mem(be.base - 16, 4))
    run(be.write_reg(CTRL, 1))
    assert ("write", CTRL, 1) in calls
    assert run(be.read_reg(CTRL)) == 1
    # interrupt: level low, GIE/IER set; the interrupt controller (or the poll) sees ISR
    regs.update({GIE: 1, IER: 3, ISR: 0})
    if interrupts:
        assert run(be.wait_interrupt(0.5))
    else:
        assert not run(be.wait_interrupt(0.002))
        regs[ISR] = 2
        assert run(be.wait_interrupt(0.002))
    be.close()
    assert ("free",) in calls


def test_pynq_backend_unknown_ip(monkeypatch):
    mod, _ = _fake_pynq([])
    monkeypatch.setitem(sys.modules, "pynq", mod)
    with pytest.raises(DriverError, match=r"no IP 'other'.*fcircnn_accel_0"):
        PynqBackend("design.bit", "other")



def _buffer(image: CompiledImage, base: int, size: int) -> FakeAccelerator:
    """A backend with a fixed DDR buffer at ``base`` of ``size`` bytes, as
    :class:`PynqBackend` has."""
    backend = FakeAccelerator(image)
    backend.base, backend.size = base, size
    return backend


def test_an_image_that_leaves_the_buffer_or_the_address_space_is_refused_before_loading(
        tmp_path, small_accelerator):
    from fcircnn.gen.compiler import compile_network
    from fcircnn.models.config import load_accelerator

    acc = load_accelerator(small_accelerator(tmp_path))
    image = CompiledImage.from_ddr_image(compile_network(acc, seed=1, base=0x10000))
    assert Driver(_buffer(image, 0x20_0000, len(image.data))).place(image).base == 0x20_0000
    last = max(image.regions, key=lambda r: r.end)
    with pytest.raises(DriverError, match=rf"needs {len(image.data)} bytes and the DDR buffer "
                                          rf"holds {len(image.data) - 4096} \(mem_size\): "
                                          rf"region '{last.name}'"):
        Driver(_buffer(image, 0x20_0000, len(image.data) - 4096)).place(image)
    top = (1 << acc.address_width) - 4096  # the buffer ends past the accelerator's reach
    with pytest.raises(DriverError, match=rf"cannot place the image at the buffer \({top:#x}\)"
                                          rf": .* passes the {acc.address_width}-bit address"):
        Driver(_buffer(image, top, len(image.data))).place(image)


class _ReusingFake(FakeAccelerator):
    """A fake for images laid out by liveness: it flips one byte of layer ``corrupt``'s output
    as it stores it and, with ``keeps``, copies each layer's output map when its last
    descriptor writes its cycles entry, as the simulation's memory model does
    (``keep_outputs``/``finished_output``)."""

    def __init__(self, image, *, corrupt=None, keeps=False):
        super().__init__(image)
        self.corrupt, self.watched, self.kept = corrupt, {}, {}
        if keeps:
            self.keep_outputs = self._keep_outputs
            self.finished_output = lambda cycles_addr: self.kept.get(cycles_addr)

    def _keep_outputs(self, image):
        last = {d.name: d for d in image.descriptors}
        self.watched = {d.cycles_addr: (image.output(n).addr, image.output(n).size)
                        for n, d in last.items()}
        self.kept = {}

    def _store(self, addr, blob):
        # The fake stores each descriptor's output, then its cycles entry.
        entries = [d.cycles_addr for d in self.image.descriptors]
        k = sum(self.mem[a - self.image.base:a - self.image.base + 16] != bytes(16)
                for a in entries)
        d = self.image.descriptors[k] if k < len(entries) else None
        if d is not None and d.name == self.corrupt and addr == d.out_base:
            blob = bytes([blob[0] ^ 1]) + blob[1:]
        super()._store(addr, blob)
        if addr in self.watched:
            at, size = self.watched[addr]
            self.kept[addr] = bytes(self.mem[at - self.image.base:at - self.image.base + size])


@pytest.mark.parametrize("keeps", [False, True])
@pytest.mark.parametrize("corrupt", [None, "c2"])
def test_an_output_whose_map_is_reused_is_checked_only_from_a_copy(tmp_path, small_accelerator,
                                                                  keeps, corrupt):
    """An image laid out by liveness: c2's and c3's maps are reused by later layers', so after
    the run only a backend that copied them when they finished lets the driver check them
    (and find a corruption); without the copy they are reported not checked, the others as
    usual."""
    from fcircnn.gen.compiler import compile_network
    from fcircnn.models.config import load_accelerator

    acc = load_accelerator(small_accelerator(tmp_path))
    image = CompiledImage.from_ddr_image(compile_network(acc, seed=1, base=0x10000,
                                                         reuse_maps=True))
    gone = [n for n in image.layer_names() if not image.survives(n)]
    assert gone == ["c2", "c3"]
    report = run(Driver(_ReusingFake(image, corrupt=corrupt, keeps=keeps)).run(image, 1.0))
    for r in report.layers:
        checked = keeps or r.name not in gone
        caught = checked and r.name == corrupt
        assert (r.checked, r.passed, r.mismatches > 0) == (checked, not caught, caught), r
    assert report.passed == (corrupt is None or not keeps)
    assert [x["checked"] for x in report.as_dict()["layers"]] == [
        keeps or n not in gone for n in image.layer_names()]


def test_maps_with_the_same_address_and_size_keep_their_own_copies():
    """ResNet-18 laid out by liveness gives blocks' first convs the same bytes (the same
    address and size): each layer's copy is its own, so a corruption of one is caught and its
    twin still passes."""
    from fcircnn.gen.compiler import compile_network
    from fcircnn.models.config import builtin_path, load_accelerator
    from fcircnn.models.scale import scale_accelerator

    acc = scale_accelerator(load_accelerator(builtin_path("r3d18_zcu102")), 8, (8, 32, 32))
    image = CompiledImage.from_ddr_image(compile_network(acc, seed=4, reuse_maps=True))
    where = {n: (image.output(n).addr, image.output(n).size) for n in image.layer_names()}
    twins = [n for n in where if list(where.values()).count(where[n]) > 1]
    assert "l1b1_conv1" in twins and "l1b2_conv1" in twins
    report = run(Driver(_ReusingFake(image, corrupt="l1b1_conv1", keeps=True)).run(image, 1.0))
    failed = [r.name for r in report.layers if not r.passed]
    assert failed == ["l1b1_conv1"] and all(r.checked for r in report.layers)
