"""The layer engine's loader: every read of a conv layer, issued as far ahead as the buffers
allow."""

from __future__ import annotations

from amaranth.hdl import C, Module, Mux, Shape, Signal, unsigned
from amaranth.lib import data, fifo, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from fcircnn.arch.descriptor import (
    FLAG_IQUARTER,
    FLAG_ISPLIT,
    FLAG_RESIDUAL,
    FLAG_SPREAD,
    FLAG_WQUARTER,
    FLAG_WSPLIT,
    OP_POOL,
    region_code,
)
from fcircnn.arch.geometry import SLOTS_PER_BEAT, CoreGeometry, EngineGeometry
from fcircnn.arch.ports import (
    ALL_READS,
    INPUT_QUARTER_KINDS,
    LOADER_READS,
    READ_KINDS,
    PortMap,
    input_halves,
    input_quarters,
)

from .axi_dma_box import Status, box_layout, check_addr_width, linear_box, status_layout
from .axi_dma_read import check_commands, read_beat_layout
from .common import first_of, mul_const, rejecting
from .engine_walk import TileWalk, control_signature, fail_signature

__all__ = ["POST_RECORD_BITS", "EngineLoader", "params_signature"]

#: Bits of one post record (see :mod:`fcircnn.gen.pack`).
POST_RECORD_BITS = 256
#: AXI data-bus bits (one read beat).
_BEAT_BITS = 128


def params_signature(core: CoreGeometry) -> memory.WritePort.Signature:
    """The post-parameter memory's write port: two halves (m-tile parity) of ``Tm/16`` words,
    a word the 8 post records of one slot group, written a 128-bit beat at a time."""
    G = core.out_groups
    return memory.WritePort.Signature(addr_width=(2 * G - 1).bit_length() or 1,
                                      shape=unsigned(SLOTS_PER_BEAT * POST_RECORD_BITS),
                                      granularity=_BEAT_BITS)


