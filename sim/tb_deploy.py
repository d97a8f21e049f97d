"""cocotb testbench: a deployment folder's ``run.py`` (``fcircnn deploy``) on the simulated
accelerator, through a fake ``pynq`` module.

The fake ``pynq`` is what :class:`fcircnn.runtime.driver.PynqBackend` uses on a board, backed by the
simulation: ``Overlay(path)`` (the ``.bit`` and its ``.hwh`` must exist; ``ip_dict`` names the
accelerator at :data:`PHYS_ADDR`), ``MMIO`` (register reads and writes become AXI4-Lite
transfers on ``s_axi_control``, the calling thread blocked until the simulator has done them),
``allocate`` (a NumPy buffer at physical address ``mem_base`` whose ``flush``/``invalidate``
copy it to and from the DDR model that ``m_axi`` reads and writes) and no ``Interrupt`` (the
driver polls, as on an overlay without an interrupt controller). ``run.py`` itself runs
unchanged (``runpy``) in a thread bridged to the simulator, with ``argv``.

Parameters (:func:`fcircnn.sim.runner.tb_params`)
-------------------------------------------------
``folder`` (str), ``argv`` (list of str), ``results`` (str), ``mem_base`` (int, default
0x200000), ``mem_size`` (int, default 16 MiB)

Results file: ``{"exit_code", "stdout", "stderr", "sim_cycles", "mmio_reads", "mmio_writes"}``.
"""

from __future__ import annotations

import contextlib
import io
import json
import runpy
import sys
import types
from pathlib import Path

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.task import bridge, resume
from cocotb.triggers import ClockCycles

from fcircnn.arch.ip import IP_NAME
from fcircnn.arch.registers import CONTROL_ADDR_WIDTH
from fcircnn.sim.backend_cocotb import CocotbBackend
from fcircnn.sim.runner import tb_params

#: Clock period of ``ap_clk`` (200 MHz) and reset cycles.
PERIOD_NS = 5
RESET_CYCLES = 10
#: Physical address of the accelerator's register window in the fake overlay.
PHYS_ADDR = 0xA000_0000


class _Buffer(np.ndarray):
    """What ``pynq.allocate`` returns: an array with a physical address."""

    device_address: int
    _backend: CocotbBackend

    def flush(self) -> None:
        self._backend.ram.write(self.device_address, self.tobytes())

    def invalidate(self) -> None:
        self[:] = np.frombuffer(bytes(self._backend.ram.read(self.device_address, self.nbytes)),
                                dtype=self.dtype)

    def freebuffer(self) -> None:
        pass


def fake_pynq(backend: CocotbBackend, mem_base: int, counts: dict[str, int]
              ) -> types.ModuleType:
    """The ``pynq`` module of a board, on ``backend``."""
    mod = types.ModuleType("pynq")

    class Overlay:
        def __init__(self, path: str):
            bit = Path(path)
            if not bit.is_file() or not bit.with_suffix(".hwh").is_file():
                raise OSError(f"fake pynq: no bitstream {bit} with its .hwh")
            self.bitfile_name = str(bit)
            self.ip_dict = {IP_NAME: {"phys_addr": PHYS_ADDR,
                                      "addr_range": 1 << CONTROL_ADDR_WIDTH,
                                      "interrupts": {}}}

    class MMIO:
        def __init__(self, base_addr: int, length: int):
            assert base_addr == PHYS_ADDR and length == 1 << CONTROL_ADDR_WIDTH
            self.read_reg, self.write_reg = resume(backend.read_reg), resume(backend.write_reg)

        def read(self, offset: int, length: int = 4) -> int:
            counts["mmio_reads"] += 1
            return self.read_reg(offset)

        def write(self, offset: int, value: int) -> None:
            counts["mmio_writes"] += 1
            self.write_reg(offset, int(value))

    def allocate(shape, dtype=np.uint32, **_):
        buf = np.zeros(shape, dtype=dtype).view(_Buffer)
        buf.device_address, buf._backend = mem_base, backend
        return buf

    mod.Overlay, mod.MMIO, mod.allocate = Overlay, MMIO, allocate
    return mod


def _run_script(folder: str, argv: list[str]) -> tuple[int, str, str]:
    """``run.py`` with ``argv`` as on the board (this thread is bridged to the simulator)."""
    out, err = io.StringIO(), io.StringIO()
    saved = sys.argv
    sys.argv = [str(Path(folder) / "run.py"), *argv]
    code = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            runpy.run_path(sys.argv[0], run_name="__main__")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if isinstance(exc.code, str):
            err.write(exc.code + "\n")
    finally:
        sys.argv = saved
    return code, out.getvalue(), err.getvalue()


@cocotb.test()
async def deploy_run(dut):
    """The deployment folder's run.py, end to end."""
    params = tb_params()
    mem_base = int(params.get("mem_base", 0x20_0000))
    mem_size = int(params.get("mem_size", 16 << 20))
    Clock(dut.ap_clk, PERIOD_NS, unit="ns").start()
    dut.ap_rst_n.value = 0
    backend = CocotbBackend(dut, mem_base + mem_size, period_ns=PERIOD_NS)
    await ClockCycles(dut.ap_clk, RESET_CYCLES)
    dut.ap_rst_n.value = 1
    await ClockCycles(dut.ap_clk, 2)
    counts = {"mmio_reads": 0, "mmio_writes": 0}
    saved = sys.modules.get("pynq")
    sys.modules["pynq"] = fake_pynq(backend, mem_base, counts)
    try:
        code, out, err = await bridge(_run_script)(params["folder"], list(params["argv"]))
    finally:
        if saved is None:
            sys.modules.pop("pynq", None)
        else:
            sys.modules["pynq"] = saved
    Path(params["results"]).write_text(json.dumps({
        "exit_code": code, "stdout": out, "stderr": err, "sim_cycles": backend.cycles(),
        **counts}, indent=2) + "\n")
