"""A plain, seeded training loop and an accuracy count, for the models of this package."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch import nn

from fcircnn.models import quant, spectral
from fcircnn.models.network import calibrate, run_int

from .model import SlotNetwork
from .weights import network_weights

__all__ = ["accuracy", "fit", "golden_int_classes", "predict_classes"]


def fit(model: nn.Module, clips: np.ndarray, labels: np.ndarray, *, epochs: int,
        batch_size: int = 32, lr: float = 3e-3, weight_decay: float = 1e-4, seed: int = 0,
        progress: Callable[[int, float], None] | None = None) -> list[float]:
    """Train ``model`` with Adam and cross-entropy, a cosine learning-rate schedule and a
    shuffle drawn from ``seed``; returns the mean loss of each epoch.

    Parameters
    ----------
    clips : ndarray ``[N, C, D, H, W]``
    labels : ndarray ``[N]`` of class indices
    progress : callable ``(epoch, mean_loss)``, optional
        Called after each epoch.

    Notes
    -----
    Reproducible on one machine and thread count (torch's CPU kernels may sum in another
    order elsewhere).
    """
    x = torch.as_tensor(clips, dtype=torch.float32)
    y = torch.as_tensor(labels, dtype=torch.int64)
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    steps = epochs * -(-len(x) // batch_size)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, max(steps, 1))
    model.train()
    losses = []
    for epoch in range(epochs):
        order = torch.randperm(len(x), generator=gen)
        total = 0.0
        for start in range(0, len(x), batch_size):
            idx = order[start:start + batch_size]
            if len(idx) < 2:
                continue  # batch statistics need two clips
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x[idx]), y[idx])
            loss.backward()
            opt.step()
            sched.step()
            total += float(loss.detach()) * len(idx)
        losses.append(total / len(x))
        if progress is not None:
            progress(epoch + 1, losses[-1])
    return losses


@torch.no_grad()
def predict_classes(model: nn.Module, clips: np.ndarray, batch_size: int = 64) -> np.ndarray:
    """Top-1 classes ``[N]`` of ``model`` (put in eval mode) on ``clips``."""
    model.eval()
    x = torch.as_tensor(clips, dtype=torch.float32)
    return torch.cat([model(b).argmax(1) for b in x.split(batch_size)]).numpy()


def accuracy(model: nn.Module, clips: np.ndarray, labels: np.ndarray,
             batch_size: int = 64) -> float:
    """Top-1 accuracy of ``model`` on ``clips`` (eval mode)."""
    return float(np.mean(predict_classes(model, clips, batch_size) == np.asarray(labels)))


def golden_int_classes(model: SlotNetwork, clips: np.ndarray, calibration: np.ndarray,
                       statistic: str = "max") -> np.ndarray:
    """Top-1 classes ``[N]`` of ``model``'s weights on the golden integer contract.

    The model's weights (:func:`~fcircnn.torch.weights.network_weights`, CBN in its inference
    form) are calibrated on ``calibration`` ``[M, C, D, H, W]`` with ``statistic`` and
    quantized (:func:`fcircnn.models.network.calibrate`), every clip runs through
    :func:`~fcircnn.models.network.run_int`, and the last layer's int8 slots are dequantized
    and inverse-transformed as :func:`fcircnn.runtime.predict.predict` does; what ``fcircnn run
    --on golden --calibration`` prints, without an accelerator file.
    """
    net = model.config
    clips = np.asarray(clips, dtype=np.float64)
    calibration = np.asarray(calibration, dtype=np.float64)
    _, qnet = calibrate(net, weights=network_weights(model), x=calibration[0],
                        clips=list(calibration), statistic=statistic)
    last = net.resolved[-1]
    classes = []
    for clip in clips:
        out = run_int(net, qnet, qnet.quantize_input(net, clip))[last.name]
        slots = quant.dequantize_slots(out.re, out.im, out.scale)
        scores = spectral.from_slots(slots, last.block_size)[: last.out_channels]
        classes.append(int(np.argmax(scores.reshape(-1))))
    return np.array(classes)
