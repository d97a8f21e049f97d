"""Benchmark of the NumPy golden model: wall time of each mode's pass over a whole network.

Usage::

    python bench/bench_golden.py [c3d] [r3d18] [--repeat 3] [--seed 0] [--readme]

Prints, per network and mode, the best of ``--repeat`` runs (seconds), the slot-domain work
(GFLOP of real multiply-adds as executed: every complex slot MAC is 4 real MACs) and the
achieved GFLOP/s as a Markdown table, with the machine and its load; ``--readme`` writes it
into ``bench/README.md`` (block ``golden``). Targets (issue 2): the ``int`` and the
``slots`` pass of full C3D at 3x16x112x112 under 30 s on a 2-core machine (aim: 10 s).
"""

from __future__ import annotations

import argparse

import numpy as np
from readme import generated_by, machine, markdown_table, replace_block

from fcircnn.models.config import builtin_path, load_network
from fcircnn.models.network import random_input, random_weights, run_network


def _numpy() -> str:
    """NumPy's version and BLAS."""
    blas = "unknown"
    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]["name"]
    except (TypeError, KeyError):
        pass
    return f"NumPy {np.__version__} ({blas})"


#: The networks' names in the table.
TITLES = {"c3d": "C3D", "r3d18": "3D ResNet-18"}
#: Each mode as the table describes it.
MODES = {"float": "float (dense time domain)", "slots": "slots (float)",
         "int": "int (bit-exact contract)"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("networks", nargs="*", default=["c3d", "r3d18"])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--readme", action="store_true",
                        help="write the table into bench/README.md")
    args = parser.parse_args()
    at_start = machine()
    rows = []
    for name in args.networks:
        net = load_network(builtin_path(name))
        weights = random_weights(net, args.seed)
        x = random_input(net, args.seed)
        best: dict[str, float] = {}
        for _ in range(args.repeat):
            result = run_network(net, ("float", "slots", "int"), weights=weights, x=x)
            for mode, sec in result.seconds.items():
                best[mode] = min(best.get(mode, float("inf")), sec)
        slot_flop = 8 * sum(r.slot_macs for r in result.layers)  # 4 real MACs x 2 FLOP
        dense_flop = result.total_dense_ops
        for mode in ("float", "slots", "int"):
            flop = dense_flop if mode == "float" else slot_flop
            rows.append([TITLES.get(name, name), MODES[mode], f"{best[mode]:.2f}",
                         f"{flop / 1e9:.1f}", f"{flop / 1e9 / best[mode]:.1f}"])
    table = markdown_table(["network", "mode", "best s", "work GFLOP", "GFLOP/s"], rows,
                           "llrrr")
    text = f"{table}\n\n{generated_by(what=f'{at_start}; {_numpy()}')}"
    print(text)
    if args.readme:
        replace_block("golden", text)


if __name__ == "__main__":
    main()
