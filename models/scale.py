"""Scaled-down networks for simulation: the same layers with fewer channels and smaller maps.

A full C3D or 3D ResNet-18 inference is far too long for an RTL simulation. :func:`scale_network`
divides every layer's channel counts and the input's spatial size by an integer factor ``S``
and rounds the results to legal values; :func:`scale_accelerator` does the same for the network
of an accelerator and keeps its hardware (device, clock, bus and cores) unchanged.

Rounding rules (``S > 1``; ``S = 1`` returns the configuration unchanged):

* **channels**: every layer's output channel count ``c`` becomes ``ceil(c / S)`` rounded up to
  a multiple of the layer's block size ``B`` (hence at least ``B``); the final classifier width
  (``classes``) follows the same rule. The network input's channel count (e.g. 3 RGB channels)
  is kept. Layers whose channels must agree (residual pairs, a ``gap`` and its input) are scaled
  from equal counts, so they still agree.
* **spatial size**: each of the input's ``D``, ``H``, ``W`` becomes ``ceil(size / S)``, raised to
  the smallest size on that axis for which every layer (kernels with their padding and stride,
  pools with their padding, ``fc``/``gap`` over the whole map) still yields a map of at least one
  voxel, and never above the original size. For C3D, whose four depth-halving pools need 16
  frames, the depth stays 16 and ``H = W`` never drop below 16.
* **spatial size chosen separately**: with ``input=(D, H, W)`` the input map is exactly that
  (any size, also larger than the original, for which every layer still yields a map of at
  least one voxel), whatever ``S``; e.g. 3D ResNet-18 at ``S = 8`` with its default input
  ends in 1x1x1 maps from stage 3, ``input=(8, 32, 32)`` keeps them 2x2x2 and more.
* **everything else** (kernels, strides, paddings, pools, CBN/CReLU, residual and input links,
  block sizes, layer names) is kept. Scaled networks are named ``<name>_s<S>``; the accelerator
  keeps its name and its file paths (``network_file``, :attr:`AcceleratorConfig.path`).

The scaled configuration is rebuilt as the YAML-shaped data of the original file and validated
by the same strict models and cross-checks as :func:`~fcircnn.models.config.load_network` and
:func:`~fcircnn.models.config.load_accelerator`; problems are reported as
:class:`~fcircnn.models.config.ConfigError` whose file reads ``<file> (scaled by S=<S>)``.
"""

from __future__ import annotations

import os
from typing import Any

from .config import (
    AcceleratorConfig,
    ConfigError,
    ConvLayer,
    FcLayer,
    GapLayer,
    IrfftLayer,
    NetworkConfig,
    RfftLayer,
)
from .errors import validate_model

__all__ = ["InputShapeError", "check_input_shape", "check_scale", "min_input_shape",
           "scale_accelerator", "scale_channels", "scale_network"]

_AXES = ("depth", "height", "width")


def check_scale(S: object) -> int:
    """Return ``S`` if it is a legal scale factor, an integer ``>= 1``.

    Raises
    ------
    ValueError
        Naming ``S`` and its value otherwise (booleans and floats are not integers).
    """
    if isinstance(S, bool) or not isinstance(S, int):
        raise ValueError(f"scale factor S must be an integer >= 1, not {S!r}")
    if S < 1:
        raise ValueError(f"scale factor S must be an integer >= 1, not {S}")
    return S


