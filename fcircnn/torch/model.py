"""Any network file as a PyTorch model: :func:`build`, :class:`SlotLayer`, :class:`SlotNetwork`.

The model computes what the golden model's float slot pass computes
(:func:`fcircnn.models.network.run_network`, mode ``"slots"``), layer by layer, on a batch and
with gradients: the input clips ``[N, C, D, H, W]`` are padded to a channel multiple of ``B``
and transformed to slots; every layer of the file runs in file order on the output of the layer
it names (``input``, default the previous one), conv or fc (block-circulant, on slots) or global
average pooling, then CBN, the residual add, CReLU and CMaxPool; the last layer's slots are
transformed back and its real channels are the class scores. With quantization-aware training
on (:meth:`SlotNetwork.qat`) the same graph runs the integer contract
(:mod:`fcircnn.torch.fakequant`): the input quantized to int8 slots, every layer's accumulator
exact, its post-unit in integers, its output int8 (returned dequantized).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Iterator

import numpy as np
import torch
from torch import nn

from fcircnn.arch.transforms import RFFT_FRACTION_BITS
from fcircnn.models import quant
from fcircnn.models.config import (
    AcceleratorConfig,
    NetworkConfig,
    ResolvedLayer,
    config_path,
    load_config,
)
from fcircnn.models.network import LayerOverflowError, random_weights
from fcircnn.models.resolve import LANES, SPREAD
from fcircnn.models.spectral import INT8_MAX

from .circulant import BlockCirculantConv3d, BlockCirculantLinear
from .fakequant import ActObserver, fake_quantize, requantize, round_ste
from .post import CBN, CMaxPool3d, CReLU
from .timedomain import DenseConv3d, from_layout, rfft_int, to_layout

__all__ = ["SlotLayer", "SlotNetwork", "build", "network_config"]

#: Layer kinds :class:`SlotLayer` runs (every kind the resolver produces).
KINDS = ("conv", "fc", "gap", "rfft", "irfft")


def _bn_affine(bn: nn.BatchNorm3d, y: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """``(gain, offset)`` ``[M]`` of a time-domain batch norm: from the statistics of ``y``
    ``[N, M, D, H, W]`` (updating the running ones, as :class:`torch.nn.BatchNorm3d`) in
    training mode, from the running ones otherwise."""
    if bn.training and y is not None:
        dims, count = (0, 2, 3, 4), y.numel() // y.shape[1]
        mean, var = y.mean(dim=dims), y.var(dim=dims, unbiased=False)
        with torch.no_grad():
            bn.running_mean.lerp_(mean.to(bn.running_mean.dtype), bn.momentum)
            bn.running_var.lerp_((var * count / max(count - 1, 1)).to(bn.running_var.dtype),
                                 bn.momentum)
    else:
        mean, var = bn.running_mean, bn.running_var
    gain = bn.weight / torch.sqrt(var + bn.eps)
    return gain, bn.bias - mean * gain


class SlotLayer(nn.Module):
    """One layer of a network file on slots: conv / fc / gap, CBN, residual, CReLU, CMaxPool;
    or a time-domain layer: a dense conv / fc with its bias, BN, ReLU and max pool per channel,
    an rfft or an irfft step (:mod:`fcircnn.torch.timedomain`).

    Parameters
    ----------
    layer : ResolvedLayer
        The layer as the network file resolves it.

    Attributes
    ----------
    conv : BlockCirculantConv3d, BlockCirculantLinear or None
        ``None`` for global average pooling, a dense layer and the domain steps.
    dense : DenseConv3d or None
        A dense layer's weight and bias.
    cbn : CBN or None
    bn : torch.nn.BatchNorm3d or None
        A dense layer's batch norm per channel.
    crelu : CReLU or None
        CReLU, or a dense layer's ReLU (per lane: per channel).
    pool : CMaxPool3d or None
    out_quant : ActObserver
        The scale of the layer's int8 output, observed after CReLU and before the pool (where
        the golden model calibrates it); an irfft's output keeps its input's.
    """

    def __init__(self, layer: ResolvedLayer) -> None:
        super().__init__()
        if layer.kind not in KINDS:
            raise ValueError(f"layer {layer.name!r}: kind {layer.kind!r} is not one of "
                             f"{', '.join(KINDS)}")
        self.layer = layer
        B = layer.block_size
        self.conv: BlockCirculantConv3d | None = None
        self.dense = DenseConv3d(layer) if layer.dense else None
        if layer.kind == "conv" and not layer.dense:
            self.conv = BlockCirculantConv3d(layer.in_channels, layer.out_channels,
                                             layer.kernel, layer.stride, layer.padding,
                                             block_size=B)
        elif layer.kind == "fc" and not layer.dense:
            self.conv = BlockCirculantLinear(layer.in_channels, layer.out_channels,
                                             in_shape=layer.in_shape, block_size=B)
        self.cbn = CBN(layer.out_slots) if layer.cbn and self.conv is not None else None
        self.bn = nn.BatchNorm3d(layer.out_channels) if layer.cbn and layer.dense else None
        self.crelu = CReLU() if layer.crelu else None
        pool = layer.pool
        self.pool = None if pool is None else CMaxPool3d(pool.window, pool.stride, pool.padding)
        self.out_quant = ActObserver()

    @property
    def name(self) -> str:
        return self.layer.name

    def _check_input(self, xs: torch.Tensor, what: str, shape: tuple[int, ...]) -> None:
        expected = (2, *shape)
        if tuple(xs.shape[1:]) != expected:
            raise ValueError(f"layer {self.name!r}: {what} slots {list(xs.shape)}, expected "
                             f"[N, {', '.join(map(str, expected))}]")

    def _check(self, xs: torch.Tensor, res: torch.Tensor | None) -> None:
        L = self.layer
        self._check_input(xs, "input", (L.in_slots, *L.in_shape))
        if (res is None) != (L.residual is None):
            raise ValueError(f"layer {self.name!r}: the residual input must be given exactly "
                             f"when the layer has one (residual: {L.residual})")
        if res is not None:
            self._check_input(res, "residual", (L.out_slots, *L.conv_shape))

    def _lanes(self, per_channel: torch.Tensor) -> torch.Tensor:
        """A per-channel vector ``[M]`` as ``[2, S]`` per part and slot of the output layout
        (zero in the parts of ``lane0`` that hold no channel)."""
        L = self.layer
        xs = to_layout(per_channel.reshape(1, -1, 1, 1, 1), L.out_layout, L.block_size)
        return xs.reshape(2, -1)

    def _dense_forward(self, xs: torch.Tensor) -> torch.Tensor:
        L = self.layer
        t = self.dense(xs)
        if self.bn is not None:
            t = self.bn(t)
        if self.crelu is not None:
            t = torch.relu(t)
        y = to_layout(t, L.out_layout, L.block_size)
        self.out_quant.observe(y)
        return y if self.pool is None else self.pool(y)

    def forward(self, xs: torch.Tensor, res: torch.Tensor | None = None) -> torch.Tensor:
        """Float slots in, float slots out (``[N, 2, S, D, H, W]``, each in its layout);
        ``res`` the residual layer's output when the layer has one."""
        self._check(xs, res)
        L = self.layer
        if L.kind == "irfft":  # deferred: the slots stay, their meaning changes
            return xs
        if L.kind == "rfft":
            y = to_layout(from_layout(xs, LANES, L.block_size, L.in_channels), "slots",
                          L.block_size)
            self.out_quant.observe(y)
            return y
        if self.dense is not None:
            return self._dense_forward(xs)
        y = xs.mean(dim=(3, 4, 5), keepdim=True) if self.conv is None else self.conv(xs)
        if self.cbn is not None:
            y = self.cbn(y)
        if res is not None:
            y = y + res
        if self.crelu is not None:
            y = self.crelu(y)
        self.out_quant.observe(y)
        return y if self.pool is None else self.pool(y)

    def _rfft_int(self, q: torch.Tensor, in_scale: float) -> torch.Tensor:
        """The integer rfft and its requantization (one shift, a multiplier per slot
        position: :func:`fcircnn.models.quant.fold_uniform`), straight-through."""
        L, B = self.layer, self.layer.block_size
        v = rfft_int(q.detach().double(), B)
        acc_scale = in_scale / 2**RFFT_FRACTION_BITS
        y_float = rfft_int(q.double(), B) * acc_scale  # the gradient's path
        self.out_quant.observe(y_float)
        const = np.ones((2, B // 2))
        try:
            post = quant.fold_uniform(const * acc_scale, const * self.out_quant.scale,
                                      B * INT8_MAX * 2**RFFT_FRACTION_BITS, L.out_slots)
        except OverflowError as exc:
            raise LayerOverflowError(self.name, str(exc)) from None
        mult = torch.from_numpy(post.mult.astype(np.float64)).to(v.device)
        shift = int(post.shift[0, 0])
        t = v * mult.reshape(1, 2, -1, *[1] * (v.ndim - 3))
        rounding = 2.0 ** (shift - 1) if shift > 0 else 0.0
        y_int = torch.clamp(torch.floor((t + rounding) / 2.0**shift), -INT8_MAX, INT8_MAX)
        out_scale = self.out_quant.scale
        y_float = torch.clamp(y_float / out_scale, -INT8_MAX, INT8_MAX)
        return y_int * out_scale + (y_float - y_float.detach()) * out_scale

    def forward_int(self, xs: torch.Tensor, in_scale: float, res: torch.Tensor | None = None,
                    res_scale: float | None = None) -> torch.Tensor:
        """The integer contract with straight-through gradients.

        ``xs`` (and ``res``) are int8 slots dequantized with ``in_scale`` (``res_scale``), as
        the layers that produce them return them; the result is this layer's int8 output
        dequantized with :attr:`out_quant`'s scale (an irfft's: ``in_scale``, its input
        unchanged). Computes in float64.

        Raises
        ------
        fcircnn.models.network.LayerOverflowError
            When the layer's folded post parameters do not fit their fields.
        """
        self._check(xs, res)
        L = self.layer
        if L.kind == "irfft":
            return xs
        q = round_ste(xs.double() / in_scale)
        if L.kind == "rfft":
            return self._rfft_int(q, in_scale)
        if self.conv is None and self.dense is None:
            voxels = math.prod(L.in_shape)
            acc = q.sum(dim=(3, 4, 5), keepdim=True)
            acc_scale, bound = in_scale / voxels, L.accumulator_bound
        elif self.dense is not None:
            acc, w_scale = self.dense.accumulate(q)
            acc_scale, bound = w_scale * in_scale, L.accumulator_bound
        else:
            acc, w_scale = self.conv.accumulate(q)
            acc_scale, bound = w_scale * in_scale, L.accumulator_bound
        y = acc * acc_scale
        if self.dense is not None:
            bias = (self.dense.bias if self.dense.bias is not None
                    else y.new_zeros(L.out_channels))
            gain, offset = (torch.ones_like(bias), torch.zeros_like(bias))
            if self.bn is not None:
                time = from_layout(y, L.out_layout, L.block_size, L.out_channels)
                gain, offset = _bn_affine(self.bn, time + bias.double().reshape(1, -1, 1, 1, 1))
            gain, offset = self._lanes(gain), self._lanes(offset + gain * bias)
        elif self.cbn is not None:
            gain, offset = self.cbn.affine(y)
        else:
            S = L.out_slots
            gain, offset = y.new_ones(2, S), y.new_zeros(2, S)
        t = y * gain.double().reshape(1, 2, -1, 1, 1, 1) + offset.double().reshape(1, 2, -1, 1,
                                                                                   1, 1)
        if res is not None:
            t = t + res.double()
        self.out_quant.observe(torch.relu(t) if self.crelu is not None else t)
        try:
            out = requantize(acc, acc_scale, gain, offset, self.out_quant.scale, bound,
                             res=None if res is None else res.double(), res_scale=res_scale,
                             relu=self.crelu is not None)
        except OverflowError as exc:
            raise LayerOverflowError(self.name, str(exc)) from None
        return out if self.pool is None else self.pool(out)

    def extra_repr(self) -> str:
        L = self.layer
        extra = [f"input={L.input or '(network input)'}"]
        if L.residual is not None:
            extra.append(f"residual={L.residual}")
        kind = f"dense {L.kind}" if L.dense else L.kind
        return f"{L.name!r} ({kind}), " + ", ".join(extra)


class SlotNetwork(nn.Module):
    """A network file as a PyTorch model: time-domain clips in, class scores out.

    Parameters
    ----------
    network : NetworkConfig
        Validated network (:func:`build` loads one from a file or a built-in name).
    qat : bool
        Start with quantization-aware training on (:meth:`qat`).

    Attributes
    ----------
    config : NetworkConfig
    layers : torch.nn.ModuleDict
        A :class:`SlotLayer` per layer of the file, under the layer's name, in file order.
    input_quant : ActObserver
        The scale of the int8 input slots.
    """

    def __init__(self, network: NetworkConfig, *, qat: bool = False) -> None:
        super().__init__()
        self.config = network
        self.layers = nn.ModuleDict()
        for layer in network.resolved:
            if hasattr(self.layers, layer.name):
                raise ValueError(f"layer {layer.name!r}: the name is an attribute of "
                                 "torch.nn.ModuleDict and cannot name a module; rename the "
                                 "layer in the network file")
            self.layers[layer.name] = SlotLayer(layer)
        self.input_quant = ActObserver()
        self._qat = qat
        #: Where the activation scales come from, for the weights file's calibration: the
        #: statistic and the clips of the last :meth:`calibrate`, ``("qat", 0)`` once a QAT
        #: training step moved them, ``None`` before either.
        self.scales_from: tuple[str, int] | None = None

    @property
    def qat_enabled(self) -> bool:
        """Whether the forward pass runs the int8 contract."""
        return self._qat

    def qat(self, enabled: bool = True) -> SlotNetwork:
        """Turn quantization-aware training on or off; returns the model."""
        self._qat = bool(enabled)
        return self

    def observers(self) -> Iterator[ActObserver]:
        """The input's and every layer's activation observer."""
        yield self.input_quant
        for layer in self.layers.values():
            yield layer.out_quant

    def _input_slots(self, x: torch.Tensor) -> torch.Tensor:
        inp = self.config.input
        expected = (inp.channels, *inp.shape)
        if x.ndim != 5 or tuple(x.shape[1:]) != expected:
            raise ValueError(f"{self.config.name}: input clips {list(x.shape)}, expected "
                             f"[N, {', '.join(map(str, expected))}] (N x C x D x H x W, time "
                             "domain)")
        first = self.config.resolved[0]
        layout = SPREAD if first.in_layout == SPREAD else "slots"
        return to_layout(x, layout, first.block_size)

    def forward_slots(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """Every layer's output slots ``[N, 2, S, D, H, W]`` (after the pool), by name, for
        clips ``x`` ``[N, C, D, H, W]``; with QAT on, the int8 outputs dequantized, and the
        quantized input under the key ``""``."""
        xs = self._input_slots(x)
        outputs: dict[str, torch.Tensor] = {}
        if not self._qat:
            for name, layer in self.layers.items():
                L = layer.layer
                src = xs if L.input is None else outputs[L.input]
                outputs[name] = layer(src, None if L.residual is None else outputs[L.residual])
            return outputs
        self.input_quant.observe(xs)
        if self.training:  # the observers move their scales (ActObserver)
            self.scales_from = ("qat", 0)
        scales = {"": self.input_quant.scale}
        outputs[""] = fake_quantize(xs.double(), scales[""]) * scales[""]
        for name, layer in self.layers.items():
            L = layer.layer
            src = L.input or ""
            res = None if L.residual is None else outputs[L.residual]
            outputs[name] = layer.forward_int(
                outputs[src], scales[src], res,
                None if L.residual is None else scales[L.residual])
            # an irfft passes its input on: its scale too
            scales[name] = scales[src] if L.kind == "irfft" else layer.out_quant.scale
        return outputs

    def scores(self, last: torch.Tensor) -> torch.Tensor:
        """The last layer's slots -> class scores: ``[N, classes]`` when its map is 1x1x1,
        else ``[N, classes, D, H, W]`` (its real channels, time domain)."""
        L = self.config.resolved[-1]
        out = from_layout(last, L.out_layout, L.block_size, L.out_channels)
        return out.reshape(out.shape[:2]) if L.out_shape == (1, 1, 1) else out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Class scores of clips ``x`` ``[N, C, D, H, W]`` (time domain, float)."""
        outputs = self.forward_slots(x)
        scores = self.scores(outputs[self.config.resolved[-1].name])
        return scores.to(x.dtype) if x.is_floating_point() else scores

    @torch.no_grad()
    def calibrate(self, clips: torch.Tensor | Iterable[torch.Tensor],
                  batch_size: int = 8) -> SlotNetwork:
        """Set every activation scale to the maximum over a calibration set, as the golden
        model does (``fcircnn golden|compile --calibration``, statistic ``max``).

        The float model runs each batch in eval mode (running CBN statistics); the input's
        scale comes from the input slots, each layer's from its output after CReLU and before
        the pool. Restores the training mode and the QAT setting. Returns the model.

        Parameters
        ----------
        clips : Tensor ``[N, C, D, H, W]`` or iterable of such batches
        batch_size : int
            Clips per forward pass when ``clips`` is one tensor.
        """
        batches = (clips.split(batch_size) if isinstance(clips, torch.Tensor) else clips)
        training, qat = self.training, self._qat
        self.eval()
        self._qat = False
        for obs in self.observers():
            obs.reset()
            obs.calibrating = True
        clips = 0
        try:
            for batch in batches:
                self.input_quant.observe(self._input_slots(batch))
                self.forward_slots(batch)
                clips += len(batch)
        finally:
            for obs in self.observers():
                obs.calibrating = False
            self.train(training)
            self._qat = qat
        self.scales_from = ("max", clips)
        return self

    def extra_repr(self) -> str:
        net = self.config
        inp = net.input
        return (f"network={net.name!r}, input={inp.channels}x{inp.depth}x{inp.height}x"
                f"{inp.width}, classes={net.classes}, qat={self._qat}")


def network_config(network: str | os.PathLike[str] | NetworkConfig | AcceleratorConfig
                   ) -> NetworkConfig:
    """The network of a network file, an accelerator file (its ``network``), a built-in name
    (``c3d``, ``r3d18``, ``c3d_zcu102``, ...) or an already loaded configuration.

    Files are read through :func:`fcircnn.models.config.load_config` (schema, shapes and, for
    an accelerator, the placement of every layer on a core); the hardware's own checks
    (``fcircnn check``) are not run, since training needs only the network.

    Raises
    ------
    fcircnn.models.config.ConfigError
        Naming the file, the key path and the problem.
    """
    if isinstance(network, NetworkConfig):
        return network
    if isinstance(network, AcceleratorConfig):
        return network.network
    config = load_config(config_path(network))
    return config.network if isinstance(config, AcceleratorConfig) else config


def build(network: str | os.PathLike[str] | NetworkConfig | AcceleratorConfig, *,
          seed: int | None = 0, qat: bool = False,
          dtype: torch.dtype = torch.float32) -> SlotNetwork:
    """The PyTorch model of a network file.

    Parameters
    ----------
    network : path, built-in name, NetworkConfig or AcceleratorConfig
        As :func:`network_config`.
    seed : int or None
        Generators (a dense layer's weight and bias) from
        :func:`fcircnn.models.network.random_weights` with this seed (the weights ``fcircnn
        golden --seed`` draws); ``None`` leaves torch's own initialisation. CBN and BN start
        as the identity (gain 1, offset 0, running mean 0, variance 1).
    qat : bool
        Quantization-aware training on from the start.
    dtype : torch.dtype
        Parameter dtype (``torch.float64`` to compare with the golden model).

    Returns
    -------
    SlotNetwork
        In training mode; input ``[N, C, D, H, W]``, output class scores.

    Raises
    ------
    fcircnn.models.config.ConfigError
        For a bad network file (naming the key path).
    """
    net = network_config(network)
    model = SlotNetwork(net, qat=qat)
    if seed is not None:
        weights = random_weights(net, seed)
        with torch.no_grad():
            for name, layer in model.layers.items():
                lw = weights.layers[name]
                if layer.conv is not None:
                    layer.conv.generators.copy_(torch.from_numpy(lw.generators))
                if layer.dense is not None:
                    layer.dense.weight.copy_(torch.from_numpy(lw.weight))
                    if layer.dense.bias is not None:
                        layer.dense.bias.copy_(torch.from_numpy(lw.bias))
    return model.to(dtype)
