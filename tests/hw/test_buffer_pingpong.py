"""Banked ping-pong memory (:mod:`fcircnn.hw.buffer_pingpong`) on Amaranth's simulator."""

import pytest
from amaranth.sim import Simulator

from fcircnn.hw.buffer_pingpong import PingPongBanks


def simulate(dut, bench):
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


async def fill(ctx, dut, values, commit=True):
    """Write ``values[b][a]`` to every bank, one address per cycle, then commit."""
    for a in range(dut.depth):
        ctx.set(dut.w_addr, [a] * dut.banks)
        ctx.set(dut.w_data, [values[b][a] for b in range(dut.banks)])
        ctx.set(dut.w_en, (1 << dut.banks) - 1)
        await ctx.tick()
    ctx.set(dut.w_en, 0)
    if commit:
        ctx.set(dut.w_commit, 1)
        await ctx.tick()
        ctx.set(dut.w_commit, 0)


def test_ping_pong_handshake_and_read_during_write():
    dut = PingPongBanks(banks=3, width=16, depth=4)
    a = [[100 * b + i for i in range(4)] for b in range(3)]
    b_ = [[1000 + 100 * b + i for i in range(4)] for b in range(3)]

    async def bench(ctx):
        assert ctx.get(dut.w_ready) and not ctx.get(dut.r_valid)
        await fill(ctx, dut, a)
        assert ctx.get(dut.r_valid) and ctx.get(dut.w_ready)
        assert (ctx.get(dut.w_half), ctx.get(dut.r_half)) == (1, 0)
        # Read-during-write: the writer fills address 2 of the other half while the reader
        # reads address 2; the reader sees the committed tile, never the word being written.
        for addr in range(4):
            ctx.set(dut.w_addr, [addr] * 3)
            ctx.set(dut.w_data, [b_[k][addr] for k in range(3)])
            ctx.set(dut.w_en, 0b111)
            ctx.set(dut.r_addr, addr)
            ctx.set(dut.r_en, 1)
            await ctx.tick()
            assert list(ctx.get(dut.r_data)) == [a[k][addr] for k in range(3)]
        ctx.set(dut.w_en, 0)
        ctx.set(dut.r_en, 0)
        ctx.set(dut.w_commit, 1)
        await ctx.tick()
        ctx.set(dut.w_commit, 0)
        # Both halves full: the writer must wait.
        assert not ctx.get(dut.w_ready) and ctx.get(dut.r_valid)
        ctx.set(dut.r_release, 1)
        await ctx.tick()
        ctx.set(dut.r_release, 0)
        assert ctx.get(dut.w_ready) and ctx.get(dut.r_half) == 1
        for addr in range(4):
            ctx.set(dut.r_addr, addr)
            ctx.set(dut.r_en, 1)
            await ctx.tick()
            assert list(ctx.get(dut.r_data)) == [b_[k][addr] for k in range(3)]
        ctx.set(dut.r_en, 0)
        await ctx.tick()
        # r_data is held while r_en is low.
        assert list(ctx.get(dut.r_data)) == [b_[k][3] for k in range(3)]
        assert not ctx.get(dut.conflict)

    simulate(dut, bench)


def test_conflicts_are_flagged_and_harmless():
    dut = PingPongBanks(banks=2, width=8, depth=2)

    async def bench(ctx):
        ctx.set(dut.r_en, 1)  # nothing to read yet
        await ctx.tick()
        ctx.set(dut.r_en, 0)
        assert ctx.get(dut.conflict)
        await fill(ctx, dut, [[1, 2], [3, 4]])
        await fill(ctx, dut, [[5, 6], [7, 8]])
        await fill(ctx, dut, [[9, 9], [9, 9]], commit=False)  # both full: dropped
        ctx.set(dut.r_addr, 1)
        ctx.set(dut.r_en, 1)
        await ctx.tick()
        assert list(ctx.get(dut.r_data)) == [2, 4]

    simulate(dut, bench)


@pytest.mark.parametrize(("kwargs", "exc", "match"), [
    ({"banks": 0}, ValueError, "banks must be in 1..4096"),
    ({"width": 8.0}, TypeError, "width must be an integer"),
    ({"depth": 0}, ValueError, "depth must be in"),
    ({"ram_style": "lut"}, ValueError, "ram_style must be"),
])
def test_bad_parameters(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        PingPongBanks(**({"banks": 1, "width": 8, "depth": 4} | kwargs))
