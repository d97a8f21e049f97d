"""Importer of checkpoints of the paper's public training code into a weights file.

The code (``Reconfigurable-Computing/Compress-C3D-With-Block-Circulant-Matrix``, PyTorch)
trains ``SpectralCirC3D`` (``network/SpectralCirC3D.py``: network file ``spectral_c3d.yaml``,
which describes it exactly). Its ``train.py`` wraps the model in ``torch.nn.DataParallel`` and
saves ``{"model_state_dict", "optimizer_state_dict", "acc", "epoch"}``: the model's state dict
is taken, and the ``module.`` prefix that ``DataParallel`` and ``DistributedDataParallel`` put
on every key is dropped (:func:`load_checkpoint` says so). Its layers map onto the
accelerator's contract by name, ``<layer>`` of the network file being the checkpoint's module
(``conv1``, ``conv2``, ``conv3a``, ..., ``fc``), with these conventions:

Block-circulant conv (``QSpatialCirConv``, ``SpatialCirConv``, ``BlockCirConv3d``)
    ``<layer>.weight`` ``[M/B, N/B, B, K, K, K]``: the generators. The code expands block
    ``(p, q)`` as ``dense[p*B + r, q*B + c] = weight[p, q, (r - c) mod B]`` (``torch.cat`` of
    the generator rolled by ``c``), the first column being the generator: the same as
    docs/contract.md section 3, so the generators are taken as they are. Its FFT is
    ``torch.fft.rfft`` with the default normalisation (unnormalised forward), as ours. A
    ``<layer>.bias`` (per output channel, time domain) adds ``rfft(bias)`` to every voxel's
    bins: it folds exactly into the CBN offset. The fake-quantisation buffers (``scale_w_r``,
    ``scale_w_i``, ``scale_a_r``, ``scale_a_i``: separate real and imaginary scales, which an
    integer complex MAC cannot sum exactly) are not taken (:data:`FAKE_QUANT_NOTE`).
Frequency-domain batch norm (``SBN``: ``bn<n>.bn_real``, ``bn<n>.bn_imag``)
    ``BatchNorm3d`` over the real and over the imaginary parts of ``(M/B)*(B/2 + 1)`` bins,
    feature ``q*(B/2 + 1) + k`` for bin ``k`` of block ``q``. In eval mode each is
    ``gain * x + offset`` with ``gain = weight / sqrt(running_var + eps)`` and
    ``offset = bias - running_mean * gain``: the CBN of the contract, per slot part. The slot
    packing puts bin 0's real part in slot 0's real part and bin ``B/2``'s real part in slot
    0's imaginary part (their imaginary parts are zero and irfft drops them), bin ``k`` in
    slot ``k`` otherwise.
Dense layers of the network file (``dense: true``: the stem's ``nn.Conv3d``, the head's
``nn.Linear``)
    Taken exactly: ``<layer>.weight`` (a ``Linear``'s ``[M, C*D*H*W]`` as ``[M, C, D, H, W]``,
    PyTorch's flatten order), ``<layer>.bias``, and the ``BatchNorm3d`` ``bn<suffix>`` as the
    per-channel ``bn_gain = weight / sqrt(running_var + eps)`` and ``bn_offset = bias -
    running_mean * bn_gain``.
Time-domain layers of the checkpoint on block-circulant layers of the network file
    A dense weight is projected onto the nearest block-circulant one
    (:func:`~.spectral.project_circulant`; the relative error is reported). A time-domain
    batch norm's shift is exact in the frequency domain (``rfft`` of the per-channel shift);
    its scale is per channel, which no per-bin gain represents unless it is constant within a
    block: the gain of each block is the mean of its channels' scales, and the relative spread
    is reported. A time-domain ReLU and max pool become the CReLU and CMaxPool of the network
    file: a change of domain the report names. These layers are therefore approximations, to
    be fine-tuned or checked (``fcircnn run``); a network file with dense layers for them
    (``spectral_c3d.yaml``) takes them exactly instead.

The batch norm of a layer is looked up as ``bn<suffix>`` where ``<suffix>`` follows ``conv`` in
the layer's name (``conv3a`` -> ``bn3a``), as in the training code.
"""

