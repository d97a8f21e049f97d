"""Issue 16's memory systems as built, compared by sweep on the performance model.

For C3D and 3D ResNet-18 on the ZCU102, sweeps the default configuration space (as
``fcircnn sweep``) once per built memory system: one AXI port with one read command in flight
(where the issue started), two ports (weights on a loader and port of their own, split weight
tiles and input boxes) with one command and with a queue of two, and four ports (the split
halves on ports of their own) with a queue of two. Every system's model is the RTL's, validated
within 3% per layer on the recorded cases (``tests/data/rtl_cycles.json``); resources come from
the calibrated estimator, which counts each system's DMAs and loaders. For each it reports
against the paper's published point (GOP/s, GOP/s per DSP):

* the most GOP/s among the points at or above the paper's GOP/s per DSP;
* the most GOP/s per DSP among the points at or above the paper's GOP/s;
* whether some point beats the paper on both figures at once (issue 16's "must").

Run: ``python bench/bench_levers.py [-j N] [--readme]`` (8 sweeps of 5,376 points).
"""

from __future__ import annotations

import argparse

from bench_headline import PAPER
from readme import generated_by, replace_block

from fcircnn.gen import sweep
from fcircnn.models.config import builtin_path, load_accelerator, load_network
from fcircnn.report import format_table

#: The built memory systems compared: (label, AXI ports, command-queue depth).
SYSTEMS = (
    ("1 port, one command", 1, 1),
    ("2 ports, one command", 2, 1),
    ("2 ports, queue of 2", 2, 2),
    ("4 ports, queue of 2", 4, 2),
)


def _point(e: sweep.Evaluation | None) -> str:
    if e is None:
        return "none"
    return f"{e.label}: {e.effective_gops:.0f}, {e.gops_per_dsp:.3f} ({e.pe_utilization:.0%} busy)"


def rows_for(network: str, jobs: int) -> list[list[str]]:
    net = load_network(builtin_path(network))
    device = sweep.DEVICES["zcu102"]
    paper_gops, paper_per_dsp = PAPER[network]
    reference = load_accelerator(builtin_path(f"{network}_zcu102"))
    rows = []
    for label, ports, queue in SYSTEMS:
        space = sweep.SweepSpace(axi_ports=(ports,), dma_queue=(queue,))
        result = sweep.run_sweep(net, space, device, jobs=jobs, references=[reference])
        ok = [e for e in result.evaluations if e.status == "ok"]
        by_gops = [e for e in ok if e.gops_per_dsp >= paper_per_dsp]
        by_dsp = [e for e in ok if e.effective_gops >= paper_gops]
        both = [e for e in ok if e.effective_gops > paper_gops and e.gops_per_dsp > paper_per_dsp]
        ref = result.references[0]
        rows.append([network, label,
                     _point(max(by_gops, key=lambda e: e.effective_gops, default=None)),
                     _point(max(by_dsp, key=lambda e: e.gops_per_dsp, default=None)),
                     f"{len(both)} points" if both else "no",
                     f"{ref.effective_gops:.0f}, {ref.gops_per_dsp:.3f}"])
    return rows


def report(jobs: int) -> str:
    header = ["network", "memory system", "most GOP/s at >= paper GOP/s/DSP",
              "most GOP/s/DSP at >= paper GOP/s", "beats paper on both",
              "paper's config (model)"]
    rows = rows_for("c3d", jobs) + rows_for("r3d18", jobs)
    return "\n".join([
        "```", *format_table(header, rows), "```", "",
        ("Points as Tn/Tm/Td[u]/Tr/Tc: GOP/s, GOP/s per DSP (PE array busy). Paper: C3D "
         f"{PAPER['c3d'][0]} GOP/s, {PAPER['c3d'][1]} per DSP; 3D ResNet-18 "
         f"{PAPER['r3d18'][0]}, {PAPER['r3d18'][1]}."), "",
        generated_by(what="performance model (validated on RTL) and calibrated estimator")])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-j", "--jobs", type=int, default=1, help="sweep worker processes")
    parser.add_argument("--readme", action="store_true",
                        help="replace the levers block of bench/README.md")
    args = parser.parse_args()
    text = report(args.jobs)
    print(text)
    if args.readme:
        replace_block("levers", text)


if __name__ == "__main__":
    main()
