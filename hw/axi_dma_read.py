"""Read half of the AXI DMA: boxes of an NC/8DHW8 map (or contiguous blocks) to a beat stream."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from fcircnn.arch.ports import DMA_QUEUE

from .axi4 import BURST_INCR, AXI4ReadSignature
from .axi_dma_box import (
    COUNT_WIDTH,
    BoxWalker,
    Status,
    box_layout,
    check_addr_width,
    check_regions,
    open_window,
    region_windows_layout,
    status_layout,
    window_layout,
)
from .common import rejecting

__all__ = ["MAX_COMMANDS", "AxiDmaRead", "BeatCounter", "check_commands", "check_outstanding",
           "command_ready", "read_beat_layout"]

#: 128-bit beats.
DATA_WIDTH = 128


def read_beat_layout() -> data.StructLayout:
    """One delivered beat: 8 slots of ``data`` (NC/8DHW8 lanes) and ``last`` of the box."""
    return data.StructLayout({"data": DATA_WIDTH, "last": 1})


def check_outstanding(name: str, value) -> None:
    """Validate a number of outstanding bursts (1..64)."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an integer, not {value!r}")
    if not 1 <= value <= 64:
        raise ValueError(f"{name} must be in 1..64, not {value}")


#: Largest DMA command queue (:class:`AxiDmaRead` ``commands``).
MAX_COMMANDS = DMA_QUEUE[-1]


