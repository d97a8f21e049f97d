"""``fcircnn golden``: the NumPy golden model of a network, per layer, in float, slot and bit-exact
int8 modes."""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence

import numpy as np

from fcircnn.report import (
    format_table,
)

from .common import (
    UserError,
    _check_memory,
    _distinct_outputs,
    _fmt_shape,
    _input_files,
    _load_calibration,
    _load_weights_and_input,
    _network,
    _output_file,
    _overflow_error,
    _Progress,
    _weights_note,
)
from .flags import _calibration_flags, _granularity_flag, _json_flag, _path, _quiet_flag, _seed


def _fmt_error(mode: str, value: float | None) -> str:
    if value is None:
        return "-"
    if mode == "int":
        if math.isinf(value):
            return "inf" if value > 0 else "undef"  # undef: an all-zero float output
        return f"{value:.1f}"
    return f"{value:.1e}"


def _report(result, modes: Sequence[str], scores: bool = True) -> str:
    """The golden run's table; ``scores``: the network's output is class scores (else the
    last lines show the output's shape, not a top-1 class)."""
    from fcircnn.models.network import snr_db

    extra = [m for m in ("slots", "int") if m in modes]
    header = ["layer", "type", "in CxDxHxW", "out CxDxHxW", "GOP", "slot MMAC",
              "params dense", "params circ", *(
                  {"slots": "slots rel.err", "int": "int SNR dB"}[m] for m in extra)]
    rows = []
    for r in result.layers:
        rows.append([
            r.name, r.kind, _fmt_shape(r.in_shape), _fmt_shape(r.out_shape),
            f"{r.dense_ops / 1e9:.3f}", f"{r.slot_macs / 1e6:.1f}",
            str(r.dense_params), str(r.circulant_params),
            *(_fmt_error(m, r.errors.get(m)) for m in extra),
        ])
    lines = format_table(header, rows)
    dense = sum(r.dense_params for r in result.layers)
    circ = sum(r.circulant_params for r in result.layers)
    macs = sum(r.slot_macs for r in result.layers)
    lines.append("")
    lines.append(f"network {result.network}: {result.total_dense_ops / 1e9:.2f} GOP "
                 f"dense-equivalent; {macs / 1e9:.2f} G complex slot MACs "
                 f"({result.total_dense_ops / 2 / max(macs, 1):.2f} dense MACs per slot MAC)")
    lines.append(f"weights: {dense / 1e6:.2f} M dense -> {circ / 1e6:.2f} M circulant "
                 f"({dense / max(circ, 1):.2f}x; x4 more with int8 instead of float32)")
    if any(r.errors.get("int") == -math.inf for r in result.layers):
        lines.append("undef: the layer's float output is all zero (an all-zero input, CBN "
                     "gain or weights), so it has no SNR")
    ref = result.outputs["float"].ravel()
    for mode in result.outputs:
        out = result.outputs[mode].ravel()
        # a network without class scores (class_scores_problem) has no top-1 to show
        what = (f"top-1 class {int(np.argmax(out))}" if scores else
                f"output {_fmt_shape(result.outputs[mode].shape)}")
        if scores and np.all(out == out[0]):
            what += " (every score equal)"
        timing = f"{result.seconds[mode]:.1f} s"
        if mode == "float":
            lines.append(f"{mode:<6} {timing:>8}  {what} (reference)")
            continue
        snr = snr_db(ref, out)
        quality = (f"output SNR {snr:.1f} dB vs float" if math.isfinite(snr) else
                   "output equal to float" if snr > 0 else
                   "output SNR undefined (the float output is all zero)")
        lines.append(f"{mode:<6} {timing:>8}  {what}, {quality}")
    return "\n".join(lines)


def _golden_json(result, has_scores: bool) -> dict:
    """``golden --json``: the per-layer report and each mode's time, error and top class."""
    from dataclasses import asdict

    from fcircnn.models.network import snr_db

    ref = result.outputs["float"]
    out = {"network": result.network, "seconds": result.seconds,
           "dense_gop": result.total_dense_ops / 1e9,
           "layers": [asdict(r) for r in result.layers], "modes": {}}
    for mode in result.outputs:  # the float reference always runs
        got = result.outputs[mode]
        entry = {"seconds": result.seconds[mode]}
        if mode != "float":
            snr = snr_db(ref, got)
            entry["output_snr_db"] = snr if math.isfinite(snr) else None
        if has_scores:
            entry["top1"] = int(np.argmax(got.reshape(-1)))
        out["modes"][mode] = entry
    return out


