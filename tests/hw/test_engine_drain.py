"""The layer engine's drain walker (:mod:`fcircnn.hw.engine_drain`) on Amaranth's simulator
against the Python walk (:func:`fcircnn.arch.walk.conv_tiles`): per tile, 8 slots a beat in
raster order (slot group fastest, then column, row, depth) with the partial sums, post records
(of the m-tile's parameter half) and residual slots of that beat, and the chain's output into
the output buffer at the (pooled, with a fused pool) voxel; with random back-pressure. A fused
pool of one depth is taken on the partial sums: per pooled voxel and lane one beat per group
whose parts are the window's largest (smallest where the multiplier is negative)."""

from __future__ import annotations

import dataclasses
import random
import zlib
from collections import deque

import pytest
from amaranth.sim import Simulator
from engine_bench import conv_cases, minner_cases, start

from fcircnn.arch.descriptor import row_groups_of
from fcircnn.arch.geometry import CoreGeometry, lane_rows, row_lane
from fcircnn.arch.walk import conv_tiles, halved_axes
from fcircnn.hw.engine_drain import EngineDrain

#: Fewest cycles a beat spends in the post chain (the drain's contract; the real chain's
#: pipeline is longer).
POST_LATENCY = 3


def acc(t, addr, v, s):
    """The partial sum (real part) of slot ``s`` of depth lane ``v`` at ``addr`` of tile
    ``t``; as a 7-bit value it survives the fake chain. Its windows' max and min are at
    varying voxels."""
    return (t * 7 + addr * 37 + v * 5 + s * 13) % 128


def acc_im(t, addr, v, s):
    """The imaginary part of the same partial sum."""
    return (t * 3 + addr * 53 + v * 11 + s * 7) % 128


def mult(half, g, lane):
    """The ``mult.re`` of the record of lane ``lane`` of group ``g`` in parameter half
    ``half``: both signs."""
    return (half * 31 + g * 11 + lane * 3) % 64 - 32


def mult_im(half, g, lane):
    """Its ``mult.im``: both signs, not those of ``mult.re``."""
    return (half * 7 + g * 5 + lane * 9) % 32 - 15


def fake_chain(re, im, m, r):
    """What the fake post chain outputs for sums ``re``, ``im``, ``mult.re`` ``m`` and
    residual ``r``."""
    return re % 128, (im ^ m ^ r) % 128


def res(t, addr, v, s):
    """The residual slot (real part)."""
    return (t * 5 + addr + v * 9 + s * 2) % 64


def ref_out(case):
    """Per output-buffer write: ``(lane, group, addr, last, re, im)`` with ``re`` the beat's
    sum and ``im`` its ``mult ^ res`` (what the fake chain outputs); per tile the shape."""
    d, core = case.desc, case.core
    halved = halved_axes(d, case.geometry.fused_pool)
    fused = any(halved) or (case.geometry.fused_pool and bool(d.flags & 8))
    out, shapes = [], []
    Tr, Tc = core.tr, core.tc
    residual = bool(d.flags & 4)
    pooled = fused and not halved[0]
    for t, tile in enumerate(conv_tiles(d, core)):
        shapes.append((tile.groups, *(e >> 1 if h else e for e, h in zip(tile.ext, halved,
                                                                          strict=True))))
        if pooled:
            out += ref_pooled(case, t, tile, halved)
            continue
        ed, eh, ew = tile.ext
        if row_groups_of(d.flags, d.tile[0], core.lanes) > 1:
            out += ref_row_lanes(case, t, tile)
            continue
        beats = [(v, h, w, g) for v in range(ed) for h in range(eh) for w in range(ew)
                 for g in range(tile.groups)]
        ends = [i for i, (v, h, w, g) in enumerate(beats)
                if all(not halved[a] or (v, h, w)[a] % 2 for a in range(3))]
        for i in ends:
            v, h, w, g = beats[i]
            lane = v >> 1 if halved[0] else v
            addr = ((h >> 1 if halved[1] else h) * Tc + (w >> 1 if halved[2] else w)
                    if fused else h * Tc + w)
            word = v * Tr * Tc + h * Tc + w if core.lanes == 1 else h * Tc + w
            vlane = 0 if core.lanes == 1 else v
            slots = [fake_chain(acc(t, word, vlane, g * 8 + s), acc_im(t, word, vlane, g * 8 + s),
                                mult(tile.mt & 1, g, s),
                                res(t, h * Tc + w, v, g * 8 + s) if residual else 0)
                     for s in range(8)]
            out.append((lane, g, addr, int(i == len(beats) - 1), slots))
    return out, shapes


