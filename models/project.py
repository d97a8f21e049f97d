"""Dense weights in: the nearest block-circulant weights of a trained dense network.

A network trained with ordinary dense layers becomes the starting point of block-circulant
fine-tuning by projecting each layer's weights onto the block-circulant matrices: in every
``B x B`` block, the mean along each circulant diagonal, i.e. the least-squares fit in the
Frobenius norm. When the channels are not a multiple of ``B``, the padded rows and columns
carry no weight and take no part in the fit: each diagonal is the mean of its real entries
(:func:`~.spectral.project_circulant`). The relative
projection error ``|W - P(W)|_F / |W|_F`` of each layer says how much of the dense network the
constraint keeps.

Dense weights use PyTorch's layouts, so a trained model's state dict can be saved as is with
``numpy.savez(path, **{k: v.numpy() for k, v in model.state_dict().items()})`` after renaming
each layer's ``weight`` to ``<layer>.weight``:

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


def load_dense(net: NetworkConfig, path: str) -> dict[str, np.ndarray]:
    """Read ``<layer>.weight`` for every weighted layer of ``net`` from an ``.npz``: real,
    finite, within the weights' magnitude limit, of :func:`dense_shape` (or, for an fc,
    ``[M, N, D, H, W]``); nothing else.

    Raises
    ------
    ArrayFileError
        Naming the file, the array and what was expected.
    """
    data = read_npz(path)
    weighted = [layer for layer in net.resolved if layer.weighted]
    expected = {f"{layer.name}.weight": layer for layer in weighted}
    unknown = sorted(set(data) - set(expected))
    if unknown:
        raise ArrayFileError(f"{path}: unknown array(s) {', '.join(map(repr, unknown[:5]))}; a "
                             f"dense weights file holds <layer>.weight for the layers "
                             f"{', '.join(layer.name for layer in weighted)}")
    dense = {}
    for key, layer in expected.items():
        if key not in data:
            raise ArrayFileError(f"{path}: missing array '{key}' of shape {dense_shape(layer)}")
        shape = data[key].shape
        if layer.kind == "fc" and shape == (layer.out_channels, layer.in_channels,
                                            *layer.in_shape):
            want = shape
        else:
            want = dense_shape(layer)
        dense[layer.name] = check_array(data[key], f"{path}: '{key}'", want,
                                        max_abs=MAX_WEIGHT_ABS)
    return dense