def cmd_golden(args: argparse.Namespace) -> int:
    from fcircnn.models.network import LayerOverflowError, class_scores_problem, run_network

    _output_file(args.save, "--save")
    _output_file(args.save_weights, "--save-weights")
    if args.mode == "float":
        for flag in ("--calibration", "--calibration-statistic"):
            if getattr(args, flag[2:].replace("-", "_")) is not None:
                raise UserError(f"{flag}: only with --mode slots, int or all (the float "
                                "reference has no int8 scales to calibrate)")
    net = _network(args.network)
    _distinct_outputs([("--save", args.save), ("--save-weights", args.save_weights)],
                      _input_files(args, "network", net, "--input", "--weights",
                                   "--calibration"))
    modes = ("float", "slots", "int") if args.mode == "all" else (args.mode,)
    weights, x = _load_weights_and_input(net, args)
    clips, how = _load_calibration(net, args, weights, "the input clip")
    _check_memory(net, modes, 0 if clips is None else len(clips))
    print(f"fcircnn golden: network {net.name} ({net.path or args.network}), modes "
          f"{', '.join(modes)}, seed {args.seed}; {how}; "
          f"{_weights_note(args)}", file=sys.stderr)
    try:
        result = run_network(net, modes, weights=weights, x=x, seed=args.seed,
                             granularity=args.granularity,
                             progress=None if args.quiet else _Progress(), clips=clips,
                             statistic=args.calibration_statistic)
    except LayerOverflowError as exc:
        raise _overflow_error(exc, args) from None
    if args.json:
        print(json.dumps(_golden_json(result, class_scores_problem(net) is None)))
    else:
        print(_report(result, modes, class_scores_problem(net) is None))
    if args.save:
        from fcircnn.models.files import atomic_write

        arrays = {f"output_{m}": v for m, v in result.outputs.items()}
        for name, (re, im) in result.int_outputs.items():
            arrays[f"int/{name}.re"] = re.astype(np.int8)
            arrays[f"int/{name}.im"] = im.astype(np.int8)
        atomic_write(args.save, lambda f: np.savez_compressed(f, **arrays))
        print(f"saved outputs to {args.save}", file=sys.stderr)
    if args.save_weights:
        result.weights.save(args.save_weights)
        print(f"saved weights (with calibrated CBN) to {args.save_weights}", file=sys.stderr)
    return 0


def add(sub) -> None:
    """Add the ``golden`` command (the NumPy golden model of a whole network)."""
    golden = sub.add_parser(
        "golden", help="run the NumPy golden model of a whole network",
        description="Run a network with random block-circulant weights (or given ones) in the "
                    "float time-domain reference, the float slot domain and the bit-exact "
                    "integer contract; print per-layer shapes, dense-equivalent GOP, parameters "
                    "before/after compression and each mode's error against the reference.",
    )
    golden.add_argument("network", type=_path, nargs="?", default="c3d",
                        help="network YAML, accelerator YAML or built-in name "
                             "(c3d, r3d18; default: c3d)")
    golden.add_argument("--seed", type=_seed, default=0, help="seed of weights and input")
    golden.add_argument("--mode", choices=("float", "slots", "int", "all"), default="all",
                        help="mode to run besides the float reference (default: all)")
    _granularity_flag(golden)
    golden.add_argument("--input", type=_path, metavar="X.npy",
                        help="input clip [C, D, H, W] (float)")
    golden.add_argument("--weights", type=_path, metavar="W.npz",
                        help="weights (.npz): <layer>.generators [M/B, N/B, B, Kd, Kr, Kc] "
                             "(a dense layer's <layer>.weight and .bias), optional "
                             "<layer>.bn_gain / .bn_offset [2, M/2], optional calibration/... "
                             "(fcircnn calibrate)")
    golden.add_argument("--save", type=_path, metavar="OUT.npz",
                        help="save final outputs per mode and the int8 output slots per layer")
    _json_flag(golden, "the per-layer report and each mode's time, SNR and top class")
    golden.add_argument("--save-weights", type=_path, metavar="W.npz",
                        help="save the weights used (with calibrated CBN), readable by --weights")
    _calibration_flags(golden)
    _quiet_flag(golden)
    golden.set_defaults(func=cmd_golden)
