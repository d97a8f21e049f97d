"""From a trained dense network to block-circulant weights: dense -> project -> fine-tune, on
the motion task of ``bench_motion.py`` (issue 45, the dense path).

Usage::

    python bench/bench_projection.py [--blocks 4,8,16] [--per-class 100] [--test-per-class 30]
                                     [--epochs 15] [--finetune-epochs 1,3,5] [--seed 0]
                                     [--json out.json]

Per block size ``B``, what a user with a trained dense model gets at each step:

1. the dense twin (:class:`fcircnn.torch.dense.DenseNetwork`, the same graph at ``B = 1``)
   trained ``--epochs`` in float: its test accuracy;
2. its state dict saved as PyTorch gives it (``numpy.savez`` of ``state_dict()``) and
   projected by ``fcircnn project`` (:func:`fcircnn.models.project.load_dense`,
   :func:`~fcircnn.models.project.project_network`): every layer's relative projection error;
3. the projected weights loaded into the block-circulant model
   (:func:`fcircnn.torch.from_weights`), their CBN statistics re-estimated on the training
   clips (no gradient step): the test accuracy of the projection alone;
4. fine-tuned in float for each of ``--finetune-epochs`` (cumulative), and the int8 contract's
   accuracy of the last (:func:`~fcircnn.torch.training.golden_int_classes`);
5. for comparison, the block-circulant model trained from scratch ``--epochs``.

Prints a Markdown table and the machine; ``--readme`` writes it into ``bench/README.md``
(block ``projection``). Seeded; one thread.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from bench_motion import add_data_arguments, load_network_text, motion_split, publish

from fcircnn.models.config import load_network
from fcircnn.models.project import load_dense, project_network
from fcircnn.torch import build, from_weights
from fcircnn.torch.dense import DenseNetwork
from fcircnn.torch.motion import CLASSES, motion_network_yaml
from fcircnn.torch.training import accuracy, fit, golden_int_classes


def _reestimate_cbn(model: torch.nn.Module, clips: np.ndarray, batch: int = 64) -> None:
    """The CBN running statistics from ``clips``: the mean of the batches' statistics (each
    batch's weight ``1/k`` through the momentum), no gradient step."""
    norms = [m for m in model.modules() if hasattr(m, "running_var")]
    saved = [m.momentum for m in norms]
    with torch.no_grad():
        for m in norms:
            m.running_mean.zero_()
            m.running_var.fill_(1.0)
        model.train()
        for k, i in enumerate(range(0, len(clips), batch)):
            for m in norms:
                m.momentum = 1.0 / (k + 1)
            model(torch.from_numpy(clips[i:i + batch]))
    for m, momentum in zip(norms, saved, strict=True):
        m.momentum = momentum
    model.eval()


def run_block(B: int, dense_state: dict[str, np.ndarray], train, test,
              args: argparse.Namespace, folder: Path) -> dict:
    path = folder / f"motion_b{B}.yaml"
    path.write_text(motion_network_yaml(B))
    net = load_network(path)
    np.savez(folder / "dense.npz", **dense_state)
    start = time.perf_counter()
    dense, _ = load_dense(net, str(folder / "dense.npz"))
    weights, errors = project_network(net, dense)
    weights.save(str(folder / f"w_b{B}.npz"))
    model = from_weights(net, folder / f"w_b{B}.npz")
    _reestimate_cbn(model, train[0])
    row = {"B": B, "errors": errors, "projected": accuracy(model, *test), "finetuned": {}}
    done = 0
    for epochs in sorted(args.finetune_epochs):
        torch.manual_seed(args.seed)
        fit(model, *train, epochs=epochs - done, seed=args.seed + epochs)
        done = epochs
        row["finetuned"][epochs] = accuracy(model, *test)
    golden = golden_int_classes(model.eval(), test[0], train[0][:64])
    row["int8"] = float(np.mean(golden == test[1]))
    row["seconds"] = time.perf_counter() - start
    torch.manual_seed(args.seed)
    scratch = build(net, seed=args.seed)
    fit(scratch, *train, epochs=args.epochs, seed=args.seed)
    row["scratch"] = accuracy(scratch, *test)
    return row


def table(rows: list[dict], dense_acc: float, args: argparse.Namespace) -> str:
    ft = sorted(args.finetune_epochs)
    names = ", ".join(rows[0]["errors"]) if rows else "per layer"
    head = (f"| B | projection error ({names}) | projected | "
            + " | ".join(f"+{e} epoch{'s' if e > 1 else ''}" for e in ft)
            + f" | int8 after +{ft[-1]} | from scratch ({args.epochs} epochs) |")
    lines = [head, "|---:|---|---:|" + "---:|" * len(ft) + "---:|---:|"]
    for r in rows:
        errs = ", ".join(f"{v:.2f}" for v in r["errors"].values())
        lines.append(f"| {r['B']} | {errs} | {100 * r['projected']:.1f} | "
                     + " | ".join(f"{100 * r['finetuned'][e]:.1f}" for e in ft)
                     + f" | {100 * r['int8']:.1f} | {100 * r['scratch']:.1f} |")
    return (f"dense twin (B = 1), {args.epochs} epochs: {100 * dense_acc:.1f}%\n\n"
            + "\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", default="4,8,16")
    add_data_arguments(parser)
    parser.add_argument("--finetune-epochs", type=lambda t: [int(v) for v in t.split(",")],
                        default=[1, 3, 5])
    args = parser.parse_args()
    torch.set_num_threads(1)
    train, test = motion_split(args)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        torch.manual_seed(args.seed)
        twin = DenseNetwork(load_network_text(motion_network_yaml(4)))
        start = time.perf_counter()
        fit(twin, *train, epochs=args.epochs, seed=args.seed)
        dense_acc = accuracy(twin, *test)
        print(json.dumps({"B": 1, "float": dense_acc,
                          "seconds": time.perf_counter() - start}), flush=True)
        state = {k: v.detach().numpy() for k, v in twin.state_dict().items()}
        for B in (int(b) for b in args.blocks.split(",")):
            rows.append(run_block(B, state, train, test, args, folder))
            print(json.dumps(rows[-1]), flush=True)
    setup = (f"{len(CLASSES)} classes, {len(train[1])} training / {len(test[1])} test clips "
             f"(3x8x16x16), seed {args.seed}; chance {100 / len(CLASSES):.1f}%; torch "
             f"{torch.__version__}, 1 thread")
    publish("projection", table(rows, dense_acc, args), setup, args)
    if args.json:
        Path(args.json).write_text(json.dumps({"dense": dense_acc, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
