"""Whole clips on the RTL: every layer of a full-size network, in sequence from its compiled
image, on the generated accelerator, each layer checked bit for bit against the golden
contract, and the clip's cycles against the performance model.

Usage::

    python bench/bench_clip.py [NAME ...] [--seed 12] [--backpressure 0.05] [--readme]

Per built-in accelerator (default: ``c3d_zcu102_best`` and ``r3d18_zcu102_best``) one
``fcircnn sim NAME --seed S --backpressure P --json`` (Verilator; the build cached in
``FCIRCNN_BUILD_DIR``, default ``build/``), timed; the performance model's cycles of the same
configuration (:func:`fcircnn.gen.perf_network.model_network`, which does not model the
memory model's random stalls). Prints a Markdown table: the layers bit-exact, the RTL's and the
model's cycles, the wall time (build and simulation) and the simulation rate (each run's
figures also as a JSON line on stderr as it ends); ``--readme``
writes it into ``bench/README.md`` (block ``clips``). Hours of simulation for the two
networks: run it alone on the machine. Exit status 1 if a layer failed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from readme import generated_by, markdown_table, replace_block

from fcircnn.gen.perf_network import model_network
from fcircnn.models.config import builtin_path, load_accelerator

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ("c3d_zcu102_best", "r3d18_zcu102_best")


def run_clip(name: str, seed: int, backpressure: float) -> dict:
    """One whole clip of built-in accelerator ``name`` on the RTL, and the model's cycles."""
    command = [sys.executable, "-m", "fcircnn.cli", "sim", name, "--seed", str(seed),
               "--backpressure", str(backpressure), "--json"]
    print(" ".join(command[2:]), file=sys.stderr, flush=True)
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    try:
        result = json.loads(done.stdout)
    except json.JSONDecodeError:
        raise SystemExit(f"{name}: fcircnn sim printed no results (exit {done.returncode}):\n"
                         f"{done.stderr[-2000:]}") from None
    model = model_network(load_accelerator(builtin_path(name))).cycles
    layers = result["layers"]
    return {"name": name, "passed": result["passed"],
            "layers": len(layers), "exact": sum(la["passed"] for la in layers),
            "rtl": result["total_cycles"], "model": model, "wall": wall,
            "sim_seconds": result["wall_seconds"], "sim_cycles": result["sim_cycles"]}


def table(runs: list[dict], seed: int, backpressure: float) -> str:
    """The runs as a Markdown table."""
    rows = [[f"`{r['name']}`", f"{r['exact']} of {r['layers']}", f"{r['rtl']:,}",
             f"{r['model']:,}", f"{(r['rtl'] - r['model']) / r['model']:+.2%}",
             f"{r['wall'] / 60:.1f} min", f"{(r['wall'] - r['sim_seconds']) / 60:.1f} min",
             f"{r['sim_cycles'] / r['sim_seconds']:,.0f}"] for r in runs]
    head = ["accelerator", "layers bit-exact", "RTL cycles", "model", "RTL against model",
            "wall", "of it build and compile", "simulated cycles/s"]
    return markdown_table(head, rows, "lrrrrrrr") + (
        f"\n\nSeed {seed}, random back-pressure {backpressure} on every AXI channel (which the "
        "model does not count), Verilator.")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", default=list(DEFAULT))
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument("--backpressure", type=float, default=0.05)
    parser.add_argument("--readme", action="store_true",
                        help="write the table into bench/README.md")
    args = parser.parse_args(argv)
    os.environ.setdefault("FCIRCNN_BUILD_DIR", str(ROOT / "build"))
    runs = []
    for name in args.names:
        runs.append(run_clip(name, args.seed, args.backpressure))
        print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
    argv = sys.argv[1:] if argv is None else argv
    text = (f"{table(runs, args.seed, args.backpressure)}\n\n"
            + generated_by(["bench_clip.py", *argv]))
    print(text)
    if args.readme:
        replace_block("clips", text)
    return 0 if all(r["passed"] for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