def ref_row_lanes(case, t, tile):
    """The output-buffer writes of tile ``t`` of a descriptor with row lanes: per lane (its
    depth, then its row group) its rows of the tile (none past the tile's last), columns and
    slot groups; lane ``v``'s sums at its own voxel ``(r, c)``, written at its depth and row
    ``u * Rh + r`` (the residual read there)."""
    d, core = case.desc, case.core
    groups = row_groups_of(d.flags, d.tile[0], core.lanes)
    rows = lane_rows(d.tile[1], groups)
    eh, ew = tile.ext[1:]
    beats = [(v, *row_lane(core.lanes, groups, v), r, w, g) for v in range(core.lanes)
             for r in range(rows) for w in range(ew) for g in range(tile.groups)]
    beats = [b for b in beats if b[2] * rows + b[3] < eh]
    out = []
    for i, (v, dv, u, r, w, g) in enumerate(beats):
        word, addr = r * core.tc + w, (u * rows + r) * core.tc + w
        slots = [fake_chain(acc(t, word, v, g * 8 + s), acc_im(t, word, v, g * 8 + s),
                            mult(tile.mt & 1, g, s),
                            res(t, addr, dv, g * 8 + s) if d.flags & 4 else 0)
                 for s in range(8)]
        out.append((dv, g, addr, int(i == len(beats) - 1), slots))
    return out


