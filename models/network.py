"""Whole-network runner of the golden model in three modes.

Modes
-----
``float``
    Time-domain reference: every conv is a dense float64 conv3d with the expanded circulant
    weights; the frequency-domain post operators (CBN, residual, CReLU, CMaxPool) are applied
    on the rfft of its output, which is transformed back for the next layer.
``slots``
    The same network computed entirely on packed half-spectrum slots (float64).
``int``
    The bit-exact hardware contract: int8 slots, exact int32 accumulators, integer CBN with
    residual, rounding shift, clamp, CReLU and CMaxPool (:mod:`fcircnn.models.spectral`),
    with scales calibrated on the float reference (:mod:`fcircnn.models.quant`).

The float reference always runs first. With random weights it also calibrates each CBN to
zero mean and unit variance per output slot and part over the given input (the running
statistics a trained network would carry), so that activations of a random network stay in a
useful range. Given weights may carry their own CBN parameters.

Time-domain layers (dense ones, rfft and irfft) run in every mode as the integer contract
computes them (:mod:`.timedomain`): in ``float`` a dense layer is a float64 conv3d of the time
map with its bias, batch norm, ReLU and max pool per channel; in ``slots`` it runs in its
mapping onto the block-circulant datapath, in float.

Weights file (``.npz``)
-----------------------
``<layer>.generators``: ``[M/B, N/B, B, Kd, Kr, Kc]`` float (FC: kernel = input map, flattened
channel-minor, i.e. the conv over the map); optional ``<layer>.bn_gain`` and ``<layer>.bn_offset``:
``[2, M/2]`` float, the slot-domain CBN per part and output slot. A dense layer has
``<layer>.weight`` ``[M, N, Kd, Kr, Kc]`` (an fc layer's kernel is its input map, so a
PyTorch ``Linear`` weight ``[M, C*D*H*W]`` reshaped), ``<layer>.bias`` ``[M]`` when it has a
bias, and optional ``<layer>.bn_gain``, ``<layer>.bn_offset`` ``[M]``: ``t = bn_gain * (y +
bias) + bn_offset`` per channel.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from fcircnn.arch.transforms import RFFT_FRACTION_BITS

from . import quant, spectral, timedomain
from .calibration import PREFIX as CALIBRATION_PREFIX
from .calibration import Calibration, read_calibration
from .config import NetworkConfig, ResolvedLayer
from .files import ArrayFileError, atomic_write, check_array, read_npy, read_npz
from .resolve import LANE0, LANES, SPREAD, fmt3

__all__ = [
    "MAX_CALIBRATION_CLIPS",
    "MAX_INPUT_ABS",
    "MAX_WEIGHT_ABS",
    "MODES",
    "Calibration",
    "IntMap",
    "LayerOverflowError",
    "LayerReport",
    "LayerWeights",
    "Mode",
    "NetworkWeights",
    "QuantizedLayer",
    "QuantizedNetwork",
    "RunResult",
    "calibrate",
    "calibration_problem",
    "check_weights",
    "class_scores_problem",
    "load_clips",
    "load_input",
    "load_weights",
    "measure_calibration",
    "quantize_calibrated",
    "quantize_network",
    "random_input",
    "random_weights",
    "run_int",
    "run_memory_bytes",
    "run_network",
    "snr_db",
    "weight_arrays",
]

Mode = Literal["float", "slots", "int"]
MODES: tuple[Mode, ...] = ("float", "slots", "int")

Progress = Callable[[str, int, int], None]
"""Callback ``(label, done, total)`` invoked at the start of each pass (``done == 0``) and
after each of its layers."""


@dataclass
class LayerWeights:
    """Float parameters of one layer (``generators`` is ``None`` for a layer without
    block-circulant weights: a dense layer has ``weight`` ``[M, N, *K]`` and ``bias`` ``[M]``
    instead, when it has a bias).

    ``bn_gain``/``bn_offset`` (``[2, S_out]``; ``[M]`` for a dense layer) are ``None`` until
    calibrated when the layer has CBN (BN); layers without use gain 1 and offset 0.
    """

    generators: np.ndarray | None
    bn_gain: np.ndarray | None = None
    bn_offset: np.ndarray | None = None
    weight: np.ndarray | None = None
    bias: np.ndarray | None = None


@dataclass
class NetworkWeights:
    """Float parameters of a network, by layer name, and the int8 ``calibration`` measured
    with them (:mod:`fcircnn.models.calibration`; ``None``: each run calibrates on its clip)."""

    layers: dict[str, LayerWeights]
    calibration: Calibration | None = None

    def arrays(self) -> dict[str, np.ndarray]:
        """The weights as the named arrays of the ``.npz`` format :func:`load_weights` reads
        (``<layer>.generators``, ``<layer>.bn_gain``, ``<layer>.bn_offset``, and the
        calibration's ``calibration/...``)."""
        arrays = {} if self.calibration is None else self.calibration.arrays()
        for name, lw in self.layers.items():
            if lw.generators is not None:
                arrays[f"{name}.generators"] = lw.generators
            if lw.weight is not None:
                arrays[f"{name}.weight"] = lw.weight
            if lw.bias is not None:
                arrays[f"{name}.bias"] = lw.bias
            if lw.bn_gain is not None:
                arrays[f"{name}.bn_gain"] = lw.bn_gain
                arrays[f"{name}.bn_offset"] = lw.bn_offset
        return arrays

    def save(self, path: str) -> None:
        """Write the weights in the ``.npz`` format :func:`load_weights` reads."""
        arrays = self.arrays()
        atomic_write(path, lambda f: np.savez(f, **arrays))


def _generator_shape(layer: ResolvedLayer) -> tuple[int, ...]:
    B = layer.block_size
    return (layer.padded_out_channels // B, layer.padded_in_channels // B, B, *layer.kernel)


def _dense_shape(layer: ResolvedLayer) -> tuple[int, ...]:
    return (layer.out_channels, layer.in_channels, *layer.kernel)


def random_weights(net: NetworkConfig, seed: int = 0) -> NetworkWeights:
    """He-initialised random block-circulant generators or dense weights (seeded), a dense
    layer's bias drawn with standard deviation 0.1; CBN left to calibration."""
    rng = np.random.default_rng(seed)
    layers = {}
    for layer in net.resolved:
        if not layer.weighted:
            layers[layer.name] = LayerWeights(None)
            continue
        fan_in = layer.in_channels * int(np.prod(layer.kernel))
        shape = _dense_shape(layer) if layer.dense else _generator_shape(layer)
        weight = rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)
        if not layer.dense:
            layers[layer.name] = LayerWeights(weight)
            continue
        bias = 0.1 * rng.standard_normal(layer.out_channels) if layer.bias else None
        layers[layer.name] = LayerWeights(None, weight=weight, bias=bias)
    return NetworkWeights(layers)


#: Largest magnitude accepted in a weights file (generators, CBN gain and offset): trained
#: weights are of order 1; values beyond this are a unit or scaling error, and would overflow
#: the float reference long before the int8 contract could represent them.
MAX_WEIGHT_ABS = 1e4
#: Largest magnitude accepted in an input clip (8-bit video is 0..255; normalised, a few units).
MAX_INPUT_ABS = 1e6


def weight_arrays(net: NetworkConfig) -> dict[str, tuple[tuple[int, ...], bool]]:
    """The arrays a weights file of ``net`` holds: name -> (shape, required). Every
    block-circulant conv and fc layer has its generators, every dense one its weight and, with
    ``bias: true``, its bias; the CBN (BN) gain and offset are optional, and only layers with
    CBN (``cbn: true``, ``bn: true``) take them."""
    arrays = {}
    for layer in net.resolved:
        if not layer.weighted:
            continue
        if layer.dense:
            arrays[f"{layer.name}.weight"] = (_dense_shape(layer), True)
            if layer.bias:
                arrays[f"{layer.name}.bias"] = ((layer.out_channels,), True)
        else:
            arrays[f"{layer.name}.generators"] = (_generator_shape(layer), True)
        if layer.cbn:
            shape = ((layer.out_channels,) if layer.dense
                     else (2, layer.padded_out_channels // 2))
            for part in ("bn_gain", "bn_offset"):
                arrays[f"{layer.name}.{part}"] = (shape, False)
    return arrays


def _weight_parts(layer: ResolvedLayer) -> tuple[str, ...]:
    """The arrays of ``layer`` in a weights file, by suffix."""
    main = ("weight", "bias") if layer.dense else ("generators",)
    return (*main, "bn_gain", "bn_offset") if layer.cbn else main


def load_weights(net: NetworkConfig, path: str) -> NetworkWeights:
    """Read weights from ``.npz`` and check every array against the network once
    (:func:`check_weights`).

    Raises
    ------
    ArrayFileError
        Naming the file, the array and what was expected.
    """
    return check_weights(net, read_npz(path), path)


def check_weights(net: NetworkConfig, data: Mapping[str, np.ndarray],
                  where: str) -> NetworkWeights:
    """Check arrays ``data`` (by weights-file name) against the network once: the names
    (every layer's generators; CBN gain and offset together or not at all; nothing else), the
    shapes, real finite values within :data:`MAX_WEIGHT_ABS`.

    Parameters
    ----------
    where : str
        Where the arrays come from, for messages (the file name).

    Raises
    ------
    ArrayFileError
        Naming ``where``, the array and what was expected.
    """
    path = where
    expected = weight_arrays(net)
    arrays = {k: v for k, v in data.items() if not k.startswith(CALIBRATION_PREFIX)}
    # The weights first: another network's file is named as such, not by its calibration.
    _refuse_bn_without_cbn(net, arrays, path)
    unknown = sorted(set(arrays) - set(expected))
    if unknown:
        dense = [r.name for r in net.resolved if r.dense]
        raise ArrayFileError(
            f"{path}: unknown array(s) {', '.join(repr(k) for k in unknown[:5])}"
            f"{' ...' if len(unknown) > 5 else ''} for network {net.name}; a weights file "
            f"holds <layer>.generators for the layers "
            f"{', '.join(r.name for r in net.resolved if r.weighted and not r.dense)}"
            + (f", <layer>.weight (and <layer>.bias where the layer has one) for the dense "
               f"layers {', '.join(dense)}" if dense else "")
            + " and optionally <layer>.bn_gain with <layer>.bn_offset for those with CBN"
            + (" or BN" if dense else "") + f", and a calibration ({CALIBRATION_PREFIX}...)")
    calibration = read_calibration(net, data, path)
    data = arrays
    layers = {}
    for layer in net.resolved:
        if not layer.weighted:
            layers[layer.name] = LayerWeights(None)
            continue
        checked = {}
        for part in _weight_parts(layer):
            key = f"{layer.name}.{part}"
            if key not in expected:  # a dense layer without a bias
                continue
            shape, required = expected[key]
            if key in data:
                checked[part] = check_array(np.asarray(data[key]), f"{path}: '{key}'", shape,
                                            max_abs=MAX_WEIGHT_ABS)
            elif required:
                raise ArrayFileError(f"{path}: missing array '{key}' of shape {shape}")
        if ("bn_gain" in checked) != ("bn_offset" in checked):
            have, need = (("bn_gain", "bn_offset") if "bn_gain" in checked
                          else ("bn_offset", "bn_gain"))
            raise ArrayFileError(f"{path}: '{layer.name}.{have}' without '{layer.name}.{need}' "
                                 f"(shape {expected[f'{layer.name}.{need}'][0]}); the CBN "
                                 "gain and offset come together or not at all")
        if calibration is not None and layer.cbn and "bn_gain" not in checked:
            raise ArrayFileError(f"{path}: a calibration without '{layer.name}.bn_gain' and "
                                 f"'{layer.name}.bn_offset': the scales were measured with a "
                                 "batch norm the file does not hold (write both with fcircnn "
                                 "calibrate)")
        layers[layer.name] = LayerWeights(checked.get("generators"), checked.get("bn_gain"),
                                          checked.get("bn_offset"), checked.get("weight"),
                                          checked.get("bias"))
    return NetworkWeights(layers, calibration)


def _refuse_bn_without_cbn(net: NetworkConfig, data: Mapping[str, np.ndarray],
                           path: str) -> None:
    """A CBN gain or offset for a layer without CBN would be silently ignored: refuse it."""
    for layer in net.resolved:
        if layer.cbn or not layer.weighted:
            continue
        key = "bn" if layer.dense else "cbn"
        for part in ("bn_gain", "bn_offset"):
            if f"{layer.name}.{part}" in data:
                raise ArrayFileError(f"{path}: '{layer.name}.{part}' for layer {layer.name!r}, "
                                     f"which has no {key.upper()} in network {net.name} ({key}: "
                                     f"false); only layers with {key}: true take bn_gain and "
                                     "bn_offset")


def load_input(net: NetworkConfig, path: str) -> np.ndarray:
    """Read an input clip ``[C, D, H, W]`` of ``net`` from ``.npy``: real, finite, within
    :data:`MAX_INPUT_ABS`.

    Raises
    ------
    ArrayFileError
        Naming the file and what was expected.
    """
    inp = net.input
    return check_array(read_npy(path), f"{path}", (inp.channels, *inp.shape),
                       max_abs=MAX_INPUT_ABS)


#: Most clips a calibration set may hold.
MAX_CALIBRATION_CLIPS = 4096


def load_clips(net: NetworkConfig, path: str) -> np.ndarray:
    """Read a calibration set ``[N, C, D, H, W]`` of ``net`` from ``.npy`` (1 <= N <=
    :data:`MAX_CALIBRATION_CLIPS`): real, finite, within :data:`MAX_INPUT_ABS`.

    Raises
    ------
    ArrayFileError
        Naming the file and what was expected.
    """
    inp = net.input
    clip = (inp.channels, *inp.shape)
    array = read_npy(path)
    if array.ndim != 5 or tuple(array.shape[1:]) != clip:
        raise ArrayFileError(f"{path}: shape {array.shape}, expected clips (N, "
                             f"{', '.join(map(str, clip))}) for network {net.name}")
    if not 1 <= array.shape[0] <= MAX_CALIBRATION_CLIPS:
        raise ArrayFileError(f"{path}: {array.shape[0]} clips, expected 1 to "
                             f"{MAX_CALIBRATION_CLIPS}")
    return check_array(array, path, array.shape, max_abs=MAX_INPUT_ABS)


def random_input(net: NetworkConfig, seed: int = 0) -> np.ndarray:
    """A seeded standard-normal input clip ``[C, D, H, W]``."""
    rng = np.random.default_rng(seed + 1)
    inp = net.input
    return rng.standard_normal((inp.channels, inp.depth, inp.height, inp.width))


@dataclass
class LayerReport:
    """Per-layer figures of a run."""

    name: str
    kind: str
    in_shape: tuple[int, ...]
    out_shape: tuple[int, ...]
    dense_ops: int
    slot_macs: int
    dense_params: int
    circulant_params: int
    errors: dict[str, float] = field(default_factory=dict)
    """``slots``: relative max error vs float; ``int``: SNR in dB vs float."""


@dataclass
class RunResult:
    """Outputs and reports of :func:`run_network`."""

    network: str
    layers: list[LayerReport]
    outputs: dict[str, np.ndarray]
    """Final output per mode, time domain ``[classes, ...]`` (dequantized for ``int``)."""
    slots: dict[str, dict[str, np.ndarray]]
    """Per mode and layer, the output slots (complex; ``int``: dequantized)."""
    int_outputs: dict[str, tuple[np.ndarray, np.ndarray]]
    """Per layer, the integer output parts ``(re, im)`` of the ``int`` mode."""
    int_scales: dict[str, np.ndarray]
    """Per layer, the ``[2, B/2]`` scale of the ``int`` output (key ``""``: the input)."""
    quantized: QuantizedNetwork | None
    """The integer network of the ``int`` mode (``None`` when it did not run)."""
    seconds: dict[str, float]
    weights: NetworkWeights

    @property
    def total_dense_ops(self) -> int:
        return sum(r.dense_ops for r in self.layers)


def _pool_args(layer: ResolvedLayer) -> tuple | None:
    if layer.pool is None:
        return None
    return (layer.pool.window, layer.pool.stride, layer.pool.padding)


def _input_of(layer: ResolvedLayer, outputs: dict, network_input):
    return network_input if layer.input is None else outputs[layer.input]


_MIN_VOXELS_PER_SLOT = 16


def _calibrate_bn(y: np.ndarray, B: int) -> tuple[np.ndarray, np.ndarray]:
    """Gain/offset ``[2, S]`` that normalise each output slot part of ``y`` ``[S, ...]``.

    Statistics are taken per slot over the voxels when there are at least 16 of them; maps
    with fewer voxels (FC layers) pool them per bin over all output blocks instead.
    """
    S = y.shape[0]
    parts = np.stack([y.real, y.imag]).reshape(2, S, -1)
    if parts.shape[2] < _MIN_VOXELS_PER_SLOT:
        half = B // 2
        by_bin = parts.reshape(2, S // half, half, -1).transpose(0, 2, 1, 3).reshape(2, half, -1)
        mean = np.tile(by_bin.mean(axis=2), S // half)
        std = np.tile(by_bin.std(axis=2), S // half)
    else:
        mean = parts.mean(axis=2)
        std = parts.std(axis=2)
    gain = 1.0 / np.where(std > 0, std, 1.0)
    return gain, -mean * gain


def _calibrate_dense_bn(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Gain/offset ``[M]`` that normalise each channel of a time map ``y`` ``[M, ...]``
    (over the whole map, one pair for every channel, when it has fewer than 16 voxels)."""
    flat = y.reshape(y.shape[0], -1)
    if flat.shape[1] < _MIN_VOXELS_PER_SLOT:
        flat = np.broadcast_to(flat.reshape(1, -1), (y.shape[0], flat.size))
    mean, std = flat.mean(axis=1), flat.std(axis=1)
    gain = 1.0 / np.where(std > 0, std, 1.0)
    return gain, -mean * gain


def _lane_params(layer: ResolvedLayer, per_channel: np.ndarray) -> np.ndarray:
    """A per-channel vector ``[M]`` as ``[2, S_out]`` per part and slot of the output layout
    (zero in the parts of ``lane0`` that hold no channel)."""
    xs = timedomain.to_layout(per_channel, layer.out_layout, layer.block_size)
    return np.stack([xs.real, xs.imag])


def _bn(layer: ResolvedLayer, lw: LayerWeights, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The float post stage's gain and offset ``[2, S]`` of ``layer`` on its conv output
    ``y`` (slots in the output layout), its CBN (BN) calibrated on ``y`` when missing."""
    if layer.weighted and layer.cbn and lw.bn_gain is None:
        if layer.dense:
            M = layer.out_channels
            bias = np.zeros(M) if lw.bias is None else lw.bias
            real = timedomain.from_layout(y, layer.out_layout, layer.block_size, M)
            lw.bn_gain, lw.bn_offset = _calibrate_dense_bn(real + bias.reshape(-1, 1, 1, 1))
        else:
            lw.bn_gain, lw.bn_offset = _calibrate_bn(y, layer.block_size)
    return _affine(layer, lw)


def _affine(layer: ResolvedLayer, lw: LayerWeights) -> tuple[np.ndarray, np.ndarray]:
    """The post stage's gain and offset ``[2, S_out]`` of a calibrated ``layer``: its CBN, or
    a dense layer's bias and BN per channel (``t = bn_gain * (y + bias) + bn_offset``); gain
    1 and offset 0 without."""
    S = layer.out_slots
    if not layer.weighted or not (layer.cbn or layer.dense):
        return np.ones((2, S)), np.zeros((2, S))
    if not layer.dense:
        return lw.bn_gain, lw.bn_offset
    M = layer.out_channels
    bias = np.zeros(M) if lw.bias is None else lw.bias
    gain, offset = ((lw.bn_gain, lw.bn_offset) if layer.cbn else (np.ones(M), np.zeros(M)))
    return _lane_params(layer, gain), _lane_params(layer, offset + gain * bias)


def _float_post(
    layer: ResolvedLayer, y: np.ndarray, gain: np.ndarray, offset: np.ndarray,
    res: np.ndarray | None,
) -> np.ndarray:
    """Float CBN, residual and CReLU on each part (everything but the pooling)."""
    col = (slice(None), None, None, None)
    t_re = y.real * gain[0][col] + offset[0][col]
    t_im = y.imag * gain[1][col] + offset[1][col]
    if res is not None:
        t_re = t_re + res.real
        t_im = t_im + res.imag
    if layer.crelu:
        t_re, t_im = spectral.crelu(t_re), spectral.crelu(t_im)
    return t_re + 1j * t_im


def _float_pool(layer: ResolvedLayer, y: np.ndarray) -> np.ndarray:
    pool = _pool_args(layer)
    if pool is None:
        return y
    return spectral.cmaxpool(y.real, *pool) + 1j * spectral.cmaxpool(y.imag, *pool)


def _layer_output(layer: ResolvedLayer, lw: LayerWeights, xs: np.ndarray,
                  mode: Mode) -> np.ndarray:
    """A layer's conv (or global average) output slots, before CBN, in the ``float`` time
    domain or on ``slots``."""
    B = layer.block_size
    if layer.kind == "gap":
        return xs.mean(axis=(1, 2, 3), keepdims=True)
    if layer.kind == "irfft":  # deferred: the slots stay, their meaning changes
        return xs
    if layer.kind == "rfft":
        return timedomain.to_layout(timedomain.from_layout(xs, LANES, B, layer.in_channels),
                                    "slots", B)
    if layer.dense:
        return _dense_output(layer, lw, xs, mode)
    if mode == "float":
        dense = spectral.expand_circulant(lw.generators)
        y_time = spectral.conv3d_dense(spectral.from_slots(xs, B), dense, layer.stride,
                                       layer.padding)
        return spectral.to_slots(y_time, B)
    return spectral.conv3d_slots(xs, spectral.weight_slots(lw.generators), layer.stride,
                                 layer.padding)


def _dense_output(layer: ResolvedLayer, lw: LayerWeights, xs: np.ndarray,
                  mode: Mode) -> np.ndarray:
    """A dense layer's conv output (without its bias) in its output layout: a float64 conv3d
    of the time map (``float``), or its mapping onto the block-circulant datapath
    (``slots``; :mod:`.timedomain`)."""
    B = layer.block_size
    if mode == "float":
        x = timedomain.from_layout(xs, layer.in_layout, B, layer.in_channels)
        y = spectral.conv3d_dense(x, lw.weight, layer.stride, layer.padding)
        return timedomain.to_layout(y, layer.out_layout, B)
    if layer.in_layout == SPREAD:
        return spectral.conv3d_slots(xs, timedomain.lane_weight_slots(lw.weight, B),
                                     layer.stride, layer.padding)
    y = spectral.conv3d_slots(xs, spectral.weight_slots(timedomain.lane0_generators(
        lw.weight, B)), layer.stride, layer.padding)
    return timedomain.to_layout(timedomain.irfft_lane0(y.real, y.imag, B) / B, LANE0, B)


def input_slots(net: NetworkConfig, x: np.ndarray) -> np.ndarray:
    """The network input ``x`` ``[C, D, H, W]`` as the slots the host writes (float): the rfft
    of each block of ``B`` channels, or the ``spread`` a dense first layer reads."""
    first = net.resolved[0]
    layout = SPREAD if first.in_layout == SPREAD else "slots"
    return timedomain.to_layout(np.asarray(x, dtype=np.float64), layout, first.block_size)


def _calibration_pass(net: NetworkConfig, weights: NetworkWeights, clips: Sequence[np.ndarray],
                      progress: Progress | None = None
                      ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Every clip of a calibration set through the float reference.

    CBN parameters still missing are calibrated on the whole set (over every clip's output of
    the layer). Returns the input slots and each layer's pre-pool slots with the clips side by
    side along the depth axis: what the scale statistic is taken over.
    """
    ins = [input_slots(net, c) for c in clips]
    outputs: list[dict[str, np.ndarray]] = [{} for _ in ins]
    prepool: dict[str, np.ndarray] = {}
    layers = net.resolved
    if progress:
        progress("calibration", 0, len(layers))
    for i, layer in enumerate(layers):
        lw = weights.layers[layer.name]
        ys = [_layer_output(layer, lw, _input_of(layer, out, xs), "float")
              for out, xs in zip(outputs, ins, strict=True)]
        gain, offset = _bn(layer, lw, np.concatenate(ys, axis=1))
        posts = []
        for out, y in zip(outputs, ys, strict=True):
            res = None if layer.residual is None else out[layer.residual]
            posts.append(_float_post(layer, y, gain, offset, res))
            out[layer.name] = _float_pool(layer, posts[-1])
        prepool[layer.name] = np.concatenate(posts, axis=1)
        if progress:
            progress("calibration", i + 1, len(layers))
    return np.concatenate(ins, axis=1), prepool


def _float_pass(
    net: NetworkConfig, weights: NetworkWeights, x: np.ndarray, mode: Mode,
    progress: Progress | None,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Float pass in the time domain (``float``) or on slots (``slots``).

    Returns the per-layer output slots and the pre-pool post-CReLU slots used for calibration.
    """
    layers = net.resolved
    if progress:
        progress(mode, 0, len(layers))
    xs_in = input_slots(net, x)
    outputs: dict[str, np.ndarray] = {}
    prepool: dict[str, np.ndarray] = {}
    for i, layer in enumerate(layers):
        lw = weights.layers[layer.name]
        y = _layer_output(layer, lw, _input_of(layer, outputs, xs_in), mode)
        gain, offset = _bn(layer, lw, y)
        res = None if layer.residual is None else outputs[layer.residual]
        # Calibration needs the values that are quantized: after CReLU, before pooling
        # (pooling is a max per part, so it never raises the peak).
        prepool[layer.name] = _float_post(layer, y, gain, offset, res)
        outputs[layer.name] = _float_pool(layer, prepool[layer.name])
        if progress:
            progress(mode, i + 1, len(layers))
    return outputs, prepool


@dataclass(frozen=True)
class IntMap:
    """An integer feature map: int slot parts ``re``/``im`` ``[S, D, H, W]`` and its ``[2, B/2]``
    scale (``value ~ part * scale``)."""

    re: np.ndarray
    im: np.ndarray
    scale: np.ndarray


class LayerOverflowError(OverflowError):
    """A layer's folded post parameters do not fit their fields; ``layer`` names it."""

    def __init__(self, layer: str, message: str) -> None:
        super().__init__(f"layer {layer!r}: {message}")
        self.layer = layer


@dataclass(frozen=True)
class QuantizedLayer:
    """Everything the integer contract needs for one layer (what a compiler writes to DDR).

    ``wq_re``/``wq_im``: int weight slots ``[P, Q, B/2, *K]`` in ``[-127, 127]`` (``None`` for
    global average pooling, which sums its input over the voxels). ``post``: the folded
    ``mult``/``bias``/``shift``/``res_mult`` per part and output slot. Scales are ``[2, B/2]``:
    ``in_scale`` of the input map, ``w_scale`` of the weights, ``acc_scale`` of the
    accumulator, ``out_scale`` of the int8 output. ``acc_bound`` is the proved ``|acc|`` bound.
    """

    name: str
    wq_re: np.ndarray | None
    wq_im: np.ndarray | None
    post: quant.PostParams
    in_scale: np.ndarray
    w_scale: np.ndarray | None
    acc_scale: np.ndarray
    out_scale: np.ndarray
    acc_bound: int


@dataclass(frozen=True)
class QuantizedNetwork:
    """The integer network: input quantization and every layer's :class:`QuantizedLayer`."""

    input_scale: np.ndarray
    layers: dict[str, QuantizedLayer]

    def quantize_input(self, net: NetworkConfig, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Host side: an input clip as int slot parts: padded, rfft per block and quantized,
        or spread for a dense first layer (:func:`input_slots`)."""
        return quant.quantize_slots(input_slots(net, x), self.input_scale)


def measure_calibration(
    net: NetworkConfig, input_slots: np.ndarray, reference_prepool: dict[str, np.ndarray],
    granularity: quant.Granularity = "tensor", statistic: str = "max", clips: int = 1,
) -> Calibration:
    """The int8 scales of ``net`` measured on a float pass: max-abs (or the ``statistic``'s
    percentile of the magnitudes) over ``input_slots`` (the network input) and over each
    layer's float reference after CReLU and before pooling (``reference_prepool``), the
    ``clips`` of a calibration set side by side."""
    percentile = quant.calibration_percentile(statistic)
    input_scale = quant.slot_scales(input_slots, net.resolved[0].block_size, granularity,
                                    percentile)
    scales: dict[str | None, np.ndarray] = {None: input_scale}
    for layer in net.resolved:
        if layer.kind == "irfft":  # deferred: the map passes unchanged
            scales[layer.name] = scales[layer.input]
            continue
        # a time-domain map has one scale (the rfft sums its lanes, a lane0 map is a vector)
        scales[layer.name] = quant.slot_scales(
            reference_prepool[layer.name], layer.block_size,
            "tensor" if layer.out_layout in (LANES, LANE0) else granularity, percentile)
    out = {name: s for name, s in scales.items() if name is not None}
    return Calibration(input_scale, out, granularity, statistic, clips)


def quantize_network(
    net: NetworkConfig, weights: NetworkWeights, input_slots: np.ndarray,
    reference_prepool: dict[str, np.ndarray], granularity: quant.Granularity = "tensor",
    statistic: str = "max",
) -> QuantizedNetwork:
    """Quantize weights and fold CBN, residual and scales, layer by layer, with the scales
    :func:`measure_calibration` takes from ``input_slots`` and ``reference_prepool``; CBN
    must be calibrated already for layers that have it.

    Raises
    ------
    LayerOverflowError
        Naming the layer whose multiplier, bias or worst-case ``t`` does not fit.
    """
    calibration = measure_calibration(net, input_slots, reference_prepool, granularity,
                                      statistic)
    return quantize_calibrated(net, weights, calibration)


def quantize_calibrated(net: NetworkConfig, weights: NetworkWeights,
                        calibration: Calibration) -> QuantizedNetwork:
    """Quantize weights (at the calibration's granularity) and fold CBN, residual and the
    ``calibration``'s scales, layer by layer.

    Raises
    ------
    LayerOverflowError
        Naming the layer whose multiplier, bias or worst-case ``t`` does not fit.
    """
    granularity = calibration.granularity
    scales: dict[str | None, np.ndarray] = {None: calibration.input_scale}
    layers: dict[str, QuantizedLayer] = {}
    for layer in net.resolved:
        lw = weights.layers[layer.name]
        in_scale = scales[layer.input]
        out_scale = calibration.out_scales[layer.name]
        S = layer.out_slots
        gain, offset = _affine(layer, lw)
        wq_re = wq_im = w_scale = None
        if layer.kind == "gap":
            voxels = int(np.prod(layer.in_shape))
            acc_scale = in_scale / voxels
            acc_bound = spectral.INT8_MAX * voxels
        elif layer.kind == "rfft":  # v = lanes x twiddles: the lanes' scale over 2**14
            acc_scale = in_scale / 2**RFFT_FRACTION_BITS
            acc_bound = layer.block_size * spectral.INT8_MAX * 2**RFFT_FRACTION_BITS
        elif layer.kind == "irfft":  # deferred: the map passes unchanged
            acc_scale, acc_bound = in_scale, spectral.INT8_MAX
        else:
            (wq_re, wq_im), w_scale, acc_scale = _quantized_weights(layer, lw, in_scale,
                                                                    granularity)
            acc_bound = layer.accumulator_bound
        res_scale = None if layer.residual is None else scales[layer.residual]
        try:
            if layer.kind == "rfft":  # one shift, the multipliers per slot position
                post = quant.fold_uniform(acc_scale, out_scale, acc_bound, S)
            else:
                post = quant.fold_post(gain, offset, acc_scale, out_scale, acc_bound, res_scale)
        except OverflowError as exc:
            raise LayerOverflowError(layer.name, str(exc)) from None
        layers[layer.name] = QuantizedLayer(layer.name, wq_re, wq_im, post, in_scale, w_scale,
                                            acc_scale, out_scale, acc_bound)
        scales[layer.name] = out_scale
    return QuantizedNetwork(calibration.input_scale, layers)


def _quantized_weights(layer: ResolvedLayer, lw: LayerWeights, in_scale: np.ndarray,
                       granularity: quant.Granularity
                       ) -> tuple[tuple[np.ndarray, np.ndarray], np.ndarray, np.ndarray]:
    """``((wq_re, wq_im), w_scale, acc_scale)`` of a conv or fc layer: its weight slots as
    the datapath multiplies them (:mod:`.timedomain` for a dense layer) quantized, and the
    scale of what the post stage takes (a ``lane0`` layer's lane-0 sum).

    A ``lane0`` layer sums every part of a block's accumulators, so they must share one
    scale ``S``: bin ``(part, k)`` of the weights gets the scale ``S / in_scale[part, k]``,
    ``S`` the smallest that keeps every weight within +-127.
    """
    B = layer.block_size
    if not layer.dense:
        ws = spectral.weight_slots(lw.generators)
    elif layer.in_layout == SPREAD:
        ws = timedomain.lane_weight_slots(lw.weight, B)
    else:
        ws = spectral.weight_slots(timedomain.lane0_generators(lw.weight, B))
    if layer.out_layout != LANE0:
        w_scale = quant.weight_scales(ws, granularity)
        return quant.quantize_slots(ws, w_scale, axis=2), w_scale, w_scale * in_scale
    peak = quant.weight_scales(ws, "bin") * spectral.INT8_MAX  # a zero part: any scale
    common = max(float((peak * in_scale).max()) / spectral.INT8_MAX, quant.TINY)
    w_scale = common / in_scale
    return (quant.quantize_slots(ws, w_scale, axis=2), w_scale,
            np.full_like(in_scale, common / B))


def run_int(
    net: NetworkConfig, qnet: QuantizedNetwork, xq: tuple[np.ndarray, np.ndarray],
    progress: Progress | None = None,
) -> dict[str, IntMap]:
    """Execute the integer contract layer by layer (no float arithmetic).

    ``xq`` is the quantized input (:meth:`QuantizedNetwork.quantize_input`). Returns every
    layer's output by name, and the input under the key ``""``.
    """
    q_in = IntMap(*xq, qnet.input_scale)
    outputs: dict[str, IntMap] = {"": q_in}
    layers = net.resolved
    if progress:
        progress("int", 0, len(layers))
    for i, layer in enumerate(layers):
        src = _input_of(layer, outputs, q_in)
        ql = qnet.layers[layer.name]
        if layer.kind == "irfft":  # deferred to the dense layer that reads it
            outputs[layer.name] = IntMap(src.re, src.im, ql.out_scale)
            if progress:
                progress("int", i + 1, len(layers))
            continue
        if layer.kind == "gap":
            acc_re = src.re.sum(axis=(1, 2, 3), keepdims=True)
            acc_im = src.im.sum(axis=(1, 2, 3), keepdims=True)
        elif layer.kind == "rfft":
            acc_re, acc_im = timedomain.rfft_int(src.re, src.im, layer.block_size)
        else:
            acc_re, acc_im = spectral.conv3d_slots_int(
                src.re, src.im, ql.wq_re, ql.wq_im, layer.stride, layer.padding)
            if layer.out_layout == LANE0:
                acc_re, acc_im = _lane0(layer, acc_re, acc_im)
        res = None if layer.residual is None else outputs[layer.residual]
        parts = []
        for c, acc in enumerate((acc_re, acc_im)):
            res_part = None if res is None else (res.re, res.im)[c]
            parts.append(spectral.post_process(
                acc, **ql.post.part(c), res=res_part, relu=layer.crelu, pool=_pool_args(layer)))
        outputs[layer.name] = IntMap(parts[0], parts[1], ql.out_scale)
        if progress:
            progress("int", i + 1, len(layers))
    return outputs


def _lane0(layer: ResolvedLayer, acc_re: np.ndarray,
           acc_im: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The accumulators of a ``lane0`` layer as its post stage takes them: each block's
    lane-0 sum (:func:`~.timedomain.irfft_lane0`) in its first part, zero elsewhere."""
    re = np.zeros_like(acc_re)
    re[:: layer.block_size // 2] = timedomain.irfft_lane0(acc_re, acc_im, layer.block_size)
    return re, np.zeros_like(acc_im)


def _rel_error(ref: np.ndarray, got: np.ndarray) -> float:
    peak = np.abs(ref).max()
    return float(np.abs(got - ref).max() / peak) if peak > 0 else float(np.abs(got).max())


def snr_db(ref: np.ndarray, got: np.ndarray) -> float:
    """Signal-to-noise ratio of ``got`` against the reference ``ref`` in dB: ``inf`` when they
    are equal (an all-zero reference too), ``-inf`` when ``ref`` is all zero and ``got`` is
    not (undefined: there is no signal to compare with)."""
    noise = np.sum(np.abs(got - ref) ** 2)
    signal = np.sum(np.abs(ref) ** 2)
    if noise == 0:
        return float("inf")
    if signal == 0:
        return float("-inf")
    return float(10 * np.log10(signal / noise))


def _to_time(net: NetworkConfig, slots: np.ndarray) -> np.ndarray:
    last = net.resolved[-1]
    return timedomain.from_layout(slots, last.out_layout, last.block_size, last.out_channels)


def calibrate(
    net: NetworkConfig,
    *,
    weights: NetworkWeights | None = None,
    x: np.ndarray | None = None,
    seed: int = 0,
    granularity: quant.Granularity = "tensor",
    clips: Sequence[np.ndarray] | None = None,
    statistic: str = "max",
    progress: Progress | None = None,
) -> tuple[NetworkWeights, QuantizedNetwork]:
    """The float weights as used and the integer network whose execution :func:`run_network`'s
    ``int`` mode performs: what a compiler needs.

    The int8 scales are, in this order: measured on the calibration set ``clips``; the
    calibration stored with ``weights``; or measured on ``x`` alone. CBN parameters still
    missing are calibrated on the same data (and set in ``weights``). The weights returned
    carry the calibration used (:meth:`NetworkWeights.save` stores it). Defaults as in
    :func:`run_network`; ``progress`` is called per layer of the float pass over ``x`` (with
    a set, as ``("calibration", done, total)``).
    """
    weights = random_weights(net, seed) if weights is None else weights
    if clips is None and weights.calibration is not None:
        return weights, quantize_calibrated(net, weights, weights.calibration)
    x = random_input(net, seed) if x is None else np.asarray(x, dtype=np.float64)
    calibration = measure_calibration(net, *_calibration(net, weights, x, clips, progress),
                                      granularity, statistic, 1 if clips is None else len(clips))
    weights = NetworkWeights(weights.layers, calibration)
    return weights, quantize_calibrated(net, weights, calibration)


def _calibration(net: NetworkConfig, weights: NetworkWeights, x: np.ndarray,
                 clips: Sequence[np.ndarray] | None, progress: Progress | None = None
                 ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Input slots and pre-pool slots the scales are taken over: of ``x`` alone, or of the
    calibration set ``clips`` (:func:`_calibration_pass`)."""
    if clips is not None:
        return _calibration_pass(net, weights, clips, progress)
    _, prepool = _float_pass(net, weights, x, "float", progress)
    return input_slots(net, x), prepool


def class_scores_problem(net: NetworkConfig) -> str | None:
    """Why ``net``'s output is not a vector of class scores, or ``None``: its last layer must
    output ``classes`` channels on a 1x1x1 map (an fc layer, a global average pool, or a conv
    whose map ends 1x1x1). A network ending in a larger map still runs (``golden``,
    ``compile``, ``sim``), but it has no class scores to rank."""
    last = net.resolved[-1]
    if last.out_shape == (1, 1, 1):
        return None
    return (f"network {net.name} has no class scores: its last layer {last.name!r} outputs "
            f"{last.out_channels} channels on a {fmt3(last.out_shape)} map, not on 1x1x1 "
            "(end the network with an fc or gap layer)")


def calibration_problem(clips: np.ndarray) -> str | None:
    """Why the calibration set ``clips`` cannot calibrate int8 scales, or ``None``: every
    value zero (or below the smallest normal float, 2.2e-308) leaves every activation scale
    undefined, and the clips run later would saturate at +-127."""
    if np.any(np.abs(clips) >= np.finfo(np.float64).tiny):
        return None
    return ("every value is 0 (or below 2.2e-308): it cannot calibrate the int8 scales; give "
            "clips like the network's input")


def run_network(
    net: NetworkConfig,
    modes: Iterable[Mode] = MODES,
    *,
    weights: NetworkWeights | None = None,
    x: np.ndarray | None = None,
    seed: int = 0,
    granularity: quant.Granularity = "tensor",
    progress: Progress | None = None,
    clips: Sequence[np.ndarray] | None = None,
    statistic: str = "max",
) -> RunResult:
    """Run a network in the requested modes and report per layer.

    Parameters
    ----------
    net : NetworkConfig
        Validated network.
    modes : iterable of ``"float"``, ``"slots"``, ``"int"``
        Modes to run; the ``float`` reference always runs (it is what the others are
        compared with, and it calibrates CBN and the int8 scales).
    weights : NetworkWeights, optional
        Default: :func:`random_weights` with ``seed``. Missing CBN parameters are calibrated.
    x : ndarray ``[C, D, H, W]``, optional
        Input clip; default :func:`random_input` with ``seed``.
    granularity : ``"tensor"`` or ``"bin"``
        Scale granularity of activations and weights in the ``int`` mode.
    progress : callable, optional
        ``progress(mode, layers_done, layers_total)``.
    clips : sequence of ndarray ``[C, D, H, W]``, optional
        Calibration set of the ``int`` mode: missing CBN parameters and the int8 scales come
        from these clips (default: the calibration stored with ``weights``, else ``x``
        alone).
    statistic : str
        What the int8 scales are taken from over the calibration data: ``"max"`` (default) or
        a percentile ``"pQ"`` of the magnitudes (:func:`~fcircnn.models.quant
        .calibration_percentile`); values above it saturate.
    """
    quant.calibration_percentile(statistic)  # refuse a bad statistic before any work
    modes = tuple(dict.fromkeys(("float", *modes)))
    for mode in modes:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    weights = random_weights(net, seed) if weights is None else weights
    inp = net.input
    expected = (inp.channels, inp.depth, inp.height, inp.width)
    x = random_input(net, seed) if x is None else np.asarray(x, dtype=np.float64)
    if x.shape != expected:
        raise ValueError(f"input has shape {x.shape}, the network expects {expected}")

    seconds: dict[str, float] = {}
    slots: dict[str, dict[str, np.ndarray]] = {}
    calibration = None if clips is None else _calibration_pass(net, weights, clips)
    start = time.perf_counter()
    slots["float"], prepool = _float_pass(net, weights, x, "float", progress)
    seconds["float"] = time.perf_counter() - start
    if "slots" in modes:
        start = time.perf_counter()
        slots["slots"], _ = _float_pass(net, weights, x, "slots", progress)
        seconds["slots"] = time.perf_counter() - start
    int_outputs: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    int_scales: dict[str, np.ndarray] = {}
    qnet = None
    if "int" in modes:
        if calibration is not None:
            qnet = quantize_network(net, weights, *calibration, granularity, statistic)
        elif weights.calibration is not None:
            qnet = quantize_calibrated(net, weights, weights.calibration)
        else:
            qnet = quantize_network(net, weights, input_slots(net, x), prepool, granularity,
                                    statistic)
        start = time.perf_counter()
        ints = run_int(net, qnet, qnet.quantize_input(net, x), progress)
        seconds["int"] = time.perf_counter() - start
        slots["int"] = {
            name: quant.dequantize_slots(t.re, t.im, t.scale) for name, t in ints.items() if name
        }
        int_outputs = {name: (t.re, t.im) for name, t in ints.items() if name}
        int_scales = {name: t.scale for name, t in ints.items()}

    reports = []
    for layer in net.resolved:
        ref = slots["float"][layer.name]
        errors = {}
        if "slots" in slots:
            errors["slots"] = _rel_error(ref, slots["slots"][layer.name])
        if "int" in slots:
            errors["int"] = snr_db(ref, slots["int"][layer.name])
        half = layer.block_size // 2
        slot_macs = (  # the datapath's: a dense layer in its mapping (.timedomain)
            0 if not layer.weighted
            else (layer.out_slots // half) * (layer.in_slots // half) * half
            * int(np.prod(layer.kernel)) * int(np.prod(layer.conv_shape))
        )
        reports.append(LayerReport(
            name=layer.name, kind=layer.kind,
            in_shape=(layer.in_channels, *layer.in_shape),
            out_shape=(layer.out_channels, *layer.out_shape),
            dense_ops=layer.dense_ops, slot_macs=slot_macs,
            dense_params=layer.dense_params, circulant_params=layer.circulant_params,
            errors=errors,
        ))
    last = net.resolved[-1].name
    outputs = {mode: _to_time(net, slots[mode][last]) for mode in slots}
    return RunResult(net.name, reports, outputs, slots, int_outputs, int_scales, qnet, seconds,
                     weights)


def run_memory_bytes(net: NetworkConfig, modes: Iterable[Mode] = MODES, clips: int = 0) -> int:
    """An upper estimate of the memory :func:`run_network` needs, in bytes.

    Every pass keeps each layer's output and pre-pool slots (complex128, 8 bytes per channel
    and voxel); the float reference also expands each layer's weights to dense ones; a layer's
    conv holds its padded input, its output and an im2col buffer of at least one output plane
    (``spectral``'s column budget above that); a calibration set of ``clips`` clips keeps
    every clip's maps once more. Used to refuse up front a run the machine
    cannot hold (``fcircnn golden``, ``compile``), rather than fail in the middle of it.
    """
    passes = len(set(("float", *modes))) + clips
    kept = transient = 0
    for layer in net.resolved:
        out_cv = 2 * layer.out_slots * math.prod(layer.conv_shape)
        kept += passes * 8 * (out_cv + 2 * layer.out_slots * math.prod(layer.out_shape))
        if not layer.weighted:
            continue
        n, m = 2 * layer.in_slots, 2 * layer.out_slots
        kvol = layer.kernel_volume
        pad_in = n * math.prod(i + 2 * p for i, p in zip(layer.in_shape, layer.padding,
                                                          strict=True))
        plane = n * kvol * math.prod(layer.conv_shape[1:])
        dense = m * n * kvol  # the float reference's expanded weights
        transient = max(transient, 8 * (3 * pad_in + 3 * out_cv + dense
                                         + max(plane, spectral._COL_BUDGET // 8)))
    weights = sum(8 * math.prod(shape) for shape, _ in weight_arrays(net).values())
    return kept + transient + 2 * weights
