"""``fcircnn run``: class scores of clips on the golden contract, the RTL or the board."""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from fcircnn.report import (
    format_table,
)

from .common import (
    UserError,
    _accelerator,
    _check_memory,
    _distinct_outputs,
    _Elapsed,
    _input_files,
    _load_array,
    _load_calibration,
    _needs,
    _output_dir,
    _output_file,
    _overflow_error,
    _Progress,
    _weights_note,
)
from .flags import (
    _calibration_flags,
    _granularity_flag,
    _json_flag,
    _path,
    _probability,
    _quiet_flag,
    _seed,
    _timeout,
)

#: ``run``'s flags that one target alone reads: flag -> that ``--on`` value.
_RUN_TARGET_FLAGS = {"--bitstream": "board", "--timeout": "board", "--simulator": "sim",
                     "--backpressure": "sim", "--build-dir": "sim"}


def _refuse_other_targets(args: argparse.Namespace) -> None:
    """Refuse a ``run`` flag its ``--on`` target does not read (it would be ignored)."""
    for flag, on in _RUN_TARGET_FLAGS.items():
        if getattr(args, flag[2:].replace("-", "_")) is not None and args.on != on:
            raise UserError(f"{flag}: only with --on {on}, not --on {args.on} (it would be "
                            "ignored)")


def cmd_run(args: argparse.Namespace) -> int:
    from fcircnn import simulate as sim
    from fcircnn.gen.plan import CompileError, PostOverflowError
    from fcircnn.models.network import (
        LayerOverflowError,
        class_scores_problem,
        load_clips,
        load_weights,
    )
    from fcircnn.runtime.predict import predict
    from fcircnn.sim.runner import SimulatorUnavailable

    _refuse_other_targets(args)
    _output_file(args.save, "--save")
    if args.on == "sim":
        _needs("sim", "fcircnn run --on sim (cocotb on Verilator or Icarus)")
        _output_dir(args.build_dir, "--build-dir")
    if args.on == "board" and args.bitstream is None:
        raise UserError("--on board needs --bitstream (the overlay's .bit, its .hwh beside it)")
    acc = _accelerator(args.config)
    if args.on == "board":
        import importlib.util

        from fcircnn.arch.ip import IP_NAME
        from fcircnn.models.overlay import overlay_problem

        if problem := overlay_problem(args.bitstream, acc.device.part, IP_NAME):
            raise UserError(f"--bitstream: {problem}")
        if importlib.util.find_spec("pynq") is None:  # before the calibration's work
            raise UserError("--on board needs the 'pynq' package (the board's PYNQ image); "
                            "this Python has none")
    net = acc.network
    if problem := class_scores_problem(net):
        raise UserError(f"{args.config}: {problem}; fcircnn run ranks class scores "
                        "(fcircnn golden or sim run any network)")
    _distinct_outputs([("--save", args.save)], _input_files(
        args, "config", net, "--input", "--weights", "--calibration", "--bitstream"))
    clips = _load_array("--input", load_clips, net, args.input)
    weights = _load_array("--weights", load_weights, net, args.weights)
    calibration, how = _load_calibration(net, args, weights)
    if args.on == "board" and calibration is None and (weights is None
                                                       or weights.calibration is None):
        raise UserError("--on board: a board runs one image with fixed int8 scales: give "
                        "--calibration clips.npy, or --weights with a stored calibration "
                        "(fcircnn calibrate)")
    _check_memory(net, ("float", "int"), len(clips) + (0 if calibration is None
                                                      else len(calibration)))
    print(f"fcircnn run: {acc.name} ({acc.path or args.config}), network {net.name}, "
          f"{len(clips)} clip(s) on {args.on}; {how}; "
          f"{_weights_note(args)}", file=sys.stderr)
    bar = None if args.quiet else _Progress(unit="clips")
    backend = _board_backend(acc, args) if args.on == "board" else None
    try:
        result = predict(acc, clips, on=args.on, weights=weights, seed=args.seed,
                         calibration=calibration, statistic=args.calibration_statistic,
                         granularity=args.granularity,
                         simulator=args.simulator or "verilator", build_dir=args.build_dir,
                         backpressure=args.backpressure or 0.0, backend=backend,
                         timeout_s=args.timeout or 10.0,
                         progress=None if bar is None else (lambda d, t: bar("clips", d, t)),
                         status=None if args.quiet or args.on != "sim" else _Elapsed())
    except (LayerOverflowError, PostOverflowError) as exc:
        raise _overflow_error(exc, args) from None
    except CompileError as exc:
        raise UserError(str(exc)) from None
    except SimulatorUnavailable as exc:
        raise UserError(f"--simulator {args.simulator or 'verilator'}: {exc}") from None
    except sim.SimulationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        if backend is not None:
            backend.close()
    if args.json:
        print(json.dumps({
            "accelerator": acc.name, "network": net.name, "on": args.on,
            "calibration": result.calibration, "bit_exact": result.bit_exact,
            "clips": [{"top1": c.top1, "scores": [float(v) for v in c.scores],
                       "cycles": c.cycles, "mismatched": list(c.mismatched)}
                      for c in result.clips]}))
    else:
        print("\n".join(_score_table(result, net.classes, args.on != "golden")))
    if args.save:
        from fcircnn.models.files import atomic_write

        atomic_write(args.save, lambda f: np.save(f, result.scores))
        print(f"saved scores [{len(clips)}, {net.classes}] to {args.save}", file=sys.stderr)
    return 0 if result.bit_exact else 1


