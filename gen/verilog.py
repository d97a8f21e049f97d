"""Verilog from Amaranth, deterministically, and the folder build products go to.

The generator (``fcircnn generate``, the synthesis runs, the Verilog cache) and the simulator
runner (:mod:`fcircnn.sim.runner`) share both; they live here, below the simulator.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["NATIVE_CONVERSION", "build_root", "to_verilog"]


def build_root() -> Path:
    """Root of all build products: ``$FCIRCNN_BUILD_DIR`` or ``./build``."""
    return Path(os.environ.get("FCIRCNN_BUILD_DIR", "build")).resolve()


def to_verilog(component: Any, name: str, *, primitives: bool = False) -> str:
    """Convert an Amaranth component to Verilog text, deterministically.

    Uses :func:`amaranth.back.verilog.convert` without source locations, so the text depends only
    on the design (and the Amaranth/Yosys versions), not on file paths or line numbers. A
    design too large for the WebAssembly Yosys that Amaranth runs (4 GB: the conversion ends
    in ``bad_alloc``) is converted from Amaranth's RTLIL (:func:`amaranth.back.rtlil.convert`)
    by the ``pyosys`` wheel's native build of Yosys with the same passes
    (:data:`NATIVE_CONVERSION`), if it is installed; a design converts one way or the other
    every time, so the text stays a function of the design.

    ``primitives``: elaborate under :data:`fcircnn.hw.dsp48e2.XILINX_PRIMITIVES`, so that
    components with a Xilinx primitive form (:class:`~fcircnn.hw.dsp48e2.DSP48E2Stage`) are
    ``DSP48E2`` instances: the Verilog for Yosys and Vivado. Without it (the simulators'
    Verilog) they are their behavioural description.

    Raises
    ------
    amaranth.back.verilog.YosysError
        If the conversion fails otherwise.
    ModuleNotFoundError
        If the design needs the native conversion and ``pyosys`` is not installed (the CLI
        names the extra to install).
    """
    from amaranth.back import rtlil, verilog

    from fcircnn.hw.dsp48e2 import XILINX_PRIMITIVES

    platform = XILINX_PRIMITIVES if primitives else None
    try:
        return verilog.convert(component, name=name, emit_src=False, platform=platform)
    except verilog.YosysError as exc:
        if "bad_alloc" not in str(exc):
            raise
        if importlib.util.find_spec("pyosys") is None:
            raise ModuleNotFoundError(
                f"{name}: too large for the built-in Yosys' 4 GB; converting it needs pyosys, "
                "the [native-yosys] extra", name="pyosys") from None
    return _native_verilog(rtlil.convert(component, name=name, emit_src=False,
                                         platform=platform))


#: The passes :func:`amaranth.back.verilog.convert` runs on its RTLIL (Amaranth 0.5), for the
#: native conversion of :func:`to_verilog`.
NATIVE_CONVERSION = ("read_rtlil design.il", "proc -nomux -norom", "memory_collect",
                     "write_verilog -norename design.v")


def _native_verilog(rtlil_text: str) -> str:
    """``rtlil_text`` as Verilog, by the ``pyosys`` wheel's Yosys in a process of its own (its
    memory is returned when it ends)."""
    run = ("from pyosys import libyosys as ys\n"
           "d = ys.Design()\n"
           f"for p in {NATIVE_CONVERSION!r}:\n"
           "    ys.run_pass(p, d)\n")
    with tempfile.TemporaryDirectory(prefix="fcircnn-verilog-") as tmp:
        folder = Path(tmp)
        (folder / "design.il").write_text(rtlil_text)
        done = subprocess.run([sys.executable, "-c", run], cwd=folder, capture_output=True,
                              text=True)
        if done.returncode:
            from amaranth.back.verilog import YosysError

            raise YosysError(f"native Yosys conversion failed: {done.stderr.strip()[-2000:]}")
        return (folder / "design.v").read_text()