from __future__ import annotations

import itertools
import math
import os
import warnings
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from .config import NetworkConfig, ResolvedLayer
from .files import ArrayFileError, check_array, check_input_file, read_npz
from .network import MAX_WEIGHT_ABS, LayerWeights, NetworkWeights
from .spectral import expand_circulant, project_circulant

__all__ = ["FAKE_QUANT_NOTE", "Checkpoint", "CheckpointError", "LayerImport", "import_state_dict",
           "load_checkpoint", "read_checkpoint", "strip_parallel_prefix"]

#: ``BatchNorm3d``'s default ``eps``, which the training code keeps.
BN_EPS = 1e-5
#: Keys of a checkpoint that carry no weights of the contract (optimizer and fake-quantisation
#: state, batch counters).
_FAKE_QUANT_SUFFIXES = (".scale_w_r", ".scale_w_i", ".scale_a_r", ".scale_a_i")
_IGNORED_SUFFIXES = (".num_batches_tracked", *_FAKE_QUANT_SUFFIXES)
#: What replaces the training code's fake-quantisation scales (``bench/README.md`` measures the
#: difference against its own fake-quantised forward).
FAKE_QUANT_NOTE = (
    "the fake-quantisation scales (scale_w_r/_i, scale_a_r/_i) are not taken: the integer "
    "contract gives the real and imaginary parts of a slot one scale, because its complex MAC "
    "sums products of both; the weights' scales follow the same rule as theirs (the largest "
    "magnitude over 127, the two parts sharing the larger), the activations' are calibrated "
    "on clips (`--calibration`), where theirs are a running average of the training batches' "
    "maxima")
#: The prefix ``torch.nn.DataParallel`` and ``DistributedDataParallel`` give every key.
_PARALLEL_PREFIX = "module."


@dataclass(frozen=True)
class LayerImport:
    """How one layer was imported: ``how`` names what was taken; ``error`` is the relative
    error of an approximation (0 when exact)."""

    name: str
    how: str
    error: float = 0.0


class CheckpointError(ValueError):
    """A checkpoint that does not fit the network; the message names the key and the expected
    shape."""


#: Suffixes of PyTorch checkpoints (any case), for files whose content does not tell.
_TORCH_SUFFIXES = (".pth", ".pt", ".ckpt", ".bin", ".tar")


def _is_torch_file(path: str) -> bool:
    """Whether ``path`` is a ``torch.save`` file: a zip archive with a ``data.pkl`` member
    (``<archive>/data.pkl``), or a legacy pickle; by the suffix when the content does not tell
    (a damaged zip). An ``.npz`` is a zip archive of ``.npy`` members."""
    with open(path, "rb") as f:
        head = f.read(2)
    if head.startswith(b"PK"):
        try:
            with zipfile.ZipFile(path) as z:
                return any(n == "data.pkl" or n.endswith("/data.pkl") for n in z.namelist())
        except (zipfile.BadZipFile, OSError):
            pass
    elif head.startswith(b"\x80"):  # pickle protocol 2+: torch's legacy format
        return True
    return path.lower().endswith(_TORCH_SUFFIXES)


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint's state dict and what reading it did that its user should know (``notes``:
    the training checkpoint's other entries left)."""

    state: Mapping[str, np.ndarray]
    notes: tuple[str, ...] = ()


def strip_parallel_prefix(state: Mapping[str, np.ndarray]
                          ) -> tuple[Mapping[str, np.ndarray], str | None]:
    """``state`` without the ``module.`` prefix ``DataParallel`` gives every key, and a note
    saying so (``None`` when not every key has it)."""
    keys = [k for k in state if isinstance(k, str)]
    if not keys or len(keys) != len(state) or not all(k.startswith(_PARALLEL_PREFIX)
                                                       for k in keys):
        return state, None
    n = len(_PARALLEL_PREFIX)
    note = (f"dropped the prefix '{_PARALLEL_PREFIX}' of every key (a model saved inside "
            "torch.nn.DataParallel or DistributedDataParallel)")
    return {k[n:]: v for k, v in state.items()}, note


