"""The layer engine's drain walker: finished tiles from the partial-sum buffer through the post
chain into the output buffer."""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import C, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, fifo, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from fcircnn.arch.descriptor import (
    FLAG_CRELU,
    FLAG_LANE0,
    FLAG_RESIDUAL,
    FLAG_RFFT,
    OP_POOL,
    carried_axes,
)
from fcircnn.arch.geometry import SLOTS_PER_BEAT, CoreGeometry, EngineGeometry, pool_carry

from .buffer_output import output_in_layout, output_shape_layout
from .buffer_psum import psum_layout
from .common import check_positive, mul_const, rejecting
from .complex_mul_pair import ACT_WIDTH, complex_layout
from .engine_loader import POST_RECORD_BITS, params_signature
from .engine_walk import RowLanes, TileWalk, control_signature, fused_pool_axes
from .post_cbn import cbn_input_layout
from .post_chain import post_config_layout
from .post_maxpool import carry_layout
from .post_quantize import slot_layout
from .psum_pool import PartialSumPool

__all__ = ["EngineDrain", "post_chain_size"]


@dataclass
class _Walk:
    """The drain's walk registers, for the states of a pooled tile."""

    dr: TileWalk
    dv: Signal
    dg: Signal
    dh: Signal
    dw: Signal
    dvox: Signal
    dvox_row: Signal
    dv_base: Signal
    p_row: Signal
    sh: Signal
    sw: Signal
    do: Signal | None = None
    u_row: Signal | None = None
    u_vox: Signal | None = None
    rows: Signal | None = None


@dataclass
class _Stage:
    """Stage B of the drain (the beat being offered to the post chain) and its advance."""

    valid: Signal
    v: Signal
    g: Signal
    end: Signal
    tag: Signal
    pooled: Signal
    adv: Signal
    o: Signal | None = None


def post_chain_size(core: CoreGeometry, geometry: EngineGeometry) -> tuple[tuple, int]:
    """``(max_size, max_groups)`` of the core's :class:`~fcircnn.hw.post_chain.PostChain`:
    CMaxPool holds the maps of pool passes and, with a fused pool, the output tile with its
    ``Tm/16`` slot groups interleaved."""
    if not geometry.fused_pool:
        return geometry.pool_size, 1
    size = tuple(max(a, b) for a, b in zip(geometry.pool_size, core.tile, strict=True))
    return size, core.out_groups


