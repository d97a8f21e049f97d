"""Host driver of the accelerator: load a compiled image, run it, check it bit for bit.

The driver talks to the accelerator through a :class:`Backend`: four register/memory
primitives and an interrupt wait, all ``async`` so the same driver runs in a cocotb simulation
(:class:`fcircnn.sim.backend_cocotb.CocotbBackend`), on a ZCU102 under PYNQ
(:class:`PynqBackend`, with :func:`asyncio.run`) and against Python models in the tests.

A run (:meth:`Driver.run`)
--------------------------
1. :meth:`~Driver.load` writes the image bytes at ``image.base``;
2. :meth:`~Driver.start` clears ISR, writes ``DESC_PTR`` and sets ``CTRL.start``;
3. :meth:`~Driver.wait` waits for ``done`` or ``error``: by interrupt (GIE and IER enabled, ISR
   read and cleared) or by polling ``CTRL``; on a timeout :meth:`~Driver.run` stops the engine
   with :meth:`~Driver.abort` and raises :class:`DriverTimeout`, whose message holds the
   timeout, the descriptors finished, the cycles counted and how the abort ended;
4. :meth:`~Driver.counters` reads the 64-bit counters (``_LO`` first: reading it latches
   ``_HI``);
5. :meth:`~Driver.layer_results` reads every layer's cycles entries and output map and compares
   the map with the golden int8 slots bit for bit.

Register offsets and bits come from :mod:`fcircnn.arch.registers`, and so do the names of the
engine's error codes (:data:`~fcircnn.arch.registers.ERROR_CODES`).
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from fcircnn.arch.ip import IP_NAME
from fcircnn.arch.registers import ERROR_CODES, FIELDS, IDENT, WINDOWS, offset
from fcircnn.runtime.image import CYCLES_ENTRY_BYTES, CompiledImage, CycleEntry, ImageError

__all__ = [
    "ABORT_TIMEOUT_S",
    "MAX_TIMEOUT_S",
    "Backend",
    "Counters",
    "Driver",
    "DriverError",
    "DriverTimeout",
    "LayerResult",
    "Mismatch",
    "PynqBackend",
    "RunReport",
    "RunStatus",
    "error_name",
]

CTRL, GIE, IER, ISR = offset("CTRL"), offset("GIE"), offset("IER"), offset("ISR")
ERROR_CODE = offset("ERROR_CODE")
ERROR_ADDR_LO, ERROR_ADDR_HI = offset("ERROR_ADDR_LO"), offset("ERROR_ADDR_HI")
DESC_PTR_LO, DESC_PTR_HI = offset("DESC_PTR_LO"), offset("DESC_PTR_HI")
ID, VERSION = offset("ID"), offset("VERSION")

_BITS = {(f.register, f.name): 1 << f.bit for f in FIELDS}
CTRL_START = _BITS["CTRL", "start"]
CTRL_BUSY = _BITS["CTRL", "busy"]
CTRL_DONE = _BITS["CTRL", "done"]
CTRL_ERROR = _BITS["CTRL", "error"]
CTRL_ABORT = _BITS["CTRL", "abort"]
IRQ_DONE = _BITS["ISR", "done"]
IRQ_ERROR = _BITS["ISR", "error"]
_MASK32 = 0xFFFF_FFFF


class DriverError(RuntimeError):
    """The accelerator or its backend did not behave as the driver needs (message says how)."""


class DriverTimeout(DriverError):
    """Neither ``done`` nor ``error`` came within the timeout; the message holds CTRL and ISR
    (from :meth:`Driver.run`: also the progress and how the abort that followed ended).

    Attributes
    ----------
    status : RunStatus or None
        From :meth:`Driver.run`: how the engine ended after the abort that followed the
        timeout (``error`` with :data:`~fcircnn.arch.registers.ERROR_ABORTED`, or ``done`` if
        the list ended as the abort came); ``None`` if the abort did not stop it, or no abort
        was tried (:meth:`Driver.wait`).
    """

    def __init__(self, message: str, status: RunStatus | None = None):
        super().__init__(message)
        self.status = status


def error_name(code: int) -> str:
    """Name of engine error ``code`` (:data:`~fcircnn.arch.registers.ERROR_CODES`), or
    ``"error <code>"`` if the table lacks the code."""
    name = ERROR_CODES.get(code)
    return name if name is not None else f"error {code}"


def _ctrl_text(ctrl: int) -> str:
    bits = [n for n, b in (("busy", CTRL_BUSY), ("done", CTRL_DONE), ("error", CTRL_ERROR))
            if ctrl & b]
    return f"{ctrl:#010x} ({', '.join(bits) or 'idle'})"


def _isr_text(isr: int) -> str:
    bits = [n for n, b in (("done", IRQ_DONE), ("error", IRQ_ERROR)) if isr & b]
    return f"{isr:#010x} ({', '.join(bits) or 'none'})"


# --------------------------------------------------------------------------------------------
# Results


@dataclass(frozen=True)
class RunStatus:
    """How the descriptor list ended: ``done`` and/or ``error`` (CTRL, ISR) and the captured
    ``error_code`` and ``error_addr`` (0 without error)."""

    done: bool
    error: bool
    error_code: int = 0
    error_addr: int = 0

    @property
    def error_name(self) -> str:
        """Name of :attr:`error_code` (see :func:`error_name`), ``""`` without error."""
        return error_name(self.error_code) if self.error else ""

    @property
    def state(self) -> str:
        """``"error"`` if the engine reported an error, else ``"done"``."""
        return "error" if self.error else "done"


@dataclass(frozen=True)
class Counters:
    """The register file's 64-bit counters since the last start."""

    cycles: int
    pe_busy: int
    dma_stall: int