def load_checkpoint(path: str | os.PathLike[str]) -> Checkpoint:
    """:func:`read_checkpoint` with a note of a training checkpoint's entries that were left.

    Raises
    ------
    ArrayFileError
        As :func:`read_checkpoint`.
    """
    notes: list[str] = []
    return Checkpoint(read_checkpoint(path, notes), tuple(notes))


def read_checkpoint(path: str | os.PathLike[str],
                    notes: list[str] | None = None) -> Mapping[str, np.ndarray]:
    """The state dict of a checkpoint: an ``.npz`` of its arrays, or a file of ``torch.save``
    of the training code (``{"model_state_dict": ..., "optimizer_state_dict": ..., "acc": ...,
    "epoch": ...}`` as its ``train.py`` saves it, or the state dict itself; needs PyTorch),
    told apart by their content whatever the suffix. With ``notes``, a line is appended there
    naming the entries of a training checkpoint that were left.

    Floating tensors of any precision (bfloat16, float16, ...) are read as float32 or wider;
    values that are not tensors are left out.

    Raises
    ------
    ArrayFileError
        Naming the file: it cannot be read, is not a state dict, holds a quantized, sparse or
        meta tensor (named), or is a PyTorch checkpoint and PyTorch is not installed.
    """
    path = os.fspath(path)
    check_input_file(path, "a checkpoint (.npz or PyTorch)")
    if not _is_torch_file(path):
        return read_npz(path)
    try:
        import torch
    except ImportError:
        raise ArrayFileError(f"{path}: a PyTorch checkpoint needs PyTorch installed; or save "
                             "its state dict as .npz: numpy.savez(path, **{k: v.numpy() for "
                             "k, v in state_dict.items()})") from None
    try:
        with warnings.catch_warnings():  # torch warns of deprecated tensor kinds on load
            warnings.simplefilter("ignore")
            state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise ArrayFileError(f"{path}: not a PyTorch checkpoint, or a damaged one (torch.load: "
                             f"{_reason(exc)})") from None
    if isinstance(state, dict):  # a training checkpoint: the model's state dict inside
        for wrapper in ("model_state_dict", "state_dict"):
            if isinstance(state.get(wrapper), Mapping):
                others = [f"{k} = {v!r}" if isinstance(v, int | float) else str(k)
                          for k, v in state.items() if k != wrapper]
                if notes is not None and others:
                    notes.append(f"took '{wrapper}'; left {', '.join(others)}")
                state = state[wrapper]
                break
    if not isinstance(state, Mapping):
        raise ArrayFileError(f"{path}: not a state dict")
    arrays = {k: _tensor_array(torch, v, f"{path}: {k!r}") for k, v in state.items()
              if isinstance(v, torch.Tensor)}
    if not arrays:
        keys = ", ".join(repr(k) for k in list(state)[:5]) or "none"
        raise ArrayFileError(f"{path}: holds no tensors (its keys: {keys}); a state dict "
                             "maps parameter names to tensors (torch.save(model.state_dict(), "
                             "path))")
    return arrays


