"""DDR image planning, the compiler's first step: the memory map and the descriptors of a
network, without data (:func:`plan_network`; fast, for sizing and for the performance
model). The descriptors' port splits and tile balance are the second step's choice
(:mod:`fcircnn.gen.choose`); packing the bytes is :mod:`fcircnn.gen.pack`, and writing the
image :mod:`fcircnn.gen.compiler`.

Memory map
----------
Regions, in address order, each starting on a 4 KB boundary (``base`` must be 4 KB aligned):

* ``descriptors`` -- the descriptor list, one
  :data:`~fcircnn.arch.descriptor.DESCRIPTOR_BYTES` (256-byte) descriptor per engine pass in
  layer order, each ``next_desc`` pointing at the following one; its base is the value for
  ``DESC_PTR``;
* ``cycles`` -- one 16-byte entry per descriptor (one beat), little-endian: the pass's cycle
  count as uint64, then its PE-busy and DMA-stall cycles as uint32 each (modulo 2^32);
  written by the top level at ``cycles_addr``;
* ``input`` -- the quantized network input, NC/8DHW8 (:func:`fcircnn.models.layout.pack_ncdhw8`);
  when the first layer runs with its depth taps folded into input channels
  (:meth:`~fcircnn.models.config.AcceleratorConfig.folds_input`), its ``Kd`` depth-shifted
  copies (``Kd + sd`` at twice the depth stride when it also folds output depth pairs,
  :meth:`~fcircnn.models.config.AcceleratorConfig.folded_depths`), each in ``U`` row-shifted
  copies when it folds rows (:meth:`~fcircnn.models.config.AcceleratorConfig.folded_rows`)
  (:func:`pack_network_input`);
* per layer ``<name>.weights``, ``<name>.post`` and ``<name>.output`` (NC/8DHW8 of the pooled
  output shape, zero in the image: the engine writes it); a layer whose pool runs as a pool
  pass also ``<name>.conv`` (the conv output before the pool).
"""

from __future__ import annotations

from dataclasses import dataclass

from fcircnn.arch.descriptor import (
    DESCRIPTOR_BYTES,
    DFOLD_DEPTHS,
    FLAG_CBN,
    FLAG_CRELU,
    FLAG_DFOLD,
    FLAG_LANE0,
    FLAG_LAST,
    FLAG_POOL,
    FLAG_RESIDUAL,
    FLAG_RFFT,
    FLAG_ROWLANES,
    FLAG_SPREAD,
    OP_CONV,
    OP_GAP,
    OP_POOL,
    LayerDescriptor,
    region_pages,
)
from fcircnn.arch.geometry import (
    MAX_KERNEL,
    MAX_POOL_MAP,
    MAX_POOL_WINDOW,
    MAX_TAPS,
    PAGE_BYTES,
    SLOTS_PER_BEAT,
    CoreGeometry,
    EngineGeometry,
    engine_geometry,
    pool_carries,
    pool_fuses,
)
from fcircnn.models.config import AcceleratorConfig, CoreConfig, Pool, ResolvedLayer
from fcircnn.models.layout import ncdhw8_size
from fcircnn.models.placement import map_of, passes, subsample_steps

from .choose import choose_layout
from .ddr_layout import reused_layout, separate_layout
from .dma_plan import DmaLimits, plan_block

__all__ = [
    "ALIGN",
    "CYCLE_BYTES",
    "POST_RECORD_BYTES",
    "AddressSpaceError",
    "CompileError",
    "LayerPlan",
    "NetworkPlan",
    "PostOverflowError",
    "Region",
    "plan_network",
]

#: Alignment of every region and of the image (bytes): AXI's 4 KiB page.
ALIGN = PAGE_BYTES


#: Bytes of one post-parameter record.
POST_RECORD_BYTES = 32


#: Bytes of one cycle-count entry (one beat: uint64 cycles, uint32 PE-busy, uint32 DMA-stall).
CYCLE_BYTES = 16


class CompileError(ValueError):
    """The network cannot be compiled for this accelerator; the message names the layer (or
    the argument) and the limit."""


class AddressSpaceError(CompileError):
    """The image, placed at its base, ends beyond the accelerator's ``address_width``; found
    while planning, before any calibration."""


class PostOverflowError(CompileError):
    """A layer's folded post parameters do not fit their fields with these weights and
    calibration (:class:`~fcircnn.models.network.LayerOverflowError`); the message names the
    layer once."""