@dataclass(frozen=True)
class Mismatch:
    """First differing slot of a layer output: slot and voxel, and the ``(re, im)`` read and
    expected."""

    slot: int
    d: int
    h: int
    w: int
    got: tuple[int, int]
    expected: tuple[int, int]

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready fields."""
        return {"slot": self.slot, "d": self.d, "h": self.h, "w": self.w,
                "got": list(self.got), "expected": list(self.expected)}

    def __str__(self) -> str:
        return (f"slot {self.slot} at ({self.d}, {self.h}, {self.w}): got {self.got}, "
                f"expected {self.expected}")


@dataclass(frozen=True)
class LayerResult:
    """One layer after a run.

    Attributes
    ----------
    name : str
        Layer name.
    cycles, pe_busy, dma_stall : int
        Sums over the layer's descriptors of their cycles entries.
    finished : int
        How many of the layer's descriptors wrote a non-zero cycles entry.
    descriptors : int
        How many descriptors the layer owns.
    passed : bool
        Whether the output map equals the golden int8 slots bit for bit (``True`` when not
        :attr:`checked`).
    mismatches : int
        Number of ``(slot, d, h, w)`` positions whose ``re`` or ``im`` differs.
    first_mismatch : Mismatch or None
        The first of them in ``(slot, d, h, w)`` order.
    checked : bool
        Whether the output was compared: not when a later layer's map reuses its bytes (an
        image laid out by liveness, :meth:`~fcircnn.runtime.image.CompiledImage.survives`) and
        the backend kept no copy of it from the moment its layer finished.
    """

    name: str
    cycles: int
    pe_busy: int
    dma_stall: int
    finished: int
    descriptors: int
    passed: bool
    mismatches: int
    first_mismatch: Mismatch | None
    checked: bool = True

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready fields (``first_mismatch`` as a dict or ``None``)."""
        return {"name": self.name, "cycles": self.cycles, "pe_busy": self.pe_busy,
                "dma_stall": self.dma_stall, "finished": self.finished,
                "descriptors": self.descriptors, "passed": self.passed,
                "mismatches": self.mismatches,
                "first_mismatch": self.first_mismatch.as_dict() if self.first_mismatch else None,
                "checked": self.checked}


