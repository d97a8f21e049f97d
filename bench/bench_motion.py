"""Accuracy against block size on a task whose classes differ only in motion (issue 17, item 6).

Usage::

    python bench/bench_motion.py [--blocks 1,4,8,16] [--per-class 100] [--test-per-class 30]
                                 [--epochs 15] [--qat-epochs 3] [--seed 0] [--json out.json]

The data set is :func:`fcircnn.torch.motion.motion_clips` (12 classes, 3x8x16x16 clips; the
training split from ``seed``, the held-out test split from ``seed + 1000``); the network is
:func:`~fcircnn.torch.motion.motion_network_yaml` at each block size. For each ``B``:

* ``B = 1``: the dense twin (:class:`fcircnn.torch.dense.DenseNetwork`), float only;
* ``B >= 4``: the block-circulant model (:func:`fcircnn.torch.build`) trained in float; its
  float test accuracy; the int8 contract's test accuracy on the golden model
  (:func:`~fcircnn.torch.training.golden_int_classes`, int8 scales from the maximum over 64
  training clips); the agreement of the PyTorch QAT forward with those golden predictions
  (must be 100%: the QAT forward is the contract); then ``--qat-epochs`` of
  quantization-aware fine-tuning and the int8 contract's accuracy again.

Prints a Markdown table (and the machine) for ``bench/README.md``. Seeded; one thread.
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from fcircnn.models.config import load_network
from fcircnn.torch import build
from fcircnn.torch.dense import DenseNetwork
from fcircnn.torch.motion import CLASSES, motion_clips, motion_network_yaml
from fcircnn.torch.training import accuracy, fit, golden_int_classes, predict_classes


def _params(model: torch.nn.Module, suffix: str) -> int:
    return sum(p.numel() for n, p in model.named_parameters() if n.endswith(suffix))


def run_block(B: int, train: tuple[np.ndarray, np.ndarray], test: tuple[np.ndarray, np.ndarray],
              args: argparse.Namespace, folder: Path) -> dict:
    path = folder / f"motion_b{B}.yaml"
    path.write_text(motion_network_yaml(max(B, 4)))
    net = load_network(path)
    torch.manual_seed(args.seed)
    start = time.perf_counter()
    if B == 1:
        model = DenseNetwork(net)
        fit(model, *train, epochs=args.epochs, seed=args.seed)
        return {"B": 1, "weights": _params(model, "conv.weight"),
                "float": accuracy(model, *test), "seconds": time.perf_counter() - start}
    model = build(net, seed=args.seed)
    fit(model, *train, epochs=args.epochs, seed=args.seed)
    row = {"B": B, "weights": _params(model, "generators"), "float": accuracy(model, *test)}
    calib = train[0][:64]
    golden = golden_int_classes(model.eval(), test[0], calib)
    row["int8"] = float(np.mean(golden == test[1]))
    model.calibrate(torch.from_numpy(calib)).qat(True)
    row["qat_vs_golden"] = float(np.mean(predict_classes(model, test[0]) == golden))
    fit(model, *train, epochs=args.qat_epochs, lr=3e-4, seed=args.seed + 1)
    model.qat(False)
    row["float_after_qat"] = accuracy(model, *test)
    row["int8_after_qat"] = float(np.mean(golden_int_classes(model.eval(), test[0], calib)
                                          == test[1]))
    row["seconds"] = time.perf_counter() - start
    return row


def table(rows: list[dict], dense_weights: int) -> str:
    def pct(v: float | None) -> str:
        return "n/a" if v is None else f"{100 * v:.1f}"

    lines = [("| B | weights (compression) | float | int8 contract (golden) | QAT = golden | "
              "float after QAT | int8 after QAT | train s |"),
             "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(
            f"| {r['B']} | {r['weights']:,} ({dense_weights / r['weights']:.1f}x) | "
            f"{pct(r['float'])} | {pct(r.get('int8'))} | {pct(r.get('qat_vs_golden'))} | "
            f"{pct(r.get('float_after_qat'))} | {pct(r.get('int8_after_qat'))} | "
            f"{r['seconds']:.0f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", default="1,4,8,16")
    parser.add_argument("--per-class", type=int, default=100)
    parser.add_argument("--test-per-class", type=int, default=30)
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--qat-epochs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json")
    args = parser.parse_args()
    torch.set_num_threads(1)
    train = motion_clips(args.per_class, args.seed)
    test = motion_clips(args.test_per_class, args.seed + 1000)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for B in (int(b) for b in args.blocks.split(",")):
            rows.append(run_block(B, train, test, args, Path(tmp)))
            print(json.dumps(rows[-1]), flush=True)
    dense = DenseNetwork(load_network_text(motion_network_yaml(4)))
    dense_weights = _params(dense, "conv.weight")
    print(f"\n{len(CLASSES)} classes, {len(train[1])} training / {len(test[1])} test clips "
          f"(3x8x16x16), {args.epochs} epochs + {args.qat_epochs} QAT, seed {args.seed}; "
          f"chance {100 / len(CLASSES):.1f}%; torch {torch.__version__}, "
          f"{platform.python_version()}, 1 thread\n")
    print(table(rows, dense_weights))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


def load_network_text(text: str):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "net.yaml"
        path.write_text(text)
        return load_network(path)


if __name__ == "__main__":
    main()
