"""The board side of a deployment folder (``fcircnn deploy``): what its ``run.py`` runs.

:func:`main` reads the folder's manifest, loads the overlay through
:class:`~fcircnn.runtime.driver.PynqBackend`, runs :func:`~fcircnn.runtime.predict.predict` on the
board for every clip (each clip's image compiled, placed in the board's DDR buffer, run, every layer
read back and checked bit for bit against the golden integer contract), and prints the class scores,
the cycles per layer and the checks. Runs on PYNQ's Python 3.10 with the core install.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["EXIT_BAD_INPUT", "EXIT_MISMATCH", "BoardError", "main", "read_manifest"]

#: Exit codes of run.py.
EXIT_MISMATCH = 1
EXIT_BAD_INPUT = 2
#: What a manifest must hold.
_MANIFEST_KEYS = ("tool_version", "accelerator", "ip_name", "bitstream", "config", "weights",
                  "clips", "mem_size", "clock_mhz")


class BoardError(ValueError):
    """Bad input to run.py: a missing or malformed file of the folder, a bad flag."""


def read_manifest(folder: Path) -> dict[str, Any]:
    """The folder's ``deploy.json``, checked for every key run.py needs."""
    path = folder / "deploy.json"
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise BoardError(f"{path}: cannot read the manifest ({exc.strerror}); is this a "
                         "folder written by fcircnn deploy?") from None
    except ValueError as exc:
        raise BoardError(f"{path}: not JSON ({exc})") from None
    missing = [k for k in _MANIFEST_KEYS if not isinstance(data, dict) or k not in data]
    if missing:
        raise BoardError(f"{path}: missing {', '.join(missing)}")
    return data


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="run.py", description=(
        "Run the deployed accelerator on this board: class scores, cycles per layer and "
        "bit-exact checks of every clip."))
    p.add_argument("--clips", type=Path, help="clips [N, C, D, H, W] (.npy; default: the "
                   "folder's clips.npy)")
    p.add_argument("--bitstream", type=Path, help="the overlay's .bit, its .hwh beside it "
                   "(default: the folder's)")
    p.add_argument("--timeout", type=float, default=10.0,
                   help="seconds one clip may run (default 10)")
    p.add_argument("--mem-size", type=int, help="bytes of the DDR buffer (default: the "
                   "manifest's, what the image needs)")
    p.add_argument("--top", type=int, default=5, help="classes to print per clip (default 5)")
    p.add_argument("--json", type=Path, help="also write the results to this file")
    return p


def _load(folder: Path, manifest: dict[str, Any], clips_path: Path | None):
    from fcircnn.models.config import ConfigError, load_config
    from fcircnn.models.files import ArrayFileError, read_npy
    from fcircnn.models.network import load_weights

    try:
        acc = load_config(folder / manifest["config"])
    except ConfigError as exc:
        raise BoardError(str(exc)) from None
    net = acc.network
    shape = (net.input.channels, *net.input.shape)
    try:
        weights = load_weights(net, str(folder / manifest["weights"]))
        clips = read_npy(clips_path or folder / manifest["clips"])
    except (ArrayFileError, OSError, ValueError) as exc:
        raise BoardError(str(exc)) from None
    if weights.calibration is None:
        raise BoardError(f"{folder / manifest['weights']}: no int8 calibration (a board runs "
                         "fixed scales); deploy again with fcircnn deploy")
    if clips.ndim != 5 or clips.shape[1:] != shape or not len(clips) or not np.isfinite(
            clips).all():
        raise BoardError(f"the clips must be finite [N, {', '.join(map(str, shape))}], "
                         f"not {list(clips.shape)}")
    return acc, weights, clips


def _pl_clock(bitstream: Path, configured_mhz: float) -> tuple[float, str]:
    """The clock that turns cycles into time, MHz, and a line saying which: ``actual_mhz`` of
    the build's record of ``pl_clk0`` beside ``bitstream`` (``fcircnn_accel.clock.json``, as
    ``build.tcl`` writes it, :func:`fcircnn.arch.ip.read_clock_file`), else the configured clock
    (older builds wrote none)."""
    from fcircnn.arch.ip import read_clock_file

    path = bitstream.with_suffix(".clock.json")
    if not (path.exists() or path.is_symlink()):
        return configured_mhz, (f"pl_clk0 {configured_mhz:g} MHz as configured: no {path.name} "
                                "beside the bitstream (an older build), so the times below "
                                "assume the configured clock")
    try:
        mhz = read_clock_file(path)
    except OSError as exc:
        raise BoardError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise BoardError(str(exc)) from None
    return mhz, (f"pl_clk0 {mhz:g} MHz, the build's ({path.name}; configured "
                 f"{configured_mhz:g} MHz)")


#: How far (relative) the clock PYNQ reports may be from the build's before run.py says so.
CLOCK_TOLERANCE = 0.001


def _running_clock(recorded: float) -> float:
    """The clock ``pl_clk0`` runs at once the overlay is loaded, MHz: PYNQ's
    ``Clocks.fclk0_mhz`` where it reports one, else ``recorded``. PYNQ loads only the
    overlay's pl_clk dividers, not its PLL, so on an image whose PLL differs from the build's
    the clock differs too: run.py says so and uses PYNQ's value for the times."""
    try:
        import pynq
    except ImportError:
        return recorded
    running = getattr(getattr(pynq, "Clocks", None), "fclk0_mhz", None)
    if not isinstance(running, int | float) or isinstance(running, bool) or not running > 0:
        return recorded
    if abs(running - recorded) > CLOCK_TOLERANCE * recorded:
        print(f"warning: pl_clk0 runs at {running:g} MHz, not the build's {recorded:g} MHz "
              "(the board's PS PLL is not the build's: PYNQ loads only the dividers); the "
              f"times below use {running:g} MHz", file=sys.stderr)
    return float(running)


