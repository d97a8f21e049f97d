"""The accelerator IP's names, stated once.

:data:`TOP_NAME` is the Verilog module of the accelerator's top level (the hardware, the
generated Verilog, the Vivado IP and synthesis); :data:`IP_NAME` is its instance in the
generated block design, which the overlay's ``.hwh`` lists and the host driver looks up.
"""

from __future__ import annotations

import json
import math
import os

__all__ = ["CLOCK_FILE", "CONTROL_BUS", "IP_NAME", "TOP_NAME", "read_clock_file"]

#: Verilog module name of the accelerator top level.
TOP_NAME = "fcircnn_accel"
#: The top level's AXI4-Lite subordinate (the register file): its port-name prefix, the
#: interface Vivado infers from it and the bus a host driver reaches the registers through.
CONTROL_BUS = "s_axi_control"
#: The accelerator's instance in the block design (Vivado's first instance of the IP).
IP_NAME = f"{TOP_NAME}_0"
#: The Vivado build's record of the clock ``pl_clk0`` really gets (its ``ACT_FREQMHZ``),
#: written beside the bitstream by ``build.tcl`` and read by the board to turn cycles into
#: time.
CLOCK_FILE = f"{TOP_NAME}.clock.json"


def read_clock_file(path: str | os.PathLike[str]) -> float:
    """``actual_mhz`` of a :data:`CLOCK_FILE` (``build.tcl``'s record of ``pl_clk0``), MHz.

    Raises
    ------
    OSError
        If the file cannot be read.
    ValueError
        If it is not such a record (not JSON, no positive finite ``actual_mhz``), naming it.
    """
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{path}: not JSON ({exc})") from None
    mhz = data.get("actual_mhz") if isinstance(data, dict) else None
    if isinstance(mhz, bool) or not isinstance(mhz, int | float) or not (
            math.isfinite(mhz) and mhz > 0):
        raise ValueError(f"{path}: no clock: 'actual_mhz' must be a positive number of MHz, "
                         f"not {mhz!r}")
    return float(mhz)


