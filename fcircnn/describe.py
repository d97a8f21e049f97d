"""Summaries of configurations (``fcircnn check``), as text and as JSON.

:func:`describe_network` tabulates a network's resolved layers with totals;
:func:`describe_accelerator` lists an accelerator's parameters, its cores and which core runs
which layer, with notes on the layers it runs differently. :func:`network_json` and
:func:`accelerator_json` give the same facts as JSON-ready dicts (``fcircnn check --json``).
"""

from __future__ import annotations

from fcircnn.arch.geometry import CoreGeometry
from fcircnn.arch.ports import MANAGERS, PORT_ROLES, PortMap
from fcircnn.models.config import AcceleratorConfig, NetworkConfig
from fcircnn.models.placement import trims_taps, views_gap
from fcircnn.models.resolve import fmt3, fmt_dims
from fcircnn.report import format_table

__all__ = ["accelerator_json", "describe_accelerator", "describe_network", "network_json"]


def _ports_text(axi_ports: int, residual: bool, in_quarters: bool = False) -> str:
    """What each AXI port carries, in a few words (``residual``: the network has residual
    layers, whose boxes may have a port of their own; ``in_quarters``: a core can read its
    input boxes in quarters, one on every port)."""
    if axi_ports == 1:
        return "1 port"
    roles = list(PORT_ROLES)
    moved = PortMap(axi_ports).residual
    if residual and moved:
        roles[moved] += " and residual boxes"

    what = [f"{roles[k]} on {MANAGERS[k]}" for k in range(1, axi_ports)]
    quarters = f"input boxes in quarters over all {axi_ports}; " if in_quarters else ""
    return f"{axi_ports} ports ({', '.join(what)}; {quarters}{axi_ports} pool lanes)"


def _post(r) -> list[str]:
    """The post-ops of resolved layer ``r``, in order."""
    stages = ((("bias", r.bias), ("bn", r.cbn), ("relu", r.crelu)) if r.dense else
              (("cbn", r.cbn), ("res", r.residual is not None), ("crelu", r.crelu)))
    return [name for name, on in stages if on]


def network_json(net: NetworkConfig) -> dict:
    """The facts of :func:`describe_network` as a JSON-ready dict: the input, and per resolved
    layer its type, inputs, shapes (``[channels, D, H, W]``), kernel, post-ops, pool and
    dense-equivalent operations; the totals."""
    def layer(r):
        return {
            "index": r.index, "name": r.name, "type": r.kind, "dense": r.dense,
            "input": r.input, "residual": r.residual, "block_size": r.block_size,
            "in": [r.in_channels, *r.in_shape],
            "kernel": list(r.kernel) if r.weighted else None,
            "stride": list(r.stride) if r.weighted else None,
            "padding": list(r.padding) if r.weighted else None,
            "conv": [r.out_channels, *r.conv_shape], "post": _post(r),
            "pool": None if r.pool is None else {
                "window": list(r.pool.window), "stride": list(r.pool.stride),
                "padding": list(r.pool.padding)},
            "out": [r.out_channels, *r.out_shape], "dense_ops": r.dense_ops,
            "dense_weights": r.dense_params, "stored_weights": r.circulant_params,
        }

    return {
        "network": net.name, "path": None if net.path is None else str(net.path),
        "input": [net.input.channels, *net.input.shape], "classes": net.classes,
        "block_size": net.block_size, "layers": [layer(r) for r in net.resolved],
        "dense_ops": net.dense_ops,
        "dense_weights": sum(r.dense_params for r in net.resolved),
        "stored_weights": sum(r.circulant_params for r in net.resolved),
    }


