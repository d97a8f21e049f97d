"""``fcircnn project``: the nearest block-circulant weights of trained dense weights."""

from __future__ import annotations

import argparse
import json
import sys

from fcircnn.report import (
    format_table,
)

from .common import UserError, _distinct_outputs, _input_files, _network, _output_file
from .flags import _json_flag, _path, _quiet_flag


def cmd_project(args: argparse.Namespace) -> int:
    from fcircnn.models.files import ArrayFileError
    from fcircnn.models.project import dense_shape, load_dense, project_network

    _output_file(args.output, "-o")
    net = _network(args.network)
    _distinct_outputs([("-o", args.output)], _input_files(args, "network", net, "--dense"))
    try:
        dense, notes = load_dense(net, args.dense)
    except ArrayFileError as exc:
        raise UserError(f"--dense: {exc}") from None
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    weights, errors = project_network(net, dense)
    def generators(r) -> list[int] | None:  # None: a dense layer, taken as given
        lw = weights.layers[r.name]
        return None if lw.generators is None else list(lw.generators.shape)

    layers = [r for r in net.resolved if r.weighted]
    if args.json:
        print(json.dumps({
            "network": net.name, "block_size": net.block_size, "output": str(args.output),
            "notes": list(notes),
            "layers": [{"name": r.name, "type": r.kind, "dense": list(dense_shape(r)),
                        "generators": generators(r), "error": float(errors[r.name])}
                       for r in layers]}))
    else:
        rows = [[r.name, r.kind, "x".join(map(str, dense_shape(r))),
                 "x".join(map(str, generators(r) or ())) or "dense (as given)",
                 f"{errors[r.name]:.4f}"] for r in layers]
        print("\n".join(format_table(["layer", "type", "dense", "generators",
                                       "rel. projection error"], rows)))
    weights.save(args.output)
    print(f"wrote the block-circulant weights of {net.name} (B = {net.block_size}) to "
          f"{args.output}; CBN parameters are calibrated when they are used", file=sys.stderr)
    if max(errors.values(), default=0.0) > 0.1:
        print("next: an error this large loses most of what the dense network learned until "
              "it is fine-tuned: fcircnn.torch.from_weights(NETWORK, OUT) then a few epochs of "
              "training (README, \"Train in PyTorch\"; bench/README.md, \"Dense, projected, "
              "fine-tuned\", measures how much it recovers)", file=sys.stderr)
    return 0


def add(sub) -> None:
    """Add the ``project`` command (block-circulant weights nearest to dense ones)."""
    proj = sub.add_parser(
        "project", help="the nearest block-circulant weights of trained dense weights",
        description="Project the dense weights of a trained network (an .npz of "
                    "<layer>.weight arrays in PyTorch's layouts: Conv3d [M, N, Kd, Kr, Kc], "
                    "Linear [M, N*D*H*W]) onto the nearest block-circulant weights (the "
                    "least-squares fit: each B x B block averaged along its circulant "
                    "diagonals), print each layer's relative projection error and write the "
                    "weights file golden, compile and run read (--weights).",
    )
    proj.add_argument("network", type=_path, help="network YAML, accelerator YAML or built-in name")
    proj.add_argument("--dense", type=_path, required=True, metavar="DENSE.npz",
                      help="<layer>.weight for every conv and fc layer")
    proj.add_argument("-o", "--output", type=_path, required=True, metavar="W.npz",
                      help="the block-circulant weights file to write")
    _json_flag(proj, "per layer its dense and generator shapes and projection error; the "
                     "notes")
    _quiet_flag(proj)
    proj.set_defaults(func=cmd_project)
