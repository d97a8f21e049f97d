"""Accuracy against block size on a task whose classes differ only in motion (issue 17, item 6).

Usage::

    python bench/bench_motion.py [--blocks 1,4,8,16] [--per-class 100] [--test-per-class 30]
                                 [--epochs 15] [--qat-epochs 3] [--rtl-clips 8]
                                 [--simulator verilator] [--seed 0] [--json out.json]

The data set is :func:`fcircnn.torch.motion.motion_clips` (12 classes, 3x8x16x16 clips; the
training split from ``seed``, the held-out test split from ``seed + 1000``); the network is
:func:`~fcircnn.torch.motion.motion_network_yaml` at each block size. For each ``B``:

* ``B = 1``: the dense twin (:class:`fcircnn.torch.dense.DenseNetwork`), float only;
* ``B >= 4``: the block-circulant model (:func:`fcircnn.torch.build`) trained in float; its
  float test accuracy; the int8 contract's test accuracy on the golden model
  (:func:`~fcircnn.torch.training.golden_int_classes`, int8 scales from the maximum over 64
  training clips); the agreement of the PyTorch QAT forward with those golden predictions
  (must be 100%: the QAT forward is the contract); then ``--qat-epochs`` of
  quantization-aware fine-tuning and the int8 contract's accuracy again; then the first
  ``--rtl-clips`` test clips of the fine-tuned weights through the generated RTL of the small
  test accelerator (:func:`~fcircnn.torch.motion.motion_accelerator_yaml`; ``fcircnn run --on
  sim``, cocotb, 20% random AXI back-pressure): every layer of every clip must be bit-exact
  against the golden contract and every RTL class the golden int class (must be 100%).

Prints a Markdown table (and the machine); ``--readme`` writes it into ``bench/README.md``
(block ``motion``). Seeded; one thread.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from readme import generated_by, replace_block

from fcircnn.models.config import load_accelerator, load_network
from fcircnn.runtime.predict import predict
from fcircnn.torch import build
from fcircnn.torch.dense import DenseNetwork
from fcircnn.torch.motion import (
    CLASSES,
    motion_accelerator_yaml,
    motion_clips,
    motion_network_yaml,
)
from fcircnn.torch.training import accuracy, fit, golden_int_classes, predict_classes
from fcircnn.torch.weights import network_weights


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
    golden = golden_int_classes(model.eval(), test[0], calib)
    row["int8_after_qat"] = float(np.mean(golden == test[1]))
    row["seconds"] = time.perf_counter() - start
    if args.rtl_clips:
        row.update(rtl_agreement(model, path, test[0][: args.rtl_clips], golden, calib, args))
    return row


def rtl_agreement(model: torch.nn.Module, network: Path, clips: np.ndarray,
                  golden: np.ndarray, calib: np.ndarray, args: argparse.Namespace) -> dict:
    """``clips`` with ``model``'s weights through the small test accelerator's RTL: the share
    whose RTL class is the golden int class, whether every layer was bit-exact, and the
    accelerator cycles of a clip."""
    B = model.config.block_size
    accel = network.with_name(f"motion_b{B}_acc.yaml")
    accel.write_text(motion_accelerator_yaml(B, network.name))
    start = time.perf_counter()
    rtl = predict(load_accelerator(accel), clips, on="sim", weights=network_weights(model),
                  calibration=calib, simulator=args.simulator, backpressure=0.2,
                  build_dir=network.parent / f"build_b{B}")
    top1 = np.array([c.top1 for c in rtl.clips])
    return {"rtl_clips": len(clips), "rtl_vs_golden": float(np.mean(top1 == golden[: len(clips)])),
            "rtl_bit_exact": rtl.bit_exact, "rtl_cycles": rtl.clips[0].cycles,
            "rtl_seconds": time.perf_counter() - start}


def table(rows: list[dict], dense_weights: int) -> str:
    def pct(v: float | None) -> str:
        return "n/a" if v is None else f"{100 * v:.1f}"

    def rtl(r: dict) -> str:
        if "rtl_clips" not in r:
            return "n/a"
        exact = "bit-exact" if r["rtl_bit_exact"] else "**MISMATCH**"
        return f"{pct(r['rtl_vs_golden'])} of {r['rtl_clips']} ({exact})"

    lines = [("| B | weights (compression) | float | int8 contract (golden) | QAT = golden | "
              "float after QAT | int8 after QAT | RTL = golden | train s |"),
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(
            f"| {r['B']} | {r['weights']:,} ({dense_weights / r['weights']:.1f}x) | "
            f"{pct(r['float'])} | {pct(r.get('int8'))} | {pct(r.get('qat_vs_golden'))} | "
            f"{pct(r.get('float_after_qat'))} | {pct(r.get('int8_after_qat'))} | {rtl(r)} | "
            f"{r['seconds']:.0f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", default="1,4,8,16")
    add_data_arguments(parser)
    parser.add_argument("--qat-epochs", type=int, default=3)
    parser.add_argument("--rtl-clips", type=int, default=8,
                        help="test clips run through the RTL per block size (0: none)")
    parser.add_argument("--simulator", default="verilator", choices=("verilator", "icarus"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    train, test = motion_split(args)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for B in (int(b) for b in args.blocks.split(",")):
            rows.append(run_block(B, train, test, args, Path(tmp)))
            print(json.dumps(rows[-1]), flush=True)
    dense = DenseNetwork(load_network_text(motion_network_yaml(4)))
    dense_weights = _params(dense, "conv.weight")
    setup = (f"{len(CLASSES)} classes, {len(train[1])} training / {len(test[1])} test clips "
             f"(3x8x16x16), {args.epochs} epochs + {args.qat_epochs} QAT, seed {args.seed}; "
             f"chance {100 / len(CLASSES):.1f}%; torch {torch.__version__}, 1 thread")
    publish("motion", table(rows, dense_weights), setup, args)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


def add_data_arguments(parser: argparse.ArgumentParser) -> None:
    """The motion task's data, training and output flags (shared with bench_projection.py)."""
    parser.add_argument("--per-class", type=int, default=100)
    parser.add_argument("--test-per-class", type=int, default=30)
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json")
    parser.add_argument("--readme", action="store_true",
                        help="write the table into bench/README.md")


def publish(block: str, text: str, setup: str, args: argparse.Namespace) -> None:
    """Print the table with the line naming its command, date and set-up; with ``--readme``
    write it into its block of bench/README.md."""
    text = f"{text}\n\n{generated_by(what=setup)}"
    print(text)
    if args.readme:
        replace_block(block, text)


def motion_split(args: argparse.Namespace):
    """The training clips (from ``--seed``) and the held-out test clips (``--seed + 1000``)."""
    return (motion_clips(args.per_class, args.seed),
            motion_clips(args.test_per_class, args.seed + 1000))


def load_network_text(text: str):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "net.yaml"
        path.write_text(text)
        return load_network(path)


if __name__ == "__main__":
    main()
