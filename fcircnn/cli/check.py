"""``fcircnn check``: validate a network or accelerator file and print what it resolves to."""

from __future__ import annotations

import argparse
import json
import sys

from .common import _check_memory, _load, _validated
from .flags import _cap, _json_flag, _path, _quiet_flag


def cmd_check(args: argparse.Namespace) -> int:
    from fcircnn.describe import (
        accelerator_json,
        describe_accelerator,
        describe_network,
        network_json,
    )
    from fcircnn.models.config import AcceleratorConfig

    config = _load(args.config)
    if isinstance(config, AcceleratorConfig):
        _validated(config, cap=args.cap)
        _check_memory(config.network, ("float", "int"))  # what compile runs
        print(json.dumps(accelerator_json(config)) if args.json else
              describe_accelerator(config))
    else:
        _check_memory(config, ("float", "slots", "int"))  # what golden runs by default
        print(json.dumps(network_json(config)) if args.json else describe_network(config))
    print(f"{config.path or args.config}: OK", file=sys.stderr)
    return 0


def add(sub) -> None:
    """Add the ``check`` command (validate a configuration file)."""
    from fcircnn.gen.estimate import DEFAULT_CAP

    check = sub.add_parser(
        "check", help="validate a network or accelerator YAML and print the resolved parameters",
        description="Validate a configuration file (network or accelerator, detected from its "
                    "keys) and print the resolved parameters; exit code 2 on any problem.",
    )
    check.add_argument("config", type=_path,
                       help="YAML file or built-in name (c3d, r3d18, c3d_zcu102, ...)")
    check.add_argument("--cap", type=_cap, default=DEFAULT_CAP,
                       help=f"largest share of each device resource an accelerator may use, "
                            f"in (0, 1] (default: {DEFAULT_CAP:g}, as estimate and sweep)")
    _json_flag(check, "the resolved network (its layers, shapes, kernels, post-ops, pools, "
                      "operations) or accelerator (its parameters, cores, network, which core "
                      "runs each layer and the notes)")
    _quiet_flag(check)
    check.set_defaults(func=cmd_check)
