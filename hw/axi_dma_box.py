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

from fcircnn.arch.descriptor import READ_REGIONS, WRITE_REGIONS
from fcircnn.arch.geometry import BEAT_BYTES
from fcircnn.arch.registers import WINDOW_PAGE_BITS

from .common import rejecting

__all__ = [
    "BEAT_BYTES",
    "COUNT_WIDTH",
    "REGION_CODE_WIDTH",
    "BoxWalker",
    "Status",
    "box_layout",
    "check_addr_width",
    "check_regions",
    "linear_box",
    "open_window",
    "region_windows_layout",
    "segment_layout",
    "status_layout",
    "window_layout",
]

#: Width of the count fields of a box.
COUNT_WIDTH = 16
#: Width of a box's region code (:func:`~fcircnn.arch.descriptor.region_code`).
REGION_CODE_WIDTH = max(len(READ_REGIONS), len(WRITE_REGIONS)).bit_length()


class Status(enum.Enum, shape=2):
    """Completion code of a transfer."""

    #: Every beat transferred.
    OK = 0
    #: The descriptor was rejected (unaligned address or stride, empty box, padding in a write
    #: box); no bus transaction was issued.
    BAD_COMMAND = 1
    #: A burst would leave the memory window (or pass the end of the address space); nothing at
    #: or after it was issued.
    OVERFLOW = 2
    #: A slave answered SLVERR or DECERR.
    BUS_ERROR = 3


def window_layout(addr_width: int) -> data.StructLayout:
    """A memory window of whole pages (:data:`~fcircnn.arch.registers.WINDOW_PAGE_BITS`):
    ``lo`` and ``hi``, its first and last page number."""
    return data.StructLayout({"lo": addr_width - WINDOW_PAGE_BITS,
                              "hi": addr_width - WINDOW_PAGE_BITS})


def region_windows_layout(addr_width: int, regions: int) -> data.ArrayLayout:
    """The region windows of a walker with ``regions`` of them (:class:`BoxWalker`)."""
    return data.ArrayLayout(window_layout(addr_width), regions)


def check_regions(regions) -> None:
    """Raise ``TypeError``/``ValueError`` unless ``regions`` is a walker's count of region
    windows: an integer in ``0..2**REGION_CODE_WIDTH - 1``."""
    top = (1 << REGION_CODE_WIDTH) - 1
    if not isinstance(regions, int) or isinstance(regions, bool):
        raise TypeError(f"regions must be an integer, not {regions!r}")
    if not 0 <= regions <= top:
        raise ValueError(f"regions must be in 0..{top}, not {regions}")


def open_window(addr_width: int) -> dict:
    """The initial value of a :func:`window_layout` port: every page (the window of a DMA
    whose window is not connected)."""
    return {"lo": 0, "hi": (1 << (addr_width - WINDOW_PAGE_BITS)) - 1}


def check_addr_width(addr_width) -> None:
    """Raise ``TypeError``/``ValueError`` unless ``addr_width`` is an integer in 32..64."""
    if not isinstance(addr_width, int) or isinstance(addr_width, bool):
        raise TypeError(f"addr_width must be an integer, not {addr_width!r}")
    if not 32 <= addr_width <= 64:
        raise ValueError(f"addr_width must be in 32..64, not {addr_width}")


def linear_box(box, addr, beats) -> list:
    """Statements making ``box`` (a :func:`box_layout` signal) one row of ``beats`` contiguous
    beats at ``addr``, in region 0 (the memory window alone) unless a later statement sets its
    ``region``: the hardware's :meth:`fcircnn.arch.walk.Box.block`."""
    return [box.eq(0), box.addr.eq(addr), box.stride_g.eq(BEAT_BYTES),
            box.stride_d.eq(BEAT_BYTES), box.stride_h.eq(BEAT_BYTES), box.groups.eq(1),
            box.d_len.eq(1), box.h_len.eq(1), box.w_len.eq(beats), box.last_lanes.eq(8)]


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
    region : the descriptor's stream region the box lies in: 0 the memory window alone, ``k``
        the walker's ``regions[k - 1]`` (:func:`~fcircnn.arch.descriptor.region_code`)
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
    fields["region"] = REGION_CODE_WIDTH
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


