"""Fuzz the accelerator's RTL with corrupted images (issue 46): it must end every run and never
reach memory outside the windows the driver grants.

For each case, the case's network is compiled (as ``bench/record_rtl_cycles.py`` does), then
one Verilator simulation of its accelerator runs ``--runs`` images each damaged by
:func:`fcircnn.sim.fuzz.corrupt` (seeded: flipped bits, random field values, addresses
anywhere or into the image's read-only regions, truncated lists, loops, lists that run into
non-descriptor bytes, random descriptors) through :class:`fcircnn.runtime.driver.Driver` with the
image's own windows, under random AXI back-pressure. A run that has not ended after
``--timeout-factor`` times the clean run's cycles is stopped with CTRL.abort by the driver.
The memory model flags every access outside the windows. Then the clean image runs, bit-exact.

Prints, per case, the runs by outcome (done, each error code, aborted after the timeout, hung:
an abort that did not stop the engine) and the accesses outside the windows, which must be 0,
as a Markdown table, one per case; ``--readme`` writes each into its block of
``bench/README.md`` (``fuzz-CASE``); ``--log FILE`` writes every run's line.

Usage: ``python bench/bench_fuzz.py [--case small kinds_4ports_q2] [--runs 300] [--seed 1]
[--readme]``
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from readme import generated_by, markdown_table, replace_block

ROOT = Path(__file__).resolve().parent.parent


def _recorder():
    spec = importlib.util.spec_from_file_location("_record_rtl_cycles",
                                                  ROOT / "bench" / "record_rtl_cycles.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def fuzz_case(name: str, runs: int, seed: int, timeout_factor: float,
              backpressure: float) -> dict:
    """One campaign on case ``name`` of ``bench/record_rtl_cycles.py``; its results."""
    from fcircnn.gen.compiler import compile_network
    from fcircnn.gen.generate import accelerator_verilog
    from fcircnn.sim.runner import run_cocotb

    rec = _recorder()
    case = next(c for c in rec.CASES if c.name == name)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        acc = rec.load_case(case, root)
        image = compile_network(acc, seed=case.seed, base=rec.BASE)
        image.save(root / "image")
        clean = _clean_cycles(rec, name)
        results = root / "results.json"
        t0 = time.monotonic()
        failure = None
        try:
            run_cocotb(accelerator_verilog(acc), "fcircnn_accel", "fcircnn.sim.tb_accelerator",
                       "verilator", parameters={}, verilator_opt=case.verilator_opt,
                       extra_env={"FCIRCNN_TB_PARAMS": json.dumps({
                           "image_dir": str(root / "image"), "results": str(results),
                           "timeout_cycles": 5_000_000, "seed": seed,
                           "backpressure": backpressure,
                           "fuzz": {"runs": runs, "seed": seed,
                                    "timeout_cycles": int(timeout_factor * clean),
                                    "address_width": acc.address_width}})})
        except AssertionError as exc:  # the testbench's verdict; its files say what failed
            failure = str(exc).splitlines()[0] if str(exc) else "failed"
        wall = time.monotonic() - t0
        fuzz_file = results.with_name(results.name + ".fuzz.json")
        fuzz = json.loads(fuzz_file.read_text())
        doc = json.loads(results.read_text()) if results.exists() else {"status": "missing"}
    final = "bit-exact" if doc.get("passed") and failure is None else failure or doc["status"]
    return {"case": name, "clean_cycles": clean, "wall_seconds": round(wall),
            "final_run": final, **fuzz}


def _clean_cycles(rec, name: str) -> int:
    """The case's recorded clean-run cycles (``tests/data/rtl_cycles.json``)."""
    cases = json.loads(rec.DEFAULT_OUT.read_text())["cases"]
    return next(c["total_cycles"] for c in cases if c["name"] == name)


#: The outcomes every table shows, in order (others found are added after them).
OUTCOMES = ("done", "error 1", "error 2", "error 5", "error 6", "error 8", "aborted", "hung")


def table(doc: dict) -> str:
    """One case's campaign as a Markdown table: runs by outcome, accesses outside the
    windows, the clean run after it, the wall time."""
    codes = [*OUTCOMES, *sorted(set(doc["outcomes"]) - set(OUTCOMES))]
    head = ["case", "runs", *codes, "accesses outside the windows", "last run (clean)",
            "wall"]
    row = [doc["case"], doc["runs"], *(doc["outcomes"].get(k, 0) for k in codes),
           doc["outside_window"], doc["final_run"], f"{doc['wall_seconds']:,} s"]
    return markdown_table(head, [row], "lr" + "r" * len(codes) + "rlr")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", nargs="+", default=["small", "kinds_4ports_q2"])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timeout-factor", type=float, default=2.0)
    parser.add_argument("--backpressure", type=float, default=0.1)
    parser.add_argument("--log", type=Path)
    parser.add_argument("--readme", action="store_true",
                        help="write each case's table into its block of bench/README.md")
    args = parser.parse_args(argv)
    os.environ.setdefault("FCIRCNN_BUILD_DIR", str(ROOT / "build"))
    docs = [fuzz_case(name, args.runs, args.seed, args.timeout_factor, args.backpressure)
            for name in args.case]
    for d in docs:
        text = f"{table(d)}\n\n{generated_by([sys.argv[0], *(argv or sys.argv[1:])])}"
        print(text + "\n")
        if args.readme:
            replace_block(f"fuzz-{d['case']}", text)
    if args.log:
        args.log.write_text("\n".join(f"{d['case']}: {line}" for d in docs
                                      for line in d["log"]) + "\n")
    bad = [d["case"] for d in docs
           if d["outside_window"] or "hung" in d["outcomes"] or d["final_run"] != "bit-exact"]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
