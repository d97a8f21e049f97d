"""The layer engine's compute walker: feeds the PE array from the input and weight buffers and
its sums to the partial-sum buffer."""

from __future__ import annotations

from amaranth.hdl import Const, Module, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from fcircnn.arch.descriptor import OP_POOL
from fcircnn.arch.geometry import CoreGeometry, EngineGeometry

from .buffer_psum import psum_in_layout
from .common import check_positive, mul_small, rejecting
from .engine_walk import RowLanes, TileWalk, control_signature
from .pe_array import in_layout, out_layout

__all__ = ["EngineCompute"]


class EngineCompute(wiring.Component):
    """Per ``(tile, nt)`` of a conv layer (:class:`TileWalk`), one PE-array beat per output
    voxel and kernel tap.

    With ``lanes = Td`` (the core unrolls ``td``) the tile's ``Td`` output depths go in
    parallel, one beat per ``(r, c, tap)``; with ``lanes = 1`` one depth at a time, one beat per
    ``(d, r, c, tap)``. Taps run ``kc`` fastest, then ``kr``, ``kd``; voxels ``c``, then ``r``
    (then the depth with one lane). The sums of every voxel go to ``psum_i`` tagged with the
    voxel's address, whether they add to the stored partial sums (``nt > 0``) and whether they
    complete the tile (the last ``nt``). With row lanes
    (:data:`~fcircnn.arch.descriptor.FLAG_ROWLANES`, :class:`~fcircnn.hw.engine_walk.RowLanes`)
    the lanes also take rows of the tile: a pass steps through ``min(Rh, ext_h)`` rows, every
    lane reading its own rows at the same buffer address (the input buffer stores each lane's
    rows from its first).

    Contract
    --------
    * Waits for ``in_valid & w_valid`` (both tiles loaded; ``dma_stall`` high meanwhile),
      reads them (``in_en``/``w_en`` with ``in_addr = dep + row + col + tap``, ``w_addr =
      tap``), then releases both (``in_release``/``w_release``) after the pass's last read;
      with ``FLAG_MINNER`` the input box only after its tile's last m-tile's pass (the other
      passes of the tile read the same box).
    * The PE array's sums (``pe_o``) of a voxel come at least 3 cycles after the beat with
      ``last`` (the tag FIFO's latency; :class:`~fcircnn.hw.pe_array.PEArray`'s pipeline is
      longer).
    * ``pe_busy``: the PE array takes a beat this cycle.
    * Ends after the layer's last pass, or at ``ctl.failed`` while waiting.

    Parameters
    ----------
    core : CoreGeometry
    geometry : EngineGeometry
    in_depth, in_plane, in_width : int
        The input buffer's words per tile, per plane and per row
        (:class:`~fcircnn.hw.buffer_input.InputBuffer`).
    """

    def __init__(self, core: CoreGeometry, geometry: EngineGeometry, *, in_depth: int,
                 in_plane: int, in_width: int):
        with rejecting(self):
            if not isinstance(core, CoreGeometry) or not isinstance(geometry, EngineGeometry):
                raise TypeError("core must be a CoreGeometry and geometry an EngineGeometry")
            for name, value in (("in_depth", in_depth), ("in_plane", in_plane),
                                ("in_width", in_width)):
                check_positive(name, value)
        self.core, self.geometry = core, geometry
        self.in_depth, self.in_plane, self.in_width = in_depth, in_plane, in_width
        L = core.lanes
        pe_in = in_layout(core.tn, core.tm, core.B, L)
        super().__init__({
            "ctl": In(control_signature()),
            "in_addr": Out(range(in_depth)), "in_en": Out(1), "in_sub": Out(range(core.subs)),
            "in_release": Out(1), "in_valid": In(1), "act": In(pe_in["act"].shape),
            "w_addr": Out(range(geometry.taps)), "w_en": Out(1), "w_release": Out(1),
            "w_valid": In(1), "w": In(pe_in["w"].shape),
            "pe_i": Out(stream.Signature(pe_in)),
            "pe_o": In(stream.Signature(out_layout(core.tm, L))),
            "psum_i": Out(stream.Signature(psum_in_layout(core.tm, L, core.tr * core.td // L,
                                                          core.tc))),
            "pe_busy": Out(1),
            "dma_stall": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        core, geo, ctl = self.core, self.geometry, self.ctl
        Td, Tr, Tc, L = core.td, core.tr, core.tc, core.lanes
        d = ctl.desc
        cp = TileWalk(m, "cp", d, core, geo.stride, with_nt=True)
        with m.If(ctl.start):
            cp.reset(ctl.new_desc)
        rl = RowLanes(m, ctl, L, geo.row_lanes, "cp")

        K = [d.kernel[a] for a in range(3)]
        win, plane, depth = self.in_width, self.in_plane, self.in_depth
        r = Signal(16)
        c = Signal(16)
        kd = Signal(8)
        kr = Signal(8)
        kc = Signal(8)
        tap = Signal(range(geo.taps + 1))
        row_base = Signal(range(depth + 1))   # r*sr*Win
        col_base = Signal(range(depth + 1))   # c*sc
        tap_off = Signal(range(depth + 1))    # kd*plane + kr*Win + kc
        tap_row = Signal(range(depth + 1))    # kd*plane + kr*Win
        tap_plane = Signal(range(depth + 1))  # kd*plane
        vox = Signal(range(Td * Tr * Tc + 1))       # [v*Tr*Tc +] r*Tc + c
        vox_row = Signal(range(Td * Tr * Tc + 1))
        vox_plane = Signal(range(Td * Tr * Tc + 1))  # v*Tr*Tc (one lane)
        cv = Signal(range(Td + 1))                  # output depth in the tile (one lane)
        dep_base = Signal(range(depth + 1))   # v*sd*plane (one lane)
        sd_plane = Signal(range(depth + 1))
        sr_win = Signal(range(depth + 1))
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
        pe_i = self.pe_i
        pe_take = pe_i.valid & pe_i.ready
        advance = (~b_valid | pe_i.ready) & tags.w_rdy
        m.d.comb += [pe_i.valid.eq(b_valid), pe_i.payload.act.eq(self.act),
                     pe_i.payload.w.eq(self.w), pe_i.payload.first.eq(b_first),
                     pe_i.payload.last.eq(b_last),
                     tags.w_data.eq(b_tag), tags.w_en.eq(pe_take & b_last),
                     self.pe_busy.eq(pe_take)]
        with m.If(advance):
            m.d.sync += b_valid.eq(0)
        last_tap = (kc == K[2] - 1) & (kr == K[1] - 1) & (kd == K[0] - 1)
        last_c = c == cp.ext[2] - 1
        last_r = r == cp.ext[1] - 1
        if RowLanes.enabled(L, geo.row_lanes):  # rl.rows = tile[1] >= ext[1] without them
            last_r = last_r | (r == rl.rows - 1)
        last_v = (cv == cp.ext[0] - 1) if L == 1 else Const(1)
        m.d.comb += [self.in_addr.eq(dep_base + row_base + col_base + tap_off),
                     self.w_addr.eq(tap),
                     self.in_sub.eq(cp.nt_sub if core.subs > 1 else 0)]
        with m.FSM(name="compute"):
            with m.State("IDLE"):
                with m.If(ctl.start & (ctl.new_desc.op != OP_POOL)):
                    m.next = "WAIT"
            with m.State("WAIT"):
                with m.If(ctl.failed | cp.done):
                    m.next = "IDLE"
                with m.Elif(self.in_valid & self.w_valid):
                    m.d.sync += [r.eq(0), c.eq(0), kd.eq(0), kr.eq(0), kc.eq(0), tap.eq(0),
                                 row_base.eq(0), col_base.eq(0), tap_off.eq(0), tap_row.eq(0),
                                 tap_plane.eq(0), vox.eq(0), vox_row.eq(0), vox_plane.eq(0),
                                 cv.eq(0), dep_base.eq(0)]
                    m.next = "RUN"
                with m.Else():
                    m.d.comb += self.dma_stall.eq(1)
            with m.State("RUN"):
                with m.If(advance):
                    m.d.comb += [self.in_en.eq(1), self.w_en.eq(1)]
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
                                # the read registers until the PE array takes it); with
                                # FLAG_MINNER the input box after the tile's last m-tile.
                                m.d.comb += [self.in_release.eq(~cp.inner | cp.last_mt),
                                             self.w_release.eq(1)]
                                cp.advance()
                                m.next = "WAIT"

        # PE array sums -> partial-sum buffer, tagged in order.
        tag_out = data.View(b_tag.shape(), tags.r_data)
        psum_i = self.psum_i
        m.d.comb += [psum_i.valid.eq(self.pe_o.valid), psum_i.payload.acc.eq(self.pe_o.payload),
                     psum_i.payload.addr.eq(tag_out.addr),
                     psum_i.payload.accumulate.eq(tag_out.accumulate),
                     psum_i.payload.last.eq(tag_out.last), self.pe_o.ready.eq(psum_i.ready),
                     tags.r_en.eq(self.pe_o.valid & psum_i.ready)]
        return m