def _report(pred, clock: float, top: int) -> list[dict[str, Any]]:
    """Print each clip's top classes and per-layer cycles and checks (times at ``clock``
    MHz); return them as JSON."""
    out = []
    for i, clip in enumerate(pred.clips):
        order = np.argsort(clip.scores)[::-1][:top]
        best = ", ".join(f"{int(k)}: {clip.scores[k]:.4f}" for k in order)
        state = "bit-exact" if not clip.mismatched else f"MISMATCH in {', '.join(clip.mismatched)}"
        unchecked = [layer.name for layer in clip.layers if not layer.checked]
        if unchecked and not clip.mismatched:
            state += f" ({len(unchecked)} layers not checked: their maps were reused)"
        us = clip.cycles / clock if clip.cycles else 0.0
        print(f"clip {i}: top-{len(order)} [{best}]  {clip.cycles} cycles ({us:.1f} us at "
              f"{clock:g} MHz)  {state}")
        layers = []
        for layer in clip.layers:
            busy = 100.0 * layer.pe_busy / layer.cycles if layer.cycles else 0.0
            check = ("not checked (map reused)" if not layer.checked else "ok" if layer.passed
                     else f"{layer.mismatches} slots differ, first {layer.first_mismatch}")
            print(f"  {layer.name:<16} {layer.cycles:>12} cycles  PE busy {busy:5.1f}%  "
                  f"{check}")
            layers.append(layer.as_dict())
        out.append({"clip": i, "scores": [float(s) for s in clip.scores],
                    "top": [int(k) for k in order], "cycles": clip.cycles,
                    "mismatched": list(clip.mismatched), "layers": layers})
    return out


def _json_problem(args: argparse.Namespace, folder: Path, manifest: dict[str, Any],
                  bitstream: Path) -> str | None:
    """Why ``--json`` cannot take the results, before any work: not a file that can be
    written, or one of the files the run reads (the folder's, ``--clips``, the overlay)."""
    from fcircnn.models.files import check_output_file

    if problem := check_output_file(args.json):
        return f"--json: {problem}"
    if not args.json.exists():  # a new file is none of the run's
        return None
    reads = [folder / "deploy.json", folder / "run.py", bitstream,
             bitstream.with_suffix(".hwh"), *(folder / manifest[key] for key in (
                 "config", "weights", "clips")), args.clips]
    for path in reads:
        if path is not None and path.exists() and os.path.samefile(args.json, path):
            return f"--json {args.json}: the same file as {path}, which this run reads"
    return None


def main(folder: Path, argv: Sequence[str] | None = None) -> int:
    """run.py: returns the exit code (0 every clip bit-exact, 1 a mismatch or failed run, 2 bad
    input)."""
    args = _parser().parse_args(argv)
    try:
        from fcircnn.models.overlay import overlay_problem
        from fcircnn.runtime.driver import MAX_TIMEOUT_S

        if not 0 < args.timeout <= MAX_TIMEOUT_S:  # NaN too
            raise BoardError(f"--timeout must be seconds in (0, {MAX_TIMEOUT_S:g}], not "
                             f"{args.timeout}")
        if args.top < 1 or (args.mem_size is not None and args.mem_size <= 0):
            raise BoardError("--top and --mem-size must be positive")
        manifest = read_manifest(folder)
        bitstream = args.bitstream or folder / manifest["bitstream"]
        if not bitstream.is_file() or not bitstream.with_suffix(".hwh").is_file():
            raise BoardError(f"{bitstream}: the overlay's .bit and .hwh are not both there "
                             "(see BITSTREAM.md in the folder)")
        if args.json is not None and (problem := _json_problem(args, folder, manifest,
                                                                bitstream)):
            raise BoardError(problem)
        acc, weights, clips = _load(folder, manifest, args.clips)
        if problem := overlay_problem(bitstream, acc.device.part, manifest["ip_name"]):
            raise BoardError(problem)
        clock, clock_line = _pl_clock(bitstream, float(acc.clock_mhz))
    except BoardError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT

    from fcircnn.runtime.driver import DriverError, PynqBackend
    from fcircnn.runtime.predict import predict

    print(f"{manifest['accelerator']}: loading {bitstream.name}; {clock_line}", flush=True)
    try:
        backend = PynqBackend(str(bitstream), manifest["ip_name"],
                              mem_size=args.mem_size or int(manifest["mem_size"]))
    except DriverError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    clock = _running_clock(clock)
    try:
        pred = predict(acc, clips, on="board", weights=weights, backend=backend,
                       timeout_s=args.timeout,
                       progress=lambda done, total: print(f"clip {done}/{total} run",
                                                          file=sys.stderr, flush=True))
    except DriverError as exc:  # a timeout (the engine aborted, or not stoppable): a failed run
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_MISMATCH
    finally:
        backend.close()
    print(f"{len(clips)} clip(s), int8 scales: {pred.calibration}")
    results = _report(pred, clock, args.top)
    ok = pred.bit_exact
    print("PASS: every layer of every clip bit-exact" if ok else "FAIL: see the mismatches above")
    if args.json is not None:
        from fcircnn.models.files import OutputFileError, atomic_write

        text = json.dumps({"accelerator": manifest["accelerator"], "passed": ok,
                           "clock_mhz": clock, "clips": results}, indent=2) + "\n"
        try:
            atomic_write(args.json, lambda f: f.write(text), binary=False)
        except OutputFileError as exc:
            print(f"error: --json: {exc}", file=sys.stderr)
            return EXIT_BAD_INPUT
    return 0 if ok else EXIT_MISMATCH
