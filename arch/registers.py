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
                                 sticky until the next start), bit4 ``abort`` (write 1 while
                                 ``busy``: stop the run; ignored while idle; reads 0)
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
0x48    RD_BASE_LO       RW      read window: lowest byte address bits 31..0 (its 4 KiB page)
0x4C    RD_BASE_HI       RW      bits 63..32
0x50    RD_LIMIT_LO      RW      read window: highest byte address bits 31..0 (its 4 KiB page;
                                 resets to all ones)
0x54    RD_LIMIT_HI      RW      bits 63..32 (resets to all ones)
0x58    WR_BASE_LO       RW      write window, as the read window
0x5C    WR_BASE_HI       RW
0x60    WR_LIMIT_LO      RW      (resets to all ones)
0x64    WR_LIMIT_HI      RW      (resets to all ones)
======  ===============  ======  ==========================================================

Every register resets to 0 except ID, VERSION and the window limits (all ones). Bits not
listed read 0 and ignore writes.

**Memory windows.** Every burst the DMAs issue, on every port, is checked before it is issued:
a read burst must lie in the read window, a write burst in the write window, each the whole
4 KiB pages from the page of its BASE to the page of its LIMIT (:data:`WINDOW_PAGE_BITS`: the
low 12 bits of both are ignored). A burst never crosses a 4 KiB boundary, so its page is the
window check. A burst outside is not issued: the engine stops with the DMA's error code 2
(read) or 6 (write) and the burst's address in ERROR_ADDR. At reset both windows are the whole
address space (bring-up); a driver programs them from the buffers it allocated before every
start (:class:`fcircnn.runtime.driver.Driver`).

**Stream regions.** Inside the windows, each burst a layer's engine issues must also lie in
the region its descriptor grants that stream (the input, output and residual maps, the weights
and the post records: the ``*_base`` and ``*_pages`` fields of
:mod:`fcircnn.arch.descriptor`), which the compiler sets to the map or table the stream
belongs to. A burst outside its region is refused like one outside the window (code 2 or 6,
its address); a descriptor whose op uses a stream with no region is refused before any
transfer (code 8). So a descriptor whose tile counts, strides or steps are corrupt moves no
byte outside its own maps and tables; only a descriptor whose bases and page counts are
corrupt together can reach the rest of the image, and nothing reaches past the windows.

**Abort.** Writing 1 to CTRL.abort while the engine runs fails the running layer and closes
both windows for the rest of the run (as any failure of a layer does): no DMA and not the
sequencer issues another burst, on any port. Bursts already issued complete, as AXI requires
(their data is taken, or sent: zero beats where the datapath no longer produces them, inside
the write window; their responses taken); then the engine ends idle with CTRL.error,
ERROR_CODE :data:`ERROR_ABORTED` and in ERROR_ADDR the address of the descriptor it was
running or fetching. A run that ends before the abort takes effect ends with ``done``. The
next start runs normally (the engines are reset while idle). A run whose bus never answers a
burst already issued cannot be aborted: the driver's timeout says so.

Any other offset in the window (0x1C, 0x68 and up) is unmapped: a write there is ignored and
answered ``SLVERR``, a read returns 0 with ``SLVERR``; mapped offsets answer ``OKAY``. Address
bits 1..0 are ignored (AXI4-Lite accesses are word-aligned).

