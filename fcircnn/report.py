"""Plain-text reports of the CLI: tables of the image, the estimate, the model and a sweep.

The generator (``fcircnn.gen``) computes; this module, in the CLI layer, formats.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from fcircnn.arch.descriptor import OP_GAP
from fcircnn.gen import estimate

if TYPE_CHECKING:
    from fcircnn.gen.compiler import DdrImage
    from fcircnn.gen.estimate import ResourceEstimate
    from fcircnn.gen.perf_model import NetworkPerformance
    from fcircnn.gen.sweep import Evaluation, SweepResult
    from fcircnn.gen.synth import SynthReport
    from fcircnn.models.config import AcceleratorConfig

__all__ = ["describe_image", "format_estimate", "format_front", "format_report", "format_table",
           "format_top"]


def format_table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> list[str]:
    """Left-aligned columns separated by two spaces, with a dashed rule under the header.

    Returns the lines (no trailing newline); cells are converted with ``str``.
    """
    rows = [list(map(str, r)) for r in rows]
    widths = [max(len(h), *(len(r[c]) for r in rows)) if rows else len(h)
              for c, h in enumerate(header)]
    line = "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip()
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return out


def describe_image(image: DdrImage) -> str:
    """``fcircnn compile``'s text: the memory map and the descriptors of ``image``."""
    head = (f"network {image.network} on {image.accelerator}: image [{image.base:#x}, "
            f"{image.plan.end:#x}) = {len(image.data)} bytes, DESC_PTR = {image.desc_ptr:#x}")
    w_lo, w_hi = image.plan.windows[1]
    windows = (f"memory windows: reads the whole image, writes [{w_lo:#x}, {w_hi + 1:#x}) "
               "(cycle entries and maps)")
    plan = image.plan
    if plan.reuse_maps:
        maps = (f"feature maps: {plan.map_bytes_reused:,} bytes, reused by liveness (live: the "
                f"descriptors between which each holds its data; {plan.map_bytes_separate:,} "
                "without --reuse-maps)")
    else:
        maps = (f"feature maps: {plan.map_bytes_separate:,} bytes, each its own "
                f"({plan.map_bytes_reused:,} with --reuse-maps, a map's bytes reused once its "
                "last reader has run)")
    lines = [head, windows, maps]
    live = ["live"] if plan.reuse_maps else []
    lines += format_table(
        ["region", "kind", "base", "end", "bytes", *live, "description"],
        [[r.name, r.kind, f"{r.base:#x}", f"{r.end:#x}", r.size,
          *(["-" if r.live is None else f"{r.live[0]}..{r.live[1]}"] if live else []),
          r.description] for r in image.regions])
    lines.append("")
    rows = []
    for lp in image.plan.layers:
        d = lp.descriptor
        rows.append([d.layer, lp.layer.name, lp.core.name, "gap" if d.op == OP_GAP else "conv",
                     f"{d.flags:#04x}", f"{d.in_slots}x{'x'.join(map(str, d.in_shape))}",
                     f"{d.out_slots}x{'x'.join(map(str, d.out_shape))}",
                     "x".join(map(str, d.kernel)), f"{d.m_tiles}x{d.n_tiles}",
                     f"{d.in_base:#x}", f"{d.out_base:#x}", f"{d.weight_base:#x}"])
    lines += format_table(["#", "layer", "core", "op", "flags", "in", "out", "kernel",
                           "tiles", "in_base", "out_base", "weight_base"], rows)
    return "\n".join(lines)


def format_estimate(acc: AcceleratorConfig, est: ResourceEstimate,
                    synth: SynthReport | None = None) -> list[str]:
    """Lines of the ``fcircnn estimate`` report: per component, total, device use.

    Parameters
    ----------
    acc : AcceleratorConfig
    est : ResourceEstimate
    synth : SynthReport, optional
        Yosys' counts of the same design (:func:`fcircnn.gen.synth.synthesize`), printed beside
        the total with the error of the estimate, its logic levels and longest path.
    """
    res = acc.device.resources
    rows = [[c.core or "-", c.name, c.counts.dsp, f"{c.counts.bram36:g}", c.counts.lut,
             c.counts.ff] for c in est.components]
    total = est.total
    rows.append(["total", "", total.dsp, f"{total.bram36:g}", total.lut, total.ff])
    rows.append([acc.device.part, "available", res.dsp, res.bram36, res.lut, res.ff])
    use = est.utilization(res)
    rows.append(["", "use", *(f"{use[n]:.1%}" for n in estimate.RESOURCE_NAMES)])
    lines = [(f"resource estimate of {acc.name} (network {acc.network.name}, B = "
             f"{acc.block_size}); LUT includes LUT RAM; calibrated on "
             f"{estimate.calibration().get('yosys', 'Yosys')}")]
    if synth is not None:
        got = {"dsp": synth.dsp, "bram36": synth.bram36, "lut": synth.lut_total, "ff": synth.ff}
        rows.append(["yosys", "synth_xilinx", got["dsp"], f"{got['bram36']:g}", got["lut"],
                     got["ff"]])
        rows.append(["", "error", *(
            f"{100 * (getattr(total, n) - got[n]) / got[n]:+.1f}%" if got[n] else "-"
            for n in estimate.RESOURCE_NAMES)])
    lines += format_table(["core", "component", "DSP48E2", "BRAM36", "LUT", "FF"], rows)
    if synth is not None and synth.path is not None:
        p = synth.path
        lines.append(f"longest register-to-register path: {p.levels} LUT levels ({p.carries} "
                     f"CARRY4, {p.muxes} MUXF on it; target <= 8 for 200 MHz), Yosys "
                     f"{synth.seconds:.0f} s:")
        lines += [f"  {cell}" for cell in p.cells]
    return lines


