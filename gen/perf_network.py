"""The performance model over a whole network: every descriptor the compiler writes for it
(:func:`fcircnn.gen.plan.plan_network`), each modelled by
:func:`fcircnn.gen.perf_model.model_descriptor`.

Kept apart from :mod:`fcircnn.gen.perf_model` so the compiler can ask the descriptor model
(whether splitting a layer's weight tiles pays, :func:`fcircnn.gen.choose.port_split`)
without an import cycle.
"""

from __future__ import annotations

from fcircnn.arch.geometry import engine_geometry
from fcircnn.models.config import AcceleratorConfig, ResolvedLayer

from .perf_model import (
    EngineTiming,
    LayerPerformance,
    MemoryModel,
    NetworkPerformance,
    memory_of,
    model_descriptor,
)
from .plan import plan_network

__all__ = ["model_layer", "model_network"]


def model_layer(acc: AcceleratorConfig, layer: ResolvedLayer | str, *,
                memory: MemoryModel | None = None, timing: EngineTiming | None = None,
                plan=None) -> LayerPerformance:
    """Model one layer of ``acc.network`` (by name or resolved layer)."""
    name = layer if isinstance(layer, str) else layer.name
    plan = plan or plan_network(acc)
    for lp in plan.layers:
        if lp.layer.name == name:
            return _layer_perf(acc, lp, memory_of(acc, memory),
                               _timing(acc, lp.core, timing or EngineTiming()))
    raise KeyError(f"network {acc.network.name} has no layer {name!r}")


def _timing(acc, core, t: EngineTiming) -> EngineTiming:
    """``t`` on ``core`` as built for ``acc``'s network (its post chain's stages)."""
    return t.with_post_stages(engine_geometry(acc, core))


def _layer_perf(acc, lp, mem, t) -> LayerPerformance:
    parts = [model_descriptor(d, lp.core, acc.block_size, mem, t) for d in lp.descriptors]
    return LayerPerformance(
        name=lp.layer.name, core=lp.core.name, kind=lp.layer.kind,
        cycles=sum(p["cycles"] for p in parts), span_cycles=sum(p["span"] for p in parts),
        pe_busy_cycles=sum(p["pe_busy"] for p in parts),
        dma_stall_cycles=sum(p["dma_stall"] for p in parts),
        dense_ops=lp.layer.dense_ops, ddr_bytes=sum(p["ddr_bytes"] for p in parts),
        descriptors=len(parts), clock_mhz=acc.clock_mhz)


def model_network(acc: AcceleratorConfig, *, layers=None, memory: MemoryModel | None = None,
                  timing: EngineTiming | None = None, dsp: int | None = None
                  ) -> NetworkPerformance:
    """Model every layer of ``acc.network`` on ``acc`` (or only ``layers``, names).

    Raises
    ------
    fcircnn.gen.plan.CompileError
        If the network does not compile for the accelerator (the RTL could not run it).
    KeyError
        If a name in ``layers`` is not a layer of the network.
    """
    mem, t = memory_of(acc, memory), timing or EngineTiming()
    plan = plan_network(acc)
    chosen = plan.layers
    if layers is not None:
        names = list(layers)
        known = {lp.layer.name for lp in plan.layers}
        missing = [n for n in names if n not in known]
        if missing:
            raise KeyError(f"network {acc.network.name} has no layer {', '.join(missing)}")
        chosen = [lp for lp in plan.layers if lp.layer.name in names]
    timings = {core.name: _timing(acc, core, t) for core in acc.cores}
    return NetworkPerformance(acc.name, acc.network.name, acc.clock_mhz,
                              tuple(_layer_perf(acc, lp, mem, timings[lp.core.name])
                                    for lp in chosen), mem, dsp)


