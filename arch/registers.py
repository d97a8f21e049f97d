"""The register map of the accelerator's control port (``s_axi_control``), stated once.

The hardware (:class:`fcircnn.hw.regfile.ControlRegisters`), the generated C header and Python
module, the Vivado IP's memory map and the host driver all take it from here.

The host starts the engine, polls or waits for its interrupt, and reads its error report and
performance counters through 32-bit registers in a ``2**addr_width``-byte window:

======  ===============  ======  ==========================================================
offset  name             access  contents
======  ===============  ======  ==========================================================
0x00    CTRL             RW      bit0 ``start`` (write 1: one-cycle ``start`` pulse, ignored
                                 while ``busy``; reads 0), bit1 ``busy`` (RO), bit2 ``done``
                                 (RO, sticky until the next start), bit3 ``error`` (RO,
                                 sticky until the next start)
0x04    GIE              RW      bit0 global interrupt enable
0x08    IER              RW      interrupt enables: bit0 done, bit1 error
0x0C    ISR              W1C     interrupt status: bit0 done, bit1 error; set by the event
                                 (whatever IER holds), cleared by writing 1
0x10    ERROR_CODE       RO      ``error_code`` captured at the last ``error`` pulse
0x14    ERROR_ADDR_LO    RO      ``error_addr`` bits 31..0 captured at the last ``error`` pulse
0x18    ERROR_ADDR_HI    RO      ``error_addr`` bits 63..32
0x20    DESC_PTR_LO      RW      descriptor-list pointer bits 31..0 (``desc_ptr`` output)
0x24    DESC_PTR_HI      RW      descriptor-list pointer bits 63..32
0x28    CYCLES_LO        RO      cycles with ``busy`` high since the last start, bits 31..0
0x2C    CYCLES_HI        RO      bits 63..32, as latched by the last read of CYCLES_LO
0x30    PE_BUSY_LO       RO      cycles with ``busy`` and ``pe_busy`` high, bits 31..0
0x34    PE_BUSY_HI       RO      bits 63..32, as latched by the last read of PE_BUSY_LO
0x38    DMA_STALL_LO     RO      cycles with ``busy`` and ``dma_stall`` high, bits 31..0
0x3C    DMA_STALL_HI     RO      bits 63..32, as latched by the last read of DMA_STALL_LO
0x40    ID               RO      design identifier (parameter ``ident``, default "FCIR")
0x44    VERSION          RO      register-map version (parameter ``version``, major << 16 |
                                 minor)
======  ===============  ======  ==========================================================

Every register resets to 0 except ID and VERSION. Bits not listed read 0 and ignore writes.
Any other offset in the window (0x1C, 0x48 and up) is unmapped: a write there is ignored and
answered ``SLVERR``, a read returns 0 with ``SLVERR``; mapped offsets answer ``OKAY``. Address
bits 1..0 are ignored (AXI4-Lite accesses are word-aligned).

The engine's error codes (what ERROR_CODE holds) are :data:`ERROR_CODES`.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["CONTROL_ADDR_WIDTH", "ERROR_BAD_DESCRIPTOR", "ERROR_CODES", "FIELDS", "IDENT",
           "MIN_ADDR_WIDTH", "REGISTERS", "VERSION", "Field", "Register", "offset"]

#: Address bits of the control window the accelerator is built with (4 KB).
CONTROL_ADDR_WIDTH = 12

#: Default design identifier: ASCII "FCIR".
IDENT = 0x46434952
#: Default register-map version (major << 16 | minor).
VERSION = 0x0001_0000


class Register(NamedTuple):
    """One 32-bit register of the map: name, byte offset, access (``"RW"``, ``"RO"``,
    ``"W1C"``; CTRL mixes a write-1-pulse bit with read-only bits, see :data:`FIELDS`) and a
    one-line description."""

    name: str
    offset: int
    access: str
    description: str


class Field(NamedTuple):
    """A bit field of a register: register name, field name, lowest bit, width, access
    (``"W1P"`` write 1 to pulse, reads 0; ``"RO"``; ``"RW"``; ``"W1C"``) and description."""

    register: str
    name: str
    bit: int
    width: int
    access: str
    description: str


#: The register map (see the module docstring).
REGISTERS: tuple[Register, ...] = (
    Register("CTRL", 0x00, "RW", "control: start (W1P), busy, done, error (RO)"),
    Register("GIE", 0x04, "RW", "global interrupt enable"),
    Register("IER", 0x08, "RW", "interrupt enable: bit0 done, bit1 error"),
    Register("ISR", 0x0C, "W1C", "interrupt status: bit0 done, bit1 error (write 1 to clear)"),
    Register("ERROR_CODE", 0x10, "RO", "error code captured at the last error"),
    Register("ERROR_ADDR_LO", 0x14, "RO", "error address bits 31..0"),
    Register("ERROR_ADDR_HI", 0x18, "RO", "error address bits 63..32"),
    Register("DESC_PTR_LO", 0x20, "RW", "descriptor-list pointer bits 31..0"),
    Register("DESC_PTR_HI", 0x24, "RW", "descriptor-list pointer bits 63..32"),
    Register("CYCLES_LO", 0x28, "RO", "busy cycles bits 31..0 (read latches CYCLES_HI)"),
    Register("CYCLES_HI", 0x2C, "RO", "busy cycles bits 63..32 (latched)"),
    Register("PE_BUSY_LO", 0x30, "RO", "PE-busy cycles bits 31..0 (read latches PE_BUSY_HI)"),
    Register("PE_BUSY_HI", 0x34, "RO", "PE-busy cycles bits 63..32 (latched)"),
    Register("DMA_STALL_LO", 0x38, "RO",
             "DMA-stall cycles bits 31..0 (read latches DMA_STALL_HI)"),
    Register("DMA_STALL_HI", 0x3C, "RO", "DMA-stall cycles bits 63..32 (latched)"),
    Register("ID", 0x40, "RO", "design identifier"),
    Register("VERSION", 0x44, "RO", "register-map version (major << 16 | minor)"),
)

#: The bit fields of the registers that have more than one (or a partial) field.
FIELDS: tuple[Field, ...] = (
    Field("CTRL", "start", 0, 1, "W1P", "write 1: start the engine (ignored while busy)"),
    Field("CTRL", "busy", 1, 1, "RO", "the engine is running"),
    Field("CTRL", "done", 2, 1, "RO", "the descriptor list finished (sticky until start)"),
    Field("CTRL", "error", 3, 1, "RO", "the engine reported an error (sticky until start)"),
    Field("GIE", "enable", 0, 1, "RW", "global interrupt enable"),
    Field("IER", "done", 0, 1, "RW", "interrupt on done"),
    Field("IER", "error", 1, 1, "RW", "interrupt on error"),
    Field("ISR", "done", 0, 1, "W1C", "done happened"),
    Field("ISR", "error", 1, 1, "W1C", "error happened"),
)

_OFFSETS = {reg.name: reg.offset for reg in REGISTERS}
_TOP = max(_OFFSETS.values()) + 4
#: Smallest address width holding the map.
MIN_ADDR_WIDTH = (_TOP - 1).bit_length()


def offset(name: str) -> int:
    """Byte offset of register ``name`` (``KeyError`` if there is none)."""
    return _OFFSETS[name]


#: Error codes of the engine (register ERROR_CODE): ``(direction << 2) | Status`` for DMA
#: errors (direction 0 read, 1 write), and the engine's own codes from 8 on.
ERROR_CODES: dict[int, str] = {
    1: "DMA read: bad command (unaligned address or stride, empty box)",
    2: "DMA read: address overflow",
    3: "DMA read: bus error (SLVERR/DECERR)",
    5: "DMA write: bad command (unaligned address or stride, empty box)",
    6: "DMA write: address overflow",
    7: "DMA write: bus error (SLVERR/DECERR)",
    8: "bad descriptor: unknown op or core index, or flags that do not go together",
}
ERROR_BAD_DESCRIPTOR = 8