@dataclass(frozen=True)
class Region:
    """One region of the DDR image: ``[base, base + size)``, ``base`` 4 KB aligned.

    ``kind`` is one of :data:`fcircnn.runtime.image.REGION_KINDS` (``"conv"``: a conv's output
    before its pool pass). ``live``, for a map (``input``, ``conv``, ``output``): the first and
    last descriptor index, inclusive, between which it holds data the run needs (written by the
    first or, for the input, by the host before the run; read last by the second; the last
    descriptor for the network's output and for a map no pass reads); ``None`` otherwise.
    """

    name: str
    base: int
    size: int
    kind: str
    description: str
    live: tuple[int, int] | None = None

    @property
    def end(self) -> int:
        """First byte after the region."""
        return self.base + self.size


@dataclass(frozen=True)
class LayerPlan:
    """Where one layer lives: its layer, core (and index) and descriptors.

    ``descriptor`` is the layer's convolution (weights, post table); ``descriptors`` all of
    its descriptors in list order: the convolution, then the pool pass if the layer pools.
    ``engine_layer`` is the layer as the engine runs it: ``layer`` itself, the first layer
    with its depth taps folded into input channels
    (:meth:`~fcircnn.models.config.AcceleratorConfig.folds_input`) or an fc layer reading its
    1x1x1 input as a map (:meth:`~fcircnn.models.config.AcceleratorConfig.folds_fc_input`),
    a 1x1x1 strided conv reading a subsampled input, or a conv with its kernel trimmed to the
    taps that read the map (:func:`~fcircnn.models.placement.trims_taps`), whose geometry the
    descriptor carries, a dense layer as its block-circulant equivalent
    (:meth:`~fcircnn.models.config.ResolvedLayer.datapath`); ``layer`` keeps the network's view
    (name, dense operations). ``rfft`` is the rfft step the pass runs in its post chain
    (:data:`~fcircnn.arch.descriptor.FLAG_RFFT`), whose output it writes (``None``: none).
    """

    layer: ResolvedLayer
    core: CoreConfig
    core_index: int
    descriptor: LayerDescriptor
    descriptors: tuple[LayerDescriptor, ...] = ()
    engine_layer: ResolvedLayer | None = None
    rfft: ResolvedLayer | None = None

    def __post_init__(self) -> None:
        if not self.descriptors:
            object.__setattr__(self, "descriptors", (self.descriptor,))
        if self.engine_layer is None:
            object.__setattr__(self, "engine_layer", self.layer)

    @property
    def folded(self) -> bool:
        """Whether the layer runs folded (depth taps into input channels, or an fc input
        read as a map): its weights and input move to other channels. (A subsampled input,
        :func:`~fcircnn.models.placement.subsample_steps`, keeps both.)"""
        return self.engine_layer.in_channels != self.layer.datapath().in_channels

    @property
    def output(self) -> str:
        """The network layer whose output the pass writes: the rfft it runs, or its own."""
        return self.layer.name if self.rfft is None else self.rfft.name

    @property
    def trimmed(self) -> bool:
        """Whether the layer runs with its kernel trimmed
        (:func:`~fcircnn.models.placement.trims_taps`): its weights are a slice of the
        original's taps, its input is the original's."""
        return not self.folded and self.engine_layer.kernel != self.layer.kernel

    @property
    def spread(self) -> bool:
        """Whether the layer reads its input compact
        (:data:`~fcircnn.arch.descriptor.FLAG_SPREAD`,
        :meth:`~fcircnn.models.config.AcceleratorConfig.spreads_input`)."""
        return bool(self.descriptor.flags & FLAG_SPREAD)

    @property
    def depths(self) -> int:
        """Output depths per depth the engine computes: 2 with
        :data:`~fcircnn.arch.descriptor.FLAG_DFOLD`
        (:meth:`~fcircnn.models.config.AcceleratorConfig.folded_depths`), else 1."""
        return DFOLD_DEPTHS if self.descriptor.flags & FLAG_DFOLD else 1

    @property
    def rows(self) -> int:
        """Row copies of the first layer's input folded into input channels
        (:meth:`~fcircnn.models.config.AcceleratorConfig.folded_rows`): the original kernel's
        rows less the engine kernel's, plus one (1: none)."""
        if not self.folded or self.layer.kind != "conv":
            return 1
        return self.layer.kernel[1] - self.engine_layer.kernel[1] + 1


