"""``fcircnn calibrate``: the int8 scales measured on a calibration set, stored with the weights."""

from __future__ import annotations

import argparse
import json
import sys

from .common import (
    _calibration_json,
    _check_memory,
    _distinct_outputs,
    _input_files,
    _load_array,
    _load_calibration,
    _network,
    _output_file,
    _overflow_error,
    _Progress,
    _weights_note,
)
from .flags import _granularity_flag, _json_flag, _path, _quiet_flag, _seed, _statistic_flag


def cmd_calibrate(args: argparse.Namespace) -> int:
    from fcircnn.models.network import LayerOverflowError, calibrate, load_weights

    _output_file(args.output, "-o")
    net = _network(args.config)
    _distinct_outputs([("-o", args.output)], _input_files(args, "config", net, "--weights",
                                                          "--calibration"))
    weights = _load_array("--weights", load_weights, net, args.weights)
    clips, how = _load_calibration(net, args, weights)
    _check_memory(net, ("float",), len(clips))
    print(f"fcircnn calibrate: network {net.name} ({net.path or args.config}), "
          f"{how}; {_weights_note(args)}", file=sys.stderr)
    try:
        weights, _ = calibrate(net, weights=weights, seed=args.seed, x=clips[0], clips=clips,
                               granularity=args.granularity,
                               statistic=args.calibration_statistic,
                               progress=None if args.quiet else _Progress())
    except LayerOverflowError as exc:
        raise _overflow_error(exc, args) from None
    weights.save(args.output)
    if args.json:
        print(json.dumps({"network": net.name, "output": str(args.output),
                          "cbn_calibrated": args.weights is None,
                          "calibration": _calibration_json(weights.calibration)}))
        return 0
    print(f"wrote {args.output}: the weights{' (CBN calibrated)' if args.weights is None else ''}"
          f" with fixed int8 scales ({weights.calibration.describe()}); run, compile and deploy "
          "--weights use them for every clip", file=sys.stderr)
    return 0


def add(sub) -> None:
    """Add the ``calibrate`` command (fixed int8 scales stored with the weights)."""
    cal = sub.add_parser(
        "calibrate", help="measure the int8 scales on a calibration set and store them with "
                          "the weights",
        description="Run the float reference over a calibration set, measure the int8 scale "
                    "of the input and of every layer's output (and any CBN parameters the "
                    "weights lack), and write the weights with them: run, compile and deploy "
                    "given these weights quantize every clip with the same scales, whatever "
                    "the batch. Exit code 2 on bad input.",
    )
    cal.add_argument("config", type=_path,
                     help="network YAML, accelerator YAML or built-in name (c3d, c3d_zcu102, "
                          "...)")
    cal.add_argument("--calibration", type=_path, metavar="CLIPS.npy", required=True,
                     help="calibration set [N, C, D, H, W] (float), clips like the network's "
                          "input")
    _statistic_flag(cal)
    _granularity_flag(cal)
    cal.add_argument("--weights", type=_path, metavar="W.npz",
                     help="the trained weights (default: random from --seed)")
    cal.add_argument("--seed", type=_seed, default=0, help="seed of random weights")
    cal.add_argument("-o", "--output", type=_path, required=True, metavar="OUT.npz",
                     help="the weights with their calibration")
    _json_flag(cal, "how the scales were measured and the scales themselves (the input's and "
                    "each layer's, [part][k])")
    _quiet_flag(cal)
    cal.set_defaults(func=cmd_calibrate)