@dataclass(frozen=True)
class RunReport:
    """Everything :meth:`Driver.run` learned.

    ``elapsed`` is the backend's clock over the run (simulated seconds for cocotb, ``None`` if
    the backend has no clock); ``wall_seconds`` the host's.
    """

    status: RunStatus
    counters: Counters
    layers: tuple[LayerResult, ...]
    elapsed: float | None
    wall_seconds: float

    @property
    def passed(self) -> bool:
        """Done without error and every layer bit-exact."""
        return self.status.done and not self.status.error and all(r.passed for r in self.layers)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready summary (the layout of the testbench's results file)."""
        s = self.status
        return {"status": s.state, "error_code": s.error_code, "error_addr": s.error_addr,
                "error_name": s.error_name, "total_cycles": self.counters.cycles,
                "pe_busy": self.counters.pe_busy, "dma_stall": self.counters.dma_stall,
                "elapsed": self.elapsed, "wall_seconds": self.wall_seconds,
                "passed": self.passed, "layers": [r.as_dict() for r in self.layers]}


# --------------------------------------------------------------------------------------------
# Backend protocol and driver


@runtime_checkable
class Backend(Protocol):
    """What the driver needs from a platform (all methods are coroutines).

    Backends may also provide ``elapsed() -> float``, seconds on their own clock (simulated
    time for a simulator); the driver uses it for poll timeouts and reports, and falls back to
    the host clock without it. A backend that sees every write (a simulation's memory model)
    may provide ``keep_outputs(image)``, called when the image is loaded, and
    ``finished_output(cycles_addr) -> bytes | None``: the bytes of the output map of the layer
    whose last descriptor has its cycles entry at ``cycles_addr``, as they were when that
    entry was written, so that a layer whose map a later one reuses is still checked.
    """

    async def write_reg(self, offset: int, value: int) -> None:
        """Write the 32-bit register at byte ``offset`` of ``s_axi_control``."""

    async def read_reg(self, offset: int) -> int:
        """Read the 32-bit register at byte ``offset``."""

    async def write_mem(self, addr: int, data: bytes) -> None:
        """Write ``data`` to DDR at absolute address ``addr``."""

    async def read_mem(self, addr: int, size: int) -> bytes:
        """Read ``size`` bytes of DDR at absolute address ``addr``."""

    async def wait_interrupt(self, timeout_s: float) -> bool:
        """Wait until ``interrupt`` is high (return at once if it already is); ``False`` after
        ``timeout_s`` seconds (of the backend's clock) without it."""


#: The longest a run may be given, seconds (a day; a clip takes milliseconds).
MAX_TIMEOUT_S = 86400.0
#: How long :meth:`Driver.abort` waits for the engine to stop by default, seconds: the bursts
#: in flight complete within microseconds on a board (2,000,000 cycles at 200 MHz).
ABORT_TIMEOUT_S = 0.01
#: :meth:`Driver.abort` also reads CTRL at least this often before it gives up, whatever the
#: clock says (a simulated board on the wall clock reads it in milliseconds, not microseconds).
ABORT_MIN_POLLS = 1000


def _check_timeout(timeout_s: float) -> float:
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not (
            0 < timeout_s <= MAX_TIMEOUT_S):
        raise ValueError(f"timeout_s must be seconds in (0, {MAX_TIMEOUT_S:g}], not "
                         f"{timeout_s!r}")
    return float(timeout_s)


class Driver:
    """Run compiled images on an accelerator behind ``backend``.

    Parameters
    ----------
    backend : Backend
        Register, memory and interrupt access.

    Raises
    ------
    TypeError
        If ``backend`` lacks a method of :class:`Backend`.
    """

    def __init__(self, backend: Backend):
        missing = [m for m in ("write_reg", "read_reg", "write_mem", "read_mem",
                               "wait_interrupt") if not callable(getattr(backend, m, None))]
        if missing:
            raise TypeError(f"backend {type(backend).__name__} lacks {', '.join(missing)}")
        self.backend = backend

    def _clock(self) -> float:
        elapsed = getattr(self.backend, "elapsed", None)
        return float(elapsed()) if callable(elapsed) else time.monotonic()

    def _has_clock(self) -> bool:
        return callable(getattr(self.backend, "elapsed", None))

    async def _read64(self, lo: int, hi: int) -> int:
        low = await self.backend.read_reg(lo)  # reading _LO latches _HI (counters)
        high = await self.backend.read_reg(hi)
        return ((high & _MASK32) << 32) | (low & _MASK32)

    # ---------------------------------------------------------------------------- primitives

    async def identify(self) -> tuple[int, int]:
        """``(ID, VERSION)`` registers.

        Raises
        ------
        DriverError
            If ID is not the accelerator's (:data:`fcircnn.hw.regfile.IDENT`, "FCIR").
        """
        ident = await self.backend.read_reg(ID)
        version = await self.backend.read_reg(VERSION)
        if ident != IDENT:
            raise DriverError(f"ID register reads {ident:#010x}, not {IDENT:#010x} ('FCIR'): "
                              f"wrong IP or address")
        return ident, version

    def place(self, image: CompiledImage) -> CompiledImage:
        """``image`` at the backend's buffer (``backend.base``, e.g. the physical address of
        the buffer PYNQ allocated), relocated if it was compiled for another base; as is when
        the backend has no fixed buffer."""
        base = getattr(self.backend, "base", None)
        size = getattr(self.backend, "size", None)
        if size is not None and len(image.data) > size:
            beyond = next((r for r in image.regions if r.end - image.base > size), None)
            where = f": {beyond} and what follows would leave it" if beyond else ""
            raise DriverError(f"the image needs {len(image.data)} bytes and the DDR buffer "
                              f"holds {size} (mem_size){where}; allocate a larger buffer")
        try:
            return image if base is None or base == image.base else image.relocated(base)
        except ImageError as exc:
            raise DriverError(f"cannot place the image at the buffer ({base:#x}): {exc}") from None

    async def prepare(self, image: CompiledImage) -> CompiledImage:
        """``image`` placed (:meth:`place`), loaded (:meth:`load`) and the memory windows set to
        its own (:meth:`set_windows`): what :meth:`run` does before the start; the placed
        image."""
        image = self.place(image)
        await self.load(image)
        await self.set_windows(*image.windows)
        return image

    async def load(self, image: CompiledImage) -> None:
        """Write the whole image at ``image.base`` (also clears outputs and cycles entries)."""
        keep = getattr(self.backend, "keep_outputs", None)
        if keep is not None:
            keep(image)
        await self.backend.write_mem(image.base, image.data)

    async def enable_interrupts(self, enable: bool = True) -> None:
        """Set (or clear) GIE and both IER bits (done, error)."""
        await self.backend.write_reg(IER, (IRQ_DONE | IRQ_ERROR) if enable else 0)
        await self.backend.write_reg(GIE, 1 if enable else 0)

    async def set_windows(self, read: tuple[int, int], write: tuple[int, int]) -> None:
        """Program the memory windows (:mod:`fcircnn.arch.registers`): ``read`` and ``write``,
        each ``(first byte, last byte)``, as whole 4 KiB pages.

        Raises
        ------
        ValueError
            If a window is not two 64-bit addresses with the first at most the last.
        DriverError
            If the engine is busy (the windows must not change under a run).
        """
        for name, (lo, hi) in (("read", read), ("write", write)):
            if not all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1 << 64
                       for v in (lo, hi)) or lo > hi:
                raise ValueError(f"{name} window must be (first, last) 64-bit addresses with "
                                 f"first <= last, not {(lo, hi)!r}")
        ctrl = await self.backend.read_reg(CTRL)
        if ctrl & CTRL_BUSY:
            raise DriverError(f"cannot set the windows: the engine is busy (CTRL = "
                              f"{_ctrl_text(ctrl)})")
        for direction, (lo, hi) in (("read", read), ("write", write)):
            for register, value in zip(WINDOWS[direction], (lo, hi), strict=True):
                await self.backend.write_reg(offset(f"{register}_LO"), value & _MASK32)
                await self.backend.write_reg(offset(f"{register}_HI"), value >> 32)

    async def start(self, desc_ptr: int) -> None:
        """Clear ISR, write ``DESC_PTR`` and start the engine.

        Raises
        ------
        ValueError
            If ``desc_ptr`` is not a 16-byte aligned 64-bit address.
        DriverError
            If the engine is busy.
        """
        if (isinstance(desc_ptr, bool) or not isinstance(desc_ptr, int) or desc_ptr < 0
                or desc_ptr >> 64 or desc_ptr % 16):
            raise ValueError(f"desc_ptr must be a 16-byte aligned 64-bit address, not "
                             f"{desc_ptr!r}")
        ctrl = await self.backend.read_reg(CTRL)
        if ctrl & CTRL_BUSY:
            raise DriverError(f"cannot start: the engine is busy (CTRL = {_ctrl_text(ctrl)})")
        await self.backend.write_reg(ISR, IRQ_DONE | IRQ_ERROR)
        await self.backend.write_reg(DESC_PTR_LO, desc_ptr & _MASK32)
        await self.backend.write_reg(DESC_PTR_HI, desc_ptr >> 32)
        await self.backend.write_reg(CTRL, CTRL_START)

    async def abort(self, timeout_s: float = ABORT_TIMEOUT_S) -> RunStatus:
        """Stop a running engine (CTRL.abort, :mod:`fcircnn.arch.registers`): it issues no
        further burst, completes those in flight and ends with ``error`` and ERROR_CODE
        :data:`~fcircnn.arch.registers.ERROR_ABORTED`. Polls CTRL until the engine is idle,
        then reads the status and clears ISR. An idle engine is left alone: its last status
        is returned (``done`` and ``error`` both false if it never ran).

        Parameters
        ----------
        timeout_s : float
            Seconds of the backend's clock to wait for the engine to stop (and at least
            :data:`ABORT_MIN_POLLS` reads of CTRL).

        Raises
        ------
        DriverError
            If the engine is still busy after that: a burst in flight is not answered
            by the bus, which only reloading the bitstream clears (the message says so, with
            CTRL, ISR and the cycles counted).
        """
        timeout_s = _check_timeout(timeout_s)
        ctrl = await self.backend.read_reg(CTRL)
        if ctrl & CTRL_BUSY:
            await self.backend.write_reg(CTRL, CTRL_ABORT)
            ctrl, stopped = await self._poll(lambda c: not c & CTRL_BUSY, timeout_s,
                                             ABORT_MIN_POLLS)
            if not stopped:
                isr = await self.backend.read_reg(ISR)
                cycles = (await self.counters()).cycles
                raise DriverError(
                    f"abort did not stop the engine within {timeout_s:g} s: CTRL = "
                    f"{_ctrl_text(ctrl)}, ISR = {_isr_text(isr)}, {cycles} cycles counted; a "
                    f"burst in flight is not answered by the bus: reload the bitstream")
        return await self._ended(ctrl)

    async def _poll(self, finished: Any, timeout_s: float, min_polls: int = 0
                    ) -> tuple[int, bool]:
        """Read CTRL until ``finished(ctrl)``: ``(ctrl, True)``; or ``(ctrl, False)`` once
        ``timeout_s`` of the backend's clock have passed and CTRL was read more than
        ``min_polls`` times."""
        t0, polls = self._clock(), 0
        while True:
            ctrl = await self.backend.read_reg(CTRL)
            if finished(ctrl):
                return ctrl, True
            polls += 1
            if self._clock() - t0 > timeout_s and polls > min_polls:
                return ctrl, False
            if not self._has_clock():
                await asyncio.sleep(0.0005)

    async def _ended(self, ctrl: int) -> RunStatus:
        """The status of an engine that stopped with ``ctrl``; ISR read and cleared."""
        isr = await self.backend.read_reg(ISR)
        if isr:
            await self.backend.write_reg(ISR, isr & (IRQ_DONE | IRQ_ERROR))
        return await self._status(ctrl, isr)

    async def _status(self, ctrl: int, isr: int) -> RunStatus:
        done = bool(ctrl & CTRL_DONE or isr & IRQ_DONE)
        error = bool(ctrl & CTRL_ERROR or isr & IRQ_ERROR)
        code = addr = 0
        if error:
            code = await self.backend.read_reg(ERROR_CODE)
            addr = await self._read64(ERROR_ADDR_LO, ERROR_ADDR_HI)
        return RunStatus(done, error, code, addr)

    async def _timeout(self, timeout_s: float, how: str) -> DriverTimeout:
        ctrl = await self.backend.read_reg(CTRL)
        isr = await self.backend.read_reg(ISR)
        return DriverTimeout(f"no done or error within {timeout_s:g} s ({how}): CTRL = "
                             f"{_ctrl_text(ctrl)}, ISR = {_isr_text(isr)}")

    async def wait(self, timeout_s: float, *, poll: bool = False) -> RunStatus:
        """Wait for the end of the descriptor list.

        Parameters
        ----------
        timeout_s : float
            Seconds of the backend's clock (simulated seconds under cocotb).
        poll : bool
            Poll ``CTRL`` instead of waiting for the interrupt (GIE/IER are left as they are).
            Interrupt mode enables GIE and IER, waits, then reads and clears ISR (W1C).

        Raises
        ------
        DriverTimeout
            With CTRL and ISR in the message.
        """
        timeout_s = _check_timeout(timeout_s)
        if not poll:
            await self.enable_interrupts()
            if not await self.backend.wait_interrupt(timeout_s):
                raise await self._timeout(timeout_s, "waiting for the interrupt")
            isr = await self.backend.read_reg(ISR)
            await self.backend.write_reg(ISR, isr & (IRQ_DONE | IRQ_ERROR))
            ctrl = await self.backend.read_reg(CTRL)
            return await self._status(ctrl, isr)
        ctrl, ended = await self._poll(
            lambda c: c & (CTRL_DONE | CTRL_ERROR) and not c & CTRL_BUSY, timeout_s)
        if not ended:
            raise await self._timeout(timeout_s, "polling CTRL")
        return await self._ended(ctrl)

    async def counters(self) -> Counters:
        """The CYCLES, PE_BUSY and DMA_STALL counters (each ``_LO`` then ``_HI``)."""
        values = [await self._read64(offset(f"{n}_LO"), offset(f"{n}_HI"))
                  for n in ("CYCLES", "PE_BUSY", "DMA_STALL")]
        return Counters(*values)

    async def read_cycles(self, image: CompiledImage) -> list[CycleEntry]:
        """The cycles entry of every descriptor, in list order."""
        return [image.decode_cycles(await self.backend.read_mem(d.cycles_addr,
                                                                CYCLES_ENTRY_BYTES))
                for d in image.descriptors]

    async def progress(self, image: CompiledImage) -> tuple[int, int]:
        """``(finished, total)`` descriptors, counting non-zero cycles entries (over the bus;
        a simulation can read its memory model directly instead)."""
        entries = await self.read_cycles(image)
        return sum(e.finished for e in entries), len(entries)

    async def read_output(self, image: CompiledImage, name: str) -> tuple[np.ndarray, np.ndarray]:
        """Layer ``name``'s output slots ``(re, im)`` as the accelerator wrote them to memory."""
        out = image.output(name)
        return out.decode(await self.backend.read_mem(out.addr, out.size))

    async def _output_bytes(self, image: CompiledImage, name: str) -> bytes | None:
        """Layer ``name``'s output bytes as its layer left them: from memory if no later map
        reuses them, else the backend's copy taken when the layer finished
        (``backend.finished_output(cycles_addr)``, a simulation's), else ``None``."""
        out = image.output(name)
        if image.survives(name):
            return await self.backend.read_mem(out.addr, out.size)
        kept = getattr(self.backend, "finished_output", None)
        return None if kept is None else kept(image.layer_descriptors(name)[-1].cycles_addr)

    async def layer_results(self, image: CompiledImage) -> list[LayerResult]:
        """Read and check every layer, in list order (see :class:`LayerResult`)."""
        results = []
        for name in image.layer_names():
            descs = image.layer_descriptors(name)
            total, finished = CycleEntry(0, 0, 0), 0
            for d in descs:
                raw = await self.backend.read_mem(d.cycles_addr, CYCLES_ENTRY_BYTES)
                entry = image.decode_cycles(raw)
                total += entry
                finished += entry.finished
            raw = await self._output_bytes(image, name)
            if raw is None:
                results.append(LayerResult(name, total.cycles, total.pe_busy, total.dma_stall,
                                           finished, len(descs), True, 0, None, checked=False))
                continue
            re, im = image.output(name).decode(raw)
            exp_re, exp_im = image.expected[name]
            diff = (re != exp_re) | (im != exp_im)
            count = int(np.count_nonzero(diff))
            first = None
            if count:
                s, d, h, w = (int(v) for v in np.argwhere(diff)[0])
                first = Mismatch(s, d, h, w, (int(re[s, d, h, w]), int(im[s, d, h, w])),
                                 (int(exp_re[s, d, h, w]), int(exp_im[s, d, h, w])))
            results.append(LayerResult(name, total.cycles, total.pe_busy, total.dma_stall,
                                       finished, len(descs), count == 0, count, first))
        return results

    async def run(self, image: CompiledImage, timeout_s: float, *, poll: bool = False,
                  abort_timeout_s: float = ABORT_TIMEOUT_S) -> RunReport:
        """Place (:meth:`place`), load, program the memory windows to the image's own
        (:attr:`CompiledImage.windows`: the engine reads only the image and writes only its
        cycle entries and maps), start, wait, then read the counters and check every layer.

        Raises
        ------
        DriverTimeout
            If the list does not end within ``timeout_s`` (backend clock): the engine is
            stopped with :meth:`abort` (waiting ``abort_timeout_s``) first, and the message
            gives the timeout, the descriptors finished, the cycles counted and where the
            abort stopped the engine
            (or that it did not).
        """
        timeout_s = _check_timeout(timeout_s)
        wall0 = time.monotonic()
        image = await self.prepare(image)
        t0 = self._clock() if self._has_clock() else None
        await self.start(image.desc_ptr)
        try:
            status = await self.wait(timeout_s, poll=poll)
        except DriverTimeout as exc:
            raise await self._stopped(image, str(exc), abort_timeout_s) from None
        elapsed = self._clock() - t0 if t0 is not None else None
        counters = await self.counters()
        layers = await self.layer_results(image)
        return RunReport(status, counters, tuple(layers), elapsed, time.monotonic() - wall0)


    async def _stopped(self, image: CompiledImage, why: str,
                       abort_timeout_s: float) -> DriverTimeout:
        """The timeout of a run: ``why``, its progress, and how :meth:`abort` ended it (its
        status, ``None`` if the engine did not stop)."""
        cycles = (await self.counters()).cycles
        finished, total = await self.progress(image)
        text = f"{why}; {finished} of {total} descriptors finished, {cycles} cycles counted"
        try:
            status = await self.abort(abort_timeout_s)
        except DriverError as exc:
            return DriverTimeout(f"{text}; {exc}")
        if status.error:
            return DriverTimeout(f"{text}; aborted: the engine stopped ({status.error_name}, "
                                 f"ERROR_ADDR {status.error_addr:#x}) and is idle", status)
        return DriverTimeout(f"{text}; the list ended as the abort came ({status.state})",
                             status)