def _score_table(result, classes: int, checked: bool) -> list[str]:
    """``run``'s table: per clip its top class and top five scores, and with ``checked`` the
    cycles and the bit-exact check."""
    top = min(5, classes)
    rows = []
    for i, clip in enumerate(result.clips):
        best = np.argsort(clip.scores)[::-1][:top]
        row = [i, clip.top1, " ".join(f"{int(k)}:{clip.scores[k]:.3g}" for k in best)]
        if checked:
            row += [clip.cycles, "PASS" if not clip.mismatched else
                    "FAIL: " + ", ".join(clip.mismatched)]
        rows.append(row)
    header = ["clip", "top-1", f"top-{top} class:score"]
    if checked:
        header += ["cycles", "bit-exact vs golden"]
    return format_table(header, rows)


def _board_backend(acc, args: argparse.Namespace):
    """``--on board``: the accelerator behind the overlay ``--bitstream`` (PYNQ), with a DDR
    buffer as large as the accelerator's image."""
    from fcircnn.gen.deploy import image_bytes_needed
    from fcircnn.gen.plan import plan_network
    from fcircnn.runtime.driver import DriverError, PynqBackend

    try:
        return PynqBackend(str(args.bitstream), mem_size=image_bytes_needed(plan_network(acc)))
    except DriverError as exc:
        raise UserError(f"--on board: {exc}") from None


def add(sub) -> None:
    """Add the ``run`` command (class scores of clips)."""
    run = sub.add_parser(
        "run", help="class scores of clips on the golden model or the RTL",
        description="Quantize time-domain clips [N, C, D, H, W] with the accelerator's "
                    "calibration (a calibration set, or the clips themselves), run them on "
                    "the golden integer contract (--on golden) or on the accelerator's RTL "
                    "in cocotb (--on sim: every layer checked bit for bit against the "
                    "contract), dequantize the network output and print each clip's class "
                    "scores. Exit code 1 if a layer's RTL output differs, 2 on bad input.",
    )
    run.add_argument("config", type=_path,
                     help="accelerator YAML or built-in name (c3d_zcu102, ...)")
    run.add_argument("--input", type=_path, required=True, metavar="CLIPS.npy",
                     help="clips [N, C, D, H, W] (float, time domain)")
    run.add_argument("--on", choices=("golden", "sim", "board"), default="golden",
                     help="target (default: golden); board: on this board's PYNQ overlay")
    run.add_argument("--bitstream", type=_path, metavar="BIT",
                     help="--on board: the overlay's .bit (its .hwh beside it)")
    run.add_argument("--timeout", default=None, metavar="S", type=_timeout,
                     help="--on board: seconds one clip may run (default 10)")
    run.add_argument("--weights", type=_path, metavar="W.npz",
                     help="weights (default: random from --seed)")
    _calibration_flags(run)
    _granularity_flag(run)
    run.add_argument("--seed", type=_seed, default=0, help="seed of random weights")
    run.add_argument("--simulator", choices=("verilator", "icarus"), default=None,
                     help="HDL simulator of --on sim (default: verilator)")
    run.add_argument("--backpressure", type=_probability, default=None, metavar="P",
                     help="--on sim: probability that the memory model stalls a beat "
                          "(default: 0)")
    run.add_argument("--build-dir", type=_path, metavar="DIR",
                     help="--on sim: build root (default: $FCIRCNN_BUILD_DIR or build)")
    run.add_argument("--save", type=_path, metavar="SCORES.npy",
                     help="save the scores [N, classes]")
    _json_flag(run, "the scores, top class, cycles and checks of every clip")
    _quiet_flag(run)
    run.set_defaults(func=cmd_run)
