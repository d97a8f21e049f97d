"""The accelerator IP's names, stated once.

:data:`TOP_NAME` is the Verilog module of the accelerator's top level (the hardware, the
generated Verilog, the Vivado IP and synthesis); :data:`IP_NAME` is its instance in the
generated block design, which the overlay's ``.hwh`` lists and the host driver looks up.
"""

from __future__ import annotations

__all__ = ["IP_NAME", "TOP_NAME"]

#: Verilog module name of the accelerator top level.
TOP_NAME = "fcircnn_accel"
#: The accelerator's instance in the block design (Vivado's first instance of the IP).
IP_NAME = f"{TOP_NAME}_0"
