"""Box descriptors of the AXI DMA and the walker that turns a box into zero runs and bursts.

A *box* (:func:`box_layout`, built by :mod:`fcircnn.gen.dma_plan`) is a range of slot groups times
``d x h x w`` voxel ranges of an NC/8DHW8 map; along each axis ``pre`` and ``post`` count
padding voxels (zeros, no bus traffic) around ``len`` voxels inside the map. :class:`BoxWalker`
walks it group-major, then ``d``, ``h``, ``w`` and emits one *segment* per step
(:func:`segment_layout`): a run of zero beats, or one INCR burst of at most 256 beats that does
not cross a 4 KB boundary. :meth:`fcircnn.gen.dma_plan.BoxDescriptor.segments` is the exact
software model of this sequence.
"""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out

from fcircnn.models.layout import BEAT_BYTES

from .common import rejecting

__all__ = [
    "BEAT_BYTES",
    "COUNT_WIDTH",
    "BoxWalker",
    "Status",
    "box_layout",
    "check_addr_width",
    "segment_layout",
    "status_layout",
]

#: Bytes per 128-bit beat.
#: Width of the count fields of a box.
COUNT_WIDTH = 16


class Status(enum.Enum, shape=2):
    """Completion code of a transfer."""

    #: Every beat transferred.
    OK = 0
    #: The descriptor was rejected (unaligned address or stride, empty box, padding in a write
    #: box); no bus transaction was issued.
    BAD_COMMAND = 1
    #: A burst would pass the end of the address space; nothing at or after it was issued.
    OVERFLOW = 2
    #: A slave answered SLVERR or DECERR.
    BUS_ERROR = 3


def check_addr_width(addr_width) -> None:
    """Raise ``TypeError``/``ValueError`` unless ``addr_width`` is an integer in 32..64."""
    if not isinstance(addr_width, int) or isinstance(addr_width, bool):
        raise TypeError(f"addr_width must be an integer, not {addr_width!r}")
    if not 32 <= addr_width <= 64:
        raise ValueError(f"addr_width must be in 32..64, not {addr_width}")


def box_layout(addr_width: int) -> data.StructLayout:
    """Payload of a transfer command (see :class:`fcircnn.gen.dma_plan.BoxDescriptor`).

    Fields
    ------
    addr : byte address of the first in-map voxel of the box (multiple of 16)
    stride_g, stride_d, stride_h : byte strides of slot groups, depth planes and rows (multiples
        of 16)
    groups : slot groups, >= 1
    d_pre, d_len, d_post, h_pre, h_len, h_post, w_pre, w_len, w_post : per-axis padding before,
        voxels inside the map, padding after; every axis needs ``pre + len + post >= 1``
    last_lanes : slots written in the last group, 1..8 (writes; ``WSTRB``)
    """
    fields = {
        "addr": addr_width,
        "stride_g": addr_width,
        "stride_d": addr_width,
        "stride_h": addr_width,
        "groups": COUNT_WIDTH,
    }
    for axis in "dhw":
        for part in ("pre", "len", "post"):
            fields[f"{axis}_{part}"] = COUNT_WIDTH
    fields["last_lanes"] = 4
    return data.StructLayout(fields)


def segment_layout(addr_width: int) -> data.StructLayout:
    """One step of a box: ``burst`` (else a zero run) of ``beats`` beats at ``addr``.

    ``last`` marks the box's final segment; ``last_group`` segments of the box's last slot group;
    ``status`` non-zero ends the box with that :class:`Status` (``beats`` is then 0 and ``addr``
    the failing address).
    """
    return data.StructLayout({
        "addr": addr_width,
        "beats": COUNT_WIDTH + 2,
        "burst": 1,
        "last": 1,
        "last_group": 1,
        "status": Status,
    })


def status_layout(addr_width: int) -> data.StructLayout:
    """Completion of one command: ``code`` (:class:`Status`) and the failing ``addr``."""
    return data.StructLayout({"code": Status, "addr": addr_width})


