"""Partial-sum buffer (:mod:`fcircnn.hw.buffer_psum`) on Amaranth's simulator."""

import random

import numpy as np
import pytest
from amaranth.sim import Simulator

from fcircnn.hw.buffer_psum import PartialSumBuffer


def _run(dut, tiles, seed=0, p_idle=0.3, p_stall=0.3):
    """``tiles``: per tile a list of (addr, values [Td][Tm/2] complex, accumulate) writes."""
    rng = random.Random(seed)
    got = []

    async def writer(ctx):
        for writes in tiles:
            for k, (addr, values, accumulate) in enumerate(writes):
                while rng.random() < p_idle:
                    ctx.set(dut.i.valid, 0)
                    await ctx.tick()
                ctx.set(dut.i.payload, {
                    "addr": addr, "accumulate": accumulate, "last": int(k == len(writes) - 1),
                    "acc": [[{"re": int(re), "im": int(im)} for re, im in lane]
                            for lane in values]})
                ctx.set(dut.i.valid, 1)
                await ctx.tick().until(dut.i.ready)
            ctx.set(dut.i.valid, 0)

    async def reader(ctx):
        for _ in tiles:
            await ctx.tick().until(dut.r_valid)
            while rng.random() < p_stall:
                await ctx.tick()
            words = {}
            for addr in range(dut.depth):
                ctx.set(dut.r_addr, addr)
                ctx.set(dut.r_en, 1)
                await ctx.tick()
                ctx.set(dut.r_en, 0)
                await ctx.tick()  # held while r_en is low
                value = ctx.get(dut.acc)
                words[addr] = [[(value[v][s].re, value[v][s].im) for s in range(dut.Tm // 2)]
                               for v in range(dut.Td)]
            got.append(words)
            ctx.set(dut.r_release, 1)
            await ctx.tick()
            ctx.set(dut.r_release, 0)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(writer, background=True)
    sim.add_testbench(reader)
    sim.run()
    return got


@pytest.mark.parametrize("passes, order", [(3, "raster"), (4, "same-address"), (1, "random")])
def test_sums_over_input_channel_tiles(passes, order):
    Tm, Td, Tr, Tc = 16, 2, 2, 3
    dut = PartialSumBuffer(Tm, Td, Tr, Tc)
    nrng = np.random.default_rng(passes)
    rng = random.Random(passes)
    tiles, expect = [], []
    for _ in range(3):  # three tiles: both halves, and reuse of the first
        writes, total = [], {}
        addrs = list(range(Tr * Tc))
        for p in range(passes):
            if order == "random":
                rng.shuffle(addrs)
            seq = [a for a in addrs for _ in range(2)] if order == "same-address" else addrs
            seen = set()
            for a in seq:
                extreme = nrng.random() < 0.2
                lim = 2**31 - 1 if extreme else 1000
                values = nrng.integers(-lim, lim, (Td, Tm // 2, 2))
                first = p == 0 and a not in seen
                seen.add(a)
                writes.append((a, values, int(not first)))
                total[a] = values if first else total[a] + values
        tiles.append(writes)
        wrap = {a: ((v + 2**31) % 2**32) - 2**31 for a, v in total.items()}
        expect.append({a: [[tuple(int(x) for x in wrap[a][v, s]) for s in range(Tm // 2)]
                            for v in range(Td)] for a in wrap})
    assert _run(dut, tiles, seed=passes) == expect


@pytest.mark.parametrize("p_idle", [0.0, 0.5])
def test_back_to_back_beats_to_one_voxel_add_the_sum_just_written(p_idle):
    """A one-voxel tile (an fc layer's): every beat adds to the word the beat before it wrote,
    with no idle cycle between them (p_idle 0: each beat's read meets the previous beat's
    write, the sum is forwarded) or with gaps (read after the write), across both halves."""
    Tm, Td = 16, 2
    dut = PartialSumBuffer(Tm, Td, 1, 1)
    nrng = np.random.default_rng(7)
    tiles, expect = [], []
    for t in range(4):
        values = nrng.integers(-2**31, 2**31, (6, Td, Tm // 2, 2))
        if t == 3:  # extremes: every beat at the int32 limits, the sum wraps
            values = np.where(nrng.random(values.shape) < 0.5, -2**31, 2**31 - 1)
        tiles.append([(0, v, int(p > 0)) for p, v in enumerate(values)])
        wrap = ((values.sum(axis=0) + 2**31) % 2**32) - 2**31
        expect.append({0: [[tuple(int(x) for x in wrap[v, s]) for s in range(Tm // 2)]
                           for v in range(Td)]})
    assert _run(dut, tiles, seed=3, p_idle=p_idle, p_stall=0.0) == expect


def test_rejects_bad_parameters():
    with pytest.raises(ValueError, match="Tm must be a multiple of 2: whole complex slots"):
        PartialSumBuffer(15, 1, 2, 2)
    with pytest.raises(ValueError, match="acc_width"):
        PartialSumBuffer(16, 1, 2, 2, acc_width=16)
