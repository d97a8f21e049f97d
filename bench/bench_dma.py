"""AXI DMA bus efficiency (issue 4): long transfers and C3D conv3a input tiles.

Runs :mod:`fcircnn.sim.tb_bench_dma` on Verilator through :func:`fcircnn.sim.runner.run_cocotb`
for several numbers of outstanding bursts and prints a Markdown table of beats per cycle (peak:
one 16-byte beat per cycle).

Usage: ``python bench/bench_dma.py [--outstanding 2 4 8] [--block-bytes 262144]``
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from fcircnn.hw.axi_dma import AxiDma
from fcircnn.sim.runner import run_cocotb


def run(outstanding: int, block_bytes: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "bench.json"
        run_cocotb(AxiDma(40, read_outstanding=outstanding, write_outstanding=outstanding),
                   "axi_dma", "fcircnn.sim.tb_bench_dma", "verilator",
                   parameters={"block_bytes": block_bytes},
                   extra_env={"FCIRCNN_BENCH_OUT": str(out)})
        return json.loads(out.read_text())


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--outstanding", type=int, nargs="+", default=[2, 8])
    parser.add_argument("--block-bytes", type=int, default=1 << 18)
    args = parser.parse_args(argv)
    os.environ.setdefault("FCIRCNN_BUILD_DIR", "build")
    print("| outstanding | transfer | beats | bus beats | bursts | cycles | beats/cycle |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for n in args.outstanding:
        start = time.monotonic()
        res = run(n, args.block_bytes)
        for name, r in res.items():
            print(f"| {n} | {name} | {r['beats']} | {r.get('bus_beats', r['beats'])} | "
                  f"{r.get('bursts', '')} | {r['cycles']} | {r['beats'] / r['cycles']:.3f} |")
        print(f"<!-- outstanding {n}: {time.monotonic() - start:.0f} s -->")


if __name__ == "__main__":
    main()