# --------------------------------------------------------------------------------------------
# PYNQ


class PynqBackend:
    """The accelerator on a Zynq UltraScale+ board under PYNQ.

    The DDR image lives in one contiguous buffer from ``pynq.allocate`` of ``mem_size`` bytes,
    made here. Its physical address is :attr:`base` (``buffer.device_address``, page aligned);
    :meth:`Driver.run` places an image compiled for any base there
    (:meth:`~fcircnn.runtime.image.CompiledImage.relocated`). Registers go through
    ``pynq.MMIO`` on the IP's address range; the interrupt through ``pynq.Interrupt`` if the
    overlay connects the IP's ``interrupt`` pin to an interrupt controller, else by polling the
    interrupt registers. Use it with ``asyncio.run(Driver(backend).run(image, 10.0))``.

    Parameters
    ----------
    overlay : str, os.PathLike or pynq.Overlay
        Bitstream path (its ``.hwh`` next to it) or a loaded overlay.
    ip_name : str
        Name of the accelerator in the block design (default
        :data:`fcircnn.arch.ip.IP_NAME`, ``"fcircnn_accel_0"``).
    mem_size : int
        Bytes of the DDR buffer (must hold the image; default 64 MiB).
    poll_interval_s : float
        Sleep between interrupt polls without an interrupt controller.

    Raises
    ------
    DriverError
        If ``pynq`` is not installed, or the overlay has no IP ``ip_name``.
    """

    def __init__(self, overlay: Any, ip_name: str = IP_NAME, *,
                 mem_size: int = 64 << 20, poll_interval_s: float = 1e-4):
        try:
            import pynq
        except ImportError:
            raise DriverError("PynqBackend needs the 'pynq' package (the board's PYNQ image); "
                              "it is not installed here") from None
        if isinstance(mem_size, bool) or not isinstance(mem_size, int) or mem_size <= 0:
            raise ValueError(f"mem_size must be a positive number of bytes, not {mem_size!r}")
        self._pynq = pynq
        if isinstance(overlay, (str, os.PathLike)):
            overlay = pynq.Overlay(os.fspath(overlay))
        self.overlay = overlay
        ip_dict = getattr(overlay, "ip_dict", {})
        if ip_name not in ip_dict:
            raise DriverError(f"the overlay has no IP {ip_name!r} (IPs: "
                              f"{', '.join(sorted(ip_dict)) or 'none'})")
        info = ip_dict[ip_name]
        self.ip_name = ip_name
        self._mmio = pynq.MMIO(info["phys_addr"], info["addr_range"])
        self._buffer = pynq.allocate(shape=(mem_size,), dtype=np.uint8)
        self.base = int(self._buffer.device_address)
        self.size = mem_size
        self.poll_interval_s = poll_interval_s
        self._interrupt = None
        if "interrupt" in (info.get("interrupts") or {}) and hasattr(pynq, "Interrupt"):
            self._interrupt = pynq.Interrupt(f"{ip_name}/interrupt")
        self._t0 = time.monotonic()

    def elapsed(self) -> float:
        """Seconds since construction (host clock)."""
        return time.monotonic() - self._t0

    def _offset(self, addr: int, size: int) -> int:
        off = addr - self.base
        if off < 0 or off + size > self.size:
            raise DriverError(f"[{addr:#x}, {addr + size:#x}) is outside the DDR buffer "
                              f"[{self.base:#x}, {self.base + self.size:#x}); compile the "
                              f"image with base={self.base:#x} and a large enough mem_size")
        return off

    async def write_reg(self, offset: int, value: int) -> None:
        self._mmio.write(offset, value & _MASK32)

    async def read_reg(self, offset: int) -> int:
        return int(self._mmio.read(offset)) & _MASK32

    async def write_mem(self, addr: int, data: bytes) -> None:
        off = self._offset(addr, len(data))
        self._buffer[off:off + len(data)] = np.frombuffer(bytes(data), dtype=np.uint8)
        self._buffer.flush()

    async def read_mem(self, addr: int, size: int) -> bytes:
        off = self._offset(addr, size)
        self._buffer.invalidate()
        return bytes(self._buffer[off:off + size])

    async def _level(self) -> bool:
        gie = await self.read_reg(GIE)
        return bool(gie & 1 and await self.read_reg(IER) & await self.read_reg(ISR))

    async def wait_interrupt(self, timeout_s: float) -> bool:
        if await self._level():
            return True
        if self._interrupt is not None:
            try:
                await asyncio.wait_for(self._interrupt.wait(), timeout_s)
            except asyncio.TimeoutError:  # not the builtin TimeoutError before Python 3.11
                return await self._level()
            return True
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            await asyncio.sleep(self.poll_interval_s)
            if await self._level():
                return True
        return False

    def close(self) -> None:
        """Free the DDR buffer."""
        self._buffer.freebuffer()
