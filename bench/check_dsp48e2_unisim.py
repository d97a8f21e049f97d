"""Check the behavioural DSP48E2 stage against Xilinx's own simulation model of the primitive.

Usage::

    python bench/check_dsp48e2_unisim.py --unisim PATH/DSP48E2.v [--cycles 20000] [--seed 1]

The PE array's cascades are simulated with :class:`fcircnn.hw.dsp48e2.DSP48E2Stage`'s Amaranth
description and built for Yosys and Vivado as ``DSP48E2`` instances. This runs both forms of a
4-stage :class:`~fcircnn.hw.packed_mac_chain.PackedMacChain` side by side in Icarus Verilog,
the primitive form on Xilinx's unisim model (``DSP48E2.v`` of a Vivado installation,
``data/verilog/src/unisims/``, or of Xilinx's public unisim library; not shipped here), with
random operands over the whole INT9 range (out of contract too), frequent extremes and a random
clock enable, and counts the cycles whose two sums differ (must be 0). Exit code 1 on a
mismatch.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from amaranth.back import verilog

from fcircnn.hw.dsp48e2 import XILINX_PRIMITIVES
from fcircnn.hw.packed_mac_chain import PackedMacChain

STAGES = 4

TESTBENCH = """`timescale 1 ps / 1 ps
module glbl; wire GSR = 1'b0; wire GTS = 1'b0; endmodule
module tb;
  reg clk = 0, rst = 1, ce = 0;
  reg [{bits}:0] x = 0, w0 = 0, w1 = 0;
  wire [17:0] p0, p1, b0, b1;
  chain_prim P(.clk(clk), .rst(rst), .ce(ce), .x(x), .w0(w0), .w1(w1), .s0(p0), .s1(p1));
  chain_beh  B(.clk(clk), .rst(rst), .ce(ce), .x(x), .w0(w0), .w1(w1), .s0(b0), .s1(b1));
  integer i, k, seed = {seed}, errors = 0;
  function [8:0] pick; input integer extreme; begin
    pick = (($random(seed) & 7) == 0) ? (($random(seed) & 1) ? extreme : -extreme)
                                      : $random(seed) % 256;
  end endfunction
  always #5000 clk = ~clk;
  initial begin
    repeat (4) @(negedge clk); rst = 0;
    ce = 1; repeat (12) @(negedge clk);  // both models' registers hold defined data
    for (i = 0; i < {cycles}; i = i + 1) begin
      @(negedge clk);
      if (p0 !== b0 || p1 !== b1) begin
        errors = errors + 1;
        if (errors <= 5) $display("cycle %0d: unisim %0d %0d, behavioural %0d %0d", i,
                                  $signed(p1), $signed(p0), $signed(b1), $signed(b0));
      end
      ce = ($random(seed) & 3) != 0;
      for (k = 0; k < {stages}; k = k + 1) begin
        x[k*9 +: 9] = pick(254); w0[k*9 +: 9] = pick(127); w1[k*9 +: 9] = pick(255);
      end
    end
    $display("RESULT %0d cycles, %0d mismatches", {cycles}, errors);
    $finish;
  end
endmodule
"""


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--unisim", type=Path, required=True,
                        help="Xilinx's DSP48E2.v simulation model")
    parser.add_argument("--cycles", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    if not args.unisim.is_file():
        parser.error(f"--unisim: no file {args.unisim}")
    iverilog = shutil.which("iverilog")
    if iverilog is None:
        parser.error("needs Icarus Verilog (iverilog, vvp) on PATH")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "prim.v").write_text(verilog.convert(
            PackedMacChain(STAGES), name="chain_prim", emit_src=False,
            platform=XILINX_PRIMITIVES))
        (work / "beh.v").write_text(verilog.convert(
            PackedMacChain(STAGES), name="chain_beh", emit_src=False))
        (work / "tb.v").write_text(TESTBENCH.format(bits=9 * STAGES - 1, stages=STAGES,
                                                    cycles=args.cycles, seed=args.seed))
        subprocess.run([iverilog, "-g2012", "-o", "sim", "-s", "tb", "-s", "glbl", "tb.v",
                        "prim.v", "beh.v", str(args.unisim.resolve())], cwd=work, check=True,
                       stderr=subprocess.DEVNULL)
        out = subprocess.run(["vvp", "-n", "sim"], cwd=work, check=True, capture_output=True,
                             text=True).stdout
    print(out.strip())
    result = [line for line in out.splitlines() if line.startswith("RESULT")]
    return 0 if result and result[0].endswith(" 0 mismatches") else 1


if __name__ == "__main__":
    sys.exit(main())
