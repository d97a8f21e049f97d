"""``fcircnn import``: a network from an ONNX model, or weights from a checkpoint of the paper's
training code."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from fcircnn.report import (
    format_table,
)

from .common import (
    UserError,
    _calibration_json,
    _distinct_outputs,
    _Elapsed,
    _folder_outputs,
    _input_files,
    _load_calibration,
    _needs,
    _network,
    _output_dir,
    _output_file,
    _Progress,
)
from .flags import _granularity_flag, _json_flag, _path, _quiet_flag, _statistic_flag

#: What ``import`` of an ONNX model writes into its ``-o`` folder.
ONNX_FILES = ("network.yaml", "weights.npz")


def cmd_import(args: argparse.Namespace) -> int:
    from fcircnn.models.checkpoint import CheckpointError, import_state_dict, load_checkpoint
    from fcircnn.models.files import ArrayFileError

    if str(args.network).lower().endswith(".onnx"):
        return _import_onnx(args)
    for flag in ("block_size", "name"):
        if getattr(args, flag) is not None:
            raise UserError(f"--{flag.replace('_', '-')}: only with an ONNX model (MODEL.onnx)")
    if args.checkpoint is None:
        raise UserError(f"{args.network}: give --checkpoint CKPT (a network file's weights "
                        "from the paper's training code), or an ONNX model (MODEL.onnx)")
    _output_file(args.output, "-o")
    net = _network(args.network)
    _distinct_outputs([("-o", args.output)], _input_files(args, "network", net, "--checkpoint",
                                                          "--calibration"))
    try:
        checkpoint = load_checkpoint(args.checkpoint)
        weights, report, notes = import_state_dict(net, checkpoint.state)
    except ArrayFileError as exc:  # the reader's message names the file
        raise UserError(f"--checkpoint: {exc}") from None
    except CheckpointError as exc:
        raise UserError(f"--checkpoint {args.checkpoint}: {exc}") from None
    notes = (*checkpoint.notes, *notes)
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    weights = _import_calibration(net, weights, args)
    if args.json:
        print(json.dumps({
            "network": net.name, "output": str(args.output), "notes": list(notes),
            "calibration": _calibration_json(weights.calibration),
            "layers": [{"name": r.name, "taken_as": r.how, "error": float(r.error)}
                       for r in report]}))
    else:
        print("\n".join(format_table(["layer", "taken as", "rel. error"],
                                      [[r.name, r.how, f"{r.error:.4f}"] for r in report])))
    weights.save(args.output)
    print(f"wrote the weights of {net.name} to {args.output}", file=sys.stderr)
    return 0


def _import_calibration(net, weights, args: argparse.Namespace):
    """``--calibration`` of ``import``: the imported ``weights`` with the int8 scales measured
    on that set stored with them (as ``fcircnn calibrate``), else as they are."""
    from fcircnn.models.network import LayerOverflowError, calibrate

    if args.calibration is None:
        for flag in ("--granularity", "--calibration-statistic"):
            if getattr(args, flag[2:].replace("-", "_")) is not None:
                raise UserError(f"{flag}: only with --calibration (it would be ignored)")
    clips, how = _load_calibration(net, args, None)
    if clips is None:
        return weights
    print(f"calibrating: {how}", file=sys.stderr)
    try:
        weights, _ = calibrate(net, weights=weights, x=clips[0], clips=clips,
                               granularity=args.granularity,
                               statistic=args.calibration_statistic,
                               progress=None if args.quiet else _Progress())
    except LayerOverflowError as exc:
        raise UserError(f"--calibration: the int8 contract cannot represent these weights "
                        f"with this calibration: {exc}") from None
    return weights


def _import_onnx(args: argparse.Namespace) -> int:
    """``import MODEL.onnx -o DIR``: the network file and the projected weights of a 3D CNN
    graph (:func:`fcircnn.models.onnx_graph.import_onnx`), and what each layer became."""
    from fcircnn.gen.staging import staged_folder
    from fcircnn.models.files import atomic_write

    if args.checkpoint is not None:
        raise UserError("--checkpoint: not with an ONNX model (its weights are in the graph)")
    _needs("onnx", "fcircnn import of an ONNX model")
    from fcircnn.models.onnx_graph import OnnxImportError, import_onnx

    _output_dir(args.output, "-o")
    outputs = _folder_outputs("-o", args.output, ONNX_FILES)
    _distinct_outputs(outputs, [("MODEL", args.network), ("--calibration", args.calibration)])
    if not Path(args.network).is_file():
        raise UserError(f"{args.network}: no such file (an ONNX model, MODEL.onnx)")
    status = (lambda _: None) if args.quiet else _Elapsed()
    status(f"reading and mapping {args.network}")
    try:
        imp = import_onnx(args.network, block_size=args.block_size or 8, name=args.name)
    except OnnxImportError as exc:
        raise UserError(f"{args.network}: {exc}") from None
    weights = _import_calibration(imp.network, imp.weights, args)
    out = Path(args.output)
    try:
        with staged_folder(out) as tmp:  # both files or neither
            atomic_write(tmp / ONNX_FILES[0], lambda f: f.write(imp.network_yaml),
                         binary=False)
            weights.save(str(tmp / ONNX_FILES[1]))
    except OSError as exc:
        raise UserError(f"-o: cannot write {out}: {exc}") from None
    if args.json:
        print(json.dumps({
            "network": imp.network.name, "block_size": imp.network.block_size,
            "network_file": str(out / ONNX_FILES[0]), "weights": str(out / ONNX_FILES[1]),
            "notes": list(imp.notes), "calibration": _calibration_json(weights.calibration),
            "layers": [{"name": r.name, "nodes": list(r.nodes), "taken_as": r.how,
                        "error": float(r.error), "approximated": list(r.approximations)}
                       for r in imp.report]}))
    else:
        print("\n".join(format_table(
            ["layer", "from", "taken as", "rel. error", "approximated"],
            [[r.name, r.nodes[0] if r.nodes else "", r.how, f"{r.error:.4f}",
              ", ".join(r.approximations) or "-"] for r in imp.report])))
    for note in imp.notes:
        print(f"note: {note}", file=sys.stderr)
    print(f"wrote {out / ONNX_FILES[0]} and {out / ONNX_FILES[1]} (network {imp.network.name}, "
          f"B = {imp.network.block_size}); next: fcircnn check and golden take the network "
          "file, fine-tuning (fcircnn.torch) recovers what the projection lost", file=sys.stderr)
    return 0


def add(sub) -> None:
    """Add the ``import`` command (weights from a checkpoint of the paper's training code)."""
    imp = sub.add_parser(
        "import", help="a network from an ONNX model, or weights from a checkpoint of the "
                       "paper's training code",
        description="With MODEL.onnx: map a 3D CNN graph (Conv, BatchNormalization, Relu, "
                    "MaxPool, AveragePool, GlobalAveragePool, Gemm/MatMul, Add, Flatten) onto "
                    "a network file and its dense weights onto block-circulant ones, and write "
                    "DIR/network.yaml and DIR/weights.npz (the [onnx] extra); every "
                    "approximation (a projection and its error, a ReLU or MaxPool taken as "
                    "CReLU or CMaxPool) is named per layer, every unsupported node refused by "
                    "name. With NETWORK --checkpoint: import a checkpoint of the paper's public "
                    "training code (SpectralCirC3D; an .npz of its state dict, or the .pth "
                    "with PyTorch installed) into the weights file golden, compile and run "
                    "read: block-circulant generators as they are, the frequency-domain batch "
                    "norm folded into CBN, time-domain layers projected (their error printed). "
                    "Conventions: fcircnn.models.checkpoint and fcircnn.models.onnx_graph.",
    )
    imp.add_argument("network", type=_path, metavar="NETWORK|MODEL.onnx",
                     help="network YAML or built-in name (spectral_c3d) for --checkpoint, or "
                          "an ONNX model")
    imp.add_argument("--checkpoint", type=_path, metavar="CKPT.npz|.pth",
                     help="the training code's state dict (with a network file)")
    imp.add_argument("-o", "--output", type=_path, required=True, metavar="W.npz|DIR",
                     help="the weights file to write; with an ONNX model, the folder for "
                          "network.yaml and weights.npz")
    imp.add_argument("--block-size", type=int, choices=(4, 8, 16), default=None,
                     help="with an ONNX model: the block size B (default: 8)")
    imp.add_argument("--name", help="with an ONNX model: the network's name (default: the "
                                    "file's stem)")
    imp.add_argument("--calibration", type=_path, metavar="CLIPS.npy",
                     help="a calibration set [N, C, D, H, W]: the int8 scales measured on it "
                          "are stored with the weights, as fcircnn calibrate does")
    _statistic_flag(imp)
    _granularity_flag(imp)
    _json_flag(imp, "per layer what it was taken as, its error (and from an ONNX model its "
                    "nodes and approximations); the notes and the stored calibration")
    _quiet_flag(imp)
    imp.set_defaults(func=cmd_import)
