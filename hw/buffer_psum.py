"""Partial-sum tile buffer: accumulates the PE array's sums over input-channel tiles."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from .common import check_channel_rule, check_positive, check_tiles, rejecting
from .complex_mul_pair import complex_layout
from .pe import ACC_WIDTH

__all__ = ["PartialSumBuffer", "psum_in_layout", "psum_layout"]


def psum_layout(Tm: int, Td: int, acc_width: int = ACC_WIDTH) -> data.ArrayLayout:
    """``[Td][Tm/2]`` complex ``acc_width``-bit sums: one PE-array output beat."""
    return data.ArrayLayout(data.ArrayLayout(complex_layout(acc_width), Tm // 2), Td)


def psum_in_layout(Tm: int, Td: int, Tr: int, Tc: int,
                   acc_width: int = ACC_WIDTH) -> data.StructLayout:
    """One fill beat: the sums of voxel ``addr = r*Tc + c`` of every lane.

    ``accumulate``: add to the stored partial sum (else overwrite: first input-channel tile);
    ``last``: this beat completes the tile (commit).
    """
    return data.StructLayout({"addr": range(Tr * Tc), "acc": psum_layout(Tm, Td, acc_width),
                              "accumulate": 1, "last": 1})


class PartialSumBuffer(wiring.Component):
    """Double-buffered partial sums of an output tile: ``Tr*Tc`` voxels of ``Td x Tm/2``
    complex int32 sums.

    The PE array emits one beat per output voxel and input-channel tile; this buffer adds the
    beats of the ``n_tiles`` input-channel tiles of a voxel (read-modify-write), and hands the
    finished tile to the post-units while the next tile accumulates in the other half.

    Organisation: two memories (halves) of ``Tr*Tc`` words, one word per voxel (all lanes and
    slots), each with one write port and one read port (not transparent: no bypass logic).
    The half being filled uses its read port for the read-modify-write, the half being
    drained for the drain: one read and one write per memory and cycle (simple dual-port
    block RAM). One adder per sum serves both halves (it takes the fill half's word), and the
    last sum written is kept in a register for the next beat: about 3 LUTs per stored bit
    (the adder, its operand multiplexer and the drain's), where a transparent read port and
    an adder per half took 7.

    Contract
    --------
    * Fill: ``i`` is ready while the fill half is free. A beat read-modify-writes word
      ``addr``: ``word = acc + (word if accumulate else 0)``. The read is issued when the
      beat is taken, the write one cycle later; a beat taken right after a beat to the same
      word of the same half adds to that beat's sum (forwarded: its read met the write), so
      any address sequence is exact at one beat per cycle. The beat with ``last`` commits the
      half (it becomes drainable after its write).
    * Drain: while ``r_valid``, ``r_en`` with ``r_addr`` gives that voxel's sums on ``acc`` one
      cycle later, held while ``r_en`` is low; ``r_release`` (while ``r_valid``) frees the half.
    * Sums wrap modulo ``2**acc_width`` (the compiler proves they fit int32).

    Parameters
    ----------
    Tm, Td, Tr, Tc : int
        Output channel tile (a multiple of 2) and output tile sizes, 1..1024.
    acc_width : int
        Accumulator width, 32..48.

    Ports
    -----
    i : In(stream.Signature(psum_in_layout(Tm, Td, Tr, Tc, acc_width)))
    r_addr : In(range(Tr*Tc)); r_en, r_release : In(1); r_valid : Out(1)
    acc : Out(psum_layout(Tm, Td, acc_width))
    """

    def __init__(self, Tm: int, Td: int, Tr: int, Tc: int, *, acc_width: int = ACC_WIDTH):
        with rejecting(self):
            check_tiles(Tm=Tm, Td=Td, Tr=Tr, Tc=Tc)
            check_positive("acc_width", acc_width, 48)
            check_channel_rule("output_slots", Tm)
            if acc_width < 32:
                raise ValueError(f"acc_width must be in 32..48, not {acc_width}")
        self.Tm, self.Td, self.Tr, self.Tc, self.acc_width = Tm, Td, Tr, Tc, acc_width
        self.depth = Tr * Tc
        super().__init__({
            "i": In(stream.Signature(psum_in_layout(Tm, Td, Tr, Tc, acc_width))),
            "r_addr": In(range(self.depth)), "r_en": In(1), "r_release": In(1),
            "r_valid": Out(1), "acc": Out(psum_layout(Tm, Td, acc_width)),
        })

    def elaborate(self, platform):
        m = Module()
        layout = psum_layout(self.Tm, self.Td, self.acc_width)
        fill = Signal()    # half being filled
        drain = Signal()   # half being drained
        full = Signal(2)   # committed halves
        w_ready = ~full.bit_select(fill, 1)
        m.d.comb += [self.i.ready.eq(w_ready), self.r_valid.eq(full.bit_select(drain, 1))]

        take = self.i.valid & w_ready
        # Stage 1: the taken beat, waiting for its stored word.
        s1_valid = Signal()
        s1 = Signal(psum_in_layout(self.Tm, self.Td, self.Tr, self.Tc, self.acc_width))
        s1_half = Signal()
        m.d.sync += s1_valid.eq(take)
        with m.If(take):
            m.d.sync += [s1.eq(self.i.payload), s1_half.eq(fill)]
            with m.If(self.i.payload.last):
                m.d.sync += fill.eq(~fill)

        # The word the beat in stage 1 adds to: the fill half's stored word, or, when the
        # beat before it wrote the same word of the same half one cycle earlier (its write
        # and this beat's read met in one cycle), that beat's sum, forwarded. One adder for
        # both halves; the reads are not transparent (no bypass per half).
        forward = Signal()
        last_sum = Signal(layout)
        m.d.sync += forward.eq(take & s1_valid & (self.i.payload.addr == s1.addr)
                               & (fill == s1_half))
        words, writes = [], []
        for half in range(2):
            mem = memory.Memory(shape=layout, depth=self.depth, init=[],
                                attrs={"ram_style": "block"})
            m.submodules[f"half{half}"] = mem
            wp = mem.write_port()
            rp = mem.read_port(transparent_for=())
            # Fill role only while this half is the free fill half: once the other half is
            # committed, `fill` may point at a half still being drained.
            filling = (fill == half) & ~full[half]
            m.d.comb += [
                rp.addr.eq(Mux(filling, self.i.payload.addr, self.r_addr)),
                rp.en.eq(Mux(filling, take, self.r_en & (drain == half))),
                wp.addr.eq(s1.addr), wp.en.eq(s1_valid & (s1_half == half)),
            ]
            words.append(rp.data)
            writes.append(wp)
        stored = data.View(layout, Mux(forward, last_sum, Mux(s1_half, words[1], words[0])))
        new = Signal(layout)
        for v in range(self.Td):
            for s in range(self.Tm // 2):
                for part in ("re", "im"):
                    base = Mux(s1.accumulate, getattr(stored[v][s], part), 0)
                    m.d.comb += getattr(new[v][s], part).eq(base + getattr(s1.acc[v][s], part))
        m.d.comb += [wp.data.eq(new) for wp in writes]
        with m.If(s1_valid):
            m.d.sync += last_sum.eq(new)
        # The drain half's read data; it holds while its port is not enabled.
        m.d.comb += self.acc.eq(Mux(drain, words[1], words[0]))

        commit = s1_valid & s1.last
        release = self.r_release & self.r_valid
        set_bits = Signal(2)
        clear_bits = Signal(2)
        with m.If(commit):
            m.d.comb += set_bits.eq(Mux(s1_half, 0b10, 0b01))
        with m.If(release):
            m.d.comb += clear_bits.eq(Mux(drain, 0b10, 0b01))
            m.d.sync += drain.eq(~drain)
        m.d.sync += full.eq((full | set_bits) & ~clear_bits)
        return m
