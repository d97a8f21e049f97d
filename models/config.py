"""Typed, strict configuration: network and accelerator YAML files to validated objects.

Two kinds of file are read here:

* a **network file** (``models/c3d.yaml``) describes a block-circulant 3D CNN layer by layer;
  :func:`load_network` validates it and infers every layer's shapes
  (:attr:`NetworkConfig.resolved`);
* an **accelerator file** (``models/c3d_zcu102.yaml``) describes the hardware generated for one
  network: device, clock, block size, bus and the PE cores with their tiling;
  :func:`load_accelerator` validates it, loads the network it names and checks that every layer
  runs on some core.

Validation is strict: unknown keys are rejected, nothing is coerced (``"3"`` and ``true`` are
not integers), nothing is clamped. Every problem found in a file is reported at once in a
:class:`ConfigError` whose lines read ``<file>: <key path>: <message>``, the key path naming the
layer or core (``layers[3] (conv2a).kernel``) and the message naming the allowed values.
"""

from __future__ import annotations

import difflib
import math
import os
import re
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from fcircnn.report import format_table

from .spectral import ACC_BITS, BLOCK_SIZES, INT8_MAX, accumulator_bound
from .yaml_doc import DocumentError, read_document

__all__ = [
    "ALLOWED_BLOCK_SIZES",
    "ALLOWED_BUS_WIDTHS",
    "INLINE_NETWORK",
    "UNROLL_LOOPS",
    "AcceleratorConfig",
    "ConfigError",
    "ConvLayer",
    "CoreConfig",
    "DeviceConfig",
    "FcLayer",
    "GapLayer",
    "InputShape",
    "NetworkConfig",
    "Pool",
    "PoolConfig",
    "Problem",
    "ResolvedLayer",
    "Resources",
    "bind_accelerator",
    "builtin_path",
    "channel_tile_problems",
    "describe_accelerator",
    "describe_network",
    "is_accelerator_data",
    "load_accelerator",
    "load_config",
    "load_network",
]

#: Legal block sizes ``B`` (even powers of two).
ALLOWED_BLOCK_SIZES: tuple[int, ...] = BLOCK_SIZES
#: Legal AXI data widths (NC/8DHW8 packs 8 slots x 16 bit per beat).
ALLOWED_BUS_WIDTHS: tuple[int, ...] = (128,)
#: Loop names a core may unroll.
UNROLL_LOOPS: tuple[str, ...] = ("td", "tr", "tc", "tn", "tm")

Vec3Tuple = tuple[int, int, int]

# The hardware's limits, which the schema enforces so that every command refuses the same
# files (docs/errors.md gives each with its reason).
#: Channels of a map or layer: the descriptor counts slots (channels / 2) in 16 bits.
MAX_CHANNELS = 65536
#: Map size per axis (``D``, ``H``, ``W``): 16-bit descriptor fields.
MAX_MAP_SIZE = 65535
#: Kernel and conv stride per axis: the input buffer's limit (``fcircnn.hw.buffer_input``).
MAX_KERNEL = 64
#: Conv and pool padding per axis: 8-bit descriptor fields.
MAX_PADDING = 255
#: Pool window and stride per axis: CMaxPool's limit (``fcircnn.hw.post_maxpool``).
MAX_POOL_WINDOW = 3
#: Layers of a network: the descriptor's 16-bit layer index.
MAX_LAYERS = 65535
#: ``Tn`` and ``Tm``: the PE array and buffers are built for at most 1024 channels a tile.
MAX_CHANNEL_TILE = 1024
#: ``Td``, ``Tr``, ``Tc``: the descriptor's 8-bit tile fields.
MAX_TILE = 255
#: :attr:`AcceleratorConfig.network_file` of an accelerator file whose ``network:`` is the
#: network itself rather than a path.
INLINE_NETWORK = "(inline)"


# --------------------------------------------------------------------------------------------
# Errors


@dataclass(frozen=True)
class Problem:
    """One problem in a configuration file.

    Attributes
    ----------
    key : str
        Key path of the offending value, e.g. ``"layers[3] (conv2a).kernel"`` or
        ``"cores[0] (main).tm"``; ``"line 3, column 5"`` for YAML syntax errors; empty when the
        problem concerns the whole file (e.g. the file does not exist).
    message : str
        What is wrong, naming the allowed values or range.
    """

    key: str
    message: str

    def format(self, file: str) -> str:
        """Return the one-line form ``"<file>: <key>: <message>"`` (key omitted when empty)."""
        if self.key:
            return f"{file}: {self.key}: {self.message}"
        return f"{file}: {self.message}"


class ConfigError(Exception):
    """One or more problems in one configuration file.

    Parameters
    ----------
    file : str or os.PathLike
        The file the problems are in, as the user named it.
    problems : iterable of Problem
        At least one problem.

    Notes
    -----
    ``str(err)`` has one line per problem: ``"<file>: <key>: <message>"``.
    """

    def __init__(self, file: str | os.PathLike[str], problems: Iterable[Problem]) -> None:
        self.file: str = os.fspath(file)
        self.problems: list[Problem] = list(problems)
        super().__init__(str(self))

    def __str__(self) -> str:
        return "\n".join(p.format(self.file) for p in self.problems)


