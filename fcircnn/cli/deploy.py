"""``fcircnn deploy``: the folder for a ZCU102 with PYNQ."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .common import (
    UserError,
    _accelerator,
    _check_memory,
    _folder_outputs,
    _fresh_folder,
    _load_array,
    _load_calibration,
    _output_dir,
    _overflow_error,
    _Progress,
    _weights_note,
)
from .flags import (
    _calibration_flags,
    _granularity_flag,
    _json_flag,
    _path,
    _quiet_flag,
    _reuse_maps_flag,
    _seed,
)


def cmd_deploy(args: argparse.Namespace) -> int:
    from fcircnn.gen.deploy import OUTPUT_FILES, WHEEL, deploy, overlay_problem_in
    from fcircnn.gen.plan import CompileError, PostOverflowError
    from fcircnn.models.network import (
        class_scores_problem,
        load_clips,
        load_weights,
        random_input,
        random_weights,
    )

    _output_dir(args.output, "-o")
    _fresh_folder(args.output, "-o", args.force)
    _folder_outputs("-o", args.output, OUTPUT_FILES)
    if args.vivado is not None and not Path(args.vivado).is_dir():
        raise UserError(f"--vivado {args.vivado}: no such folder (the Vivado build's "
                        "vivado/out, with fcircnn_accel.bit and .hwh)")
    acc = _accelerator(args.config)
    net = acc.network
    if problem := class_scores_problem(net):
        raise UserError(f"{args.config}: {problem}; the board's run.py ranks class scores")
    if args.vivado is not None and (problem := overlay_problem_in(args.vivado, acc)):
        raise UserError(f"--vivado: {problem}")
    # An input may be one of the folder's files only with --force (the folder is otherwise
    # empty or new): redeploying an earlier deployment from its own files, with the overlay.
    # Every input is read before the folder is staged and moved into place (gen.staging), so
    # each is replaced only by what was made from it.
    weights = _load_array("--weights", load_weights, net, args.weights)
    clips = _load_array("--input", load_clips, net, args.input)
    calibration, how = _load_calibration(net, args, weights)
    if clips is None:
        clips = random_input(net, args.seed)[None]
    if calibration is None and (weights is None or weights.calibration is None):
        calibration = clips  # the image's scales are fixed: from the clips it ships
        how = (f"int8 scales fixed in the image from its {len(clips)} clip(s) (no calibration "
               "given: --calibration, or fcircnn calibrate, sets them)")
    note = _weights_note(args)
    weights = random_weights(net, args.seed) if weights is None else weights
    _check_memory(net, ("float", "int"), len(clips) + (0 if calibration is None
                                                      else len(calibration)))
    print(f"fcircnn deploy: {acc.name} ({acc.path or args.config}) -> {args.output}, "
          f"{len(clips)} clip(s); {how}; {note}", file=sys.stderr)
    try:
        result = deploy(acc, args.output, weights=weights, calibration=calibration,
                        clips=clips, statistic=args.calibration_statistic,
                        granularity=args.granularity, vivado=args.vivado, config=args.config,
                        progress=None if args.quiet else _Progress(),
                        reuse_maps=args.reuse_maps)
    except PostOverflowError as exc:
        raise _overflow_error(exc, args) from None
    except CompileError as exc:
        raise UserError(str(exc)) from None
    except OSError as exc:
        raise UserError(f"-o: cannot write {args.output}: {exc}") from None
    if args.json:
        print(json.dumps({"accelerator": acc.name, "folder": str(result.folder),
                          "files": list(result.files), "overlay": bool(result.overlay),
                          "clips": len(clips), "scales": how, "weights": note,
                          "board_commands": [f"pip install --no-deps {WHEEL}",
                                             "sudo -E python3 run.py"]}))
    else:
        print(f"wrote {', '.join(result.files)} in {result.folder}", file=sys.stderr)
    if not result.overlay:
        print(f"note: no overlay yet: {result.folder}/BITSTREAM.md says how to make "
              "fcircnn_accel.bit and .hwh and bring them in (--vivado)", file=sys.stderr)
    print(f"on the board, in the folder: pip install --no-deps {WHEEL} (offline), then "
          "sudo -E python3 run.py", file=sys.stderr)
    return 0


def add(sub) -> None:
    """Add the ``deploy`` command (the folder for a ZCU102 with PYNQ)."""
    dep = sub.add_parser(
        "deploy", help="write the folder to copy to a ZCU102 with PYNQ (overlay, images, "
                       "run.py)",
        description="Write everything a ZCU102 running PYNQ needs to run the accelerator: the "
                    "overlay (fcircnn_accel.bit/.hwh/.xsa from the Vivado build given with "
                    "--vivado, else BITSTREAM.md saying how to make them), the accelerator "
                    "with its network, the weights with the int8 scales fixed in the image, "
                    "clips, the first clip's compiled image, and run.py, which on the board "
                    "loads the overlay, runs every clip, prints the class scores, the cycles "
                    "per layer and the bit-exact check of every layer. Exit code 2 on bad input.",
    )
    dep.add_argument("config", type=_path,
                     help="accelerator YAML or built-in name (c3d_zcu102, ...)")
    dep.add_argument("-o", "--output", type=_path, required=True, metavar="DIR",
                     help="the deployment folder (new or empty)")
    dep.add_argument("--force", action="store_true", help="write into a non-empty folder")
    dep.add_argument("--vivado", type=_path, metavar="DIR",
                     help="the Vivado build's output (vivado/out of fcircnn generate)")
    dep.add_argument("--weights", type=_path, metavar="W.npz",
                     help="weights (default: random from --seed)")
    dep.add_argument("--input", type=_path, metavar="CLIPS.npy",
                     help="clips [N, C, D, H, W] run.py runs by default (default: one random "
                          "clip from --seed)")
    _calibration_flags(dep)
    dep.add_argument("--seed", type=_seed, default=0, help="seed of random weights and clip")
    _granularity_flag(dep)
    _reuse_maps_flag(dep)
    _json_flag(dep, "the folder, its files, whether it has an overlay, the clips, where the "
                    "int8 scales come from and the commands to run on the board")
    _quiet_flag(dep)
    dep.set_defaults(func=cmd_deploy)