The engine's error codes (what ERROR_CODE holds) are :data:`ERROR_CODES`.
"""

from __future__ import annotations

from typing import NamedTuple

from .geometry import PAGE_BITS

__all__ = ["CONTROL_ADDR_WIDTH", "ERROR_ABORTED", "ERROR_BAD_DESCRIPTOR", "ERROR_CODES",
           "ERROR_READ_WINDOW", "ERROR_WRITE_WINDOW",
           "FIELDS", "IDENT", "MIN_ADDR_WIDTH", "REGISTERS", "VERSION", "WINDOWS",
           "WINDOW_PAGE_BITS", "Field", "Register", "offset", "window_pages"]

#: Address bits of the control window the accelerator is built with (4 KB).
CONTROL_ADDR_WIDTH = 12

#: Default design identifier: ASCII "FCIR".
IDENT = 0x46434952
#: Default register-map version (major << 16 | minor): 1.1 added the memory windows, 1.2 the
#: abort, 1.3 the descriptors' stream regions (an image of this version gives every stream a
#: region; an older engine ignores them).
VERSION = 0x0001_0003
#: The memory windows are whole pages of ``2**WINDOW_PAGE_BITS`` bytes (4 KiB, the AXI
#: boundary no burst crosses: :data:`~fcircnn.arch.geometry.PAGE_BITS`).
WINDOW_PAGE_BITS = PAGE_BITS
#: The window registers, by direction: (base, limit) register-name prefixes.
WINDOWS: dict[str, tuple[str, str]] = {"read": ("RD_BASE", "RD_LIMIT"),
                                       "write": ("WR_BASE", "WR_LIMIT")}


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
    Register("CTRL", 0x00, "RW", "control: start, abort (W1P), busy, done, error (RO)"),
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
    Register("RD_BASE_LO", 0x48, "RW", "read window: lowest address bits 31..0"),
    Register("RD_BASE_HI", 0x4C, "RW", "read window: lowest address bits 63..32"),
    Register("RD_LIMIT_LO", 0x50, "RW", "read window: highest address bits 31..0 (reset ~0)"),
    Register("RD_LIMIT_HI", 0x54, "RW", "read window: highest address bits 63..32 (reset ~0)"),
    Register("WR_BASE_LO", 0x58, "RW", "write window: lowest address bits 31..0"),
    Register("WR_BASE_HI", 0x5C, "RW", "write window: lowest address bits 63..32"),
    Register("WR_LIMIT_LO", 0x60, "RW", "write window: highest address bits 31..0 (reset ~0)"),
    Register("WR_LIMIT_HI", 0x64, "RW",
             "write window: highest address bits 63..32 (reset ~0)"),
)

#: The bit fields of the registers that have more than one (or a partial) field.
FIELDS: tuple[Field, ...] = (
    Field("CTRL", "start", 0, 1, "W1P", "write 1: start the engine (ignored while busy)"),
    Field("CTRL", "busy", 1, 1, "RO", "the engine is running"),
    Field("CTRL", "done", 2, 1, "RO", "the descriptor list finished (sticky until start)"),
    Field("CTRL", "error", 3, 1, "RO", "the engine reported an error (sticky until start)"),
    Field("CTRL", "abort", 4, 1, "W1P",
          "write 1: stop the running engine: fail its layer, issue no new burst (ignored "
          "while idle)"),
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


def window_pages(base: int, limit: int) -> tuple[int, int]:
    """The first and last page of a window given by its BASE and LIMIT register values."""
    return base >> WINDOW_PAGE_BITS, limit >> WINDOW_PAGE_BITS


#: Error codes of the engine (register ERROR_CODE): ``(direction << 2) | Status`` for DMA
#: errors (direction 0 read, 1 write), and the engine's own codes from 8 on.
ERROR_CODES: dict[int, str] = {
    1: "DMA read: bad command (unaligned address or stride, empty box)",
    2: ("DMA read: outside the read window or its stream's region (or past the address "
        "space)"),
    3: "DMA read: bus error (SLVERR/DECERR)",
    5: "DMA write: bad command (unaligned address or stride, empty box)",
    6: ("DMA write: outside the write window or the output's region (or past the address "
        "space)"),
    7: "DMA write: bus error (SLVERR/DECERR)",
    8: ("bad descriptor: unknown op or core index, flags that do not go together, an "
        "address past the address space, or a stream its op uses without a region"),
    9: "aborted by the host (CTRL.abort)",
}
ERROR_BAD_DESCRIPTOR = 8
#: ERROR_CODE of a read, and of a write, the DMA refused to issue outside its window or its
#: stream's region.
ERROR_READ_WINDOW, ERROR_WRITE_WINDOW = 2, 6
#: ERROR_CODE of a run the host stopped with CTRL.abort.
ERROR_ABORTED = 9