@dataclass(frozen=True)
class NetworkPlan:
    """The memory map and descriptors of a network, without data (:func:`plan_network`).

    ``reuse_maps``: whether the feature maps share bytes by liveness; ``map_bytes_separate``
    and ``map_bytes_reused``: the bytes the maps take laid out one after another and by
    liveness (:func:`separate_layout`, :func:`reused_layout`), whichever this plan uses.
    """

    base: int
    end: int
    address_width: int
    regions: tuple[Region, ...]
    layers: tuple[LayerPlan, ...]
    reuse_maps: bool = False
    map_bytes_separate: int = 0
    map_bytes_reused: int = 0

    @property
    def descriptors(self) -> tuple[LayerDescriptor, ...]:
        """Every descriptor in list order (a pooling layer has two)."""
        return tuple(d for lp in self.layers for d in lp.descriptors)

    @property
    def desc_ptr(self) -> int:
        """Address of the first descriptor (the value for ``DESC_PTR``)."""
        return self.region("descriptors").base

    @property
    def windows(self) -> tuple[tuple[int, int], tuple[int, int]]:
        """The memory windows the image needs, ``(read, write)``, each ``(first byte, last
        byte)``: the engine reads the whole image and writes only from the cycle entries on
        (the cycle entries and the maps: the descriptors, weights and post tables lie
        before them)."""
        return (self.base, self.end - 1), (self.region("cycles").base, self.end - 1)

    def region(self, name: str) -> Region:
        """The region called ``name`` (``KeyError`` if there is none)."""
        for r in self.regions:
            if r.name == name:
                return r
        raise KeyError(name)


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def _slots(channels: int) -> int:
    return channels // 2


def _check_fit(acc: AcceleratorConfig, layer: ResolvedLayer) -> tuple[CoreConfig, int]:
    try:
        core = acc.core_for(layer)
    except ValueError as exc:
        raise CompileError(f"layer {layer.name!r}: {exc}") from None
    index = next(i for i, c in enumerate(acc.cores) if c is core)
    return core, index


def _strides(shape: tuple[int, int, int]) -> tuple[int, int, int]:
    """Byte strides (slot group, depth plane, row) of an NC/8DHW8 map of ``shape``."""
    D, H, W = shape
    return (D * H * W * 16, H * W * 16, W * 16)


