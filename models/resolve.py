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
from typing import Any, Literal, Protocol

from fcircnn.arch.geometry import SLOT_GROUP_CHANNELS

from .errors import Problem, show
from .spectral import ACC_BITS, INT8_MAX, accumulator_bound


class NetworkSpec(Protocol):
    """What resolution reads of a validated network file (:class:`~.schema.NetworkConfig`
    is one): its layers' entries in order, the default block size, the input and the classes.
    Stated here so that resolution does not depend on the schema that calls it."""

    layers: Sequence[Any]
    block_size: int
    input: Any
    classes: int | None

#: The map an fc layer's 1x1x1 input is read as when it folds
#: (:meth:`ResolvedLayer.fold_fc_input`): 16 positions, so each weight tile carries 16 taps.
FC_FOLD_SHAPE: tuple[int, int, int] = (1, 4, 4)

__all__ = ["DEFERRED", "FC_FOLD_SHAPE", "LANE0", "LANES", "LAYOUTS", "SLOTS", "SPREAD", "Layout",
           "NetworkSpec",
           "Pool", "ResolvedLayer", "Vec3Tuple", "fmt3", "fmt_dims", "resolve_network",
           "round_up"]

Vec3Tuple = tuple[int, int, int]

# How a map's values sit in int8 slot parts: the layouts of the integer contract
# (docs/golden.md, "Time-domain layers"). Every map, whatever its domain, is stored as slots.
#: The packed half spectrum of each block of ``B`` channels (every block-circulant layer's).
SLOTS = "slots"
#: Time domain, channel ``c`` in part ``c % 2`` of slot ``c // 2`` (a dense layer's output).
LANES = "lanes"
#: Time domain, channel ``m`` in the real part of slot ``m*B/2``, the first lane of a block of
#: its own (a dense layer's output when it reads a deferred irfft).
LANE0 = "lane0"
#: Time domain whose irfft is deferred: the slots of its spectrum (an irfft's output).
DEFERRED = "deferred"
#: The rfft of each real channel at the first lane of a block of its own, so every bin holds
#: the channel's value (what the host writes for a dense layer that reads the network input).
SPREAD = "spread"
Layout = Literal["slots", "lanes", "lane0", "deferred", "spread"]
LAYOUTS: tuple[str, ...] = (SLOTS, LANES, LANE0, DEFERRED, SPREAD)


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
        Layer name, ``"conv"``, ``"fc"``, ``"gap"``, ``"rfft"`` or ``"irfft"``, and position
        in the network.
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
        Post-processing stages (``pool`` is ``None`` when there is no max pool), in the layer's
        domain: CBN, CReLU and CMaxPool per slot part for a block-circulant layer, BN, ReLU and
        max pool per channel for a dense one (the file's ``bn`` and ``relu``).
    dense, bias
        Whether the weights are dense (time domain, ``[M, N, Kd, Kr, Kc]``) and, for a dense
        layer, whether it adds a bias per output channel.
    in_layout, out_layout
        How the input and the output sit in slot parts (:data:`LAYOUTS`): ``slots`` for the
        frequency domain; a dense layer reads the host's ``spread`` network input and writes
        ``lanes``, or reads an irfft's ``deferred`` slots and writes ``lane0``.
    """

    name: str
    kind: Literal["conv", "fc", "gap", "rfft", "irfft"]
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
    dense: bool = False
    bias: bool = False
    in_layout: Layout = "slots"
    out_layout: Layout = "slots"

    @property
    def weighted(self) -> bool:
        """Whether the layer has weights (a conv or an fc layer)."""
        return self.kind in ("conv", "fc")

    @property
    def transform(self) -> bool:
        """Whether the layer is a step between the domains (rfft or irfft)."""
        return self.kind in ("rfft", "irfft")

    @property
    def out_domain(self) -> Literal["time", "freq"]:
        """The domain of the output: ``freq`` for slots, ``time`` otherwise."""
        return "freq" if self.out_layout == SLOTS else "time"

    @property
    def padded_in_channels(self) -> int:
        """``N`` rounded up to a multiple of ``B``."""
        return round_up(self.in_channels, self.block_size)

    @property
    def padded_out_channels(self) -> int:
        """``M`` rounded up to a multiple of ``B``."""
        return round_up(self.out_channels, self.block_size)

    @property
    def in_slots(self) -> int:
        """Slots of the input map in its layout: a block per channel in ``lane0`` and
        ``spread``, else half the padded channels."""
        if self.in_layout in (LANE0, SPREAD):
            return self.in_channels * self.block_size // 2
        return self.padded_in_channels // 2

    @property
    def out_slots(self) -> int:
        """Slots of the output map in its layout (as :attr:`in_slots`)."""
        if self.out_layout == LANE0:
            return self.out_channels * self.block_size // 2
        return self.padded_out_channels // 2

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
        if self.transform:
            return 0
        if self.in_layout == SPREAD:  # every real input channel a block of its own
            return accumulator_bound(self.in_channels, self.kernel)
        bound = accumulator_bound(self.padded_in_channels // self.block_size, self.kernel)
        # lane0: lane 0 of the irfft sums every part of a block's accumulators, B in all
        # (slot 0's two parts once, each other slot's real part twice)
        return self.block_size * bound if self.out_layout == LANE0 else bound

    @property
    def dense_ops(self) -> int:
        """Dense-equivalent operations ``2*M*N*Kd*Kr*Kc*Do*Ho*Wo`` (real M, N; conv shape);
        0 for ``gap``, ``rfft`` and ``irfft``."""
        if not self.weighted:
            return 0
        return (
            2 * self.out_channels * self.in_channels * self.kernel_volume
            * math.prod(self.conv_shape)
        )

    @property
    def dense_params(self) -> int:
        """Uncompressed weights ``M*N*Kd*Kr*Kc``; 0 for a layer without weights."""
        if not self.weighted:
            return 0
        return self.out_channels * self.in_channels * self.kernel_volume

    @property
    def circulant_params(self) -> int:
        """Stored generator entries ``P*Q*B*Kvol`` (padded channels), a dense layer's weights
        ``M*N*Kvol``; 0 for a layer without weights."""
        if not self.weighted:
            return 0
        if self.dense:
            return self.dense_params
        return self.padded_out_channels * self.padded_in_channels * self.kernel_volume \
            // self.block_size

    @property
    def out_dims(self) -> tuple[int, int, int, int]:
        """Output ``(channels, D, H, W)``."""
        return (self.out_channels, *self.out_shape)

    @property
    def takes_lane0(self) -> bool:
        """Whether the post chain takes lane 0 of the inverse transform of the layer's
        accumulators (a dense layer on an irfft's slots, output ``lane0``)."""
        return self.out_layout == LANE0

    def datapath(self) -> ResolvedLayer:
        """This layer as the block-circulant datapath computes it (``docs/golden.md``, "Dense
        layers on the block-circulant datapath"): a dense layer that reads ``spread`` as a
        block-circulant one of ``N*B`` input channels (a block per real input channel), one
        that reads ``deferred`` slots as one of ``M*B`` output channels (a block per output
        channel), slots in and out; any other layer itself. Its weights are the
        quantized network's (``QuantizedLayer.wq_re``); its ``dense_ops`` are not the
        network's."""
        if not self.dense:
            return self
        if self.in_layout == SPREAD:
            channels = {"in_channels": self.in_channels * self.block_size}
        else:
            channels = {"out_channels": self.out_channels * self.block_size}
        return replace(self, dense=False, bias=False, in_layout=SLOTS, out_layout=SLOTS,
                       **channels)

    def fold_depth_taps(self, depths: int = 1, *, rows: int = 1) -> ResolvedLayer:
        """This conv with its ``Kd`` depth taps folded into input channels, with ``depths > 1``
        that many consecutive output depths into output channels, and with ``rows > 1`` that
        many row-shifted copies of the input in input channels as well.

        The folded layer reads ``T = Kd + (depths - 1) * sd`` copies of the (channel-padded)
        input, copy ``t`` shifted to input depth ``z*depths*sd + t - pd`` for folded depth
        ``z`` (zero outside the map): its input has ``T * padded_in_channels`` channels (channel
        ``t*padded_in_channels + c``) and depth ``Do / depths``, its kernel, stride and padding
        are ``(1, Kr, Kc)``, ``(1, sr, sc)`` and ``(0, pr, pc)``. Its output channel ``j*M +
        m`` (``M`` padded) at depth ``z`` is output channel ``m`` at depth ``z*depths + j``, so
        its weight block ``(j*P + p, t*Q + q)`` is the original block ``(p, q)`` at depth tap
        ``t - j*sd`` (zero where that is no tap) and its post-processing is the original's,
        repeated per ``j``.

        With ``rows = U > 1`` each depth copy is there ``U`` times, copy ``(t, u)`` (channel
        ``(t*U + u)*padded_in_channels + c``) at folded row ``y`` holding input row ``y + u -
        pr``: the input has ``T * U * padded_in_channels`` channels and ``(Ho - 1)*sr + Kr - U
        + 1`` rows, the kernel ``Kr - U + 1`` rows (stride ``sr``, no row padding), and row
        tap ``k`` of copy ``u`` is the original row tap ``k + u`` where ``k == 0`` or ``u == U
        - 1`` (original tap ``r`` is at copy ``u = min(r, U - 1)``), zero elsewhere: every
        original tap once. ``U = Kr`` leaves a ``1 x 1 x Kc`` kernel.

        Either way it computes the same sums, in another order, so its integer accumulators
        equal the original's exactly (:mod:`fcircnn.models.fold`). Its ``in_channels`` count
        the padding of every tap's block, so its ``dense_ops`` are not the network's:
        throughput figures use the original layer (:attr:`fcircnn.gen.plan.LayerPlan.
        layer`).

        Raises
        ------
        ValueError
            If the layer is not a conv or ``rows`` is not in ``1..Kr``; with ``depths > 1``
            also if its output depth is not a multiple of ``depths``, its output channels are
            not whole slot groups, or its pool mixes depths (a depth window, stride or padding
            other than 1, 1, 0).
        """
        if self.kind != "conv":
            raise ValueError(f"layer {self.name!r}: only a conv folds its depth taps, not "
                             f"a {self.kind} layer")
        kd, kr, kc = self.kernel
        if isinstance(rows, bool) or not isinstance(rows, int) or not 1 <= rows <= kr:
            raise ValueError(f"layer {self.name!r}: folds 1..{kr} row copies, not {rows!r}")
        out = {}
        if depths > 1:
            pool = self.pool
            if self.conv_shape[0] % depths or self.out_channels % SLOT_GROUP_CHANNELS or (
                    pool is not None and (pool.window[0], pool.stride[0], pool.padding[0])
                    != (1, 1, 0)):
                raise ValueError(f"layer {self.name!r}: folds no {depths} output depths (needs "
                                 f"a depth a multiple of {depths}, whole slot groups of output "
                                 f"channels and no pool across depths)")
            out = {"out_channels": depths * self.out_channels,
                   "conv_shape": (self.conv_shape[0] // depths, *self.conv_shape[1:]),
                   "out_shape": (self.out_shape[0] // depths, *self.out_shape[1:])}
        copies = kd + (depths - 1) * self.stride[0]
        depth = self.conv_shape[0] // depths
        if rows == 1:
            return replace(self, in_channels=copies * self.padded_in_channels,
                           in_shape=(depth, *self.in_shape[1:]),
                           kernel=(1, kr, kc), stride=(1, *self.stride[1:]),
                           padding=(0, *self.padding[1:]), **out)
        k = kr - rows + 1
        height = (self.conv_shape[1] - 1) * self.stride[1] + k
        return replace(self, in_channels=copies * rows * self.padded_in_channels,
                       in_shape=(depth, height, self.in_shape[2]), kernel=(1, k, kc),
                       stride=(1, *self.stride[1:]), padding=(0, 0, self.padding[2]), **out)

    def subsample_input(self) -> ResolvedLayer:
        """This 1x1x1 conv with stride ``(sd, sr, sc)`` reading only the input planes and rows
        it uses.

        A 1x1x1 kernel without padding reads input voxel ``(sd*z, sr*y, sc*x)`` for output
        voxel ``(z, y, x)``: every other plane and row of a stride-2 shortcut is never used.
        The subsampled layer reads the same map with its plane and row strides multiplied by
        ``sd`` and ``sr`` (the compiler's descriptor strides): its input shape is ``(ceil(D /
        sd), ceil(H / sr), W)`` and its stride ``(1, 1, sc)`` (the width keeps its stride: a
        row is one burst). Channels, weights, post-processing and output are the original's and
        so are the sums; only the bytes read shrink (ResNet-18's shortcuts read a quarter of
        their input).

        Raises
        ------
        ValueError
            If the layer is not a 1x1x1 conv without padding with a depth or row stride > 1.
        """
        if (self.kind != "conv" or self.kernel != (1, 1, 1) or self.padding != (0, 0, 0)
                or self.stride[:2] == (1, 1)):
            raise ValueError(f"layer {self.name!r}: only a 1x1x1 conv without padding and with "
                             f"a depth or row stride > 1 reads a subsampled input")
        (d, h, w), (sd, sr, sc) = self.in_shape, self.stride
        return replace(self, in_shape=(-(-d // sd), -(-h // sr), w), stride=(1, 1, sc))

    def useful_taps(self) -> tuple[range, range, range]:
        """Per axis ``(d, r, c)``, the kernel taps this conv keeps when its taps are trimmed
        (:meth:`trim_taps`): every tap of the axis, or the taps from the first to the last one
        that reads inside the input map for at least one output voxel.

        Output ``o`` of an axis with input size ``I``, stride ``s`` and padding ``p`` reads
        input ``o*s + k - p`` at tap ``k``; a tap outside ``[max(0, p - (O-1)*s), min(K-1,
        p + I - 1)]`` reads padding for every output ``o < O``, so each of its products is
        zero. An axis is trimmed only if the kept taps, with padding reduced by the number of
        leading taps dropped, give the same output size by the layer rule ``(I + 2p - K) // s
        + 1`` and keep the padding below the kernel: ResNet-18's stage 4 (a 1x4x4 map, 3x3x3
        kernel, padding 1) keeps depth tap 1 of 3, a 2-deep map at stride 2 taps 1-2.

        Raises
        ------
        ValueError
            If the layer is not a conv.
        """
        if self.kind != "conv":
            raise ValueError(f"layer {self.name!r}: only a conv trims its kernel taps, not "
                             f"a {self.kind} layer")
        kept = []
        for size, out, k, s, p in zip(self.in_shape, self.conv_shape, self.kernel, self.stride,
                                      self.padding, strict=True):
            first, last = max(0, p - (out - 1) * s), min(k - 1, p + size - 1)
            k2, p2 = last - first + 1, p - first
            same = _window_out(size, k2, s, p2) == out and p2 < k2
            kept.append(range(first, last + 1) if same else range(k))
        return kept[0], kept[1], kept[2]

    def trim_taps(self) -> ResolvedLayer:
        """This conv with only its :meth:`useful_taps`: kernel the kept taps' extent, padding
        reduced by the leading taps dropped; input, output, stride and post-processing are the
        original's. The dropped taps multiply padding only, so the trimmed layer's integer
        accumulators equal the original's exactly; it reads smaller input boxes, fewer weight
        bytes and takes fewer PE beats (:func:`fcircnn.models.fold.trim_weight_slots` moves
        the weights). Its ``dense_ops`` are not the network's: throughput figures use the
        original layer (:attr:`fcircnn.gen.plan.LayerPlan.layer`).

        Raises
        ------
        ValueError
            If the layer is not a conv or keeps every tap.
        """
        kept = self.useful_taps()
        if all(len(r) == k for r, k in zip(kept, self.kernel, strict=True)):
            raise ValueError(f"layer {self.name!r}: every kernel tap reads the input map; "
                             f"there is nothing to trim")
        return replace(self, kernel=tuple(len(r) for r in kept),
                       padding=tuple(p - r.start for p, r in zip(self.padding, kept,
                                                                 strict=True)))

    def view_gap_input(self, channels: int) -> ResolvedLayer:
        """This gap layer on a map one plane deep, its ``C`` input channels read as
        ``channels`` channels of a ``k``-plane map, ``k = C / channels``.

        The bytes do not change: in NC/8DHW8 a ``(1, H, W)`` map of ``C`` channels is its
        ``C/16`` slot groups one after the other, and the same bytes are a ``(k, H, W)`` map of
        ``channels`` channels whose slot group ``g'`` at plane ``j`` is the original group ``g'*k
        + j``. Pooling each plane (kernel ``(1, H, W)``, stride 1) gives a ``(k, 1, 1)`` map of
        ``channels`` channels whose bytes are the original's ``(1, 1, 1)`` output of ``C``
        channels (group ``g'`` at depth ``j`` is group ``g'*k + j``). The engine then runs one
        channel tile of ``channels`` (a core's ``Tn``) instead of ``(C/Tn)**2`` weight tiles of
        which only the diagonal is not zero. The sums are the same voxel sums: each block of a
        slot group keeps its slots (``B <= 16``), so every block's weights are the same
        identity block (:func:`fcircnn.gen.pack.gap_weight_slots`) and the post
        parameters of slot ``s`` those of every slot ``s + 8*i`` (periodic per slot group, as
        per-tensor or per-bin scales are). ``dense_ops`` stay 0.

        Raises
        ------
        ValueError
            If the layer is not a gap layer on a map one plane deep, ``channels`` is not a
            whole number of slot groups dividing the padded input channels at least twice, or
            the block size is above a slot group.
        """
        d, h, w = self.in_shape
        c = self.padded_in_channels
        if self.kind != "gap" or d != 1:
            raise ValueError(f"layer {self.name!r}: only a gap layer on a map one plane deep "
                             f"reads its input as planes of channel tiles")
        if (isinstance(channels, bool) or not isinstance(channels, int) or channels <= 0
                or channels % SLOT_GROUP_CHANNELS or c % channels or c // channels < 2
                or self.block_size > SLOT_GROUP_CHANNELS):
            raise ValueError(f"layer {self.name!r}: {c} input channels (block size "
                             f"{self.block_size}) are not read as planes of {channels!r} "
                             f"channels (needs a multiple of {SLOT_GROUP_CHANNELS} dividing "
                             f"them at least twice and blocks within a slot group)")
        k = c // channels
        return replace(self, in_channels=channels, out_channels=channels, in_shape=(k, h, w),
                       conv_shape=(k, 1, 1), out_shape=(k, 1, 1))

    def fold_fc_input(self) -> ResolvedLayer:
        """This fc layer with its 1x1x1 input read as a :data:`FC_FOLD_SHAPE` map.

        The bytes do not change: in NC/8DHW8 a 1x1x1 map of ``C`` channels is its ``C/16``
        slot groups one after the other, and the same bytes are a ``(1, 4, 4)`` map of
        ``C/16`` channels whose slot group ``g`` at position ``p = 4*h + w`` is the original
        group ``16*g + p``. The folded layer has ``in_channels = C/16``, ``in_shape`` and
        ``kernel`` :data:`FC_FOLD_SHAPE`; its weight block ``(m, q')`` at tap ``p`` is the
        original block ``(m, q)``, ``q = (16*(q' // b) + p) * b + q' % b`` with ``b = 16/B``
        blocks per slot group (:func:`fcircnn.models.fold.fold_fc_weight_slots`). It computes
        the same sums in another order, so the integer accumulators are equal: the engine reads
        16 weight taps per tile instead of one (C3D fc7: 8 KB weight tiles for 512 B ones).
        Like :meth:`fold_depth_taps`, only the input side changes; ``dense_ops`` are not the
        network's.

        Raises
        ------
        ValueError
            If the layer is not an fc layer on a 1x1x1 input, or its padded input channels are
            not whole slot groups at every position of the map.
        """
        positions = math.prod(FC_FOLD_SHAPE)
        if self.kind != "fc" or self.in_shape != (1, 1, 1):
            raise ValueError(f"layer {self.name!r}: only an fc layer on a 1x1x1 input folds its "
                             f"input to {fmt3(FC_FOLD_SHAPE)}")
        if self.padded_in_channels % (positions * SLOT_GROUP_CHANNELS):
            raise ValueError(f"layer {self.name!r}: {self.padded_in_channels} input channels are "
                             f"not a multiple of {positions * SLOT_GROUP_CHANNELS}")
        return replace(self, in_channels=self.padded_in_channels // positions,
                       in_shape=FC_FOLD_SHAPE, kernel=FC_FOLD_SHAPE)


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
    layout: str | None = None  # None: the network input (the host writes what its reader needs)


def resolve_network(net: NetworkSpec) -> tuple[tuple[ResolvedLayer, ...], list[Problem]]:
    """Check references, block sizes and shapes; infer every layer's shapes.

    Returns the layers that resolved and every problem found (a layer after an error still
    gets its own checks where its input is known).
    """
    return _Resolver(net).run()


class _Resolver:
    """One pass over a network's layers, in order (see :func:`resolve_network`)."""

    def __init__(self, net: NetworkSpec) -> None:
        self.net = net
        self.problems: list[Problem] = []
        self.names: dict[str, int] = {}
        self.outputs: dict[str, _Src | None] = {}  # None: the layer had an error
        self.resolved: list[ResolvedLayer] = []
        self.order = [layer.name for layer in net.layers]

    def report(self, i: int, name: str, field: str | None, message: str) -> None:
        self.problems.append(Problem(_layer_key(i, name, field), message))

    def run(self) -> tuple[tuple[ResolvedLayer, ...], list[Problem]]:
        prev: str | None = None
        for i, cfg in enumerate(self.net.layers):
            layer = self.layer(i, cfg, prev)
            if layer is None:
                self.outputs.setdefault(cfg.name, None)
            else:
                self.resolved.append(layer)
                self.outputs.setdefault(cfg.name, _Src(i, layer.out_channels, layer.out_shape,
                                                       layer.block_size, layer.out_layout))
                self.check_accumulator(layer)
            prev = cfg.name
        self.check_classes()
        return tuple(self.resolved), self.problems

    def lookup(self, i: int, layer_name: str, field: str, ref: str) -> tuple[bool, _Src | None]:
        """Resolve a reference to an earlier layer; ``(ok, source)``."""
        earlier = self.order[:i]
        must = f"must name an earlier layer: {', '.join(earlier) or '(none)'}"
        if ref == layer_name:
            self.report(i, layer_name, field, f"a layer cannot take its own output "
                                              f"({show(ref)}); must name an earlier layer")
            return False, None
        if ref not in self.order:
            hint = difflib.get_close_matches(ref, earlier, n=1)
            tip = f" (did you mean {hint[0]!r}?)" if hint else ""
            self.report(i, layer_name, field, f"unknown layer {show(ref)}{tip}; {must}")
            return False, None
        where = self.order.index(ref)
        if where > i:
            self.report(i, layer_name, field, f"forward reference: {show(ref)} is "
                                              f"layers[{where}], after this layer; {must}")
            return False, None
        return True, self.outputs.get(ref)

    def layer(self, i: int, cfg: Any, prev: str | None) -> ResolvedLayer | None:
        """The resolved layer ``i``, or ``None`` after reporting why it cannot be."""
        ok = True
        if cfg.name in self.names:
            self.report(i, cfg.name, "name", f"duplicate layer name {cfg.name!r} (already used "
                                             f"by layers[{self.names[cfg.name]}]); names must "
                                             "be unique")
            ok = False
        else:
            self.names[cfg.name] = i
        block = cfg.block_size if cfg.block_size is not None else self.net.block_size
        src_name, src, found = self.source(i, cfg, prev, block)
        ok = ok and found
        in_shape = src.shape if src is not None else None
        in_ch = src.channels if src is not None else 0
        out_ch = cfg.out_channels if cfg.type in ("conv", "fc") else in_ch
        if cfg.type == "conv":
            geometry, found = self.conv_geometry(i, cfg, in_shape, ok)
            ok = ok and found
        elif cfg.type in ("rfft", "irfft") and in_shape is not None:  # voxel by voxel
            geometry = ((1, 1, 1), (1, 1, 1), (0, 0, 0), None, in_shape, in_shape)
        elif in_shape is not None:  # fc, gap: the kernel is the whole map
            geometry = (in_shape, (1, 1, 1), (0, 0, 0), None, (1, 1, 1), (1, 1, 1))
        else:
            geometry = (None, (1, 1, 1), (0, 0, 0), None, None, None)
        kernel, stride, padding, pool, conv_shape, out_shape = geometry
        dense = getattr(cfg, "dense", False)
        ok = self.check_domain_keys(i, cfg) and ok
        layouts = self.layouts(i, cfg, src_name, src) if src is not None else None
        ok = ok and layouts is not None
        residual = getattr(cfg, "residual", None)
        if residual is not None and not dense:
            ok = self.check_residual(i, cfg.name, residual, out_ch, conv_shape, block) and ok
        if not ok or None in (in_shape, conv_shape, out_shape, kernel):
            return None
        in_layout, out_layout = layouts
        return ResolvedLayer(
            name=cfg.name, kind=cfg.type, index=i, input=src_name, residual=residual,
            block_size=block, in_channels=in_ch, out_channels=out_ch, in_shape=in_shape,
            conv_shape=conv_shape, out_shape=out_shape, kernel=kernel, stride=stride,
            padding=padding, cbn=getattr(cfg, "bn" if dense else "cbn", False),
            crelu=getattr(cfg, "relu" if dense else "crelu", False), pool=pool, dense=dense,
            bias=getattr(cfg, "bias", False), in_layout=in_layout, out_layout=out_layout)

    def check_domain_keys(self, i: int, cfg: Any) -> bool:
        """A dense layer takes ``bias``, ``bn`` and ``relu``; a block-circulant one ``cbn``,
        ``crelu`` and ``residual``: report each key set on the wrong kind."""
        if cfg.type not in ("conv", "fc"):
            return True
        wrong = (("cbn", "crelu", "residual") if cfg.dense else ("bias", "bn", "relu"))
        ok = True
        for key in wrong:
            if getattr(cfg, key) not in (None, False):
                why = ("a dense layer (dense: true) computes in the time domain: its batch "
                       "norm and ReLU are bn and relu, per channel, and it takes no residual"
                       if cfg.dense else
                       "only a dense layer (dense: true) takes bias, bn and relu; a "
                       "block-circulant layer's batch norm and ReLU are cbn and crelu, on slots")
                self.report(i, cfg.name, key, f"not allowed here: {why}")
                ok = False
        return ok

    def layouts(self, i: int, cfg: Any, src_name: str | None,
                src: _Src) -> tuple[Layout, Layout] | None:
        """The layer's input and output layouts (:data:`LAYOUTS`), or ``None`` after reporting
        why its input cannot feed it. The network input (``src.layout is None``) is what its
        reader needs: the host's rfft, or a dense layer's spread."""
        layout, kind = src.layout, cfg.type
        what = f"its input {src_name!r}" if src_name else "the network input"
        dense = kind in ("conv", "fc") and cfg.dense
        if dense:
            if layout is None:
                return SPREAD, LANES
            if layout == DEFERRED:
                return DEFERRED, LANE0
            self.report(i, cfg.name, "dense" if layout == SLOTS else "input",
                        f"a dense layer reads the network input or an irfft's output (directly "
                        f"or through gap layers); {what} is "
                        + ("slots: put an irfft step before this layer ({name: ..., type: "
                           "irfft})" if layout == SLOTS else
                           "a time-domain map made on the accelerator, which a dense layer "
                           "cannot read (each of its channels would need a block of its own)"))
            return None
        if kind == "rfft" and layout is None:  # the host's rfft
            return SLOTS, SLOTS
        if layout is None:
            layout = SLOTS  # the host's rfft
        if kind in ("conv", "fc", "irfft") and layout != SLOTS:
            fix = ("put an rfft step before this layer ({name: ..., type: rfft})"
                   if layout == LANES else "it is the time domain")
            self.report(i, cfg.name, "type" if kind == "irfft" else "input",
                        f"a{'n irfft' if kind == 'irfft' else ' block-circulant layer'} reads "
                        f"slots; {what} is a time-domain map ({layout}): {fix}")
            return None
        if kind == "irfft":
            return SLOTS, DEFERRED
        if kind == "rfft":
            if layout == LANES:
                return LANES, SLOTS
            self.report(i, cfg.name, "type",
                        f"an rfft reads the network input or a dense layer's output (directly "
                        f"or through gap layers); {what} is "
                        + ("already slots" if layout == SLOTS else
                           "an irfft's output: the irfft and the rfft cancel, drop both"
                           if layout == DEFERRED else
                           "a dense layer's output after an irfft, one channel per block, "
                           "which no rfft on the accelerator gathers"))
            return None
        return layout, layout  # gap (and a block-circulant layer): the layout is kept

    def source(self, i: int, cfg: Any, prev: str | None,
               block: int) -> tuple[str | None, _Src | None, bool]:
        """The layer's input: ``(name, source, ok)`` (name ``None``: the network input)."""
        src_name = cfg.input if cfg.input is not None else prev
        ok = True
        if cfg.input is not None:
            ok, src = self.lookup(i, cfg.name, "input", cfg.input)
        elif prev is None:
            inp = self.net.input
            src = _Src(-1, inp.channels, inp.shape, block)
        else:
            src = self.outputs.get(prev)
        if src is None or src.shape is None:
            return src_name, src, False
        if src.block_size != block:
            self.report(i, cfg.name, "block_size",
                        f"block size {block} differs from B = {src.block_size} of "
                        f"{src_name!r} that feeds this layer (slots of different B are "
                        "different FFTs)")
            ok = False
        return src_name, src, ok

    def conv_geometry(self, i: int, cfg: Any, in_shape: Vec3Tuple | None, ok: bool):
        """A conv's ``(kernel, stride, padding, pool, conv_shape, out_shape)`` and whether it
        is valid (the shapes are ``None`` when they cannot be inferred)."""
        kernel, stride, padding = cfg.kernel, cfg.stride, cfg.padding
        pool = None
        bad = [a for a in range(3) if padding[a] >= kernel[a]]
        if bad:
            self.report(i, cfg.name, "padding",
                        f"padding >= kernel on axis {'/'.join('DHW'[a] for a in bad)}: padding "
                        f"{list(padding)}, kernel {list(kernel)}; each padding must be < kernel")
            ok = False
        if cfg.pool is not None:
            p = cfg.pool
            pool = Pool(p.window, p.stride or p.window, p.padding or (0, 0, 0))
            bad = [a for a in range(3) if pool.padding[a] >= pool.window[a]]
            if bad:
                self.report(i, cfg.name, "pool.padding",
                            f"pool padding >= window on axis {'/'.join('DHW'[a] for a in bad)}: "
                            f"padding {list(pool.padding)}, window {list(pool.window)}; each "
                            "padding must be < window")
                ok = False
        conv_shape = out_shape = None
        if ok and in_shape is not None:
            conv_shape = typing.cast(Vec3Tuple, tuple(
                _window_out(in_shape[a], kernel[a], stride[a], padding[a]) for a in range(3)))
            if min(conv_shape) < 1:
                self.report(i, cfg.name, "kernel",
                            f"output would be empty ({fmt3(conv_shape)}): input "
                            f"{fmt3(in_shape)} with padding {list(padding)} is smaller than "
                            f"kernel {list(kernel)}; (size + 2*padding - kernel) // stride + 1 "
                            "must be >= 1")
                ok, conv_shape = False, None
        if ok and conv_shape is not None:
            out_shape, ok = self.pooled_shape(i, cfg.name, conv_shape, pool)
        return (kernel, stride, padding, pool, conv_shape, out_shape), ok

    def pooled_shape(self, i: int, name: str, conv_shape: Vec3Tuple,
                     pool: Pool | None) -> tuple[Vec3Tuple | None, bool]:
        if pool is None:
            return conv_shape, True
        out_shape = typing.cast(Vec3Tuple, tuple(
            _window_out(conv_shape[a], pool.window[a], pool.stride[a], pool.padding[a])
            for a in range(3)))
        if min(out_shape) < 1:
            self.report(i, name, "pool.window",
                        f"pool output would be empty ({fmt3(out_shape)}): conv output "
                        f"{fmt3(conv_shape)} with padding {list(pool.padding)} is smaller "
                        f"than window {list(pool.window)}")
            return None, False
        return out_shape, True

    def check_residual(self, i: int, name: str, residual: str, out_ch: int,
                       conv_shape: Vec3Tuple | None, block: int) -> bool:
        found, res = self.lookup(i, name, "residual", residual)
        if not found:
            return False
        if res is None or res.shape is None or conv_shape is None:
            return True
        ok = True
        if (res.channels, *res.shape) != (out_ch, *conv_shape):
            self.report(i, name, "residual",
                        f"shape mismatch: {residual!r} gives {fmt_dims(res.channels, res.shape)}"
                        f", this layer's output before pool is {fmt_dims(out_ch, conv_shape)} "
                        "(channels x D x H x W); they must be equal")
            ok = False
        if res.layout not in (None, SLOTS):
            self.report(i, name, "residual",
                        f"{residual!r} is a time-domain map ({res.layout}); a residual adds "
                        "slots to slots")
            ok = False
        if res.block_size != block:
            self.report(i, name, "residual",
                        f"block size mismatch: {residual!r} has B = {res.block_size}, this "
                        f"layer has B = {block} (slots of different B are different FFTs)")
            ok = False
        return ok

    def check_accumulator(self, layer: ResolvedLayer) -> None:
        """The numeric contract's int32 accumulator bound (docs/contract.md section 5)."""
        bound = layer.accumulator_bound
        if bound < 2 ** (ACC_BITS - 1):
            return
        why = ("sums every voxel of its input" if layer.kind == "gap" else
               f"sums {layer.padded_in_channels} input channels over a {fmt3(layer.kernel)} "
               "kernel")
        self.report(layer.index, layer.name, "kernel" if layer.kind == "conv" else None,
                    f"accumulator bound {bound} does not fit the signed {ACC_BITS}-bit "
                    f"accumulator (must be < 2**{ACC_BITS - 1}): the layer {why}; use fewer "
                    "input channels or a smaller kernel or map")

    def check_classes(self) -> None:
        net, resolved = self.net, self.resolved
        if not resolved or len(resolved) != len(net.layers):
            return
        last_i, last = len(net.layers) - 1, net.layers[-1]
        channels = resolved[-1].out_channels
        if channels == net.classes:
            return
        if last.type == "gap":
            self.problems.append(Problem("classes", f"must equal the output channels of the "
                                                    f"last layer {last.name!r} ({channels}), "
                                                    f"not {net.classes}"))
        else:
            self.report(last_i, last.name, "out_channels", f"the last layer must output "
                                                           f"classes = {net.classes} channels, "
                                                           f"not {channels}")