def ref_pooled(case, t, tile, halved):
    """The output-buffer writes of tile ``t`` pooled on its partial sums: per pooled voxel
    (per depth first with one lane), per depth lane of the word, per group one beat of the
    window's largest parts (smallest where the multiplier is negative)."""
    core = case.core
    Tr, Tc = core.tr, core.tc
    ed, eh, ew = tile.ext
    sh, sw = (2 if halved[1] else 1), (2 if halved[2] else 1)
    order = ([(v, ph, pw) for ph in range(eh // sh) for pw in range(ew // sw) for v in range(ed)]
             if core.lanes > 1 else
             [(v, ph, pw) for v in range(ed) for ph in range(eh // sh) for pw in range(ew // sw)])
    beats = [(v, ph, pw, g) for v, ph, pw in order for g in range(tile.groups)]
    out = []
    for i, (v, ph, pw, g) in enumerate(beats):
        slots = []
        for s in range(8):
            k = g * 8 + s
            words = [(h * Tc + w) + (v * Tr * Tc if core.lanes == 1 else 0)
                     for h in range(ph * sh, ph * sh + sh) for w in range(pw * sw, pw * sw + sw)]
            vlane = 0 if core.lanes == 1 else v
            m_re, m_im = mult(tile.mt & 1, g, s), mult_im(tile.mt & 1, g, s)
            re = [acc(t, a, vlane, k) for a in words]
            im = [acc_im(t, a, vlane, k) for a in words]
            slots.append(fake_chain(max(re) if m_re >= 0 else min(re),
                                    max(im) if m_im >= 0 else min(im), m_re, 0))
        out.append((v, g, ph * Tc + pw, int(i == len(beats) - 1), slots))
    return out


def run(case, *, seed=0, stall=0.3):
    core, geo = case.core, case.geometry
    res_depth = core.tr * core.tc if geo.residual else None
    dut = EngineDrain(core, geo, psum_depth=core.tr * core.td // core.lanes * core.tc,
                      res_depth=res_depth)
    rng = random.Random(seed)
    tiles = list(conv_tiles(case.desc, core))
    out, shapes, releases = [], [], []
    residual = bool(case.desc.flags & 4)

    async def buffers(ctx):
        # Partial sums, residual tile and parameter halves: valid after a random delay, read
        # with one cycle of latency, freed by the release.
        ctx.set(dut.params_ready, 3)
        t = 0
        while t < len(tiles):
            for _ in range(rng.randrange(3)):
                await ctx.tick()
            ctx.set(dut.ps_valid, 1)
            if geo.residual:
                ctx.set(dut.res_valid, int(residual))
            while True:
                ports = [dut.ps_en, dut.ps_addr, dut.ps_release, dut.records.addr,
                         dut.records.en]
                if geo.residual:
                    ports += [dut.res_en, dut.res_addr]
                _, _, en, addr, rel, raddr, ren, *r = await ctx.tick().sample(*ports)
                if en:
                    lanes = [[{"re": acc(t, int(addr), v, s), "im": acc_im(t, int(addr), v, s)}
                              for s in range(core.tm // 2)] for v in range(core.lanes)]
                    ctx.set(dut.acc, lanes)
                    if geo.residual and r[0]:
                        ctx.set(dut.res_act, [[{"re": res(t, int(r[1]), v, s), "im": 0}
                                               for s in range(core.tm // 2)]
                                              for v in range(core.td)])
                if ren:  # the parameter memory: one cycle, held while not enabled
                    half, g = divmod(int(raddr), core.out_groups)
                    word = 0
                    for lane in range(8):
                        word |= ((mult(half, g, lane) & 0xFFFF)
                                 | (mult_im(half, g, lane) & 0xFFFF) << 16) << (256 * lane)
                    ctx.set(dut.records.data, word)
                if rel:
                    break
            releases.append(t)
            ctx.set(dut.ps_valid, 0)
            if geo.residual:
                ctx.set(dut.res_valid, 0)
            t += 1

    async def chain(ctx):
        # Post chain: re = the sum, im = mult ^ res (res with a residual); with a fused pool
        # only the beat completing a window leaves (CMaxPool's emission order); a beat leaves
        # POST_LATENCY cycles after it entered at the earliest.
        fifo, k = deque(), 0
        while True:
            for item in fifo:
                item[0] -= 1
            ready = len(fifo) < 4 and rng.random() >= stall
            ctx.set(dut.post_i.ready, ready)
            if fifo:
                ctx.set(dut.post_o.payload, fifo[0][1])
            ctx.set(dut.post_o.valid, bool(fifo) and fifo[0][0] <= 0)
            _, _, iv, ip, ov, orr, cfg = await ctx.tick().sample(
                dut.post_i.valid, dut.post_i.payload, dut.post_o.valid, dut.post_o.ready,
                dut.post_cfg)
            if ov and orr:
                fifo.popleft()
            if iv and ready:
                size = [int(cfg.pool.size[a]) for a in range(3)]
                groups = int(cfg.pool.groups)
                w = k // groups % size[2]
                h = k // groups // size[2] % size[1]
                v = k // groups // size[2] // size[1]
                k = (k + 1) % (groups * size[0] * size[1] * size[2])
                win = [int(cfg.pool.window[a]) for a in range(3)]
                if not cfg.pool.bypass and not all(win[a] == 1 or (v, h, w)[a] % 2
                                                   for a in range(3)):
                    continue
                with_res = bool(cfg.cbn.residual)
                outs = [fake_chain(int(ip[s].acc.re), int(ip[s].acc.im), int(ip[s].mult.re),
                                   int(ip[s].res.re) if with_res else 0) for s in range(8)]
                fifo.append([POST_LATENCY, [{"re": re, "im": im} for re, im in outs]])

    async def output_buffer(ctx):
        while True:
            ready = rng.random() >= stall
            ctx.set(dut.out_i.ready, ready)
            _, _, v, p, shape = await ctx.tick().sample(dut.out_i.valid, dut.out_i.payload,
                                                         dut.out_shape)
            if v and ready:
                slots = [(int(p.slots[s].re), int(p.slots[s].im)) for s in range(8)]
                out.append((int(p.lane), int(p.group), int(p.addr), int(p.last), slots))
                if p.last:
                    shapes.append((int(shape.groups), int(shape.d), int(shape.h),
                                   int(shape.w)))

    async def bench(ctx):
        await start(ctx, dut.ctl, case.desc)
        for _ in range(200_000):
            await ctx.tick()
            if len(shapes) == len(tiles):
                break
        for _ in range(20):
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    for p in (buffers, chain, output_buffer):
        sim.add_process(p)
    sim.add_testbench(bench)
    sim.run()
    return out, shapes, releases


@pytest.mark.parametrize("case", conv_cases() + minner_cases(), ids=str)
def test_the_drain_follows_the_walk_with_every_beats_operands(case):
    ref, ref_shapes = ref_out(case)
    out, shapes, releases = run(case, seed=zlib.crc32(case.name.encode()))
    assert releases == list(range(len(ref_shapes)))
    assert shapes == ref_shapes
    assert out == ref


def one_lane_pooled_cases():
    """The layers whose fused pool is taken on the partial sums, on their core with the depth
    loop not unrolled (one lane stepping through the tile's depths: a word per depth)."""
    out = []
    for case in conv_cases():
        halved = halved_axes(case.desc, case.geometry.fused_pool)
        if any(halved) and not halved[0]:
            core = case.core
            one = CoreGeometry(core.tn, core.tm, core.td, core.tr, core.tc, core.B, 1)
            out.append(dataclasses.replace(case, name=f"{case.name}-one-lane", core=one))
    assert out
    return out


@pytest.mark.parametrize("case", one_lane_pooled_cases(), ids=str)
def test_a_pool_on_the_partial_sums_with_one_lane_steps_through_the_depths(case):
    ref, ref_shapes = ref_out(case)
    out, shapes, releases = run(case, seed=zlib.crc32(case.name.encode()), stall=0.5)
    assert releases == list(range(len(ref_shapes)))
    assert shapes == ref_shapes
    assert out == ref

