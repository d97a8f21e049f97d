"""Layer engine of one core: runs one layer descriptor through DMA, buffers, PE array and
post-units, with loads, compute, post-processing and stores overlapped."""

from __future__ import annotations

from amaranth.hdl import Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, fifo, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from fcircnn.arch.descriptor import (
    FLAG_CRELU,
    FLAG_POOL,
    FLAG_RESIDUAL,
    OP_POOL,
    descriptor_layout,
)
from fcircnn.arch.geometry import (
    CoreGeometry,
    EngineGeometry,
    box_span,
    core_lanes,
    engine_geometry,
)
from fcircnn.arch.registers import ERROR_CODES
from fcircnn.models.layout import SLOTS_PER_BEAT

from .axi_dma_box import Status, box_layout, status_layout
from .axi_dma_read import read_beat_layout
from .axi_dma_write import write_beat_layout
from .buffer_input import InputBuffer
from .buffer_output import OutputBuffer
from .buffer_psum import PartialSumBuffer
from .buffer_weight import WeightBuffer
from .common import check_block_size, check_positive, mul_small, rejecting
from .pe_array import PEArray
from .post_chain import PostChain

__all__ = ["ERROR_CODES", "LayerEngine"]


#: Post-record bytes (see :mod:`fcircnn.gen.compiler`).
_RECORD_BITS = 256


class _Walk:
    """Counters of the layer's tile loop nest ``mt > (td, th, tw) > nt`` and the geometry of
    the current tile, kept in registers next to the counters.

    One instance per walker (loader, compute, drain, store), each advancing on its own. The tile
    geometry (extents, last-iteration flags, slot groups of the m-tile) is computed with the
    counters' next values in :meth:`reset` and :meth:`advance`, so it is valid whenever the
    counters are and its consumers start from registers (timing: see the engine docstring).
    """

    def __init__(self, m: Module, name: str, desc, eng: LayerEngine, *, with_nt: bool):
        self.m, self.desc, self.eng, self.with_nt, self.name = m, desc, eng, with_nt, name
        S = lambda shape, n: Signal(shape, name=f"{name}_{n}")  # noqa: E731
        self.mt = S(16, "mt")
        self.t = [S(16, f"t{a}") for a in "dhw"]
        self.nt = S(16, "nt")
        self.conv_lo = [S(16, f"conv_lo{a}") for a in "dhw"]
        self.in_acc = [S(32, f"in_acc{a}") for a in "dhw"]
        self.out_acc = [S(32, f"out_acc{a}") for a in "dhw"]
        self.mt_out = S(32, "mt_out")
        self.mt_post = S(32, "mt_post")
        self.mt_slots = S(signed(18), "mt_slots")  # output slots from this m-tile on
        self.w_mt = S(32, "w_mt")
        self.w_nt = S(32, "w_nt")
        self.nt_in = S(32, "nt_in")
        self.nt_sub = S(range(max(2, eng.subs)), "nt_sub")
        self.done = S(1, "done")
        # Tile geometry: rest = conv_shape - conv_lo, ext = min(rest, tile) (the tile's extent,
        # clipped at the map's edge), the last-iteration flags of each loop, and the m-tile's
        # slot groups and slots in its last group.
        self.rest = [S(16, f"rest{a}") for a in "dhw"]
        self.ext = [S(16, f"ext{a}") for a in "dhw"]
        self.last_t = [S(1, f"last_t{a}") for a in "dhw"]
        self.last_nt = S(1, "last_nt")
        self.last_mt = S(1, "last_mt")
        self.groups_m = S(range(eng.G + 1), "groups_m")
        self.last_lanes = S(range(SLOTS_PER_BEAT + 1), "last_lanes")
        # Input slot groups of the n-tile (the layer's, not the tile's Tn/16: a layer with
        # fewer input channels than Tn loads only those) and the groups from it on.
        self.G_in = eng.core.in_groups
        self.groups_n = S(range(self.G_in + 1), "groups_n")
        self.n_rest = S(16, "n_rest")
        self.last_tile = self.last_t[0] & self.last_t[1] & self.last_t[2]
        # Cycles until registers computed from the counters (input_box) are valid again.
        self.settle = S(range(3), "settle")
        self.settled = self.settle == 0
        with m.If(~self.settled):
            m.d.sync += self.settle.eq(self.settle - 1)

    def _m_tile(self, slots):
        """Statements setting ``groups_m``/``last_lanes`` for an m-tile with ``slots`` output
        slots from it on (``Tm/2`` a multiple of 8: the last group is full unless it is the
        layer's last)."""
        half = self.eng.Tm // 2
        part = slots < half
        return [self.groups_m.eq(Mux(part, (slots + 7) >> 3, self.eng.G)),
                self.last_lanes.eq(Mux(part, (slots - 1)[:3] + 1, SLOTS_PER_BEAT))]

    def _n_tile(self, rest):
        """Statements setting ``n_rest``/``groups_n`` for an n-tile with ``rest`` input slot
        groups from it on."""
        return [self.n_rest.eq(rest),
                self.groups_n.eq(Mux(rest < self.G_in, rest, self.G_in))]

    def reset(self, desc):
        """Restart at the first iteration of the layer ``desc`` (being latched)."""
        d, m = desc, self.m
        stmts = [self.mt.eq(0), self.nt.eq(0), self.nt_in.eq(0), self.nt_sub.eq(0),
                 self.mt_out.eq(0), self.mt_post.eq(0), self.mt_slots.eq(d.out_slots),
                 self.w_mt.eq(0), self.w_nt.eq(0), self.done.eq(0),
                 self.last_nt.eq(d.n_tiles <= 1), self.last_mt.eq(d.m_tiles <= 1),
                 self.settle.eq(2), *self._m_tile(d.out_slots),
                 *self._n_tile((d.in_slots + 7) >> 3)]
        for a in range(3):
            stmts += [self.t[a].eq(0), self.conv_lo[a].eq(0), self.in_acc[a].eq(0),
                      self.out_acc[a].eq(0), *self._first_tile(d, a)]
        m.d.sync += stmts

    def _first_tile(self, d, a):
        shape, tile = d.conv_shape[a], d.tile[a]
        return [self.rest[a].eq(shape), self.ext[a].eq(Mux(shape < tile, shape, tile)),
                self.last_t[a].eq(shape <= tile)]

    def advance(self):
        """Step to the next iteration (``done`` after the last)."""
        m, d, eng = self.m, self.desc, self.eng
        m.d.sync += self.settle.eq(2)

        def tiles_step(a=2):
            # w fastest, then h, then d; then the next m-tile.
            with m.If(~self.last_t[a]):
                rest, tile = self.rest[a], d.tile[a]
                m.d.sync += [self.t[a].eq(self.t[a] + 1),
                             self.conv_lo[a].eq(self.conv_lo[a] + tile),
                             self.in_acc[a].eq(self.in_acc[a] + d.in_step[a]),
                             self.out_acc[a].eq(self.out_acc[a] + d.out_step[a]),
                             self.rest[a].eq(rest - tile),
                             self.ext[a].eq(Mux(rest < (tile << 1), rest - tile, tile)),
                             self.last_t[a].eq(rest <= (tile << 1))]
            with m.Else():
                m.d.sync += [self.t[a].eq(0), self.conv_lo[a].eq(0), self.in_acc[a].eq(0),
                             self.out_acc[a].eq(0), *self._first_tile(d, a)]
                if a:
                    tiles_step(a - 1)
                else:
                    with m.If(self.last_mt):
                        m.d.sync += self.done.eq(1)
                    with m.Else():
                        next_slots = self.mt_slots - eng.Tm // 2
                        m.d.sync += [self.mt.eq(self.mt + 1),
                                     self.last_mt.eq(self.mt + 2 == d.m_tiles),
                                     self.mt_out.eq(self.mt_out + d.out_mt_step),
                                     self.mt_post.eq(self.mt_post + eng.Tm * 16),
                                     self.mt_slots.eq(next_slots), *self._m_tile(next_slots)]

        if not self.with_nt:
            tiles_step()
            return
        with m.If(~self.last_nt):
            m.d.sync += [self.nt.eq(self.nt + 1), self.last_nt.eq(self.nt + 2 == d.n_tiles),
                         self.w_nt.eq(self.w_nt + d.weight_tile_bytes),
                         *self._n_tile(self.n_rest - self.G_in)]
            if eng.subs > 1:
                with m.If(self.nt_sub == eng.subs - 1):
                    m.d.sync += [self.nt_sub.eq(0), self.nt_in.eq(self.nt_in + d.in_nt_step)]
                with m.Else():
                    m.d.sync += self.nt_sub.eq(self.nt_sub + 1)
            else:
                m.d.sync += self.nt_in.eq(self.nt_in + d.in_nt_step)
        with m.Else():
            m.d.sync += [self.nt.eq(0), self.nt_sub.eq(0), self.nt_in.eq(0), self.w_nt.eq(0),
                         self.last_nt.eq(d.n_tiles <= 1), *self._n_tile((d.in_slots + 7) >> 3)]
            with m.If(self.last_tile):
                m.d.sync += self.w_mt.eq(self.w_mt + self.w_nt + d.weight_tile_bytes)
            tiles_step()

    def input_box(self, box, span, base, groups):
        """Register this tile's input box (padding included) in ``box`` (a box_layout signal)
        and its extents ``pre + len + post`` per axis in ``span`` (three signals).

        Two register stages: ``span`` is valid one cycle after the counters, ``box`` two, i.e.
        both once :attr:`settled` (the loader waits for it).
        """
        m, d, eng = self.m, self.desc, self.eng
        n = self.name
        base_q = Signal(32, name=f"{n}_in_base")
        terms = []
        m.d.sync += base_q.eq(base)
        for a, axis in enumerate("dhw"):
            s, s_max = d.stride[a], eng.geometry.stride[a]
            # Stage 1: first input voxel (may be negative: padding) and the address term.
            lo = mul_small(self.conv_lo[a], s, s_max)
            start = Signal(signed(20), name=f"{n}_in_start{axis}")
            term = Signal(32, name=f"{n}_in_term{axis}")
            m.d.sync += [start.eq(lo - d.padding[a]),
                         span[a].eq(mul_small(self.ext[a] - 1, s, s_max) + d.kernel[a]),
                         term.eq(Mux(lo > d.padding[a], self.in_acc[a] - d.in_pad_bytes[a], 0))]
            terms.append(term)
            # Stage 2: the padding before and after, and the voxels inside the map.
            end = start + span[a]
            before, after = start < 0, end > d.in_shape[a]
            m.d.sync += [box[f"{axis}_pre"].eq(Mux(before, -start, 0)),
                         box[f"{axis}_post"].eq(Mux(after, end - d.in_shape[a], 0)),
                         box[f"{axis}_len"].eq(Mux(after, d.in_shape[a], end)
                                               - Mux(before, 0, start))]
        m.d.sync += [box.addr.eq(base_q + terms[0] + terms[1] + terms[2]),
                     box.stride_g.eq(d.in_stride[0]), box.stride_d.eq(d.in_stride[1]),
                     box.stride_h.eq(d.in_stride[2]), box.groups.eq(groups),
                     box.last_lanes.eq(SLOTS_PER_BEAT)]

    def out_box(self, box, base, *, write: bool, halved=None):
        """Drive ``box`` with this tile's output (or residual) box: ``groups_m`` groups;
        ``halved`` (three 1-bit values): axes whose extent a fused 2-wide pool halves."""
        d = self.desc
        offset = self.mt_out + self.out_acc[0] + self.out_acc[1] + self.out_acc[2]
        stmts = [box.addr.eq(base + offset), box.stride_g.eq(d.out_stride[0]),
                 box.stride_d.eq(d.out_stride[1]), box.stride_h.eq(d.out_stride[2]),
                 box.groups.eq(self.groups_m),
                 box.last_lanes.eq(self.last_lanes if write else SLOTS_PER_BEAT)]
        for a, axis in enumerate("dhw"):
            ext = self.ext[a] if halved is None else Mux(halved[a], self.ext[a] >> 1,
                                                         self.ext[a])
            stmts += [box[f"{axis}_pre"].eq(0), box[f"{axis}_post"].eq(0),
                      box[f"{axis}_len"].eq(ext)]
        self.m.d.comb += stmts


