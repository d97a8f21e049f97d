"""``fcircnn compile``: the DDR image of a network for an accelerator."""

from __future__ import annotations

import argparse
import json
import sys

from fcircnn.report import (
    describe_image,
)

from .common import (
    UserError,
    _accelerator,
    _check_memory,
    _distinct_outputs,
    _folder_outputs,
    _input_files,
    _load_calibration,
    _load_weights_and_input,
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


def _address(text: str) -> int:
    """``--base``: a decimal or ``0x`` hexadecimal byte address, a multiple of the 4 KiB page,
    below ``2**MAX_ADDRESS_WIDTH``."""
    import re

    from fcircnn.arch.geometry import MAX_ADDRESS_WIDTH, PAGE_BYTES

    too_large = argparse.ArgumentTypeError(
        f"too large: an address is below 2**{MAX_ADDRESS_WIDTH} (at most "
        f"{MAX_ADDRESS_WIDTH} bits), not {text[:40]!r}{'...' if len(text) > 40 else ''}")
    if re.fullmatch(r"\s*(0[xX][0-9a-fA-F_]{100,}|[0-9_]{100,})\s*", text):
        raise too_large  # before int(), which refuses over 4300 digits as "not a number"
    try:
        value = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an address (decimal or 0x...): {text!r}") from None
    if value >= 1 << MAX_ADDRESS_WIDTH:
        raise too_large
    if value < 0 or value % PAGE_BYTES:
        raise argparse.ArgumentTypeError(f"must be a non-negative multiple of {PAGE_BYTES} "
                                         f"({PAGE_BYTES:#x}), not {text!r}")
    return value


def cmd_compile(args: argparse.Namespace) -> int:
    from fcircnn.gen.compiler import DdrImage, compile_network
    from fcircnn.gen.plan import AddressSpaceError, CompileError, PostOverflowError

    _output_dir(args.output, "-o")
    outputs = _folder_outputs("-o", args.output, DdrImage.FILES)
    acc = _accelerator(args.config)
    net = acc.network
    _distinct_outputs(outputs, _input_files(args, "config", net, "--input", "--weights",
                                            "--calibration"))
    weights, x = _load_weights_and_input(net, args)
    clips, how = _load_calibration(net, args, weights, "the input clip")
    _check_memory(net, ("float", "int"), 0 if clips is None else len(clips))
    print(f"fcircnn compile: {acc.name} ({acc.path or args.config}), network {net.name}, seed "
          f"{args.seed}, base {args.base:#x}; {how}; "
          f"{_weights_note(args)}", file=sys.stderr)
    try:
        image = compile_network(acc, weights=weights, x=x, seed=args.seed,
                                granularity=args.granularity, base=args.base,
                                calibration=clips, statistic=args.calibration_statistic,
                                progress=None if args.quiet else _Progress(),
                                reuse_maps=args.reuse_maps)
    except PostOverflowError as exc:
        raise _overflow_error(exc, args) from None
    except AddressSpaceError as exc:  # planned before calibration: nothing was run
        raise UserError(f"--base {args.base:#x}: {exc}") from None
    except CompileError as exc:
        raise UserError(str(exc)) from None
    try:
        paths = image.save(args.output)
    except OSError as exc:
        raise UserError(f"-o: cannot write {args.output}: {exc}") from None
    print(json.dumps(image.memory_map()) if args.json else describe_image(image))
    print(f"wrote {', '.join(str(p) for p in paths)}", file=sys.stderr)
    return 0


def add(sub) -> None:
    """Add the ``compile`` command (a network into a DDR image)."""
    comp = sub.add_parser(
        "compile", help="compile a network for an accelerator into a DDR image",
        description="Calibrate and quantize the network of an accelerator YAML (random or given "
                    "weights and input), lay out the DDR image (layer descriptors, weight "
                    "tiles, post-parameter tables, NC/8DHW8 feature maps) and write image.bin, "
                    "memory_map.json and expected.npz (the int8 output slots of every layer "
                    "from the golden integer contract); print the memory map. Exit code 2 on "
                    "bad input or a layer the accelerator cannot run.",
    )
    comp.add_argument("config", type=_path,
                      help="accelerator YAML or built-in name (c3d_zcu102, ...)")
    comp.add_argument("-o", "--output", type=_path, default="build/compile", metavar="DIR",
                      help="output directory (default: build/compile)")
    comp.add_argument("--seed", type=_seed, default=0, help="seed of weights and input")
    comp.add_argument("--weights", type=_path, metavar="W.npz",
                      help="weights (.npz): <layer>.generators [M/B, N/B, B, Kd, Kr, Kc] (a dense "
                           "layer's <layer>.weight and .bias), optional <layer>.bn_gain / "
                           ".bn_offset [2, M/2], optional calibration/... (fcircnn calibrate)")
    comp.add_argument("--input", type=_path, metavar="X.npy",
                      help="input clip [C, D, H, W] (float)")
    _granularity_flag(comp)
    _calibration_flags(comp)
    comp.add_argument("--base", type=_address, default=0, metavar="ADDR",
                      help="DDR address of the image, a multiple of 4096 (default: 0)")
    _reuse_maps_flag(comp)
    _json_flag(comp, "the memory map (as memory_map.json: extent, windows, regions and every "
                     "descriptor's fields)")
    _quiet_flag(comp)
    comp.set_defaults(func=cmd_compile)
