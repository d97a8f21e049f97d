"""The overlay's files: a Xilinx ``.bit`` and the ``.hwh`` beside it, checked before use.

A deployment copies the overlay from the Vivado build, ``run --on board`` loads it, and the
board's ``run.py`` programs the FPGA with it. :func:`overlay_problem` says what is wrong with
one before any of them does, so that an empty, truncated or foreign file is refused with its
name rather than failing on the board (PYNQ programs whatever bytes it is given):

* the ``.bit`` starts with the Xilinx bitstream header (the 13-byte preamble, then the fields
  ``a`` design, ``b`` part, ``c`` date, ``d`` time, each a 16-bit big-endian length and a
  NUL-terminated text, and ``e``: the 32-bit length of the configuration data that follows),
  that length is the rest of the file and not zero, the data has the sync word ``aa 99 55 66``
  in its first 256 bytes, and the part is the accelerator's device;
* the ``.hwh`` is the hardware handoff of a block design (XML, root ``EDKSYSTEM``) with the
  accelerator's IP among its modules (``MODULES/MODULE``, as PYNQ's parser reads it) and, where
  it names one, the same device.
"""

from __future__ import annotations

import os
import struct
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from pathlib import Path

__all__ = ["BIT_PREAMBLE", "SYNC_WORD", "BitHeader", "BitstreamError", "overlay_problem",
           "read_bit_header"]

#: The first 13 bytes of every Xilinx ``.bit``: a 9-byte field and the length 1 of the next.
BIT_PREAMBLE = b"\x00\x09\x0f\xf0\x0f\xf0\x0f\xf0\x0f\xf0\x00\x00\x01"
#: The configuration sync word, after the dummy and bus-width words at the data's start.
SYNC_WORD = b"\xaa\x99\x55\x66"
_SYNC_WINDOW = 256


class BitstreamError(ValueError):
    """A ``.bit`` whose header is not a Xilinx bitstream's (the message says where)."""


@dataclass(frozen=True)
class BitHeader:
    """The fields of a ``.bit`` header.

    Attributes
    ----------
    design : str
        Field ``a``: ``"<design>;UserID=...;Version=<Vivado version>"``.
    part : str
        Field ``b``: the device, e.g. ``"xczu9eg-ffvb1156-2-e"`` (``"7z020clg400"`` for
        older families).
    date, time : str
        Fields ``c`` and ``d``: when the bitstream was written.
    data_length : int
        Field ``e``: bytes of configuration data after the header.
    header_length : int
        Bytes of the header, up to the configuration data.
    """

    design: str
    part: str
    date: str
    time: str
    data_length: int
    header_length: int


def read_bit_header(data: bytes) -> BitHeader:
    """Parse the header at the start of ``data`` (the file's first bytes suffice).

    Raises
    ------
    BitstreamError
        ``data`` does not start with a Xilinx bitstream header.
    """
    if not data.startswith(BIT_PREAMBLE):
        raise BitstreamError("not a Xilinx bitstream (its first bytes are not the .bit "
                             "preamble 00 09 0f f0 ...)")
    at, texts = len(BIT_PREAMBLE), []
    for key in b"abcd":
        if data[at:at + 1] != bytes([key]) or len(data) < at + 3:
            raise BitstreamError(f"its header has no field {chr(key)!r} at byte {at}")
        (size,) = struct.unpack(">H", data[at + 1:at + 3])
        text = data[at + 3:at + 3 + size]
        if len(text) != size or not text.endswith(b"\x00"):
            raise BitstreamError(f"its header's field {chr(key)!r} is cut short")
        texts.append(text[:-1].decode("ascii", errors="backslashreplace"))
        at += 3 + size
    if data[at:at + 1] != b"e" or len(data) < at + 5:
        raise BitstreamError(f"its header has no field 'e' (the data length) at byte {at}")
    (length,) = struct.unpack(">I", data[at + 1:at + 5])
    return BitHeader(*texts, data_length=length, header_length=at + 5)