def _derived(layer: ResolvedLayer, core: CoreConfig, B: int, *, fused: bool = False,
             depths: int = 1, in_map: tuple[int, int, int] | None = None,
             in_steps: tuple[int, int] = (1, 1), balanced: bool = False,
             spread: bool = False) -> dict:
    """The derived descriptor fields of a conv/fc/gap layer (see :mod:`.descriptor`); with
    ``fused`` (its pool runs in the drain) the output map is the pooled one and a tile step
    moves ``tile / stride`` pooled voxels; with ``depths`` output depths per depth of
    ``layer`` (:data:`~fcircnn.arch.descriptor.FLAG_DFOLD`) the output strides are those of
    the map stored: its slot-group stride, and ``depths`` of its planes per depth of
    ``layer``; ``in_map`` is the shape of the input map stored (default ``layer.in_shape``),
    whose plane and row strides a subsampled input
    (:func:`~fcircnn.models.placement.subsample_steps`) multiplies by ``in_steps``;
    ``balanced``: the tile evened out over the map's rows and columns
    (:meth:`~fcircnn.arch.geometry.CoreGeometry.layer_tile`); ``spread``: the input is stored
    compact (:data:`~fcircnn.arch.descriptor.FLAG_SPREAD`), one slot group per n-tile."""
    conv = layer.conv_shape
    cg = CoreGeometry.of(core, B)
    tile = cg.layer_tile(conv, balanced=balanced)
    tiles = tuple(-(-n // t) for n, t in zip(conv, tile, strict=True))
    stride = (1, 1, 1) if layer.kind != "conv" else layer.stride
    padding = (0, 0, 0) if layer.kind != "conv" else layer.padding
    pool_stride = layer.pool.stride if fused else (1, 1, 1)
    ins, outs = _strides(in_map or layer.in_shape), _strides(layer.out_shape if fused else conv)
    ins = (ins[0], ins[1] * in_steps[0], ins[2] * in_steps[1])
    if depths > 1:
        outs = (outs[0] * depths, outs[1] * depths, outs[2])
    axis_in = (ins[1], ins[2], 16)
    axis_out = (outs[1], outs[2], 16)
    return {
        "tile": tile, "tiles": tiles, "in_stride": ins, "out_stride": outs,
        "in_step": tuple(t * s * b for t, s, b in zip(tile, stride, axis_in, strict=True)),
        "in_pad_bytes": tuple(p * b for p, b in zip(padding, axis_in, strict=True)),
        "out_step": tuple(t // k * b for t, k, b in zip(tile, pool_stride, axis_out,
                                                         strict=True)),
        "weight_tile_bytes": cg.weight_tile_beats(layer.kernel_volume) * 16,
        "in_nt_step": (1 if spread else cg.in_groups) * ins[0],
        "out_mt_step": cg.out_groups * outs[0],
    }


def _subsampled(layer: ResolvedLayer) -> dict:
    """The :func:`_derived` arguments of ``layer``'s input map when it reads it subsampled
    (:func:`~fcircnn.models.placement.subsample_steps`): the stored map's shape and the steps;
    none otherwise (the engine layer's input is the map stored, or a fold of it)."""
    steps = subsample_steps(layer)
    return {} if steps == (1, 1) else {"in_map": layer.in_shape, "in_steps": steps}


def _fuses(layer: ResolvedLayer, core: CoreConfig, geo) -> bool:
    """Whether ``layer``'s pool runs in the drain (one descriptor) on hardware built for
    ``geo``: :func:`~fcircnn.arch.geometry.pool_fuses` and a core built with the fused
    pool."""
    return geo.fused_pool and pool_fuses(layer, core)


def _check_engine_fit(layer: ResolvedLayer, core: CoreConfig, geo) -> None:
    """Reject a layer the core's buffers (built for ``geo``, an
    :class:`~fcircnn.arch.geometry.EngineGeometry`), post-units or descriptor fields cannot
    hold."""
    stride = (1, 1, 1) if layer.kind != "conv" else layer.stride
    padding = (0, 0, 0) if layer.kind != "conv" else layer.padding
    what = "kernel" if layer.kind == "conv" else f"{layer.kind} kernel (its whole input map)"
    if max(layer.kernel) > MAX_KERNEL or max(stride) > MAX_KERNEL:
        raise CompileError(f"layer {layer.name!r}: {what} {_fmt(layer.kernel)} / stride "
                           f"{_fmt(stride)} exceeds the input buffer's limit of {MAX_KERNEL} "
                           f"per axis")
    if layer.kernel_volume > MAX_TAPS:
        raise CompileError(f"layer {layer.name!r}: {what} {_fmt(layer.kernel)} has "
                           f"{layer.kernel_volume} taps, more than the weight buffer's limit of "
                           f"{MAX_TAPS}")
    if any(s > g for s, g in zip(stride, geo.stride, strict=True)):
        raise CompileError(f"layer {layer.name!r}: stride {_fmt(stride)} exceeds core "
                           f"{core.name!r}'s input buffer, built for strides up to "
                           f"{_fmt(geo.stride)}")
    if layer.residual is not None and not geo.residual:
        raise CompileError(f"layer {layer.name!r}: has a residual input, core {core.name!r} was "
                           f"built without a residual buffer")
    cg = CoreGeometry.of(core, layer.block_size)
    box = cg.input_box(cg.layer_tile(layer.conv_shape), stride, layer.kernel)
    room = cg.input_box(cg.tile, geo.stride, geo.kernel)
    if any(b > r for b, r in zip(box, room, strict=True)):
        raise CompileError(f"layer {layer.name!r}: input tile {_fmt(box)} (kernel "
                           f"{_fmt(layer.kernel)}) does not fit core {core.name!r}'s input buffer "
                           f"{_fmt(room)}")
    if layer.kernel_volume > geo.taps:
        raise CompileError(f"layer {layer.name!r}: kernel of {layer.kernel_volume} taps does not "
                           f"fit core {core.name!r}'s weight buffer ({geo.taps} taps)")
    if any(p >= k for p, k in zip(padding, layer.kernel, strict=True)):
        raise CompileError(f"layer {layer.name!r}: padding {_fmt(padding)} must be smaller than "
                           f"the kernel {_fmt(layer.kernel)}")
    if layer.pool is not None:
        pool = layer.pool
        if max(layer.conv_shape) > MAX_POOL_MAP:
            raise CompileError(f"layer {layer.name!r}: pooled map {_fmt(layer.conv_shape)} exceeds "
                               f"CMaxPool's limit of {MAX_POOL_MAP} per axis")
        if not _fuses(layer, core, geo) and any(
                n > g for n, g in zip(layer.conv_shape, geo.pool_size, strict=True)):
            raise CompileError(f"layer {layer.name!r}: pooled map {_fmt(layer.conv_shape)} exceeds "
                               f"core {core.name!r}'s CMaxPool, built for maps up to "
                               f"{_fmt(geo.pool_size)}")
        if _fuses(layer, core, geo) and pool_carries(layer, core) and any(
                n > g for n, g in zip(layer.conv_shape[1:], geo.carry_map, strict=True)):
            raise CompileError(f"layer {layer.name!r}: conv map {_fmt(layer.conv_shape)} exceeds "
                               f"core {core.name!r}'s pool carry memories, built for maps of "
                               f"height and width up to {geo.carry_map}")
        if max(pool.window) > MAX_POOL_WINDOW or max(pool.stride) > MAX_POOL_WINDOW:
            raise CompileError(f"layer {layer.name!r}: pool window {_fmt(pool.window)} / stride "
                               f"{_fmt(pool.stride)} exceed CMaxPool's limit {MAX_POOL_WINDOW}")
        if any(p >= w for p, w in zip(pool.padding, pool.window, strict=True)):
            raise CompileError(f"layer {layer.name!r}: pool padding {_fmt(pool.padding)} must be "
                               f"smaller than the window {_fmt(pool.window)}")


def _check_accumulator_width(layer: ResolvedLayer, core: CoreConfig, geo) -> None:
    """Reject a layer whose accumulators (its :attr:`~fcircnn.models.resolve.ResolvedLayer.
    accumulator_bound`, the original layer's: a folded one sums the same products) exceed the
    width the core's CBN multiply is built for (``geo.acc_bits``)."""
    bound = layer.accumulator_bound
    if bound >= 1 << (geo.acc_bits - 1):
        raise CompileError(f"layer {layer.name!r}: accumulators up to {bound} need "
                           f"{bound.bit_length() + 1} bits, core {core.name!r}'s post chain was "
                           f"built for {geo.acc_bits}-bit accumulators (the largest bound of "
                           f"the network it was generated for)")


def _fmt(v) -> str:
    return "x".join(map(str, v))


def _core_geometry(acc: AcceleratorConfig, geometry) -> list:
    """Per core, the buffer geometry of the hardware (``geometry`` checked, or the one the
    accelerator's own network needs)."""
    if geometry is None:
        return [engine_geometry(acc, core) for core in acc.cores]
    geometry = list(geometry)
    if len(geometry) != len(acc.cores) or not all(isinstance(g, EngineGeometry)
                                                  for g in geometry):
        raise CompileError(f"geometry must be one EngineGeometry per core ({len(acc.cores)}), "
                           f"not {geometry!r}")
    return geometry


def plan_network(acc: AcceleratorConfig, *, base: int = 0, geometry=None,
                 reuse_maps: bool = False) -> NetworkPlan:
    """Lay out the DDR image and build the descriptors (no calibration, no data).

    A layer whose pool fits the conv tiles (:func:`~fcircnn.arch.geometry.pool_fuses`) runs
    as one descriptor with ``FLAG_POOL``: the drain pools every tile and the store writes the
    pooled map to ``<name>.output``. Any other layer with a pool runs as two descriptors: the
    convolution (whose output, the ``conv_shape`` map, goes to the region ``<name>.conv``) and
    a pool pass (:data:`~fcircnn.arch.descriptor.OP_POOL`) from there to ``<name>.output``.

    Parameters
    ----------
    acc : AcceleratorConfig
        Validated accelerator bound to its network
        (:func:`~fcircnn.models.config.load_accelerator`).
    base : int
        Byte address of the image; a multiple of :data:`ALIGN` (4096).
    geometry : sequence of EngineGeometry, optional
        Per core, what the hardware's buffers are built for
        (:meth:`fcircnn.hw.accelerator.Accelerator.from_config` with this ``geometry``);
        default: what ``acc``'s own network needs
        (:func:`~fcircnn.arch.geometry.engine_geometry`), the hardware ``fcircnn generate``
        and ``fcircnn sim`` build. With a given geometry the image runs on hardware built for
        another network, provided every layer fits it.
    reuse_maps : bool
        Lay the feature maps out by liveness (:func:`reused_layout`): a map's bytes are
        reused once its last reader has run. The image is smaller; after a run only the maps
        still live at its end hold their layer's output (``Region.live``). Default: every map
        its own bytes, every layer's output readable after the run.

    Raises
    ------
    CompileError
        Naming the layer and the limit: no core fits (kernel > ``max_kernel``, stride >
        ``max_stride``, ...), the core's buffers (input tile, weight taps, stride, residual
        buffer, CMaxPool map size; the absolute limits of 64 per kernel axis and 4096 taps),
        the weight-beat rule
        of the core, accumulator bound ``>= 2**31``, pool limits, a descriptor field overflow,
        a weight image or post table the DMA cannot read
        (:func:`~fcircnn.gen.dma_plan.plan_block`); or ``base`` misaligned, or the image passing
        ``2**address_width``.
    """
    if not isinstance(base, int) or isinstance(base, bool) or base < 0 or base % ALIGN:
        raise CompileError(f"base must be a non-negative multiple of {ALIGN} (4 KB), "
                           f"not {base!r}")
    net = acc.network
    originals = passes(net)
    fits = [_check_fit(acc, layer) for layer in originals]
    layers = [acc.engine_layer(layer) for layer in originals]  # as the engine runs them
    geos = _core_geometry(acc, geometry)
    for layer, original, (core, index) in zip(layers, originals, fits, strict=True):
        _check_engine_fit(layer, core, geos[index])
        _check_accumulator_width(original, core, geos[index])
    # Per layer: whether a pool pass follows the conv (a pool that does not fuse).
    pool_pass = [layer.pool is not None and not _fuses(layer, core, geos[index])
                 for layer, (core, index) in zip(layers, fits, strict=True)]

    alloc = _Allocator(base)
    n_desc = len(layers) + sum(pool_pass)
    # What the engine only reads first (descriptors, weights, post tables), then what it
    # writes (cycle entries, maps): the write window is one range (NetworkPlan.windows).
    desc = alloc.add("descriptors", n_desc * DESCRIPTOR_BYTES, "descriptors",
                     f"{n_desc} descriptors of {DESCRIPTOR_BYTES} bytes (DESC_PTR)")
    tables = _table_regions(acc, alloc, layers, fits)
    cycles = alloc.add("cycles", n_desc * CYCLE_BYTES, "cycles",
                       f"{n_desc} cycle entries (uint64 cycles, uint32 PE-busy, uint32 "
                       "DMA-stall)")
    specs = _map_specs(acc, originals, layers, pool_pass, tables[0][3])
    maps, per_layer = _map_regions(alloc, specs, layers, tables, reuse_maps)
    for layer in net.resolved:  # the domain steps' maps: where their outputs are
        if layer.transform:
            maps[layer.name] = maps[map_of(net, layer.name)]
    end = alloc.cursor
    limit = 1 << acc.address_width
    if end > limit:
        raise AddressSpaceError(
            f"image [{base:#x}, {end:#x}) passes the {acc.address_width}-bit address space of "
            f"{acc.path or acc.name} (address_width: {acc.address_width}, up to {limit:#x}); "
            f"give a base of at most {max(0, limit - (end - base)):#x}")

    limits = DmaLimits.from_config(acc)
    plans = []
    k = 0  # descriptor index
    for i, (layer, (core, core_index), own) in enumerate(zip(layers, fits, per_layer,
                                                             strict=True)):
        link = _Links(desc.base, cycles.base, k, i == len(layers) - 1)
        try:
            descs = _layer_descriptors(acc, i, layer, originals[i], core, core_index, own,
                                       maps, link, pool_pass[i], geos[core_index])
            for blob in (own.weights, own.post):
                plan_block(blob.base, blob.size, limits=limits)
        except ValueError as exc:
            raise CompileError(f"layer {layer.name!r}: descriptor: {exc}") from None
        k += len(descs)
        plans.append(LayerPlan(originals[i], core, core_index, descs[0], descs, layer,
                               acc.rfft_of(originals[i])))
    return NetworkPlan(base, end, acc.address_width, tuple(alloc.regions), tuple(plans),
                       reuse_maps, separate_layout(specs)[1], reused_layout(specs)[1])


class _Allocator:
    """Regions laid out one after another from ``base``, each at a multiple of :data:`ALIGN`."""

    def __init__(self, base: int):
        self.cursor = base
        self.regions: list[Region] = []

    def add(self, name: str, size: int, kind: str, description: str) -> Region:
        region = self.place(name, self.cursor, size, kind, description)
        self.cursor = _round_up(self.cursor + max(size, 1), ALIGN)
        return region

    def place(self, name: str, base: int, size: int, kind: str, description: str,
              live: tuple[int, int] | None = None) -> Region:
        """A region at ``base`` (the caller moves the cursor)."""
        region = Region(name, base, size, kind, description, live)
        self.regions.append(region)
        return region


@dataclass(frozen=True)
class _LayerRegions:
    """One layer's regions: weights, post records, the conv map before a pool pass (or
    ``None``) and the output map; and its channel tiles."""

    weights: Region
    post: Region
    conv: Region | None
    output: Region
    m_tiles: int
    n_tiles: int


@dataclass(frozen=True)
class _Links:
    """Where a layer's descriptors chain: the descriptor list's and cycle entries' bases, the
    index of the layer's first descriptor, whether the layer is the network's last."""

    desc_base: int
    cycles_base: int
    first: int
    last_layer: bool

    def fields(self, offset: int, last: bool) -> dict:
        """``cycles_addr`` and ``next_desc`` of the layer's descriptor ``offset``."""
        index = self.first + offset
        return {"cycles_addr": self.cycles_base + index * CYCLE_BYTES,
                "next_desc": 0 if last else self.desc_base + (index + 1) * DESCRIPTOR_BYTES}


def _table_regions(acc, alloc, layers, fits):
    """Every layer's weight and post regions, in layer order, with its core's channel
    tiles: ``[(weights, post, m_tiles, n_tiles), ...]``."""
    B = acc.block_size
    tables = []
    for layer, (core, _) in zip(layers, fits, strict=True):
        m_tiles = -(-layer.padded_out_channels // core.tm)
        n_tiles = -(-layer.padded_in_channels // core.tn)
        taps = layer.kernel_volume
        wbytes = m_tiles * n_tiles * CoreGeometry.of(core, B).weight_tile_beats(taps) * 16
        w = alloc.add(f"{layer.name}.weights", wbytes, "weights",
                      f"{m_tiles}x{n_tiles} tiles of {core.tm}x{core.tn} ch, {taps} taps "
                      f"(core {core.name})")
        records = m_tiles * core.tm // 2
        p = alloc.add(f"{layer.name}.post", records * POST_RECORD_BYTES, "post",
                      f"{_slots(layer.padded_out_channels)} post records of "
                      f"{POST_RECORD_BYTES} bytes (+ zero records to {m_tiles} whole "
                      "output-channel tiles)")
        tables.append((w, p, m_tiles, n_tiles))
    return tables


@dataclass(frozen=True)
class _MapSpec:
    """A feature map's region before it has an address: name, bytes, kind, description and
    live range (:attr:`Region.live`)."""

    name: str
    size: int
    kind: str
    description: str
    live: tuple[int, int]

    @property
    def span(self) -> int:
        """Bytes it takes in the image (whole pages)."""
        return _round_up(max(self.size, 1), ALIGN)


def _map_specs(acc, originals, layers, pool_pass, first_n_tiles) -> list[_MapSpec]:
    """The input map and every layer's maps (the conv output before a pool pass, the output),
    in layer order, with their live ranges in descriptor indices: a map is written by its
    pass (the input by the host, before descriptor 0) and read by the passes whose ``input``
    or ``residual`` it holds (:func:`~fcircnn.models.placement.map_of`: a domain step reads
    its pass's map), a conv map by its pool pass; the network's output, and a map no pass
    reads, stay live to the last descriptor. ``first_n_tiles``: the first layer's n-tiles
    (:func:`_table_regions`), one slot group each where it reads its input compact."""
    net = acc.network
    first = layers[0]
    in_slots = _slots(first.padded_in_channels)
    compact = ""
    if acc.spreads_input(originals[0]):  # one slot group per n-tile (FLAG_SPREAD)
        in_slots = first_n_tiles * SLOTS_PER_BEAT
        compact = ", spread compact: a group per n-tile"
    folded = (" (depth taps and row copies folded into channels)"
              if acc.folded_rows(originals[0]) > 1 else
              " (depth taps folded into channels)" if acc.folds_input(originals[0]) else "")
    starts = [0]  # each layer's first descriptor index
    for separate in pool_pass:
        starts.append(starts[-1] + 1 + separate)
    last_desc = starts[-1] - 1
    readers: dict[str | None, int] = {}
    for i, layer in enumerate(layers):
        for source in [layer.input] + ([layer.residual] if layer.residual else []):
            readers[map_of(net, source)] = starts[i]
    specs = [_MapSpec("input", ncdhw8_size(in_slots, *first.in_shape), "input",
                      f"input {in_slots} slots x {_fmt(first.in_shape)} NC/8DHW8{folded}"
                      f"{compact}",
                      (0, readers.get(None, last_desc)))]
    for i, (layer, orig, separate) in enumerate(zip(layers, originals, pool_pass,
                                                    strict=True)):
        # The maps the layer stores are the network's (a depth fold writes them back).
        out_slots = orig.out_slots
        if separate:
            specs.append(_MapSpec(f"{layer.name}.conv", ncdhw8_size(out_slots, *orig.conv_shape),
                                  "conv", f"conv output before the pool, {out_slots} slots x "
                                  f"{_fmt(orig.conv_shape)} NC/8DHW8",
                                  (starts[i], starts[i] + 1)))
        written = starts[i + 1] - 1
        read = readers.get(orig.name, last_desc) if i < len(layers) - 1 else last_desc
        specs.append(_MapSpec(f"{layer.name}.output", ncdhw8_size(out_slots, *orig.out_shape),
                              "output", f"output {out_slots} slots x "
                              f"{'x'.join(map(str, orig.out_shape))} NC/8DHW8",
                              (written, max(read, written))))
    return specs


def _map_regions(alloc, specs, layers, tables, reuse):
    """The maps' regions (``specs``, :func:`_map_specs`) from the allocator's cursor, one
    after another or, with ``reuse``, by :func:`reused_layout`; and every layer's
    :class:`_LayerRegions` (with its :func:`_table_regions`): ``(maps, per_layer)``, ``maps``
    the map region of each layer's output by name (``None``: the network input)."""
    offsets, total = (reused_layout if reuse else separate_layout)(specs)
    arena = alloc.cursor
    placed = {s.name: alloc.place(s.name, arena + o, s.size, s.kind, s.description, s.live)
              for s, o in zip(specs, offsets, strict=True)}
    alloc.cursor = arena + total
    maps = {None: placed["input"]}
    per_layer = []
    for layer, (w, p, m_tiles, n_tiles) in zip(layers, tables, strict=True):
        o = placed[f"{layer.name}.output"]
        maps[layer.name] = o
        per_layer.append(_LayerRegions(w, p, placed.get(f"{layer.name}.conv"), o, m_tiles,
                                       n_tiles))
    return maps, per_layer


def _pages(*, inp, out, res=None, weight=None, post=None) -> dict[str, int]:
    """The ``*_pages`` fields of a descriptor whose streams touch these regions (``inp`` the
    input map's; ``None``: a stream it does not use), each the region's pages from its base
    (:func:`~fcircnn.arch.descriptor.region_pages`)."""
    regions = {"in": inp, "out": out, "res": res, "weight": weight, "post": post}
    return {f"{name}_pages": 0 if r is None else region_pages(r.base, r.base + max(r.size, 1))
            for name, r in regions.items()}


def _layer_descriptors(acc, i, layer, orig, core, core_index, own, maps, link, separate, geo):
    """Layer ``i``'s descriptors: its conv/fc/gap descriptor (``layer``, as the engine runs
    it; with its port splits, :func:`port_split`, on the core's tile or, where
    :func:`~fcircnn.arch.descriptor.balances_tiles` and the performance model finds it
    faster, on the tile evened out over the map's rows and columns) and, where its pool does
    not fuse (``separate``), the pool pass on the stored map (``orig``'s, also when folded).
    ``geo``: the core's :class:`~fcircnn.arch.geometry.EngineGeometry` (its post chain's
    stages time the model).

    Raises
    ------
    ValueError
        If a field does not fit the descriptor or the address width.
    """
    B = acc.block_size
    pool = layer.pool if separate else None  # the pool pass's
    fused = layer.pool is not None and not separate
    depths = acc.folded_depths(orig)
    flags = ((FLAG_CBN if layer.cbn else 0) | (FLAG_CRELU if layer.crelu else 0)
             | (FLAG_RESIDUAL if layer.residual is not None else 0)
             | (FLAG_POOL if fused else 0) | (FLAG_DFOLD if depths > 1 else 0)
             | (FLAG_ROWLANES if acc.row_groups(orig) > 1 else 0)
             | (FLAG_RFFT if acc.rfft_of(orig) is not None else 0)
             | (FLAG_LANE0 if orig.takes_lane0 else 0)
             | (FLAG_SPREAD if acc.spreads_input(orig) else 0))
    ones, zeros = (1, 1, 1), (0, 0, 0)
    fused_pool = layer.pool if fused else Pool(ones, ones, zeros)
    conv_last = link.last_layer and pool is None
    fields = dict(
        layer=orig.index, core=core_index, op=OP_GAP if layer.kind == "gap" else OP_CONV,
        flags=flags | (FLAG_LAST if conv_last else 0),
        in_slots=_slots(layer.padded_in_channels), in_shape=layer.in_shape,
        out_slots=_slots(layer.padded_out_channels), conv_shape=layer.conv_shape,
        out_shape=layer.out_shape if fused else layer.conv_shape,
        kernel=layer.kernel, stride=layer.stride, padding=layer.padding,
        pool_window=fused_pool.window, pool_stride=fused_pool.stride,
        pool_padding=fused_pool.padding,
        in_base=maps[layer.input].base, out_base=(own.conv or own.output).base,
        res_base=0 if layer.residual is None else maps[layer.residual].base,
        weight_base=own.weights.base, post_base=own.post.base, weight_bytes=own.weights.size,
        m_tiles=own.m_tiles, n_tiles=own.n_tiles, **link.fields(0, conv_last),
        **_pages(inp=maps[layer.input], out=own.conv or own.output,
                 res=None if layer.residual is None else maps[layer.residual],
                 weight=own.weights, post=own.post),
    )

    def build(balanced: bool) -> LayerDescriptor:
        return LayerDescriptor(**fields, **_derived(
            layer, core, B, fused=fused, depths=depths, balanced=balanced,
            spread=bool(flags & FLAG_SPREAD), **_subsampled(orig)))

    d = choose_layout(acc, core, geo, build)
    d.check_address_width(acc.address_width)
    if pool is None:
        return (d,)
    slots = orig.out_slots
    pd = LayerDescriptor(
        layer=orig.index, core=core_index, op=OP_POOL,
        flags=FLAG_POOL | (FLAG_LAST if link.last_layer else 0),
        in_slots=slots, in_shape=orig.conv_shape, out_slots=slots,
        conv_shape=orig.conv_shape, out_shape=orig.out_shape, kernel=ones,
        stride=ones, padding=zeros, pool_window=pool.window,
        pool_stride=pool.stride, pool_padding=pool.padding, in_base=own.conv.base,
        out_base=own.output.base, res_base=0, weight_base=0, post_base=0, weight_bytes=0,
        m_tiles=1, n_tiles=1, **link.fields(1, link.last_layer),
        in_stride=_strides(orig.conv_shape), out_stride=_strides(orig.out_shape),
        **_pages(inp=own.conv, out=own.output),
    )
    pd.check_address_width(acc.address_width)
    return (d, pd)
