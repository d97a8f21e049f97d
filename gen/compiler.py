"""Network compiler: an accelerator configuration and weights to a DDR image.

:func:`compile_network` calibrates and quantizes the network with the golden model
(:func:`fcircnn.models.network.calibrate`), lays out every buffer the layer engine reads or
writes in one contiguous DDR image starting at ``base``, writes one
:class:`~fcircnn.arch.descriptor.LayerDescriptor` per layer (format: :mod:`fcircnn.arch.descriptor`)
and computes the int8 output slots of every layer with the golden integer contract, which the
engine must reproduce bit for bit. :func:`plan_network` does the layout and every check
without touching data (fast, for sizing).

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

Weight image (per layer)
------------------------
For the core that runs the layer (``acc.core_for(layer)``, tiles ``Tn``, ``Tm``), output-channel
tile ``mt < m_tiles = ceil(M/Tm)`` outer, input-channel tile ``nt < n_tiles = ceil(N/Tn)`` inner
(``M``, ``N`` padded to ``B``), one :class:`~fcircnn.hw.buffer_weight.WeightBuffer` tile image
each, contiguous, ``weight_image_beats(Tn, Tm, B, taps) * 16`` bytes: tap ``t`` (``kd``, ``kr``,
``kc`` row-major, ``taps = Kd*Kr*Kc``) major, then block pair ``j = p*(Tn/B) + q`` (``p``, ``q``
block indices inside the tile), then bin slot ``k < B/2``; two int8 bytes per slot, ``re``
(= ``c``) then ``im`` (= ``d``) of the integer weight slot ``wq[mt*Tm/B + p, nt*Tn/B + q, k,
kd, kr, kc]``. Block pairs outside the layer (partial tiles) are zero. A layer whose
descriptor has ``FLAG_WSPLIT`` (its weight tiles read in two halves over the two AXI ports,
:func:`fcircnn.arch.ports.weight_halves`) has each tile laid out half-major: the first half of
every tap's beats, tap by tap, then the second half of every tap's beats; with
``FLAG_WQUARTER`` too (read in four quarters over four ports,
:func:`fcircnn.arch.ports.weight_quarters`) quarter-major: the first quarter of every tap's
beats, tap by tap, then the second, the third and the fourth.

A two-port accelerator splits a layer's weight tiles, its input boxes or both where the
performance model says the descriptor runs faster so (:func:`port_split`): in practice the
weight tiles of the fully connected layers, whose weights bound them while port 0 idles, the
input boxes of the folded first layers and the stride-2 layers, whose input binds them while
port 1 idles, and both where the two are close (each port then reads half of each). A split
input box changes nothing in the image. A four-port accelerator can also read a weight tile in
quarters, one per port (``FLAG_WSPLIT | FLAG_WQUARTER``, alone or with ``FLAG_ISPLIT``): the
fully connected layers again, whose halves leave ports 0 and 2 idle.

Global average pooling is lowered to a conv over the whole map (kernel = input shape, stride 1,
no padding) with block-diagonal identity weights: slot 0 of a diagonal block pair is ``1 + 1i``
(component-wise product: ``re*1``, ``im*1``), slots ``k >= 1`` are ``1 + 0i``, every other pair
0. Its accumulator is the voxel sum the golden model requantizes, so its post parameters are the
quantized network's unchanged. On a map one plane deep whose channels are several of its core's
``Tn`` (:func:`~fcircnn.models.placement.views_gap`) it reads the map as ``k`` planes of one
channel tile: one weight tile of identity blocks, the post records of one plane's slots
(:func:`~fcircnn.models.fold.view_gap_post_slots`), its ``k x 1 x 1`` output the bytes of the
network's ``1 x 1 x 1`` map. A conv whose kernel taps at an end of an axis read padding only
runs without them (:func:`~fcircnn.models.placement.trims_taps`): its weight image holds the
kept taps (:func:`~fcircnn.models.fold.trim_weight_slots`). A fully connected layer is the
conv whose kernel covers the input map (channel-minor flatten, as in the golden model).

Post-parameter table (per layer)
--------------------------------
One 32-byte little-endian record per output slot ``s`` (slot count rounded up to a multiple of
8; the extra records are zero and produce zero slots):

======  =====  ===========================================================
offset  bytes  field
======  =====  ===========================================================
0x00    2x2    ``mult`` re, im (int16)
0x04    2x2    ``res_mult`` re, im (int16; 0 without residual)
0x08    6x2    ``bias`` re, im (int48, two's complement)
0x14    1x2    ``shift`` re, im (uint8, 0..47)
0x16    10     reserved, 0
======  =====  ===========================================================

The post stage always applies the table (it carries the requantization even for layers without
CBN): ``t = acc*mult + bias + res*res_mult``, rounding shift, clamp, CReLU if ``FLAG_CRELU``,
CMaxPool if ``FLAG_POOL`` (docs/contract.md section 6).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from fcircnn.arch.descriptor import (
    DESCRIPTOR_BYTES,
    DFOLD_DEPTHS,
    FLAG_CBN,
    FLAG_CRELU,
    FLAG_DFOLD,
    FLAG_IQUARTER,
    FLAG_ISPLIT,
    FLAG_LANE0,
    FLAG_LAST,
    FLAG_MINNER,
    FLAG_POOL,
    FLAG_RESIDUAL,
    FLAG_RFFT,
    FLAG_ROWLANES,
    FLAG_WQUARTER,
    FLAG_WSPLIT,
    OP_CONV,
    OP_GAP,
    OP_POOL,
    LayerDescriptor,
    balances_tiles,
    reuses_inputs,
    weight_parts,
)
from fcircnn.arch.geometry import (
    MAX_KERNEL,
    MAX_POOL_MAP,
    MAX_POOL_WINDOW,
    MAX_TAPS,
    PAGE_BYTES,
    CoreGeometry,
    EngineGeometry,
    engine_geometry,
    pool_carries,
    pool_fuses,
)
from fcircnn.arch.ports import PortMap
from fcircnn.arch.transforms import RFFT_SLOTS
from fcircnn.arch.walk import quarters_inputs, splits_inputs
from fcircnn.models.config import AcceleratorConfig, CoreConfig, Pool, ResolvedLayer
from fcircnn.models.fold import (
    fold_fc_weight_slots,
    fold_input_slots,
    fold_post_slots,
    fold_weight_slots,
    trim_weight_slots,
    view_gap_post_slots,
)
from fcircnn.models.layout import SLOTS_PER_BEAT, ncdhw8_size, pack_ncdhw8
from fcircnn.models.network import (
    LayerOverflowError,
    NetworkWeights,
    QuantizedNetwork,
    calibrate,
    random_input,
    run_int,
)
from fcircnn.models.placement import map_of, passes, subsample_steps
from fcircnn.models.quant import Granularity, PostParams

from .dma_plan import DmaLimits, plan_block
from .image import CompiledImage
from .staging import staged_folder

__all__ = [
    "ALIGN",
    "CYCLE_BYTES",
    "POST_RECORD_BYTES",
    "AddressSpaceError",
    "CompileError",
    "DdrImage",
    "LayerPlan",
    "NetworkPlan",
    "PostOverflowError",
    "Region",
    "calibrate_post",
    "compile_network",
    "gap_weight_slots",
    "image_for_clip",
    "network_input_slots",
    "pack_network_input",
    "pack_post_table",
    "pack_weight_image",
    "plan_network",
    "port_split",
    "reused_layout",
    "separate_layout",
]

#: Alignment of every region and of the image (bytes): AXI's 4 KiB page.
ALIGN = PAGE_BYTES
#: Bytes of one post-parameter record.
POST_RECORD_BYTES = 32
#: Bytes of one cycle-count entry (one beat: uint64 cycles, uint32 PE-busy, uint32 DMA-stall).
CYCLE_BYTES = 16

_INT16 = 1 << 15
_INT48 = 1 << 47


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

    ``kind`` is one of :data:`fcircnn.gen.image.REGION_KINDS` (``"conv"``: a conv's output
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
             in_steps: tuple[int, int] = (1, 1), balanced: bool = False) -> dict:
    """The derived descriptor fields of a conv/fc/gap layer (see :mod:`.descriptor`); with
    ``fused`` (its pool runs in the drain) the output map is the pooled one and a tile step
    moves ``tile / stride`` pooled voxels; with ``depths`` output depths per depth of
    ``layer`` (:data:`~fcircnn.arch.descriptor.FLAG_DFOLD`) the output strides are those of
    the map stored: its slot-group stride, and ``depths`` of its planes per depth of
    ``layer``; ``in_map`` is the shape of the input map stored (default ``layer.in_shape``),
    whose plane and row strides a subsampled input
    (:func:`~fcircnn.models.placement.subsample_steps`) multiplies by ``in_steps``;
    ``balanced``: the tile evened out over the map's rows and columns
    (:meth:`~fcircnn.arch.geometry.CoreGeometry.layer_tile`)."""
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
        "in_nt_step": cg.in_groups * ins[0],
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
    specs = _map_specs(acc, originals, layers, pool_pass)
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


def _map_specs(acc, originals, layers, pool_pass) -> list[_MapSpec]:
    """The input map and every layer's maps (the conv output before a pool pass, the output),
    in layer order, with their live ranges in descriptor indices: a map is written by its
    pass (the input by the host, before descriptor 0) and read by the passes whose ``input``
    or ``residual`` it holds (:func:`~fcircnn.models.placement.map_of`: a domain step reads
    its pass's map), a conv map by its pool pass; the network's output, and a map no pass
    reads, stay live to the last descriptor."""
    net = acc.network
    first = layers[0]
    in_slots = _slots(first.padded_in_channels)
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
                      f"input {in_slots} slots x {_fmt(first.in_shape)} NC/8DHW8{folded}",
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


def separate_layout(specs) -> tuple[list[int], int]:
    """Offsets of ``specs`` (anything with ``span``) laid out one after another, in order, and
    the bytes they take."""
    offsets, cursor = [], 0
    for spec in specs:
        offsets.append(cursor)
        cursor += spec.span
    return offsets, cursor


def reused_layout(specs) -> tuple[list[int], int]:
    """Offsets of ``specs`` (anything with ``span`` and ``live``) where maps whose live ranges
    do not meet share bytes, and the bytes they take.

    Greedy by size: largest map first (then earliest written), each at the lowest offset
    free of every map already placed whose live range meets its own. Two maps live in the
    same descriptor never share a byte, so a pass never reads what it writes (no in-place
    output: the engine reads a tile's input box, halo included, while it stores earlier
    tiles, and the next tile's box while it computes)."""
    order = sorted(range(len(specs)), key=lambda k: (-specs[k].span, specs[k].live, k))
    offsets: list[int | None] = [None] * len(specs)
    for k in order:
        lo, hi = specs[k].live
        taken = sorted((offsets[j], offsets[j] + specs[j].span) for j in range(len(specs))
                       if offsets[j] is not None and specs[j].live[0] <= hi
                       and lo <= specs[j].live[1])
        at = 0
        for start, stop in taken:
            if at + specs[k].span <= start:
                break
            at = max(at, stop)
        offsets[k] = at
    total = max((o + s.span for o, s in zip(offsets, specs, strict=True)), default=0)
    return offsets, total


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
             | (FLAG_LANE0 if orig.takes_lane0 else 0))
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
    )

    from .perf_model import EngineTiming

    timing = EngineTiming().with_post_stages(geo)

    def build(balanced: bool) -> tuple[LayerDescriptor, int | None]:
        d = LayerDescriptor(**fields, **_derived(layer, core, B, fused=fused, depths=depths,
                                                 balanced=balanced, **_subsampled(orig)))
        flags, span = _port_split(acc, d, core, timing)
        return replace(d, flags=d.flags | flags), span

    d, span = build(False)
    if balances_tiles(d.op, d.flags) and d.tile != CoreGeometry.of(core, B).layer_tile(
            layer.conv_shape, balanced=True):
        other, other_span = build(True)
        if (_span(acc, core, other, other_span, timing)
                < _span(acc, core, d, span, timing)):
            d = other
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
    )
    pd.check_address_width(acc.address_width)
    return (d, pd)


