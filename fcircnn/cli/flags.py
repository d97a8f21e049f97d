"""The argument types and flags the commands share: checked ranges, paths, ``--json``, ``-q``, the
calibration flags."""

from __future__ import annotations

import argparse
from collections.abc import Callable


def _path(text: str) -> str:
    """The argparse type of every path flag and argument: the text, unless it is empty (an
    empty path would otherwise mean the current folder, or no file at all)."""
    if not text:
        raise argparse.ArgumentTypeError("empty path; give a file or folder name")
    return text


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
    """``--timeout``: seconds in (0, :data:`~fcircnn.runtime.driver.MAX_TIMEOUT_S`] (imported here:
    the driver is not needed to build the parser)."""
    from fcircnn.runtime.driver import MAX_TIMEOUT_S

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


def _reuse_maps_flag(parser: argparse.ArgumentParser) -> None:
    """``--reuse-maps``: the feature maps laid out by liveness."""
    parser.add_argument("--reuse-maps", action="store_true",
                        help="lay the feature maps out by liveness: a map's bytes are reused "
                             "once its last reader has run, so the image is smaller, and after "
                             "a run only the maps still live hold their layer's output "
                             "(default: every map its own bytes)")
