"""cocotb testbench of the accelerator top level ``fcircnn_accel`` running a compiled network.

The host is :class:`fcircnn.runtime.driver.Driver` on
:class:`fcircnn.sim.backend_cocotb.CocotbBackend`: it loads the image written by ``DdrImage.save``
into the DDR model, starts the engine, waits for the interrupt (or polls), reads the counters and
compares every layer's output with the golden int8 slots bit for bit.

Parameters (:func:`fcircnn.sim.runner.tb_params`)
-------------------------------------------------
``image_dir`` (str, required)
    Folder with ``image.bin``, ``memory_map.json``, ``expected.npz``.
``results`` (str, required)
    Path of the JSON results file to write (below).
``relocate`` (int, optional)
    Place the image at this base instead of the one it was compiled for
    (:meth:`fcircnn.runtime.image.CompiledImage.relocated`), as a board driver does.
``backpressure`` (float, default 0), ``latency`` (int, default 0), ``seed`` (int, default 0)
    DDR model: pause probability on every AXI channel (of every port), cycles before the first
    beat of every read burst, seed of the pauses.
``timeout_cycles`` (int, default 10_000_000)
    Cycles to wait for done/error per run.
``poll`` (bool, default false)
    Poll ``CTRL`` instead of waiting for the interrupt.
``inject_error`` (optional ``{"addr": int, "size": int, "kind": "read" | "write"}``)
    First run with ``SLVERR`` on that range: the test asserts it ends in ``error`` with the
    interrupt raised and ``ERROR_CODE`` non-zero; then the fault is removed and the image run
    again (a new start), which must pass bit-exact.
``abort`` (optional list of int)
    Before the last run, one run per entry, each started as
    :meth:`~fcircnn.runtime.driver.Driver.run` starts it and stopped by
    :meth:`~fcircnn.runtime.driver.Driver.abort` that many cycles later: the
    test asserts it ends in ``error`` with ERROR_CODE
    :data:`~fcircnn.arch.registers.ERROR_ABORTED`, the interrupt raised, ERROR_ADDR inside the
    image's windows, and no access outside them; the results file's ``"abort_runs"`` lists
    them (status, code, address, cycles from the abort to idle).
``timeout_abort_cycles`` (optional int)
    Before the last run, a run given that many cycles as its driver timeout: the test asserts
    that :meth:`~fcircnn.runtime.driver.Driver.run` raises ``DriverTimeout`` whose message says the
    engine was aborted and is idle (``"timeout_run"`` in the results file: the message).
``fuzz`` (optional ``{"runs": int, "seed": int, "timeout_cycles": int, "address_width":
int, "only": [int, ...], "replay": [{"index": int, "field": str, "value": int or list},
...]}``)
    Before the last run, ``runs`` runs of the image each corrupted by
    :func:`fcircnn.sim.fuzz.corrupt` (seeded), through
    :meth:`~fcircnn.runtime.driver.Driver.run` with
    the image's own windows and a timeout of ``timeout_cycles``, after which the driver aborts
    the run. Every run must end (done, an error, or aborted after the timeout; an abort that
    does not stop the engine ends the campaign as ``"hung"``) and the memory model must see no
    access outside the windows. ``only``: run just these indices of the seeded sequence (to
    replay a run); ``replay``: after them, runs each with one field of one descriptor set
    (a damage found earlier, given field by field). ``"fuzz"`` in the results file: the
    counts by outcome and error code, the
    accesses outside the windows, and one line per run.
``far_desc_ptr`` (optional int, the accelerator's address width ``A``)
    Before the last run, a start with DESC_PTR ``2**A`` above the image's list: the test
    asserts it ends in ``error`` with code 2 and that DESC_PTR in ERROR_ADDR, nothing fetched
    (``"far_desc_ptr_run"`` in the results file).
``moved`` (optional ``{"index": int, "field": str, "value": int or list, "code": int, "lo":
int, "hi": int}``)
    First run with the field ``field`` of descriptor ``index`` set to ``value`` (an address
    moved so that some of what it reads or writes leaves the image's windows, or a stride,
    step or ``*_pages`` that walks a stream out of its region): the test asserts it ends
    in ``error`` with ERROR_CODE ``code`` and ERROR_ADDR in ``[lo, hi)``, or with ``code`` 0
    (moved to the very edge of a window) that it ends ``done``, and in both that nothing was
    issued outside the windows (``"fault_run"`` in the results file); then the image run
    unchanged, which must pass bit-exact.
``bad_descriptor`` (optional ``{"index": int, "flags": int}``)
    First run with that descriptor's ``flags`` field replaced by ``flags``: the test asserts
    it ends in ``error`` with the interrupt raised, ``ERROR_CODE``
    :data:`~fcircnn.arch.registers.ERROR_BAD_DESCRIPTOR` and ``ERROR_ADDR`` the descriptor's
    address; then the image run unchanged, which must pass bit-exact.

Results file
------------
``{"status": "done" | "error" | "timeout", "error_code", "error_addr", "error_name",
"total_cycles", "pe_busy", "dma_stall", "sim_cycles", "wall_seconds", "read_bytes", "passed",
"message", "layers": [{"name", "cycles", "pe_busy", "dma_stall", "finished", "descriptors",
"passed", "mismatches", "first_mismatch"}]}`` for the last run (``read_bytes``: bytes the run
read through each AXI port, ``m_axi`` first); with ``inject_error`` or ``bad_descriptor`` also
``"fault_run"``: the same fields for the faulted run plus ``"interrupt"`` (whether it fired) and
``"fault_hits"`` (beats answered ``SLVERR``).

The network's output as read back from memory after the run (the last layer's int8 slots) is
written to ``<results>.output.npz`` (:func:`output_path`).

While a run is going, every :data:`PROGRESS_CYCLES` cycles a line ``"<finished> <total>"``
(descriptors with a written cycles entry, read from the RAM model) is appended to
``<results>.progress``.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles

from fcircnn.arch.descriptor import DESCRIPTOR_BYTES, LayerDescriptor, field_offset
from fcircnn.arch.registers import (
    ERROR_ABORTED,
    ERROR_BAD_DESCRIPTOR,
    ERROR_READ_WINDOW,
    ERROR_WRITE_WINDOW,
    WINDOW_PAGE_BITS,
)
from fcircnn.runtime.driver import Driver, DriverTimeout
from fcircnn.runtime.image import CompiledImage
from fcircnn.sim.backend_cocotb import CocotbBackend
from fcircnn.sim.fuzz import corrupt
from fcircnn.sim.runner import tb_params

#: Clock period of ``ap_clk`` (200 MHz).
PERIOD_NS = 5
#: Cycles of ``ap_rst_n`` low at the start.
RESET_CYCLES = 10
#: Cycles between two progress lines.
PROGRESS_CYCLES = 2000
#: Default for the ``timeout_cycles`` parameter.
DEFAULT_TIMEOUT_CYCLES = 10_000_000


def _ram_size(image: CompiledImage) -> int:
    # Room above the image for out-of-range reads to fail in the model, not in Python.
    return (image.end + 0xFFFFF) // 0x100000 * 0x100000


class _Progress:
    """Appends ``finished total`` to ``path`` every :data:`PROGRESS_CYCLES` cycles while
    running."""

    def __init__(self, dut, backend: CocotbBackend, image: CompiledImage, path: Path):
        self.dut, self.backend, self.image, self.path = dut, backend, image, path
        self.running = False
        self.path.write_text("")
        cocotb.start_soon(self._loop())

    def write(self) -> None:
        done = self.backend.finished_descriptors(self.image)
        with self.path.open("a") as f:
            f.write(f"{done} {len(self.image.descriptors)}\n")

    async def _loop(self) -> None:
        while True:
            await ClockCycles(self.dut.ap_clk, PROGRESS_CYCLES)
            if self.running:
                self.write()


async def _run(driver: Driver, backend: CocotbBackend, image: CompiledImage,
               progress: _Progress, timeout_s: float, poll: bool) -> dict[str, Any]:
    cycles0, wall0, read0 = backend.cycles(), time.monotonic(), backend.read_bytes
    progress.running = True
    try:
        report = await driver.run(image, timeout_s, poll=poll)
    except DriverTimeout as exc:
        doc: dict[str, Any] = {
            "status": "timeout", "error_code": 0, "error_addr": 0, "error_name": "",
            "total_cycles": 0, "pe_busy": 0, "dma_stall": 0, "passed": False,
            "message": str(exc), "layers": [r.as_dict() for r in
                                            await driver.layer_results(image)]}
        counters = await driver.counters()
        doc.update(total_cycles=counters.cycles, pe_busy=counters.pe_busy,
                   dma_stall=counters.dma_stall)
    else:
        doc = report.as_dict()
        doc.pop("elapsed")
        failed = [r.name for r in report.layers if not r.passed]
        doc["message"] = (f"{report.status.error_name} at {report.status.error_addr:#x}"
                          if report.status.error else
                          f"mismatch in {', '.join(failed)}" if failed else "ok")
    finally:
        progress.running = False
        progress.write()
    doc["outside_window"] = backend.outside_window
    doc["sim_cycles"] = backend.cycles() - cycles0
    doc["wall_seconds"] = time.monotonic() - wall0
    doc["read_bytes"] = [b - a for a, b in zip(read0, backend.read_bytes, strict=True)]
    return doc


def _with_flags(image: CompiledImage, index: int, flags: int) -> tuple[bytes, int]:
    """``image``'s bytes with the 16-bit ``flags`` field of descriptor ``index`` replaced by
    ``flags`` as raw bytes (:class:`~fcircnn.arch.descriptor.LayerDescriptor` would refuse
    a bad value), and that descriptor's address."""
    addr = image.desc_ptr + index * DESCRIPTOR_BYTES
    at = addr - image.base + field_offset("flags")
    data = bytearray(image.data)
    data[at:at + 2] = flags.to_bytes(2, "little")
    return bytes(data), addr


