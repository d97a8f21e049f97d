"""Placement policy: which core of an accelerator runs which layer, and how.

A core fits a layer when the layer's kernel, stride and pool window are within the core's
``max_*`` (:func:`fit_problems`); a layer runs on the fitting core with the smallest
``max_kernel`` (:func:`core_for`); the first layer folds its depth taps into input channels
when its input leaves input blocks of its core idle (:func:`folds_input`), and pairs of its
output depths into output channels when it leaves half the output lanes idle
(:func:`folded_depths`), and row-shifted copies of its input when they save PE steps
(:func:`folded_rows`); an fc layer on a 1x1x1 input reads it as a ``(1, 4, 4)`` map where
its core's buffers already hold such a kernel (:func:`folds_fc_input`); a 1x1x1 strided conv
reads only the planes and rows it uses (:func:`subsample_steps`); a conv whose kernel has taps
that read padding only drops them (:func:`trims_taps`); a gap layer on a map one plane deep reads
it as planes of one channel tile (:func:`views_gap`); a conv shallower than its core's depth lanes
runs rows of its tiles in the idle lanes (:func:`row_groups`); :func:`engine_layer` is the
layer as the engine runs it, a dense layer as its block-circulant equivalent
(:meth:`~.resolve.ResolvedLayer.datapath`). The steps between the domains run in no pass of
their own: an rfft in the post chain of the pass that makes its input (:func:`rfft_of`), an
irfft deferred to the dense layer that reads it, or on the host at either end.
:class:`~.schema.AcceleratorConfig` offers these as methods.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

from fcircnn.arch import geometry
from fcircnn.arch.descriptor import DFOLD_DEPTHS
from fcircnn.arch.geometry import SLOT_GROUP_CHANNELS, CoreGeometry, core_lanes, pool_fuses
from fcircnn.arch.ports import PortMap
from fcircnn.arch.walk import splits_input_slots

from .errors import Problem
from .resolve import FC_FOLD_SHAPE, LANES, SPREAD, ResolvedLayer, fmt3

# What placement reads of the configuration (:mod:`.schema`'s ``CoreConfig``,
# ``NetworkConfig`` and ``AcceleratorConfig`` are each one), stated here so that the policy
# does not depend on the schema that offers it as methods.


class CoreSpec(Protocol):
    """A core: its name, tiles and limits."""

    name: str
    tn: int
    tm: int
    td: int
    tr: int
    tc: int
    max_kernel: tuple[int, int, int]
    max_stride: tuple[int, int, int]
    max_pool_window: tuple[int, int, int]


class NetworkSpec(Protocol):
    """A validated network: its resolved layers, by name."""

    @property
    def resolved(self) -> tuple[ResolvedLayer, ...]: ...

    def layer(self, name: str) -> ResolvedLayer: ...


class AcceleratorSpec(Protocol):
    """An accelerator bound to its network."""

    block_size: int
    cores: Sequence[CoreSpec]
    axi_ports: int
    row_lanes: bool
    fold_input_taps: bool
    fold_input_rows: bool

    @property
    def network(self) -> NetworkSpec: ...

__all__ = [
    "AcceleratorSpec",
    "CoreSpec",
    "NetworkSpec",
    "core_for",
    "cores_by_preference",
    "engine_layer",
    "fit_problems",
    "folded_depths",
    "folded_rows",
    "folds_fc_input",
    "folds_input",
    "map_of",
    "passes",
    "placement_problems",
    "rfft_of",
    "row_fold_tile_cycles",
    "row_groups",
    "spreads_input",
    "subsample_steps",
    "trims_taps",
    "views_gap",
]


def fit_problems(core: CoreSpec, layer: ResolvedLayer) -> list[str]:
    """Why ``core`` cannot run ``layer`` (empty list: it can).

    An ``fc`` layer counts as a 1x1x1 kernel with stride 1 (channel-minor flatten); a
    ``gap`` layer and the domain steps run on any core. Block size is checked at accelerator
    level.
    """
    if layer.kind == "gap" or layer.transform:
        return []
    kernel = (1, 1, 1) if layer.kind == "fc" else layer.kernel
    stride = (1, 1, 1) if layer.kind == "fc" else layer.stride
    why = []
    if any(k > m for k, m in zip(kernel, core.max_kernel, strict=True)):
        why.append(f"kernel {fmt3(kernel)} > max_kernel {fmt3(core.max_kernel)}")
    if any(s > m for s, m in zip(stride, core.max_stride, strict=True)):
        why.append(f"stride {fmt3(stride)} > max_stride {fmt3(core.max_stride)}")
    if layer.pool is not None and any(
            w > m for w, m in zip(layer.pool.window, core.max_pool_window, strict=True)):
        why.append(f"pool window {fmt3(layer.pool.window)} > max_pool_window "
                   f"{fmt3(core.max_pool_window)}")
    return why


def cores_by_preference(acc: AcceleratorSpec) -> tuple[CoreSpec, ...]:
    """Cores ordered smallest ``max_kernel`` volume first (file order breaks ties)."""
    return tuple(sorted(acc.cores, key=lambda c: math.prod(c.max_kernel)))

def core_for(acc: AcceleratorSpec, layer: ResolvedLayer) -> CoreSpec:
    """The core of ``acc`` that runs ``layer``: the fitting core with the smallest
    ``max_kernel`` (first in file order among equals).

    Raises
    ------
    ValueError
        If no core can run the layer (never for a layer of the bound network).
    """
    if layer.block_size != acc.block_size:
        raise ValueError(f"layer {layer.name!r} has B = {layer.block_size}, the accelerator "
                         f"B = {acc.block_size}")
    for core in cores_by_preference(acc):
        if not fit_problems(core, layer):
            return core
    raise ValueError(f"no core can run layer {layer.name!r}: " + "; ".join(
        f"{c.name}: {', '.join(fit_problems(c, layer))}" for c in acc.cores))

def folds_input(acc: AcceleratorSpec, layer: ResolvedLayer) -> bool:
    """Whether ``layer`` runs with its depth taps folded into input channels
    (:meth:`~.resolve.ResolvedLayer.fold_depth_taps`).

    Only the network input can be laid out folded (the host writes it), so the layer must
    be the first (the only one the network grammar lets read the input), a conv with
    ``Kd > 1``, and its input must fill fewer of its core's ``Tn/B`` input blocks than
    there are (C3D conv1a: 3 channels, one block of four on a ``Tn = 32`` core, folds to
    three), or take fewer input tiles folded than its ``Kd`` taps take unfolded (the paper's
    dense conv1, a block per real input channel, 24 channels, on a ``Tn = 16`` core: five
    tiles of one tap against two tiles of three). Off with ``fold_input_taps: false``.
    """
    if (not acc.fold_input_taps or layer.kind != "conv" or layer.input is not None
            or layer.kernel[0] == 1):
        return False
    channels, kd, tn = layer.datapath().padded_in_channels, layer.kernel[0], \
        core_for(acc, layer).tn
    return channels < tn or -(-kd * channels // tn) < -(-channels // tn) * kd


def folded_depths(acc: AcceleratorSpec, layer: ResolvedLayer) -> int:
    """Output depths per depth of ``layer`` folded (:meth:`~.resolve.ResolvedLayer.
    fold_depth_taps`): :data:`~fcircnn.arch.descriptor.DFOLD_DEPTHS` when it folds its depth
    taps (:func:`folds_input`) and its core's idle output lanes take a second output depth,
    else 1.

    The core must have room for the doubled output channels in one output-channel tile
    (``2 * M <= Tm``), the layer must add no residual (its tile would be read as two boxes
    too), and the fold must keep the sums (whole slot groups, an even output depth, no pool
    across depths). The ``Kd + sd`` input copies of both depths may take several
    input-channel tiles: each pass then computes two output depths for the PE beats of
    ``(Kd + sd) / Kd`` times one depth's copies. C3D conv1a on a ``Tm = 128`` core: 64 output
    channels fill half the lanes; folded, each pass computes two output depths. The paper's
    dense conv1 (``spectral_c3d``, a block per real input channel: 24 channels) on a ``Tn =
    32`` core: 96 channels in three input tiles for two depths, against 72 in three for one.
    """
    if not folds_input(acc, layer) or layer.residual is not None:
        return 1
    core = core_for(acc, layer)
    layer = layer.datapath()
    depths = DFOLD_DEPTHS
    if depths * layer.padded_out_channels > core.tm:
        return 1
    try:
        layer.fold_depth_taps(depths)  # states which layers fold at all
    except ValueError:
        return 1
    return depths


def folded_rows(acc: AcceleratorSpec, layer: ResolvedLayer) -> int:
    """Row copies of ``layer`` folding its depth taps (:func:`folds_input`; ``rows`` of
    :meth:`~.resolve.ResolvedLayer.fold_depth_taps`): the ``U`` in ``1..Kr`` whose tile takes
    fewest cycles by :func:`row_fold_tile_cycles` (the smallest such ``U``); 1 when the layer
    does not fold or with ``fold_input_rows: false``.

    C3D conv1a with two output depths on a ``Tn = 64`` core of four ports: 32 channels, ``U =
    2`` fills the 64 with a 1x2x3 kernel, 6 PE steps instead of 9, its input boxes split over
    two ports; on ``Tn = 32`` 9 steps at best, so 1. ResNet-18's 7x7x7 conv1 on one port and
    ``Tn = 32``: seven copies would save 7% of the steps for 3.5 times the input bytes, so 1.
    """
    if not acc.fold_input_rows or not folds_input(acc, layer):
        return 1
    return min(range(1, layer.kernel[1] + 1),
               key=lambda u: (row_fold_tile_cycles(acc, layer, u), u))


def row_fold_tile_cycles(acc: AcceleratorSpec, layer: ResolvedLayer, rows: int) -> int:
    """A first-order bound of a spatial tile of ``layer`` folded with ``rows`` row copies (and
    :func:`folded_depths`): the larger of its PE beats (channel tiles times taps times the
    tile's voxels a lane steps through) and its input beats (the box of every channel tile, in
    16-byte beats; halved where the boxes are read in halves over two ports:
    :meth:`~fcircnn.arch.ports.PortMap.splits_inputs` and
    :func:`~fcircnn.arch.walk.splits_input_slots`, the compiler's rule). The
    performance model (:mod:`fcircnn.gen.perf_model`) measures the choice; this only ranks the
    candidates, the copies costing DDR reads as they save PE steps."""
    core = core_for(acc, layer)
    cg = CoreGeometry.of(core, acc.block_size)
    folded = layer.datapath().fold_depth_taps(folded_depths(acc, layer), rows=rows)
    channels = folded.padded_in_channels
    tiles = [min(core.tn, channels - start) for start in range(0, channels, core.tn)]
    voxels = core.td * core.tr * core.tc // core_lanes(core)
    pe = len(tiles) * folded.kernel_volume * voxels
    box = core.td * ((core.tr - 1) * folded.stride[1] + folded.kernel[1]) \
        * ((core.tc - 1) * folded.stride[2] + folded.kernel[2])
    if spreads_input(acc, layer):  # one compact slot group per n-tile
        return max(pe, len(tiles) * box)
    beats = sum(-(-c // SLOT_GROUP_CHANNELS) for c in tiles) * box
    if PortMap(acc.axi_ports).splits_inputs(cg.in_groups) and splits_input_slots(
            channels // 2, len(tiles), cg):
        beats = -(-beats // 2)
    return max(pe, beats)


def spreads_input(acc: AcceleratorSpec, layer: ResolvedLayer) -> bool:
    """Whether ``layer`` reads its input compact (:data:`~fcircnn.arch.descriptor.FLAG_SPREAD`:
    one slot group per n-tile instead of ``Tn/16``): a layer reading the ``spread`` network
    input, on a core that can (:func:`~fcircnn.arch.geometry.spreads`). C3D's dense conv1 on
    a ``Tn = 64`` core: 8 real channels in one 16-byte beat instead of four."""
    return (layer.in_layout == SPREAD
            and geometry.spreads(core_for(acc, layer).tn, acc.block_size))


def folds_fc_input(acc: AcceleratorSpec, layer: ResolvedLayer) -> bool:
    """Whether fc ``layer`` reads its 1x1x1 input as a ``(1, 4, 4)`` map
    (:meth:`~.resolve.ResolvedLayer.fold_fc_input`): 16 weight taps per tile and DMA command
    instead of one.

    The input must come from another layer (the host writes the network input as it is), be
    whole slot groups at every position of the map and fill the core's ``Tn`` at each
    (``C >= 16 * Tn``), and another layer on the same core must already have a kernel that
    covers the map, so the fold does not grow the core's buffers (C3D: fc7 and fc8 beside
    fc6's 1x4x4 kernel).
    """
    if layer.kind != "fc" or layer.input is None:
        return False
    try:
        folded = layer.datapath().fold_fc_input()  # states which inputs fold at all
    except ValueError:
        return False
    core = core_for(acc, layer)
    if folded.in_channels < core.tn:
        return False
    return any(other.name != layer.name and other.weighted
               and all(k >= f for k, f in zip(other.kernel, FC_FOLD_SHAPE, strict=True))
               and core_for(acc, other).name == core.name
               for other in acc.network.resolved)


def subsample_steps(layer: ResolvedLayer) -> tuple[int, int]:
    """The factors ``(sd, sr)`` by which the engine multiplies the plane and row strides of
    ``layer``'s input map (:meth:`~.resolve.ResolvedLayer.subsample_input`): a 1x1x1 conv
    without padding reads only the planes and rows its stride uses (ResNet-18's stride-2
    shortcuts); ``(1, 1)`` for every other layer."""
    try:
        layer.subsample_input()  # states which layers subsample at all
    except ValueError:
        return 1, 1
    return layer.stride[0], layer.stride[1]


def trims_taps(layer: ResolvedLayer) -> bool:
    """Whether the engine runs conv ``layer`` with its kernel trimmed to its
    :meth:`~.resolve.ResolvedLayer.useful_taps` (:meth:`~.resolve.ResolvedLayer.trim_taps`):
    some tap at an end of an axis reads padding for every output voxel (ResNet-18's stage 4:
    a map one voxel deep keeps one depth tap of three)."""
    if layer.kind != "conv":
        return False
    return any(len(r) != k for r, k in zip(layer.useful_taps(), layer.kernel, strict=True))


def views_gap(acc: AcceleratorSpec, layer: ResolvedLayer) -> bool:
    """Whether gap ``layer`` reads its input as planes of its core's ``Tn`` channels
    (:meth:`~.resolve.ResolvedLayer.view_gap_input`): one channel tile instead of
    ``(C/Tn)**2`` weight tiles, all but the diagonal zero (ResNet-18's 512 channels on a 1x4x4
    map: 64 weight tiles on a ``Tn = Tm = 64`` core). The core's buffers do not grow: the kernel
    stays ``(1, H, W)`` and the input box of a tile is ``Td`` planes of it."""
    if layer.kind != "gap":
        return False
    try:
        layer.view_gap_input(core_for(acc, layer).tn)  # states which layers view at all
    except ValueError:
        return False
    return True


def engine_layer(acc: AcceleratorSpec, layer: ResolvedLayer) -> ResolvedLayer:
    """``layer`` as the engine runs it: depth taps (and :func:`folded_depths` output depths,
    :func:`folded_rows` row copies) folded if :func:`folds_input`, its input read as a map
    if :func:`folds_fc_input`, its input subsampled if :func:`subsample_steps` says so, its
    kernel trimmed if
    :func:`trims_taps`, a gap layer's input read as planes of channel tiles if
    :func:`views_gap`, else itself (one of these at most, in that order); a dense layer as its
    block-circulant equivalent (:meth:`~.resolve.ResolvedLayer.datapath`) before any of
    these. It runs on ``core_for(layer)`` of the original layer."""
    run = layer.datapath()
    if folds_input(acc, layer):
        return run.fold_depth_taps(folded_depths(acc, layer), rows=folded_rows(acc, layer))
    if folds_fc_input(acc, layer):
        return run.fold_fc_input()
    layer = run
    if subsample_steps(layer) != (1, 1):
        return layer.subsample_input()
    if trims_taps(layer):
        return layer.trim_taps()
    return layer.view_gap_input(core_for(acc, layer).tn) if views_gap(acc, layer) else layer


def row_groups(acc: AcceleratorSpec, layer: ResolvedLayer) -> int:
    """The row groups of ``layer`` as the engine runs it
    (:data:`~fcircnn.arch.descriptor.FLAG_ROWLANES`, :func:`fcircnn.arch.geometry.row_groups`
    of its core's depth lanes and its tile's depth and rows): a conv (not fc or gap) whose
    depth leaves its core's lanes idle, whose pool does not run in the drain and whose depth
    is not folded (:func:`folded_depths`); 1 otherwise or with ``row_lanes: false``.
    ResNet-18's stage 4 on a ``Td = 4`` core: 4, each lane one row of the 4 x 4 map."""
    if not acc.row_lanes or layer.kind != "conv" or folded_depths(acc, layer) > 1:
        return 1
    core = core_for(acc, layer)
    run = engine_layer(acc, layer)
    if pool_fuses(run, core):
        return 1
    depth, rows, _ = CoreGeometry.of(core, acc.block_size).layer_tile(run.conv_shape)
    return geometry.row_groups(core_lanes(core), depth, rows)


def passes(network: NetworkSpec) -> tuple[ResolvedLayer, ...]:
    """The layers that run as engine passes, in order: every layer but the domain steps
    (:func:`rfft_of`)."""
    return tuple(layer for layer in network.resolved if not layer.transform)


def rfft_of(network: NetworkSpec, layer: ResolvedLayer) -> ResolvedLayer | None:
    """The rfft step that runs in ``layer``'s post chain: the one that reads ``layer``'s
    ``lanes`` output (``None`` if there is none)."""
    if layer.out_layout != LANES:
        return None
    return next((r for r in network.resolved if r.kind == "rfft" and r.input == layer.name),
                None)


def map_of(network: NetworkSpec, name: str | None) -> str | None:
    """The pass whose output map holds layer ``name``'s output (``None``: the network input,
    which the host writes): a pass's own; an rfft's, the pass it runs in (or the input, where
    the host takes it); an irfft's, its input's (it is deferred)."""
    while name is not None:
        layer = network.layer(name)
        if not layer.transform:
            return name
        name = layer.input
    return None


def _transform_problems(network: NetworkSpec) -> list[Problem]:
    """Why the domain steps of ``network`` cannot run on an accelerator: an rfft of a map
    another layer reads too (its pass writes the slots, not the lanes), a dense layer after an
    irfft with a pool."""
    problems = []
    for layer in network.resolved:
        if layer.kind == "rfft" and layer.input is not None:
            readers = [r.name for r in network.resolved if layer.input in (r.input, r.residual)]
            if len(readers) > 1:
                problems.append(Problem(
                    "network", f"rfft {layer.name!r} runs in the post chain of "
                               f"{layer.input!r}, whose time-domain output "
                               f"{', '.join(repr(r) for r in readers if r != layer.name)} "
                               "reads too; the accelerator stores one of the two"))
        if layer.takes_lane0 and layer.pool is not None:
            problems.append(Problem(
                "network", f"layer {layer.name!r}: a dense layer on an irfft's slots cannot "
                           "pool on the accelerator (its post chain sums every part of a "
                           "block first); pool before the irfft"))
    return problems


def placement_problems(acc: AcceleratorSpec, network: NetworkSpec) -> list[Problem]:
    """Why ``network`` cannot run on ``acc``: a layer of another block size, a layer no core
    fits (empty when every layer has a core)."""
    problems = _transform_problems(network)
    for layer in network.resolved:
        if layer.block_size != acc.block_size:
            problems.append(Problem(
                "block_size", f"must equal every layer's block size: layer {layer.name!r} "
                              f"has B = {layer.block_size}, this file {acc.block_size}"))
            continue
        if rfft_of(network, layer) is not None and layer.pool is not None and not pool_fuses(
                engine_layer(acc, layer), core_for(acc, layer)):
            problems.append(Problem(
                "cores", f"layer {layer.name!r}: its pool (window {fmt3(layer.pool.window)}) "
                         f"runs as a pool pass on core {core_for(acc, layer).name!r}, which "
                         f"cannot take the rfft {rfft_of(network, layer).name!r} after it; the "
                         "pool runs in the drain where the core's tile is even on the pool's "
                         "stride-2 axes (arch.geometry.pool_fuses)"))
        reasons = [f"{c.name}: {', '.join(why)}"
                   for c in acc.cores if (why := fit_problems(c, layer))]
        if len(reasons) == len(acc.cores):
            pool = f", pool window {fmt3(layer.pool.window)}" if layer.pool else ""
            problems.append(Problem(
                "cores", f"no core can run layer {layer.name!r} ({layer.kind}, kernel "
                         f"{fmt3(layer.kernel)}, stride {fmt3(layer.stride)}{pool}): "
                         + "; ".join(reasons)))
    return problems
