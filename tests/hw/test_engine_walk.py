"""The tile walk in RTL (:class:`fcircnn.hw.engine_walk.TileWalk`) step for step against the
walk in Python (:mod:`fcircnn.arch.walk`): the same iterations in the same order, with the same
tile geometry and the same addresses, with and without the ``nt`` loop."""

from __future__ import annotations

import pytest
from amaranth.hdl import Module, Signal, Value
from amaranth.sim import Simulator
from engine_bench import conv_cases, desc_value, minner_cases

from fcircnn.arch.descriptor import FLAG_POOL, OP_CONV, descriptor_layout
from fcircnn.arch.walk import conv_passes, conv_tiles, halved_axes
from fcircnn.hw.engine_walk import TileWalk, fused_pool_axes


def rtl_walk(case, with_nt):
    """Every iteration of the RTL walk: the state after reset and after each ``advance``
    (the weight offset only with the ``nt`` loop: the walkers without it load no weights;
    the n-tile's input groups only for ``Tn > 16``: below, the loader loads one group)."""
    m = Module()
    desc = Signal(descriptor_layout())
    start, step = Signal(), Signal()
    walk = TileWalk(m, "w", desc, case.core, case.geometry.stride, with_nt=with_nt)
    with m.If(start):
        walk.reset(desc)
    with m.Elif(step):
        walk.advance()
    seen = []

    async def bench(ctx):
        ctx.set(Value.cast(desc), desc_value(case.desc))
        ctx.set(start, 1)
        await ctx.tick()
        ctx.set(start, 0)
        while not ctx.get(walk.done):
            seen.append((ctx.get(walk.mt), tuple(ctx.get(t) for t in walk.t),
                         tuple(ctx.get(e) for e in walk.ext), ctx.get(walk.groups_m),
                         ctx.get(walk.last_lanes), ctx.get(walk.nt),
                         ctx.get(walk.groups_n) if case.core.tn > 16 else None,
                         ctx.get(walk.nt_in),
                         ctx.get(walk.w_mt) + ctx.get(walk.w_nt) if with_nt else None,
                         ctx.get(walk.mt_out) + sum(ctx.get(o) for o in walk.out_acc)))
            ctx.set(step, 1)
            await ctx.tick()
            ctx.set(step, 0)
            await ctx.tick()
            assert len(seen) < 100_000

    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return seen


def python_walk(case, with_nt):
    d, core = case.desc, case.core
    out = []
    pairs = conv_passes(d, core) if with_nt else ((t, 0) for t in conv_tiles(d, core))
    for tile, nt in pairs:
        rest = -(-d.in_slots // 8) - nt * core.in_groups
        offset = tile.mt * d.out_mt_step + sum(i * s for i, s in zip(tile.t, d.out_step,
                                                                    strict=True))
        out.append((tile.mt, tile.t, tile.ext, tile.groups, tile.last_lanes, nt,
                    min(rest, core.in_groups) if core.tn > 16 else None,
                    (nt // core.subs) * d.in_nt_step,
                    (tile.mt * d.n_tiles + nt) * d.weight_tile_bytes if with_nt else None,
                    offset))
    return out


@pytest.mark.parametrize("with_nt", [True, False], ids=["with-nt", "tiles"])
@pytest.mark.parametrize("case", conv_cases() + minner_cases(), ids=str)
def test_the_rtl_walk_is_the_python_walk(case, with_nt):
    assert rtl_walk(case, with_nt) == python_walk(case, with_nt)


@pytest.mark.parametrize("fused_pool", [True, False])
def test_fused_pool_axes_are_the_pythons(fused_pool):
    case = next(c for c in conv_cases() if c.desc.flags & FLAG_POOL)
    m = Module()
    desc = Signal(descriptor_layout())
    fused, halved = fused_pool_axes(m, desc, fused_pool)

    async def bench(ctx):
        for d in (case.desc, conv_cases()[-1].desc):
            ctx.set(Value.cast(desc), desc_value(d))
            expect = halved_axes(d, fused_pool)
            assert tuple(bool(ctx.get(h)) for h in halved) == expect
            assert bool(ctx.get(fused)) == (fused_pool and d.op == OP_CONV
                                            and bool(d.flags & FLAG_POOL))

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