def describe_network(net: NetworkConfig) -> str:
    """Human-readable table of the resolved layers with totals (for ``fcircnn check``)."""
    inp = net.input
    lines = [f"network {net.name}: input {fmt_dims(inp.channels, inp.shape)}, "
             f"{net.classes} classes, B = {net.block_size}"
             + (f"  ({net.path})" if net.path else "")]
    rows = []
    for r in net.resolved:
        post = "+".join(_post(r)) or "-"
        pool = "-" if r.pool is None else (f"{fmt3(r.pool.window)}/s{fmt3(r.pool.stride)}"
                                           f"/p{fmt3(r.pool.padding)}")
        rows.append([
            r.index, r.name, f"dense {r.kind}" if r.dense else r.kind, r.input or "(input)",
            r.residual or "-", r.block_size, fmt_dims(r.in_channels, r.in_shape),
            "-" if not r.weighted else f"{fmt3(r.kernel)}/s{fmt3(r.stride)}/p{fmt3(r.padding)}",
            fmt_dims(r.out_channels, r.conv_shape), post, pool,
            fmt_dims(r.out_channels, r.out_shape), f"{r.dense_ops / 1e9:.3f}",
        ])
    lines += format_table(["#", "layer", "type", "input", "residual", "B", "in NxDxHxW",
                     "kernel/stride/pad", "conv MxDxHxW", "post", "pool", "out MxDxHxW",
                     "GOP"], rows)
    dense = sum(r.dense_params for r in net.resolved)
    circ = sum(r.circulant_params for r in net.resolved)
    lines.append(f"total: {net.dense_ops / 1e9:.3f} GOP dense-equivalent "
                 f"({net.dense_ops} ops), {dense} dense weights, {circ} stored weights "
                 f"({dense / circ:.2f}x fewer)" if circ else "total: 0 GOP")
    return "\n".join(lines)


def _core_text(acc: AcceleratorConfig, layer) -> str:
    """The core column of ``layer``: its core, or where a domain step runs."""
    if layer.kind == "rfft":
        return "host" if layer.input is None else f"({layer.input})"
    if layer.kind == "irfft":
        return "(deferred)"
    return acc.core_for(layer).name


def _transform_lines(acc: AcceleratorConfig) -> list[str]:
    """How the accelerator runs the network's time-domain layers and domain steps."""
    net, lines = acc.network, []
    for r in net.resolved:
        if r.dense and r.takes_lane0:
            lines.append(f"  {r.name} runs dense on its input's slots: a block per output "
                         f"channel ({r.out_channels * r.block_size} channels), lane 0 of the "
                         "inverse transform in its post chain")
        elif r.dense:
            lines.append(f"  {r.name} runs dense on the host's spread input: a block per input "
                         f"channel ({r.in_channels * r.block_size} channels)")
        elif r.kind == "rfft":
            lines.append(f"  {r.name} runs in the post chain of {r.input}" if r.input else
                         f"  {r.name} is taken by the host on the network input")
        elif r.kind == "irfft":
            lines.append(f"  {r.name} is deferred to the dense layer that reads it (or to the "
                         "host at the network's end)")
    return lines


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
        f"  AXI            {acc.bus_width}-bit data, {acc.address_width}-bit address, "
        + _ports_text(acc.axi_ports, any(r.residual for r in acc.network.resolved),
                      any(PortMap(acc.axi_ports).quarters_inputs(
                          CoreGeometry.of(c, acc.block_size).in_groups) for c in acc.cores))
        + ("" if acc.dma_queue == 1 else f", {acc.dma_queue} read commands in flight a loader"),
        "",
    ]
    lines += format_table(
        ["core", "Tn", "Tm", "Td", "Tr", "Tc", "unroll", "max_kernel", "max_stride",
         "max_pool_window"],
        [[c.name, c.tn, c.tm, c.td, c.tr, c.tc, ",".join(c.unroll), fmt3(c.max_kernel),
          fmt3(c.max_stride), fmt3(c.max_pool_window)] for c in acc.cores])
    lines.append("")
    lines += format_table(["#", "layer", "type", "kernel", "stride", "pool", "core", "GOP"],
                    [[r.index, r.name, f"dense {r.kind}" if r.dense else r.kind,
                      fmt3(r.kernel), fmt3(r.stride), fmt3(r.pool.window) if r.pool else "-",
                      _core_text(acc, r), f"{r.dense_ops / 1e9:.3f}"]
                     for r in acc.network.resolved])
    lines += [f"  {note}" for note in _notes(acc)]
    return "\n".join(lines)