class EngineLoader(wiring.Component):
    """Walks a conv layer's tile loop nest ``mt > (td, th, tw) > nt`` (:class:`TileWalk`) and
    issues its reads on ``rd_cmd``, routing the beats of ``rd_data`` to their buffer.

    Per m-tile the post records go to the parameter memory (``params``, the half of the
    m-tile's parity, once the drain has left the m-tile two back: ``drain_mt``); per tile the
    residual box (``FLAG_RESIDUAL``) to ``res_o``; per ``(tile, nt)`` the input box (conv
    padding as DMA zero padding; its size on ``in_box``) to ``in_o`` and the ``(mt, nt)``
    weight tile to ``w_o``. Each transfer waits until its buffer is free (the stream's
    ``ready``), so the loader runs ahead of compute as far as the ping-pong buffers allow.

    A loader issues only the read kinds in ``reads`` (:data:`~fcircnn.arch.ports.READ_KINDS`)
    and has only their ports: every kind on a one-port design; with a weight port
    (:class:`~fcircnn.arch.ports.PortMap`) two loaders walk the same nest side by side, one
    issuing the post records, residual and input boxes, the other the weight tiles, each on
    its own read engine, each paced only by its own buffers. On a core whose weight tiles split
    (``weight_half`` in ``reads``), a descriptor with ``FLAG_WSPLIT`` has the weight loader
    read the first half of each weight tile and the input loader the second half after its
    input box, into the weight buffer's second load stream ``w1_o``. On a core whose input
    boxes split (``input_half`` in ``reads``), a descriptor with ``FLAG_ISPLIT`` has the input
    loader read the lower half of each input box's slot groups and the weight loader the
    upper half before its weight tile, into the input buffer's second load stream ``in1_o``
    (its box on ``in1_box``). With three or four ports a loader of their own can issue the
    upper halves of split input boxes (``reads`` = ``{"input_half"}``) or the second halves of
    split weight tiles (``{"weight_half"}``): it walks the nest only for a descriptor with the
    flag (``FLAG_ISPLIT``, ``FLAG_WSPLIT``) and stays idle for any other. On an engine that
    reads weight tiles in quarters (``quarters``), a descriptor with ``FLAG_WQUARTER`` has the
    weight loader read the first quarter of each tile, the input loader the second after its
    input box (``weight_quarter1``, into ``w2_o``), port 3's loader the third (its
    ``weight_half``) and port 2's loader the fourth (``weight_quarter3``, into ``w3_o``; that
    loader walks descriptors with ``FLAG_ISPLIT`` or ``FLAG_WQUARTER``, with both it reads the
    upper half of the input box first). On a four-port core with residual layers the residual
    boxes are port 3's loader's (``reads`` without ``residual`` on the input loader, with it on
    port 3's: :meth:`~fcircnn.arch.ports.PortMap.loader_reads`): that loader walks every
    descriptor with ``FLAG_RESIDUAL`` or ``FLAG_WSPLIT``, reads each tile's residual box at
    its first pass, then the pass's weight half (``FLAG_WSPLIT``), and steps over a pass with
    neither in a cycle. On an engine that reads input boxes in quarters (``in_quarters``), a
    descriptor with ``FLAG_IQUARTER`` has the input loader read the first quarter of each
    input box's slot groups, the weight loader the second before its weight tile
    (``input_quarter1``, into ``in2_o``, its box on ``in2_box``), port 2's loader the third
    (its ``input_half``) and port 3's loader the fourth (``input_quarter3``, into ``in3_o``,
    box ``in3_box``: after the tile's residual box, before the pass's weight half; that loader
    walks descriptors with ``FLAG_IQUARTER`` too).

    Contract
    --------
    * ``ctl.start`` with a conv descriptor starts the walk; it ends after the last pass (back
      to idle, ``idle`` high) or at ``ctl.failed``.
    * ``commands = 1``: one transfer at a time: the command, then its beats, then its status;
      the walk steps to the next pass with the status of the pass's last read: its weight
      tile (or half, or quarter), or its input box for a loader without weights (or the
      tile's second half with ``FLAG_WSPLIT``, its second quarter with ``FLAG_WQUARTER``).
    * ``commands > 1`` (a read engine with a command queue as deep,
      :class:`~fcircnn.hw.axi_dma_read.AxiDmaRead`): up to ``commands`` transfers in flight;
      the next command is issued as soon as its own condition holds (the buffer's ``ready``,
      the drain's m-tile for post records) and no transfer to the same buffer is in flight
      (so ``ready`` is the buffer's own state), the walk steps with the handshake of the
      pass's last read, and each transfer's destination, box size and m-tile parity travel
      with it (FIFOs of the commands in flight, popped at the last beat and at the status) to
      route its beats and take its status. The walk ends, and a failure settles, only once
      every transfer in flight has reported.
    * A status other than OK pulses ``fail`` (code = the status) and ends the walk.
    * ``params_ready[h]``: the records of the m-tile of parity ``h`` are loaded.

    Parameters
    ----------
    core : CoreGeometry
    geometry : EngineGeometry
    in_box : data.Layout
        The input buffer's box layout (:func:`~fcircnn.hw.buffer_input.input_box_layout`).
    res_box : data.Layout or None
        The residual buffer's box layout, ``None`` if the core runs no residual layer.
    addr_width : int
    reads : frozenset of str
        The read kinds this loader issues, one of :data:`~fcircnn.arch.ports.LOADER_READS`:
        every kind (default), the input or the weight side of a two-port split, or one split
        half on a port of its own.
    commands : int
        Transfers in flight, 1..:data:`~fcircnn.hw.axi_dma_read.MAX_COMMANDS` (its read
        engine's command queue).
    quarters : bool
        The engine reads weight tiles in quarters (its weight buffer is quarterable): the
        loader honours ``FLAG_WQUARTER`` (needs a multiple of four beats per kernel tap; a
        loader with a quarter in ``reads`` needs it).
    in_quarters : bool
        The engine reads input boxes in quarters (its input buffer is quarterable): the loader
        honours ``FLAG_IQUARTER`` (needs a multiple of four input slot groups; a loader with
        an input quarter in ``reads`` needs it).
    """

    def __init__(self, core: CoreGeometry, geometry: EngineGeometry, *, in_box: data.Layout,
                 res_box: data.Layout | None, addr_width: int = 40,
                 reads: frozenset[str] = ALL_READS, commands: int = 1,
                 quarters: bool = False, in_quarters: bool = False):
        with rejecting(self):
            if not isinstance(core, CoreGeometry) or not isinstance(geometry, EngineGeometry):
                raise TypeError("core must be a CoreGeometry and geometry an EngineGeometry")
            check_addr_width(addr_width)
            check_commands("commands", commands)
            if (res_box is not None) != geometry.residual:
                raise ValueError("res_box must be given exactly when the core has residuals")
            reads = frozenset(reads)
            if reads not in LOADER_READS:
                raise ValueError(f"reads must be one of {[sorted(r) for r in LOADER_READS]} "
                                 f"(kinds of {list(READ_KINDS)}), not {sorted(reads)}")
            if "residual" in reads and "input" not in reads and res_box is None:
                raise ValueError(f"reads {sorted(reads)} has the residual boxes, but the core "
                                 f"runs no residual layer (res_box is None)")
            if "input_half" in reads and not PortMap(2).splits_inputs(core.in_groups):
                raise ValueError(f"reads has input_half, but the core's input boxes do not "
                                 f"split ({core.in_groups} input slot groups, not an even "
                                 f"number)")
            if not isinstance(quarters, bool):
                raise TypeError(f"quarters must be a bool, not {quarters!r}")
            if quarters and not PortMap(4).quarters_weights(core.weight_tile_beats(1)):
                raise ValueError(f"quarters needs a multiple of four beats per kernel tap, not "
                                 f"{core.weight_tile_beats(1)}")
            if reads & _QUARTER_KINDS and not quarters:
                raise ValueError(f"reads has {sorted(reads & _QUARTER_KINDS)}, but quarters is "
                                 f"False")
            if not isinstance(in_quarters, bool):
                raise TypeError(f"in_quarters must be a bool, not {in_quarters!r}")
            if in_quarters and not PortMap(4).quarters_inputs(core.in_groups):
                raise ValueError(f"in_quarters needs a multiple of four input slot groups, not "
                                 f"{core.in_groups}")
            if reads & INPUT_QUARTER_KINDS and not in_quarters:
                raise ValueError(f"reads has {sorted(reads & INPUT_QUARTER_KINDS)}, but "
                                 f"in_quarters is False")
        self.core, self.geometry, self.addr_width = core, geometry, addr_width
        self.quarters, self.in_quarters = quarters, in_quarters
        self.in_box_layout, self.res_box_layout = in_box, res_box
        self.reads = reads
        self.commands = commands
        beat = stream.Signature(read_beat_layout())
        ports = {
            "ctl": In(control_signature()),
            "fail": Out(fail_signature(addr_width)),
            "idle": Out(1),
            "rd_cmd": Out(stream.Signature(box_layout(addr_width))),
            "rd_data": In(beat),
            "rd_status": In(stream.Signature(status_layout(addr_width))),
        }
        if "input" in reads:
            ports |= {
                "in_o": Out(beat),
                "in_box": Out(in_box),
                "in_stride_d": Out(range(1, geometry.stride[0] + 1), init=geometry.stride[0]),
                "params": In(params_signature(core)),
                "params_ready": Out(2),
                "drain_mt": In(16),
            }
        if "residual" in reads and res_box is not None:
            ports |= {"res_o": Out(beat), "res_box": Out(res_box)}
        if "weights" in reads:
            ports["w_o"] = Out(beat)
        if "input_half" in reads:
            ports |= {"in1_o": Out(beat), "in1_box": Out(in_box)}
        if "weight_half" in reads:
            ports["w1_o"] = Out(beat)
        if "weight_quarter1" in reads:
            ports["w2_o"] = Out(beat)
        if "weight_quarter3" in reads:
            ports["w3_o"] = Out(beat)
        if "input_quarter1" in reads:
            ports |= {"in2_o": Out(beat), "in2_box": Out(in_box)}
        if "input_quarter3" in reads:
            ports |= {"in3_o": Out(beat), "in3_box": Out(in_box)}
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        k = _Kinds(self)
        loads_in, loads_w, res_side = k.loads_in, k.loads_w, k.res_side
        in_halves, halves, quarter_kind = k.in_halves, k.halves, k.quarter_kind
        in_quarter_kind = k.in_quarter_kind
        ctl = self.ctl
        d = ctl.desc
        ld = TileWalk(m, "ld", d, self.core, self.geometry.stride, with_nt=True)
        with m.If(ctl.start):
            ld.reset(ctl.new_desc)
        rd_box = Signal(box_layout(self.addr_width))
        # ``dest``: the transfer being decided and commanded; ``route``: where the beats on
        # rd_data go (the same with one transfer at a time, else the oldest in flight's).
        dest, route = Signal(range(_DESTS)), Signal(range(_DESTS))
        m.d.comb += self.rd_cmd.payload.eq(rd_box)
        # The command's region is its destination's stream's.
        with m.Switch(dest):
            for dest_, stream_ in _DEST_STREAM.items():
                with m.Case(dest_):
                    m.d.comb += self.rd_cmd.payload.region.eq(region_code(stream_))
        flight = _InFlight(m, self) if self.commands > 1 else None
        m.d.comb += route.eq(dest if flight is None else flight.route)
        # 0 params, 1 residual, 2 input (or its lower half or first quarter), 3 weights (or
        # their first half), 4 second half of the weights (or third quarter), 5 upper half of
        # the input (or its third quarter), 6 the loader's quarter of the weights (the second
        # or the fourth), 7 the loader's quarter of the input (the second or the fourth)
        ld_phase = Signal(range(8))
        quarter = (d.flags & FLAG_WQUARTER).bool() if self.quarters else C(0, 1)
        iquarter = (d.flags & FLAG_IQUARTER).bool() if self.in_quarters else C(0, 1)
        first_phase = k.first_phase
        starts = k.starts(ctl)
        m.d.comb += self.rd_data.ready.eq(route == _DEST_PARAM)
        phases, params = {}, None
        split = (d.flags & FLAG_WSPLIT).bool()
        # After the input box: the weights, the second half of a split tile, its second quarter,
        # or the next pass.
        after_input = (3 if loads_w else Mux(split, 4, 0) if halves
                       else Mux(quarter, 6, 0) if quarter_kind else 0)

        def skip_input(dest_, then):
            # FLAG_MINNER, a tile's later m-tile: its part of the input box is in the buffer
            # already; on to phase ``then``, or to the next pass if it was this one's last read.
            m.d.sync += ld_phase.eq(then)
            with m.If(k.last_read(C(dest_, range(_DESTS)), split, quarter, iquarter)):
                ld.advance()

        if loads_in:
            phases, params = self._input_side(m, ld, dest, route, rd_box, ld_phase, flight,
                                              after_input=after_input, skip=skip_input)
        # Port 3's loader after a tile's residual box (or in place of it): the pass's input
        # quarter, its weight half, then the next pass.
        port3 = ([(iquarter, 7)] if in_quarter_kind else []) + ([(split, 4)] if halves else [])
        if res_side:
            phases[1] = self._port3_residual(m, ld, dest, route, rd_box, ld_phase, flight,
                                             port3)
        for kind, (stream_, dest_) in _PART_SINKS.items():
            if kind in self.reads:
                self._route(m, route, dest_, getattr(self, stream_))
        parts = _WeightParts(d, split, quarter)
        if halves:
            phases[4] = self._half_phase(m, ld, d, dest, rd_box, ld_phase, flight, parts,
                                         then=0 if loads_in else first_phase(d))
        if loads_w:
            phases[3] = self._weight_phase(m, ld, d, dest, rd_box, ld_phase, first_phase(d),
                                           parts, flight)
        if in_halves:
            phases[5] = self._input_part_phase(
                m, ld, d, dest, rd_box, ld_phase, flight, "input_half", iquarter, skip_input,
                then=3 if loads_w else Mux(quarter, 6, 5) if quarter_kind else 5)
        if in_quarter_kind:
            phases[7] = self._input_part_phase(
                m, ld, d, dest, rd_box, ld_phase, flight, in_quarter_kind, iquarter, skip_input,
                then=3 if loads_w else first_of(port3[1:], first_phase(d)))
        if quarter_kind:
            phases[6] = self._quarter_phase(m, ld, d, dest, rd_box, ld_phase, flight, parts,
                                            quarter_kind,
                                            then=0 if loads_in else first_phase(d))
        step = k.last_read(dest, split, quarter, iquarter)
        if flight is not None:
            failing = flight.take_statuses(self, params)
        ld_cmd_valid = Signal()
        m.d.comb += self.rd_cmd.valid.eq(ld_cmd_valid)
        with m.FSM(name="loader") as loader_fsm:
            with m.State("IDLE"):
                with m.If(starts):
                    m.d.sync += ld_phase.eq(first_phase(ctl.new_desc))
                    m.next = "NEXT"
            with m.State("NEXT"):
                # Decide the next transfer of the nest; wait until its buffer is free (and,
                # with a queue, until it has room; at the end until every transfer reported).
                if flight is None:
                    with m.If(ctl.failed | ld.done):
                        m.next = "IDLE"
                else:
                    with m.If(ctl.failed | ld.done | failing):
                        with m.If(flight.empty):
                            m.next = "IDLE"
                    with m.Elif(flight.full):
                        pass
                for phase, issue in sorted(phases.items()):
                    with m.Elif(ld_phase == phase):
                        issue()
            with m.State("CMD"):
                m.d.comb += ld_cmd_valid.eq(1)
                with m.If(self.rd_cmd.ready):
                    if flight is None:
                        m.next = "DATA"
                    else:
                        flight.push(dest)
                        with m.If(step):
                            ld.advance()
                        m.next = "NEXT"
            if flight is None:
                with m.State("DATA"):
                    status = self.rd_status.payload
                    m.d.comb += self.rd_status.ready.eq(1)
                    with m.If(self.rd_status.valid):
                        m.d.sync += dest.eq(_DEST_NONE)
                        with m.If(status.code != Status.OK):
                            self._fail(m, status)
                            m.next = "IDLE"
                        with m.Else():
                            if loads_in:
                                with m.If(dest == _DEST_PARAM):
                                    params.loaded(m, None)
                            with m.If(step):
                                ld.advance()
                            m.next = "NEXT"
        m.d.comb += self.idle.eq(loader_fsm.ongoing("IDLE"))
        return m

    def _port3_residual(self, m, ld, dest, route, rd_box, ld_phase, flight, port3):
        """Phase 1 of port 3's loader: per tile its residual box, then each pass's input
        quarter (``FLAG_IQUARTER``) and weight half (``FLAG_WSPLIT``), the first of ``port3``
        (``(condition, phase)`` pairs) that holds; a pass with none of them steps the walk."""
        def without_residual():
            for j, (cond, phase) in enumerate(port3):
                with (m.If if j == 0 else m.Elif)(cond):
                    m.d.sync += ld_phase.eq(phase)
            if port3:
                with m.Else():
                    ld.advance()
            else:
                ld.advance()
        return self._residual_phase(m, ld, dest, route, rd_box, ld_phase, flight,
                                    then=first_of(port3, 1), otherwise=without_residual)

    def _fail(self, m, status):
        """Pulse ``fail`` with a read status."""
        m.d.comb += [self.fail.valid.eq(1), self.fail.code.eq(status.code.as_value()),
                     self.fail.addr.eq(status.addr)]

    def _route(self, m, route, dest, out):
        """The beats on ``rd_data`` go to ``out`` while ``route`` is ``dest``."""
        m.d.comb += out.payload.eq(self.rd_data.payload)
        with m.If(route == dest):
            m.d.comb += [out.valid.eq(self.rd_data.valid), self.rd_data.ready.eq(out.ready)]

    def _weight_phase(self, m, ld, d, dest, rd_box, ld_phase, first_phase, parts, flight):
        """Phase 3: the pass's ``(mt, nt)`` weight tile (with ``FLAG_WSPLIT`` its first half,
        with ``FLAG_WQUARTER`` its first quarter), once its buffer half is free."""
        def issue():
            with m.If(_free(flight, _DEST_W, self.w_o.ready)):
                m.d.sync += [dest.eq(_DEST_W), ld_phase.eq(first_phase),
                             linear_box(rd_box, d.weight_base + ld.w_mt + ld.w_nt,
                                        parts.first_beats)]
                m.next = "CMD"
        return issue

    def _quarter_phase(self, m, ld, d, dest, rd_box, ld_phase, flight, parts, kind, *, then):
        """Phase 6, after the input box of a ``FLAG_WQUARTER`` descriptor on the input loader
        (the second quarter, ``weight_quarter1``) or the only one on port 2's loader (the
        fourth, ``weight_quarter3``): that quarter of the pass's weight tile, once the weight
        buffer takes it; then phase ``then``."""
        second = kind == "weight_quarter1"
        dest_, out = (_DEST_W2, self.w2_o) if second else (_DEST_W3, self.w3_o)
        q = d.weight_tile_bytes >> 2
        offset = q if second else (d.weight_tile_bytes >> 1) + q

        def issue():
            with m.If(_free(flight, dest_, out.ready)):
                m.d.sync += [dest.eq(dest_), ld_phase.eq(then),
                             linear_box(rd_box, d.weight_base + ld.w_mt + ld.w_nt + offset,
                                        parts.quarter_beats)]
                m.next = "CMD"
        return issue

    def _input_part_phase(self, m, ld, d, dest, rd_box, ld_phase, flight, kind, iquarter,
                          skip, *, then):
        """Phase 5 (``kind`` ``input_half``: first of a ``FLAG_ISPLIT`` pass on the weight
        loader, or the only one on port 2's loader) or 7 (``input_quarter1`` on the weight
        loader, ``input_quarter3`` on port 3's): the upper half of the input box's slot
        groups (:func:`~fcircnn.arch.ports.input_halves`; with ``FLAG_IQUARTER`` its third
        quarter, which starts there too) or its second or fourth quarter
        (:func:`~fcircnn.arch.ports.input_quarters`), once the input buffer's stream takes it
        and the walk has settled on the pass; then phase ``then``. A pass that reuses the
        tile's input box (``FLAG_MINNER``) calls ``skip(dest, then)`` instead."""
        G = self.core.in_groups
        half = input_halves(G)[1]
        if kind == "input_half":
            first, dest_, out, box_port, field = half.start, _DEST_IN1, self.in1_o, \
                self.in1_box, "in1_size"
            count = Mux(iquarter, G // 4, len(half)) if self.in_quarters else len(half)
        else:
            part = input_quarters(G)[1 if kind == "input_quarter1" else 3]
            first, count = part.start, len(part)
            dest_, out, box_port, field = ((_DEST_IN2, self.in2_o, self.in2_box, "in2_size")
                                           if kind == "input_quarter1" else
                                           (_DEST_IN3, self.in3_o, self.in3_box, "in3_size"))
        # (the upper half's names as they were before the quarters)
        prefix = "ld1_in" if kind == "input_half" else f"ld_{field}"
        box = Signal(box_layout(self.addr_width),
                     name="box" if kind == "input_half" else f"{prefix}_box")
        span = [Signal(Shape.cast(self.in_box_layout[f].shape).width, name=f"{prefix}_span{f}")
                for f in "dhw"]
        # The part starts ``first`` slot-group strides after the box's first group (a power
        # of two is a shift for Yosys; any other count shifts and adds).
        offset = (d.in_stride[0] * first if first & (first - 1) == 0
                  else mul_const(d.in_stride[0], first))
        ld.input_box(box, span, d.in_base + ld.nt_in + offset, count)
        size = Signal.like(box_port, name="size" if kind == "input_half" else field)
        m.d.comb += box_port.eq(size if flight is None else flight.head[field])
        if flight is not None:
            flight.sources[field] = size

        def issue():
            with m.If(ld.reuses_input):
                skip(dest_, then)
            with m.Elif(_free(flight, dest_, out.ready) & ld.settled):
                m.d.sync += [dest.eq(dest_), rd_box.eq(box), ld_phase.eq(then),
                             size.groups.eq(count), size.d.eq(span[0]),
                             size.h.eq(span[1]), size.w.eq(span[2])]
                m.next = "CMD"
        return issue

    def _half_phase(self, m, ld, d, dest, rd_box, ld_phase, flight, parts, *, then):
        """Phase 4, after the input box of a ``FLAG_WSPLIT`` descriptor (or the only one on
        port 3's loader): the second half of the pass's weight tile (with ``FLAG_WQUARTER`` its
        third quarter, which starts there too), once the weight buffer takes it; then phase
        ``then``."""
        def issue():
            with m.If(_free(flight, _DEST_W1, self.w1_o.ready)):
                m.d.sync += [dest.eq(_DEST_W1), ld_phase.eq(then),
                             linear_box(rd_box, d.weight_base + ld.w_mt + ld.w_nt
                                        + (d.weight_tile_bytes >> 1), parts.half_beats)]
                m.next = "CMD"
        return issue

    def _residual_phase(self, m, ld, dest, route, rd_box, ld_phase, flight, *, then,
                        otherwise):
        """Phase 1: the tile's residual box (``FLAG_RESIDUAL``, first pass of the tile), once
        the residual buffer takes it, then phase ``then``; any other pass: ``otherwise()``
        (statements). Also the routing of its beats and its box size for the buffer (latched
        with the command; with a queue carried with it)."""
        d = self.ctl.desc
        residual = (d.flags & FLAG_RESIDUAL).bool()
        if self.res_box_layout is not None:  # (a core without residual layers reads none)
            res_box = Signal(box_layout(self.addr_width))
            ld.out_box(res_box, d.res_base, write=False)
            res_size = Signal.like(self.res_box)
            walk_res = [res_size.groups.eq(ld.groups_m), res_size.d.eq(ld.ext[0]),
                        res_size.h.eq(ld.ext[1]), res_size.w.eq(ld.ext[2])]
            if flight is None:
                m.d.comb += [*walk_res, self.res_box.eq(res_size)]
            else:
                m.d.comb += self.res_box.eq(flight.head.res_size)
                flight.sources["res_size"] = res_size
            self._route(m, route, _DEST_RES, self.res_o)

        def issue():
            with m.If(residual & (ld.nt == 0)):
                if self.res_box_layout is not None:
                    with m.If(_free(flight, _DEST_RES, self.res_o.ready)):
                        m.d.sync += [dest.eq(_DEST_RES), rd_box.eq(res_box), ld_phase.eq(then)]
                        if flight is not None:
                            m.d.sync += walk_res
                        m.next = "CMD"
            with m.Else():
                otherwise()
        return issue

    def _input_side(self, m, ld, dest, route, rd_box, ld_phase, flight, *, after_input,
                    skip):
        """The post records, residual and input boxes: their boxes, the routing of their
        beats and the post-parameter writes (a pass reusing its tile's input box,
        ``FLAG_MINNER``, calls ``skip(dest, after_input)`` instead of reading it). Returns the
        issue logic of phases 0-2 (by phase) and the post records' :class:`_Params`."""
        core, aw = self.core, self.addr_width
        Tm = core.tm
        d = self.ctl.desc
        in_box = Signal(box_layout(aw))
        in_span = [Signal(Shape.cast(self.in_box_layout[f].shape).width, name=f"ld_in_span{f}")
                   for f in "dhw"]
        # Only the input slot groups the layer has (a PE input without a loaded group reads
        # whatever its bank holds, times the zero weights of the absent channels).
        in_groups = ld.groups_n if core.tn > 16 else 1
        if self.geometry.spread:  # FLAG_SPREAD: the n-tile's compact group
            in_groups = Mux(d.flags & FLAG_SPREAD, 1, in_groups)
        if "weights" not in self.reads and PortMap(2).splits_inputs(core.in_groups):
            # The input loader of a core whose boxes split: a split box's lower half, the
            # first G/2 groups (the walk's groups_n is G then, arch.walk.splits_inputs).
            in_groups = Mux(d.flags & FLAG_ISPLIT, len(input_halves(core.in_groups)[0]),
                            in_groups)
            if self.in_quarters:
                # (its first quarter, the first G/4 groups, with FLAG_IQUARTER)
                in_groups = Mux(d.flags & FLAG_IQUARTER, core.in_groups // 4, in_groups)
        ld.input_box(in_box, in_span, d.in_base + ld.nt_in, in_groups)
        # The buffers' boxes: latched with the command, constant while its beats arrive (with a
        # queue: carried with the command to its beats).
        in_size = Signal.like(self.in_box)
        m.d.comb += [self.in_stride_d.eq(d.stride[0]),
                     self.in_box.eq(in_size if flight is None else flight.head.in_size)]
        if flight is not None:
            flight.sources.update(half=ld.mt[0], in_size=in_size)
        self._route(m, route, _DEST_IN, self.in_o)
        params = _Params(m, self, ld, route, flight)

        def post_records():
            # Post records of m-tile ld.mt, once the drain no longer needs that half.
            with m.If((ld.t[0] == 0) & (ld.t[1] == 0) & (ld.t[2] == 0) & (ld.nt == 0)):
                with m.If(_free(flight, _DEST_PARAM, ld.mt <= self.drain_mt + 1)):
                    m.d.sync += [dest.eq(_DEST_PARAM), ld_phase.eq(1),
                                 linear_box(rd_box, d.post_base + ld.mt_post, Tm),
                                 params.issue()]
                    m.next = "CMD"
            with m.Else():
                m.d.sync += ld_phase.eq(1)

        def no_residual():
            m.d.sync += ld_phase.eq(2)

        residual_box = (self._residual_phase(m, ld, dest, route, rd_box, ld_phase, flight,
                                             then=2, otherwise=no_residual)
                        if "residual" in self.reads else no_residual)

        def input_box():
            # (in_box: two cycles after the loader's step, by the time it gets here)
            with m.If(ld.reuses_input):
                skip(_DEST_IN, after_input)
            with m.Elif(_free(flight, _DEST_IN, self.in_o.ready) & ld.settled):
                m.d.sync += [dest.eq(_DEST_IN), rd_box.eq(in_box), ld_phase.eq(after_input),
                             in_size.groups.eq(in_groups), in_size.d.eq(in_span[0]),
                             in_size.h.eq(in_span[1]), in_size.w.eq(in_span[2])]
                m.next = "CMD"

        return {0: post_records, 1: residual_box, 2: input_box}, params


class _Kinds:
    """What a loader's read kinds make of it: which sides it has, where each pass starts and
    which read ends it."""

    def __init__(self, loader):
        reads = loader.reads
        self.loads_in, self.loads_w = "input" in reads, "weights" in reads
        self.in_halves, self.halves = "input_half" in reads, "weight_half" in reads
        self.quarter_kind = next((k for k in ("weight_quarter1", "weight_quarter3")
                                  if k in reads), None)
        self.in_quarter_kind = next((k for k in ("input_quarter1", "input_quarter3")
                                     if k in reads), None)
        # Port 3's loader of a four-port core with residual layers: the residual boxes (and
        # the second weight halves, if the core splits weight tiles; the constructor has
        # checked that the core has a residual buffer).
        self.res_side = "residual" in reads and not self.loads_in

    def starts(self, ctl):
        """The cycle the loader starts a layer: a conv descriptor's start; a loader of one
        half (or quarter) only on descriptors that split it (or that have residuals, port 3's
        loader)."""
        starts = ctl.start & (ctl.new_desc.op != OP_POOL)
        if self.loads_in or self.loads_w:
            return starts
        flag = ((FLAG_ISPLIT if self.in_halves else 0)
                | (FLAG_WQUARTER if self.quarter_kind else 0)
                | (FLAG_WSPLIT if self.halves else 0) | (FLAG_RESIDUAL if self.res_side else 0)
                | (FLAG_IQUARTER if self.in_quarter_kind else 0))
        return starts & (ctl.new_desc.flags & flag).bool()

    def first_phase(self, desc):
        """The phase each pass of ``desc`` starts at: a loader without inputs at its weights
        (or the input's upper half), port 3's loader with residuals at the residual box; a
        loader of one half at it."""
        iquarter = (desc.flags & FLAG_IQUARTER).bool()
        if self.loads_in:
            return 0
        if self.res_side:
            other = Mux(iquarter, 7, 4) if self.in_quarter_kind else 4
            return Mux(desc.flags & FLAG_RESIDUAL, 1, other)
        if self.loads_w and self.in_quarter_kind:
            return Mux(iquarter, 7, 3)
        if self.loads_w:
            return Mux(desc.flags & FLAG_ISPLIT, 5, 3) if self.in_halves else 3
        if self.quarter_kind and self.in_halves:
            return Mux(desc.flags & FLAG_ISPLIT, 5, 6)
        if self.in_quarter_kind:
            return Mux(iquarter, 7, 4) if self.halves else 7
        return 6 if self.quarter_kind else 5 if self.in_halves else 4

    def last_read(self, dest, split, quarter, iquarter):
        """Whether ``dest`` is the pass's last read, whose handshake (or status) steps the
        walk: its weight tile (or first half), its input box, or with ``FLAG_WSPLIT`` the
        second half (``FLAG_WQUARTER`` the second quarter) after the input box; a loader of
        one half (or quarter), that half (or quarter); port 3's loader its weight half, else
        its input quarter, else the residual box (a pass with none steps in its phase 1)."""
        if self.loads_w:
            return dest == _DEST_W
        if self.loads_in and self.halves:
            return Mux(split, dest == _DEST_W1, dest == _DEST_IN)
        if self.loads_in and self.quarter_kind:
            return Mux(quarter, dest == _DEST_W2, dest == _DEST_IN)
        if self.loads_in:
            return dest == _DEST_IN
        if self.quarter_kind and self.in_halves:
            return Mux(quarter, dest == _DEST_W3, dest == _DEST_IN1)
        if self.quarter_kind:
            return dest == _DEST_W3
        if self.res_side or self.in_quarter_kind:  # port 3's loader (the weight loader above)
            last = dest == _DEST_RES
            if self.in_quarter_kind:
                last = Mux(iquarter, dest == _DEST_IN3, last) if self.res_side else (
                    dest == _DEST_IN3)
            return Mux(split, dest == _DEST_W1, last) if self.halves else last
        return dest == (_DEST_IN1 if self.in_halves else _DEST_W1)


class _WeightParts:
    """The beats of a descriptor's weight reads: the whole tile, a half (``FLAG_WSPLIT``) or
    a quarter (``FLAG_WQUARTER``; ``quarter`` is 0 on an engine without quarters)."""

    def __init__(self, d, split, quarter):
        tile = d.weight_tile_bytes
        self.quarter_beats = tile >> 6
        self.half_beats = Mux(quarter, tile >> 6, tile >> 5)
        self.first_beats = Mux(quarter, tile >> 6, Mux(split, tile >> 5, tile >> 4))


def _free(flight, dest, ready):
    """Whether a transfer to ``dest`` may be issued: its buffer's ``ready``, and with a queue
    no transfer to ``dest`` in flight (so ``ready`` is the buffer's state, not the earlier
    transfer's beats being taken)."""
    return ready if flight is None else ready & flight.none_to(dest)


class _Params:
    """The post records' side of the input loader: ``params_ready`` per m-tile parity, and the
    parameter memory written from the beats routed to it (16 beats a group word; word =
    parity * G + group). The parity is the walk's m-tile with one transfer at a time, else the
    one carried by the transfer in flight."""

    def __init__(self, m, loader, ld, route, flight):
        G = loader.core.out_groups
        self.m, self.flight = m, flight
        self.ready = Signal(2)  # per half: the records of that half's m-tile are loaded
        m.d.comb += loader.params_ready.eq(self.ready)
        with m.If(loader.ctl.start):
            m.d.sync += self.ready.eq(0)
        self.walk_half = ld.mt[0]
        half = self.walk_half if flight is None else flight.head.half
        beats_per_word = SLOTS_PER_BEAT * POST_RECORD_BITS // _BEAT_BITS
        self.p_beat = p_beat = Signal(range(beats_per_word))
        self.p_group = p_group = Signal(range(G + 1))
        beat, p_wr = loader.rd_data.payload, loader.params
        with m.If((route == _DEST_PARAM) & loader.rd_data.valid):
            m.d.comb += [p_wr.addr.eq(half * G + p_group), p_wr.data.eq(
                beat.data.replicate(beats_per_word)), p_wr.en.eq(1 << p_beat)]
            with m.If(p_beat == beats_per_word - 1):
                m.d.sync += [p_beat.eq(0), p_group.eq(p_group + 1)]
            with m.Else():
                m.d.sync += p_beat.eq(p_beat + 1)

    def issue(self):
        """Statements of issuing the walk's m-tile's records: its half is not ready (and with
        one transfer at a time the word counters start over)."""
        stmts = [self.ready.bit_select(self.walk_half, 1).eq(0)]
        if self.flight is None:
            stmts += [self.p_group.eq(0), self.p_beat.eq(0)]
        return stmts

    def loaded(self, m, half):
        """Statements of a records transfer's OK status (``half``: its parity, ``None``: the
        walk's); with a queue the word counters start over for the next one."""
        half = self.walk_half if half is None else half
        m.d.sync += self.ready.bit_select(half, 1).eq(1)
        if self.flight is not None:
            m.d.sync += [self.p_group.eq(0), self.p_beat.eq(0)]


class _InFlight:
    """The transfers in flight of a loader with a command queue, in command order: their
    destination, m-tile parity and buffer box sizes, pushed at the command's handshake (from
    ``sources``, the staging signals the phases latch) into two FIFOs: one popped with each
    transfer's last beat, whose head routes the beats and drives the buffers' boxes (the next
    transfer's beats may follow at once), one popped with its status."""

    def __init__(self, m, loader):
        fields = {"dest": range(_DESTS), "half": 1}
        if "input" in loader.reads:
            fields["in_size"] = loader.in_box_layout
        if "residual" in loader.reads and loader.res_box_layout is not None:
            fields["res_size"] = loader.res_box_layout
        for kind, name in (("input_half", "in1_size"), ("input_quarter1", "in2_size"),
                           ("input_quarter3", "in3_size")):
            if kind in loader.reads:
                fields[name] = loader.in_box_layout
        self.layout = data.StructLayout(fields)
        self.m = m
        depth = loader.commands
        m.submodules.inflight = self.q = fifo.SyncFIFO(width=self.layout.size, depth=depth)
        m.submodules.beats = self.r = fifo.SyncFIFO(width=self.layout.size, depth=depth)
        self.status_head = data.View(self.layout, self.q.r_data)
        self.head = data.View(self.layout, self.r.r_data)
        self.sources = {}
        self.route = Mux(self.r.r_rdy, self.head.dest, _DEST_NONE)
        beat = loader.rd_data
        m.d.comb += self.r.r_en.eq(beat.valid & beat.ready & beat.payload.last)
        self.empty, self.full = ~self.q.r_rdy, ~self.q.w_rdy
        # Per destination, whether a transfer to it is in flight (counted at push and status).
        self.count = [Signal(range(depth + 1), name=f"inflight_to{k}") for k in range(_DESTS)]
        self._pushed = Signal(range(_DESTS))
        self._push = Signal()
        pop = self.q.r_en
        for k, count in enumerate(self.count):
            inc, dec = self._push & (self._pushed == k), pop & (self.status_head.dest == k)
            with m.If(inc & ~dec):
                m.d.sync += count.eq(count + 1)
            with m.Elif(dec & ~inc):
                m.d.sync += count.eq(count - 1)

    def none_to(self, dest):
        """No transfer to ``dest`` in flight."""
        return self.count[dest] == 0

    def push(self, dest):
        """Statements of a command's handshake: its entry in."""
        entry = data.View(self.layout, self.q.w_data)
        self.m.d.comb += [self.q.w_en.eq(1), self.r.w_en.eq(1), self.r.w_data.eq(self.q.w_data),
                          entry.dest.eq(dest), self._push.eq(1), self._pushed.eq(dest)]
        for name, value in self.sources.items():
            self.m.d.comb += entry[name].eq(value)

    def take_statuses(self, loader, params):
        """Take every status, oldest transfer first: pop its entry; the first failure pulses
        ``fail`` and stops the walk (later statuses are taken and dropped); an OK status of
        post records marks its half loaded. Returns the ``failing`` register."""
        m, status = self.m, loader.rd_status.payload
        failing = Signal()
        with m.If(loader.ctl.start):
            m.d.sync += failing.eq(0)
        m.d.comb += loader.rd_status.ready.eq(self.q.r_rdy)
        with m.If(loader.rd_status.valid & self.q.r_rdy):
            m.d.comb += self.q.r_en.eq(1)
            with m.If(status.code != Status.OK):
                with m.If(~failing):
                    loader._fail(m, status)
                m.d.sync += failing.eq(1)
            with m.Elif(self.status_head.dest == _DEST_PARAM):
                if params is not None:
                    params.loaded(m, self.status_head.half)
        return failing


#: Where the beats of the transfer in flight go.
(_DEST_NONE, _DEST_PARAM, _DEST_RES, _DEST_IN, _DEST_W, _DEST_W1, _DEST_IN1, _DEST_W2,
 _DEST_W3, _DEST_IN2, _DEST_IN3) = range(11)
_DESTS = 11
#: The descriptor stream each destination's reads belong to (their region,
#: :func:`~fcircnn.arch.descriptor.region_code`).
_DEST_STREAM = {_DEST_PARAM: "post", _DEST_RES: "res", _DEST_IN: "in", _DEST_IN1: "in",
                _DEST_IN2: "in", _DEST_IN3: "in", _DEST_W: "weight", _DEST_W1: "weight",
                _DEST_W2: "weight", _DEST_W3: "weight"}

#: The split read kinds' sinks: the loader's stream and the destination of their beats.
_PART_SINKS = {"weight_half": ("w1_o", _DEST_W1), "weights": ("w_o", _DEST_W),
               "input_half": ("in1_o", _DEST_IN1), "weight_quarter1": ("w2_o", _DEST_W2),
               "weight_quarter3": ("w3_o", _DEST_W3), "input_quarter1": ("in2_o", _DEST_IN2),
               "input_quarter3": ("in3_o", _DEST_IN3)}

#: The read kinds of the second and fourth quarters of a ``FLAG_WQUARTER`` weight tile.
_QUARTER_KINDS = frozenset({"weight_quarter1", "weight_quarter3"})
