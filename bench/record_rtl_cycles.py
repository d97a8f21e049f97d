"""Record the RTL's per-layer cycle counts of the accelerator test configurations.

Runs every case of :data:`CASES` (a test accelerator from ``tests/conftest.py``, a DDR read
latency) through :mod:`fcircnn.sim.tb_accelerator` on Verilator, exactly as
``tests/hw/test_accelerator.py`` does, and writes the engine's own per-layer cycle entries
(``cycles``, ``pe_busy``, ``dma_stall``) with the configuration fingerprint to a JSON file
(default :data:`DEFAULT_OUT`). ``tests/gen/test_perf_model.py`` compares the performance model
(:mod:`fcircnn.gen.perf_model`) with that file in the default suite and re-simulates in a slow
test to check the file is current.

Usage: ``python bench/record_rtl_cycles.py [--case NAME ...] [-o FILE]``; re-run it whenever
the engine changes cycle counts (the slow test says so). ``--table`` prints the model against
the recording without simulating; ``--readme`` writes that table into ``bench/README.md``
(block ``rtl-cycles``).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Where the recording goes by default.
DEFAULT_OUT = ROOT / "tests" / "data" / "rtl_cycles.json"
#: Seed and image base of the compiled networks (as in ``tests/hw/test_accelerator.py``).
SEED = 3
BASE = 0x10000


@dataclass(frozen=True)
class Case:
    """One recording: the accelerator written by ``writer`` (a function of
    ``tests/conftest.py`` taking the folder and ``kwargs``) run with a DDR read ``latency``
    (extra cycles before the first beat of every read burst, see
    :class:`fcircnn.sim.backend_cocotb.CocotbBackend`)."""

    name: str
    writer: str | None = None
    kwargs: dict = field(default_factory=dict)
    latency: int = 0
    #: Instead of ``writer``: an accelerator file, relative to the repository root.
    config: str | None = None
    seed: int = SEED
    #: The Verilator optimisation of the build (``None``: ``-Os``, the build ``fcircnn sim``
    #: and ``tests/hw/test_accelerator_layers.py`` share).
    verilator_opt: str | None = "-O0"
    #: The accelerator's ``axi_ports`` instead of its file's.
    axi_ports: int | None = None
    #: The accelerator's ``dma_queue`` instead of its file's.
    dma_queue: int | None = None


#: The cases recorded by default. ``small``: the test core of ``tests/hw/test_accelerator.py`` (Tn =
#: Tm = 16, Td = 2, Tr = Tc = 4) on its 5-layer network; ``kinds``: the two-core test accelerator of
#: ``tests/hw/test_accelerator_layers.py`` on its network with every C3D and ResNet-18 layer kind
#: (seed 5, as there); ``fused``: the pools fused into the drain
#: (``tests/hw/test_accelerator_fused_pool.py``, two PE lanes); ``small_2ports`` and
#: ``kinds_2ports``: ``small`` and ``kinds`` with two AXI ports (the weight loader on its own read
#: engine); ``fused_2ports``: ``fused`` on two ports, whose FC layer splits its weight tiles over
#: both (``FLAG_WSPLIT``); ``fc_2ports``: a classifier of FC layers on two ports, the first
#: splitting its 16 weight tiles of 256 beats (steady state of the split); ``dfold``: ``small`` on a
#: ``Tn = Tm = 32`` core, whose first layer folds pairs of output depths (``FLAG_DFOLD``: two write
#: boxes per tile); ``small_q2``, ``kinds_2ports_q2`` and ``fc_2ports_q2``: ``small``,
#: ``kinds_2ports`` and ``fc_2ports`` with a command queue of two (``dma_queue: 2``);
#: ``pool_lanes``: a pool pass of three slot groups on two lanes (two ports) and a 1x1x1 stride-2
#: conv reading its input subsampled; ``trim``: ResNet-18's stage 4 in small, its 3x3x3 kernels
#: trimmed to the taps that read the 1-deep map (four ports, its residual boxes on port 3, queue of
#: two, the depth loop unrolled); ``fused_4ports_q2`` and ``pool_lanes_4ports``: ``fused`` and
#: ``pool_lanes`` on four ports (the split halves on loaders of their own on ports 2 and 3; four
#: pool lanes; ``kinds`` splits nothing on four ports: its cores have one input slot group and odd
#: weight beats); ``fc_4ports_q2``: ``fc_2ports`` on four ports with a queue of two and ``Tm = 64``
#: (the test of ``tests/hw/test_accelerator_fc.py``): fc1's weight tiles read in quarters over the
#: four ports with its input boxes split (``FLAG_WQUARTER | FLAG_ISPLIT``), fc3's in quarters alone,
#: fc2's in halves; ``kinds_4ports_q2``: ``kinds`` on four ports with a queue of two, its ResNet-18
#: core's residual boxes read by a loader of their own on port 3 (the only reads of that port:
#: ``kinds`` splits nothing); ``quarters``: ResNet-18's first stage-2 block in small on a
#: ``Tn = Tm = 64`` core with four ports and a queue of two (the test of
#: ``tests/hw/test_accelerator_quarters.py``): the input boxes of its stride-2 conv, shortcut,
#: residual conv, gap and FC layer read in quarters over the four ports (``FLAG_IQUARTER``);
#: ``carried``: ResNet-18 conv1's 3x3x3 stride-2 pool fused into the drain, its windows carried
#: across tiles on every axis (two ports, a queue of two; the test of
#: ``tests/hw/test_accelerator_carried_pool.py``); ``rows``: ResNet-18's stages 3 and 4 in small
#: on four depth lanes, each conv shallower than the lanes running rows of its tiles in the idle
#: ones (``FLAG_ROWLANES``: two and four row groups, two ports, a queue of two; the test of
#: ``tests/hw/test_accelerator_rows.py``). ``trim`` runs its 1-deep layers in two row groups.
#: ``time_domain``: the paper's time-domain stem and head in small
#: (``tests/hw/configs/time_domain_acc.yaml``): a dense conv on the spread input with the rfft in
#: its post chain (``FLAG_RFFT``), and a dense fc of a block per class taking lane 0 of the
#: inverse transform (``FLAG_LANE0``), on a core built with both post-chain stages.
CASES: tuple[Case, ...] = (
    Case("small", "write_small_accelerator"),
    Case("kinds", config="tests/hw/configs/two_core.yaml", seed=5, verilator_opt=None),
    Case("fused", "write_fused_accelerator", seed=5),
    Case("small_2ports", "write_small_accelerator", axi_ports=2),
    Case("kinds_2ports", config="tests/hw/configs/two_core.yaml", seed=5, verilator_opt=None,
         axi_ports=2),
    Case("fused_2ports", "write_fused_accelerator", seed=5, axi_ports=2),
    Case("fc_2ports", "write_fc_accelerator"),
    Case("dfold", "write_dfold_accelerator"),
    Case("small_q2", "write_small_accelerator", dma_queue=2),
    Case("kinds_2ports_q2", config="tests/hw/configs/two_core.yaml", seed=5,
         verilator_opt=None, axi_ports=2, dma_queue=2),
    Case("fc_2ports_q2", "write_fc_accelerator", dma_queue=2),
    Case("pool_lanes", "write_pool_lanes_accelerator"),
    Case("trim", "write_trim_accelerator"),
    Case("fused_4ports_q2", "write_fused_accelerator", seed=5, axi_ports=4, dma_queue=2),
    Case("fc_4ports_q2", "write_fc_accelerator", {"tm": 64}, axi_ports=4, dma_queue=2),
    Case("pool_lanes_4ports", "write_pool_lanes_accelerator", axi_ports=4),
    Case("kinds_4ports_q2", config="tests/hw/configs/two_core.yaml", seed=5,
         verilator_opt=None, axi_ports=4, dma_queue=2),
    Case("quarters", "write_quarters_accelerator"),
    Case("carried", "write_carried_accelerator", seed=13),
    Case("rows", "write_rows_accelerator", seed=41),
    Case("time_domain", config="tests/hw/configs/time_domain_acc.yaml", verilator_opt=None),
)


def _conftest():
    spec = importlib.util.spec_from_file_location("_fcircnn_conftest",
                                                  ROOT / "tests" / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def hw_source_hash() -> str:
    """SHA-256 of the hardware sources (``hw/*.py``): tells whether a recording predates an
    engine change (informational; the slow test is the real check)."""
    h = hashlib.sha256()
    for path in sorted((ROOT / "hw").glob("*.py")):
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def load_case(case: Case, folder: Path):
    """Write the case's accelerator into ``folder`` and load it (validated), with the case's
    ``axi_ports`` and ``dma_queue``."""
    from fcircnn.models.config import load_accelerator

    if case.config is not None:
        acc = load_accelerator(ROOT / case.config)
    else:
        acc = load_accelerator(getattr(_conftest(), case.writer)(folder, **case.kwargs))
    changes = {k: v for k, v in (("axi_ports", case.axi_ports), ("dma_queue", case.dma_queue))
               if v is not None}
    if changes:
        acc = acc.model_copy(update=changes)
    return acc


def record_case(case: Case, *, simulator: str = "verilator") -> dict:
    """Simulate ``case`` and return its record (JSON-ready)."""
    from fcircnn.gen.compiler import compile_network
    from fcircnn.gen.generate import accelerator_verilog, config_fingerprint
    from fcircnn.sim.runner import run_cocotb

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        acc = load_case(case, root)
        image = compile_network(acc, seed=case.seed, base=BASE)
        image.save(root / "image")
        results = root / "results.json"
        t0 = time.monotonic()
        run_cocotb(accelerator_verilog(acc), "fcircnn_accel", "fcircnn.sim.tb_accelerator",
                   simulator, parameters={}, verilator_opt=case.verilator_opt,
                   extra_env={"FCIRCNN_TB_PARAMS": json.dumps({
                       "image_dir": str(root / "image"), "results": str(results),
                       "timeout_cycles": 5_000_000, "seed": 1, "latency": case.latency})})
        wall = time.monotonic() - t0
        doc = json.loads(results.read_text())
    if doc["status"] != "done" or not doc["passed"]:
        raise RuntimeError(f"case {case.name}: the run did not pass: {doc.get('message')}")
    return {
        "name": case.name, "writer": case.writer, "kwargs": case.kwargs,
        "config": case.config, "seed": case.seed,
        "latency": case.latency, "fingerprint": config_fingerprint(acc),
        "total_cycles": doc["total_cycles"], "wall_seconds": round(wall, 1),
        "layers": [{k: layer[k] for k in ("name", "cycles", "pe_busy", "dma_stall",
                                          "descriptors")} for layer in doc["layers"]],
    }


def model_table(recording: Path = DEFAULT_OUT) -> str:
    """The performance model against every recorded case, as a markdown table (no
    simulation): per case its layers, the RTL's and the model's cycles, the largest error of
    a layer and how many layers the model gives to the cycle."""
    from fcircnn.gen.perf_model import MemoryModel
    from fcircnn.gen.perf_network import model_network

    by_name = {c.name: c for c in CASES}
    rows = ["| case | layers | RTL cycles (layers) | model | largest layer error | layers exact |",
            "|---|---:|---:|---:|---|---:|"]
    for rec in json.loads(recording.read_text())["cases"]:
        case = by_name[rec["name"]]
        with tempfile.TemporaryDirectory() as tmp:
            acc = load_case(case, Path(tmp))
        perf = model_network(acc, memory=MemoryModel(burst_latency=case.latency))
        pairs = [(la.name, la.cycles, x["cycles"]) for la, x in
                 zip(perf.layers, rec["layers"], strict=True)]
        name, model, rtl = max(pairs, key=lambda p: abs(p[1] - p[2]) / p[2])
        exact = sum(m == r for _, m, r in pairs)
        rows.append(f"| `{rec['name']}` | {len(pairs)} | {sum(r for _, _, r in pairs):,} | "
                    f"{sum(m for _, m, _ in pairs):,} | {name} {(model - rtl) / rtl:+.2%} | "
                    f"{exact} |")
    return "\n".join(rows)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", nargs="+", choices=[c.name for c in CASES],
                        help="cases to record (default: all); others keep their old record")
    parser.add_argument("-o", "--output", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--table", action="store_true",
                        help="print the performance model against the recording as a markdown "
                             "table instead of simulating")
    parser.add_argument("--readme", action="store_true",
                        help="the same, written into bench/README.md (block rtl-cycles)")
    args = parser.parse_args(argv)
    if args.table or args.readme:
        from readme import generated_by, replace_block  # bench/: a script's own folder

        text = (f"{model_table(args.output)}\n\n"
                + generated_by(what="the recording's RTL runs: Verilator, each case's date "
                               f"in the history of `{args.output.name}`"))
        print(text)
        if args.readme:
            replace_block("rtl-cycles", text)
        return 0
    os.environ.setdefault("FCIRCNN_BUILD_DIR", str(ROOT / "build"))
    old = {}
    if args.output.exists():
        old = {c["name"]: c for c in json.loads(args.output.read_text())["cases"]}
    wanted = set(args.case or [c.name for c in CASES])
    cases = []
    for case in CASES:
        if case.name in wanted:
            print(f"simulating {case.name} ...", file=sys.stderr, flush=True)
            cases.append(record_case(case))
        elif case.name in old:
            cases.append(old[case.name])
    doc = {"generator": "bench/record_rtl_cycles.py", "simulator": "verilator",
           "hw_sources_sha256": hw_source_hash(), "cases": cases}
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(doc, indent=1) + "\n")
    for c in cases:
        print(c["name"], c["total_cycles"],
              [(x["name"], x["cycles"], x["pe_busy"], x["dma_stall"]) for x in c["layers"]])
    return 0


if __name__ == "__main__":
    sys.exit(main())
