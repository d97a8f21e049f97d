"""The dense twin of a network file: the same graph with ordinary time-domain layers.

The block size 1 of the paper's accuracy-against-B figure: every conv and fc layer dense
(:class:`torch.nn.Conv3d` without bias, an fc layer the conv over its whole input map), CBN as
:class:`torch.nn.BatchNorm3d`, CReLU as ReLU, CMaxPool as a max pool whose padding never wins,
global average pooling as the mean over the map, residuals added before the ReLU. It has no
integer contract (the contract needs ``B`` >= 4); it is the uncompressed float baseline.
"""

from __future__ import annotations

import os

import torch
from torch import nn

from fcircnn.models.config import AcceleratorConfig, NetworkConfig, ResolvedLayer

from .model import network_config
from .post import CMaxPool3d

__all__ = ["DenseLayer", "DenseNetwork"]


class DenseLayer(nn.Module):
    """One layer of a network file in the time domain, dense (see the module)."""

    def __init__(self, layer: ResolvedLayer) -> None:
        super().__init__()
        self.layer = layer
        self.conv = None if layer.kind == "gap" else nn.Conv3d(
            layer.in_channels, layer.out_channels, layer.kernel, layer.stride, layer.padding,
            bias=False)
        self.bn = nn.BatchNorm3d(layer.out_channels) if layer.cbn and self.conv else None
        pool = layer.pool
        # CMaxPool3d takes [N, 2, S, ...]; a time-domain map is [N, 1, C, ...] to it.
        self.pool = None if pool is None else CMaxPool3d(pool.window, pool.stride, pool.padding)

    def forward(self, x: torch.Tensor, res: torch.Tensor | None = None) -> torch.Tensor:
        y = x.mean(dim=(2, 3, 4), keepdim=True) if self.conv is None else self.conv(x)
        if self.bn is not None:
            y = self.bn(y)
        if res is not None:
            y = y + res
        if self.layer.crelu:
            y = torch.relu(y)
        if self.pool is not None:
            y = self.pool(y.unsqueeze(1)).squeeze(1)
        return y


class DenseNetwork(nn.Module):
    """The dense twin of a network file: clips ``[N, C, D, H, W]`` in, class scores out
    (``[N, classes]`` when the last map is 1x1x1, else ``[N, classes, D, H, W]``).

    Parameters
    ----------
    network : path, built-in name, NetworkConfig or AcceleratorConfig
        As :func:`fcircnn.torch.network_config`.
    """

    def __init__(self, network: str | os.PathLike[str] | NetworkConfig | AcceleratorConfig
                 ) -> None:
        super().__init__()
        self.config = network_config(network)
        self.layers = nn.ModuleDict()
        for layer in self.config.resolved:
            if hasattr(self.layers, layer.name):
                raise ValueError(f"layer {layer.name!r}: the name is an attribute of "
                                 "torch.nn.ModuleDict and cannot name a module; rename the "
                                 "layer in the network file")
            self.layers[layer.name] = DenseLayer(layer)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        inp = self.config.input
        expected = (inp.channels, *inp.shape)
        if x.ndim != 5 or tuple(x.shape[1:]) != expected:
            raise ValueError(f"{self.config.name}: input clips {list(x.shape)}, expected "
                             f"[N, {', '.join(map(str, expected))}]")
        outputs: dict[str, torch.Tensor] = {}
        for name, layer in self.layers.items():
            L = layer.layer
            src = x if L.input is None else outputs[L.input]
            outputs[name] = layer(src, None if L.residual is None else outputs[L.residual])
        out = outputs[self.config.resolved[-1].name]
        return out.reshape(out.shape[:2]) if out.shape[2:] == (1, 1, 1) else out