def _same_device(written: str, part: str) -> bool:
    """Whether a part name as a ``.bit`` or ``.hwh`` spells it is ``part``'s device
    (``xczu9eg-ffvb1156-2-e``): the die alone (``xczu9eg``, a ``.hwh``'s ``DEVICE``), die and
    package (``zu9egffvb1156``, older headers) or the part with its speed grade and
    temperature range."""
    die, package = part.lower().removeprefix("xc").split("-")[:2]
    name = written.lower().removeprefix("xc")
    fields = name.split("-")
    return name in (die, die + package) or (fields[:2] == [die, package] and len(fields) <= 4)


def _bit_problem(bit: Path, part: str) -> str | None:
    size = bit.stat().st_size
    with open(bit, "rb") as f:
        head = f.read(4096 + _SYNC_WINDOW)
    try:
        header = read_bit_header(head)
    except BitstreamError as exc:
        return f"{bit}: {'an empty file' if size == 0 else exc}"
    if header.data_length == 0:
        return f"{bit}: its header announces no configuration data"
    if header.header_length + header.data_length != size:
        return (f"{bit}: its header announces {header.data_length:,} bytes of configuration "
                f"data, the file holds {size - header.header_length:,} (truncated or padded)")
    if SYNC_WORD not in head[header.header_length:header.header_length + _SYNC_WINDOW]:
        return (f"{bit}: no sync word (aa 99 55 66) in the first {_SYNC_WINDOW} bytes of its "
                "configuration data: not a bitstream")
    if not _same_device(header.part, part):
        return (f"{bit}: built for {header.part}, not for the accelerator's {part} "
                f"(design {header.design.split(';')[0]})")
    return None


def _hwh_problem(hwh: Path, part: str, ip_name: str) -> str | None:
    try:
        root = ElementTree.parse(hwh).getroot()
    except ElementTree.ParseError as exc:
        return f"{hwh}: not a hardware handoff (XML: {exc})"
    if root.tag != "EDKSYSTEM":
        return f"{hwh}: not a hardware handoff (its root is <{root.tag}>, not <EDKSYSTEM>)"
    names = {m.get("INSTANCE") or (m.get("FULLNAME") or "").lstrip("/")
             for m in root.findall("./MODULES/MODULE")}
    if ip_name not in names:
        return (f"{hwh}: the block design has no {ip_name} (the accelerator's IP; it has "
                f"{', '.join(sorted(n for n in names if n)) or 'no modules'})")
    info = root.find("SYSTEMINFO")
    device = info.get("DEVICE") if info is not None else None
    if device and not _same_device(device, part):
        return f"{hwh}: describes a design for {device}, not for the accelerator's {part}"
    return None


def overlay_problem(bit: str | os.PathLike[str], part: str, ip_name: str) -> str | None:
    """What is wrong with the overlay ``bit`` (its ``.hwh`` beside it) for an accelerator on
    ``part`` whose IP instance is ``ip_name``, or ``None`` when it can be loaded.

    Parameters
    ----------
    bit : path
        The ``.bit``; the ``.hwh`` is the same path with that suffix.
    part : str
        The accelerator's device (``device.part`` of its file).
    ip_name : str
        The accelerator IP's instance in the block design.

    Returns
    -------
    str or None
        One line naming the file and the problem: a file missing or not a regular file, an
        empty, truncated or foreign ``.bit``, a ``.hwh`` that is not a block design's or lacks
        the IP, a device other than ``part``.
    """
    bit = Path(bit)
    hwh = bit.with_suffix(".hwh")
    for path in (bit, hwh):
        if not path.is_file():
            return (f"{path}: {'not a regular file' if path.exists() else 'not found'} (an "
                    "overlay is a .bit with its .hwh beside it, from the Vivado build's "
                    "vivado/out)")
    return _bit_problem(bit, part) or _hwh_problem(hwh, part, ip_name)