def _reason(exc: Exception) -> str:
    """The first line of ``exc``'s message (torch's run to paragraphs; for a refused pickle,
    the unpickler's own line), or what an empty message means."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if isinstance(exc, KeyError | OSError) or (lines and lines[0].isdigit()):
        lines = [f"{type(exc).__name__} {lines[0] if lines else ''}".strip()]
    if not lines:
        return ("the file ends early (empty or truncated)" if isinstance(exc, EOFError)
                else type(exc).__name__)
    first = lines[0]
    if first.startswith("Weights only load failed"):
        after = [b for a, b in itertools.pairwise(lines) if a.endswith("Unpickler error:")]
        first = ("it holds Python objects other than tensors, which are not loaded (only "
                 f"weights are){': ' + after[0] if after else ''}")
    return first if len(first) <= 200 else first[:197] + "..."


def _tensor_array(torch, tensor, where: str) -> np.ndarray:
    """A tensor of a state dict as an array: floating ones as float32 or wider, quantized,
    sparse and meta tensors refused (``where`` names the file and key)."""
    if tensor.is_meta:
        raise ArrayFileError(f"{where}: a meta tensor, which holds no values (saved from a "
                             "model on the meta device); save the trained model's weights")
    if tensor.is_quantized:
        raise ArrayFileError(f"{where}: a quantized tensor ({tensor.dtype}); save the float "
                             "weights (tensor.dequantize())")
    if tensor.layout != torch.strided:
        raise ArrayFileError(f"{where}: a sparse tensor ({tensor.layout}); save it dense "
                             "(tensor.to_dense())")
    tensor = tensor.detach().cpu()
    if tensor.is_floating_point() and tensor.dtype not in (torch.float32, torch.float64):
        tensor = tensor.float()  # bfloat16, float16, float8: exact in float32
    elif tensor.is_complex() and tensor.dtype not in (torch.complex64, torch.complex128):
        tensor = tensor.to(torch.complex64)
    try:
        return tensor.numpy()
    except (TypeError, RuntimeError) as exc:
        raise ArrayFileError(f"{where}: a tensor of {tensor.dtype}, which has no NumPy "
                             f"equivalent ({_reason(exc)})") from None


def _take(state: Mapping[str, np.ndarray], used: set[str], key: str,
          shape: tuple[int, ...]) -> np.ndarray:
    if key not in state:
        raise CheckpointError(f"missing key '{key}' of shape {shape}")
    used.add(key)
    return check_array(np.asarray(state[key]), f"'{key}'", shape, max_abs=MAX_WEIGHT_ABS)


def _bn_name(layer: ResolvedLayer) -> str:
    return "bn" + (layer.name[4:] if layer.name.startswith("conv") else layer.name)


def _bn_scale(p: Mapping[str, np.ndarray], prefix: str) -> np.ndarray:
    """``weight / sqrt(running_var + eps)`` of the batch norm ``prefix`` (arrays ``p``), after
    checking every variance is above ``-eps`` (a negative variance is a damaged checkpoint)."""
    var = p["running_var"] + BN_EPS
    bad = np.flatnonzero(var <= 0)
    if bad.size:
        i = int(bad[0])
        raise CheckpointError(f"'{prefix}.running_var': {bad.size} value(s) <= -eps "
                              f"(-{BN_EPS:g}), the first at index {i}: "
                              f"{p['running_var'].flat[i]:g}; a variance is >= 0 (a damaged "
                              "checkpoint?)")
    return p["weight"] / np.sqrt(var)


def _spectral_bn(state, used, prefix: str, layer: ResolvedLayer) -> tuple[np.ndarray, ...]:
    """``SBN`` -> CBN gain and offset ``[2, M/2]`` (slot packing, module docstring)."""
    B = layer.block_size
    P, bins = layer.padded_out_channels // B, B // 2 + 1
    parts = []
    for part in ("bn_real", "bn_imag"):
        p = {f: _take(state, used, f"{prefix}.{part}.{f}", (P * bins,)).reshape(P, bins)
             for f in ("weight", "bias", "running_mean", "running_var")}
        gain = _bn_scale(p, f"{prefix}.{part}")
        parts.append((gain, p["bias"] - p["running_mean"] * gain))
    (g_re, o_re), (g_im, o_im) = parts
    gain, offset = np.empty((2, P, B // 2)), np.empty((2, P, B // 2))
    gain[0], offset[0] = g_re[:, : B // 2], o_re[:, : B // 2]  # bins 0..B/2-1, real parts
    gain[1], offset[1] = g_im[:, : B // 2], o_im[:, : B // 2]
    gain[1, :, 0], offset[1, :, 0] = g_re[:, B // 2], o_re[:, B // 2]  # bin B/2 real -> slot 0 im
    return gain.reshape(2, -1), offset.reshape(2, -1)


def _bins_of(vector: np.ndarray, B: int) -> np.ndarray:
    """A per-channel vector ``[M']`` as packed slots ``[2, M'/2]`` (``rfft`` per block)."""
    spec = np.fft.rfft(vector.reshape(-1, B), axis=1)
    out = np.empty((2, spec.shape[0], B // 2))
    out[0], out[1] = spec[:, : B // 2].real, spec[:, : B // 2].imag
    out[1, :, 0] = spec[:, B // 2].real
    return out.reshape(2, -1)


def _time_bn(state, used, prefix: str, layer: ResolvedLayer) -> tuple[np.ndarray, ...]:
    """A time-domain ``BatchNorm3d`` -> CBN: the shift exactly, the scale as the mean per block
    (module docstring); also the relative spread of the scale within the blocks."""
    B, M = layer.block_size, layer.out_channels
    p = {f: _take(state, used, f"{prefix}.{f}", (M,))
         for f in ("weight", "bias", "running_mean", "running_var")}
    scale = _bn_scale(p, prefix)
    shift = p["bias"] - p["running_mean"] * scale
    pad = layer.padded_out_channels - M
    scale, shift = np.pad(scale, (0, pad)), np.pad(shift, (0, pad))
    per_block = scale.reshape(-1, B).mean(axis=1)
    spread = float(np.linalg.norm(scale - np.repeat(per_block, B)) /
                   max(np.linalg.norm(scale), 1e-300))
    gain = np.tile(np.repeat(per_block, B // 2), (2, 1))
    return gain, _bins_of(shift, B), spread


def _dense_weight_shapes(layer: ResolvedLayer) -> list[tuple[int, ...]]:
    """The shapes a checkpoint may give a dense weight of ``layer`` in: a conv's, and for an
    fc layer also a ``Linear``'s ``[M, C*D*H*W]``."""
    conv = (layer.out_channels, layer.in_channels, *layer.kernel)
    if layer.kind != "fc":
        return [conv]
    return [(layer.out_channels, layer.in_channels * math.prod(layer.in_shape)), conv]