class _Axis:
    """Row position along the ``d`` or ``h`` axis of a box, as registered flags.

    ``rem`` counts the positions left including the current one (``tot`` .. 1); ``pad`` and
    ``last`` say whether the current position is padding and the axis' last. Moving on only
    compares registers with per-command constants (``lp1 = len + post + 1``, ``post1 = post +
    1``): position ``rem`` is padding iff ``rem > len + post`` (before the map) or ``rem <=
    post`` (after it), so the next one (``rem - 1``) is iff ``rem > lp1`` or ``rem <= post1``.
    """

    def __init__(self, name: str):
        cw = COUNT_WIDTH + 2
        self.rem = Signal(cw, name=f"{name}_rem")
        self.tot = Signal(cw, name=f"{name}_tot")
        self.lp1 = Signal(cw, name=f"{name}_lp1")
        self.post1 = Signal(cw, name=f"{name}_post1")
        self.pad0 = Signal(name=f"{name}_pad0")
        self.last0 = Signal(name=f"{name}_last0")
        self.pad = Signal(name=f"{name}_pad")
        self.last = Signal(name=f"{name}_last")

    def load(self, pre, len_, post):
        """Statements taking a command's counts; the position is the axis' first."""
        zero = [pre == 0, len_ == 0, post == 0]
        one = [pre == 1, len_ == 1, post == 1]
        # pre + len + post == 1, without the sum on the path.
        last0 = ((one[0] & zero[1] & zero[2]) | (zero[0] & one[1] & zero[2])
                 | (zero[0] & zero[1] & one[2]))
        pad0 = (pre != 0) | zero[1]
        tot = pre + len_ + post
        return [self.tot.eq(tot), self.rem.eq(tot), self.lp1.eq(len_ + post + 1),
                self.post1.eq(post + 1), self.pad0.eq(pad0), self.last0.eq(last0),
                self.pad.eq(pad0), self.last.eq(last0)]

    @staticmethod
    def empty(pre, len_, post):
        """``pre + len + post == 0`` of a command's counts."""
        return (pre == 0) & (len_ == 0) & (post == 0)

    def step(self):
        """Statements moving to the next position (not after the last)."""
        return [self.rem.eq(self.rem - 1), self.pad.eq((self.rem > self.lp1)
                                                       | (self.rem <= self.post1)),
                self.last.eq(self.rem == 2)]

    def wrap(self):
        """Statements moving back to the first position (after the last)."""
        return [self.rem.eq(self.tot), self.pad.eq(self.pad0), self.last.eq(self.last0)]


