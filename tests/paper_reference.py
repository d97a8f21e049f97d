"""The paper's training code's network as that code defines it, written here from its
documented semantics (not from its code), for the importer's tests.

``SpectralCirC3D`` (its ``network/SpectralCirC3D.py``) is a time-domain stem (``nn.Conv3d``
with a bias, ``BatchNorm3d``, ReLU, ``MaxPool3d``), an rfft over blocks of ``B`` channels into
``B/2 + 1`` complex bins, block-circulant convolutions computed as ``irfft -> conv3d with the
expanded weights -> rfft`` (``dense[p*B + r, q*B + c] = w[p, q, (r - c) mod B]``) each followed
by its ``SBN`` (one ``BatchNorm3d`` over the real parts and one over the imaginary parts of the
``(M/B)*(B/2 + 1)`` bins, feature ``q*(B/2 + 1) + k``), CReLU and max pools of the real and
imaginary parts (padded with -inf), then an irfft, ``AdaptiveAvgPool3d(1)`` and ``nn.Linear``
with a bias. Its ``train.py`` saves ``{"model_state_dict", "optimizer_state_dict", "acc",
"epoch"}`` of the model inside ``torch.nn.DataParallel``.

:func:`paper_model` builds a module with that code's parameter and buffer names for a network
file of the same structure (a dense first conv, rfft, block-circulant convs with CBN, irfft,
gap, a dense fc; ``models/spectral_c3d.yaml`` or a smaller one); :func:`save_training_checkpoint`
saves it as ``train.py`` does; :func:`paper_forward` is its eval-mode forward in float64 on a
state dict; :func:`measure_batch_norms` sets the model's batch-norm statistics from clips, as a
train-mode forward does.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from fcircnn.models.config import NetworkConfig

BN_EPS = 1e-5
FAKE_QUANT = ("scale_w_r", "scale_w_i", "scale_a_r", "scale_a_i")


def _bn_name(name: str) -> str:
    return "bn" + (name[4:] if name.startswith("conv") else name)


class _CirConv(nn.Module):
    """Parameter and buffers of a ``QSpatialCirConv``: generators and fake-quant scales."""

    def __init__(self, P: int, Q: int, B: int, kernel: tuple[int, int, int]) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(P, Q, B, *kernel) * (2.0 / (Q * B * 27)) ** 0.5)
        for name in FAKE_QUANT:  # as the training code leaves them after its forward passes
            self.register_buffer(name, 0.01 + 0.01 * torch.rand(()))


class _SBN(nn.Module):
    def __init__(self, features: int) -> None:
        super().__init__()
        self.bn_real = nn.BatchNorm3d(features)
        self.bn_imag = nn.BatchNorm3d(features)


def paper_model(net: NetworkConfig, seed: int = 0) -> nn.Module:
    """A module with the training code's names for ``net`` and random weights and batch-norm
    statistics (``torch.manual_seed(seed)``)."""
    torch.manual_seed(seed)
    model = nn.Module()
    for layer in net.resolved:
        B = layer.block_size
        if layer.kind == "conv" and layer.dense:
            setattr(model, layer.name, nn.Conv3d(layer.in_channels, layer.out_channels,
                                                 layer.kernel, layer.stride, layer.padding))
            setattr(model, _bn_name(layer.name), nn.BatchNorm3d(layer.out_channels))
        elif layer.kind == "conv":
            setattr(model, layer.name, _CirConv(layer.padded_out_channels // B,
                                                layer.padded_in_channels // B, B,
                                                layer.kernel))
            setattr(model, _bn_name(layer.name),
                    _SBN(layer.padded_out_channels // B * (B // 2 + 1)))
        elif layer.kind == "fc":
            setattr(model, layer.name, nn.Linear(layer.in_channels, layer.out_channels))
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm3d):
                m.weight.uniform_(0.5, 1.5)
                m.bias.normal_(0, 0.2)
                m.running_mean.normal_(0, 0.5)
                m.running_var.uniform_(0.5, 2.0)
                m.num_batches_tracked.fill_(1000)
    return model


def save_training_checkpoint(model: nn.Module, path) -> None:
    """``torch.save`` as the training code's ``train.py`` does: the model inside
    ``DataParallel``, with an SGD optimizer's state, the accuracy and the epoch."""
    parallel = nn.DataParallel(model)
    opt = torch.optim.SGD(parallel.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
    for p in parallel.parameters():  # one step, so that the optimizer holds momentum buffers
        p.grad = torch.zeros_like(p)
    opt.step()
    torch.save({"model_state_dict": parallel.state_dict(),
                "optimizer_state_dict": opt.state_dict(), "acc": 94.257, "epoch": 299}, path)


def _bn(x: torch.Tensor, state: dict, name: str, measure: bool) -> torch.Tensor:
    # measuring: the batch's statistics, stored in the running ones (momentum 1)
    return F.batch_norm(x, state[f"{name}.running_mean"], state[f"{name}.running_var"],
                        state[f"{name}.weight"], state[f"{name}.bias"], measure, 1.0, BN_EPS)


def _pool(x: torch.Tensor, layer) -> torch.Tensor:
    if layer.pool is None:
        return x
    return F.max_pool3d(x, layer.pool.window, layer.pool.stride, layer.pool.padding)


def _expand(w: torch.Tensor) -> torch.Tensor:
    P, Q, B = w.shape[:3]
    r, c = torch.arange(B)[:, None], torch.arange(B)[None, :]
    blocks = w[:, :, (r - c) % B]  # [P, Q, r, c, *K]
    return blocks.permute(0, 2, 1, 3, 4, 5, 6).reshape(P * B, Q * B, *w.shape[3:])


@torch.no_grad()
def measure_batch_norms(net: NetworkConfig, model: nn.Module, clips: np.ndarray) -> None:
    """Set every batch norm's running statistics of ``model`` (:func:`paper_model`) to those of
    its input over ``clips`` ``[N, C, D, H, W]``, layer by layer, as a train-mode forward of
    the training code does on one batch (momentum 1)."""
    _forward(net, model.state_dict(), torch.as_tensor(np.asarray(clips), dtype=torch.float32),
             measure=True)


def paper_forward(net: NetworkConfig, state: dict, clips: np.ndarray) -> np.ndarray:
    """The eval-mode forward of the training code's network on ``clips`` ``[N, C, D, H, W]``
    (float64; the fake quantisation as identities), from a state dict without the
    ``module.`` prefix: the logits ``[N, classes]``."""
    state = {k: torch.as_tensor(np.asarray(v), dtype=torch.float64) for k, v in state.items()}
    x = torch.as_tensor(np.asarray(clips), dtype=torch.float64)
    return _forward(net, state, x, measure=False).numpy()


def _forward(net: NetworkConfig, state: dict, x: torch.Tensor, measure: bool) -> torch.Tensor:
    for layer in net.resolved:
        B, n = layer.block_size, x.shape[0]
        if layer.kind == "conv" and layer.dense:
            x = F.conv3d(x, state[f"{layer.name}.weight"], state[f"{layer.name}.bias"],
                         layer.stride, layer.padding)
            x = _pool(torch.relu(_bn(x, state, _bn_name(layer.name), measure)), layer)
        elif layer.kind == "rfft":  # [N, C, ...] -> bins [N, C/B, B/2+1, ...]
            x = torch.fft.rfft(x.reshape(n, -1, B, *x.shape[2:]), dim=2)
        elif layer.kind == "conv":
            t = torch.fft.irfft(x, n=B, dim=2).reshape(n, -1, *x.shape[3:])
            t = F.conv3d(t, _expand(state[f"{layer.name}.weight"]), None, layer.stride,
                         layer.padding)
            y = torch.fft.rfft(t.reshape(n, -1, B, *t.shape[2:]), dim=2)
            shape = y.shape
            feats = y.reshape(n, -1, *shape[3:])  # feature q*(B/2+1) + k
            bn = _bn_name(layer.name)
            re = torch.relu(_bn(feats.real, state, f"{bn}.bn_real", measure))
            im = torch.relu(_bn(feats.imag, state, f"{bn}.bn_imag", measure))
            re, im = _pool(re, layer), _pool(im, layer)
            x = torch.complex(re, im).reshape(*shape[:3], *re.shape[2:])
        elif layer.kind == "irfft":
            x = torch.fft.irfft(x, n=B, dim=2).reshape(n, -1, *x.shape[3:])
        elif layer.kind == "gap":
            x = F.adaptive_avg_pool3d(x, 1)
        elif layer.kind == "fc":
            x = x.reshape(n, -1) @ state[f"{layer.name}.weight"].T + state[f"{layer.name}.bias"]
    return x
