"""The tile walk of a conv layer in RTL: the loop nest every walker of the layer engine
(:mod:`~fcircnn.hw.engine_loader`, :mod:`~fcircnn.hw.engine_compute`,
:mod:`~fcircnn.hw.engine_drain`, :mod:`~fcircnn.hw.engine_store`) steps through on its own, and
the signatures every walker shares with the engine's control (:mod:`~fcircnn.hw.engine_control`).

The same walk in Python is :func:`fcircnn.arch.walk.tile_walk` (the compiler's and the
performance model's view); ``tests/hw/test_engine_walk.py`` holds the two equal.
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import Out

from fcircnn.arch.descriptor import (
    FLAG_MINNER,
    FLAG_POOL,
    FLAG_ROWLANES,
    OP_POOL,
    descriptor_layout,
)
from fcircnn.arch.geometry import MAX_TILE, SLOTS_PER_BEAT, CoreGeometry, lanes_take_rows

from .common import mul_small

__all__ = ["RowLanes", "TileWalk", "control_signature", "fail_signature", "fused_pool_axes"]


def control_signature() -> wiring.Signature:
    """What the engine's control gives every walker, from the control's side.

    ``start``: the cycle a layer starts (engine idle), with its descriptor on ``new_desc``;
    ``desc``: the running layer's descriptor (latched at ``start``); ``failed``: a transfer
    failed, issue no more.
    """
    return wiring.Signature({"start": Out(1), "new_desc": Out(descriptor_layout()),
                             "desc": Out(descriptor_layout()), "failed": Out(1)})


def fail_signature(addr_width: int) -> wiring.Signature:
    """A walker's failure report, from the walker's side: ``valid`` (one cycle) with the
    error code (:data:`~fcircnn.arch.registers.ERROR_CODES`) and the failing address."""
    return wiring.Signature({"valid": Out(1), "code": Out(8), "addr": Out(addr_width)})


def fused_pool_axes(m: Module, d, fused_pool: bool) -> tuple[Signal, list[Signal]]:
    """``fused``: the layer ``d`` pools in the drain (``FLAG_POOL`` on a conv descriptor);
    ``halved``: per axis, whether its stride-2 window halves the tile
    (:func:`~fcircnn.arch.walk.halved_axes`). Constant 0 when the core has no fused pool."""
    fused = Signal()
    halved = [Signal(name=f"halved{a}") for a in "dhw"]
    if fused_pool:
        m.d.comb += fused.eq((d.op != OP_POOL) & (d.flags & FLAG_POOL).bool())
        m.d.comb += [halved[a].eq(fused & (d.pool_stride[a] == 2)) for a in range(3)]
    return fused, halved


class RowLanes:
    """The row lanes of the layer a walker runs (:data:`~fcircnn.arch.descriptor.
    FLAG_ROWLANES`), registered at ``ctl.start`` from the new descriptor: ``shift``, log2 of
    its row groups ``R = L / tile[0]`` (0 without row lanes), and ``rows``, the rows of a
    tile each lane computes (``Rh = ceil(tile[1] / R)``: :func:`~fcircnn.arch.geometry.
    lane_rows`; ``tile[1]`` without). Lane ``v`` computes depth ``v mod tile[0]`` and rows
    ``(v >> (log2 L - shift)) * Rh ..`` of each tile. On a core of one lane, ``L`` not a
    power of two, or not ``built`` for row lanes, ``shift`` is the constant 0 (the
    accelerator refuses the flag there)."""

    def __init__(self, m: Module, ctl, lanes: int, built: bool, name: str):
        self.lanes = lanes
        self.log_lanes = lanes.bit_length() - 1
        self.shift = Signal(range(self.log_lanes + 1), name=f"{name}_row_shift")
        self.rows = Signal(range(MAX_TILE + 1), name=f"{name}_lane_rows")
        d = ctl.new_desc
        if not self.enabled(lanes, built):
            return
        with m.If(ctl.start):
            m.d.sync += [self.rows.eq(d.tile[1]), self.shift.eq(0)]
            with m.If((d.flags & FLAG_ROWLANES).bool()):
                with m.Switch(d.tile[0]):
                    for s in range(1, self.log_lanes + 1):
                        with m.Case(lanes >> s):
                            m.d.sync += [self.shift.eq(s),
                                         self.rows.eq((d.tile[1] + (1 << s) - 1) >> s)]

    @staticmethod
    def fault(desc, lanes: int, built: bool):
        """Whether descriptor ``desc`` (Amaranth values) has row lanes a core of ``lanes``
        depth lanes cannot run: not :meth:`enabled`, or a tile depth other than ``lanes /
        R`` for a power of two ``R > 1``."""
        on = (desc.flags & FLAG_ROWLANES).bool()
        if not RowLanes.enabled(lanes, built):
            return on
        depths = [desc.tile[0] == lanes >> s for s in range(1, lanes.bit_length())]
        ok = depths[0]
        for depth in depths[1:]:
            ok = ok | depth
        return on & ~ok

    @staticmethod
    def enabled(lanes: int, built: bool) -> bool:
        """Whether a core of ``lanes`` depth lanes built with row lanes (``built``:
        :attr:`~fcircnn.arch.geometry.EngineGeometry.row_lanes`) runs them
        (:func:`~fcircnn.arch.geometry.lanes_take_rows`)."""
        return built and lanes_take_rows(lanes)


class TileWalk:
    """Counters of the layer's tile loop nest ``mt > (td, th, tw) > nt`` (with
    ``FLAG_MINNER`` ``(td, th, tw) > mt > nt``) and the geometry of the current tile, kept in
    registers next to the counters.

    One instance per walker (loader, compute, drain, store), each advancing on its own. The tile
    geometry (extents, last-iteration flags, slot groups of the m-tile) is computed with the
    counters' next values in :meth:`reset` and :meth:`advance`, so it is valid whenever the
    counters are and its consumers start from registers (timing: see the engine docstring).
    """

    def __init__(self, m: Module, name: str, desc, core: CoreGeometry,
                 stride: tuple[int, int, int], *, with_nt: bool):
        self.m, self.desc, self.with_nt, self.name = m, desc, with_nt, name
        self.core, self.stride_max = core, stride
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
        self.nt_sub = S(range(max(2, core.subs)), "nt_sub")
        self.done = S(1, "done")
        # Tile geometry: rest = conv_shape - conv_lo, ext = min(rest, tile) (the tile's extent,
        # clipped at the map's edge), the last-iteration flags of each loop, and the m-tile's
        # slot groups and slots in its last group.
        self.rest = [S(16, f"rest{a}") for a in "dhw"]
        self.ext = [S(16, f"ext{a}") for a in "dhw"]
        self.last_t = [S(1, f"last_t{a}") for a in "dhw"]
        self.last_nt = S(1, "last_nt")
        self.last_mt = S(1, "last_mt")
        self.groups_m = S(range(core.out_groups + 1), "groups_m")
        self.last_lanes = S(range(SLOTS_PER_BEAT + 1), "last_lanes")
        # Input slot groups of the n-tile (the layer's, not the tile's Tn/16: a layer with
        # fewer input channels than Tn loads only those) and the groups from it on.
        self.G_in = core.in_groups
        self.groups_n = S(range(self.G_in + 1), "groups_n")
        self.n_rest = S(16, "n_rest")
        self.last_tile = self.last_t[0] & self.last_t[1] & self.last_t[2]
        # FLAG_MINNER: the m-tiles are the loop inside the tiles; the passes of a tile's later
        # m-tiles (``reuses_input``) reuse the input box its first m-tile's pass read.
        self.inner = S(1, "minner")
        m.d.comb += self.inner.eq((desc.flags & FLAG_MINNER).bool())
        self.reuses_input = self.inner & (self.mt != 0)
        # Cycles until registers computed from the counters (input_box) are valid again.
        self.settle = S(range(3), "settle")
        self.settled = self.settle == 0
        with m.If(~self.settled):
            m.d.sync += self.settle.eq(self.settle - 1)

    def _m_tile(self, slots):
        """Statements setting ``groups_m``/``last_lanes`` for an m-tile with ``slots`` output
        slots from it on (``Tm/2`` a multiple of 8: the last group is full unless it is the
        layer's last)."""
        half = self.core.tm // 2
        part = slots < half
        return [self.groups_m.eq(Mux(part, (slots + 7) >> 3, self.core.out_groups)),
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

    def _next_m_tile(self):
        """Statements stepping to the next m-tile."""
        d, core = self.desc, self.core
        next_slots = self.mt_slots - core.tm // 2
        return [self.mt.eq(self.mt + 1), self.last_mt.eq(self.mt + 2 == d.m_tiles),
                self.mt_out.eq(self.mt_out + d.out_mt_step),
                self.mt_post.eq(self.mt_post + core.tm * 16),
                self.mt_slots.eq(next_slots), *self._m_tile(next_slots)]

    def _first_m_tile(self):
        """Statements returning to the first m-tile (``FLAG_MINNER``: the next tile's)."""
        d = self.desc
        return [self.mt.eq(0), self.last_mt.eq(d.m_tiles <= 1), self.mt_out.eq(0),
                self.mt_post.eq(0), self.mt_slots.eq(d.out_slots), *self._m_tile(d.out_slots)]

    def advance(self):
        """Step to the next iteration (``done`` after the last): ``nt`` fastest, then the tiles
        (``w`` fastest) and the m-tiles, with ``FLAG_MINNER`` the m-tiles before the tiles."""
        m, d, core = self.m, self.desc, self.core
        m.d.sync += self.settle.eq(2)

        def tiles_step(a=2):
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
                    # (with FLAG_MINNER the m-tiles wrapped first: last_mt is set)
                    with m.If(self.last_mt):
                        m.d.sync += self.done.eq(1)
                    with m.Else():
                        m.d.sync += self._next_m_tile()

        def outer_step():
            with m.If(self.inner & ~self.last_mt):
                m.d.sync += self._next_m_tile()
            with m.Else():
                with m.If(self.inner):
                    m.d.sync += self._first_m_tile()
                tiles_step()

        if not self.with_nt:
            outer_step()
            return
        with m.If(~self.last_nt):
            m.d.sync += [self.nt.eq(self.nt + 1), self.last_nt.eq(self.nt + 2 == d.n_tiles),
                         self.w_nt.eq(self.w_nt + d.weight_tile_bytes),
                         *self._n_tile(self.n_rest - self.G_in)]
            if core.subs > 1:
                with m.If(self.nt_sub == core.subs - 1):
                    m.d.sync += [self.nt_sub.eq(0), self.nt_in.eq(self.nt_in + d.in_nt_step)]
                with m.Else():
                    m.d.sync += self.nt_sub.eq(self.nt_sub + 1)
            else:
                m.d.sync += self.nt_in.eq(self.nt_in + d.in_nt_step)
        with m.Else():
            m.d.sync += [self.nt.eq(0), self.nt_sub.eq(0), self.nt_in.eq(0), self.w_nt.eq(0),
                         self.last_nt.eq(d.n_tiles <= 1), *self._n_tile((d.in_slots + 7) >> 3)]
            # The next m-tile's weights follow this one's; with FLAG_MINNER the first
            # m-tile's follow the last's pass.
            next_w = self.w_mt + self.w_nt + d.weight_tile_bytes
            with m.If(self.inner):
                m.d.sync += self.w_mt.eq(Mux(self.last_mt, 0, next_w))
            with m.Elif(self.last_tile):
                m.d.sync += self.w_mt.eq(next_w)
            outer_step()

    def input_box(self, box, span, base, groups):
        """Register this tile's input box (padding included) in ``box`` (a box_layout signal)
        and its extents ``pre + len + post`` per axis in ``span`` (three signals).

        Two register stages: ``span`` is valid one cycle after the counters, ``box`` two, i.e.
        both once :attr:`settled` (the loader waits for it).
        """
        m, d = self.m, self.desc
        n = self.name
        base_q = Signal(32, name=f"{n}_in_base")
        terms = []
        m.d.sync += base_q.eq(base)
        for a, axis in enumerate("dhw"):
            s, s_max = d.stride[a], self.stride_max[a]
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
        ``halved`` (three 1-bit values): axes whose extent a fused stride-2 pool halves."""
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