class _DamagingDriver(Driver):
    """A driver whose :meth:`load` writes :attr:`damaged` instead of the image's bytes when it
    is set: the list as a DDR corrupted after the load holds it. The image the driver is given
    passes the host's checks (``CompiledImage``); what the engine then reads does not."""

    def __init__(self, backend):
        super().__init__(backend)
        self.damaged: bytes | None = None

    async def load(self, image: CompiledImage) -> None:
        if self.damaged is None:
            await super().load(image)
        else:
            await self.backend.write_mem(image.base, self.damaged)


class _NarrowDriver(Driver):
    """A driver whose ``kind`` window (``"read"`` or ``"write"``) leaves out the image's page
    at its ``end`` (``"lo"`` or ``"hi"``): the run must stop at the first burst there."""

    def __init__(self, backend, kind: str, end: str):
        super().__init__(backend)
        self.kind, self.end = kind, end
        self.excluded: int | None = None

    async def set_windows(self, read, write):
        windows = {"read": list(read), "write": list(write)}
        lo, hi = windows[self.kind]
        page = 1 << WINDOW_PAGE_BITS
        if self.end == "lo":
            self.excluded = lo // page
            windows[self.kind][0] = (lo // page + 1) * page
        else:
            self.excluded = hi // page
            windows[self.kind][1] = hi // page * page - 1
        await super().set_windows(tuple(windows["read"]), tuple(windows["write"]))


def _field_value(entry: dict[str, Any]):
    """The ``value`` of a ``moved`` or ``replay`` entry: an integer, or a vector field's
    integers (JSON gives a list)."""
    value = entry["value"]
    return tuple(map(int, value)) if isinstance(value, list) else int(value)


def _with_field(image: CompiledImage, index: int, field: str, value) -> bytes:
    """``image``'s bytes with the field ``field`` of descriptor ``index`` set to ``value``
    (a legal value: the descriptor still unpacks)."""
    at = image.desc_ptr - image.base + index * DESCRIPTOR_BYTES
    data = bytearray(image.data)
    d = LayerDescriptor.unpack(bytes(data[at:at + DESCRIPTOR_BYTES]))
    data[at:at + DESCRIPTOR_BYTES] = dataclasses.replace(d, **{field: value}).pack()
    return bytes(data)


async def _moved_run(dut, driver, backend, image, progress, timeout_s, poll, moved):
    """A run with one field of one descriptor changed so that part of what it reads or
    writes lies outside its window or its stream's region (the image's own windows
    programmed): an error with ``moved["code"]`` at an address in ``[moved["lo"],
    moved["hi"])`` (the bytes only the port under test reaches, or the pages past the
    region), or (code 0: moved to the window's very edge) no error; nothing issued outside
    the windows."""
    index, field, value = int(moved["index"]), str(moved["field"]), _field_value(moved)
    driver.damaged = _with_field(image, index, field, value)
    doc = await _run(driver, backend, image, progress, timeout_s, poll)
    driver.damaged = None
    what = f"descriptor {index} with {field} = {value}"
    assert not doc["outside_window"], f"accesses outside the window: {doc['outside_window']}"
    if not int(moved["code"]):  # at the window's very edge: runs to its end (wrong data)
        assert doc["status"] == "done", f"{what}: expected no error, got {_describe(doc)}"
        return doc
    assert doc["status"] == "error", f"{what}: expected an error, got {_describe(doc)}"
    assert doc["error_code"] == int(moved["code"]), f"{what}: {_describe(doc)}"
    assert int(moved["lo"]) <= doc["error_addr"] < int(moved["hi"]), (
        f"{what}: error at {doc['error_addr']:#x}, not in [{int(moved['lo']):#x}, "
        f"{int(moved['hi']):#x})")
    dut._log.info("moved run: %s at %#x", doc["error_name"], doc["error_addr"])
    return doc


async def _window_fault(dut, backend, image, progress, timeout_s, poll, fault):
    """A run with one window a page short (:class:`_NarrowDriver`): an error with the DMA's
    code for that direction at an address in the page left out, nothing issued outside."""
    driver = _NarrowDriver(backend, str(fault["kind"]), str(fault["end"]))
    doc = await _run(driver, backend, image, progress, timeout_s, poll)
    code = {"read": ERROR_READ_WINDOW, "write": ERROR_WRITE_WINDOW}[driver.kind]
    assert doc["status"] == "error", f"window {fault}: expected an error, got {_describe(doc)}"
    assert doc["error_code"] == code, f"window {fault}: {_describe(doc)}"
    assert doc["error_addr"] >> WINDOW_PAGE_BITS == driver.excluded, (
        f"window {fault}: error at {doc['error_addr']:#x}, not in the page left out "
        f"({driver.excluded << WINDOW_PAGE_BITS:#x})")
    assert not doc["outside_window"], f"accesses outside the window: {doc['outside_window']}"
    dut._log.info("window run: %s at %#x", doc["error_name"], doc["error_addr"])
    return doc


async def _abort_runs(dut, driver, backend, image, cycles: list[int]) -> list[dict[str, Any]]:
    """Runs of ``image`` each stopped by ``Driver.abort`` the given cycles after its start:
    each must end in ``ERROR_ABORTED`` with the interrupt, at an address inside the image's
    windows, with no access outside them."""
    docs = []
    for after in cycles:
        placed = await driver.prepare(image)
        (rd_lo, rd_hi), (wr_lo, wr_hi) = placed.windows
        await driver.enable_interrupts()
        before = backend.interrupts
        await driver.start(placed.desc_ptr)
        await ClockCycles(dut.ap_clk, int(after))
        t0 = backend.cycles()
        status = await driver.abort()
        doc = {"after": int(after), "status": status.state, "error_code": status.error_code,
               "error_addr": status.error_addr, "stop_cycles": backend.cycles() - t0,
               "interrupt": backend.interrupts > before,
               "outside_window": backend.outside_window}
        docs.append(doc)
        dut._log.info("abort after %d cycles: %s at %#x, idle %d cycles later", after,
                      status.error_name, status.error_addr, doc["stop_cycles"])
        assert status.error and status.error_code == ERROR_ABORTED, f"abort after {after}: {doc}"
        assert doc["interrupt"], f"abort after {after}: the error did not raise the interrupt"
        assert rd_lo <= status.error_addr <= rd_hi or wr_lo <= status.error_addr <= wr_hi, doc
        assert not backend.outside_window, f"accesses outside the window: {doc}"
        await driver.enable_interrupts(False)
    return docs


async def _far_desc_ptr_run(driver, backend, image, address_width: int) -> dict[str, Any]:
    """A start at the image's DESC_PTR plus ``2**address_width``: refused, not fetched."""
    placed = await driver.prepare(image)
    far = placed.desc_ptr + (1 << address_width)
    reads = list(backend.read_bytes)
    await driver.start(far)
    status = await driver.wait(1e-3, poll=True)
    doc = {"status": status.state, "error_code": status.error_code,
           "error_addr": status.error_addr, "read_bytes": [
               b - a for a, b in zip(reads, backend.read_bytes, strict=True)]}
    assert status.error and (status.error_code, status.error_addr) == (2, far), doc
    assert not any(doc["read_bytes"]) and not backend.outside_window, doc
    return doc


async def _timeout_run(driver, backend, image, cycles: int) -> str:
    """A run whose driver timeout is ``cycles``: ``DriverTimeout`` saying it was aborted."""
    try:
        await driver.run(image, cycles * PERIOD_NS * 1e-9, poll=True)
    except DriverTimeout as exc:
        message = str(exc)
    else:
        raise AssertionError(f"a run with a timeout of {cycles} cycles finished")
    assert "aborted: the engine stopped (aborted by the host" in message, message
    assert "is idle" in message and not backend.outside_window, message
    ctrl = await backend.read_reg(0)
    assert not ctrl & 2, f"busy after the abort: CTRL = {ctrl:#x}"
    return message


async def _fuzz(dut, driver, backend, image, params: dict[str, Any]) -> dict[str, Any]:
    """The fuzzing campaign of parameter ``fuzz`` (module docstring)."""
    rng = np.random.default_rng(int(params.get("seed", 0)))
    timeout_s = int(params["timeout_cycles"]) * PERIOD_NS * 1e-9
    placed = driver.place(image)
    outcomes: dict[str, int] = {}
    log, outside = [], 0
    only = set(params.get("only", ()))  # replay these runs of the seeded sequence alone

    async def one(name: str, kind: str, detail: str, data: bytes) -> str:
        nonlocal outside
        seen, t0 = len(backend.outside_window), backend.cycles()
        try:
            driver.damaged = data
            report = await driver.run(placed, timeout_s, abort_timeout_s=timeout_s)
        except DriverTimeout as exc:  # aborted; its status None: the abort did not stop it
            message, status = str(exc), exc.status
            outcome = ("hung" if status is None else "aborted" if status.error else "done")
        else:
            status = report.status
            outcome = f"error {status.error_code}" if status.error else "done"
            message = (f"{status.error_name} at {status.error_addr:#x}" if status.error
                       else "done")
        new = backend.outside_window[seen:]
        outside += len(new)
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        log.append(f"{name} {kind} ({detail}): {outcome}, {backend.cycles() - t0} "
                   f"cycles; {message}" + (f"; OUTSIDE {new}" if new else ""))
        dut._log.info("fuzz %s", log[-1])
        return outcome

    for run in range(int(params["runs"])):
        bad = corrupt(placed.data, placed.base, placed.desc_ptr, len(placed.descriptors),
                      int(params.get("address_width", 40)), rng)
        if only and run not in only:
            continue
        if await one(str(run), bad.kind, bad.detail, bad.data) == "hung":
            break
    for k, entry in enumerate(params.get("replay", ())):  # damage given field by field
        value = _field_value(entry)
        data = _with_field(placed, int(entry["index"]), str(entry["field"]), value)
        detail = f"descriptor {entry['index']}: {entry['field']} = {value}"
        if await one(f"replay {k}", "field", detail, data) == "hung":
            break
    driver.damaged = None  # the runs after the campaign load the image itself
    return {"runs": len(log), "outcomes": dict(sorted(outcomes.items())),
            "outside_window": outside, "log": log}


def output_path(results: Path) -> Path:
    """Where a run writes the network output it read back (``<results>.output.npz``): the
    last layer's int8 ``re`` and ``im`` slots and its name ``layer``."""
    return results.with_name(results.name + ".output.npz")


def _write(path: Path, doc: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2) + "\n")


