"""Verilog from Amaranth, deterministically, and the folder build products go to.

The generator (``fcircnn generate``, the synthesis runs, the Verilog cache) and the simulator
runner (:mod:`fcircnn.sim.runner`) share both; they live here, below the simulator.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

__all__ = ["build_root", "to_verilog"]


def build_root() -> Path:
    """Root of all build products: ``$FCIRCNN_BUILD_DIR`` or ``./build``."""
    return Path(os.environ.get("FCIRCNN_BUILD_DIR", "build")).resolve()


def to_verilog(component: Any, name: str, *, primitives: bool = False) -> str:
    """Convert an Amaranth component to Verilog text, deterministically.

    Uses :func:`amaranth.back.verilog.convert` without source locations, so the text depends only
    on the design (and the Amaranth/Yosys versions), not on file paths or line numbers.

    ``primitives``: elaborate under :data:`fcircnn.hw.dsp48e2.XILINX_PRIMITIVES`, so that
    components with a Xilinx primitive form (:class:`~fcircnn.hw.dsp48e2.DSP48E2Stage`) are
    ``DSP48E2`` instances: the Verilog for Yosys and Vivado. Without it (the simulators'
    Verilog) they are their behavioural description.
    """
    from amaranth.back import verilog

    from fcircnn.hw.dsp48e2 import XILINX_PRIMITIVES

    return verilog.convert(component, name=name, emit_src=False,
                           platform=XILINX_PRIMITIVES if primitives else None)