def _import_dense(state, used, layer: ResolvedLayer) -> tuple[LayerWeights, LayerImport]:
    """A dense layer of the network file, taken exactly (module docstring)."""
    key, M = f"{layer.name}.weight", layer.out_channels
    shapes = _dense_weight_shapes(layer)
    wanted = " or ".join(str(s) for s in shapes)
    if key not in state:
        raise CheckpointError(f"missing key '{key}': the dense weight {wanted}")
    shape = tuple(np.shape(state[key]))
    if shape not in shapes:
        circ = len(shape) == 6 and shape[2] == layer.block_size
        raise CheckpointError(f"'{key}': expected the dense weight {wanted}, found shape {shape}"
                              + ("; these are block-circulant generators, which a dense layer "
                                 "does not take: set dense: false on this layer" if circ else ""))
    weight = _take(state, used, key, shape).reshape(M, layer.in_channels, *layer.kernel)
    parts, bias = ["dense weight"], None
    bias_key = f"{layer.name}.bias"
    if layer.bias:
        bias = _take(state, used, bias_key, (M,))
        parts.append("bias")
    elif bias_key in state:
        raise CheckpointError(f"'{bias_key}': layer {layer.name!r} has a bias in the checkpoint "
                              "but bias: false in the network file; set bias: true")
    bn = _bn_name(layer)
    gain = offset = None
    if f"{bn}.bn_real.weight" in state:
        raise CheckpointError(f"'{bn}.bn_real.weight': a frequency-domain batch norm (SBN) for "
                              f"the dense layer {layer.name!r}, which computes in the time "
                              "domain; its batch norm is a BatchNorm3d")
    if f"{bn}.weight" in state:
        if not layer.cbn:
            raise CheckpointError(f"'{bn}.weight': layer {layer.name!r} has a batch norm in the "
                                  "checkpoint but bn: false in the network file; set bn: true")
        p = {f: _take(state, used, f"{bn}.{f}", (M,))
             for f in ("weight", "bias", "running_mean", "running_var")}
        gain = _bn_scale(p, bn)
        offset = p["bias"] - p["running_mean"] * gain
        gain = _check_folded(gain, f"'{layer.name}.bn_gain' (from '{bn}')")
        offset = _check_folded(offset, f"'{layer.name}.bn_offset' (from '{bn}')")
        parts.append(f"'{bn}' per channel")
    elif layer.cbn:
        parts.append("no batch norm in the checkpoint (bn calibrated when used)")
    how = ", ".join(parts) + ": exact, in the time domain"
    return LayerWeights(None, gain, offset, weight, bias), LayerImport(layer.name, how)


