"""Benchmark of the PE array: Verilog generation time, Yosys resources, simulation throughput.

Usage::

    python bench/bench_pe_array.py [--tn 32 --tm 64 --block 8 --td 1] [--beats 2000]
                                   [--simulators verilator icarus] [--no-synth] [--readme]

For the paper's C3D core by default (Tn=32, Tm=64, B=8, Td=1): times
:func:`fcircnn.sim.runner.to_verilog` (target < 60 s), synthesizes with
:func:`fcircnn.gen.synth.synthesize` (DSP48E2/LUT/FF/CARRY, Yosys upper bounds) and runs the
``throughput`` cocotb test of :mod:`fcircnn.sim.tb_pe_array` (continuous beats, always-ready
output; cycles per wall-clock second of the cocotb loop, test bench overhead included) on each
simulator. With ``--readme`` the figures replace the block ``datapath`` of
``bench/README.md``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from readme import generated_by, machine, replace_block

from fcircnn.gen.synth import synthesize
from fcircnn.hw.common import never_elaborated
from fcircnn.hw.pe_array import PEArray
from fcircnn.sim.runner import find_simulator, run_cocotb, to_verilog


def bench(args) -> dict:
    result: dict = {"config": {"Tn": args.tn, "Tm": args.tm, "B": args.block, "Td": args.td},
                    "machine": machine()}
    dut = PEArray(args.tn, args.tm, args.block, args.td)
    result["pairs"], result["dsp_expected"] = dut.pairs, dut.dsp_count

    start = time.perf_counter()
    verilog = to_verilog(PEArray(args.tn, args.tm, args.block, args.td), "pe_array")
    result["verilog_seconds"] = time.perf_counter() - start
    result["verilog_kib"] = len(verilog) / 1024
    print(f"verilog: {result['verilog_seconds']:.1f} s, {result['verilog_kib']:.0f} KiB",
          flush=True)

    if not args.no_synth:
        # Yosys gets the primitive form (DSP48E2 instances), as the product is synthesised
        report = synthesize(PEArray(args.tn, args.tm, args.block, args.td), "pe_array")
        report.check_multipliers(expected_dsp=dut.dsp_count)
        result["synth"] = {**report.summary(), "lutram_luts": report.lutram_luts,
                           "seconds": report.seconds}
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
            f"{result['pairs']} products - {result['pairs'] // (c['B'] // 2)} slot-0 products "
            f"without a b(c+d) multiply; all instances, their registers, pre-adders and cascade "
            f"adders inside), {s['LUT']} LUT + {s['lutram_luts']} LUT as shift registers, "
            f"{s['FF']} FF, {s['CARRY']} CARRY4, {s['RAMB18E2'] + s['RAMB36E2']} RAMB; no "
            f"multiplier in LUTs ({s['soft_multipliers']} soft multipliers)."
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
        generated_by(["bench_pe_array.py", *argv], what=result["machine"]),
    ]
    return "\n".join(lines)


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
        replace_block("datapath", _markdown(result, argv))


if __name__ == "__main__":
    main()
