"""``fcircnn generate``: the Verilog, the Vivado project and the register headers."""

from __future__ import annotations

import argparse
import json
import sys

from .common import (
    UserError,
    _accelerator,
    _distinct_outputs,
    _Elapsed,
    _folder_outputs,
    _fresh_folder,
    _input_files,
    _needs,
    _output_dir,
)
from .flags import _json_flag, _path, _quiet_flag


def cmd_generate(args: argparse.Namespace) -> int:
    from fcircnn.gen.generate import OUTPUT_FILES, GenerateError, generate

    _needs("hw", "fcircnn generate (Verilog from the Amaranth hardware)")
    _output_dir(args.output, "-o")
    _fresh_folder(args.output, "-o", args.force)
    outputs = _folder_outputs("-o", args.output, OUTPUT_FILES)
    acc = _accelerator(args.config)
    _distinct_outputs(outputs, _input_files(args, "config", acc.network))
    print(f"fcircnn generate: {acc.name} ({acc.path or args.config}) -> {args.output}",
          file=sys.stderr)
    try:
        result = generate(acc, args.output, force=args.force,
                          status=None if args.quiet else _Elapsed())
    except GenerateError as exc:
        raise UserError(str(exc)) from None
    for rel in result.files:
        print(f"wrote {result.output / rel}", file=sys.stderr)
    print(f"config sha256 {result.fingerprint}", file=sys.stderr)
    if args.json:
        print(json.dumps({"accelerator": acc.name, "output": str(result.output),
                          "files": [str(rel) for rel in result.files],
                          "fingerprint": result.fingerprint,
                          "vivado_command": result.vivado_command}))
        return 0
    print("build the bitstream and hardware handoff with:", file=sys.stderr)
    print(result.vivado_command)
    return 0


def add(sub) -> None:
    """Add the ``generate`` command (Verilog, Vivado scripts and register map)."""
    gen = sub.add_parser(
        "generate", help="generate the Verilog top, Vivado scripts, XDC and register map",
        description="Generate, for an accelerator YAML, the Verilog top level "
                    "(rtl/fcircnn_accel.v), the out-of-context XDC, the Vivado scripts "
                    "(project, IP packaging, ZCU102 block design, build to bitstream and "
                    ".hwh for PYNQ), the register map as a C header and a Python module, and "
                    "report.json; print the Vivado command line. The files are "
                    "byte-identical for the same configuration. Exit code 2 on bad input or "
                    "a non-empty output folder without --force.",
    )
    gen.add_argument("config", type=_path,
                     help="accelerator YAML or built-in name (c3d_zcu102, ...)")
    gen.add_argument("-o", "--output", type=_path, default="build/generate", metavar="DIR",
                     help="output directory (default: build/generate)")
    gen.add_argument("--force", action="store_true",
                     help="write into a non-empty output directory (replaces files of the "
                          "same names, leaves other files alone)")
    _json_flag(gen, "the files written, the configuration's sha256 and the Vivado command")
    _quiet_flag(gen)
    gen.set_defaults(func=cmd_generate)