def scale_channels(channels: int, S: int, block_size: int) -> int:
    """Channel count ``channels`` scaled by ``S``: ``ceil(channels / S)`` rounded up to a
    multiple of ``block_size`` (at least ``block_size``); ``channels`` itself when ``S = 1``."""
    check_scale(S)
    if S == 1:
        return channels
    divided = -(-channels // S)
    return max(block_size, -(-divided // block_size) * block_size)


def _window_out(size: int, kernel: int, stride: int, pad: int) -> int:
    return (size + 2 * pad - kernel) // stride + 1


def _axis_valid(net: NetworkConfig, axis: int, size: int) -> bool:
    """Whether an input of ``size`` on ``axis`` gives every layer a map of >= 1 voxel there."""
    out: dict[str | None, int] = {None: size}
    prev: str | None = None
    for cfg in net.layers:
        src = cfg.input if cfg.input is not None else prev
        n = out[src]
        if isinstance(cfg, ConvLayer):
            n = _window_out(n, cfg.kernel[axis], cfg.stride[axis], cfg.padding[axis])
            if n < 1:
                return False
            if cfg.pool is not None:
                p = cfg.pool
                n = _window_out(n, p.window[axis], (p.stride or p.window)[axis],
                                (p.padding or (0, 0, 0))[axis])
                if n < 1:
                    return False
        elif isinstance(cfg, (RfftLayer, IrfftLayer)):  # voxel by voxel
            pass
        else:  # fc, gap: the kernel covers the whole map
            n = 1
        out[cfg.name] = n
        prev = cfg.name
    return True


def min_input_shape(net: NetworkConfig) -> tuple[int, int, int]:
    """Smallest input ``(D, H, W)`` (per axis, up to the network's own) for which every layer of
    ``net`` yields a map of at least one voxel."""
    shape = []
    for axis, name in enumerate(_AXES):
        full = getattr(net.input, name)
        size = 1
        while size < full and not _axis_valid(net, axis, size):
            size += 1
        shape.append(size)
    return (shape[0], shape[1], shape[2])


class InputShapeError(ValueError):
    """An input map size that is not three positive integers or too small for the network."""


def check_input_shape(net: NetworkConfig, shape: object) -> tuple[int, int, int]:
    """Return ``shape`` as ``(D, H, W)`` if it is a legal input map size for ``net``: three
    positive integers for which every layer yields a map of at least one voxel.

    Raises
    ------
    InputShapeError
        A ``ValueError`` naming ``input``, the value and, for a map too small, the smallest
        legal size.
    """
    try:
        dims = tuple(shape)  # type: ignore[arg-type]
    except TypeError:
        dims = ()
    if len(dims) != 3 or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1
                                 for v in dims):
        raise InputShapeError(f"input must be three positive integers (D, H, W), not "
                              f"{shape!r}")
    bad = [name for axis, name in enumerate(_AXES) if not _axis_valid(net, axis, dims[axis])]
    if bad:
        lowest = [1, 1, 1]
        for axis in range(3):
            while not _axis_valid(net, axis, lowest[axis]) and lowest[axis] < 1 << 16:
                lowest[axis] += 1
        raise InputShapeError(f"input {'x'.join(map(str, dims))} is too small for network "
                              f"{net.name} on axis {', '.join(bad)}: some layer's map would be "
                              f"empty; the smallest input is {'x'.join(map(str, lowest))}")
    return (dims[0], dims[1], dims[2])


def _scaled_network_data(net: NetworkConfig, S: int,
                         shape: tuple[int, int, int] | None) -> dict[str, Any]:
    """The network file's data (as written, YAML-shaped) with channels and input scaled."""
    data = net.model_dump(mode="json", by_alias=True, exclude_unset=True)
    data["name"] = f"{net.name}_s{S}"
    lowest = min_input_shape(net)
    for axis, name in enumerate(_AXES):
        data["input"][name] = (shape[axis] if shape is not None
                               else max(lowest[axis], -(-getattr(net.input, name) // S)))
    for cfg, layer in zip(net.layers, data["layers"], strict=True):
        if isinstance(cfg, (ConvLayer, FcLayer)):
            block = cfg.block_size if cfg.block_size is not None else net.block_size
            layer["out_channels"] = scale_channels(cfg.out_channels, S, block)
        else:
            assert isinstance(cfg, (GapLayer, RfftLayer, IrfftLayer))
    last = net.resolved[-1]
    data["classes"] = scale_channels(net.classes, S, last.block_size)
    return data


def _label(path: os.PathLike[str] | str | None, fallback: str, S: int) -> str:
    return f"{os.fspath(path) if path is not None else fallback} (scaled by S={S})"


def scale_network(net: NetworkConfig, S: int,
                  input: tuple[int, int, int] | None = None) -> NetworkConfig:
    """Return ``net`` with channels and input size divided by ``S`` (module docstring).

    Parameters
    ----------
    net : NetworkConfig
        A validated network.
    S : int
        Scale factor, ``>= 1``; 1 (without ``input``) returns ``net`` itself.
    input : (D, H, W), optional
        The input map size instead of the scaled one (:func:`check_input_shape`).

    Returns
    -------
    NetworkConfig
        Validated like a network file; named ``<name>_s<S>``; :attr:`NetworkConfig.path` is
        ``None`` (built in memory).

    Raises
    ------
    ValueError
        If ``S`` is not an integer ``>= 1`` (the message names ``S``) or ``input`` is not a
        legal input size (names ``input``).
    ConfigError
        If the scaled network fails validation (cannot happen for a valid ``net``; reported
        against ``<file> (scaled by S=<S>)``).
    """
    check_scale(S)
    shape = None if input is None else check_input_shape(net, input)
    if S == 1 and (shape is None or shape == net.input.shape):
        return net
    data = _scaled_network_data(net, S, shape)
    if S == 1:
        data["name"] = net.name
    scaled: NetworkConfig = validate_model(NetworkConfig, data, _label(net.path, net.name, S))
    return scaled


def scale_accelerator(acc: AcceleratorConfig, S: int,
                      input: tuple[int, int, int] | None = None) -> AcceleratorConfig:
    """Return ``acc`` bound to its network scaled by ``S`` (:func:`scale_network`).

    The hardware is the same: device, clock, block size, bus, address width and every core are
    kept (no core parameter depends on the network's channel counts or map sizes), as are the
    accelerator's name, ``network_file`` and :attr:`AcceleratorConfig.path`.

    Parameters
    ----------
    acc : AcceleratorConfig
        A validated accelerator bound to its network
        (:func:`~fcircnn.models.config.load_accelerator`).
    S : int
        Scale factor, ``>= 1``; 1 (without ``input``) returns ``acc`` itself.
    input : (D, H, W), optional
        Input map size of the scaled network (see :func:`scale_network`).

    Returns
    -------
    AcceleratorConfig
        Validated and cross-checked against the scaled network like an accelerator file.

    Raises
    ------
    ValueError
        If ``S`` is not an integer ``>= 1`` (the message names ``S``) or ``input`` is not a
        legal input size (names ``input``).
    ConfigError
        If the scaled configuration fails validation (reported against
        ``<file> (scaled by S=<S>)``).
    """
    check_scale(S)
    network = scale_network(acc.network, S, input)
    if network is acc.network:
        return acc
    label = _label(acc.path, acc.name, S)
    data = acc.model_dump(mode="json", by_alias=True, exclude_unset=True)
    scaled: AcceleratorConfig = validate_model(AcceleratorConfig, data, label)
    problems = scaled.bind(network, acc.path)
    if problems:
        raise ConfigError(label, problems)
    return scaled