class BoxWalker(wiring.Component):
    """Turn box commands into segments: zero runs and legal AXI INCR bursts.

    Contract
    --------
    * Accepts a command when idle; emits its segments in the order of
      :meth:`fcircnn.gen.dma_plan.BoxDescriptor.segments`, the last with ``last`` set, then
      accepts the next command. At most one segment per cycle; a row costs one extra cycle when
      it has no leading padding.
    * A command with an address or stride not a multiple of 16, no group, or an empty axis
      yields a single segment with ``status = BAD_COMMAND``. A burst outside ``window`` (its
      page below ``lo`` or above ``hi``; a burst never crosses a page) or one that would pass
      ``2**addr_width`` ends the box with ``status = OVERFLOW`` instead; its ``addr`` holds the
      low ``addr_width`` bits of the burst's address. Nothing from there on is issued.
      ``window`` must be static while a command runs (but for closing it); unconnected it is
      every page.
    * With ``regions > 0`` a command's ``region`` code ``k`` (1..``regions``) replaces
      ``window`` with ``regions[k - 1]`` (the stream's region, narrowed to the memory window,
      :class:`~fcircnn.hw.accelerator.Accelerator`) for that command's bursts; code 0, or a
      code past ``regions``, keeps ``window``. The code is taken in every idle cycle; the
      windows themselves are used as they are (a window that closes stops the next burst).
    * ``abort`` (level) ends a box early with a zero-beat ``last`` segment.
    * Timing: the ``seg`` outputs are a few gates of registers and ``abort`` (no arithmetic),
      and what the walker computes for its next segment (the next burst's length, the next
      row's flags and address) only combines registers with ``seg.ready``; the per-command
      constants and the first row's flags are computed from ``cmd.payload`` in every idle
      cycle (about 4 LUT levels), ``cmd.valid`` only reaches the state register, and
      ``cmd.ready`` decodes the state register only.

    Parameters
    ----------
    addr_width : int
        32..64.
    regions : int
        Region windows besides ``window``, 0..``2**REGION_CODE_WIDTH - 1``.

    Ports
    -----
    cmd : In(stream.Signature(box_layout(addr_width)))
    seg : Out(stream.Signature(segment_layout(addr_width)))
    abort : In(1)
    window : In(window_layout(addr_width))
    regions : In(data.ArrayLayout(window_layout(addr_width), regions))
        Only with ``regions > 0``; every page when unconnected.
    """

    def __init__(self, addr_width: int = 40, *, regions: int = 0):
        with rejecting(self):
            check_addr_width(addr_width)
            check_regions(regions)
        self.addr_width = addr_width
        self.region_count = regions
        members = {
            "cmd": In(stream.Signature(box_layout(addr_width))),
            "seg": Out(stream.Signature(segment_layout(addr_width))),
            "abort": In(1),
            "window": In(window_layout(addr_width), init=open_window(addr_width)),
        }
        if regions:
            members["regions"] = In(region_windows_layout(addr_width, regions),
                                    init=[open_window(addr_width)] * regions)
        super().__init__(members)

    def _window_in_force(self, m, idle):
        """The window of the command being walked (see the contract): ``window`` itself
        without regions, else the one the command's code (taken in every idle cycle)
        chooses."""
        if not self.region_count:
            return self.window
        code = Signal(REGION_CODE_WIDTH)
        with m.If(idle):
            m.d.sync += code.eq(self.cmd.payload.region)
        choice = self.window
        for k in range(self.region_count):
            choice = Mux(code == k + 1, self.regions[k], choice)
        win = Signal(window_layout(self.addr_width))
        m.d.comb += win.eq(choice)
        return win

    def elaborate(self, platform):
        m = Module()
        aw = self.addr_width
        cw = COUNT_WIDTH + 2
        # Per-command constants.
        stride_g, stride_d, stride_h = Signal(aw), Signal(aw), Signal(aw)
        w_pre, w_len, w_post = Signal(COUNT_WIDTH), Signal(COUNT_WIDTH), Signal(COUNT_WIDTH)
        w_tot = Signal(cw)
        w_pre_nz, w_post_nz, w_len_z = Signal(), Signal(), Signal()
        # Row position: groups left (with the current one), d and h as flags.
        g_rem = Signal(COUNT_WIDTH)
        last_g = Signal()
        dx, hx = _Axis("d"), _Axis("h")
        # Row addresses with a sticky overflow bit (bit aw): a_g group start, a_d plane start,
        # a_h current in-map row. a_g holds the command's address until the first group ends.
        a_g, a_d, a_h = Signal(aw + 1), Signal(aw + 1), Signal(aw + 1)
        # The burst on offer in BUS: address (bit aw set: past the address space), beats left
        # in the row, its length and whether it ends the row.
        cur = Signal(aw + 1)
        # cur's page is in the window: set for a row's first burst from a_h, then for each next
        # burst, which starts on the next page, from cur (registers: no compare on seg).
        page = slice(WINDOW_PAGE_BITS, aw)
        cur_ok = Signal()
        idle = Signal()
        win = self._window_in_force(m, idle)
        rem = Signal(COUNT_WIDTH)
        n = Signal(9)
        row_end = Signal()

        seg = self.seg
        p = seg.payload

        row_pad = dx.pad | hx.pad | w_len_z
        last_row = hx.last & dx.last & last_g
        m.d.comb += p.last_group.eq(last_g)

        def add(acc, inc):
            # Sum with the overflow bit kept sticky.
            return (acc[:aw] + inc)[: aw + 1] | (acc[aw] << aw)

        def advance_row():
            with m.If(hx.last):
                m.d.sync += hx.wrap()
                with m.If(dx.last):
                    m.d.sync += dx.wrap()
                    nxt = add(a_g, stride_g)
                    m.d.sync += [g_rem.eq(g_rem - 1), last_g.eq(g_rem == 2),
                                 a_g.eq(nxt), a_d.eq(nxt), a_h.eq(nxt)]
                with m.Else():
                    m.d.sync += dx.step()
                    with m.If(~dx.pad):
                        nxt = add(a_d, stride_d)
                        m.d.sync += [a_d.eq(nxt), a_h.eq(nxt)]
                    with m.Else():
                        m.d.sync += a_h.eq(a_d)
            with m.Else():
                m.d.sync += hx.step()
                with m.If(~hx.pad):
                    m.d.sync += a_h.eq(add(a_h, stride_h))
            with m.If(last_row):
                m.next = "IDLE"
            with m.Else():
                m.next = "ROW"

        # First burst of a row at a_h: min(w_len, beats to the next 4 KB boundary); the bursts
        # after it start on a boundary: min(beats left, 256). A burst never passes a 4 KB
        # boundary, and 2**aw is one, so only a burst starting at or past 2**aw (cur[aw])
        # overflows.
        to_page = Signal(9)
        m.d.comb += to_page.eq(256 - a_h[4:12])
        fits = w_len <= to_page
        left = Signal(COUNT_WIDTH)
        m.d.comb += left.eq(rem - n)

        with m.FSM():
            # One cycle out of reset before accepting commands: the state register then changes
            # after reset, so event-driven simulators (Icarus 11 ignores the time-0 events of
            # declaration initialisers) evaluate every process that depends on it.
            with m.State("START"):
                m.next = "IDLE"
            with m.State("IDLE"):
                m.d.comb += [self.cmd.ready.eq(1), idle.eq(1)]
                c = self.cmd.payload
                # Taken in every idle cycle, whether or not cmd.valid (these registers are only
                # read once a command is accepted): cmd.valid only reaches the state register.
                m.d.sync += [
                    stride_g.eq(c.stride_g), stride_d.eq(c.stride_d), stride_h.eq(c.stride_h),
                    w_pre.eq(c.w_pre), w_len.eq(c.w_len), w_post.eq(c.w_post),
                    w_tot.eq(c.w_pre + c.w_len + c.w_post),
                    w_pre_nz.eq(c.w_pre != 0), w_post_nz.eq(c.w_post != 0),
                    w_len_z.eq(c.w_len == 0),
                    g_rem.eq(c.groups), last_g.eq(c.groups == 1),
                    dx.load(c.d_pre, c.d_len, c.d_post),
                    hx.load(c.h_pre, c.h_len, c.h_post),
                    a_g.eq(c.addr), a_d.eq(c.addr), a_h.eq(c.addr),
                ]
                with m.If(self.cmd.valid):
                    bad = (Cat(c.addr[:4], c.stride_g[:4], c.stride_d[:4], c.stride_h[:4]).any()
                           | (c.groups == 0)
                           | _Axis.empty(c.d_pre, c.d_len, c.d_post)
                           | _Axis.empty(c.h_pre, c.h_len, c.h_post)
                           | _Axis.empty(c.w_pre, c.w_len, c.w_post))
                    with m.If(bad):
                        m.next = "BAD"
                    with m.Else():
                        m.next = "ROW"
            with m.State("BAD"):
                m.d.comb += [seg.valid.eq(1), p.status.eq(Status.BAD_COMMAND), p.last.eq(1),
                             p.addr.eq(a_g)]
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
                    m.d.comb += [seg.valid.eq(w_pre_nz), p.beats.eq(w_pre)]
                    with m.If(~w_pre_nz | seg.ready):
                        m.d.sync += [cur.eq(a_h), rem.eq(w_len), row_end.eq(fits),
                                     n.eq(Mux(fits, w_len, to_page)),
                                     cur_ok.eq((a_h[page] >= win.lo) & (a_h[page] <= win.hi))]
                        m.next = "BUS"
            with m.State("BUS"):
                with m.If(self.abort):
                    m.next = "ABORT"
                with m.Elif(cur[aw] | ~cur_ok):
                    m.d.comb += [seg.valid.eq(1), p.status.eq(Status.OVERFLOW), p.last.eq(1),
                                 p.addr.eq(cur)]
                    with m.If(seg.ready):
                        m.next = "IDLE"
                with m.Else():
                    m.d.comb += [seg.valid.eq(1), p.burst.eq(1), p.addr.eq(cur), p.beats.eq(n),
                                 p.last.eq(row_end & last_row & ~w_post_nz)]
                    with m.If(seg.ready):
                        m.d.sync += [cur.eq(cur + (n << 4)), rem.eq(left),
                                     n.eq(Mux(left[8:].any(), 256, left[:8])),
                                     row_end.eq(left <= 256), cur_ok.eq(cur[page] < win.hi)]
                        with m.If(row_end):
                            with m.If(w_post_nz):
                                m.next = "POST"
                            with m.Else():
                                advance_row()
            with m.State("POST"):
                with m.If(self.abort):
                    m.next = "ABORT"
                with m.Else():
                    m.d.comb += [seg.valid.eq(1), p.beats.eq(w_post), p.last.eq(last_row)]
                    with m.If(seg.ready):
                        advance_row()
            with m.State("ABORT"):
                m.d.comb += [seg.valid.eq(1), p.last.eq(1)]
                with m.If(seg.ready):
                    m.next = "IDLE"
        return m