def _notes(acc: AcceleratorConfig) -> list[str]:
    """How the accelerator runs the layers it runs differently from the network file (time
    domain, folds, row lanes, trimmed kernels, gap planes), and cores that run nothing."""
    lines = [line.strip() for line in _transform_lines(acc)]
    folded = [r for r in acc.network.resolved if acc.folds_input(r)]
    for r in folded:
        run = acc.engine_layer(r)
        lines.append(f"  {r.name} runs with its depth taps folded into input channels: "
                     f"{run.in_channels} channels, kernel {fmt3(run.kernel)} "
                     "(fold_input_taps)")
        if (rows := acc.folded_rows(r)) > 1:
            lines.append(f"  {r.name} reads {rows} row-shifted copies of every depth copy "
                         f"(fold_input_rows)")
        if (depths := acc.folded_depths(r)) > 1:
            lines.append(f"  {r.name} computes {depths} output depths a pass in its core's idle "
                         f"output lanes: {run.out_channels} channels at depth "
                         f"{run.conv_shape[0]}")
    for r in (r for r in acc.network.resolved if acc.spreads_input(r)):
        per_tile = acc.core_for(r).tn // acc.block_size
        lines.append(f"  {r.name} reads its spread input compact: {per_tile} real channels in "
                     "one 16-byte slot group per input tile")
    for r in acc.network.resolved:
        if (groups := acc.row_groups(r)) > 1:
            lines.append(f"  {r.name} runs its tiles' rows in its core's idle depth lanes: "
                         f"{groups} row groups (row_lanes)")
    for r in (r for r in acc.network.resolved if acc.folds_fc_input(r)):
        run = acc.engine_layer(r)
        lines.append(f"  {r.name} reads its 1x1x1 input as a {fmt3(run.in_shape)} map of "
                     f"{run.in_channels} channels ({fmt3(run.kernel)} weight taps per tile)")
    for r in (r for r in acc.network.resolved if trims_taps(r)):
        run = acc.engine_layer(r)
        lines.append(f"  {r.name} runs its kernel trimmed to the taps that read its "
                     f"{fmt3(r.in_shape)} input: {fmt3(run.kernel)}, padding {fmt3(run.padding)}")
    for r in (r for r in acc.network.resolved if views_gap(acc, r)):
        run = acc.engine_layer(r)
        lines.append(f"  {r.name} reads its {r.padded_in_channels} channels as "
                     f"{run.in_shape[0]} planes of {run.in_channels}: one channel tile")
    used = {acc.core_for(r).name for r in acc.network.resolved if not r.transform}
    for c in (c for c in acc.cores if c.name not in used):
        lines.append(f"  note: core {c.name} runs no layer of {acc.network.name}; it is built "
                     "all the same (its resources count), so leave it out of this file")
    return [line.removeprefix("  ") for line in lines]


def accelerator_json(acc: AcceleratorConfig) -> dict:
    """The facts of :func:`describe_accelerator` as a JSON-ready dict: the accelerator's
    parameters, its cores, its network (:func:`network_json`), the core (or where a domain
    step runs) of every layer, and the notes."""
    d = acc.device
    return {
        "accelerator": acc.name, "path": None if acc.path is None else str(acc.path),
        "device": {"part": d.part, "board": d.board, **d.resources.model_dump()},
        "clock_mhz": acc.clock_mhz, "block_size": acc.block_size, "bus_width": acc.bus_width,
        "address_width": acc.address_width, "axi_ports": acc.axi_ports,
        "dma_queue": acc.dma_queue,
        "cores": [{"name": c.name, "tn": c.tn, "tm": c.tm, "td": c.td, "tr": c.tr, "tc": c.tc,
                   "unroll": list(c.unroll), "max_kernel": list(c.max_kernel),
                   "max_stride": list(c.max_stride), "max_pool_window": list(c.max_pool_window)}
                  for c in acc.cores],
        "network": network_json(acc.network),
        "placement": {r.name: _core_text(acc, r) for r in acc.network.resolved},
        "notes": _notes(acc),
    }