class EngineDrain(wiring.Component):
    """Per finished tile of a conv layer (:class:`TileWalk` without ``nt``), 8 slots a beat
    with their post parameters (``records``: the m-tile's half of the parameter memory) and
    residual slots into the post chain (``post_i``; CBN + residual, quantize, CReLU), and the
    chain's output into the output buffer (``out_i``), in raster order: slot group fastest,
    then column, row, depth lane.

    With a fused pool (``FLAG_POOL`` on a conv descriptor) whose window spans the depth axis,
    CMaxPool pools each tile as its own map (``post_cfg``), its slot groups interleaved, and
    only the pooled voxels reach the output buffer; a tile starts once the previous one has
    left CMaxPool. A fused pool with a window of one depth (C3D's pool1, ``1 x 2 x 2``) is
    taken on the partial sums instead (:class:`~fcircnn.hw.psum_pool.PartialSumPool`): per
    tile the signs of the m-tile's multipliers are read from the records (one group a cycle),
    then per pooled voxel its window's words (one a cycle, once the previous voxel's last beat
    has left stage B) and its pooled word's beats (slot group fastest, then the depth lanes
    of the word), so only a quarter of the beats pass the post chain and CMaxPool is bypassed.
    Otherwise the pool is bypassed. With row lanes (:data:`~fcircnn.arch.descriptor.
    FLAG_ROWLANES`, :class:`~fcircnn.hw.engine_walk.RowLanes`) lane ``v``'s sums at its
    voxel ``(r, c)`` are output depth ``v mod tile[0]`` at row ``u * Rh + r`` of the tile
    (``u`` its row group): the walk's lanes step through their depths, then row groups, each
    lane over the rows of the tile it has (none past the tile's last row), reading the
    residual and writing the output buffer at that depth and row. A fused pool with 3-wide
    windows (stride 2, padding 1:
    :func:`~fcircnn.arch.descriptor.carried_axes`) also pools each tile as its own map, its
    windows at the tile's low edges taking their first voxel from the tiles before through
    CMaxPool's carry memories (``post_carry``, laid out by
    :class:`~fcircnn.arch.geometry.PoolCarry`; on a core built with them).

    Contract
    --------
    * A tile starts when its partial sums are complete (``ps_valid``), its m-tile's records are
      loaded (``params_ready``) and, with a residual, its residual tile (``res_valid``); the
      tile's buffers are released (``ps_release``, ``res_release``) once its last beat has
      entered the post chain.
    * ``mt``: the m-tile being drained (the loader reloads a parameter half only behind it).
    * ``post_cfg``: the post chain's configuration for the running conv layer.
    * A beat leaves the post chain (``post_o``) at least 3 cycles after it entered (the tag
      FIFO's latency; :class:`~fcircnn.hw.post_chain.PostChain`'s pipeline is longer).

    Parameters
    ----------
    core : CoreGeometry
    geometry : EngineGeometry
    psum_depth : int
        Words of the partial-sum buffer (:class:`~fcircnn.hw.buffer_psum.PartialSumBuffer`).
    res_depth : int or None
        Words of the residual buffer, ``None`` if the core runs no residual layer.
    """

    def __init__(self, core: CoreGeometry, geometry: EngineGeometry, *, psum_depth: int,
                 res_depth: int | None):
        with rejecting(self):
            if not isinstance(core, CoreGeometry) or not isinstance(geometry, EngineGeometry):
                raise TypeError("core must be a CoreGeometry and geometry an EngineGeometry")
            check_positive("psum_depth", psum_depth)
            if (res_depth is not None) != geometry.residual:
                raise ValueError("res_depth must be given exactly when the core has residuals")
            if res_depth is not None:
                check_positive("res_depth", res_depth)
        self.core, self.geometry = core, geometry
        self.psum_depth, self.res_depth = psum_depth, res_depth
        params = params_signature(core)
        ports = {
            "ctl": In(control_signature()),
            "params_ready": In(2),
            "mt": Out(16),
            "records": In(memory.ReadPort.Signature(
                addr_width=params.addr_width, shape=params.shape)),
            "ps_addr": Out(range(psum_depth)), "ps_en": Out(1), "ps_release": Out(1),
            "ps_valid": In(1), "acc": In(psum_layout(core.tm, core.lanes)),
            "post_i": Out(stream.Signature(cbn_input_layout(SLOTS_PER_BEAT))),
            "post_o": In(stream.Signature(slot_layout(SLOTS_PER_BEAT))),
            "post_cfg": Out(post_config_layout(*post_chain_size(core, geometry))),
            "out_i": Out(stream.Signature(output_in_layout(core.tm, core.td, core.tr,
                                                           core.tc))),
            "out_shape": Out(output_shape_layout(core.out_groups, core.td, core.tr, core.tc)),
        }
        self.carry = pool_carry(core, geometry)
        if self.carry is not None:
            ports["post_carry"] = Out(carry_layout(self.carry.depth))
        if res_depth is not None:
            act = data.ArrayLayout(data.ArrayLayout(complex_layout(ACT_WIDTH), core.tm // 2),
                                   core.td)
            ports |= {"res_addr": Out(range(res_depth)), "res_en": Out(1),
                      "res_release": Out(1), "res_valid": In(1), "res_act": In(act)}
        super().__init__(ports)

    def _post_input(self, m, q_v, q_g, q_pooled, pooled, q_o=None):
        """Drive ``post_i.payload`` from the partial sums (``pooled``'s word if ``q_pooled``),
        records and residual slots of the beat in stage B (depth lane ``q_v``, slot group
        ``q_g``; with row lanes ``q_o``, the lane's output depth, picks the residual's)."""
        core = self.core
        Td, G, L = core.td, core.out_groups, core.lanes
        records = data.View(data.ArrayLayout(unsigned(POST_RECORD_BITS), SLOTS_PER_BEAT),
                            self.records.data)
        for lane in range(SLOTS_PER_BEAT):
            rec = records[lane]
            pl = self.post_i.payload[lane]
            acc_re = Signal(signed(32), name=f"acc_re{lane}")
            acc_im = Signal(signed(32), name=f"acc_im{lane}")
            res_re = Signal(signed(8), name=f"res_re{lane}")
            res_im = Signal(signed(8), name=f"res_im{lane}")
            words = [self.acc] if pooled is None else [self.acc, pooled]
            with m.Switch((q_pooled * Td + q_v) * G + q_g):
                for src, word in enumerate(words):
                    for v in range(Td):
                        for g in range(G):
                            with m.Case((src * Td + v) * G + g):
                                lv = v if L == Td else 0  # one lane: the word of depth v
                                m.d.comb += [acc_re.eq(word[lv][g * 8 + lane].re),
                                             acc_im.eq(word[lv][g * 8 + lane].im)]
                                if self.res_depth is not None and src == 0 and q_o is None:
                                    m.d.comb += [
                                        res_re.eq(self.res_act[v][g * 8 + lane].re),
                                        res_im.eq(self.res_act[v][g * 8 + lane].im)]
            if self.res_depth is not None and q_o is not None:
                with m.Switch(q_o * G + q_g):
                    for v in range(Td):
                        for g in range(G):
                            with m.Case(v * G + g):
                                m.d.comb += [res_re.eq(self.res_act[v][g * 8 + lane].re),
                                             res_im.eq(self.res_act[v][g * 8 + lane].im)]
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

    def _post_config(self, m, d, cmaxpool, pool_cfg_size, pool_cfg_groups):
        """Drive ``post_cfg`` for the conv layer ``d`` (``cmaxpool``: its pool runs in
        CMaxPool)."""
        cfg = self.post_cfg
        m.d.comb += [cfg.lane0.enable.eq((d.flags & FLAG_LANE0).bool()),
                     cfg.rfft.enable.eq((d.flags & FLAG_RFFT).bool()),
                     cfg.rfft.shift.eq(d.rfft_shift),
                     *(cfg.rfft.mult[k].eq(d.rfft_mult[k].as_signed())
                       for k in range(len(cfg.rfft.mult)))]
        m.d.comb += [cfg.cbn.bypass.eq(0), cfg.cbn.residual.eq((d.flags & FLAG_RESIDUAL).bool()),
                     cfg.quantize.bypass.eq(0),
                     cfg.crelu.bypass.eq(~(d.flags & FLAG_CRELU).bool()),
                     cfg.pool.bypass.eq(~cmaxpool),
                     cfg.pool.groups.eq(pool_cfg_groups if self.geometry.fused_pool else 1)]
        for a in range(3):
            # A fused pool pools the drain's tile (set when the drain starts it). Else the
            # (bypassed) pool sees a 1-voxel map: its axis stages treat positions beyond the
            # size as padding and would otherwise run on a size-0 map while idle.
            m.d.comb += [cfg.pool.window[a].eq(d.pool_window[a]),
                         cfg.pool.stride[a].eq(d.pool_stride[a]),
                         cfg.pool.padding[a].eq(d.pool_padding[a]),
                         cfg.pool.size[a].eq(pool_cfg_size[a])]

    def _pooled_states(self, m, w, q, pool, halved):
        """The FSM states of a tile pooled on its partial sums: ``SIGNS`` (the multipliers'
        signs of the m-tile's groups from the records, one group a cycle), ``PREAD`` (the
        words of one pooled voxel's window into ``pool``, one a cycle, once stage B's beat
        has left or leaves) and ``PEMIT`` (the pooled word's beats into stage B: slot group
        fastest, then the word's depth lanes), back to ``PREAD`` or on to ``RELEASE``. ``w``:
        the drain's walk registers (``dh``, ``dw``: the window's first row and column,
        ``dvox``: its word), ``q``: stage B."""
        core = self.core
        Td, Tr, Tc, L = core.td, core.tr, core.tc, core.lanes
        dr = w.dr
        records = data.View(data.ArrayLayout(unsigned(POST_RECORD_BITS), SLOTS_PER_BEAT),
                            self.records.data)
        # The signs of the group read last cycle (the parameter memory's latency).
        cap_en, cap_group = Signal(), Signal.like(w.dg)
        take, first = Signal(), Signal()  # the word read last cycle enters the window
        m.d.sync += [cap_en.eq(0), take.eq(0)]
        m.d.comb += [pool.sign_en.eq(cap_en), pool.sign_group.eq(cap_group),
                     pool.take.eq(take), pool.first.eq(first)]
        for k in range(SLOTS_PER_BEAT):
            m.d.comb += [pool.signs[k].re.eq(records[k][15]), pool.signs[k].im.eq(records[k][31])]
        el = Signal(range(max(Td, 2)))  # the depth lane of the beat (lanes = Td)
        # The window's axes and the tile's last window and lane, registered from the
        # descriptor and the walk (settled long before a tile's first beat: the walk's tile
        # changes at RELEASE, its first beat follows WAIT and SIGNS) to keep the beat loop's
        # logic short.
        hh, hw = Signal(), Signal()
        h_end, w_end = Signal.like(dr.ext[1]), Signal.like(dr.ext[2])
        d_end = Signal.like(dr.ext[0])
        m.d.sync += [hh.eq(halved[1]), hw.eq(halved[2]), d_end.eq(dr.ext[0] - 1),
                     h_end.eq(dr.ext[1] - 1 - halved[1]), w_end.eq(dr.ext[2] - 1 - halved[2])]
        step_h, step_w = Mux(hh, 2, 1), Mux(hw, 2, 1)
        last_g = w.dg == dr.groups_m - 1
        last_lane = (el == d_end) if L == Td else C(1, 1)
        last_w = w.dw == w_end
        last_h = w.dh == h_end
        last_v = (w.dv == d_end) if L == 1 else C(1, 1)
        with m.State("SIGNS"):
            m.d.comb += self.records.en.eq(1)
            m.d.sync += [cap_en.eq(1), cap_group.eq(w.dg), w.dg.eq(w.dg + 1)]
            with m.If(last_g):
                m.d.sync += w.dg.eq(0)
                m.next = "PREAD"
        with m.State("PREAD"):
            # The pool's word changes the cycle after a read: the beat in stage B (of the
            # previous voxel's word) must leave first.
            with m.If(~q.valid | self.post_i.ready):
                m.d.comb += self.ps_en.eq(1)
                m.d.sync += [take.eq(1), first.eq(~w.sh & ~w.sw), w.sw.eq(hw & ~w.sw)]
                with m.If(~hw | w.sw):
                    m.d.sync += w.sh.eq(hh & ~w.sh)
                    with m.If(~hh | w.sh):
                        m.d.sync += el.eq(0)
                        m.next = "PEMIT"
        with m.State("PEMIT"):
            with m.If(q.adv):
                m.d.comb += self.records.en.eq(1)
                lane = el if L == Td else w.dv
                m.d.sync += [q.valid.eq(1), q.v.eq(lane), q.g.eq(w.dg), q.end.eq(1),
                             q.pooled.eq(1), q.tag.lane.eq(lane), q.tag.group.eq(w.dg),
                             q.tag.addr.eq(w.p_row + Mux(hw, w.dw >> 1, w.dw)),
                             q.tag.last.eq(last_g & last_lane & last_w & last_h & last_v),
                             q.tag.groups.eq(dr.groups_m)]
                m.d.sync += [q.tag[f].eq(Mux(halved[a], dr.ext[a] >> 1, dr.ext[a]))
                             for a, f in enumerate("dhw")]
                m.d.sync += w.dg.eq(w.dg + 1)
                with m.If(last_g):
                    m.d.sync += [w.dg.eq(0), el.eq(el + 1)]
                    with m.If(last_lane):
                        m.next = "PREAD"
                        with m.If(~last_w):
                            m.d.sync += [w.dw.eq(w.dw + step_w), w.dvox.eq(w.dvox + step_w)]
                        with m.Else():
                            row = w.dvox_row + Mux(hh, 2 * Tc, Tc)
                            m.d.sync += [w.dw.eq(0), w.dh.eq(w.dh + step_h), w.dvox_row.eq(row),
                                         w.dvox.eq(row), w.p_row.eq(w.p_row + Tc)]
                            with m.If(last_h):
                                m.d.sync += [w.dh.eq(0), w.dvox.eq(0), w.dvox_row.eq(0),
                                             w.p_row.eq(0)]
                                if L == 1:
                                    m.d.sync += [w.dv.eq(w.dv + 1),
                                                 w.dv_base.eq(w.dv_base + Tr * Tc)]
                                with m.If(last_v):
                                    m.next = "RELEASE"

    def elaborate(self, platform):
        m = Module()
        core, geo, ctl = self.core, self.geometry, self.ctl
        Td, Tr, Tc, G, L = core.td, core.tr, core.tc, core.out_groups, core.lanes
        d = ctl.desc
        has_res = self.res_depth is not None
        residual = (d.flags & FLAG_RESIDUAL).bool()
        fused, halved = fused_pool_axes(m, d, geo.fused_pool)
        dr = TileWalk(m, "dr", d, core, geo.stride, with_nt=False)
        with m.If(ctl.start):
            dr.reset(ctl.new_desc)
        if self.carry is not None:
            m.d.sync += self.post_carry.restart.eq(0)  # a strobe (set by _carry_start)
            with m.If(ctl.start):  # no carry in the next descriptor's pool (a pool pass's)
                m.d.sync += [self.post_carry.use.eq(0), self.post_carry.save.eq(0)]

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
        rl = (RowLanes(m, ctl, L, geo.row_lanes, "dr")
              if RowLanes.enabled(L, geo.row_lanes) else None)
        w = self._walk_registers(dr, rl)
        q_o = None if rl is None else Signal(range(max(Td, 2)), name="q_o")
        q_end = Signal()  # the beat in stage B completes a pool window (always, without pool)
        pool_busy = Signal()  # fused pool: a tile's last beat is in the post chain
        pool, pooled_drain = self._psum_pool(m, fused, halved)
        q_pooled = Signal()  # the beat in stage B is one of the pool's pooled word
        cmaxpool = fused & ~pooled_drain
        pool_cfg_size = [Signal(16, init=1, name=f"pool_cfg_size{a}") for a in "dhw"]
        pool_cfg_groups = Signal(range(G + 1), init=1)
        post_i = self.post_i
        post_take = post_i.valid & post_i.ready
        d_adv = Signal()
        m.d.comb += d_adv.eq((~q_valid | post_i.ready) & otags.w_rdy)
        with m.If(d_adv):
            m.d.sync += q_valid.eq(0)
        self._post_input(m, q_v, q_g, q_pooled, None if pool is None else pool.pooled, q_o)
        self._post_config(m, d, cmaxpool, pool_cfg_size, pool_cfg_groups)
        # The read of a pooled window's word (0 outside a pooled drain).
        sub = Signal(range(Tc + 2))
        m.d.comb += sub.eq(Mux(w.sh, Tc, 0) + w.sw)
        # The parameter memory's read port is enabled with the other reads only (its enable
        # would otherwise default to 1 and, while the post chain stalls a beat of one group,
        # replace that beat's records with the next group's).
        m.d.comb += [self.records.en.eq(0), self.records.addr.eq(Mux(dr.mt[0], G, 0) + w.dg),
                     self.ps_addr.eq((w.dvox if L == Td else w.dv_base + w.dvox) + sub)]
        if has_res:
            m.d.comb += self.res_addr.eq(w.dvox if rl is None else w.dvox + w.u_vox)
        m.d.comb += self.mt.eq(dr.mt)
        # Tags of the beats that leave the post chain: every beat, or with a fused pool the
        # beats completing a window (the pool emits its voxel as they pass).
        m.d.comb += [post_i.valid.eq(q_valid), otags.w_en.eq(post_take & q_end),
                     otags.w_data.eq(q_tag)]
        if geo.fused_pool:
            with m.If(ctl.start):
                m.d.sync += pool_busy.eq(0)
            with m.Elif(cmaxpool & post_take & q_tag.last):
                m.d.sync += pool_busy.eq(1)
            with m.Elif(self.out_i.valid & self.out_i.ready & o_tag.last):
                m.d.sync += pool_busy.eq(0)
        q = _Stage(valid=q_valid, v=q_v, g=q_g, end=q_end, tag=q_tag, pooled=q_pooled,
                   adv=d_adv, o=q_o)

        with m.FSM(name="drain"):
            with m.State("IDLE"):
                with m.If(ctl.start & (ctl.new_desc.op != OP_POOL)):
                    m.next = "WAIT"
            with m.State("WAIT"):
                ready = self.ps_valid & self.params_ready.bit_select(dr.mt[0], 1) & ~pool_busy
                if has_res:
                    ready &= ~residual | self.res_valid
                with m.If(ctl.failed | dr.done):
                    m.next = "IDLE"
                with m.Elif(ready):
                    m.d.sync += self._tile_start(w)
                    if geo.fused_pool:
                        # CMaxPool's map: this tile (the previous one has left it).
                        m.d.sync += [pool_cfg_size[a].eq(Mux(cmaxpool, dr.ext[a], 1))
                                     for a in range(3)]
                        m.d.sync += pool_cfg_groups.eq(Mux(cmaxpool, dr.groups_m, 1))
                    self._carry_start(m, d, dr, cmaxpool)
                    m.d.sync += [w.sh.eq(0), w.sw.eq(0), q_pooled.eq(0)]
                    m.next = "RUN"
                    if pool is not None:
                        with m.If(pooled_drain):
                            m.next = "SIGNS"
            with m.State("RUN"):
                self._run_beat(m, w, q, fused, halved)
            if pool is not None:
                self._pooled_states(m, w, q, pool, halved)
            with m.State("RELEASE"):
                # The last words were read last cycle (held in the read registers): free the
                # tiles once the last beat has entered the post chain.
                with m.If(~q_valid | post_take):
                    m.d.comb += self.ps_release.eq(1)
                    if has_res:
                        m.d.comb += self.res_release.eq(residual)
                    dr.advance()
                    m.next = "WAIT"
        self._output(m, o_tag, otags)
        return m

    def _walk_registers(self, dr: TileWalk, rl: RowLanes | None) -> _Walk:
        """The drain's walk registers over the tile ``dr`` is at; with row lanes ``rl`` also
        the lane's output depth and its row group's first row and voxel."""
        core = self.core
        Td, Tr, Tc, G = core.td, core.tr, core.tc, core.out_groups
        rows = {} if rl is None else dict(
            do=Signal(range(Td + 1), name="do"), u_row=Signal(range(2 * Tr + 1), name="u_row"),
            u_vox=Signal(range(2 * Tr * Tc + 1), name="u_vox"), rows=rl.rows)
        return _Walk(**rows,
            dr=dr, dv=Signal(range(Td + 1), name="dv"), dg=Signal(range(G + 1), name="dg"),
            dh=Signal(16, name="dh"), dw=Signal(16, name="dw"),
            dvox=Signal(range(Tr * Tc + 1), name="dvox"),
            dvox_row=Signal(range(Tr * Tc + 1), name="dvox_row"),
            # dv*Tr*Tc: the partial sums of depth dv (one lane)
            dv_base=Signal(range(Td * Tr * Tc + 1), name="dv_base"),
            p_row=Signal(range(Tr * Tc + 1), name="p_row"),  # fused pool: pooled row * Tc
            # the read of a pooled window's word (row sh, column sw of the window)
            sh=Signal(name="sh"), sw=Signal(name="sw"))

    @staticmethod
    def _tile_start(w: _Walk) -> list:
        """The walk registers' values at a tile's first beat."""
        regs = [w.dv, w.dg, w.dh, w.dw, w.dvox, w.dvox_row, w.dv_base, w.p_row]
        regs += [] if w.do is None else [w.do, w.u_row, w.u_vox]
        return [r.eq(0) for r in regs]

    def _run_beat(self, m, w: _Walk, q: _Stage, fused, halved):
        """The ``RUN`` state's beat (when stage B advances): the partial-sum word, records
        and residual slots of the walk's beat are read into stage B with its output tag, and
        the walk steps in raster order (slot group fastest, then column, row, depth lane), to
        ``RELEASE`` after the tile's last beat. With a fused pool the tag is the pooled voxel's
        and only the beat completing its window (``q.end``) writes it. With row lanes a lane
        has the rows of its row group up to the tile's last (``u_row + dh``), the lanes its
        depths then row groups up to the group holding the tile's last row."""
        Tr, Tc = self.core.tr, self.core.tc
        dr = w.dr
        rows = w.do is not None
        # Without row lanes: the lane is the output depth, every lane has the tile's rows.
        do, u_vox = (w.do, w.u_vox) if rows else (w.dv, 0)
        last_g = w.dg == dr.groups_m - 1
        last_w = w.dw == dr.ext[2] - 1
        if rows:  # (rl.rows = tile[1] >= ext[1] and u_row = 0 without row lanes)
            last_d = w.do == dr.ext[0] - 1
            last_v = last_d & (w.u_row + w.rows >= dr.ext[1])
            last_h = (w.u_row + w.dh == dr.ext[1] - 1) | (w.dh == w.rows - 1)
        else:
            last_v = w.dv == dr.ext[0] - 1
            last_h = w.dh == dr.ext[1] - 1
        with m.If(q.adv):
            m.d.comb += [self.ps_en.eq(1), self.records.en.eq(1)]
            if self.res_depth is not None:
                m.d.comb += self.res_en.eq(1)
            # pool_fuses: a tile's extents are multiples of the windows, so its last beat
            # completes its last window.
            odd = [w.dv[0], w.dh[0], w.dw[0]]
            m.d.sync += [q.valid.eq(1), q.v.eq(w.dv), q.g.eq(w.dg),
                         q.end.eq((~halved[0] | odd[0]) & (~halved[1] | odd[1])
                                  & (~halved[2] | odd[2])),
                         q.tag.lane.eq(Mux(halved[0], do >> 1, do)), q.tag.group.eq(w.dg),
                         q.tag.addr.eq(Mux(fused, w.p_row + Mux(halved[2], w.dw >> 1, w.dw),
                                           w.dvox + u_vox)),
                         q.tag.last.eq(last_g & last_v & last_w & last_h),
                         q.tag.groups.eq(dr.groups_m)]
            if rows:
                m.d.sync += q.o.eq(w.do)
            m.d.sync += [q.tag[f].eq(Mux(halved[a], dr.ext[a] >> 1, dr.ext[a]))
                         for a, f in enumerate("dhw")]
            with m.If(~last_g):
                m.d.sync += w.dg.eq(w.dg + 1)
            with m.Else():
                m.d.sync += w.dg.eq(0)
                with m.If(~last_w):
                    m.d.sync += [w.dw.eq(w.dw + 1), w.dvox.eq(w.dvox + 1)]
                with m.Else():
                    m.d.sync += w.dw.eq(0)
                    with m.If(~last_h):
                        m.d.sync += [w.dh.eq(w.dh + 1), w.dvox_row.eq(w.dvox_row + Tc),
                                     w.dvox.eq(w.dvox_row + Tc)]
                        with m.If(~halved[1] | odd[1]):
                            m.d.sync += w.p_row.eq(w.p_row + Tc)
                    with m.Else():
                        m.d.sync += [w.dh.eq(0), w.dvox.eq(0), w.dvox_row.eq(0), w.p_row.eq(0)]
                        with m.If(~last_v):
                            m.d.sync += [w.dv.eq(w.dv + 1), w.dv_base.eq(w.dv_base + Tr * Tc)]
                            if rows:
                                self._next_lane(m, w, last_d, Tc)
                        with m.Else():
                            m.next = "RELEASE"

    @staticmethod
    def _next_lane(m, w: _Walk, last_d, Tc: int):
        """Row lanes: the next lane's output depth, and after the group's last depth the next
        row group's first row and voxel (``Tc`` voxels a row)."""
        with m.If(~last_d):
            m.d.sync += w.do.eq(w.do + 1)
        with m.Else():
            m.d.sync += [w.do.eq(0), w.u_row.eq(w.u_row + w.rows),
                         w.u_vox.eq(w.u_vox + mul_const(w.rows, Tc))]

    def _carry_start(self, m, d, dr, cmaxpool):
        """Statements of a tile's start setting CMaxPool's carry controls for it (on a core
        with a carry): the carried axes save their last position, and use the carried one past
        the tile's low edge unless the tile is the map's first along the axis; the tile's
        regions (:meth:`~fcircnn.arch.geometry.PoolCarry.base`); ``restart`` the cycle
        after."""
        if self.carry is None:
            return
        c = self.post_carry
        carried = carried_axes(d.op, d.flags, d.pool_window)
        m.d.sync += [c.restart.eq(1)]
        for a in range(3):
            m.d.sync += [c.use[a].eq(cmaxpool & carried[a] & (dr.t[a] != 0)),
                         c.save[a].eq(cmaxpool & carried[a]),
                         c.base[a].eq(self.carry.base(a, dr.t[1], dr.t[2], mul_const))]

    def _psum_pool(self, m, fused, halved):
        """The :class:`~fcircnn.hw.psum_pool.PartialSumPool` of a core with a fused pool
        (``None`` otherwise) and whether the layer's pool is taken on it (a fused pool of one
        depth)."""
        pooled_drain = Signal()
        if not self.geometry.fused_pool:
            return None, pooled_drain
        m.submodules.psum_pool = pool = PartialSumPool(self.core.tm, self.core.lanes)
        m.d.comb += [pooled_drain.eq(fused & ~halved[0]), pool.acc.eq(self.acc)]
        return pool, pooled_drain

    def _output(self, m, o_tag, otags):
        """The post chain's output into the output buffer, at the voxel, lane and group of its
        tag (the oldest in ``otags``)."""
        out_i, post_o = self.out_i, self.post_o
        m.d.comb += [out_i.payload.lane.eq(o_tag.lane), out_i.payload.group.eq(o_tag.group),
                     out_i.payload.addr.eq(o_tag.addr), out_i.payload.last.eq(o_tag.last),
                     out_i.payload.slots.eq(post_o.payload),
                     self.out_shape.groups.eq(o_tag.groups), self.out_shape.d.eq(o_tag.d),
                     self.out_shape.h.eq(o_tag.h), self.out_shape.w.eq(o_tag.w),
                     out_i.valid.eq(post_o.valid), post_o.ready.eq(out_i.ready),
                     otags.r_en.eq(post_o.valid & out_i.ready)]