def format_report(perf: NetworkPerformance, dsp: int | None = None) -> list[str]:
    """Per-layer table and totals (lines): cycles, latency, effective GOP/s, GOP/s per DSP
    (if a DSP count is known), PE utilisation, DDR bandwidth needed."""
    dsp = perf.dsp if dsp is None else dsp
    header = ["layer", "core", "cycles", "latency us", "GOP/s", "PE util", "DDR GB/s"]
    if dsp:
        header.insert(5, "GOP/s/DSP")
    rows = []

    def row(name, core, cycles, seconds, gops, util, bw):
        r = [name, core, cycles, f"{seconds * 1e6:.1f}", f"{gops:.1f}", f"{util:.1%}",
             f"{bw:.2f}"]
        if dsp:
            r.insert(5, f"{gops / dsp:.3f}")
        return r

    for la in perf.layers:
        rows.append(row(la.name, la.core, la.span_cycles, la.seconds, la.effective_gops,
                        la.pe_utilization, la.ddr_bandwidth_gbs))
    rows.append(row("total", "", perf.cycles, perf.seconds, perf.effective_gops,
                    perf.pe_utilization, perf.ddr_bandwidth_gbs))
    head = (f"{perf.network} on {perf.accelerator} at {perf.clock_mhz:g} MHz "
            f"(performance model, {perf.memory.axi_ports} AXI port(s))")
    return [head, *format_table(header, rows)]


def format_top(result: SweepResult, n: int = 10) -> list[str]:
    """The top ``n`` fitting points and the references as table lines."""
    header = ["rank", "config (Tn/Tm/Td/Tr/Tc)", "GOP/s", "GOP/s/DSP", "cycles", "ms",
              "PE util", "DSP", "BRAM36", "LUT", "FF", "DDR GB/s"]

    def row(rank: str, e: Evaluation) -> list[object]:
        return [rank, e.label, f"{e.effective_gops:.1f}", f"{e.gops_per_dsp:.3f}", e.cycles,
                f"{e.latency_ms:.2f}", f"{e.pe_utilization:.1%}", e.dsp, f"{e.bram36:.1f}",
                e.lut, e.ff, f"{e.ddr_gbs:.2f}"]

    rows = [row(str(i + 1), e) for i, e in enumerate(result.fitting[:n])]
    for ref in result.references:
        if ref.status == "illegal":
            rows.append(["ref", ref.label, "illegal: " + ref.reason, *[""] * 9])
        else:
            rows.append(row("ref" + ("" if ref.status == "ok" else f" (over: {ref.binding})"),
                            ref))
    return format_table(header, rows)


def format_front(result: SweepResult) -> list[str]:
    """The efficiency front of a sweep (no point has both more GOP/s and more GOP/s per DSP)
    with the references beside it, as table lines."""
    from fcircnn.gen.sweep import efficiency_front

    rows = [[e.label, f"{e.effective_gops:.1f}", f"{e.gops_per_dsp:.3f}", e.dsp,
             f"{e.bram36:.1f}", e.lut, f"{e.pe_utilization:.1%}"]
            for e in efficiency_front(result.evaluations)]
    rows += [[f"ref: {r.label}", f"{r.effective_gops:.1f}", f"{r.gops_per_dsp:.3f}", r.dsp,
              f"{r.bram36:.1f}", r.lut, f"{r.pe_utilization:.1%}"]
             for r in result.references if r.status != "illegal"]
    return format_table(["config (Tn/Tm/Td/Tr/Tc)", "GOP/s", "GOP/s/DSP", "DSP", "BRAM36",
                         "LUT", "PE util"], rows)
