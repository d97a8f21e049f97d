"""Benchmark of the PE array: Verilog generation time, Yosys resources, simulation throughput.

Usage::

    python bench/bench_pe_array.py [--tn 32 --tm 64 --block 8 --td 1] [--beats 2000]
                                   [--simulators verilator icarus] [--no-synth] [--readme]

For the paper's C3D core by default (Tn=32, Tm=64, B=8, Td=1): times
:func:`fcircnn.sim.runner.to_verilog` (target < 60 s), synthesizes with
:func:`fcircnn.gen.synth.synthesize` (DSP48E2/LUT/FF/CARRY, Yosys upper bounds) and runs the
``throughput`` cocotb test of :mod:`fcircnn.sim.tb_pe_array` (continuous beats, always-ready
output; cycles per wall-clock second of the cocotb loop, test bench overhead included) on each
simulator. With ``--readme`` the figures replace the section "## Datapath (issue 3)" of
``bench/README.md`` (other sections are left alone).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from fcircnn.gen.synth import synthesize
from fcircnn.hw.common import never_elaborated
from fcircnn.hw.pe_array import PEArray
from fcircnn.sim.runner import find_simulator, run_cocotb, to_verilog

README = Path(__file__).resolve().parent / "README.md"
SECTION = "## Datapath (issue 3)"


def _machine() -> str:
    nproc = subprocess.run(["nproc"], capture_output=True, text=True, check=False).stdout.strip()
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
    head = [ln for ln in lscpu.splitlines()[:10]]
    load = os.getloadavg()
    shared = (
        " (other jobs shared the machine, so times are upper bounds and rates lower bounds)"
        if load[0] >= 1.0 else ""
    )
    return (
        f"nproc {nproc}; load average {load[0]:.1f} at the start{shared}; Python "
        f"{sys.version.split()[0]}\n\n```\n" + "\n".join(head) + "\n```"
    )


def bench(args) -> dict:
    result: dict = {"config": {"Tn": args.tn, "Tm": args.tm, "B": args.block, "Td": args.td}}
    dut = PEArray(args.tn, args.tm, args.block, args.td)
    result["pairs"], result["dsp_expected"] = dut.pairs, dut.dsp_count

    start = time.perf_counter()
    verilog = to_verilog(PEArray(args.tn, args.tm, args.block, args.td), "pe_array")
    result["verilog_seconds"] = time.perf_counter() - start
    result["verilog_kib"] = len(verilog) / 1024
    print(f"verilog: {result['verilog_seconds']:.1f} s, {result['verilog_kib']:.0f} KiB",
          flush=True)

    if not args.no_synth:
        report = synthesize(verilog, "pe_array")
        report.check_multipliers(expected_dsp=dut.dsp_count)
        result["synth"] = {**report.summary(), "seconds": report.seconds}
        print(f"synth: {result['synth']}", flush=True)

    params = {"Tn": args.tn, "Tm": args.tm, "B": args.block, "Td": args.td, "seed": 1,
              "bench_beats": args.beats}
    result["sim"] = {}
    for sim in args.simulators:
        try:
            find_simulator(sim)
        except Exception as exc:  # report, do not fail the whole benchmark
            result["sim"][sim] = {"unavailable": str(exc)}
            continue
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "bench.json"
            start = time.perf_counter()
            run_cocotb(verilog, "pe_array", "fcircnn.sim.tb_pe_array", sim, parameters=params,
                       testcase="throughput", extra_env={"FCIRCNN_BENCH_OUT": str(out)},
                       verilator_opt=None)
            total = time.perf_counter() - start
            data = json.loads(out.read_text())
        data["cycles_per_second"] = data["cycles"] / data["seconds"]
        data["build_and_run_seconds"] = total
        result["sim"][sim] = data
        print(f"{sim}: {data}", flush=True)
    never_elaborated(dut)  # only inspected
    return result


def _markdown(result: dict, argv: list[str]) -> str:
    c = result["config"]
    lines = [
        SECTION,
        "",
        f"Command: `python bench/bench_pe_array.py {' '.join(argv)}`".rstrip() + " "
        f"({datetime.now(UTC):%Y-%m-%d %H:%M} UTC).",
        "",
        (
            f"PE array Tn={c['Tn']}, Tm={c['Tm']}, B={c['B']}, Td={c['Td']} (the paper's C3D "
            f"core when 32/64/8/1): {result['pairs']} multiplier pairs."
        ),
        "",
        (
            f"- Verilog generation (`to_verilog`): {result['verilog_seconds']:.1f} s "
            f"({result['verilog_kib']:.0f} KiB; target < 60 s)."
        ),
    ]
    if "synth" in result:
        s = result["synth"]
        lines.append(
            f"- Yosys `synth_xilinx -family xcup` ({s['seconds']:.0f} s): "
            f"**{s['DSP48E2']} DSP48E2** (expected {result['dsp_expected']} = 3 x "
            f"{result['pairs']} pairs - {result['pairs'] // (c['B'] // 2)} constant-zero "
            f"multiplies of the slot-0 pairs), {s['LUT']} LUT, {s['FF']} FF, {s['CARRY']} CARRY4, "
            f"{s['RAMB18E2'] + s['RAMB36E2']} RAMB; no multiplier in LUTs "
            f"({s['soft_multipliers']} soft multipliers). LUT/FF are Yosys upper bounds: its "
            "xcup DSP packer keeps the A/B/M/P pipeline registers and the pre-adds in fabric "
            "(Vivado absorbs them into the DSP48E2)."
        )
    lines += ["", "| simulator | cycles | wall s (cocotb loop) | cycles/s | build + run s |",
              "|---|---:|---:|---:|---:|"]
    for sim, d in result["sim"].items():
        if "unavailable" in d:
            lines.append(f"| {sim} | unavailable: {d['unavailable']} | | | |")
        else:
            lines.append(f"| {sim} | {d['cycles']} | {d['seconds']:.1f} | "
                         f"{d['cycles_per_second']:.0f} | {d['build_and_run_seconds']:.0f} |")
    lines += [
        "",
        (
            "Simulation: the `throughput` cocotb test of `sim/tb_pe_array.py`, continuous input "
        "beats (27-beat accumulations), output always ready; cycles/s includes the Python test "
        "bench (writing each beat, unpacking each output; beats are packed before timing), "
            "which dominates at this size. Verilator model built with its default `-Os`. "
            "\"build + run\" includes the simulator build when it was not cached."
        ),
        "",
        "Machine: " + _machine(),
        "",
    ]
    return "\n".join(lines)


def _write_readme(text: str) -> None:
    old = README.read_text() if README.exists() else "# Benchmarks\n"
    pattern = re.compile(rf"^{re.escape(SECTION)}\n.*?(?=^## |\Z)", re.MULTILINE | re.DOTALL)
    if pattern.search(old):
        new = pattern.sub(lambda _m: text + "\n", old)
    else:
        new = old.rstrip("\n") + "\n\n" + text
    README.write_text(new.rstrip("\n") + "\n")


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tn", type=int, default=32)
    parser.add_argument("--tm", type=int, default=64)
    parser.add_argument("--block", type=int, default=8)
    parser.add_argument("--td", type=int, default=1)
    parser.add_argument("--beats", type=int, default=2000)
    parser.add_argument("--simulators", nargs="+", default=["verilator", "icarus"])
    parser.add_argument("--no-synth", action="store_true")
    parser.add_argument("--readme", action="store_true", help="update bench/README.md")
    args = parser.parse_args(argv)
    result = bench(args)
    print(json.dumps(result, indent=1))
    if args.readme:
        _write_readme(_markdown(result, argv))
        print(f"updated {README}")


if __name__ == "__main__":
    main()
