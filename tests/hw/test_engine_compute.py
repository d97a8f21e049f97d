"""The layer engine's compute walker (:mod:`fcircnn.hw.engine_compute`) on Amaranth's simulator
against the Python walk (:func:`fcircnn.arch.walk.conv_passes`): per pass one PE beat per
output voxel and kernel tap in the walk's order, reading the input words of that voxel and tap
and the tap's weights, and one tagged partial-sum beat per voxel; with random buffer, PE and
partial-sum back-pressure."""

from __future__ import annotations

import random
import zlib
from collections import deque

import pytest
from amaranth.sim import Simulator
from engine_bench import conv_cases, minner_cases, start

from fcircnn.arch.descriptor import FLAG_MINNER, row_groups_of
from fcircnn.arch.geometry import box_span, lane_rows
from fcircnn.arch.walk import conv_passes
from fcircnn.hw.engine_compute import EngineCompute

#: Fewest cycles from a `last` beat taken to its sum offered (the contract's bound).
PE_LATENCY = 3


def input_words(case):
    """``(depth, plane, width)`` of the core's input buffer (as the layer engine builds it)."""
    geo, core = case.geometry, case.core
    kd, kr, kc = geo.kernel
    sd, sr, sc = geo.stride
    width, height = box_span(core.tc, sc, kc), box_span(core.tr, sr, kr)
    planes = kd if core.lanes == core.td else box_span(core.td, sd, kd)
    return planes * height * width, height * width, width


def ref_beats(case):
    """Per PE beat of the layer: ``(in_addr, w_addr, in_sub, first, last)``; per voxel:
    ``(addr, accumulate, last)``. With row lanes a pass steps through the rows of one row
    group, ``min(Rh, ext_h)`` (each lane reads its own rows at those addresses)."""
    d, core = case.desc, case.core
    _, plane, width = input_words(case)
    kd, kr, kc = d.kernel
    sd, sr, sc = d.stride
    lanes = core.lanes
    rows = lane_rows(d.tile[1], row_groups_of(d.flags, d.tile[0], lanes))
    beats, tags = [], []
    for tile, nt in conv_passes(d, core):
        depths = range(tile.ext[0]) if lanes == 1 else [0]
        voxels = [(v, r, c) for v in depths for r in range(min(rows, tile.ext[1]))
                  for c in range(tile.ext[2])]
        for n, (v, r, c) in enumerate(voxels):
            taps = [(a, b, e) for a in range(kd) for b in range(kr) for e in range(kc)]
            for t, (a, b, e) in enumerate(taps):
                addr = v * sd * plane + r * sr * width + c * sc + a * plane + b * width + e
                beats.append((addr, t, nt % core.subs if core.subs > 1 else 0, t == 0,
                              t == len(taps) - 1))
            last = nt == d.n_tiles - 1 and n == len(voxels) - 1
            tags.append((v * core.tr * core.tc + r * core.tc + c, int(nt != 0), int(last)))
    return beats, tags


def run(case, *, seed=0, stall=0.3):
    depth, plane, width = input_words(case)
    dut = EngineCompute(case.core, case.geometry, in_depth=depth, in_plane=plane,
                        in_width=width)
    rng = random.Random(seed)
    passes = len(list(conv_passes(case.desc, case.core)))
    beats, tags, releases = [], [], []

    async def buffers(ctx):
        # Both tiles become valid after a random delay and stay valid until released (the
        # input box with FLAG_MINNER across its tile's m-tiles); per pass whether the input
        # box was released with the weights.
        for _ in range(passes):
            for _ in range(rng.randrange(4)):
                await ctx.tick()
            ctx.set(dut.in_valid, 1)
            ctx.set(dut.w_valid, 1)
            while True:
                _, _, ir, wr = await ctx.tick().sample(dut.in_release, dut.w_release)
                assert wr or not ir  # the input box only with the pass's weights
                if wr:
                    break
            releases.append(bool(ir))
            ctx.set(dut.in_valid, 0 if ir else 1)
            ctx.set(dut.w_valid, 0)

    async def pe(ctx):
        # The PE array: takes beats, emits one sum per `last` beat some cycles later (at
        # least PE_LATENCY: the tag FIFO's own latency, which the real array's exceeds).
        pending = deque()
        while True:
            ready = rng.random() >= stall
            ctx.set(dut.pe_i.ready, ready)
            if pending and pending[0][0] <= 0:
                ctx.set(dut.pe_o.valid, 1)
            _, _, iv, ip, ov, orr, ia, isub, wa, en = await ctx.tick().sample(
                dut.pe_i.valid, dut.pe_i.payload, dut.pe_o.valid, dut.pe_o.ready,
                dut.in_addr, dut.in_sub, dut.w_addr, dut.in_en)
            if en:
                beats.append([int(ia), int(wa), int(isub)])
            if iv and ready:
                taken = sum(1 for b in beats if len(b) == 5)
                beats[taken].extend([bool(ip.first), bool(ip.last)])
                if ip.last:
                    pending.append([PE_LATENCY + rng.randrange(4)])
            if ov and orr:
                pending.popleft()
                ctx.set(dut.pe_o.valid, 0)
            for p in pending:
                p[0] -= 1

    async def psum(ctx):
        while True:
            ready = rng.random() >= stall
            ctx.set(dut.psum_i.ready, ready)
            _, _, v, p = await ctx.tick().sample(dut.psum_i.valid, dut.psum_i.payload)
            if v and ready:
                tags.append((int(p.addr), int(p.accumulate), int(p.last)))

    async def bench(ctx):
        await start(ctx, dut.ctl, case.desc)
        n_tags = len(ref_beats(case)[1])
        for _ in range(200_000):
            await ctx.tick()
            if len(tags) == n_tags and len(releases) == passes:
                break
        for _ in range(20):
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    for p in (buffers, pe, psum):
        sim.add_process(p)
    sim.add_testbench(bench)
    sim.run()
    return [tuple(b) for b in beats], tags, releases


@pytest.mark.parametrize("case", conv_cases() + minner_cases(), ids=str)
def test_compute_beats_and_tags_follow_the_walk(case):
    ref, ref_tags = ref_beats(case)
    beats, tags, releases = run(case, seed=zlib.crc32(case.name.encode()))
    # The input box is released after every pass; with FLAG_MINNER after the last m-tile's
    # pass of each tile only.
    minner = bool(case.desc.flags & FLAG_MINNER)
    assert releases == [not minner or tile.mt == case.desc.m_tiles - 1
                        for tile, _ in conv_passes(case.desc, case.core)]
    assert beats == ref
    assert tags == ref_tags
