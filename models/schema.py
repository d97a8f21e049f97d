"""The schema of network and accelerator files: typed, strict, carrying the hardware's limits.

Validation is strict: unknown keys are rejected, nothing is coerced (``"3"`` and ``true`` are
not integers), nothing is clamped. A network's layers are resolved (:mod:`.resolve`) when it is
validated; an accelerator's cores obey the channel-tile rule (:func:`channel_tile_problems`) and
the limits below, which are the hardware's, so that every command refuses the same files
(``docs/errors.md`` lists them with their reasons).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    field_validator,
    model_validator,
)

from fcircnn.arch.geometry import (
    MAX_ADDRESS_WIDTH,
    MAX_CHANNEL_TILE,
    MAX_KERNEL,
    MAX_MAP_SIZE,
    MAX_POOL_WINDOW,
    MAX_TILE,
    MIN_ADDRESS_WIDTH,
    channel_tile_problems,
)
from fcircnn.arch.ports import AXI_PORTS, DMA_QUEUE

from . import placement
from .devices import device_problems
from .errors import Problem, Problems, describe_value, fail, show
from .resolve import ResolvedLayer, resolve_network
from .spectral import BLOCK_SIZES

__all__ = [
    "ALLOWED_BLOCK_SIZES", "ALLOWED_BUS_WIDTHS", "CLOCK_MHZ_RANGE", "INLINE_NETWORK",
    "MAX_CHANNELS", "MAX_CHANNEL_TILE", "MAX_KERNEL", "MAX_LAYERS", "MAX_MAP_SIZE", "MAX_PADDING",
    "MAX_POOL_WINDOW", "MAX_TILE", "UNROLL_LOOPS", "AcceleratorConfig", "ConvLayer", "CoreConfig",
    "DeviceConfig", "FcLayer", "GapLayer", "InputShape", "IrfftLayer", "NetworkConfig",
    "PoolConfig", "Resources", "RfftLayer", "channel_tile_problems", "clock_problem",
]

#: Legal block sizes ``B`` (even powers of two).
ALLOWED_BLOCK_SIZES: tuple[int, ...] = BLOCK_SIZES
#: Legal AXI data widths (NC/8DHW8 packs 8 slots x 16 bit per beat).
ALLOWED_BUS_WIDTHS: tuple[int, ...] = (128,)
#: Loop names a core may unroll.
UNROLL_LOOPS: tuple[str, ...] = ("td", "tr", "tc", "tn", "tm")

Vec3Tuple = tuple[int, int, int]

# The hardware's limits, which the schema enforces so that every command refuses the same
# files (docs/errors.md gives each with its reason); the architecture's own are in
# fcircnn.arch.geometry.
#: Channels of a map or layer: the descriptor counts slots (channels / 2) in 16 bits.
MAX_CHANNELS = 65536
#: Conv and pool padding per axis: 8-bit descriptor fields.
MAX_PADDING = 255
#: Layers of a network: the descriptor's 16-bit layer index.
MAX_LAYERS = 65535
#: :attr:`AcceleratorConfig.network_file` of an accelerator file whose ``network:`` is the
#: network itself rather than a path.
INLINE_NETWORK = "(inline)"


def _check_block_size(value: int) -> int:
    if value not in ALLOWED_BLOCK_SIZES:
        raise fail(f"B must be an even power of two: 4, 8 or 16, not {show(value)}")
    return value


def _check_identifier(value: str) -> str:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value):
        raise fail(
            "must be an identifier (letters, digits and _, not starting with a digit), "
            f"not {show(value)}"
        )
    return value


def _check_nonempty(value: str) -> str:
    if not value.strip():
        raise fail("must not be empty")
    return value


def _check_bus_width(value: int) -> int:
    if value not in ALLOWED_BUS_WIDTHS:
        raise fail(
            "only 128 is supported (NC/8DHW8: 8 slots x 16 bit per beat), "
            f"not {show(value)}"
        )
    return value


#: Legal clocks in MHz, ``[lo, hi]``: an FPGA fabric clock (below 1 MHz a period is beyond
#: what Vivado's constraints and the cycle counts' latencies are meant for; a typo such as
#: ``2e-2`` would otherwise give a clip of minutes or an infinite latency).
CLOCK_MHZ_RANGE: tuple[float, float] = (1.0, 1000.0)


def clock_problem(value: float) -> str | None:
    """Why ``value`` is not a legal clock in MHz (:data:`CLOCK_MHZ_RANGE`), or ``None``."""
    lo, hi = CLOCK_MHZ_RANGE
    if lo <= value <= hi:
        return None
    return f"must be in the range [{lo:g}, {hi:g}] MHz, not {show(value)}"


def _check_clock(value: float) -> float:
    problem = clock_problem(value)
    if problem:
        raise fail(problem)
    return value


def _check_axi_ports(value: int) -> int:
    if value not in AXI_PORTS:
        raise fail(f"allowed values are {', '.join(map(str, AXI_PORTS))}, not {show(value)}")
    return value


def _check_dma_queue(value: int) -> int:
    if value not in DMA_QUEUE:
        raise fail(f"must be in the range {DMA_QUEUE[0]}..{DMA_QUEUE[-1]} commands, "
                   f"not {show(value)}")
    return value


def _check_address_width(value: int) -> int:
    if not MIN_ADDRESS_WIDTH <= value <= MAX_ADDRESS_WIDTH:
        raise fail(f"must be in the range {MIN_ADDRESS_WIDTH}..{MAX_ADDRESS_WIDTH} bits, not "
                   f"{show(value)}")
    return value


def _to_vec3(value: object) -> object:
    """Accept ``k`` (meaning ``[k, k, k]``) or a list of three entries, as a tuple."""
    if isinstance(value, int) and not isinstance(value, bool):
        return (value, value, value)
    if isinstance(value, (list, tuple)):
        if len(value) != 3:
            raise fail(
                f"must be one integer or a list of 3 integers [d, r, c], not {len(value)} "
                f"entries {show(value)}"
            )
        return tuple(value)
    raise fail("must be one integer or a list of 3 integers [d, r, c], not "
               f"{describe_value(value)}")


def _to_tuple(value: object) -> object:
    if isinstance(value, (list, tuple)):
        return tuple(value)
    raise fail(f"must be a list, not {describe_value(value)}")


BlockSize = Annotated[int, AfterValidator(_check_block_size)]
Identifier = Annotated[str, AfterValidator(_check_identifier)]
PositiveInt = Annotated[int, Field(ge=1)]


def _at_most(limit: int, why: str) -> AfterValidator:
    """``value <= limit``, the message naming the limit and the hardware behind it."""

    def check(value: int) -> int:
        if value > limit:
            raise fail(f"must be at most {limit} ({why}), not {show(value)}")
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


class _WeightedLayer(_LayerBase):
    """What a conv and an fc layer share: block-circulant (default) with CBN (+ residual) and
    CReLU on slots, or ``dense: true`` with a bias, BN and ReLU per channel in the time domain
    (:mod:`.resolve` refuses the keys of the other kind)."""

    out_channels: Channels
    dense: bool = False
    cbn: bool = False
    crelu: bool = False
    residual: str | None = None
    bias: bool = False
    bn: bool = False
    relu: bool = False


class ConvLayer(_WeightedLayer):
    """3D convolution with its post-processing (CBN + residual, CReLU, CMaxPool on slots; or,
    dense, bias, BN, ReLU and max pool per channel), in this order."""

    type: Literal["conv"]
    kernel: Kernel3
    stride: Stride3 = (1, 1, 1)
    padding: Padding3 = (0, 0, 0)
    pool: PoolConfig | None = None


class FcLayer(_WeightedLayer):
    """Fully connected layer: a conv whose kernel covers the whole input map."""

    type: Literal["fc"]


class GapLayer(_LayerBase):
    """Global average pool over the whole map; channels unchanged; in either domain."""

    type: Literal["gap"]


class RfftLayer(_LayerBase):
    """The step from the time domain into slots: ``rfft`` over each block of ``B`` channels,
    packed (channels padded with zeros to a multiple of ``B``)."""

    type: Literal["rfft"]


class IrfftLayer(_LayerBase):
    """The step from slots back to the time domain: ``irfft`` of each block, the padding
    channels dropped."""

    type: Literal["irfft"]


LayerConfig = Annotated[ConvLayer | FcLayer | GapLayer | RfftLayer | IrfftLayer,
                        Field(discriminator="type")]


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
    layers : tuple of ConvLayer, FcLayer, GapLayer, RfftLayer or IrfftLayer
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
        resolved, problems = resolve_network(self)
        if problems:
            raise Problems(problems)
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
            raise fail(f"duplicate loop {', '.join(dupes)}; each of td, tr, tc, tn, tm may "
                        "appear once")
        missing = [v for v in ("tn", "tm") if v not in value]
        if missing:
            raise fail(f"must contain tn and tm (the channel tiles are always unrolled), "
                        f"missing {' and '.join(missing)}; allowed loops: td, tr, tc, tn, tm")
        return value


    def fit_problems(self, layer: ResolvedLayer) -> list[str]:
        """Why this core cannot run ``layer`` (:func:`~.placement.fit_problems`)."""
        return placement.fit_problems(self, layer)


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
        In :data:`CLOCK_MHZ_RANGE` ([1, 1000]).
    block_size : int
        ``B`` (4, 8 or 16); equals every layer's block size.
    bus_width : int
        AXI data width; only 128.
    address_width : int
        AXI address width, 32..64 (default 40).
    axi_ports : int
        128-bit AXI4 manager ports (:data:`~fcircnn.arch.ports.AXI_PORTS`, default 1); with 2
        the weight tiles are read on a port of their own, with 3 and 4 also the halves of split
        input boxes and weight tiles (:class:`~fcircnn.arch.ports.PortMap`).
    dma_queue : int
        Read commands each loader keeps in flight on its read engine
        (:data:`~fcircnn.arch.ports.DMA_QUEUE`, default 1: one at a time); more let a
        transfer's command and memory latency overlap the previous transfers' beats.
    cores : tuple of CoreConfig
    fold_input_taps : bool
        Let the first layer fold its depth taps into input channels when its input fills fewer
        input blocks than its core has (:meth:`folds_input`); default on.
    fold_input_rows : bool
        Let such a first layer fold row-shifted copies of its input into input channels as
        well when they take the PE array fewer steps (:meth:`folded_rows`); default on. The
        host then writes that many copies of every depth copy.
    row_lanes : bool
        Let a conv shallower than its core's unrolled depth lanes run rows of each tile in
        the idle lanes (:meth:`row_groups`; ResNet-18's stages 3 and 4); default on.
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
    axi_ports: Annotated[int, AfterValidator(_check_axi_ports)] = 1
    dma_queue: Annotated[int, AfterValidator(_check_dma_queue)] = 1
    cores: Annotated[tuple[CoreConfig, ...], BeforeValidator(_to_tuple), Field(min_length=1)]
    fold_input_taps: bool = True
    fold_input_rows: bool = True
    row_lanes: bool = True

    _network: NetworkConfig | None = PrivateAttr(default=None)
    _path: Path | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _check_device_and_cores(self) -> AcceleratorConfig:
        dev = self.device
        problems = [Problem(f"device.{key}", message) for key, message in device_problems(
            dev.part, dev.board, dev.resources.model_dump())]
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
            raise Problems(problems)
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
        """Cores ordered smallest ``max_kernel`` volume first
        (:func:`~.placement.cores_by_preference`)."""
        return placement.cores_by_preference(self)

    def core_for(self, layer: ResolvedLayer) -> CoreConfig:
        """The core that runs ``layer`` (:func:`~.placement.core_for`)."""
        return placement.core_for(self, layer)

    def folds_input(self, layer: ResolvedLayer) -> bool:
        """Whether ``layer`` runs with its depth taps folded (:func:`~.placement.folds_input`)."""
        return placement.folds_input(self, layer)

    def folded_depths(self, layer: ResolvedLayer) -> int:
        """Output depths per depth of ``layer`` as it runs (:func:`~.placement.folded_depths`)."""
        return placement.folded_depths(self, layer)

    def folded_rows(self, layer: ResolvedLayer) -> int:
        """Row copies of ``layer`` as it runs (:func:`~.placement.folded_rows`)."""
        return placement.folded_rows(self, layer)

    def row_groups(self, layer: ResolvedLayer) -> int:
        """Row groups of ``layer`` as it runs (:func:`~.placement.row_groups`)."""
        return placement.row_groups(self, layer)

    def folds_fc_input(self, layer: ResolvedLayer) -> bool:
        """Whether fc ``layer`` reads its 1x1x1 input as a map
        (:func:`~.placement.folds_fc_input`)."""
        return placement.folds_fc_input(self, layer)

    def rfft_of(self, layer: ResolvedLayer) -> ResolvedLayer | None:
        """The rfft step run in ``layer``'s post chain (:func:`~.placement.rfft_of`)."""
        return placement.rfft_of(self.network, layer)

    def spreads_input(self, layer: ResolvedLayer) -> bool:
        """Whether ``layer`` reads its input compact (:func:`~.placement.spreads_input`)."""
        return placement.spreads_input(self, layer)

    def engine_layer(self, layer: ResolvedLayer) -> ResolvedLayer:
        """``layer`` as the engine runs it (:func:`~.placement.engine_layer`)."""
        return placement.engine_layer(self, layer)

    def bind(self, network: NetworkConfig, path: Path | None) -> list[Problem]:
        """Attach ``network`` (loaded from ``path``) and return why it cannot run on this
        accelerator (:func:`~.placement.placement_problems`; empty when it can)."""
        self._network, self._path = network, path
        return placement.placement_problems(self, network)