def gap_weight_slots(blocks: int, B: int, kernel: tuple[int, int, int]
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Integer weight slots ``(re, im)`` ``[blocks, blocks, B/2, *kernel]`` of global average
    pooling lowered to a conv: block-diagonal, slot 0 ``1 + 1i``, slots ``k >= 1`` ``1 + 0i``.

    With these weights :func:`~fcircnn.models.spectral.conv3d_slots_int` over a map of shape
    ``kernel`` returns the voxel sum of each slot part.
    """
    half = B // 2
    re = np.zeros((blocks, blocks, half, *kernel), dtype=np.int64)
    im = np.zeros_like(re)
    diag = np.arange(blocks)
    re[diag, diag] = 1
    im[diag, diag, 0] = 1
    return re, im


def _span(acc: AcceleratorConfig, core: CoreConfig, d: LayerDescriptor,
          span: int | None, timing=None) -> int:
    """``span`` (the modelled span of ``d`` :func:`_port_split` found), or the model's."""
    from .perf_model import memory_of, model_descriptor

    if span is not None:
        return span
    return model_descriptor(d, core, acc.block_size, memory_of(acc), timing)["span"]


#: The share of its cycles a descriptor must wait on its loads for :func:`port_split` to try
#: splitting them: a split cannot save more than that wait.
SPLIT_MIN_STALL = 0.005


def port_split(acc: AcceleratorConfig, d: LayerDescriptor, core: CoreConfig,
               timing=None) -> int:
    """The flags that split conv descriptor ``d``'s reads over the AXI ports or reorder its
    walk, or 0.

    The candidates are its weight tiles (:data:`~fcircnn.arch.descriptor.FLAG_WSPLIT`, where
    the core :meth:`~fcircnn.arch.ports.PortMap.splits_weights`), its input boxes
    (:data:`~fcircnn.arch.descriptor.FLAG_ISPLIT`, where the core
    :meth:`~fcircnn.arch.ports.PortMap.splits_inputs` and the layer
    :func:`~fcircnn.arch.walk.splits_inputs`), both (each port then reads half of each) and
    on four ports the weight tiles in quarters (``FLAG_WSPLIT | FLAG_WQUARTER``, where the
    core :meth:`~fcircnn.arch.ports.PortMap.quarters_weights`) and the input boxes in quarters
    (``FLAG_ISPLIT | FLAG_IQUARTER``, where the core
    :meth:`~fcircnn.arch.ports.PortMap.quarters_inputs` and the layer
    :func:`~fcircnn.arch.walk.quarters_inputs`), each with either weight split; each of
    these and none also with the m-tiles innermost (:data:`~fcircnn.arch.descriptor.
    FLAG_MINNER`, where :func:`~fcircnn.arch.descriptor.reuses_inputs`: one input box read
    for both m-tiles of its tile). The performance model picks the fastest, none unless one
    is faster. A descriptor
    that the model finds waiting on its loads less than :data:`SPLIT_MIN_STALL` of its cycles
    is not split (a split cannot save more than that wait; this keeps the sweep's per-point
    cost low)."""
    return _port_split(acc, d, core, timing)[0]


def _port_split(acc: AcceleratorConfig, d: LayerDescriptor, core: CoreConfig, timing=None
                ) -> tuple[int, int | None]:
    """:func:`port_split`'s flags and the modelled span of ``d`` with them (``None`` where
    it found no candidate and modelled nothing)."""
    from .perf_model import memory_of, model_descriptor

    B = acc.block_size
    cg = CoreGeometry.of(core, B)
    ports = PortMap(acc.axi_ports)
    w = FLAG_WSPLIT if ports.splits_weights(cg.weight_tile_beats(1)) else 0
    i = FLAG_ISPLIT if ports.splits_inputs(cg.in_groups) and splits_inputs(d, cg) else 0
    q = FLAG_WSPLIT | FLAG_WQUARTER if ports.quarters_weights(cg.weight_tile_beats(1)) else 0
    iq = (FLAG_ISPLIT | FLAG_IQUARTER if ports.quarters_inputs(cg.in_groups)
          and quarters_inputs(d, cg) else 0)
    splits = {0, w, i, w | i, q, q | i if q else 0, iq, iq | w if iq else 0,
              iq | q if iq else 0}
    if reuses_inputs(d.op, d.m_tiles, d.n_tiles, d.flags, d.pool_window):
        splits |= {flags | FLAG_MINNER for flags in splits}
    candidates = sorted(splits - {0})
    if not candidates:
        return 0, None
    mem = memory_of(acc)
    base = model_descriptor(d, core, B, mem, timing)
    if base["dma_stall"] < SPLIT_MIN_STALL * base["cycles"]:
        return 0, base["span"]
    best, best_span = 0, base["span"]
    for flags in candidates:
        span = model_descriptor(replace(d, flags=d.flags | flags), core, B, mem,
                                timing)["span"]
        if span < best_span:
            best, best_span = flags, span
    return best, best_span


def pack_weight_image(wq_re: np.ndarray, wq_im: np.ndarray, Tn: int, Tm: int, B: int, *,
                      parts: int = 1) -> bytes:
    """Integer weight slots ``[P, Q, B/2, Kd, Kr, Kc]`` -> the layer's weight image (module
    docstring), ``ceil(P*B/Tm) * ceil(Q*B/Tn)`` tiles; ``parts``: each tile in that many
    parts of every tap's beats, part-major (2: ``FLAG_WSPLIT``, half-major; 4: with
    ``FLAG_WQUARTER``, quarter-major; :func:`~fcircnn.arch.descriptor.weight_parts`)."""
    P, Q, half = wq_re.shape[:3]
    taps = math.prod(wq_re.shape[3:])
    pm, qn = Tm // B, Tn // B
    mt, nt = -(-P // pm), -(-Q // qn)
    both = np.zeros((mt * pm, nt * qn, half, taps, 2), dtype=np.int8)
    both[:P, :Q, ..., 0] = np.asarray(wq_re).reshape(P, Q, half, taps)
    both[:P, :Q, ..., 1] = np.asarray(wq_im).reshape(P, Q, half, taps)
    # [mt, p, nt, q, k, tap, part] -> [mt, nt, tap, p, q, k, part]
    tiles = both.reshape(mt, pm, nt, qn, half, taps, 2).transpose(0, 2, 5, 1, 3, 4, 6)
    if parts not in (1, 2, 4):
        raise ValueError(f"parts must be 1, 2 or 4, not {parts!r}")
    if parts > 1:
        # [mt, nt, tap, part, bytes of the part] -> [mt, nt, part, tap, bytes]
        tap_bytes = pm * qn * half * 2
        if tap_bytes % (parts * 16):
            raise ValueError(f"a tap of {tap_bytes // 16} beats does not split in {parts}")
        tiles = np.ascontiguousarray(tiles).reshape(mt, nt, taps, parts, tap_bytes // parts)
        tiles = tiles.transpose(0, 1, 3, 2, 4)
    return np.ascontiguousarray(tiles).tobytes()


def pack_post_table(post: PostParams, records: int | None = None) -> bytes:
    """Post parameters ``[2, S]`` -> ``records`` (default ``ceil(S/8)*8``) records of 32 bytes
    (module docstring); records beyond ``S`` are zero.

    Raises
    ------
    OverflowError
        If a value leaves its field (cannot happen for :func:`~fcircnn.models.quant.fold_post`
        output).
    """
    S = post.mult.shape[1]
    res_mult = np.zeros_like(post.mult) if post.res_mult is None else post.res_mult
    for name, arr, lo, hi in (("mult", post.mult, -_INT16, _INT16), ("res_mult", res_mult,
                              -_INT16, _INT16), ("bias", post.bias, -_INT48, _INT48),
                              ("shift", post.shift, 0, 48)):
        if arr.size and (arr.min() < lo or arr.max() >= hi):
            raise OverflowError(f"{name} outside [{lo}, {hi - 1}]")
    count = _round_up(S, SLOTS_PER_BEAT) if records is None else records
    if count < S:
        raise ValueError(f"records = {count} is fewer than the {S} slots")
    rec = np.zeros((count, POST_RECORD_BYTES), dtype=np.uint8)

    def le(values: np.ndarray, dtype: str, nbytes: int) -> np.ndarray:
        return np.asarray(values).astype(dtype).view(np.uint8).reshape(S, -1)[:, :nbytes]

    for c in (0, 1):
        rec[:S, 2 * c:2 * c + 2] = le(post.mult[c], "<i2", 2)
        rec[:S, 4 + 2 * c:6 + 2 * c] = le(res_mult[c], "<i2", 2)
        rec[:S, 8 + 6 * c:14 + 6 * c] = le(post.bias[c], "<i8", 6)
        rec[:S, 0x14 + c] = post.shift[c].astype(np.uint8)
    return rec.tobytes()


@dataclass(frozen=True)
class DdrImage:
    """A compiled network: the image bytes, its memory map, descriptors and expected outputs.

    Attributes
    ----------
    data : bytes
        The image, ``data[0]`` at address ``plan.base``; ``len(data) = plan.end - plan.base``.
    plan : NetworkPlan
        Regions and per-layer descriptors.
    quantized : QuantizedNetwork
        The integer network the image encodes.
    input_parts : (ndarray, ndarray)
        The quantized input slots ``(re, im)`` int8 ``[S, D, H, W]``.
    expected : dict of str to (ndarray, ndarray)
        Per layer name, the int8 output slot parts ``(re, im)`` ``[S, D, H, W]`` (pooled) of the
        golden integer contract: what the engine must write to ``<name>.output``.
    network, accelerator : str
        Names.
    """

    data: bytes
    plan: NetworkPlan
    quantized: QuantizedNetwork
    input_parts: tuple[np.ndarray, np.ndarray]
    expected: dict[str, tuple[np.ndarray, np.ndarray]]
    network: str
    accelerator: str

    @property
    def base(self) -> int:
        return self.plan.base

    @property
    def regions(self) -> tuple[Region, ...]:
        return self.plan.regions

    @property
    def descriptors(self) -> tuple[LayerDescriptor, ...]:
        return self.plan.descriptors

    @property
    def desc_ptr(self) -> int:
        return self.plan.desc_ptr

    def region(self, name: str) -> Region:
        return self.plan.region(name)

    def read(self, addr: int, size: int) -> bytes:
        """``size`` image bytes at absolute address ``addr``."""
        if addr < self.base or addr + size > self.base + len(self.data):
            raise ValueError(f"[{addr:#x}, {addr + size:#x}) is outside the image")
        return self.data[addr - self.base:addr - self.base + size]

    def memory_map(self) -> dict:
        """JSON-ready memory map: image extent, regions and descriptor fields."""
        return {
            "network": self.network,
            "accelerator": self.accelerator,
            "base": self.base,
            "end": self.plan.end,
            "size": len(self.data),
            "address_width": self.plan.address_width,
            "desc_ptr": self.desc_ptr,
            "windows": {kind: {"first": lo, "last": hi}
                        for kind, (lo, hi) in zip(("read", "write"), self.plan.windows,
                                                  strict=True)},
            "descriptor_bytes": DESCRIPTOR_BYTES,
            "post_record_bytes": POST_RECORD_BYTES,
            "maps": {"reused": self.plan.reuse_maps,
                     "bytes_separate": self.plan.map_bytes_separate,
                     "bytes_reused": self.plan.map_bytes_reused},
            "regions": [{"name": r.name, "base": r.base, "size": r.size, "kind": r.kind,
                         "description": r.description,
                         **({"live": list(r.live)} if self.plan.reuse_maps
                            and r.live is not None else {})}
                        for r in self.regions],
            "descriptors": [{"name": lp.layer.name, "core_name": lp.core.name, **d.as_dict()}
                            for lp in self.plan.layers for d in lp.descriptors],
        }

    #: The files :meth:`save` writes, in writing order.
    FILES = ("image.bin", "memory_map.json", "expected.npz")

    def save(self, directory: str | os.PathLike[str]) -> list[Path]:
        """Write ``image.bin``, ``memory_map.json`` and ``expected.npz`` (int8 arrays
        ``<layer>.re`` / ``<layer>.im`` and ``input.re`` / ``input.im``) into ``directory``
        (created if missing; other files left alone); return the paths.

        All three or none: they are written into a temporary folder and moved into place
        together (:func:`~fcircnn.gen.staging.staged_folder`).

        Raises
        ------
        OSError
            A file cannot be written or moved into place (``directory`` is then unchanged).
        """
        out = Path(directory)
        arrays = {"input.re": self.input_parts[0].astype(np.int8),
                  "input.im": self.input_parts[1].astype(np.int8)}
        for name, (re, im) in self.expected.items():
            arrays[f"{name}.re"] = re.astype(np.int8)
            arrays[f"{name}.im"] = im.astype(np.int8)
        with staged_folder(out) as tmp:
            (tmp / self.FILES[0]).write_bytes(self.data)
            (tmp / self.FILES[1]).write_text(json.dumps(self.memory_map(), indent=2) + "\n")
            with open(tmp / self.FILES[2], "wb") as f:
                np.savez(f, **arrays)
        return [out / name for name in self.FILES]


def pack_network_input(plan: NetworkPlan, xq_re: np.ndarray, xq_im: np.ndarray) -> bytes:
    """The ``input`` region's bytes for the quantized network input ``[S, D, H, W]``
    (:meth:`~fcircnn.models.network.QuantizedNetwork.quantize_input`): NC/8DHW8 of the input,
    or of its depth (and row) copies when the first layer runs folded
    (:func:`network_input_slots`). A host running a new clip on a compiled image writes these
    bytes at the region's base.
    """
    return pack_ncdhw8(*network_input_slots(plan, xq_re, xq_im))


def network_input_slots(plan: NetworkPlan, xq_re: np.ndarray, xq_im: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray]:
    """The slots of the ``input`` region for the quantized network input ``[S, D, H, W]``:
    itself, or its depth (and row) copies when the first layer runs folded
    (:func:`~fcircnn.models.fold.fold_input_slots` with the layer's
    :attr:`LayerPlan.depths` and :attr:`LayerPlan.rows`)."""
    first = plan.layers[0]
    if first.folded:
        return fold_input_slots(xq_re, xq_im, first.layer.datapath(), first.depths, first.rows)
    return xq_re, xq_im


def _clip(net, x) -> np.ndarray:
    """``x`` as a float clip of the network's input shape (:class:`CompileError` if not)."""
    inp = net.input
    expected_shape = (inp.channels, inp.depth, inp.height, inp.width)
    x = np.asarray(x, dtype=np.float64)
    if x.shape != expected_shape:
        raise CompileError(f"input has shape {x.shape}, network {net.name} expects "
                           f"{expected_shape}")
    return x


def _expected(plan: NetworkPlan, ints) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per layer, the int8 output slot parts of the contract's run; for a pass that runs an
    rfft in its post chain, the rfft's (what the pass writes)."""
    expected = {name: (t.re.astype(np.int8), t.im.astype(np.int8))
                for name, t in ints.items() if name}
    for lp in plan.layers:
        expected[lp.layer.name] = expected[lp.output]
    return expected


def _with_rfft(plan: NetworkPlan, qnet: QuantizedNetwork, B: int) -> NetworkPlan:
    """``plan`` with each rfft pass's requantization in its descriptor (``rfft_mult``, one
    per part and slot position of a block, and ``rfft_shift``: the quantized network's, the
    same for every block)."""
    layers = []
    for lp in plan.layers:
        if lp.rfft is not None:
            post = qnet.layers[lp.rfft.name].post
            mult = [0] * (2 * RFFT_SLOTS)
            for p in (0, 1):
                for k in range(B // 2):
                    mult[p * RFFT_SLOTS + k] = int(post.mult[p, k]) & 0xFFFF
            d = replace(lp.descriptor, rfft_mult=tuple(mult), rfft_shift=int(post.shift[0, 0]))
            lp = replace(lp, descriptor=d, descriptors=(d, *lp.descriptors[1:]))
        layers.append(lp)
    return replace(plan, layers=tuple(layers))


def calibrate_post(net, **kwargs):
    """:func:`fcircnn.models.network.calibrate` (same arguments and result), a layer whose post
    parameters do not fit their fields raised as :class:`PostOverflowError`."""
    try:
        return calibrate(net, **kwargs)
    except LayerOverflowError as exc:
        why = str(exc).removeprefix(f"layer {exc.layer!r}: ")
        raise PostOverflowError(f"layer {exc.layer!r}: post parameters: {why}") from None


def compile_network(
    acc: AcceleratorConfig,
    *,
    weights: NetworkWeights | None = None,
    x: np.ndarray | None = None,
    seed: int = 0,
    granularity: Granularity = "tensor",
    base: int = 0,
    geometry=None,
    calibration: np.ndarray | None = None,
    statistic: str = "max",
    progress=None,
    reuse_maps: bool = False,
) -> DdrImage:
    """Compile ``acc.network`` into a DDR image for ``acc``.

    Parameters
    ----------
    acc : AcceleratorConfig
        Validated accelerator bound to its network.
    weights : NetworkWeights, optional
        Float weights (default: random with ``seed``); missing CBN is calibrated on ``x``.
    x : ndarray ``[C, D, H, W]``, optional
        Input clip (default: random with ``seed``); calibrates the int8 scales and is written
        quantized into the ``input`` region.
    seed, granularity
        As in :func:`fcircnn.models.network.run_network`.
    calibration : ndarray ``[N, C, D, H, W]``, optional
        Calibration set: the int8 scales (and CBN parameters the weights lack) come from these
        clips instead of ``x`` alone; ``x`` is still the clip the image runs.
    statistic : str
        ``"max"`` or a percentile ``"pQ"`` of the magnitudes over the calibration data
        (:func:`~fcircnn.models.quant.calibration_percentile`).
    base : int
        Address of the image, a multiple of 4096.
    progress : callable ``(label, done, total)``, optional
        Per layer of the calibration's float pass and of the integer pass that gives the
        expected outputs (:data:`fcircnn.models.network.Progress`).
    geometry : sequence of EngineGeometry, optional
        The hardware's buffer geometry per core (see :func:`plan_network`).
    reuse_maps : bool
        Lay the feature maps out by liveness (see :func:`plan_network`).

    Returns
    -------
    DdrImage
        Whose ``expected`` equals ``run_network(net, ("int",), ...)``'s ``int_outputs`` for the
        same arguments.

    Raises
    ------
    CompileError
        See :func:`plan_network`; also a post parameter that does not fit int16/int48, or an
        input of the wrong shape.
    """
    plan = plan_network(acc, base=base, geometry=geometry, reuse_maps=reuse_maps)
    net = acc.network
    x = _clip(net, random_input(net, seed) if x is None else x)
    weights, qnet = calibrate_post(net, weights=weights, x=x, seed=seed,
                                   granularity=granularity, clips=calibration,
                                   statistic=statistic, progress=progress)
    xq = qnet.quantize_input(net, x)
    ints = run_int(net, qnet, xq, progress)
    B = acc.block_size
    plan = _with_rfft(plan, qnet, B)

    image = bytearray(plan.end - plan.base)

    def put(addr: int, blob: bytes) -> None:
        image[addr - plan.base:addr - plan.base + len(blob)] = blob

    for k, d in enumerate(plan.descriptors):
        put(plan.desc_ptr + k * DESCRIPTOR_BYTES, d.pack())
    put(plan.region("input").base, pack_network_input(plan, *xq))
    for lp in plan.layers:
        layer, ql, d = lp.layer, qnet.layers[lp.layer.name], lp.descriptor
        if layer.kind == "gap":  # the engine layer's blocks (one channel tile if viewed)
            run = lp.engine_layer
            wq_re, wq_im = gap_weight_slots(run.padded_in_channels // B, B, run.kernel)
        elif lp.folded and layer.kind == "fc":
            wq_re, wq_im = fold_fc_weight_slots(ql.wq_re, ql.wq_im, B)
        elif lp.folded:
            wq_re, wq_im = fold_weight_slots(ql.wq_re, ql.wq_im, lp.depths, layer.stride[0],
                                             lp.rows)
        elif lp.trimmed:
            wq_re, wq_im = trim_weight_slots(ql.wq_re, ql.wq_im, layer)
        else:
            wq_re, wq_im = ql.wq_re, ql.wq_im
        blob = pack_weight_image(wq_re, wq_im, lp.core.tn, lp.core.tm, B,
                                 parts=weight_parts(d.flags))
        assert len(blob) == d.weight_bytes
        put(d.weight_base, blob)
        try:
            post = ql.post
            if lp.depths > 1:
                post = fold_post_slots(post, lp.depths)
            elif layer.kind == "gap" and lp.folded:
                post = view_gap_post_slots(post, lp.engine_layer.padded_out_channels // 2)
            put(d.post_base, pack_post_table(post, records=d.m_tiles * lp.core.tm // 2))
        except (OverflowError, ValueError) as exc:
            raise PostOverflowError(f"layer {layer.name!r}: post parameters: {exc}") from None
    expected = _expected(plan, ints)
    ddr = DdrImage(bytes(image), plan, qnet, (xq[0].astype(np.int8), xq[1].astype(np.int8)),
                   expected, net.name, acc.name)
    # The checks a host makes of an image (its regions, the list in its bytes, the windows):
    # an ImageError here is a bug of this compiler, not bad input.
    CompiledImage.from_ddr_image(ddr)
    return ddr


def image_for_clip(acc: AcceleratorConfig, image: DdrImage, x: np.ndarray) -> DdrImage:
    """``image`` with clip ``x`` in its ``input`` region and the contract's outputs for it.

    Weights, post tables, descriptors and the int8 scales stay those of ``image`` (the input
    is quantized with its input scale), so running many clips costs one compilation and one
    calibration, not one each. For an image compiled with a calibration set the result equals
    ``compile_network`` of the same arguments with ``x`` (the scales do not depend on ``x``).

    Raises
    ------
    CompileError
        If ``x`` does not have the network's input shape or ``image`` is of another network.
    """
    net = acc.network
    if image.network != net.name or image.accelerator != acc.name:
        raise CompileError(f"image is of {image.accelerator}/{image.network}, not "
                           f"{acc.name}/{net.name}")
    x = _clip(net, x)
    qnet = image.quantized
    xq = qnet.quantize_input(net, x)
    ints = run_int(net, qnet, xq)
    data = bytearray(image.data)
    blob = pack_network_input(image.plan, *xq)
    start = image.plan.region("input").base - image.plan.base
    data[start:start + len(blob)] = blob
    expected = _expected(image.plan, ints)
    return replace(image, data=bytes(data),
                   input_parts=(xq[0].astype(np.int8), xq[1].astype(np.int8)),
                   expected=expected)