class LayerEngine(wiring.Component):
    """Runs one layer descriptor on one core: conv/fc/gap layers through the PE array, pool
    passes through the post-units.

    Conv layers (``op`` conv or gap) walk the tile loop nest ``mt`` (output-channel tiles) >
    ``(td, th, tw)`` (output tiles of the descriptor's ``tile`` size, clipped at the map's
    edge) > ``nt`` (input-channel tiles) with four decoupled walkers:

    * **loader**: per m-tile the post records into a double-buffered parameter memory; per
      tile the residual box (``FLAG_RESIDUAL``); per ``(tile, nt)`` the input box (conv
      padding as DMA zero padding) into :class:`~fcircnn.hw.buffer_input.InputBuffer` and the
      ``(mt, nt)`` weight tile into :class:`~fcircnn.hw.buffer_weight.WeightBuffer`; it runs
      ahead as far as the ping-pong buffers allow, so loads overlap compute;
    * **compute**: per ``(tile, nt)`` one beat per output voxel and kernel tap into
      :class:`~fcircnn.hw.pe_array.PEArray`: with ``lanes = Td`` (the core unrolls ``td``)
      the tile's ``Td`` output depths in parallel, one beat per ``(r, c, tap)``; with
      ``lanes = 1`` one depth at a time, one beat per ``(d, r, c, tap)``; the sums of
      every voxel go to :class:`~fcircnn.hw.buffer_psum.PartialSumBuffer`, which adds the
      ``n_tiles`` passes;
    * **drain**: per finished tile, ``lanes = 8`` slots a beat with their post parameters and
      residual slots into :class:`~fcircnn.hw.post_chain.PostChain` (CBN + residual,
      quantize, CReLU), into :class:`~fcircnn.hw.buffer_output.OutputBuffer`, in raster order
      (depth, row, column, slot group fastest). With ``FLAG_POOL`` on a conv descriptor (a
      fused pool, :func:`pool_fuses`) CMaxPool pools each tile as its own map (its slot
      groups interleaved) and only the pooled voxels reach the output buffer; the drain starts
      a tile once the previous one has left CMaxPool (its configuration follows the tile).
      Otherwise the pool is bypassed;
    * **store**: per finished output tile, one DMA write box (NC/8DHW8, the pooled tile with
      a fused pool), overlapping the next tile's work.

    Timing: no walker derives its tile's geometry combinationally from the descriptor; each
    keeps it in registers beside its counters (:class:`_Walk`), and the loader computes the
    input box in two more register stages, which its phases before the input command already
    take. The longest register-to-register path is within 8 LUT levels (Yosys, flattened;
    ``bench/README.md``).

    A pool pass (``op`` :data:`~fcircnn.arch.descriptor.OP_POOL`) streams the input map slot
    group by slot group from the read DMA through the post chain (CBN bypassed, shift 0,
    CMaxPool on) to the write DMA.

    Contract
    --------
    * ``start`` (one cycle, engine idle) latches ``desc``; ``done`` pulses once the layer's
      last store has completed. Each layer output equals the golden integer contract
      (:func:`fcircnn.models.network.run_int`) for the compiler's descriptors.
    * A DMA status other than OK stops the engine from issuing further transfers; once every
      transfer in flight has completed, ``error`` pulses with ``error_code`` (:data:`ERROR_CODES`)
      and ``error_addr``. The engine must then be reset before the next ``start`` (the top
      level does).
    * ``pe_busy``: the PE array takes a beat this cycle; ``dma_stall``: the compute walker
      waits for a load.

    Parameters
    ----------
    Tn, Tm, Td, Tr, Tc : int
        The core's tiles (``Tm`` a multiple of 16, ``Tn`` a multiple of ``B``).
    lanes : int
        Output depths the PE array computes in parallel: ``Td`` (default; the ``td`` loop
        unrolled) or 1 (``td`` not unrolled: the compute walker steps through the tile's
        depth, with a PE array ``Td`` times smaller).
    B : int
        Block size.
    geometry : EngineGeometry
        Buffer sizes (:func:`engine_geometry`).
    addr_width : int
        AXI address width.
    """

    def __init__(self, Tn: int, Tm: int, Td: int, Tr: int, Tc: int, *, B: int = 8,
                 geometry: EngineGeometry, addr_width: int = 40, lanes: int | None = None):
        with rejecting(self):
            for name, value in (("Tn", Tn), ("Tm", Tm), ("Td", Td), ("Tr", Tr), ("Tc", Tc)):
                check_positive(name, value, 1024)
            check_block_size(B)
            lanes = Td if lanes is None else lanes
            #: The core's geometry: the channel-tile rule, slot groups, lanes (validated).
            self.core = CoreGeometry(Tn, Tm, Td, Tr, Tc, B, lanes)
        self.Tn, self.Tm, self.Td, self.Tr, self.Tc, self.B = Tn, Tm, Td, Tr, Tc, B
        self.lanes = lanes
        self.geometry = geometry
        self.addr_width = addr_width
        self.G = self.core.out_groups
        self.subs = self.core.subs
        super().__init__({
            "desc": In(descriptor_layout()),
            "start": In(1),
            "done": Out(1),
            "error": Out(1),
            "error_code": Out(8),
            "error_addr": Out(addr_width),
            "busy": Out(1),
            "rd_cmd": Out(stream.Signature(box_layout(addr_width))),
            "rd_data": In(stream.Signature(read_beat_layout())),
            "rd_status": In(stream.Signature(status_layout(addr_width))),
            "wr_cmd": Out(stream.Signature(box_layout(addr_width))),
            "wr_data": Out(stream.Signature(write_beat_layout())),
            "wr_status": In(stream.Signature(status_layout(addr_width))),
            "pe_busy": Out(1),
            "dma_stall": Out(1),
        })

    @classmethod
    def from_config(cls, accelerator, core, geometry: EngineGeometry | None = None
                    ) -> LayerEngine:
        """The engine of ``core`` of an :class:`~fcircnn.models.config.AcceleratorConfig`,
        with buffers for ``geometry`` (default: :func:`engine_geometry` of the accelerator's
        network) and ``Td`` PE lanes if the core unrolls ``td`` (else one)."""
        if geometry is None:
            geometry = engine_geometry(accelerator, core)
        return cls(core.tn, core.tm, core.td, core.tr, core.tc, B=accelerator.block_size,
                   geometry=geometry, addr_width=accelerator.address_width,
                   lanes=core_lanes(core))

    def elaborate(self, platform):
        m = Module()
        geo, aw = self.geometry, self.addr_width
        Tn, Tm, Td, Tr, Tc, B, G = self.Tn, self.Tm, self.Td, self.Tr, self.Tc, self.B, self.G

        L = self.lanes
        if L == Td:
            inbuf = InputBuffer(Tn, Td, Tr, Tc, B=B, kernel=geo.kernel, stride=geo.stride)
        else:
            # One lane reads every output depth: it holds all (Td-1)*sd + Kd planes of the tile,
            # output depth v reading planes v*sd + kd.
            inbuf = InputBuffer(Tn, 1, Tr, Tc, B=B, stride=geo.stride, kernel=(
                box_span(Td, geo.stride[0], geo.kernel[0]), geo.kernel[1], geo.kernel[2]))
        m.submodules.inbuf = inbuf
        m.submodules.wbuf = wbuf = WeightBuffer(Tn, Tm, B=B, taps=geo.taps)
        m.submodules.pe = pe = PEArray(Tn, Tm, B, L)
        # Partial sums: with one lane, output depth v of the tile at addresses v*Tr*Tc + ...
        m.submodules.psum = psum = PartialSumBuffer(Tm, L, Tr * Td // L, Tc)
        # CMaxPool: maps of pool passes, and with a fused pool the output tile, its G slot
        # groups interleaved.
        pool_size = geo.pool_size
        if geo.fused_pool:
            pool_size = tuple(max(a, b) for a, b in zip(pool_size, (Td, Tr, Tc), strict=True))
        m.submodules.post = post = PostChain(lanes=SLOTS_PER_BEAT, max_size=pool_size,
                                             max_groups=G if geo.fused_pool else 1)
        m.submodules.outbuf = outbuf = OutputBuffer(Tm, Td, Tr, Tc)
        resbuf = None
        if geo.residual:
            m.submodules.resbuf = resbuf = InputBuffer(Tm, Td, Tr, Tc, B=B, kernel=1, stride=1)

        d = Signal(descriptor_layout())
        residual = (d.flags & FLAG_RESIDUAL).bool()
        # Fused pool: per axis, whether its 2-wide window halves the tile.
        fused = Signal()
        halved = [Signal(name=f"halved{a}") for a in "dhw"]
        if geo.fused_pool:
            m.d.comb += fused.eq((d.op != OP_POOL) & (d.flags & FLAG_POOL).bool())
            m.d.comb += [halved[a].eq(fused & (d.pool_window[a] == 2)) for a in range(3)]
        running = Signal()
        failed = Signal()
        m.d.comb += self.busy.eq(running)

        # ---------------------------------------------------------------- errors
        err_code = Signal(8)
        err_addr = Signal(aw)

        def fail(code, addr):
            with m.If(~failed):
                m.d.sync += [failed.eq(1), err_code.eq(code), err_addr.eq(addr)]

        # ---------------------------------------------------------------- walkers
        ld = _Walk(m, "ld", d, self, with_nt=True)
        cp = _Walk(m, "cp", d, self, with_nt=True)
        dr = _Walk(m, "dr", d, self, with_nt=False)
        st = _Walk(m, "st", d, self, with_nt=False)

        # ---------------------------------------------------------------- parameter memory
        # Two halves (m-tile parity) of G words; a word is the 8 post records of one group.
        group_bits = SLOTS_PER_BEAT * _RECORD_BITS
        beats_per_word = group_bits // 128
        pmem = memory.Memory(shape=unsigned(group_bits), depth=2 * G, init=[])
        m.submodules.pmem = pmem
        p_wr = pmem.write_port(granularity=128)
        p_rd = pmem.read_port()
        params_ready = Signal(2)  # per half: the records of that half's m-tile are loaded

        with m.If(self.start & ~running):
            m.d.sync += [d.eq(self.desc), running.eq(1), failed.eq(0), params_ready.eq(0)]
            for w in (ld, cp, dr, st):
                w.reset(self.desc)

        # ---------------------------------------------------------------- loader
        rd_box = Signal(box_layout(aw))
        m.d.comb += self.rd_cmd.payload.eq(rd_box)
        DEST_NONE, DEST_PARAM, DEST_RES, DEST_IN, DEST_W = range(5)
        dest = Signal(range(5))
        ld_phase = Signal(range(4))  # 0 params, 1 residual, 2 input, 3 weights
        in_box = Signal(box_layout(aw))
        in_span = [Signal(range(inbuf.tile_depth + 1), name="ld_in_spand"),
                   Signal(range(inbuf.height + 1), name="ld_in_spanh"),
                   Signal(range(inbuf.width + 1), name="ld_in_spanw")]
        res_box = Signal(box_layout(aw))
        # Only the input slot groups the layer has (a PE input without a loaded group reads
        # whatever its bank holds, times the zero weights of the absent channels).
        in_groups = ld.groups_n if Tn > 16 else 1
        ld.input_box(in_box, in_span, d.in_base + ld.nt_in, in_groups)
        ld.out_box(res_box, d.res_base, write=False)
        # The input buffer's box: latched with the command, constant while its beats arrive.
        in_size = Signal.like(inbuf.box)
        m.d.comb += [inbuf.stride_d.eq(d.stride[0]), inbuf.box.eq(in_size)]
        if resbuf is not None:
            m.d.comb += [resbuf.box.groups.eq(ld.groups_m), resbuf.box.d.eq(ld.ext[0]),
                         resbuf.box.h.eq(ld.ext[1]), resbuf.box.w.eq(ld.ext[2])]
        drain_mt = Signal(16)  # m-tile the drain walker is on
        ld_mt_half = ld.mt[0]

        # Routing of read beats.
        beat = self.rd_data.payload
        m.d.comb += [inbuf.i.payload.eq(beat), wbuf.i.payload.eq(beat)]
        if resbuf is not None:
            m.d.comb += resbuf.i.payload.eq(beat)
        with m.Switch(dest):
            with m.Case(DEST_PARAM):
                m.d.comb += self.rd_data.ready.eq(1)
            with m.Case(DEST_RES):
                if resbuf is not None:
                    m.d.comb += [resbuf.i.valid.eq(self.rd_data.valid),
                                 self.rd_data.ready.eq(resbuf.i.ready)]
            with m.Case(DEST_IN):
                m.d.comb += [inbuf.i.valid.eq(self.rd_data.valid),
                             self.rd_data.ready.eq(inbuf.i.ready)]
            with m.Case(DEST_W):
                m.d.comb += [wbuf.i.valid.eq(self.rd_data.valid),
                             self.rd_data.ready.eq(wbuf.i.ready)]
        # Parameter beats: 16 beats per group word; word index = half * G + group.
        p_beat = Signal(range(beats_per_word))
        p_group = Signal(range(G + 1))
        with m.If((dest == DEST_PARAM) & self.rd_data.valid):
            m.d.comb += [p_wr.addr.eq(ld_mt_half * G + p_group), p_wr.data.eq(
                beat.data.replicate(beats_per_word)), p_wr.en.eq(1 << p_beat)]
            with m.If(p_beat == beats_per_word - 1):
                m.d.sync += [p_beat.eq(0), p_group.eq(p_group + 1)]
            with m.Else():
                m.d.sync += p_beat.eq(p_beat + 1)

        ld_cmd_valid = Signal()
        m.d.comb += self.rd_cmd.valid.eq(ld_cmd_valid)
        with m.FSM(name="loader") as loader_fsm:
            with m.State("IDLE"):
                with m.If(self.start & ~running & (self.desc.op != OP_POOL)):
                    m.d.sync += ld_phase.eq(0)
                    m.next = "NEXT"
            with m.State("NEXT"):
                # Decide the next transfer of the nest; wait until its buffer is free.
                with m.If(failed | ld.done):
                    m.next = "IDLE"
                with m.Elif(ld_phase == 0):
                    # Post records of m-tile ld.mt, once the drain no longer needs that half.
                    with m.If((ld.t[0] == 0) & (ld.t[1] == 0) & (ld.t[2] == 0) & (ld.nt == 0)):
                        with m.If(ld.mt <= drain_mt + 1):
                            m.d.sync += [dest.eq(DEST_PARAM), p_group.eq(0), p_beat.eq(0),
                                         rd_box.eq(0), ld_phase.eq(1)]
                            m.d.sync += [rd_box.addr.eq(d.post_base + ld.mt_post),
                                         rd_box.stride_g.eq(16), rd_box.stride_d.eq(16),
                                         rd_box.stride_h.eq(16), rd_box.groups.eq(1),
                                         rd_box.d_len.eq(1), rd_box.h_len.eq(1),
                                         rd_box.w_len.eq(Tm), rd_box.last_lanes.eq(8)]
                            m.d.sync += params_ready.bit_select(ld_mt_half, 1).eq(0)
                            m.next = "CMD"
                    with m.Else():
                        m.d.sync += ld_phase.eq(1)
                with m.Elif(ld_phase == 1):
                    with m.If(residual & (ld.nt == 0)):
                        if resbuf is not None:
                            with m.If(resbuf.i.ready):
                                m.d.sync += [dest.eq(DEST_RES), rd_box.eq(res_box),
                                             ld_phase.eq(2)]
                                m.next = "CMD"
                    with m.Else():
                        m.d.sync += ld_phase.eq(2)
                with m.Elif(ld_phase == 2):
                    # (in_box: two cycles after the loader's step, by the time it gets here)
                    with m.If(inbuf.i.ready & ld.settled):
                        m.d.sync += [dest.eq(DEST_IN), rd_box.eq(in_box), ld_phase.eq(3),
                                     in_size.groups.eq(in_groups), in_size.d.eq(in_span[0]),
                                     in_size.h.eq(in_span[1]), in_size.w.eq(in_span[2])]
                        m.next = "CMD"
                with m.Else():
                    with m.If(wbuf.i.ready):
                        m.d.sync += [dest.eq(DEST_W), rd_box.eq(0), ld_phase.eq(0)]
                        m.d.sync += [rd_box.addr.eq(d.weight_base + ld.w_mt + ld.w_nt),
                                     rd_box.stride_g.eq(16), rd_box.stride_d.eq(16),
                                     rd_box.stride_h.eq(16), rd_box.groups.eq(1),
                                     rd_box.d_len.eq(1), rd_box.h_len.eq(1),
                                     rd_box.w_len.eq(d.weight_tile_bytes >> 4),
                                     rd_box.last_lanes.eq(8)]
                        m.next = "CMD"
            with m.State("CMD"):
                m.d.comb += ld_cmd_valid.eq(1)
                with m.If(self.rd_cmd.ready):
                    m.next = "DATA"
            with m.State("DATA"):
                m.d.comb += self.rd_status.ready.eq(1)
                with m.If(self.rd_status.valid):
                    m.d.sync += dest.eq(DEST_NONE)
                    with m.If(self.rd_status.payload.code != Status.OK):
                        fail(self.rd_status.payload.code.as_value(), self.rd_status.payload.addr)
                        m.next = "IDLE"
                    with m.Else():
                        with m.If(dest == DEST_PARAM):
                            m.d.sync += params_ready.bit_select(ld_mt_half, 1).eq(1)
                        with m.If(dest == DEST_W):
                            ld.advance()
                        m.next = "NEXT"

        # ---------------------------------------------------------------- compute
        K = [d.kernel[a] for a in range(3)]
        win = inbuf.width
        plane = inbuf.plane
        r = Signal(16)
        c = Signal(16)
        kd = Signal(8)
        kr = Signal(8)
        kc = Signal(8)
        tap = Signal(range(geo.taps + 1))
        row_base = Signal(range(inbuf.depth + 1))   # r*sr*Win
        col_base = Signal(range(inbuf.depth + 1))   # c*sc
        tap_off = Signal(range(inbuf.depth + 1))    # kd*plane + kr*Win + kc
        tap_row = Signal(range(inbuf.depth + 1))    # kd*plane + kr*Win
        tap_plane = Signal(range(inbuf.depth + 1))  # kd*plane
        vox = Signal(range(Td * Tr * Tc + 1))       # [v*Tr*Tc +] r*Tc + c
        vox_row = Signal(range(Td * Tr * Tc + 1))
        vox_plane = Signal(range(Td * Tr * Tc + 1))  # v*Tr*Tc (one lane)
        cv = Signal(range(Td + 1))                  # output depth in the tile (one lane)
        dep_base = Signal(range(inbuf.depth + 1))   # v*sd*plane (one lane)
        sd_plane = Signal(range(inbuf.depth + 1))
        sr_win = Signal(range(inbuf.depth + 1))
        m.d.comb += [sr_win.eq(mul_small(Const(win), d.stride[1], geo.stride[1])),
                     sd_plane.eq(mul_small(Const(plane), d.stride[0], geo.stride[0]))]

        # Stage B: the beat whose buffer words are being read.
        b_valid = Signal()
        b_first = Signal()
        b_last = Signal()
        b_tag = Signal(data.StructLayout({"addr": range(Tr * Tc * Td // L), "accumulate": 1,
                                          "last": 1}))
        tags = fifo.SyncFIFOBuffered(width=b_tag.shape().size, depth=16)
        m.submodules.tags = tags
        pe_take = pe.i.valid & pe.i.ready
        advance = (~b_valid | pe.i.ready) & tags.w_rdy
        m.d.comb += [pe.i.valid.eq(b_valid), pe.i.payload.act.eq(inbuf.act),
                     pe.i.payload.w.eq(wbuf.w), pe.i.payload.first.eq(b_first),
                     pe.i.payload.last.eq(b_last),
                     tags.w_data.eq(b_tag), tags.w_en.eq(pe_take & b_last),
                     self.pe_busy.eq(pe_take)]
        with m.If(advance):
            m.d.sync += b_valid.eq(0)
        last_tap = (kc == K[2] - 1) & (kr == K[1] - 1) & (kd == K[0] - 1)
        last_c = c == cp.ext[2] - 1
        last_r = r == cp.ext[1] - 1
        last_v = (cv == cp.ext[0] - 1) if L == 1 else Const(1)
        m.d.comb += [inbuf.r_addr.eq(dep_base + row_base + col_base + tap_off),
                     wbuf.r_addr.eq(tap),
                     inbuf.r_sub.eq(cp.nt_sub if self.subs > 1 else 0)]
        with m.FSM(name="compute"):
            with m.State("IDLE"):
                with m.If(self.start & ~running & (self.desc.op != OP_POOL)):
                    m.next = "WAIT"
            with m.State("WAIT"):
                with m.If(failed | cp.done):
                    m.next = "IDLE"
                with m.Elif(inbuf.r_valid & wbuf.r_valid):
                    m.d.sync += [r.eq(0), c.eq(0), kd.eq(0), kr.eq(0), kc.eq(0), tap.eq(0),
                                 row_base.eq(0), col_base.eq(0), tap_off.eq(0), tap_row.eq(0),
                                 tap_plane.eq(0), vox.eq(0), vox_row.eq(0), vox_plane.eq(0),
                                 cv.eq(0), dep_base.eq(0)]
                    m.next = "RUN"
                with m.Else():
                    m.d.comb += self.dma_stall.eq(1)
            with m.State("RUN"):
                with m.If(advance):
                    m.d.comb += [inbuf.r_en.eq(1), wbuf.r_en.eq(1)]
                    m.d.sync += [b_valid.eq(1), b_first.eq(tap == 0), b_last.eq(last_tap),
                                 b_tag.addr.eq(vox), b_tag.accumulate.eq(cp.nt != 0),
                                 b_tag.last.eq(cp.last_nt & last_v & last_r & last_c)]
                    # Taps: kc fastest, then kr, then kd; then the voxel (c, then r).
                    with m.If(~last_tap):
                        m.d.sync += tap.eq(tap + 1)
                        with m.If(kc != K[2] - 1):
                            m.d.sync += [kc.eq(kc + 1), tap_off.eq(tap_off + 1)]
                        with m.Else():
                            m.d.sync += kc.eq(0)
                            with m.If(kr != K[1] - 1):
                                m.d.sync += [kr.eq(kr + 1), tap_row.eq(tap_row + win),
                                             tap_off.eq(tap_row + win)]
                            with m.Else():
                                m.d.sync += [kr.eq(0), kd.eq(kd + 1),
                                             tap_plane.eq(tap_plane + plane),
                                             tap_row.eq(tap_plane + plane),
                                             tap_off.eq(tap_plane + plane)]
                    with m.Else():
                        m.d.sync += [tap.eq(0), kd.eq(0), kr.eq(0), kc.eq(0), tap_off.eq(0),
                                     tap_row.eq(0), tap_plane.eq(0)]
                        with m.If(~last_c):
                            m.d.sync += [c.eq(c + 1), col_base.eq(col_base + d.stride[2]),
                                         vox.eq(vox + 1)]
                        with m.Else():
                            m.d.sync += [c.eq(0), col_base.eq(0)]
                            with m.If(~last_r):
                                m.d.sync += [r.eq(r + 1), row_base.eq(row_base + sr_win),
                                             vox_row.eq(vox_row + Tc), vox.eq(vox_row + Tc)]
                            with m.Elif(~last_v if L == 1 else Const(0)):
                                # One lane: the next output depth of the tile.
                                m.d.sync += [r.eq(0), row_base.eq(0), cv.eq(cv + 1),
                                             dep_base.eq(dep_base + sd_plane),
                                             vox_plane.eq(vox_plane + Tr * Tc),
                                             vox_row.eq(vox_plane + Tr * Tc),
                                             vox.eq(vox_plane + Tr * Tc)]
                            with m.Else():
                                # Pass done: free both tiles (the data already read stays in
                                # the read registers until the PE array takes it).
                                m.d.comb += [inbuf.r_release.eq(1), wbuf.r_release.eq(1)]
                                cp.advance()
                                m.next = "WAIT"

        # PE array sums -> partial-sum buffer, tagged in order.
        tag_out = data.View(b_tag.shape(), tags.r_data)
        m.d.comb += [psum.i.valid.eq(pe.o.valid), psum.i.payload.acc.eq(pe.o.payload),
                     psum.i.payload.addr.eq(tag_out.addr),
                     psum.i.payload.accumulate.eq(tag_out.accumulate),
                     psum.i.payload.last.eq(tag_out.last), pe.o.ready.eq(psum.i.ready),
                     tags.r_en.eq(pe.o.valid & psum.i.ready)]

        # ---------------------------------------------------------------- drain
        post_in = post.i.payload
        q_valid = Signal()     # stage B of the drain: words being read
        q_v = Signal(range(max(Td, 2)))
        q_g = Signal(range(max(G, 2)))
        q_tag = Signal(data.StructLayout({
            "lane": range(Td), "group": range(G), "addr": range(Tr * Tc), "last": 1,
            "groups": range(G + 1), "d": range(Td + 1), "h": range(Tr + 1), "w": range(Tc + 1),
        }))
        otags = fifo.SyncFIFOBuffered(width=q_tag.shape().size, depth=16)
        m.submodules.otags = otags
        o_tag = data.View(q_tag.shape(), otags.r_data)
        o_tag_last = o_tag.last
        dv = Signal(range(Td + 1))
        dg = Signal(range(G + 1))
        dh = Signal(16)
        dw = Signal(16)
        dvox = Signal(range(Tr * Tc + 1))
        dvox_row = Signal(range(Tr * Tc + 1))
        dv_base = Signal(range(Td * Tr * Tc + 1))  # dv*Tr*Tc: partial sums of depth dv (one lane)
        p_row = Signal(range(Tr * Tc + 1))  # fused pool: pooled row * Tc
        q_end = Signal()  # the beat in stage B completes a pool window (always, without pool)
        pool_busy = Signal()  # fused pool: a tile's last beat is in the post chain
        pool_cfg_size = [Signal(16, init=1, name=f"pool_cfg_size{a}") for a in "dhw"]
        pool_cfg_groups = Signal(range(G + 1), init=1)
        pool_mode = Signal()
        d_adv = Signal()
        post_take = post.i.valid & post.i.ready
        m.d.comb += d_adv.eq((~q_valid | post.i.ready) & otags.w_rdy)
        with m.If(d_adv):
            m.d.sync += q_valid.eq(0)
        # Post-unit input from the drain (conv) or from the read DMA (pool pass).
        records = data.View(data.ArrayLayout(unsigned(_RECORD_BITS), SLOTS_PER_BEAT), p_rd.data)
        sums = psum.acc
        for lane in range(SLOTS_PER_BEAT):
            rec = records[lane]
            pl = post_in[lane]
            acc_re = Signal(signed(32), name=f"acc_re{lane}")
            acc_im = Signal(signed(32), name=f"acc_im{lane}")
            res_re = Signal(signed(8), name=f"res_re{lane}")
            res_im = Signal(signed(8), name=f"res_im{lane}")
            with m.Switch(q_v * G + q_g):
                for v in range(Td):
                    for g in range(G):
                        with m.Case(v * G + g):
                            lv = v if L == Td else 0  # one lane: the word of depth v was read
                            m.d.comb += [acc_re.eq(sums[lv][g * 8 + lane].re),
                                         acc_im.eq(sums[lv][g * 8 + lane].im)]
                            if resbuf is not None:
                                m.d.comb += [res_re.eq(resbuf.act[v][g * 8 + lane].re),
                                             res_im.eq(resbuf.act[v][g * 8 + lane].im)]
            pool_beat = data.View(data.ArrayLayout(data.StructLayout(
                {"re": signed(8), "im": signed(8)}), SLOTS_PER_BEAT), self.rd_data.payload.data)
            with m.If(pool_mode):
                m.d.comb += [pl.acc.re.eq(pool_beat[lane].re), pl.acc.im.eq(pool_beat[lane].im)]
            with m.Else():
                m.d.comb += [
                    pl.acc.re.eq(acc_re), pl.acc.im.eq(acc_im),
                    pl.res.re.eq(res_re), pl.res.im.eq(res_im),
                    pl.mult.re.eq(rec[0:16].as_signed()), pl.mult.im.eq(rec[16:32].as_signed()),
                    pl.res_mult.re.eq(rec[32:48].as_signed()),
                    pl.res_mult.im.eq(rec[48:64].as_signed()),
                    pl.bias.re.eq(rec[64:112].as_signed()),
                    pl.bias.im.eq(rec[112:160].as_signed()),
                    pl.shift.re.eq(rec[160:168]), pl.shift.im.eq(rec[168:176]),
                ]
        m.d.comb += [post.cfg.cbn.bypass.eq(pool_mode), post.cfg.cbn.residual.eq(residual),
                     post.cfg.quantize.bypass.eq(0),
                     post.cfg.crelu.bypass.eq(pool_mode | ~(d.flags & FLAG_CRELU).bool()),
                     post.cfg.pool.bypass.eq(~pool_mode & ~fused)]
        if geo.fused_pool:
            m.d.comb += post.cfg.pool.groups.eq(Mux(pool_mode, 1, pool_cfg_groups))
        else:
            m.d.comb += post.cfg.pool.groups.eq(1)
        for a in range(3):
            m.d.comb += [post.cfg.pool.window[a].eq(d.pool_window[a]),
                         post.cfg.pool.stride[a].eq(d.pool_stride[a]),
                         post.cfg.pool.padding[a].eq(d.pool_padding[a]),
                         # A pool pass pools the map; a fused pool the drain's tile (set when
                         # the drain starts it). Else the (bypassed) pool sees a 1-voxel map:
                         # its axis stages treat positions beyond the size as padding and would
                         # otherwise run on a size-0 map while idle.
                         post.cfg.pool.size[a].eq(Mux(pool_mode, d.in_shape[a],
                                                      pool_cfg_size[a]))]
        m.d.comb += [p_rd.addr.eq(Mux(dr.mt[0], G, 0) + dg),
                     psum.r_addr.eq(dvox if L == Td else dv_base + dvox)]
        if resbuf is not None:
            m.d.comb += resbuf.r_addr.eq(dvox)
        m.d.comb += drain_mt.eq(dr.mt)
        d_last_g = dg == dr.groups_m - 1
        d_last_v = dv == dr.ext[0] - 1
        d_last_w = dw == dr.ext[2] - 1
        d_last_h = dh == dr.ext[1] - 1
        with m.If(~pool_mode):
            # Tags of the beats that leave the post chain: every beat, or with a fused pool
            # the beats completing a window (the pool emits its voxel as they pass).
            m.d.comb += [post.i.valid.eq(q_valid), otags.w_en.eq(post_take & q_end),
                         otags.w_data.eq(q_tag)]
        if geo.fused_pool:
            with m.If(self.start & ~running):
                m.d.sync += pool_busy.eq(0)
            with m.Elif(fused & post_take & q_tag.last):
                m.d.sync += pool_busy.eq(1)
            with m.Elif(outbuf.i.valid & outbuf.i.ready & o_tag_last):
                m.d.sync += pool_busy.eq(0)
        with m.FSM(name="drain"):
            with m.State("IDLE"):
                with m.If(self.start & ~running & (self.desc.op != OP_POOL)):
                    m.next = "WAIT"
            with m.State("WAIT"):
                ready = psum.r_valid & params_ready.bit_select(dr.mt[0], 1) & ~pool_busy
                if resbuf is not None:
                    ready &= ~residual | resbuf.r_valid
                with m.If(failed | dr.done):
                    m.next = "IDLE"
                with m.Elif(ready):
                    m.d.sync += [dv.eq(0), dg.eq(0), dh.eq(0), dw.eq(0), dvox.eq(0),
                                 dvox_row.eq(0), dv_base.eq(0), p_row.eq(0)]
                    if geo.fused_pool:
                        # CMaxPool's map: this tile (the previous one has left it).
                        m.d.sync += [pool_cfg_size[a].eq(Mux(fused, dr.ext[a], 1))
                                     for a in range(3)]
                        m.d.sync += pool_cfg_groups.eq(Mux(fused, dr.groups_m, 1))
                    m.next = "RUN"
            with m.State("RUN"):
                with m.If(d_adv):
                    rd_en = [psum.r_en.eq(1), p_rd.en.eq(1)]
                    if resbuf is not None:
                        rd_en.append(resbuf.r_en.eq(1))
                    m.d.comb += rd_en
                    # The tile's last beat; with a fused pool it completes the last window
                    # (pool_fuses: the tile's extents are multiples of the windows).
                    done_tile = d_last_g & d_last_v & d_last_w & d_last_h
                    # Output voxel of the beat: with a fused pool the pooled one (the beat
                    # completing its window writes it), else the beat's own.
                    odd = [dv[0], dh[0], dw[0]]
                    m.d.sync += [q_valid.eq(1), q_v.eq(dv), q_g.eq(dg),
                                 q_end.eq((~halved[0] | odd[0]) & (~halved[1] | odd[1])
                                          & (~halved[2] | odd[2])),
                                 q_tag.lane.eq(Mux(halved[0], dv >> 1, dv)), q_tag.group.eq(dg),
                                 q_tag.addr.eq(Mux(fused, p_row + Mux(halved[2], dw >> 1, dw),
                                                   dvox)),
                                 q_tag.last.eq(done_tile), q_tag.groups.eq(dr.groups_m)]
                    m.d.sync += [q_tag[f].eq(Mux(halved[a], dr.ext[a] >> 1, dr.ext[a]))
                                 for a, f in enumerate("dhw")]
                    # Raster order: group fastest, then w, then h, then the lane (depth).
                    with m.If(~d_last_g):
                        m.d.sync += dg.eq(dg + 1)
                    with m.Else():
                        m.d.sync += dg.eq(0)
                        with m.If(~d_last_w):
                            m.d.sync += [dw.eq(dw + 1), dvox.eq(dvox + 1)]
                        with m.Else():
                            m.d.sync += dw.eq(0)
                            with m.If(~d_last_h):
                                m.d.sync += [dh.eq(dh + 1), dvox_row.eq(dvox_row + Tc),
                                             dvox.eq(dvox_row + Tc)]
                                with m.If(~halved[1] | odd[1]):
                                    m.d.sync += p_row.eq(p_row + Tc)
                            with m.Else():
                                m.d.sync += [dh.eq(0), dvox.eq(0), dvox_row.eq(0), p_row.eq(0)]
                                with m.If(~d_last_v):
                                    m.d.sync += [dv.eq(dv + 1), dv_base.eq(dv_base + Tr * Tc)]
                                with m.Else():
                                    m.next = "RELEASE"
            with m.State("RELEASE"):
                # The last words were read last cycle (held in the read registers): free the
                # tiles once the last beat has entered the post chain.
                with m.If(~q_valid | post_take):
                    m.d.comb += psum.r_release.eq(1)
                    if resbuf is not None:
                        m.d.comb += resbuf.r_release.eq(residual)
                    dr.advance()
                    m.next = "WAIT"
        # Post chain output -> output buffer (conv) or the write DMA (pool pass).
        m.d.comb += [outbuf.i.payload.lane.eq(o_tag.lane),
                     outbuf.i.payload.group.eq(o_tag.group),
                     outbuf.i.payload.addr.eq(o_tag.addr), outbuf.i.payload.last.eq(o_tag.last),
                     outbuf.i.payload.slots.eq(post.o.payload),
                     outbuf.shape.groups.eq(o_tag.groups), outbuf.shape.d.eq(o_tag.d),
                     outbuf.shape.h.eq(o_tag.h), outbuf.shape.w.eq(o_tag.w)]
        with m.If(~pool_mode):
            m.d.comb += [outbuf.i.valid.eq(post.o.valid), post.o.ready.eq(outbuf.i.ready),
                         otags.r_en.eq(post.o.valid & outbuf.i.ready)]

        # ---------------------------------------------------------------- store
        wr_box = Signal(box_layout(aw))
        out_box = Signal(box_layout(aw))
        st.out_box(out_box, d.out_base, write=True, halved=halved)
        m.d.comb += self.wr_cmd.payload.eq(wr_box)
        st_data = Signal()
        with m.If(st_data):
            m.d.comb += [self.wr_data.valid.eq(outbuf.o.valid),
                         self.wr_data.payload.data.eq(outbuf.o.payload.data),
                         outbuf.o.ready.eq(self.wr_data.ready)]
        st_done = Signal()
        with m.FSM(name="store") as store_fsm:
            with m.State("IDLE"):
                with m.If(self.start & ~running & (self.desc.op != OP_POOL)):
                    m.next = "WAIT"
            with m.State("WAIT"):
                with m.If(st.done):
                    m.d.comb += st_done.eq(1)
                    m.next = "IDLE"
                with m.Elif(failed):
                    m.next = "IDLE"
                with m.Elif(outbuf.o.valid):
                    m.d.sync += wr_box.eq(out_box)
                    m.next = "CMD"
            with m.State("CMD"):
                m.d.comb += self.wr_cmd.valid.eq(1)
                with m.If(self.wr_cmd.ready):
                    m.next = "DATA"
            with m.State("DATA"):
                m.d.comb += [st_data.eq(1), self.wr_status.ready.eq(1)]
                with m.If(self.wr_status.valid):
                    with m.If(self.wr_status.payload.code != Status.OK):
                        fail(4 | self.wr_status.payload.code.as_value(),
                             self.wr_status.payload.addr)
                        m.next = "IDLE"
                    with m.Else():
                        st.advance()
                        m.next = "WAIT"

        # ---------------------------------------------------------------- pool pass
        pp_group = Signal(16)
        pp_groups = Signal(16)
        m.d.comb += pp_groups.eq((d.in_slots + 7) >> 3)
        pp_last_group = pp_group == pp_groups - 1
        pp_rd_ok = Signal()
        pp_wr_ok = Signal()
        pp_read_failed = Signal()  # after a read error, zero beats complete the write box
        pp_box_in = Signal(box_layout(aw))
        pp_box_out = Signal(box_layout(aw))
        pp_in_base = Signal(aw)
        pp_out_base = Signal(aw)
        m.d.comb += [
            pp_box_in.addr.eq(pp_in_base), pp_box_in.stride_g.eq(d.in_stride[0]),
            pp_box_in.stride_d.eq(d.in_stride[1]), pp_box_in.stride_h.eq(d.in_stride[2]),
            pp_box_in.groups.eq(1), pp_box_in.d_len.eq(d.in_shape[0]),
            pp_box_in.h_len.eq(d.in_shape[1]), pp_box_in.w_len.eq(d.in_shape[2]),
            pp_box_in.last_lanes.eq(8),
            pp_box_out.addr.eq(pp_out_base), pp_box_out.stride_g.eq(d.out_stride[0]),
            pp_box_out.stride_d.eq(d.out_stride[1]), pp_box_out.stride_h.eq(d.out_stride[2]),
            pp_box_out.groups.eq(1), pp_box_out.d_len.eq(d.out_shape[0]),
            pp_box_out.h_len.eq(d.out_shape[1]), pp_box_out.w_len.eq(d.out_shape[2]),
            pp_box_out.last_lanes.eq(Mux(pp_last_group, d.out_slots - (pp_group << 3), 8)),
        ]
        with m.If(pool_mode):
            # Read beats (or, after a read error, zero beats until the write box is complete)
            # feed the post chain.
            m.d.comb += [post.i.valid.eq(self.rd_data.valid | (pp_read_failed & ~pp_wr_ok)),
                         self.rd_data.ready.eq(post.i.ready)]
            m.d.comb += [self.wr_data.valid.eq(post.o.valid),
                         self.wr_data.payload.data.eq(post.o.payload),
                         post.o.ready.eq(self.wr_data.ready)]
        pp_done = Signal()
        with m.FSM(name="pool"):
            with m.State("IDLE"):
                with m.If(self.start & ~running & (self.desc.op == OP_POOL)):
                    m.d.sync += [pool_mode.eq(1), pp_group.eq(0), pp_in_base.eq(self.desc.in_base),
                                 pp_out_base.eq(self.desc.out_base)]
                    m.next = "CMD"
            with m.State("CMD"):
                m.d.comb += self.rd_cmd.payload.eq(pp_box_in)
                m.d.comb += [self.rd_cmd.valid.eq(~pp_rd_ok), self.wr_cmd.valid.eq(~pp_wr_ok),
                             self.wr_cmd.payload.eq(pp_box_out)]
                with m.If(self.rd_cmd.ready & ~pp_rd_ok):
                    m.d.sync += pp_rd_ok.eq(1)
                with m.If(self.wr_cmd.ready & ~pp_wr_ok):
                    m.d.sync += pp_wr_ok.eq(1)
                with m.If((pp_rd_ok | self.rd_cmd.ready) & (pp_wr_ok | self.wr_cmd.ready)):
                    m.d.sync += [pp_rd_ok.eq(0), pp_wr_ok.eq(0)]
                    m.next = "DATA"
            with m.State("DATA"):
                m.d.comb += [self.rd_status.ready.eq(~pp_rd_ok), self.wr_status.ready.eq(~pp_wr_ok)]
                with m.If(self.rd_status.valid & ~pp_rd_ok):
                    m.d.sync += pp_rd_ok.eq(1)
                    with m.If(self.rd_status.payload.code != Status.OK):
                        m.d.sync += pp_read_failed.eq(1)
                        fail(self.rd_status.payload.code.as_value(), self.rd_status.payload.addr)
                with m.If(self.wr_status.valid & ~pp_wr_ok):
                    m.d.sync += pp_wr_ok.eq(1)
                    with m.If(self.wr_status.payload.code != Status.OK):
                        fail(4 | self.wr_status.payload.code.as_value(),
                             self.wr_status.payload.addr)
                with m.If((pp_rd_ok | self.rd_status.valid) & (pp_wr_ok | self.wr_status.valid)):
                    m.d.sync += [pp_rd_ok.eq(0), pp_wr_ok.eq(0), pp_group.eq(pp_group + 1),
                                 pp_in_base.eq(pp_in_base + d.in_stride[0]),
                                 pp_out_base.eq(pp_out_base + d.out_stride[0])]
                    with m.If(pp_last_group | failed | pp_read_failed | (self.rd_status.valid & (
                            self.rd_status.payload.code != Status.OK)) | (
                            self.wr_status.valid & (self.wr_status.payload.code != Status.OK))):
                        m.d.comb += pp_done.eq(1)
                        m.d.sync += [pool_mode.eq(0), pp_read_failed.eq(0)]
                        m.next = "IDLE"
                    with m.Else():
                        m.next = "CMD"

        # ---------------------------------------------------------------- completion
        # Conv: done when the store walker has finished; failure: once no transfer is in
        # flight (loader and store idle, pool pass over).
        finished = Signal()
        m.d.comb += finished.eq(st_done | pp_done)
        with m.If(running & finished & ~failed):
            m.d.comb += self.done.eq(1)
            m.d.sync += running.eq(0)
        # A failure ends the run when every FSM has gone back to IDLE (checked by the top via
        # `busy` falling); the engine signals error once.
        idle_all = Signal()
        m.d.comb += idle_all.eq(~pool_mode & loader_fsm.ongoing("IDLE")
                                & store_fsm.ongoing("IDLE"))
        err_sent = Signal()
        with m.If(running & failed & ~err_sent & idle_all):
            m.d.comb += [self.error.eq(1), self.error_code.eq(err_code),
                         self.error_addr.eq(err_addr)]
            m.d.sync += [running.eq(0), err_sent.eq(1)]
        with m.If(self.start & ~running):
            m.d.sync += err_sent.eq(0)
        return m