def _import_layer(state, used, layer: ResolvedLayer) -> tuple[LayerWeights, LayerImport]:
    if layer.dense:
        return _import_dense(state, used, layer)
    B = layer.block_size
    P, Q = layer.padded_out_channels // B, layer.padded_in_channels // B
    key = f"{layer.name}.weight"
    weight = state.get(key)
    circulant = (P, Q, B, *layer.kernel)
    if weight is not None and np.shape(weight) == circulant:
        generators = _take(state, used, key, circulant)
        how, error = "block-circulant generators", 0.0
    else:
        dense_shape = ((layer.out_channels, layer.in_channels * math.prod(layer.in_shape))
                       if layer.kind == "fc" else
                       (layer.out_channels, layer.in_channels, *layer.kernel))
        wanted = f"generators {circulant} or a dense weight {dense_shape}"
        if weight is None:
            raise CheckpointError(f"missing key '{key}': {wanted}")
        if np.shape(weight) != dense_shape:
            raise CheckpointError(f"'{key}': expected {wanted}, found shape "
                                  f"{tuple(np.shape(weight))}")
        dense = _take(state, used, key, dense_shape).reshape(
            layer.out_channels, layer.in_channels, *layer.kernel)
        generators = project_circulant(dense, B)
        back = expand_circulant(generators)[: layer.out_channels, : layer.in_channels]
        error = float(np.linalg.norm(dense - back) / max(np.linalg.norm(dense), 1e-300))
        how = ("dense weight projected onto block-circulant, its layer moved from the time "
               "domain to slots (not exact; dense: true takes it exactly)")
    gain, offset, folded_how, spread = _fold_cbn(state, used, layer)
    how, error = how + folded_how, max(error, spread)
    if not layer.cbn:
        return LayerWeights(generators), LayerImport(layer.name, how, error)
    return LayerWeights(generators, gain, offset), LayerImport(layer.name, how, error)


def _fold_cbn(state, used, layer: ResolvedLayer) -> tuple[np.ndarray, np.ndarray, str, float]:
    """The CBN gain and offset ``[2, M'/2]`` of ``layer``'s batch norm and bias (identity when
    it has neither), what was folded and the scale spread of a time-domain batch norm.

    Raises
    ------
    CheckpointError
        A batch norm or bias on a layer without CBN; a negative variance.
    ArrayFileError
        A folded gain or offset beyond :data:`~.network.MAX_WEIGHT_ABS` or not finite.
    """
    S, B = layer.padded_out_channels // 2, layer.block_size
    gain, offset, how, spread, sources = np.ones((2, S)), np.zeros((2, S)), "", 0.0, []
    bn = _bn_name(layer)
    if f"{bn}.bn_real.weight" in state:
        gain, offset = _spectral_bn(state, used, bn, layer)
        how, sources = ", SBN folded into CBN", [f"'{bn}'"]
    elif f"{bn}.weight" in state:
        gain, offset, spread = _time_bn(state, used, bn, layer)
        how, sources = f", time-domain BN as CBN (scale spread {spread:.3f})", [f"'{bn}'"]
    bias_key = f"{layer.name}.bias"
    if bias_key in state:
        bias = np.pad(_take(state, used, bias_key, (layer.out_channels,)),
                      (0, layer.padded_out_channels - layer.out_channels))
        offset = offset + gain * _bins_of(bias, B)
        how, sources = how + ", bias folded into the CBN offset", [*sources, f"'{bias_key}'"]
    identity = np.allclose(gain, 1) and np.allclose(offset, 0)  # e.g. a zero bias
    if not sources or (identity and not layer.cbn):
        if sources:  # nothing to fold, and no CBN to fold it into
            how = f", {' and '.join(sources)} an identity (zero bias), not used (no CBN)"
        return gain, offset, how, spread
    if not layer.cbn:
        raise CheckpointError(f"layer {layer.name!r} has a batch norm or bias in the checkpoint "
                              f"but no cbn in the network file; set cbn: true")
    where = f"'{layer.name}.%s' (folded from {' and '.join(sources)})"
    return (_check_folded(gain, where % "bn_gain"), _check_folded(offset, where % "bn_offset"),
            how, spread)


