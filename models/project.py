"""Dense weights in: the nearest block-circulant weights of a trained dense network.

A network trained with ordinary dense layers becomes the starting point of block-circulant
fine-tuning by projecting each layer's weights onto the block-circulant matrices: in every
``B x B`` block, the mean along each circulant diagonal, i.e. the least-squares fit in the
Frobenius norm. When the channels are not a multiple of ``B``, the padded rows and columns
carry no weight and take no part in the fit: each diagonal is the mean of its real entries
(:func:`~.spectral.project_circulant`). The relative
projection error ``|W - P(W)|_F / |W|_F`` of each layer says how much of the dense network the
constraint keeps.

Dense weights use PyTorch's layouts, so a trained model's state dict is read as it is saved
with ``numpy.savez(path, **{k: v.numpy() for k, v in model.state_dict().items()})``: the
weight of layer ``c1`` as ``c1.weight`` (a module whose ``Conv3d``/``Linear`` attributes are
named as the network file's layers), ``c1.conv.weight`` or ``layers.c1.conv.weight`` (the
dense twin, ``fcircnn.torch.DenseNetwork``), with or without ``DataParallel``'s ``module.``:

* a conv: ``nn.Conv3d.weight`` ``[M, N, Kd, Kr, Kc]`` (out, in, depth, height, width);
* an fc: ``nn.Linear.weight`` ``[M, N*D*H*W]`` over the input map flattened as PyTorch's
  ``x.flatten(1)`` does on ``[N, D, H, W]`` (channel-major), or already ``[M, N, D, H, W]``.
  (The accelerator's own flatten order is channel-minor; the fc is a conv whose kernel covers
  the map, so the projection needs no reordering: ``[M, N, D, H, W]`` is that conv's kernel.)

Global average pooling has no weights. CBN parameters are not projected: they are frequency
domain (per slot part), and are calibrated, or trained, after the projection.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

import numpy as np

from .config import NetworkConfig, ResolvedLayer
from .files import ArrayFileError, check_array, read_npz
from .network import MAX_WEIGHT_ABS, LayerWeights, NetworkWeights
from .spectral import expand_circulant, project_circulant

__all__ = ["dense_shape", "load_dense", "project_layer", "project_network"]


def dense_shape(layer: ResolvedLayer) -> tuple[int, ...]:
    """The dense weight ``layer`` takes (PyTorch layout; an fc's flattened input)."""
    if layer.kind == "fc":
        return (layer.out_channels, layer.in_channels * math.prod(layer.in_shape))
    return (layer.out_channels, layer.in_channels, *layer.kernel)


def project_layer(layer: ResolvedLayer, dense: np.ndarray) -> tuple[np.ndarray, float]:
    """Generators ``[M/B, N/B, B, Kd, Kr, Kc]`` of the block-circulant weights nearest to
    ``dense`` (:func:`dense_shape`, or ``[M, N, D, H, W]`` for an fc), and the relative
    projection error ``|W - P(W)|_F / |W|_F`` (0 for zero weights). A dense layer of the
    network keeps its weights: ``dense`` as ``[M, N, Kd, Kr, Kc]``, error 0.

    Raises
    ------
    ValueError
        If ``dense`` has neither accepted shape.
    """
    conv_shape = (layer.out_channels, layer.in_channels, *layer.kernel)
    dense = np.asarray(dense, dtype=np.float64)
    if dense.shape == dense_shape(layer):
        dense = dense.reshape(conv_shape)
    elif dense.shape != conv_shape:
        raise ValueError(f"layer {layer.name!r}: dense weight of shape {dense.shape}, expected "
                         f"{dense_shape(layer)}" + (f" or {conv_shape}" if layer.kind == "fc"
                                                    else ""))
    if layer.dense:
        return dense, 0.0
    B = layer.block_size
    generators = project_circulant(dense, B)
    back = expand_circulant(generators)[: layer.out_channels, : layer.in_channels]
    norm = float(np.linalg.norm(dense))
    error = float(np.linalg.norm(dense - back)) / norm if norm else 0.0
    return generators, error


def project_network(net: NetworkConfig, dense: Mapping[str, np.ndarray]
                    ) -> tuple[NetworkWeights, dict[str, float]]:
    """Every weighted layer of ``net`` projected (``dense[<layer>]``): the weights (without CBN
    parameters; a dense layer's as they are, with a zero bias where it has one) and each
    layer's relative projection error."""
    layers, errors = {}, {}
    for layer in net.resolved:
        if not layer.weighted:
            layers[layer.name] = LayerWeights(None)
            continue
        weights, errors[layer.name] = project_layer(layer, dense[layer.name])
        layers[layer.name] = (LayerWeights(weights) if not layer.dense else LayerWeights(
            None, weight=weights,
            bias=np.zeros(layer.out_channels) if layer.bias else None))
    return NetworkWeights(layers), errors


#: The names a layer's dense weight may have in a state dict: ``<layer>.weight`` (a module
#: whose ``Conv3d`` or ``Linear`` attributes are named as the layers), ``<layer>.conv.weight``
#: and ``layers.<layer>.conv.weight`` (``fcircnn.torch.DenseNetwork``); any
#: ``DataParallel`` ``module.`` prefix is dropped first.
_WEIGHT_KEY = re.compile(r"(?:layers\.)?(?P<layer>\w+?)\.(?:conv\.)?weight")
#: A ``BatchNorm3d``'s entries (``<layer>.bn.*``, ``layers.<layer>.bn.*``): not projected.
_BN_KEY = re.compile(r"(?:layers\.)?(?P<layer>\w+?)\.bn\."
                     r"(?:weight|bias|running_mean|running_var|num_batches_tracked)")


def load_dense(net: NetworkConfig, path: str) -> tuple[dict[str, np.ndarray], list[str]]:
    """Read the dense weight of every weighted layer of ``net`` from an ``.npz`` (a state dict
    saved with ``numpy.savez``): real, finite, within the weights' magnitude limit, of
    :func:`dense_shape` (or, for an fc, ``[M, N, D, H, W]``); the names as ``_WEIGHT_KEY``
    reads them. A batch norm's entries are left out with a note (CBN is calibrated, or
    trained, after the projection); nothing else is accepted.

    Returns
    -------
    dense : dict
        Layer name -> dense weight.
    notes : list of str
        What was left out or renamed, for the report.

    Raises
    ------
    ArrayFileError
        Naming the file and every problem at once: each unknown array, each missing layer
        (with the names tried and the shape expected), each wrong shape.
    """
    data = read_npz(path)
    weighted = {layer.name: layer for layer in net.resolved if layer.weighted}
    found: dict[str, str] = {}
    problems, notes, unknown, bn = [], [], [], set()
    prefixed = False
    for key in data:
        name = key
        while name.startswith("module."):
            name, prefixed = name[len("module."):], True
        weight, norm = _WEIGHT_KEY.fullmatch(name), _BN_KEY.fullmatch(name)
        if weight and weight["layer"] in weighted:
            if weight["layer"] in found:
                problems.append(f"'{key}' and '{found[weight['layer']]}' are both layer "
                                f"{weight['layer']!r}'s weight")
            found[weight["layer"]] = key
        elif norm and norm["layer"] in weighted:
            bn.add(norm["layer"])
        else:
            unknown.append(key)
    if prefixed:
        notes.append("dropped the DataParallel prefix 'module.' from the names")
    if bn:
        notes.append(f"batch norms of {', '.join(sorted(bn))} not projected: a time-domain "
                     "BatchNorm3d has no exact block-circulant form; CBN is calibrated (or "
                     "trained) after the projection")
    if unknown:
        problems.append(f"unknown array(s) {', '.join(map(repr, unknown[:5]))}"
                        f"{' ...' if len(unknown) > 5 else ''}")
    dense = {}
    for name, layer in weighted.items():
        if name not in found:
            problems.append(f"no weight for layer {name!r} (named '{name}.weight', "
                            f"'{name}.conv.weight' or 'layers.{name}.conv.weight'), of shape "
                            f"{dense_shape(layer)}")
            continue
        key = found[name]
        shape = data[key].shape
        want = (shape if layer.kind == "fc" and shape == (layer.out_channels,
                                                          layer.in_channels, *layer.in_shape)
                else dense_shape(layer))
        try:
            dense[name] = check_array(data[key], f"'{key}'", want, max_abs=MAX_WEIGHT_ABS)
        except ArrayFileError as exc:
            problems.append(str(exc))
    if problems:
        raise ArrayFileError(f"{path}: {len(problems)} problem(s) for network {net.name}:\n  "
                             + "\n  ".join(problems))
    return dense, notes
