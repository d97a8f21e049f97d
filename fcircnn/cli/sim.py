"""``fcircnn sim``: the network on the generated RTL in cocotb, every layer checked against the
golden model."""

from __future__ import annotations

import argparse
import json
import sys

from .common import UserError, _accelerator, _Elapsed, _fmt_shape, _needs, _output_dir, _Progress
from .flags import (
    _cycles,
    _json_flag,
    _path,
    _probability,
    _quiet_flag,
    _reuse_maps_flag,
    _scale,
    _seed,
)


def cmd_sim(args: argparse.Namespace) -> int:
    from fcircnn import simulate as sim
    from fcircnn.gen.plan import CompileError
    from fcircnn.models.scale import InputShapeError
    from fcircnn.sim.runner import SimulatorUnavailable

    _needs("sim", "fcircnn sim (cocotb on Verilator or Icarus)")
    _output_dir(args.build_dir, "--build-dir")
    path = _accelerator(args.config).path
    try:
        layers = sim.parse_layers(args.layers)
        shape = sim.parse_input_shape(args.input)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    if args.reuse_maps and layers is not None:
        raise UserError("--reuse-maps runs the whole network: not with --layers (a selected "
                        "layer's input is written into a map the plan may have reused)")
    try:
        acc, image = sim.prepare(path, scale=args.scale, layers=layers, seed=args.seed,
                                 input_shape=shape, reuse_maps=args.reuse_maps)
    except CompileError as exc:
        raise UserError(str(exc)) from None
    except InputShapeError as exc:
        raise UserError(f"--input: {exc}") from None
    except ValueError as exc:  # an unknown layer name
        raise UserError(f"--layers: {exc}") from None
    names = [lp.layer.name for lp in image.plan.layers]
    net = acc.network
    print(f"fcircnn sim: {acc.name} ({path}), network {net.name} "
          f"({_fmt_shape((net.input.channels, *net.input.shape))} input, scale {args.scale}), "
          f"{len(names)} of {sum(not r.transform for r in net.resolved)} layers"
          + (" (its rfft and irfft steps run inside them)"
             if any(r.transform for r in net.resolved) else "")
          + f", {args.simulator}, seed {args.seed}, "
          f"backpressure {args.backpressure:g}", file=sys.stderr)
    with sim.build_dir_env(args.build_dir) as build:
        try:
            image_dir = sim.save_image(image, build)
        except OSError as exc:
            raise UserError(f"cannot write the image under {build}: {exc}") from None
        results = image_dir / f"results-{args.simulator}.json"
        timeout = args.timeout_cycles or sim.estimate_timeout_cycles(acc, image,
                                                                      args.backpressure)
        print(f"image {image_dir}: {len(image.plan.descriptors)} descriptors for the "
              f"{len(names)} layers, timeout {timeout} cycles", file=sys.stderr)
        bar = None if args.quiet else _Progress(unit="descriptors")
        try:
            run_dir = sim.run_rtl(
                acc, image_dir, results, simulator=args.simulator, waves=args.waves,
                seed=args.seed, backpressure=args.backpressure, timeout_cycles=timeout,
                progress=None if bar is None else (lambda done, total: bar("sim", done, total)),
                status=None if args.quiet else _Elapsed())
            outcome = sim.read_results(results)
        except SimulatorUnavailable as exc:
            raise UserError(f"--simulator {args.simulator}: {exc}") from None
        except sim.SimulationError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    dense = {r.name: r.dense_ops for r in net.resolved}
    print(json.dumps(sim.results_json(outcome, dense, acc.clock_mhz, names)) if args.json else
          sim.format_results(outcome, dense, acc.clock_mhz, names))
    print(f"results {results}, simulator run {run_dir}", file=sys.stderr)
    if args.waves:
        print(f"waves in {run_dir} (Verilator: dump file of the run) or in the build folder "
              f"{run_dir.parent.parent} (Icarus: {sim.ACCEL_TOPLEVEL}.fst)", file=sys.stderr)
    return 1 if sim.failed(outcome, names) else 0


def add(sub) -> None:
    """Add the ``sim`` command (a network, or some of its layers, on the RTL)."""
    simp = sub.add_parser(
        "sim", help="run a network, or some of its layers, on the generated RTL",
        description="Compile the network of an accelerator YAML (optionally scaled down by S: "
                    "channels and input size divided by S, rounded to legal values), keep the "
                    "--layers given (their inputs pre-filled with the golden values), build the "
                    "accelerator's Verilog (cached per configuration) and run it in cocotb on "
                    "Verilator or Icarus. Print per layer: cycles, effective GOP/s at the "
                    "configured clock, PE utilisation, DMA-stall share and PASS/FAIL against the "
                    "golden integer contract, then the totals. Exit code 1 if a layer fails, 2 "
                    "on bad input.",
    )
    simp.add_argument("config", type=_path,
                      help="accelerator YAML or built-in name (c3d_zcu102, ...)")
    simp.add_argument("--layers", metavar="NAMES",
                      help="comma-separated layer names to run alone (default: all layers)")
    simp.add_argument("--scale", type=_scale, default=1, metavar="S",
                      help="divide channels and input size by S (default: 1, full size)")
    simp.add_argument("--input", metavar="DxHxW",
                      help="input map size of the network instead of the scaled one, e.g. "
                           "8x32x32 (channels still divided by --scale)")
    simp.add_argument("--simulator", choices=("verilator", "icarus"), default="verilator",
                      help="HDL simulator (default: verilator)")
    simp.add_argument("--waves", action="store_true", help="record waveforms (separate build)")
    simp.add_argument("--seed", type=_seed, default=0,
                      help="seed of weights, input and the testbench (default: 0)")
    simp.add_argument("--backpressure", type=_probability, default=0.0, metavar="P",
                      help="probability that the memory model stalls a beat (default: 0)")
    simp.add_argument("--timeout-cycles", type=_cycles, default=None, metavar="N",
                      help="give up after N cycles (default: estimated from the layers)")
    simp.add_argument("--build-dir", type=_path, metavar="DIR",
                      help="build root for images and simulator builds (default: "
                           "$FCIRCNN_BUILD_DIR or build)")
    _reuse_maps_flag(simp)
    _json_flag(simp, "the run's status, cycles and counters, and per layer its cycles, "
                     "GOP/s, PE and DMA-stall shares and whether it is bit-exact")
    _quiet_flag(simp)
    simp.set_defaults(func=cmd_sim)