def _describe(doc: dict[str, Any]) -> str:
    bad = [f"{r['name']}: {r['mismatches']} mismatches, first {r['first_mismatch']}"
           for r in doc["layers"] if not r["passed"]]
    return f"status {doc['status']} ({doc['message']}); " + ("; ".join(bad) or "all layers ok")


@cocotb.test()
async def run_network(dut):
    """Run the compiled image (and a fault run first with ``inject_error``)."""
    p = tb_params()
    for key in ("image_dir", "results"):
        assert key in p, f"testbench parameter {key!r} is required"
    image = CompiledImage.load(p["image_dir"])
    if "relocate" in p:  # the driver places the image at another base than it was built for
        image = image.relocated(int(p["relocate"]))
    results = Path(p["results"])
    timeout_cycles = int(p.get("timeout_cycles", DEFAULT_TIMEOUT_CYCLES))
    timeout_s = timeout_cycles * PERIOD_NS * 1e-9
    poll = bool(p.get("poll", False))
    inject = p.get("inject_error")

    Clock(dut.ap_clk, PERIOD_NS, unit="ns").start()
    dut.ap_rst_n.value = 0
    backend = CocotbBackend(dut, _ram_size(image), backpressure=float(p.get("backpressure", 0)),
                            latency=int(p.get("latency", 0)), seed=int(p.get("seed", 0)),
                            period_ns=PERIOD_NS)
    await ClockCycles(dut.ap_clk, RESET_CYCLES)
    dut.ap_rst_n.value = 1
    await ClockCycles(dut.ap_clk, 2)

    driver = _DamagingDriver(backend)
    await driver.identify()
    progress = _Progress(dut, backend, image, results.with_name(results.name + ".progress"))

    fault_doc = None
    if "window" in p:
        fault_doc = await _window_fault(dut, backend, image, progress, timeout_s, poll,
                                        p["window"])
    if "moved" in p:
        fault_doc = await _moved_run(dut, driver, backend, image, progress, timeout_s, poll,
                                     p["moved"])
    fuzz = await _fuzz(dut, driver, backend, image, p["fuzz"]) if "fuzz" in p else None
    if fuzz is not None:
        _write(results.with_name(results.name + ".fuzz.json"), fuzz)
        dut._log.info("fuzz: %d runs, %s, %d accesses outside the windows", fuzz["runs"],
                      fuzz["outcomes"], fuzz["outside_window"])
    aborts = await _abort_runs(dut, driver, backend, image,
                               [int(c) for c in p.get("abort", [])])
    far_doc = (await _far_desc_ptr_run(driver, backend, image, int(p["far_desc_ptr"]))
               if "far_desc_ptr" in p else None)
    timeout_message = None
    if "timeout_abort_cycles" in p:
        timeout_message = await _timeout_run(driver, backend, image,
                                             int(p["timeout_abort_cycles"]))
    bad = p.get("bad_descriptor")
    if inject or bad:
        if poll:  # the interrupt line is checked in both modes
            await driver.enable_interrupts()
        before = backend.interrupts
        if inject:
            backend.inject_fault(int(inject["addr"]), int(inject["size"]), str(inject["kind"]))
            what = f"injected {inject['kind']} fault at {int(inject['addr']):#x}"
        else:
            driver.damaged, addr = _with_flags(image, int(bad["index"]), int(bad["flags"]))
            what = f"descriptor {int(bad['index'])} at {addr:#x} with flags {int(bad['flags']):#x}"
        fault_doc = await _run(driver, backend, image, progress, timeout_s, poll)
        driver.damaged = None
        fault_doc["interrupt"] = backend.interrupts > before
        fault_doc["fault_hits"] = backend.fault_hits
        backend.clear_faults()
        _write(results, {**fault_doc, "fault_run": dict(fault_doc)})
        assert fault_doc["status"] == "error", (
            f"{what}: expected an error, got {_describe(fault_doc)}")
        assert fault_doc["interrupt"], "the error did not raise the interrupt"
        assert fault_doc["error_code"] != 0, "ERROR_CODE is 0 after an error"
        if bad:
            assert (fault_doc["error_code"], fault_doc["error_addr"]) == (
                ERROR_BAD_DESCRIPTOR, addr), f"{what}: {_describe(fault_doc)}"
        dut._log.info("fault run: %s at %#x after %d cycles", fault_doc["error_name"],
                      fault_doc["error_addr"], fault_doc["sim_cycles"])
        if poll:
            await driver.enable_interrupts(False)

    doc = await _run(driver, backend, image, progress, timeout_s, poll)
    if fault_doc is not None:
        doc["fault_run"] = fault_doc
    if aborts:
        doc["abort_runs"] = aborts
    if fuzz is not None:
        doc["fuzz"] = fuzz
    if timeout_message is not None:
        doc["timeout_run"] = timeout_message
    if far_doc is not None:
        doc["far_desc_ptr_run"] = far_doc
    # The network's output as the accelerator wrote it: what class scores are computed from.
    last = image.layer_names()[-1]
    re, im = await driver.read_output(image, last)
    np.savez(output_path(results), layer=last, re=re, im=im)
    _write(results, doc)
    dut._log.info("run: %s, %d cycles (counter %d), %.1f s wall", doc["status"],
                  doc["sim_cycles"], doc["total_cycles"], doc["wall_seconds"])
    if fuzz is not None:
        assert "hung" not in fuzz["outcomes"], (
            f"an abort did not stop the engine: {fuzz['log'][-1]}")
        assert not fuzz["outside_window"], "accesses outside the windows: " + "; ".join(
            line for line in fuzz["log"] if "OUTSIDE" in line)
    assert doc["status"] == "done" and doc["passed"], _describe(doc)
    assert not doc["outside_window"], f"accesses outside the window: {doc['outside_window']}"
