"""Devices and boards whose figures we know, stated once: an accelerator file's ``device``
is checked against them (:func:`device_problems`).

A ``device.part`` of a known die may not claim more resources than the die has (the
estimator judges "fits" against ``device.resources``), and a known ``device.board`` preset
carries its own part, which ``device.part`` must be (Vivado builds the board's PS
configuration for it). Other parts and boards are taken as written.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["BOARD_PARTS", "DIES", "DieResources", "device_problems"]


class DieResources(NamedTuple):
    """A die's resources, as ``device.resources`` names them."""

    dsp: int
    bram36: int
    lut: int
    ff: int


#: Zynq UltraScale+ MPSoC dies (AMD DS891): DSP48E2, BRAM36, CLB LUTs, CLB flip-flops.
DIES: dict[str, DieResources] = {
    "xczu3eg": DieResources(360, 216, 70_560, 141_120),
    "xczu5ev": DieResources(1_248, 144, 117_120, 234_240),
    "xczu7ev": DieResources(1_728, 312, 230_400, 460_800),
    "xczu9eg": DieResources(2_520, 912, 274_080, 548_160),
}

#: Board presets (vendor:board, any revision) and the part on the board.
BOARD_PARTS: dict[str, str] = {
    "xilinx.com:zcu102": "xczu9eg-ffvb1156-2-e",
    "xilinx.com:zcu104": "xczu7ev-ffvc1156-2-e",
    "xilinx.com:zcu106": "xczu7ev-ffvc1156-2-e",
}


def device_problems(part: str, board: str | None,
                    resources: dict[str, int]) -> list[tuple[str, str]]:
    """``(key, message)`` for each way ``device`` contradicts what we know of its part and
    board (keys relative to ``device``)."""
    problems = []
    die = part.lower().split("-")[0]
    if die in DIES:
        for name, limit in DIES[die]._asdict().items():
            if resources[name] > limit:
                problems.append((f"resources.{name}", (f"{resources[name]:,} is more than the "
                                 f"{die}'s {limit:,} (device.part {part})")))
    if board is not None:
        preset = ":".join(board.lower().split(":")[:2])
        on_board = BOARD_PARTS.get(preset)
        if on_board is not None and part.lower() != on_board:
            problems.append(("board", (f"{board} is a board with {on_board}, not with "
                             f"device.part {part}")))
    return problems
