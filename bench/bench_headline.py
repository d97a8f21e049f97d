"""Headline figures: the paper's configurations and the best ones found by the sweep.

For C3D, 3D ResNet-18 and the paper's trained network on the ZCU102 at the configured clock,
prints (and with ``--readme`` writes into ``bench/README.md``, block ``headline``) a table of
effective GOP/s, GOP/s per DSP, DSP48E2 / BRAM36 / LUT / FF and latency per clip, from the
validated performance model (:mod:`fcircnn.gen.perf_model`) and the calibrated resource estimator
(:mod:`fcircnn.gen.estimate`), beside the paper's published figures and the per-DSP bound.

Run: ``python bench/bench_headline.py [--readme]``.
"""

from __future__ import annotations

import argparse

from readme import generated_by, replace_block

from fcircnn.arch.geometry import core_lanes
from fcircnn.gen.estimate import estimate_resources
from fcircnn.gen.perf_network import model_network
from fcircnn.models.config import builtin_path, load_accelerator
from fcircnn.report import format_table

#: The paper's published results on the ZCU102 at 200 MHz: (GOP/s, GOP/s per DSP); its
#: trained network (``spectral_c3d``) is its C3D.
PAPER = {"c3d": (2692.81, 3.349), "r3d18": (1591.52, 1.677), "spectral_c3d": (2692.81, 3.349)}
#: Today's targets: (the issue that sets them, GOP/s, GOP/s per DSP).
TARGETS = {"c3d": ("issue 48", 8000.0, 3.9), "r3d18": ("issue 48", 4800.0, 2.3),
           "spectral_c3d": ("issue 44", 2692.81, 3.349)}
#: The configurations of each network in the table: (label, built-in accelerator).
CONFIGS = {
    "c3d": (("paper config", "c3d_zcu102"), ("best found", "c3d_zcu102_best")),
    "r3d18": (("paper config", "r3d18_zcu102"), ("best found", "r3d18_zcu102_best")),
    "spectral_c3d": (("shipped", "spectral_c3d_zcu102"),),
}


def per_dsp_bound(acc, arch) -> float:
    """GOP/s per DSP of ``acc``'s PE arrays (``arch``: its resource estimate) with every DSP
    busy every cycle: each lane takes ``Tm x Tn`` dense-equivalent products a cycle
    (docs/architecture.md section 4) on the PE-array DSP48E2 (three a multiplier pair, two for
    the slot-0 pairs)."""
    ops = sum(2 * core_lanes(c) * c.tm * c.tn for c in acc.cores)
    return ops / pe_dsp(arch) * acc.clock_mhz / 1e3


def pe_dsp(arch) -> int:
    """DSP48E2 of the PE arrays of the estimate ``arch``."""
    return sum(comp.counts.dsp for comp in arch.components if comp.name == "pe_array")


def channel_fill_bound(acc, arch) -> float:
    """:func:`per_dsp_bound` over the network: a circulant block computes all ``B`` of its
    input and output channels, so a layer whose channels do not fill its blocks (3D
    ResNet-18's and C3D's 3-channel first layers: 3 of 8) wastes the rest whatever the
    mapping; every other cycle perfectly packed."""
    B, work = acc.block_size, 0.0
    for layer in acc.network.resolved:
        fill = 1.0
        if layer.kind != "gap":
            for n in (layer.in_channels, layer.out_channels):
                fill *= n / (-(-n // B) * B)
        work += layer.dense_ops / fill
    return per_dsp_bound(acc, arch) * acc.network.dense_ops / work


def rows_for(network: str) -> list[list[object]]:
    rows = []
    for label, name in CONFIGS[network]:
        path = builtin_path(name)
        if not path.is_file():
            rows.append([network, label, "(not generated yet)", *[""] * 9])
            continue
        acc = load_accelerator(path)
        res = estimate_resources(acc).total
        perf = model_network(acc)
        cores = " + ".join(f"{c.tn}/{c.tm}/{c.td}{'u' if 'td' in c.unroll else ''}/{c.tr}/{c.tc}"
                           for c in acc.cores)
        cores += f"@{acc.axi_ports}p" if acc.axi_ports > 1 else ""
        cores += f"q{acc.dma_queue}" if acc.dma_queue > 1 else ""
        rows.append([network, label, cores, f"{perf.effective_gops:.1f}",
                     f"{perf.effective_gops / res.dsp:.3f}", res.dsp, f"{res.bram36:.1f}",
                     res.lut, res.ff, f"{perf.seconds * 1e3:.2f}", f"{perf.pe_utilization:.1%}",
                     f"{perf.ddr_bandwidth_gbs:.2f}"])
    gops, per_dsp = PAPER[network]
    rows.append([network, "paper (published)", "", f"{gops:.2f}", f"{per_dsp:.3f}",
                 *[""] * 7])
    issue, gops, per_dsp = TARGETS[network]
    rows.append([network, f"target ({issue})", "", f">= {gops:,.0f}", f">= {per_dsp:g}",
                 *[""] * 7])
    return rows


def report() -> str:
    header = ["network", "configuration", "cores Tn/Tm/Td/Tr/Tc", "GOP/s", "GOP/s/DSP", "DSP",
              "BRAM36", "LUT", "FF", "ms/clip", "PE util", "DDR GB/s"]
    rows = [row for network in CONFIGS for row in rows_for(network)]
    bounds = []
    for network in ("c3d", "r3d18"):
        acc = load_accelerator(builtin_path(f"{network}_zcu102_best"))
        arch = estimate_resources(acc)
        pe, dsp = pe_dsp(arch), arch.total.dsp
        fill = channel_fill_bound(acc, arch)
        bounds.append(f"{network} {fill:.2f} on its best configuration ({fill * pe / dsp:.2f} "
                      f"per DSP of the design: {pe:,} of its {dsp:,} DSP48E2 in the PE array)")
    lines = ["```", *format_table(header, rows), "```", "",
             (f"Bound per DSP at B = {acc.block_size}, {acc.clock_mhz:g} MHz: "
              f"{per_dsp_bound(acc, arch):.3f} GOP/s per DSP of the PE array (every DSP busy every "
              "cycle on whole circulant blocks; the post-units' DSPs and idle cycles come on "
              "top). With the networks' channels as they fill their blocks (the 3-channel "
              "first layers: 3 of 8), per PE DSP: " + "; ".join(bounds) + "."), "",
             generated_by(what="figures from the performance model and the calibrated "
                          "estimator, not from a board")]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--readme", action="store_true",
                        help="replace the headline block of bench/README.md")
    args = parser.parse_args()
    text = report()
    print(text)
    if args.readme:
        replace_block("headline", text)


if __name__ == "__main__":
    main()
