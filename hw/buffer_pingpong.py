"""Banked ping-pong (double-buffered) on-chip memory, the storage of every tile buffer.

:class:`PingPongBanks` holds ``banks`` block RAMs (:class:`amaranth.lib.memory.Memory` with
``ram_style = "block"``) of ``2 x depth`` words: two *halves* of ``depth`` words. A producer fills
one half while a consumer reads the other; committing a full half hands it over. Each bank has
its own write port and its own read port, and a cycle touches at most one word per bank and
port, so there is no bank conflict by construction; the two halves are never accessed by the
same side, so a read never sees a word written in the same cycle.
"""

from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib import data, memory, wiring
from amaranth.lib.wiring import In, Out

from .common import check_positive, rejecting

__all__ = ["PingPongBanks"]


class PingPongBanks(wiring.Component):
    """``banks`` memories of ``width``-bit words, double-buffered.

    Contract
    --------
    * Write side: ``w_ready`` is high while the fill half is free. A write (``w_en`` bit ``b``:
      word ``w_data[b]`` to address ``w_addr[b]`` of bank ``b``) lands in the fill half only while
      ``w_ready``; ``w_commit`` (while ``w_ready``) marks the fill half full and moves filling to
      the other half. A write attempted while not ready is dropped and sets ``conflict``.
    * Read side: ``r_valid`` is high while the drain half is full. ``r_en`` reads address
      ``r_addr`` of every bank of the drain half; ``r_data`` holds the words one cycle later
      (synchronous read) and keeps them while ``r_en`` is low. ``r_release`` (while
      ``r_valid``) frees the drain half and moves draining to the other half. A read attempted
      while not valid sets ``conflict``.
    * Read-during-write: the read ports are not transparent, but the ping-pong rule keeps the
      two sides on different halves, so a read never addresses the word being written.
    * ``conflict`` is sticky until reset; it never rises when both sides follow the handshake.

    Parameters
    ----------
    banks : int
        1..4096.
    width : int
        Word width in bits, 1..4096.
    depth : int
        Words per bank and half, 1..2**20.
    ram_style : str
        Synthesis attribute, ``"block"`` (default), ``"distributed"`` or ``"ultra"``.

    Ports
    -----
    w_addr : In(ArrayLayout(range(depth), banks)); w_en : In(banks)
    w_data : In(ArrayLayout(width, banks))
    w_commit : In(1); w_ready : Out(1); w_half : Out(1)
    r_addr : In(range(depth)); r_en : In(1); r_data : Out(ArrayLayout(width, banks))
    r_release : In(1); r_valid : Out(1); r_half : Out(1)
    conflict : Out(1)
    """

    def __init__(self, *, banks: int, width: int, depth: int, ram_style: str = "block"):
        with rejecting(self):
            check_positive("banks", banks, 4096)
            check_positive("width", width, 4096)
            check_positive("depth", depth, 1 << 20)
            if ram_style not in ("block", "distributed", "ultra"):
                raise ValueError(f"ram_style must be 'block', 'distributed' or 'ultra', "
                                 f"not {ram_style!r}")
        self.banks, self.width, self.depth, self.ram_style = banks, width, depth, ram_style
        words = data.ArrayLayout(unsigned(width), banks)
        super().__init__({
            "w_addr": In(data.ArrayLayout(range(depth), banks)), "w_en": In(banks),
            "w_data": In(words),
            "w_commit": In(1), "w_ready": Out(1), "w_half": Out(1),
            "r_addr": In(range(depth)), "r_en": In(1), "r_data": Out(words),
            "r_release": In(1), "r_valid": Out(1), "r_half": Out(1),
            "conflict": Out(1),
        })

    @property
    def bits(self) -> int:
        """Storage in bits (both halves, all banks)."""
        return 2 * self.banks * self.width * self.depth

    def elaborate(self, platform):
        m = Module()
        full = Signal(2)
        w_half, r_half = Signal(), Signal()
        w_ready = ~full.bit_select(w_half, 1)
        r_valid = full.bit_select(r_half, 1)
        m.d.comb += [self.w_ready.eq(w_ready), self.r_valid.eq(r_valid),
                     self.w_half.eq(w_half), self.r_half.eq(r_half)]

        r_addr = Signal(range(2 * self.depth))
        m.d.comb += r_addr.eq(Mux(r_half, self.r_addr + self.depth, self.r_addr))
        for b in range(self.banks):
            mem = memory.Memory(shape=unsigned(self.width), depth=2 * self.depth, init=[],
                                attrs={"ram_style": self.ram_style})
            m.submodules[f"bank{b}"] = mem
            wp = mem.write_port()
            rp = mem.read_port(transparent_for=())
            m.d.comb += [
                wp.addr.eq(Mux(w_half, self.w_addr[b] + self.depth, self.w_addr[b])),
                wp.data.eq(self.w_data[b]),
                wp.en.eq(self.w_en[b] & w_ready),
                rp.addr.eq(r_addr), rp.en.eq(self.r_en & r_valid),
                self.r_data[b].eq(rp.data),
            ]

        set_full = Signal(2)
        clear_full = Signal(2)
        with m.If(self.w_commit & w_ready):
            m.d.comb += set_full.eq(Mux(w_half, 0b10, 0b01))
            m.d.sync += w_half.eq(~w_half)
        with m.If(self.r_release & r_valid):
            m.d.comb += clear_full.eq(Mux(r_half, 0b10, 0b01))
            m.d.sync += r_half.eq(~r_half)
        m.d.sync += full.eq((full | set_full) & ~clear_full)
        with m.If((self.w_en.any() & ~w_ready) | (self.r_en & ~r_valid)):
            m.d.sync += self.conflict.eq(1)
        return m
