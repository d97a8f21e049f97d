"""Network resolution: every layer's shapes inferred from the network file, the graph checked.

:func:`resolve_network` follows the layers of a validated network file in order, resolves each
layer's input and residual references, block size, kernel, stride, padding and pool, infers the
shapes (conv, pooled, fc and gap), and checks the graph (references to earlier layers only,
matching residual shapes and block sizes, non-empty outputs, padding below the kernel) and the
numeric contract's accumulator bound; it returns the :class:`ResolvedLayer` objects and every
problem found. The schema (:mod:`.schema`) calls it when a network is validated.
"""

from __future__ import annotations

import difflib
import math
import typing
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

from .errors import Problem, show
from .spectral import ACC_BITS, INT8_MAX, accumulator_bound

if TYPE_CHECKING:
    from .schema import NetworkConfig

__all__ = ["Pool", "ResolvedLayer", "Vec3Tuple", "fmt3", "fmt_dims", "resolve_network",
           "round_up"]

Vec3Tuple = tuple[int, int, int]


@dataclass(frozen=True)
class Pool:
    """Resolved CMaxPool: window, stride and padding as ``(d, r, c)`` tuples."""

    window: Vec3Tuple
    stride: Vec3Tuple
    padding: Vec3Tuple


def round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


@dataclass(frozen=True)
class ResolvedLayer:
    """One layer with every default applied and every shape inferred.

    Attributes
    ----------
    name, kind, index
        Layer name, ``"conv"``, ``"fc"`` or ``"gap"``, and position in the network.
    input, residual
        Name of the layer feeding this one (``None`` = network input) and of the layer whose
        output is added before CReLU (``None`` = no residual).
    block_size
        Block size ``B`` of this layer's input and output slots.
    in_channels, out_channels
        Real (unpadded) ``N`` and ``M``; a ``gap`` layer has ``M = N``.
    in_shape, conv_shape, out_shape
        Spatial ``(D, H, W)`` of the input, after the convolution, and after the pool.
    kernel, stride, padding
        ``(d, r, c)`` tuples; ``fc`` and ``gap`` have ``kernel = in_shape``, stride 1, padding 0.
    cbn, crelu, pool
        Post-processing stages (``pool`` is ``None`` when there is no CMaxPool).
    """

    name: str
    kind: Literal["conv", "fc", "gap"]
    index: int
    input: str | None
    residual: str | None
    block_size: int
    in_channels: int
    out_channels: int
    in_shape: Vec3Tuple
    conv_shape: Vec3Tuple
    out_shape: Vec3Tuple
    kernel: Vec3Tuple
    stride: Vec3Tuple
    padding: Vec3Tuple
    cbn: bool
    crelu: bool
    pool: Pool | None

    @property
    def padded_in_channels(self) -> int:
        """``N`` rounded up to a multiple of ``B``."""
        return round_up(self.in_channels, self.block_size)

    @property
    def padded_out_channels(self) -> int:
        """``M`` rounded up to a multiple of ``B``."""
        return round_up(self.out_channels, self.block_size)

    @property
    def kernel_volume(self) -> int:
        """``Kd * Kr * Kc``."""
        return math.prod(self.kernel)

    @property
    def accumulator_bound(self) -> int:
        """Largest ``|acc|`` the layer's integer accumulation can reach from int8 slots
        (global average pooling sums every voxel of a slot; a conv or fc
        :func:`~fcircnn.models.spectral.accumulator_bound`); the numeric contract needs it
        below ``2**31``, which network validation checks."""
        if self.kind == "gap":
            return INT8_MAX * math.prod(self.in_shape)
        return accumulator_bound(self.padded_in_channels // self.block_size, self.kernel)

    @property
    def dense_ops(self) -> int:
        """Dense-equivalent operations ``2*M*N*Kd*Kr*Kc*Do*Ho*Wo`` (real M, N; conv shape);
        0 for ``gap``."""
        if self.kind == "gap":
            return 0
        return (
            2 * self.out_channels * self.in_channels * self.kernel_volume
            * math.prod(self.conv_shape)
        )

    @property
    def dense_params(self) -> int:
        """Uncompressed weights ``M*N*Kd*Kr*Kc``; 0 for ``gap``."""
        if self.kind == "gap":
            return 0
        return self.out_channels * self.in_channels * self.kernel_volume

    @property
    def circulant_params(self) -> int:
        """Stored generator entries ``P*Q*B*Kvol`` (padded channels); 0 for ``gap``."""
        if self.kind == "gap":
            return 0
        return self.padded_out_channels * self.padded_in_channels * self.kernel_volume \
            // self.block_size

    @property
    def out_dims(self) -> tuple[int, int, int, int]:
        """Output ``(channels, D, H, W)``."""
        return (self.out_channels, *self.out_shape)

    def fold_depth_taps(self) -> ResolvedLayer:
        """This conv with its ``Kd`` depth taps folded into input channels.

        The folded layer reads ``Kd`` copies of the (channel-padded) input, copy ``t`` shifted
        to input depth ``do*sd + t - pd`` for output depth ``do`` (zero outside the map): its
        input has ``Kd * padded_in_channels`` channels (channel ``t*padded_in_channels + c``)
        and depth ``Do``, its kernel, stride and padding are ``(1, Kr, Kc)``, ``(1, sr, sc)``
        and ``(0, pr, pc)``, and its weight block ``(p, t*Q + q)`` is the original block
        ``(p, q)`` at depth tap ``t``. It computes the same sums, in another order, so its
        integer accumulators equal the original's exactly (:mod:`fcircnn.models.fold`).
        Name, outputs and post-processing are the original's; only the input side changes.
        Its ``in_channels`` count the padding of every tap's block, so its ``dense_ops`` are
        not the network's: throughput figures use the original layer
        (:attr:`fcircnn.gen.compiler.LayerPlan.layer`).
        """
        if self.kind != "conv":
            raise ValueError(f"layer {self.name!r}: only a conv folds its depth taps, not "
                             f"a {self.kind} layer")
        kd, kr, kc = self.kernel
        return replace(self, in_channels=kd * self.padded_in_channels,
                       in_shape=(self.conv_shape[0], *self.in_shape[1:]), kernel=(1, kr, kc),
                       stride=(1, *self.stride[1:]), padding=(0, *self.padding[1:]))


def fmt_dims(channels: int, shape: Sequence[int]) -> str:
    return "x".join(str(v) for v in (channels, *shape))


def fmt3(v: Sequence[int]) -> str:
    return "x".join(str(x) for x in v)


def _window_out(size: int, kernel: int, stride: int, pad: int) -> int:
    return (size + 2 * pad - kernel) // stride + 1


def _layer_key(index: int, name: str, field: str | None = None) -> str:
    key = f"layers[{index}] ({name})"
    return f"{key}.{field}" if field else key


@dataclass
class _Src:
    """What a layer output provides to its consumers (None fields: unknown after an error)."""

    index: int
    channels: int
    shape: Vec3Tuple | None
    block_size: int


def resolve_network(net: NetworkConfig) -> tuple[tuple[ResolvedLayer, ...], list[Problem]]:
    """Check references, block sizes and shapes; infer every layer's shapes."""
    problems: list[Problem] = []
    names: dict[str, int] = {}
    outputs: dict[str, _Src | None] = {}  # None: the layer had an error, shape unknown
    resolved: list[ResolvedLayer] = []
    order = [layer.name for layer in net.layers]
    prev: str | None = None

    def lookup(i: int, layer_name: str, field: str, ref: str) -> tuple[bool, _Src | None]:
        """Resolve a reference; (ok, source)."""
        key = _layer_key(i, layer_name, field)
        earlier = order[:i]
        if ref == layer_name:
            problems.append(Problem(key, f"a layer cannot take its own output ({show(ref)}); "
                                         "must name an earlier layer"))
            return False, None
        if ref not in order:
            hint = difflib.get_close_matches(ref, earlier, n=1)
            tip = f" (did you mean {hint[0]!r}?)" if hint else ""
            problems.append(Problem(key, f"unknown layer {show(ref)}{tip}; must name an earlier "
                                         f"layer: {', '.join(earlier) or '(none)'}"))
            return False, None
        where = order.index(ref)
        if where > i:
            problems.append(Problem(key, f"forward reference: {show(ref)} is layers[{where}], "
                                         f"after this layer; must name an earlier layer: "
                                         f"{', '.join(earlier) or '(none)'}"))
            return False, None
        return True, outputs.get(ref)

    for i, cfg in enumerate(net.layers):
        ok = True
        if cfg.name in names:
            problems.append(Problem(_layer_key(i, cfg.name, "name"),
                                    f"duplicate layer name {cfg.name!r} (already used by "
                                    f"layers[{names[cfg.name]}]); names must be unique"))
            ok = False
        else:
            names[cfg.name] = i
        block = cfg.block_size if cfg.block_size is not None else net.block_size

        # --- the input of this layer
        src_name = cfg.input if cfg.input is not None else prev
        if cfg.input is not None:
            found, src = lookup(i, cfg.name, "input", cfg.input)
            ok = ok and found
        elif prev is None:
            src = _Src(-1, net.input.channels, net.input.shape, block)
        else:
            src = outputs.get(prev)
        if src is None or src.shape is None:
            ok = False
        elif src.block_size != block:
            problems.append(Problem(
                _layer_key(i, cfg.name, "block_size"),
                f"block size {block} differs from B = {src.block_size} of {src_name!r} that "
                "feeds this layer (slots of different B are different FFTs)"))
            ok = False

        # --- shapes
        in_shape: Vec3Tuple | None = src.shape if src is not None else None
        in_ch = src.channels if src is not None else 0
        out_ch = in_ch if cfg.type == "gap" else cfg.out_channels
        conv_shape: Vec3Tuple | None = None
        out_shape: Vec3Tuple | None = None
        pool: Pool | None = None
        kernel: Vec3Tuple | None = None
        stride: Vec3Tuple = (1, 1, 1)
        padding: Vec3Tuple = (0, 0, 0)
        if cfg.type == "conv":
            kernel, stride, padding = cfg.kernel, cfg.stride, cfg.padding
            bad = [a for a in range(3) if padding[a] >= kernel[a]]
            if bad:
                problems.append(Problem(
                    _layer_key(i, cfg.name, "padding"),
                    f"padding >= kernel on axis {'/'.join('DHW'[a] for a in bad)}: padding "
                    f"{list(padding)}, kernel {list(kernel)}; each padding must be < kernel"))
                ok = False
            if cfg.pool is not None:
                p = cfg.pool
                pool = Pool(p.window, p.stride or p.window, p.padding or (0, 0, 0))
                bad = [a for a in range(3) if pool.padding[a] >= pool.window[a]]
                if bad:
                    problems.append(Problem(
                        _layer_key(i, cfg.name, "pool.padding"),
                        f"pool padding >= window on axis {'/'.join('DHW'[a] for a in bad)}: "
                        f"padding {list(pool.padding)}, window {list(pool.window)}; each "
                        "padding must be < window"))
                    ok = False
            if ok and in_shape is not None:
                conv_shape = typing.cast(Vec3Tuple, tuple(
                    _window_out(in_shape[a], kernel[a], stride[a], padding[a]) for a in range(3)))
                if min(conv_shape) < 1:
                    problems.append(Problem(
                        _layer_key(i, cfg.name, "kernel"),
                        f"output would be empty ({fmt3(conv_shape)}): input "
                        f"{fmt3(in_shape)} with padding {list(padding)} is smaller than kernel "
                        f"{list(kernel)}; (size + 2*padding - kernel) // stride + 1 must be >= 1"))
                    ok = False
            if ok and conv_shape is not None:
                if pool is None:
                    out_shape = conv_shape
                else:
                    out_shape = typing.cast(Vec3Tuple, tuple(
                        _window_out(conv_shape[a], pool.window[a], pool.stride[a],
                                    pool.padding[a]) for a in range(3)))
                    if min(out_shape) < 1:
                        problems.append(Problem(
                            _layer_key(i, cfg.name, "pool.window"),
                            f"pool output would be empty ({fmt3(out_shape)}): conv output "
                            f"{fmt3(conv_shape)} with padding {list(pool.padding)} is smaller "
                            f"than window {list(pool.window)}"))
                        ok = False
        elif in_shape is not None:  # fc, gap: the kernel is the whole map
            kernel = in_shape
            conv_shape = out_shape = (1, 1, 1)

        # --- residual
        residual = getattr(cfg, "residual", None)
        if residual is not None:
            found, res = lookup(i, cfg.name, "residual", residual)
            if not found:
                ok = False
            elif res is not None and res.shape is not None and conv_shape is not None:
                if (res.channels, *res.shape) != (out_ch, *conv_shape):
                    problems.append(Problem(
                        _layer_key(i, cfg.name, "residual"),
                        f"shape mismatch: {residual!r} gives "
                        f"{fmt_dims(res.channels, res.shape)}, this layer's output before pool "
                        f"is {fmt_dims(out_ch, conv_shape)} (channels x D x H x W); they must "
                        "be equal"))
                    ok = False
                if res.block_size != block:
                    problems.append(Problem(
                        _layer_key(i, cfg.name, "residual"),
                        f"block size mismatch: {residual!r} has B = {res.block_size}, this "
                        f"layer has B = {block} (slots of different B are different FFTs)"))
                    ok = False

        if ok and in_shape is not None and conv_shape is not None and out_shape is not None \
                and kernel is not None:
            resolved.append(ResolvedLayer(
                name=cfg.name, kind=cfg.type, index=i,
                input=src_name, residual=residual, block_size=block,
                in_channels=in_ch, out_channels=out_ch,
                in_shape=in_shape, conv_shape=conv_shape, out_shape=out_shape,
                kernel=kernel, stride=stride, padding=padding,
                cbn=getattr(cfg, "cbn", False), crelu=getattr(cfg, "crelu", False), pool=pool,
            ))
            outputs.setdefault(cfg.name, _Src(i, out_ch, out_shape, block))
            bound = resolved[-1].accumulator_bound
            if bound >= 2 ** (ACC_BITS - 1):
                why = ("sums every voxel of its input" if cfg.type == "gap" else
                       f"sums {resolved[-1].padded_in_channels} input channels over a "
                       f"{fmt3(kernel)} kernel")
                problems.append(Problem(
                    _layer_key(i, cfg.name, "kernel" if cfg.type == "conv" else None),
                    f"accumulator bound {bound} does not fit the signed {ACC_BITS}-bit "
                    f"accumulator (must be < 2**{ACC_BITS - 1}): the layer {why}; use fewer "
                    "input channels or a smaller kernel or map"))
        else:
            outputs.setdefault(cfg.name, None)
        prev = cfg.name

    last_i, last = len(net.layers) - 1, net.layers[-1]
    if resolved and len(resolved) == len(net.layers):
        channels = resolved[-1].out_channels
        if channels != net.classes:
            if last.type == "gap":
                problems.append(Problem("classes", f"must equal the output channels of the last "
                                                   f"layer {last.name!r} ({channels}), not "
                                                   f"{net.classes}"))
            else:
                problems.append(Problem(_layer_key(last_i, last.name, "out_channels"),
                                        f"the last layer must output classes = {net.classes} "
                                        f"channels, not {channels}"))
    return tuple(resolved), problems
