"""The weights file in and out of a :class:`~fcircnn.torch.model.SlotNetwork`.

The file is the one ``fcircnn golden|compile|run --weights`` read
(:func:`fcircnn.models.network.load_weights`): ``<layer>.generators`` ``[M'/B, N'/B, B, Kd, Kr,
Kc]`` for every conv and fc layer and, for the layers with CBN, ``<layer>.bn_gain`` and
``<layer>.bn_offset`` ``[2, M'/2]``, the inference form of :class:`~fcircnn.torch.post.CBN`
(its running statistics folded in). The activation scales of quantization-aware training are
not part of it: the golden model and the compiler calibrate them again, on the input or a
calibration set (the same maximum rule as :meth:`~fcircnn.torch.model.SlotNetwork.calibrate`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping

import numpy as np
import torch

from fcircnn.models.calibration import Calibration
from fcircnn.models.config import AcceleratorConfig, NetworkConfig
from fcircnn.models.files import check_array
from fcircnn.models.network import (
    MAX_WEIGHT_ABS,
    LayerWeights,
    NetworkWeights,
    check_weights,
    load_weights,
)
from fcircnn.models.spectral import INT8_MAX

from .model import SlotNetwork, build

__all__ = ["export", "from_weights", "load", "model_calibration", "network_weights"]


def network_weights(model: SlotNetwork) -> NetworkWeights:
    """The model's float parameters as the golden model's :class:`NetworkWeights` (float64
    copies; CBN in its inference form), e.g. for
    :func:`fcircnn.models.network.run_network` ``(weights=...)``.

    Raises
    ------
    fcircnn.models.files.ArrayFileError
        If a value is not finite or beyond :data:`~fcircnn.models.network.MAX_WEIGHT_ABS`
        (the weights file would be refused), naming the layer's array.
    """
    layers = {}
    for name, layer in model.layers.items():
        if layer.conv is None and layer.dense is None:
            layers[name] = LayerWeights(None)
            continue
        if layer.dense is not None:
            arrays = {"weight": layer.dense.weight.detach()}
            if layer.dense.bias is not None:
                arrays["bias"] = layer.dense.bias.detach()
        else:
            arrays = {"generators": layer.conv.generators.detach()}
        if layer.cbn is not None:
            arrays["bn_gain"], arrays["bn_offset"] = layer.cbn.gain, layer.cbn.offset
        if layer.bn is not None:
            arrays["bn_gain"], arrays["bn_offset"] = _bn_inference(layer.bn)
        checked = {part: check_array(value.cpu().double().numpy(), f"'{name}.{part}'",
                                     tuple(value.shape), max_abs=MAX_WEIGHT_ABS)
                   for part, value in arrays.items()}
        layers[name] = LayerWeights(checked.get("generators"), checked.get("bn_gain"),
                                    checked.get("bn_offset"), checked.get("weight"),
                                    checked.get("bias"))
    return NetworkWeights(layers, model_calibration(model))


def model_calibration(model: SlotNetwork) -> Calibration | None:
    """The model's activation scales as the weights file's calibration
    (:mod:`fcircnn.models.calibration`: per tensor, one scale for every part and bin), or
    ``None`` before :meth:`~fcircnn.torch.SlotNetwork.calibrate` or a QAT step set them."""
    if model.scales_from is None:
        return None
    statistic, clips = model.scales_from
    net = model.config

    def full(scale: float, B: int) -> np.ndarray:
        return np.full((2, B // 2), scale)

    scales = {None: model.input_quant.scale}
    out = {}
    for name, layer in model.layers.items():
        L = layer.layer  # an irfft passes its input on, its scale too
        scales[name] = scales[L.input] if L.kind == "irfft" else layer.out_quant.scale
        out[name] = full(scales[name], L.block_size)
    return Calibration(full(scales[None], net.resolved[0].block_size), out, "tensor",
                       statistic, clips)


def _bn_inference(bn: torch.nn.BatchNorm3d) -> tuple[torch.Tensor, torch.Tensor]:
    """A time-domain batch norm's inference ``(gain, offset)`` ``[M]``, detached."""
    gain = (bn.weight / torch.sqrt(bn.running_var + bn.eps)).detach()
    return gain, (bn.bias - bn.running_mean * gain).detach()