def check_commands(name: str, value) -> None:
    """Validate a command-queue depth (1..:data:`MAX_COMMANDS`)."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an integer, not {value!r}")
    if not 1 <= value <= MAX_COMMANDS:
        raise ValueError(f"{name} must be in 1..{MAX_COMMANDS}, not {value}")


def command_ready(m: Module, busy) -> Signal:
    """A register equal to ``~busy`` except in the first cycle out of reset (the walker's START
    cycle): a DMA engine's ``cmd.ready`` with no logic in front of it (the walker is idle
    whenever the engine is not busy). The caller clears it when it accepts a command and sets
    it when it clears ``busy``."""
    ready, booted = Signal(), Signal()
    m.d.sync += booted.eq(1)
    with m.If(~booted):
        m.d.sync += ready.eq(~busy)
    return ready


class BeatCounter:
    """Beats done of the head entry of a DMA's order FIFO, with its "last beat" flag registered.

    ``at_end`` (this beat is the entry's last, or the entry has no beat) is a 2-input choice
    between an entry bit written with the entry (``one``: ``beats <= 1``) on the entry's first
    beat and a register afterwards, instead of a ``count + 1 >= beats`` compare behind the FIFO
    read. ``count`` and ``first`` (``count == 0``) are registers; a new head entry always
    starts with ``count == 0``.

    Parameters
    ----------
    beats, one : the head entry's ``beats`` and ``one`` fields
    """

    def __init__(self, beats, one):
        self.beats = beats
        self.count = Signal(COUNT_WIDTH + 2)
        self.first = Signal(init=1)
        self._end = Signal()
        self.at_end = Mux(self.first, one, self._end)

    def step(self):
        """Statements counting one beat (then :meth:`restart` if it ended the entry)."""
        return [self.count.eq(self.count + 1), self.first.eq(0),
                self._end.eq(self.count + 2 >= self.beats)]

    def restart(self):
        """Statements for the next entry's first beat."""
        return [self.count.eq(0), self.first.eq(1)]


class AxiDmaRead(wiring.Component):
    """AXI4 read DMA: one box command in, its beats out (padding as zeros), one status out.

    Contract
    --------
    * ``o`` delivers ``groups x d x h x w`` beats of the box in NC/8DHW8 order (group, d, h, w),
      padding voxels as zero beats without a bus read; ``last`` marks the final beat. Equal to
      ``pack_ncdhw8`` of the zero-padded map cut to the box.
    * Bursts: INCR, 128-bit (``ARSIZE = 4``), 1..256 beats, never across a 4 KB boundary, ID 0;
      up to ``outstanding`` bursts in flight (the AR channel runs ahead of the data), so a long
      transfer keeps ``RVALID`` streaming at one beat per cycle. ``RREADY`` follows ``o.ready``.
    * One ``status`` per command, after its last beat: ``code`` :class:`Status` and, on error,
      the failing byte address. On ``SLVERR``/``DECERR`` (or an ``RLAST`` at the wrong beat) the
      DMA stops issuing reads and stops delivering beats, drains every outstanding burst
      (``RREADY`` high), then reports ``BUS_ERROR``: no beat is delivered twice, none after the
      error, and every issued burst is completed exactly once (a slave that ends a burst early
      with RLAST breaks AXI: the DMA flags it but still expects the burst's remaining beats).
      Bad commands and address
      overflow are reported without issuing the offending burst (:class:`BoxWalker`).
    * Command queue: up to ``commands`` commands are accepted and not yet reported. With
      ``commands = 1`` a new command is accepted once the previous status has been taken (not
      in the first cycle out of reset) and ``cmd.ready`` is a register. With more, the next
      command is accepted as soon as the walker has issued the previous one's last segment, so
      its bursts follow the previous ones' on AR and its beats follow theirs on ``o`` without
      a gap for the command, the walker's start or the memory latency; beats and statuses stay
      in command order, each status once its command's last beat is delivered. After an error
      every command accepted before its status has been taken (and any accepted meanwhile)
      ends at once (no further beat) and reports the same code and address; the first error's
      status, like every status in that state, waits until no burst is in flight.
    * The AR registers and the walker only see registers, ``ARREADY`` and the order FIFO's
      level (see :class:`BoxWalker`), so the box arithmetic stays a few LUT levels deep.

    Parameters
    ----------
    addr_width : int
        AXI address width, 32..64 (the accelerator's ``address_width``).
    outstanding : int
        Bursts in flight, 1..64.
    commands : int
        Commands accepted and not yet reported, 1..8 (:func:`check_commands`).

    Ports
    -----
    cmd : In(stream.Signature(box_layout(addr_width)))
    o : Out(stream.Signature(read_beat_layout()))
    status : Out(stream.Signature(status_layout(addr_width)))
    m_axi : Out(AXI4ReadSignature(addr_width=addr_width))
    busy : Out(1)
    window : In(window_layout(addr_width))
        The memory window every burst must lie in (:class:`~fcircnn.hw.axi_dma_box.BoxWalker`;
        a burst outside ends the command with ``OVERFLOW``); every page when unconnected.
    regions : In(region_windows_layout(addr_width, regions))
        Only with ``regions > 0``: the windows a command's region code chooses
        (:class:`~fcircnn.hw.axi_dma_box.BoxWalker`).
    """

    def __init__(self, addr_width: int = 40, *, outstanding: int = 8, commands: int = 1,
                 regions: int = 0):
        with rejecting(self):
            check_addr_width(addr_width)
            check_regions(regions)
            check_outstanding("outstanding", outstanding)
            check_commands("commands", commands)
        self.addr_width = addr_width
        self.outstanding = outstanding
        self.region_count = regions
        self.commands = commands
        super().__init__({
            "cmd": In(stream.Signature(box_layout(addr_width))),
            "o": Out(stream.Signature(read_beat_layout())),
            "status": Out(stream.Signature(status_layout(addr_width))),
            "m_axi": Out(AXI4ReadSignature(addr_width=addr_width)),
            "busy": Out(1),
            "window": In(window_layout(addr_width), init=open_window(addr_width)),
        } | ({"regions": In(region_windows_layout(addr_width, regions),
                            init=[open_window(addr_width)] * regions)} if regions else {}))

    def elaborate(self, platform):
        m = Module()
        aw = self.addr_width
        m.submodules.walker = walker = BoxWalker(aw, regions=self.region_count)
        m.d.comb += walker.window.eq(self.window)
        if self.region_count:
            m.d.comb += walker.regions.eq(self.regions)
        # ``one``: beats <= 1, ``nil``: beats == 0 (an abort marker), for BeatCounter.
        entry = data.StructLayout({
            "addr": aw, "beats": COUNT_WIDTH + 2, "burst": 1, "last": 1, "status": Status,
            "one": 1, "nil": 1,
        })
        depth = 2 * self.outstanding + 2
        m.submodules.fifo = q = fifo.SyncFIFO(width=entry.size, depth=depth)
        axi = self.m_axi

        queue = self.commands > 1
        pending = Signal(range(self.commands + 1))  # accepted, status not yet taken
        err = Signal()          # a bus error was seen: drain
        err_addr = Signal(aw)
        inflight = Signal(range(self.outstanding + 1))
        st_valid = Signal()
        st = Signal(status_layout(aw))

        # Command: accepted by the walker when it is idle and the queue has room.
        if queue:
            cmd_ready = Signal()
            m.d.comb += cmd_ready.eq(walker.cmd.ready & (pending < self.commands))
        else:
            cmd_ready = command_ready(m, pending != 0)
        accept = self.cmd.valid & cmd_ready
        m.d.comb += [
            walker.cmd.payload.eq(self.cmd.payload),
            walker.cmd.valid.eq(self.cmd.valid & cmd_ready),
            self.cmd.ready.eq(cmd_ready),
            self.busy.eq(pending != 0),
            walker.abort.eq(err),
        ]
        taken = self.status.valid & self.status.ready
        with m.If(accept & ~taken):
            m.d.sync += pending.eq(pending + 1)
        with m.Elif(~accept & taken):
            m.d.sync += pending.eq(pending - 1)
        if not queue:
            with m.If(accept):
                m.d.sync += cmd_ready.eq(0)

        # Segment issue: bursts go out on AR (registered) and into the order FIFO.
        seg = walker.seg.payload
        ar_pending = Signal()
        m.d.comb += [
            axi.arid.eq(0), axi.arsize.eq(4), axi.arburst.eq(BURST_INCR), axi.arcache.eq(0b0011),
            axi.arprot.eq(0), axi.arlock.eq(0), axi.arvalid.eq(ar_pending),
        ]
        with m.If(axi.arvalid & axi.arready):
            m.d.sync += ar_pending.eq(0)
        issue = seg.burst & ~err        # a burst segment has status OK
        ar_free = ~ar_pending | axi.arready
        pop_burst = Signal()
        can = q.w_rdy & (~issue | (ar_free & (inflight < self.outstanding)))
        m.d.comb += walker.seg.ready.eq(can)
        w_entry = data.View(entry, q.w_data)
        m.d.comb += [
            w_entry.addr.eq(seg.addr), w_entry.beats.eq(seg.beats),
            w_entry.burst.eq(issue), w_entry.last.eq(seg.last), w_entry.status.eq(seg.status),
            w_entry.one.eq(seg.beats <= 1), w_entry.nil.eq(seg.beats == 0),
            q.w_en.eq(walker.seg.valid & can),
        ]
        push_burst = walker.seg.valid & can & issue
        with m.If(push_burst):
            m.d.sync += [ar_pending.eq(1), axi.araddr.eq(seg.addr), axi.arlen.eq(seg.beats - 1)]
        with m.If(push_burst & ~pop_burst):
            m.d.sync += inflight.eq(inflight + 1)
        with m.Elif(~push_burst & pop_burst):
            m.d.sync += inflight.eq(inflight - 1)

        # Data path: the head entry is a zero run or a burst to pass through.
        head = data.View(entry, q.r_data)
        counter = BeatCounter(head.beats, head.one)
        at_end = counter.at_end
        beat_addr = Signal(aw)
        o = self.o
        finish = Signal()
        # The payload is meaningful with o.valid only: gated by the head entry alone (zero runs
        # deliver zeros).
        m.d.comb += [o.payload.data.eq(Mux(head.burst, axi.rdata, 0)),
                     o.payload.last.eq(head.last & at_end)]
        # One command at a time: its beats wait for the previous status to be taken.
        with m.If(q.r_rdy & (~st_valid if not queue else 1)):
            with m.If(head.status != Status.OK):
                m.d.comb += [q.r_en.eq(1), finish.eq(1)]
                with m.If(~err):
                    m.d.sync += [err.eq(1), err_addr.eq(head.addr), st.code.eq(head.status)]
            with m.Elif(head.burst):
                # SLVERR/DECERR have RRESP[1] set; an RLAST at the wrong beat is an error too.
                # A failing beat is taken from R but never delivered.
                # (Gated by RVALID: RRESP/RLAST mean nothing, and may be X in simulation,
                # without it; RREADY must not depend on them.)
                bad = axi.rvalid & (axi.rresp[1] | (axi.rlast != at_end))
                m.d.comb += [axi.rready.eq(err | bad | o.ready),
                             o.valid.eq(axi.rvalid & ~err & ~bad)]
                with m.If(axi.rvalid & axi.rready):
                    this_addr = Mux(counter.first, head.addr, beat_addr)
                    m.d.sync += [counter.step(), beat_addr.eq(this_addr + 16)]
                    with m.If(bad & ~err):
                        m.d.sync += [err.eq(1), st.code.eq(Status.BUS_ERROR),
                                     err_addr.eq(this_addr)]
                    with m.If(at_end):
                        m.d.sync += counter.restart()
                        m.d.comb += [q.r_en.eq(1), pop_burst.eq(1), finish.eq(head.last)]
            with m.Else():
                # Zero run (beats may be 0 for an abort marker); dropped when draining.
                m.d.comb += o.valid.eq(~err & ~head.nil)
                with m.If(err | head.nil | o.ready):
                    m.d.sync += counter.step()
                    with m.If(err | at_end):
                        m.d.sync += counter.restart()
                        m.d.comb += [q.r_en.eq(1), finish.eq(head.last)]

        # Status: after the box's last entry (with an error once every burst has drained),
        # in command order; ``finished`` counts the commands whose last entry is out.
        finished = Signal(range(self.commands + 1))
        quiet = (inflight == 0) & ~ar_pending
        raise_ = (finished != 0) & ~st_valid & (~err | quiet)
        with m.If(finish & ~raise_):
            m.d.sync += finished.eq(finished + 1)
        with m.Elif(~finish & raise_):
            m.d.sync += finished.eq(finished - 1)
        out = Signal(status_layout(aw))
        with m.If(raise_):
            m.d.sync += [st_valid.eq(1), out.code.eq(Mux(err, st.code, Status.OK)),
                         out.addr.eq(Mux(err, err_addr, 0))]
        m.d.comb += [self.status.valid.eq(st_valid), self.status.payload.eq(out)]
        with m.If(taken):
            m.d.sync += st_valid.eq(0)
            if not queue:
                m.d.sync += cmd_ready.eq(1)
            # The last command reported: the error state ends (a command accepted in the same
            # cycle is still ended by it).
            with m.If((pending == 1) & ~accept):
                m.d.sync += [err.eq(0), err_addr.eq(0)]
        return m
