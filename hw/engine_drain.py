"""The layer engine's drain walker: finished tiles from the partial-sum buffer through the post
chain into the output buffer."""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, fifo, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from fcircnn.arch.descriptor import FLAG_CRELU, FLAG_RESIDUAL, OP_POOL
from fcircnn.arch.geometry import CoreGeometry, EngineGeometry
from fcircnn.models.layout import SLOTS_PER_BEAT

from .buffer_output import output_in_layout, output_shape_layout
from .buffer_psum import psum_layout
from .common import check_positive, rejecting
from .complex_mul_pair import ACT_WIDTH, complex_layout
from .engine_loader import POST_RECORD_BITS, params_signature
from .engine_walk import TileWalk, control_signature, fused_pool_axes
from .post_cbn import cbn_input_layout
from .post_chain import post_config_layout
from .post_quantize import slot_layout

__all__ = ["EngineDrain", "post_chain_size"]


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

    With a fused pool (``FLAG_POOL`` on a conv descriptor) CMaxPool pools each tile as its own
    map (``post_cfg``), its slot groups interleaved, and only the pooled voxels reach the output
    buffer; a tile starts once the previous one has left CMaxPool. Otherwise the pool is
    bypassed.

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
        if res_depth is not None:
            act = data.ArrayLayout(data.ArrayLayout(complex_layout(ACT_WIDTH), core.tm // 2),
                                   core.td)
            ports |= {"res_addr": Out(range(res_depth)), "res_en": Out(1),
                      "res_release": Out(1), "res_valid": In(1), "res_act": In(act)}
        super().__init__(ports)

    def _post_input(self, m, q_v, q_g):
        """Drive ``post_i.payload`` from the partial sums, records and residual slots of the
        beat in stage B (depth lane ``q_v``, slot group ``q_g``)."""
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
            with m.Switch(q_v * G + q_g):
                for v in range(Td):
                    for g in range(G):
                        with m.Case(v * G + g):
                            lv = v if L == Td else 0  # one lane: the word of depth v was read
                            m.d.comb += [acc_re.eq(self.acc[lv][g * 8 + lane].re),
                                         acc_im.eq(self.acc[lv][g * 8 + lane].im)]
                            if self.res_depth is not None:
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

    def _post_config(self, m, d, fused, pool_cfg_size, pool_cfg_groups):
        """Drive ``post_cfg`` for the conv layer ``d``."""
        cfg = self.post_cfg
        m.d.comb += [cfg.cbn.bypass.eq(0), cfg.cbn.residual.eq((d.flags & FLAG_RESIDUAL).bool()),
                     cfg.quantize.bypass.eq(0),
                     cfg.crelu.bypass.eq(~(d.flags & FLAG_CRELU).bool()),
                     cfg.pool.bypass.eq(~fused),
                     cfg.pool.groups.eq(pool_cfg_groups if self.geometry.fused_pool else 1)]
        for a in range(3):
            # A fused pool pools the drain's tile (set when the drain starts it). Else the
            # (bypassed) pool sees a 1-voxel map: its axis stages treat positions beyond the
            # size as padding and would otherwise run on a size-0 map while idle.
            m.d.comb += [cfg.pool.window[a].eq(d.pool_window[a]),
                         cfg.pool.stride[a].eq(d.pool_stride[a]),
                         cfg.pool.padding[a].eq(d.pool_padding[a]),
                         cfg.pool.size[a].eq(pool_cfg_size[a])]

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
        post_i, post_o = self.post_i, self.post_o
        post_take = post_i.valid & post_i.ready
        d_adv = Signal()
        m.d.comb += d_adv.eq((~q_valid | post_i.ready) & otags.w_rdy)
        with m.If(d_adv):
            m.d.sync += q_valid.eq(0)
        self._post_input(m, q_v, q_g)
        self._post_config(m, d, fused, pool_cfg_size, pool_cfg_groups)
        # The parameter memory's read port is enabled with the other reads only (its enable
        # would otherwise default to 1 and, while the post chain stalls a beat of one group,
        # replace that beat's records with the next group's).
        m.d.comb += [self.records.en.eq(0), self.records.addr.eq(Mux(dr.mt[0], G, 0) + dg),
                     self.ps_addr.eq(dvox if L == Td else dv_base + dvox)]
        if has_res:
            m.d.comb += self.res_addr.eq(dvox)
        m.d.comb += self.mt.eq(dr.mt)
        # Tags of the beats that leave the post chain: every beat, or with a fused pool the
        # beats completing a window (the pool emits its voxel as they pass).
        m.d.comb += [post_i.valid.eq(q_valid), otags.w_en.eq(post_take & q_end),
                     otags.w_data.eq(q_tag)]
        if geo.fused_pool:
            with m.If(ctl.start):
                m.d.sync += pool_busy.eq(0)
            with m.Elif(fused & post_take & q_tag.last):
                m.d.sync += pool_busy.eq(1)
            with m.Elif(self.out_i.valid & self.out_i.ready & o_tag.last):
                m.d.sync += pool_busy.eq(0)

        d_last_g = dg == dr.groups_m - 1
        d_last_v = dv == dr.ext[0] - 1
        d_last_w = dw == dr.ext[2] - 1
        d_last_h = dh == dr.ext[1] - 1
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
                    m.d.comb += [self.ps_en.eq(1), self.records.en.eq(1)]
                    if has_res:
                        m.d.comb += self.res_en.eq(1)
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
                    m.d.comb += self.ps_release.eq(1)
                    if has_res:
                        m.d.comb += self.res_release.eq(residual)
                    dr.advance()
                    m.next = "WAIT"
        # Post chain output -> output buffer.
        out_i = self.out_i
        m.d.comb += [out_i.payload.lane.eq(o_tag.lane), out_i.payload.group.eq(o_tag.group),
                     out_i.payload.addr.eq(o_tag.addr), out_i.payload.last.eq(o_tag.last),
                     out_i.payload.slots.eq(post_o.payload),
                     self.out_shape.groups.eq(o_tag.groups), self.out_shape.d.eq(o_tag.d),
                     self.out_shape.h.eq(o_tag.h), self.out_shape.w.eq(o_tag.w),
                     out_i.valid.eq(post_o.valid), post_o.ready.eq(out_i.ready),
                     otags.r_en.eq(post_o.valid & out_i.ready)]
        return m