@torch.no_grad()
def _set_bn(bn: torch.nn.BatchNorm3d, gain: torch.Tensor, offset: torch.Tensor) -> None:
    """Make ``bn``'s inference form ``gain * y + offset``: running mean 0, variance 1."""
    bn.running_mean.zero_()
    bn.running_var.fill_(1.0)
    bn.weight.copy_(gain * math.sqrt(1.0 + bn.eps))
    bn.bias.copy_(offset)


def export(model: SlotNetwork, path: str | os.PathLike[str]) -> None:
    """Write the model's weights file (``.npz``, written whole or not at all), with its
    activation scales as the file's calibration once they are set (:func:`model_calibration`:
    ``fcircnn run`` and ``deploy`` then quantize every clip with them).

    Raises
    ------
    fcircnn.models.files.ArrayFileError
        As :func:`network_weights`.
    """
    network_weights(model).save(os.fspath(path))


def load(model: SlotNetwork,
         source: str | os.PathLike[str] | Mapping[str, np.ndarray] | NetworkWeights
         ) -> SlotNetwork:
    """Load weights into ``model``; returns it.

    Parameters
    ----------
    source : path, mapping or NetworkWeights
        A weights file (``.npz``), or its arrays by name, checked as
        :func:`fcircnn.models.network.load_weights` checks a file: every layer's generators
        of the right shape, CBN gain and offset together or not at all, no other array, real
        finite values within :data:`~fcircnn.models.network.MAX_WEIGHT_ABS`. A CBN layer
        without gain and offset in ``source`` becomes the identity; an array of a layer that
        has no CBN in the network file is refused. A per-tensor calibration in ``source``
        sets the activation observers' scales.

    Raises
    ------
    fcircnn.models.files.ArrayFileError
        Naming the file (or ``<arrays>``), the array and the shape expected.
    """
    net = model.config
    if isinstance(source, NetworkWeights):
        weights = check_weights(net, source.arrays(), "<weights>")
    elif isinstance(source, Mapping):
        weights = check_weights(net, source, "<arrays>")
    else:
        weights = load_weights(net, os.fspath(source))
    with torch.no_grad():
        for name, layer in model.layers.items():
            lw = weights.layers[name]
            if layer.dense is not None:
                layer.dense.weight.copy_(torch.from_numpy(lw.weight).to(layer.dense.weight))
                if layer.dense.bias is not None:
                    layer.dense.bias.copy_(torch.from_numpy(lw.bias).to(layer.dense.bias))
                if layer.bn is not None:
                    like = layer.bn.weight
                    gain, offset = ((torch.ones_like(like), torch.zeros_like(like))
                                    if lw.bn_gain is None else
                                    (torch.from_numpy(lw.bn_gain).to(like),
                                     torch.from_numpy(lw.bn_offset).to(like)))
                    _set_bn(layer.bn, gain, offset)
                continue
            if layer.conv is None:
                continue
            gen = layer.conv.generators
            gen.copy_(torch.from_numpy(lw.generators).to(gen))
            if layer.cbn is not None:
                like = layer.cbn.weight
                if lw.bn_gain is None:
                    layer.cbn.set_affine(torch.ones_like(like), torch.zeros_like(like))
                else:
                    layer.cbn.set_affine(torch.from_numpy(lw.bn_gain).to(like),
                                         torch.from_numpy(lw.bn_offset).to(like))
    _load_scales(model, weights.calibration)
    return model


def _load_scales(model: SlotNetwork, calibration: Calibration | None) -> None:
    """The observers' scales from a per-tensor ``calibration`` (a per-bin one has no form in
    the model's per-tensor observers and is left out)."""
    if calibration is None or calibration.granularity != "tensor":
        return
    with torch.no_grad():
        for obs, scale in ((model.input_quant, calibration.input_scale),
                           *((layer.out_quant, calibration.out_scales[name])
                             for name, layer in model.layers.items())):
            obs.running_max.fill_(float(scale.max()) * INT8_MAX)
            obs.initialized.fill_(True)
    model.scales_from = (calibration.statistic, calibration.clips)


def from_weights(network: str | os.PathLike[str] | NetworkConfig | AcceleratorConfig,
                 source: str | os.PathLike[str] | Mapping[str, np.ndarray] | NetworkWeights,
                 *, qat: bool = False, dtype: torch.dtype = torch.float32) -> SlotNetwork:
    """:func:`~fcircnn.torch.model.build` the model of ``network`` and :func:`load`
    ``source`` into it."""
    return load(build(network, seed=None, qat=qat, dtype=dtype), source)
