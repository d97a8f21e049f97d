"""Overlay files as Vivado writes them, for tests without Vivado: a ``.bit`` with a Xilinx
bitstream header and configuration data that starts as a real one does (dummy words, the
bus-width detection pattern, the sync word) and goes on with random bytes, and a ``.hwh``
naming the block design's modules and device (:mod:`fcircnn.models.overlay` reads both)."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from fcircnn.models.overlay import BIT_PREAMBLE, SYNC_WORD

ZCU102_PART = "xczu9eg-ffvb1156-2-e"


def bit_bytes(part: str = ZCU102_PART, data_length: int = 4096, *, seed: int = 0,
              design: str = "fcircnn_bd_wrapper") -> bytes:
    """A ``.bit``: the header (``a`` to ``e``) and ``data_length`` bytes of configuration data
    (at least 68: the preamble of a real bitstream's data)."""
    fields = b""
    for key, text in zip(b"abcd", (f"{design};UserID=0XFFFFFFFF;Version=2023.2", part,
                                    "2026/11/28", "12:00:00"), strict=True):
        raw = text.encode() + b"\x00"
        fields += bytes([key]) + struct.pack(">H", len(raw)) + raw
    start = b"\xff" * 48 + bytes.fromhex("000000bb11220044ffffffffffffffff") + SYNC_WORD
    data = start + np.random.default_rng(seed).integers(
        0, 256, data_length - len(start), dtype=np.uint8).tobytes()
    return BIT_PREAMBLE + fields + b"e" + struct.pack(">I", data_length) + data


def hwh_text(device: str = "xczu9eg", modules: tuple[str, ...] = ("fcircnn_accel_0",
                                                                    "zynq_ultra_ps_e_0")) -> str:
    """A ``.hwh``: its ``SYSTEMINFO`` and one ``MODULE`` per instance."""
    mods = "".join(f'<MODULE FULLNAME="/{m}" INSTANCE="{m}" MODTYPE="x"/>' for m in modules)
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<EDKSYSTEM><SYSTEMINFO DEVICE="{device}" '
            f'PACKAGE="ffvb1156" SPEEDGRADE="-2"/><MODULES>{mods}</MODULES></EDKSYSTEM>\n')


def write_overlay(folder: Path, stem: str = "fcircnn_accel", **bit) -> Path:
    """Write ``<stem>.bit`` and ``<stem>.hwh`` into ``folder``; return the ``.bit``'s path."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{stem}.bit").write_bytes(bit_bytes(**bit))
    (folder / f"{stem}.hwh").write_text(hwh_text())
    return folder / f"{stem}.bit"