def _check_folded(values: np.ndarray, where: str) -> np.ndarray:
    """A folded CBN gain or offset, within the limits the weights file is read with
    (:func:`~.network.check_weights`), so that import never writes what loading refuses."""
    return check_array(values, where, values.shape, max_abs=MAX_WEIGHT_ABS)


def import_state_dict(net: NetworkConfig, state: Mapping[str, np.ndarray]
                      ) -> tuple[NetworkWeights, list[LayerImport], list[str]]:
    """The weights of ``net`` from a state dict of the training code (module docstring), how
    each layer was taken, and notes on the whole checkpoint (a ``module.`` prefix dropped,
    :data:`FAKE_QUANT_NOTE`).

    Raises
    ------
    CheckpointError
        A key that is not a string, missing or of the wrong shape, a key the network has no
        use for (named), a batch norm on a layer without CBN, a negative batch-norm variance,
        or a folded CBN gain or offset beyond :data:`~.network.MAX_WEIGHT_ABS` (named).
    """
    _refuse_non_string_keys(state)
    state, note = strip_parallel_prefix(state)
    notes = [note] if note else []
    _refuse_other_architecture(net, state)
    if any(k.endswith(_FAKE_QUANT_SUFFIXES) for k in state):
        notes.append(FAKE_QUANT_NOTE)
    used: set[str] = set()
    layers, report = {}, []
    for layer in net.resolved:
        if not layer.weighted:
            layers[layer.name] = LayerWeights(None)
            continue
        try:
            layers[layer.name], how = _import_layer(state, used, layer)
        except ArrayFileError as exc:
            raise CheckpointError(str(exc)) from None
        report.append(how)
    extra = sorted(k for k in state if k not in used and not k.endswith(_IGNORED_SUFFIXES))
    if extra:
        raise CheckpointError(f"keys the network {net.name} has no layer for: "
                              f"{', '.join(extra[:6])}{' ...' if len(extra) > 6 else ''} "
                              f"(layers: {', '.join(r.name for r in net.resolved)})")
    return NetworkWeights(layers), report, notes


def _refuse_other_architecture(net: NetworkConfig, state: Mapping[str, np.ndarray]) -> None:
    """One message when no weighted layer of ``net`` is in ``state`` (a checkpoint of another
    network, or keys under a prefix), naming the checkpoint's modules and the network's."""
    modules = sorted({k.split(".", 1)[0] for k in state if not k.endswith(_IGNORED_SUFFIXES)})
    wanted = [r.name for r in net.resolved if r.weighted]
    if not modules or set(modules) & set(wanted):
        return
    raise CheckpointError(f"not a checkpoint of network {net.name}: its modules are "
                          f"{', '.join(modules[:8])}{' ...' if len(modules) > 8 else ''}; the "
                          f"network's layers with weights are {', '.join(wanted)} (a checkpoint "
                          "of another architecture, or a network file whose layer names are "
                          "not the checkpoint's)")


def _refuse_non_string_keys(state: Mapping[object, object]) -> None:
    bad = [k for k in state if not isinstance(k, str)]
    if bad:
        raise CheckpointError(f"key {bad[0]!r} ({type(bad[0]).__name__}) is not a parameter "
                              "name: the keys of a state dict are strings such as "
                              "'conv1.weight'")
