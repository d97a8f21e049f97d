"""The compiler's second step: how each descriptor runs, chosen by the performance model
(:mod:`fcircnn.gen.perf_model`): its reads split over the AXI ports or its m-tiles
innermost (:func:`port_split`), and its tile evened out over the map where that is
faster (:func:`choose_layout`). The plan (:func:`fcircnn.gen.plan.plan_network`) asks
this module once per descriptor; only this module of the compiler asks the model.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from fcircnn.arch.descriptor import (
    FLAG_IQUARTER,
    FLAG_ISPLIT,
    FLAG_MINNER,
    FLAG_WQUARTER,
    FLAG_WSPLIT,
    LayerDescriptor,
    balances_tiles,
    reuses_inputs,
)
from fcircnn.arch.geometry import (
    CoreGeometry,
    EngineGeometry,
)
from fcircnn.arch.ports import PortMap
from fcircnn.arch.walk import quarters_inputs, splits_inputs
from fcircnn.models.config import AcceleratorConfig, CoreConfig

from .perf_model import EngineTiming, memory_of, model_descriptor

__all__ = [
    "SPLIT_MIN_STALL",
    "choose_layout",
    "port_split",
]

def choose_layout(acc: AcceleratorConfig, core: CoreConfig, geo: EngineGeometry,
                  build: Callable[[bool], LayerDescriptor]) -> LayerDescriptor:
    """The conv descriptor ``build(balanced)`` makes, with its :func:`port_split` flags, on the
    core's tile (``balanced`` false) or, where :func:`~fcircnn.arch.descriptor.balances_tiles`
    and the tile evened out over the map's rows and columns differs, on that one if the
    performance model finds it faster. ``geo``: the core's
    :class:`~fcircnn.arch.geometry.EngineGeometry` (its post chain's stages time the model)."""
    timing = EngineTiming().with_post_stages(geo)

    def split(d: LayerDescriptor) -> tuple[LayerDescriptor, int | None]:
        flags, span = _port_split(acc, d, core, timing)
        return replace(d, flags=d.flags | flags), span

    d, span = split(build(False))
    if balances_tiles(d.op, d.flags) and d.tile != CoreGeometry.of(
            core, acc.block_size).layer_tile(d.conv_shape, balanced=True):
        other, other_span = split(build(True))
        if _span(acc, core, other, other_span, timing) < _span(acc, core, d, span, timing):
            d = other
    return d


def _span(acc: AcceleratorConfig, core: CoreConfig, d: LayerDescriptor,
          span: int | None, timing=None) -> int:
    """``span`` (the modelled span of ``d`` :func:`_port_split` found), or the model's."""
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