class BoxWalker(wiring.Component):
    """Turn box commands into segments: zero runs and legal AXI INCR bursts.

    Contract
    --------
    * Accepts a command when idle; emits its segments in the order of
      :meth:`fcircnn.gen.dma_plan.BoxDescriptor.segments`, the last with ``last`` set, then
      accepts the next command. At most one segment per cycle; a row costs one extra cycle when
      it has no leading padding.
    * A command with an address or stride not a multiple of 16, no group, or an empty axis
      yields a single segment with ``status = BAD_COMMAND``. A burst that would pass
      ``2**addr_width`` ends the box with ``status = OVERFLOW`` instead; its ``addr`` holds the
      low ``addr_width`` bits of the first unreachable address. Nothing from there on is issued.
    * ``abort`` (level) ends a box early with a zero-beat ``last`` segment.

    Parameters
    ----------
    addr_width : int
        32..64.

    Ports
    -----
    cmd : In(stream.Signature(box_layout(addr_width)))
    seg : Out(stream.Signature(segment_layout(addr_width)))
    abort : In(1)
    """

    def __init__(self, addr_width: int = 40):
        with rejecting(self):
            check_addr_width(addr_width)
        self.addr_width = addr_width
        super().__init__({
            "cmd": In(stream.Signature(box_layout(addr_width))),
            "seg": Out(stream.Signature(segment_layout(addr_width))),
            "abort": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        aw = self.addr_width
        box = Signal(box_layout(aw))
        cw = COUNT_WIDTH + 2
        g, d, h = Signal(COUNT_WIDTH), Signal(cw), Signal(cw)
        d_tot, h_tot, w_tot = Signal(cw), Signal(cw), Signal(cw)
        d_end, h_end = Signal(cw), Signal(cw)
        # Row addresses with a sticky overflow bit (bit aw): a_g group start, a_d plane start,
        # a_h current in-map row.
        a_g, a_d, a_h = Signal(aw + 1), Signal(aw + 1), Signal(aw + 1)
        cur = Signal(aw + 1)
        rem = Signal(COUNT_WIDTH)

        seg = self.seg
        p = seg.payload

        d_pad = (d < box.d_pre) | (d >= d_end)
        h_pad = (h < box.h_pre) | (h >= h_end)
        row_pad = d_pad | h_pad | (box.w_len == 0)
        last_h = h == h_tot - 1
        last_d = d == d_tot - 1
        last_g = g == box.groups - 1
        last_row = last_h & last_d & last_g
        m.d.comb += p.last_group.eq(last_g)

        def add(acc, inc):
            # Sum with the overflow bit kept sticky.
            return (acc[:aw] + inc)[: aw + 1] | (acc[aw] << aw)

        def advance_row():
            with m.If(last_h):
                m.d.sync += h.eq(0)
                with m.If(last_d):
                    m.d.sync += d.eq(0)
                    nxt = add(a_g, box.stride_g)
                    m.d.sync += [g.eq(g + 1), a_g.eq(nxt), a_d.eq(nxt), a_h.eq(nxt)]
                with m.Else():
                    m.d.sync += d.eq(d + 1)
                    with m.If(~d_pad):
                        nxt = add(a_d, box.stride_d)
                        m.d.sync += [a_d.eq(nxt), a_h.eq(nxt)]
                    with m.Else():
                        m.d.sync += a_h.eq(a_d)
            with m.Else():
                m.d.sync += h.eq(h + 1)
                with m.If(~h_pad):
                    m.d.sync += a_h.eq(add(a_h, box.stride_h))
            with m.If(last_row):
                m.next = "IDLE"
            with m.Else():
                m.next = "ROW"

        # Burst length: min(rem, beats to the next 4 KB boundary) (the boundary bound <= 256).
        to_page = Signal(9)
        m.d.comb += to_page.eq(256 - cur[4:12])
        n = Signal(9)
        m.d.comb += n.eq(Mux(rem < to_page, rem, to_page))
        end = Signal(aw + 2)
        m.d.comb += end.eq(cur + (n << 4))
        overflow = cur[aw] | (end > (1 << aw))

        with m.FSM():
            # One cycle out of reset before accepting commands: the state register then changes
            # after reset, so event-driven simulators (Icarus 11 ignores the time-0 events of
            # declaration initialisers) evaluate every process that depends on it.
            with m.State("START"):
                m.next = "IDLE"
            with m.State("IDLE"):
                m.d.comb += self.cmd.ready.eq(1)
                c = self.cmd.payload
                with m.If(self.cmd.valid):
                    m.d.sync += [
                        box.eq(c), g.eq(0), d.eq(0), h.eq(0),
                        a_g.eq(c.addr), a_d.eq(c.addr), a_h.eq(c.addr),
                        d_tot.eq(c.d_pre + c.d_len + c.d_post),
                        h_tot.eq(c.h_pre + c.h_len + c.h_post),
                        w_tot.eq(c.w_pre + c.w_len + c.w_post),
                        d_end.eq(c.d_pre + c.d_len),
                        h_end.eq(c.h_pre + c.h_len),
                    ]
                    bad = (Cat(c.addr[:4], c.stride_g[:4], c.stride_d[:4], c.stride_h[:4]).any()
                           | (c.groups == 0)
                           | ((c.d_pre + c.d_len + c.d_post) == 0)
                           | ((c.h_pre + c.h_len + c.h_post) == 0)
                           | ((c.w_pre + c.w_len + c.w_post) == 0))
                    with m.If(bad):
                        m.next = "BAD"
                    with m.Else():
                        m.next = "ROW"
            with m.State("BAD"):
                m.d.comb += [seg.valid.eq(1), p.status.eq(Status.BAD_COMMAND), p.last.eq(1),
                             p.addr.eq(box.addr)]
                with m.If(seg.ready):
                    m.next = "IDLE"
            with m.State("ROW"):
                with m.If(self.abort):
                    m.next = "ABORT"
                with m.Elif(row_pad):
                    m.d.comb += [seg.valid.eq(1), p.beats.eq(w_tot), p.last.eq(last_row)]
                    with m.If(seg.ready):
                        advance_row()
                with m.Else():
                    m.d.comb += [seg.valid.eq(box.w_pre != 0), p.beats.eq(box.w_pre)]
                    with m.If((box.w_pre == 0) | seg.ready):
                        m.d.sync += [cur.eq(a_h), rem.eq(box.w_len)]
                        m.next = "BUS"
            with m.State("BUS"):
                row_end = n == rem
                with m.If(self.abort):
                    m.next = "ABORT"
                with m.Elif(overflow):
                    m.d.comb += [seg.valid.eq(1), p.status.eq(Status.OVERFLOW), p.last.eq(1),
                                 p.addr.eq(cur)]
                    with m.If(seg.ready):
                        m.next = "IDLE"
                with m.Else():
                    m.d.comb += [seg.valid.eq(1), p.burst.eq(1), p.addr.eq(cur), p.beats.eq(n),
                                 p.last.eq(row_end & last_row & (box.w_post == 0))]
                    with m.If(seg.ready):
                        m.d.sync += [cur.eq(end), rem.eq(rem - n)]
                        with m.If(row_end):
                            with m.If(box.w_post != 0):
                                m.next = "POST"
                            with m.Else():
                                advance_row()
            with m.State("POST"):
                with m.If(self.abort):
                    m.next = "ABORT"
                with m.Else():
                    m.d.comb += [seg.valid.eq(1), p.beats.eq(box.w_post), p.last.eq(last_row)]
                    with m.If(seg.ready):
                        advance_row()
            with m.State("ABORT"):
                m.d.comb += [seg.valid.eq(1), p.last.eq(1)]
                with m.If(seg.ready):
                    m.next = "IDLE"
        return m
