"""``fcircnn sweep``: the design-space exploration."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from fcircnn.report import (
    format_front,
    format_top,
)

from .common import (
    UserError,
    _accelerator,
    _distinct_outputs,
    _folder_outputs,
    _input_files,
    _network,
    _output_dir,
    _output_file,
)
from .flags import _cap, _clock, _cycles, _json_flag, _path, _quiet_flag, _ranged

#: Largest value a sweep range may hold (every tile limit of the hardware is far below).
MAX_RANGE_VALUE = 1 << 20


def _shown(text: str) -> str:
    """``text`` for a message, cut to 60 characters."""
    return repr(text) if len(text) <= 60 else f"{text[:60]!r}... ({len(text)} characters)"


def _items(text: str, rule: str) -> list[str]:
    """The comma-separated items of ``text``, refusing an empty one."""
    items = [item.strip() for item in text.split(",")]
    if not all(items):
        raise argparse.ArgumentTypeError(f"{rule}; an item is empty in {_shown(text)}")
    return items


def _positive(item: str, rule: str, text: str) -> int:
    """``item`` as an integer in 1..:data:`MAX_RANGE_VALUE`, else the ``rule`` it breaks."""
    if not (item.isascii() and item.isdigit()):
        raise argparse.ArgumentTypeError(f"{rule}, not {_shown(text)}")
    if len(item) > 7 or not 1 <= int(item) <= MAX_RANGE_VALUE:
        raise argparse.ArgumentTypeError(f"{rule}: values are 1..{MAX_RANGE_VALUE}, not "
                                         f"{_shown(item)}")
    return int(item)


def _int_list(text: str) -> tuple[int, ...]:
    """A comma-separated list of positive integers (``--tn 16,32,64``)."""
    rule = "must be a comma-separated list of positive integers"
    return tuple(_positive(item, rule, text) for item in _items(text, rule))


def _pair_list(text: str) -> tuple[tuple[int, int], ...]:
    """``--pointwise 8x32,16x64``: (Tn, Tm) pairs."""
    rule = "must be comma-separated TNxTM pairs such as 8x32,16x64"
    pairs = []
    for item in _items(text, rule):
        parts = item.lower().split("x")
        if len(parts) != 2:
            raise argparse.ArgumentTypeError(f"{rule}, not {_shown(text)}")
        pairs.append(tuple(_positive(p, rule, text) for p in parts))
    return tuple(pairs)


def _jobs(text: str) -> int:
    """``sweep -j``: worker processes, 1..the CPUs this process may use."""
    from fcircnn.gen.sweep import max_jobs

    rule = f"must be an integer in 1..{max_jobs()} (the CPUs this process may use)"
    return _ranged(int, lambda v: 1 <= v <= max_jobs(), rule)(text)


def _references(refs: Sequence[str], net) -> list:
    """``--reference``: the accelerator files, each for the network swept."""
    references = []
    for name in refs:
        acc = _accelerator(name)
        if acc.network.name != net.name:
            raise UserError(f"--reference {name}: an accelerator for network "
                            f"{acc.network.name!r}, not for the network swept, {net.name!r} "
                            f"({net.path or net.name})")
        references.append(acc)
    return references


def _sweep_space(args: argparse.Namespace, net):
    """The ``sweep`` ranges and objective of the flags, checked against ``net``."""
    from fcircnn.gen import sweep

    try:
        space = sweep.SweepSpace(
            tn=args.tn, tm=args.tm, td=args.td, tr=args.tr, tc=args.tc,
            unroll_td={"both": (False, True), "yes": (True,), "no": (False,)}[args.unroll_td],
            cores=args.cores, pointwise=args.pointwise, block_sizes=args.block_size,
            axi_ports=args.axi_ports, dma_queue=args.dma_queue)
        space.check(net.block_size)
        objective = sweep.Objective(args.maximise.replace("-", "_"), args.floor)
    except sweep.SweepError as exc:  # the message names the flag
        raise UserError(str(exc)) from None
    return space, objective


def _default_references(net) -> list[str]:
    """The paper's accelerator for ``net`` (the built-in ``<network>_zcu102``), if there is
    one."""
    from fcircnn.models.config import ConfigError, builtin_path

    try:
        return [str(builtin_path(f"{net.name}_zcu102"))]
    except ConfigError:
        return []


#: The files ``sweep`` writes into its output folder.
SWEEP_FILES = ("sweep.csv", "pareto.png", "best.yaml")


def cmd_sweep(args: argparse.Namespace) -> int:
    import importlib.util

    from tqdm import tqdm

    from fcircnn.gen import sweep
    from fcircnn.gen.estimate import format_cap
    from fcircnn.gen.staging import staged_folder

    args.plot = importlib.util.find_spec("matplotlib") is not None
    net = _network(args.network)
    device = sweep.DEVICES[args.device]
    space, objective = _sweep_space(args, net)
    refs = _default_references(net) if args.reference is None else args.reference
    references = _references(refs, net)
    out = Path(args.output if args.output is not None else f"build/sweep/{net.name}")
    _output_dir(out, "-o")
    inside = _best_yaml_inside(args, out)
    files = (SWEEP_FILES if args.best_yaml is None else
             (*SWEEP_FILES[:2], *([inside] if inside else [])))
    outputs = _folder_outputs("-o", out, files)
    if args.best_yaml is not None and not inside:
        _output_file(args.best_yaml, "--best-yaml")
        outputs.append(("--best-yaml", args.best_yaml))
    _distinct_outputs(outputs, [*_input_files(args, "network", net),
                                *(("--reference", r) for r in refs)])
    total = space.size(net.block_size)
    print(f"fcircnn sweep: network {net.name} ({net.path or args.network}) on {device.name}, "
          f"{total} points, cap {format_cap(args.cap)}, {args.clock_mhz:g} MHz, "
          f"{min(args.jobs, total)} worker(s)", file=sys.stderr)
    # smoothing 0: the mean rate so far (the points run in a random order, so it predicts)
    bar = None if args.quiet else tqdm(total=total, unit="pt", file=sys.stderr, smoothing=0)

    def progress(done: int, _total: int) -> None:
        if bar is not None:
            bar.update(done - bar.n)

    try:
        result = sweep.run_sweep(net, space, device, clock_mhz=args.clock_mhz, cap=args.cap,
                                 jobs=args.jobs, references=references, progress=progress,
                                 objective=objective)
    finally:
        if bar is not None:
            bar.close()
    try:
        best, no_fit = result.best, None
    except sweep.SweepError as exc:
        best, no_fit = None, str(exc)
    try:
        with staged_folder(out) as tmp:  # every file or none (sweep.csv alone if none fits)
            _write_sweep(result, best, tmp, args, net, device,
                         "best.yaml" if args.best_yaml is None else inside)
    except OSError as exc:
        raise UserError(f"-o: cannot write {out}: {exc}") from None
    if best is None or not args.plot:  # an earlier sweep's picture is not this one's
        (out / "pareto.png").unlink(missing_ok=True)
    counts = result.counts
    print(f"{counts['ok']} points fit, {counts['over']} over the cap, {counts['illegal']} "
          f"illegal; every point in {out / 'sweep.csv'}", file=sys.stderr)
    if best is None:
        raise UserError(no_fit)
    best_path = out / "best.yaml" if args.best_yaml is None else args.best_yaml
    if args.json:
        files = {"csv": str(out / "sweep.csv"), "best_yaml": str(best_path),
                 "pareto_png": str(out / "pareto.png") if args.plot else None}
        print(json.dumps(sweep.result_json(result, args.top) | {"files": files}))
    else:
        print(f"best points ({result.objective.describe()}):")
        print("\n".join(format_top(result, args.top)))
        print("\nefficiency front (no point has both more GOP/s and more GOP/s per DSP):")
        print("\n".join(format_front(result)))
    if args.plot:
        print(f"wrote {out / 'pareto.png'} and {best_path}", file=sys.stderr)
    else:
        print(f"wrote {best_path}; pareto.png needs the [plot] extra (pip install "
              "'fcircnn[plot]': matplotlib)", file=sys.stderr)
    return 0


def _best_yaml_inside(args: argparse.Namespace, out: Path) -> str | None:
    """The name of ``--best-yaml`` when it goes into the ``-o`` folder (written with the
    folder's other files, which may not exist yet), else ``None``."""
    if args.best_yaml is None:
        return None
    best = Path(args.best_yaml)
    return best.name if best.resolve().parent == out.resolve() else None


def _write_sweep(result, best, tmp: Path, args: argparse.Namespace, net, device,
                 best_name: str | None) -> None:
    """Write ``sweep.csv`` into ``tmp`` and, unless ``best`` is ``None`` (no point fits),
    ``pareto.png`` and the best accelerator file: ``best_name`` in ``tmp``, or where
    ``--best-yaml`` says when ``best_name`` is ``None``."""
    from fcircnn.gen import sweep
    from fcircnn.gen.estimate import format_cap

    sweep.write_csv(result, tmp / "sweep.csv")
    if best is None:
        return
    if args.plot:
        sweep.plot_pareto(result, tmp / "pareto.png")
    sweep.write_accelerator_yaml(
        best.point, net, device, args.clock_mhz,
        tmp / best_name if best_name is not None else args.best_yaml,
        name=f"{net.name}_{device.name}_best",
        comment=(f"Best configuration of `fcircnn sweep {args.network} --device {device.name}` "
                 f"(cap {format_cap(args.cap)}, {args.clock_mhz:g} MHz):\n{best.label}: "
                 f"{best.effective_gops:.1f} GOP/s effective, {best.gops_per_dsp:.3f} GOP/s "
                 f"per DSP, DSP {best.dsp}, BRAM36 {best.bram36:.1f}, LUT {best.lut}, FF "
                 f"{best.ff} (calibrated estimator and performance model).\nThe network is "
                 "written into this file, so it works wherever it is copied."))


def add(sub) -> None:
    """Add the ``sweep`` command (the design-space exploration)."""
    from fcircnn.gen.estimate import DEFAULT_CAP
    from fcircnn.gen.sweep import max_jobs as sweep_max_jobs
    from fcircnn.models.schema import CLOCK_MHZ_RANGE

    sw = sub.add_parser(
        "sweep", help="design-space exploration of core configurations for a network",
        description="Enumerate core configurations (Tn, Tm, Td, Tr, Tc, B, an unrolled depth "
                    "loop, one core or a spatial plus a pointwise core) for a network, reject "
                    "those the compiler cannot run, size the others with the calibrated "
                    "resource estimator and time them with the performance model; keep those "
                    "under the utilisation cap of the device and rank them by effective GOP/s. "
                    "Writes sweep.csv (every point), pareto.png (GOP/s against DSP and BRAM36, "
                    "the paper's configuration marked) and best.yaml; prints the top points. "
                    "Exit code 2 on bad input or when no point fits (naming the binding "
                    "resource).",
    )
    sw.add_argument("network", type=_path,
                    help="network YAML, accelerator YAML (its network) or built-in "
                         "name (c3d, r3d18)")
    sw.add_argument("--device", choices=("zcu102",), default="zcu102",
                    help="target device (default: zcu102)")
    sw.add_argument("-j", "--jobs", type=_jobs, default=1, metavar="N",
                    help=f"worker processes, 1..{sweep_max_jobs()} (the CPUs this process may "
                         "use), never more than points (default: 1)")
    sw.add_argument("-o", "--output", type=_path, metavar="DIR",
                    help="output folder (default: build/sweep/<network>)")
    sw.add_argument("--cap", type=_cap, default=DEFAULT_CAP,
                    help=f"largest share of each device resource a point may use (default: "
                         f"{DEFAULT_CAP:g})")
    sw.add_argument("--clock-mhz", type=_clock, default=200.0,
                    help="clock in MHz, in [{:g}, {:g}] (default: 200)".format(
                        *CLOCK_MHZ_RANGE))
    from fcircnn.gen.sweep import SweepSpace

    space = SweepSpace()  # the default ranges
    for name, help_text in (("tn", "input-channel tiles"), ("tm", "output-channel tiles"),
                            ("td", "output depth tiles"), ("tr", "output row tiles"),
                            ("tc", "output column tiles")):
        default = getattr(space, name)
        sw.add_argument(f"--{name}", type=_int_list, default=default, metavar="LIST",
                        help=f"{help_text} (default: {','.join(map(str, default))})")
    sw.add_argument("--block-size", type=_int_list, default=(), metavar="LIST",
                    help="block sizes B (default: the network's)")
    sw.add_argument("--unroll-td", choices=("both", "yes", "no"), default="both",
                    help="sweep the depth loop unrolled, not unrolled or both (default: both)")
    sw.add_argument("--cores", type=_int_list, default=space.cores, metavar="LIST",
                    help="1 (one core) and/or 2 (spatial + pointwise core) (default: 1,2)")
    sw.add_argument("--pointwise", type=_pair_list, default=space.pointwise, metavar="PAIRS",
                    help="(Tn, Tm) of the pointwise core of two-core points (default: "
                         + ",".join(f"{a}x{b}" for a, b in space.pointwise) + ")")
    sw.add_argument("--axi-ports", type=_int_list, default=space.axi_ports, metavar="LIST",
                    help="AXI ports, 1..4 (2: the weight tiles on a port of their own, split "
                         "over both where they bind; 3 and 4: the split halves of input boxes "
                         "and weight tiles on ports of their own; default: 1)")
    sw.add_argument("--dma-queue", type=_int_list, default=space.dma_queue, metavar="LIST",
                    help="read commands each loader keeps in flight, 1..8 (default: 1)")
    sw.add_argument("--reference", type=_path, action="append", metavar="ACC.yaml",
                    help="accelerator file(s) to mark as references (default: the built-in "
                         "<network>_zcu102, the paper's configuration)")
    sw.add_argument("--maximise", choices=("gops", "gops-per-dsp"), default="gops",
                    help="the figure the best point maximises (default: gops)")
    sw.add_argument("--floor", type=_ranged(float, lambda v: 0 <= v < 1e9,
                                            "must be a number in [0, 1e9)"), default=0.0,
                    metavar="X", help="the least the other figure may be: GOP/s per DSP when "
                                      "maximising GOP/s, GOP/s when maximising GOP/s per DSP "
                                      "(default: 0)")
    sw.add_argument("--top", type=_cycles, default=10, metavar="N",
                    help="rows of the top table (default: 10)")
    sw.add_argument("--best-yaml", type=_path, metavar="PATH",
                    help="where to write the best accelerator file (default: DIR/best.yaml)")
    _json_flag(sw, "the counts, the top points, the efficiency front and the references, each "
                   "with its parameters, resources, cycles and GOP/s; the files written")
    _quiet_flag(sw)
    sw.set_defaults(func=cmd_sweep)