class _Problems(ValueError):
    """Carrier for semantic problems raised from a root model validator."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__("; ".join(f"{p.key}: {p.message}" for p in problems))


def _fail(message: str) -> PydanticCustomError:
    return PydanticCustomError("fcircnn", message.replace("{", "{{").replace("}", "}}"))


def _show(value: object) -> str:
    """Render a YAML value for messages (YAML spelling for booleans and null)."""
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return "null"
    if isinstance(value, str):
        return _clip(repr(value))
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        head = ", ".join(_show(v) for v in value[:_SHOW_ITEMS])
        more = f", ... ({len(value)} entries)" if len(value) > _SHOW_ITEMS else ""
        return _clip(f"[{head}{more}]")
    return _clip(repr(value))


#: Entries of a list and characters of a value a message shows at most.
_SHOW_ITEMS, _SHOW_CHARS = 6, 80


def _clip(text: str) -> str:
    return text if len(text) <= _SHOW_CHARS else text[:_SHOW_CHARS - 3] + "..."


def _describe(value: object) -> str:
    """Describe a wrongly typed YAML value: ``"the string '3'"``, ``"a boolean (true)"``."""
    if isinstance(value, bool):
        return f"a boolean ({_show(value)})"
    if value is None:
        return "null"
    if isinstance(value, str):
        return f"the string {_show(value)}"
    if isinstance(value, float):
        return f"a number with a fraction ({value!r})"
    if isinstance(value, int):
        return f"the integer {value}"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return f"a list ({_show(value)})"
    return f"{type(value).__name__} {_clip(repr(value))}"


# --------------------------------------------------------------------------------------------
# Field types


def _check_block_size(value: int) -> int:
    if value not in ALLOWED_BLOCK_SIZES:
        raise _fail(f"B must be an even power of two: 4, 8 or 16, not {value}")
    return value


def _check_identifier(value: str) -> str:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value):
        raise _fail(
            "must be an identifier (letters, digits and _, not starting with a digit), "
            f"not {_show(value)}"
        )
    return value


def _check_nonempty(value: str) -> str:
    if not value.strip():
        raise _fail("must not be empty")
    return value


def _check_bus_width(value: int) -> int:
    if value not in ALLOWED_BUS_WIDTHS:
        raise _fail(
            "only 128 is supported (NC/8DHW8: 8 slots x 16 bit per beat), "
            f"not {value}"
        )
    return value


def _check_clock(value: float) -> float:
    if not 0 < value <= 1000:
        raise _fail(f"must be in the range (0, 1000] MHz, not {value}")
    return value


def _check_address_width(value: int) -> int:
    if not 32 <= value <= 64:
        raise _fail(f"must be in the range 32..64 bits, not {value}")
    return value


def _to_vec3(value: object) -> object:
    """Accept ``k`` (meaning ``[k, k, k]``) or a list of three entries, as a tuple."""
    if isinstance(value, int) and not isinstance(value, bool):
        return (value, value, value)
    if isinstance(value, (list, tuple)):
        if len(value) != 3:
            raise _fail(
                f"must be one integer or a list of 3 integers [d, r, c], not {len(value)} "
                f"entries {_show(value)}"
            )
        return tuple(value)
    raise _fail(f"must be one integer or a list of 3 integers [d, r, c], not {_describe(value)}")


def _to_tuple(value: object) -> object:
    if isinstance(value, (list, tuple)):
        return tuple(value)
    raise _fail(f"must be a list, not {_describe(value)}")


BlockSize = Annotated[int, AfterValidator(_check_block_size)]
Identifier = Annotated[str, AfterValidator(_check_identifier)]
PositiveInt = Annotated[int, Field(ge=1)]


def _at_most(limit: int, why: str) -> AfterValidator:
    """``value <= limit``, the message naming the limit and the hardware behind it."""

    def check(value: int) -> int:
        if value > limit:
            raise _fail(f"must be at most {limit} ({why}), not {value}")
        return value

    return AfterValidator(check)


def _vec3(low: int, limit: int, why: str) -> Any:
    axis = Annotated[int, Field(ge=low), _at_most(limit, why)]
    return Annotated[tuple[axis, axis, axis], BeforeValidator(_to_vec3)]


_DESC16 = "the descriptor's 16-bit field"
_DESC8 = "the descriptor's 8-bit field"
Channels = Annotated[int, Field(ge=1), _at_most(MAX_CHANNELS, "the descriptor's 16-bit slot "
                                                              "count")]
MapSize = Annotated[int, Field(ge=1), _at_most(MAX_MAP_SIZE, _DESC16)]
Kernel3 = _vec3(1, MAX_KERNEL, "the input buffer's limit per axis")
Stride3 = _vec3(1, MAX_KERNEL, "the input buffer's limit per axis")
Padding3 = _vec3(0, MAX_PADDING, _DESC8)
PoolWindow3 = _vec3(1, MAX_POOL_WINDOW, "CMaxPool's limit per axis")
ChannelTile = Annotated[int, Field(ge=1), _at_most(MAX_CHANNEL_TILE, "the PE array's limit")]
Tile = Annotated[int, Field(ge=1), _at_most(MAX_TILE, _DESC8)]
UnrollLoop = Literal["td", "tr", "tc", "tn", "tm"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


# --------------------------------------------------------------------------------------------
# Network file


class InputShape(_Strict):
    """Network input: ``channels x depth x height x width`` (real channels, unpadded)."""

    channels: Channels
    depth: MapSize
    height: MapSize
    width: MapSize

    @property
    def shape(self) -> Vec3Tuple:
        """Spatial shape ``(D, H, W)``."""
        return (self.depth, self.height, self.width)


class PoolConfig(_Strict):
    """CMaxPool after CReLU as written in the file; ``stride`` defaults to ``window``,
    ``padding`` to 0 (padded voxels never win the max)."""

    window: PoolWindow3
    stride: PoolWindow3 | None = None
    padding: Padding3 | None = None


class _LayerBase(_Strict):
    name: Identifier
    block_size: BlockSize | None = None
    input: str | None = None


class ConvLayer(_LayerBase):
    """3D convolution with optional CBN (+ residual), CReLU and CMaxPool, in this order."""

    type: Literal["conv"]
    out_channels: Channels
    kernel: Kernel3
    stride: Stride3 = (1, 1, 1)
    padding: Padding3 = (0, 0, 0)
    cbn: bool = False
    crelu: bool = False
    pool: PoolConfig | None = None
    residual: str | None = None


class FcLayer(_LayerBase):
    """Fully connected layer: a conv whose kernel covers the whole input map."""

    type: Literal["fc"]
    out_channels: Channels
    cbn: bool = False
    crelu: bool = False
    residual: str | None = None


class GapLayer(_LayerBase):
    """Global average pool over the whole map; channels unchanged."""

    type: Literal["gap"]


LayerConfig = Annotated[ConvLayer | FcLayer | GapLayer, Field(discriminator="type")]


@dataclass(frozen=True)
class Pool:
    """Resolved CMaxPool: window, stride and padding as ``(d, r, c)`` tuples."""

    window: Vec3Tuple
    stride: Vec3Tuple
    padding: Vec3Tuple


def _round_up(value: int, multiple: int) -> int:
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
        return _round_up(self.in_channels, self.block_size)

    @property
    def padded_out_channels(self) -> int:
        """``M`` rounded up to a multiple of ``B``."""
        return _round_up(self.out_channels, self.block_size)

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


def _fmt_dims(channels: int, shape: Sequence[int]) -> str:
    return "x".join(str(v) for v in (channels, *shape))


def _fmt3(v: Sequence[int]) -> str:
    return "x".join(str(x) for x in v)


def _window_out(size: int, kernel: int, stride: int, pad: int) -> int:
    return (size + 2 * pad - kernel) // stride + 1


class NetworkConfig(_Strict):
    """A validated network file.

    Attributes
    ----------
    name : str
    input : InputShape
    classes : int
        Number of classes; the last layer's output channels.
    block_size : int
        Default ``B`` of every layer (4, 8 or 16).
    layers : tuple of ConvLayer, FcLayer or GapLayer
        The layers as written (use :attr:`resolved` for the inferred shapes).
    """

    name: Identifier
    input: InputShape
    classes: Channels
    block_size: BlockSize = 8
    layers: Annotated[tuple[LayerConfig, ...], BeforeValidator(_to_tuple),
                      Field(min_length=1, max_length=MAX_LAYERS)]

    _resolved: tuple[ResolvedLayer, ...] = PrivateAttr(default=())
    _path: Path | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _resolve_all(self) -> NetworkConfig:
        resolved, problems = _resolve_network(self)
        if problems:
            raise _Problems(problems)
        self._resolved = resolved
        return self

    @property
    def resolved(self) -> tuple[ResolvedLayer, ...]:
        """Every layer with defaults applied and shapes inferred, in file order."""
        return self._resolved

    def resolve(self) -> tuple[ResolvedLayer, ...]:
        """Return :attr:`resolved`."""
        return self._resolved

    @property
    def path(self) -> Path | None:
        """File the network was loaded from (``None`` when built in memory)."""
        return self._path

    def layer(self, name: str) -> ResolvedLayer:
        """Return the resolved layer called ``name`` (``KeyError`` if there is none)."""
        for layer in self._resolved:
            if layer.name == name:
                return layer
        raise KeyError(name)

    @property
    def dense_ops(self) -> int:
        """Total dense-equivalent operations of one inference."""
        return sum(layer.dense_ops for layer in self._resolved)


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


def _resolve_network(net: NetworkConfig) -> tuple[tuple[ResolvedLayer, ...], list[Problem]]:
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
            problems.append(Problem(key, f"a layer cannot take its own output ({_show(ref)}); "
                                         "must name an earlier layer"))
            return False, None
        if ref not in order:
            hint = difflib.get_close_matches(ref, earlier, n=1)
            tip = f" (did you mean {hint[0]!r}?)" if hint else ""
            problems.append(Problem(key, f"unknown layer {_show(ref)}{tip}; must name an earlier "
                                         f"layer: {', '.join(earlier) or '(none)'}"))
            return False, None
        where = order.index(ref)
        if where > i:
            problems.append(Problem(key, f"forward reference: {_show(ref)} is layers[{where}], "
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
        out_ch = in_ch if isinstance(cfg, GapLayer) else cfg.out_channels
        conv_shape: Vec3Tuple | None = None
        out_shape: Vec3Tuple | None = None
        pool: Pool | None = None
        kernel: Vec3Tuple | None = None
        stride: Vec3Tuple = (1, 1, 1)
        padding: Vec3Tuple = (0, 0, 0)
        if isinstance(cfg, ConvLayer):
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
                        f"output would be empty ({_fmt3(conv_shape)}): input "
                        f"{_fmt3(in_shape)} with padding {list(padding)} is smaller than kernel "
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
                            f"pool output would be empty ({_fmt3(out_shape)}): conv output "
                            f"{_fmt3(conv_shape)} with padding {list(pool.padding)} is smaller "
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
                        f"{_fmt_dims(res.channels, res.shape)}, this layer's output before pool "
                        f"is {_fmt_dims(out_ch, conv_shape)} (channels x D x H x W); they must "
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
                       f"{_fmt3(kernel)} kernel")
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
            if isinstance(last, GapLayer):
                problems.append(Problem("classes", f"must equal the output channels of the last "
                                                   f"layer {last.name!r} ({channels}), not "
                                                   f"{net.classes}"))
            else:
                problems.append(Problem(_layer_key(last_i, last.name, "out_channels"),
                                        f"the last layer must output classes = {net.classes} "
                                        f"channels, not {channels}"))
    return tuple(resolved), problems


# --------------------------------------------------------------------------------------------
# Accelerator file


class Resources(_Strict):
    """Resources of the device: DSP48E2 slices, BRAM36 blocks, LUTs, flip-flops."""

    dsp: PositiveInt
    bram36: PositiveInt
    lut: PositiveInt
    ff: PositiveInt


class DeviceConfig(_Strict):
    """Target device: Vivado part name, optional board part and available resources."""

    part: Annotated[str, AfterValidator(_check_nonempty)]
    board: Annotated[str, AfterValidator(_check_nonempty)] | None = None
    resources: Resources


class CoreConfig(_Strict):
    """One PE core: channel tiles ``tn``/``tm`` (also its parallelism), output tile
    ``td x tr x tc``, unrolled loops and the largest kernel, stride and pool window its
    buffers and post-unit support."""

    name: Identifier
    tn: ChannelTile
    tm: ChannelTile
    td: Tile
    tr: Tile
    tc: Tile
    unroll: Annotated[tuple[UnrollLoop, ...], BeforeValidator(_to_tuple)]
    max_kernel: Kernel3
    max_stride: Stride3 = (2, 2, 2)
    max_pool_window: PoolWindow3 = (3, 3, 3)

    @field_validator("unroll")
    @classmethod
    def _check_unroll(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        dupes = sorted({v for v in value if value.count(v) > 1})
        if dupes:
            raise _fail(f"duplicate loop {', '.join(dupes)}; each of td, tr, tc, tn, tm may "
                        "appear once")
        missing = [v for v in ("tn", "tm") if v not in value]
        if missing:
            raise _fail(f"must contain tn and tm (the channel tiles are always unrolled), "
                        f"missing {' and '.join(missing)}; allowed loops: td, tr, tc, tn, tm")
        return value

    def fit_problems(self, layer: ResolvedLayer) -> list[str]:
        """Why this core cannot run ``layer`` (empty list: it can).

        An ``fc`` layer counts as a 1x1x1 kernel with stride 1 (channel-minor flatten); a
        ``gap`` layer runs on any core. Block size is checked at accelerator level.
        """
        if layer.kind == "gap":
            return []
        kernel = (1, 1, 1) if layer.kind == "fc" else layer.kernel
        stride = (1, 1, 1) if layer.kind == "fc" else layer.stride
        why = []
        if any(k > m for k, m in zip(kernel, self.max_kernel, strict=True)):
            why.append(f"kernel {_fmt3(kernel)} > max_kernel {_fmt3(self.max_kernel)}")
        if any(s > m for s, m in zip(stride, self.max_stride, strict=True)):
            why.append(f"stride {_fmt3(stride)} > max_stride {_fmt3(self.max_stride)}")
        if layer.pool is not None and any(
                w > m for w, m in zip(layer.pool.window, self.max_pool_window, strict=True)):
            why.append(f"pool window {_fmt3(layer.pool.window)} > max_pool_window "
                       f"{_fmt3(self.max_pool_window)}")
        return why


def channel_tile_problems(tn: int, tm: int, B: int) -> list[tuple[str, str]]:
    """Why a core's channel tiles ``Tn``, ``Tm`` cannot be built for block size ``B``, as
    ``(field, message)`` pairs (empty: they can).

    The rule the layer engine is built on: ``Tn`` a multiple of ``B`` (whole input blocks)
    and, above 16, of 16 (whole 8-slot input groups); ``Tm`` a multiple of 16 (whole output
    slot groups) and of ``2*B`` (output blocks are computed in DSP pairs). Together these give
    whole block pairs per 128-bit weight beat.
    """
    problems = []
    if tn % B:
        problems.append(("tn", f"Tn must be a multiple of B ({B}), not {tn}"))
    elif tn > 16 and tn % 16:
        problems.append(("tn", (f"Tn must be a multiple of 16 above 16 (whole input slot "
                               f"groups), not {tn}")))
    if tm % 16 or tm % (2 * B):
        step = math.lcm(16, 2 * B)
        problems.append(("tm", (f"Tm must be a multiple of {step} (whole output slot groups of "
                               f"16 channels, output blocks in DSP pairs of 2*B), not {tm}")))
    return problems


class AcceleratorConfig(_Strict):
    """A validated accelerator file, bound to its network.

    Attributes
    ----------
    name : str
    network_file : str
        The ``network:`` key: path of the network file, relative to this file, or
        :data:`INLINE_NETWORK` when the file holds the network itself (``network:`` a mapping
        with the keys of a network file, as ``fcircnn sweep`` writes ``best.yaml``).
    device : DeviceConfig
    clock_mhz : float
        In (0, 1000].
    block_size : int
        ``B`` (4, 8 or 16); equals every layer's block size.
    bus_width : int
        AXI data width; only 128.
    address_width : int
        AXI address width, 32..64 (default 40).
    cores : tuple of CoreConfig
    fold_input_taps : bool
        Let the first layer fold its depth taps into input channels when its input fills fewer
        input blocks than its core has (:meth:`folds_input`); default on.
    network : NetworkConfig
        The loaded network (available once bound by :func:`load_accelerator`).
    path : pathlib.Path or None
        File the accelerator was loaded from.
    """

    name: Identifier
    network_file: Annotated[str, AfterValidator(_check_nonempty)] = Field(alias="network")
    device: DeviceConfig
    clock_mhz: Annotated[float, AfterValidator(_check_clock)]
    block_size: BlockSize
    bus_width: Annotated[int, AfterValidator(_check_bus_width)] = 128
    address_width: Annotated[int, AfterValidator(_check_address_width)] = 40
    cores: Annotated[tuple[CoreConfig, ...], BeforeValidator(_to_tuple), Field(min_length=1)]
    fold_input_taps: bool = True

    _network: NetworkConfig | None = PrivateAttr(default=None)
    _path: Path | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _check_cores(self) -> AcceleratorConfig:
        problems = []
        b = self.block_size
        seen: dict[str, int] = {}
        for i, core in enumerate(self.cores):
            key = f"cores[{i}] ({core.name})"
            if core.name in seen:
                problems.append(Problem(f"{key}.name", f"duplicate core name {core.name!r} "
                                                       f"(already used by cores[{seen[core.name]}])"
                                                       "; names must be unique"))
            seen.setdefault(core.name, i)
            problems += [Problem(f"{key}.{field}", message)
                         for field, message in channel_tile_problems(core.tn, core.tm, b)]
        if problems:
            raise _Problems(problems)
        return self

    @property
    def network(self) -> NetworkConfig:
        """The network this accelerator runs."""
        if self._network is None:
            raise RuntimeError("accelerator not bound to a network; use load_accelerator()")
        return self._network

    @property
    def path(self) -> Path | None:
        """File the accelerator was loaded from (``None`` when built in memory)."""
        return self._path

    def cores_by_preference(self) -> tuple[CoreConfig, ...]:
        """Cores ordered smallest ``max_kernel`` volume first (file order breaks ties)."""
        return tuple(sorted(self.cores, key=lambda c: math.prod(c.max_kernel)))

    def core_for(self, layer: ResolvedLayer) -> CoreConfig:
        """Return the core that runs ``layer``: the fitting core with the smallest
        ``max_kernel`` (first in file order among equals).

        Raises
        ------
        ValueError
            If no core can run the layer (never for a layer of the bound network).
        """
        if layer.block_size != self.block_size:
            raise ValueError(f"layer {layer.name!r} has B = {layer.block_size}, the accelerator "
                             f"B = {self.block_size}")
        for core in self.cores_by_preference():
            if not core.fit_problems(layer):
                return core
        raise ValueError(f"no core can run layer {layer.name!r}: " + "; ".join(
            f"{c.name}: {', '.join(c.fit_problems(layer))}" for c in self.cores))

    def folds_input(self, layer: ResolvedLayer) -> bool:
        """Whether ``layer`` runs with its depth taps folded into input channels
        (:meth:`ResolvedLayer.fold_depth_taps`).

        Only the network input can be laid out folded (the host writes it), so the layer must
        be the first (the only one the network grammar lets read the input), a conv with
        ``Kd > 1``, and its input must fill fewer of its core's ``Tn/B`` input blocks than
        there are (C3D conv1a: 3 channels, one block of four on a ``Tn = 32`` core, folds to
        three). Off with ``fold_input_taps: false``.
        """
        if (not self.fold_input_taps or layer.kind != "conv" or layer.input is not None
                or layer.kernel[0] == 1):
            return False
        return layer.padded_in_channels < self.core_for(layer).tn

    def engine_layer(self, layer: ResolvedLayer) -> ResolvedLayer:
        """``layer`` as the engine runs it: folded if :meth:`folds_input`, else itself. It
        runs on ``core_for(layer)`` of the original layer."""
        return layer.fold_depth_taps() if self.folds_input(layer) else layer

    def _bind(self, network: NetworkConfig, path: Path | None) -> list[Problem]:
        """Attach the network and return the cross-check problems (empty when it fits)."""
        problems = []
        for layer in network.resolved:
            if layer.block_size != self.block_size:
                problems.append(Problem(
                    "block_size", f"must equal every layer's block size: layer {layer.name!r} "
                                  f"has B = {layer.block_size}, this file {self.block_size}"))
                continue
            reasons = [f"{c.name}: {', '.join(why)}"
                       for c in self.cores if (why := c.fit_problems(layer))]
            if len(reasons) == len(self.cores):
                pool = f", pool window {_fmt3(layer.pool.window)}" if layer.pool else ""
                problems.append(Problem(
                    "cores", f"no core can run layer {layer.name!r} ({layer.kind}, kernel "
                             f"{_fmt3(layer.kernel)}, stride {_fmt3(layer.stride)}{pool}): "
                             + "; ".join(reasons)))
        self._network = network
        self._path = path
        return problems


# --------------------------------------------------------------------------------------------
# Loading


def _read_yaml(path: Path, file: str, top_keys: Sequence[str]) -> dict[str, Any]:
    """Read a YAML mapping (:func:`~fcircnn.models.yaml_doc.read_document`) or raise
    ConfigError."""
    try:
        data = read_document(path)
    except FileNotFoundError:
        raise ConfigError(file, [Problem("", "file not found")]) from None
    except IsADirectoryError:
        raise ConfigError(file, [Problem("", "is a folder, not a YAML file")]) from None
    except OSError as exc:
        raise ConfigError(file, [Problem("", f"cannot read: {exc.strerror or exc}")]) from None
    except DocumentError as exc:
        raise ConfigError(file, [Problem(exc.where, exc.message)]) from None
    if not isinstance(data, dict):
        raise ConfigError(file, [Problem("", f"top level must be a mapping with keys "
                                             f"{', '.join(top_keys)}; found {_describe(data)}")])
    return data


def _unwrap(tp: Any) -> Any:
    while True:
        origin = typing.get_origin(tp)
        if origin is Annotated:
            tp = typing.get_args(tp)[0]
        elif origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(tp) if a is not type(None)]
            if len(args) == 1:
                tp = args[0]
            else:
                return tp
        else:
            return tp


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def _field_for(model: type[BaseModel], key: str) -> Any:
    for name, info in model.model_fields.items():
        if (info.alias or name) == key:
            return info.annotation
    return None


def _allowed_keys(model: type[BaseModel]) -> list[str]:
    return [info.alias or name for name, info in model.model_fields.items()]


def _walk(root: type[BaseModel], raw: Any, loc: Sequence[int | str]) -> tuple[str, Any]:
    """Turn a pydantic ``loc`` into a key path; also return the type reached."""
    tp: Any = root
    key = ""
    for elem in loc:
        tp = _unwrap(tp)
        if isinstance(elem, int):
            args = typing.get_args(tp)
            tp = args[0] if args else None
            raw = raw[elem] if isinstance(raw, list) and 0 <= elem < len(raw) else None
            key += f"[{elem}]"
            if isinstance(raw, dict) and isinstance(raw.get("name"), str):
                key += f" ({raw['name']})"
            continue
        if typing.get_origin(tp) in (typing.Union, types.UnionType):
            members = [m for m in typing.get_args(tp) if _is_model(m)]
            tagged = [m for m in members if elem in typing.get_args(
                _unwrap(m.model_fields["type"].annotation)) if "type" in m.model_fields]
            if tagged:  # discriminator tag inserted by pydantic, not a key of the file
                tp = tagged[0]
                continue
        if _is_model(tp):
            tp = _field_for(tp, elem)
        else:
            tp = None
        raw = raw.get(elem) if isinstance(raw, dict) else None
        key += f".{elem}" if key else str(elem)
    return key, _unwrap(tp)


_TYPE_NAMES = {
    "int_type": "an integer",
    "bool_type": "true or false",
    "string_type": "a string",
    "float_type": "a number",
    "list_type": "a list",
    "tuple_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "literal_error": None,
}


def _problems_from(exc: ValidationError, root: type[BaseModel], raw: Any) -> list[Problem]:
    """Translate a pydantic ValidationError into key-path problems."""
    problems: list[Problem] = []
    for err in exc.errors(include_url=False):
        kind, loc, value, ctx = err["type"], err["loc"], err.get("input"), err.get("ctx") or {}
        if kind == "value_error" and isinstance(ctx.get("error"), _Problems):
            problems.extend(ctx["error"].problems)
            continue
        if kind in ("union_tag_invalid", "union_tag_not_found"):
            loc = (*loc, "type")
        if kind == "invalid_key":  # a non-string key: loc ends with the key itself
            parent, _ = _walk(root, raw, loc[:-1])
            key = f"{parent}.{loc[-1]}" if parent else str(loc[-1])
            problems.append(Problem(key, f"keys must be strings, not {_describe(loc[-1])}"))
            continue
        key, _ = _walk(root, raw, loc)
        if kind == "extra_forbidden":
            _, parent = _walk(root, raw, loc[:-1])
            allowed = _allowed_keys(parent) if _is_model(parent) else []
            hint = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
            tip = f" (did you mean {hint[0]!r}?)" if hint else ""
            message = f"unknown key{tip}; allowed keys: {', '.join(allowed)}"
        elif kind == "missing":
            message = "required key missing"
        elif kind == "union_tag_invalid":
            tags = ctx.get("expected_tags", "").replace("'", "")
            message = f"must be one of {tags}, not {_show(ctx.get('tag'))}"
        elif kind == "union_tag_not_found":
            message = "required key missing (layer type: conv, fc or gap)"
        elif kind == "literal_error":
            expected = str(ctx.get("expected", "")).replace("'", "")
            message = f"must be one of {expected}, not {_show(value)}"
        elif kind in _TYPE_NAMES:
            message = f"must be {_TYPE_NAMES[kind]}, not {_describe(value)}"
        elif kind == "greater_than_equal":
            message = f"must be >= {ctx['ge']}, not {_show(value)}"
        elif kind == "greater_than":
            message = f"must be > {ctx['gt']}, not {_show(value)}"
        elif kind == "less_than_equal":
            message = f"must be <= {ctx['le']}, not {_show(value)}"
        elif kind == "less_than":
            message = f"must be < {ctx['lt']}, not {_show(value)}"
        elif kind == "too_short":
            n = ctx.get("min_length")
            message = (f"must have at least {n} {'entry' if n == 1 else 'entries'}, not "
                       f"{ctx.get('actual_length')}")
        elif kind == "too_long":
            message = (f"must have at most {ctx.get('max_length')} entries, not "
                       f"{ctx.get('actual_length')}")
        else:
            message = err["msg"]
        problems.append(Problem(key, message))
    return problems


def _validate(model: type[_Strict], data: dict[str, Any], file: str) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(file, _problems_from(exc, model, data)) from None


def load_network(path: str | os.PathLike[str]) -> NetworkConfig:
    """Load and validate a network file.

    Parameters
    ----------
    path : str or os.PathLike
        The YAML file.

    Returns
    -------
    NetworkConfig
        Validated, with :attr:`NetworkConfig.resolved` holding every layer's shapes.

    Raises
    ------
    ConfigError
        Listing every problem found (missing file, YAML syntax, schema, references, shapes).
    """
    file = os.fspath(path)
    return _network_from(_read_yaml(Path(file), file, _allowed_keys(NetworkConfig)), file)


def _network_from(data: dict[str, Any], file: str) -> NetworkConfig:
    net: NetworkConfig = _validate(NetworkConfig, data, file)
    net._path = Path(file)
    return net


def load_accelerator(path: str | os.PathLike[str]) -> AcceleratorConfig:
    """Load and validate an accelerator file and the network file it names.

    Parameters
    ----------
    path : str or os.PathLike
        The YAML file; its ``network:`` path is relative to this file's directory.

    Returns
    -------
    AcceleratorConfig
        Validated and bound to its network (:attr:`AcceleratorConfig.network`); every layer
        of the network is runnable by at least one core.

    Raises
    ------
    ConfigError
        For the accelerator file, or for the network file when that one is invalid.
    """
    file = os.fspath(path)
    return _accelerator_from(_read_yaml(Path(file), file, _allowed_keys(AcceleratorConfig)),
                             file)


def is_accelerator_data(data: Mapping[str, Any]) -> bool:
    """Whether a configuration document is an accelerator file (it has ``cores`` or
    ``network``) rather than a network file."""
    return "cores" in data or "network" in data


def load_config(path: str | os.PathLike[str]) -> NetworkConfig | AcceleratorConfig:
    """Load a network or an accelerator file, told apart by :func:`is_accelerator_data`
    (the file is read once).

    Raises
    ------
    ConfigError
        As :func:`load_network` or :func:`load_accelerator`.
    """
    file = os.fspath(path)
    data = _read_yaml(Path(file), file, sorted({*_allowed_keys(NetworkConfig),
                                                *_allowed_keys(AcceleratorConfig)}))
    if is_accelerator_data(data):
        return _accelerator_from(data, file)
    return _network_from(data, file)


def _accelerator_from(data: dict[str, Any], file: str) -> AcceleratorConfig:
    inline = data.get("network")
    if isinstance(inline, Mapping):  # the network written into the accelerator file
        try:
            network = _network_from(dict(inline), file)
        except ConfigError as exc:
            raise ConfigError(file, [replace(p, key=f"network.{p.key}" if p.key else "network")
                                     for p in exc.problems]) from None
        data = {**data, "network": INLINE_NETWORK}
    acc: AcceleratorConfig = _validate(AcceleratorConfig, data, file)
    if not isinstance(inline, Mapping):
        net_file = os.path.join(os.path.dirname(file), acc.network_file)
        if not os.path.isfile(net_file):
            raise ConfigError(file, [Problem("network", f"network file not found: {net_file} "
                                                        "(paths are relative to this file)")])
        network = load_network(net_file)
    problems = acc._bind(network, Path(file))
    if problems:
        raise ConfigError(file, problems)
    return acc


def bind_accelerator(data: dict[str, Any], network: NetworkConfig, *,
                     file: str = "<in memory>") -> AcceleratorConfig:
    """Validate YAML-shaped accelerator ``data`` and bind it to ``network``.

    The in-memory counterpart of :func:`load_accelerator` for generated configurations (the
    design-space sweep): ``data["network"]`` is kept as the file reference but ``network`` is
    used as is.

    Raises
    ------
    ConfigError
        Reported against ``file``, as :func:`load_accelerator` would.
    """
    acc: AcceleratorConfig = _validate(AcceleratorConfig, data, file)
    problems = acc._bind(network, None)
    if problems:
        raise ConfigError(file, problems)
    return acc


def builtin_path(name: str) -> Path:
    """Return the path of a configuration shipped in ``fcircnn.models``.

    Parameters
    ----------
    name : str
        ``"c3d"``, ``"c3d.yaml"``, ``"c3d_zcu102"``, ...

    Raises
    ------
    ConfigError
        If there is no such file (the message lists the available names).
    """
    here = Path(__file__).resolve().parent
    stem = name[:-5] if name.endswith(".yaml") else name
    candidate = here / f"{stem}.yaml"
    if "/" not in stem and "\\" not in stem and candidate.is_file():
        return candidate
    available = sorted(p.stem for p in here.glob("*.yaml"))
    raise ConfigError(name, [Problem("", f"no built-in configuration of that name; available: "
                                         f"{', '.join(available)}")])


# --------------------------------------------------------------------------------------------
# Reports


def describe_network(net: NetworkConfig) -> str:
    """Human-readable table of the resolved layers with totals (for ``fcircnn check``)."""
    inp = net.input
    lines = [f"network {net.name}: input {_fmt_dims(inp.channels, inp.shape)}, "
             f"{net.classes} classes, B = {net.block_size}"
             + (f"  ({net.path})" if net.path else "")]
    rows = []
    for r in net.resolved:
        post = "+".join(s for s, on in (("cbn", r.cbn), ("res", r.residual is not None),
                                         ("crelu", r.crelu)) if on) or "-"
        pool = "-" if r.pool is None else (f"{_fmt3(r.pool.window)}/s{_fmt3(r.pool.stride)}"
                                           f"/p{_fmt3(r.pool.padding)}")
        rows.append([
            r.index, r.name, r.kind, r.input or "(input)", r.residual or "-", r.block_size,
            _fmt_dims(r.in_channels, r.in_shape),
            "-" if r.kind == "gap" else f"{_fmt3(r.kernel)}/s{_fmt3(r.stride)}/p{_fmt3(r.padding)}",
            _fmt_dims(r.out_channels, r.conv_shape), post, pool,
            _fmt_dims(r.out_channels, r.out_shape), f"{r.dense_ops / 1e9:.3f}",
        ])
    lines += format_table(["#", "layer", "type", "input", "residual", "B", "in NxDxHxW",
                     "kernel/stride/pad", "conv MxDxHxW", "post", "pool", "out MxDxHxW",
                     "GOP"], rows)
    dense = sum(r.dense_params for r in net.resolved)
    circ = sum(r.circulant_params for r in net.resolved)
    lines.append(f"total: {net.dense_ops / 1e9:.3f} GOP dense-equivalent "
                 f"({net.dense_ops} ops), {dense} dense weights, {circ} circulant weights "
                 f"({dense / circ:.2f}x fewer)" if circ else "total: 0 GOP")
    return "\n".join(lines)


def describe_accelerator(acc: AcceleratorConfig) -> str:
    """Human-readable summary: resolved parameters, cores and which core runs which layer."""
    d, res = acc.device, acc.device.resources
    lines = [
        f"accelerator {acc.name}" + (f"  ({acc.path})" if acc.path else ""),
        f"  network        {acc.network.name} ({acc.network_file})",
        f"  device         {d.part}" + (f", board {d.board}" if d.board else ""),
        f"  resources      {res.dsp} DSP, {res.bram36} BRAM36, {res.lut} LUT, {res.ff} FF",
        f"  clock          {acc.clock_mhz:g} MHz",
        f"  block size     B = {acc.block_size}",
        f"  AXI            {acc.bus_width}-bit data, {acc.address_width}-bit address",
        "",
    ]
    lines += format_table(
        ["core", "Tn", "Tm", "Td", "Tr", "Tc", "unroll", "max_kernel", "max_stride",
         "max_pool_window"],
        [[c.name, c.tn, c.tm, c.td, c.tr, c.tc, ",".join(c.unroll), _fmt3(c.max_kernel),
          _fmt3(c.max_stride), _fmt3(c.max_pool_window)] for c in acc.cores])
    lines.append("")
    lines += format_table(["#", "layer", "type", "kernel", "stride", "pool", "core", "GOP"],
                    [[r.index, r.name, r.kind, _fmt3(r.kernel), _fmt3(r.stride),
                      _fmt3(r.pool.window) if r.pool else "-", acc.core_for(r).name,
                      f"{r.dense_ops / 1e9:.3f}"] for r in acc.network.resolved])
    folded = [r for r in acc.network.resolved if acc.folds_input(r)]
    for r in folded:
        run = acc.engine_layer(r)
        lines.append(f"  {r.name} runs with its depth taps folded into input channels: "
                     f"{run.in_channels} channels, kernel {_fmt3(run.kernel)} "
                     "(fold_input_taps)")
    return "\n".join(lines)
