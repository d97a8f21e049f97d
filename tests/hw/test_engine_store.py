"""The layer engine's store (:mod:`fcircnn.hw.engine_store`) on Amaranth's simulator against the
Python walk (:func:`fcircnn.arch.walk.conv_writes`): one write box per tile in the walk's order
(the pooled tile with a fused pool), the output buffer's beats passed through in order, with
random back-pressure on every stream; a failing write ends the walk with ``4 | status``."""

from __future__ import annotations

import random
import zlib

import pytest
from amaranth.sim import Simulator
from engine_bench import AW, Dma, box_beats, conv_cases, minner_cases, reports, start

from fcircnn.arch.descriptor import region_code
from fcircnn.arch.walk import conv_writes
from fcircnn.hw.axi_dma_box import Status
from fcircnn.hw.engine_store import EngineStore


def run(case, *, seed=0, stall=0.3, fail_at=None, fail_status=Status.BUS_ERROR):
    """Run ``case``'s descriptor through a store fed with each tile's beats as the walk says;
    return the DMA model, the failures reported, the ``done`` pulses and the end state."""
    dut = EngineStore(case.core, case.geometry, addr_width=AW)
    rng = random.Random(seed)
    writes = list(conv_writes(case.desc, case.core, fused_pool=case.geometry.fused_pool))
    dma = Dma(dut.wr_cmd, dut.wr_status, sink=dut.wr_data, rng=rng, stall=stall,
              fail_at=fail_at, fail_status=fail_status)
    fails, done = [], []

    async def output_buffer(ctx):
        for n, box in enumerate(writes):
            for k in range(box_beats(box)):
                ctx.set(dut.out_o.payload, {"data": (n << 16) | k})
                while True:
                    valid = rng.random() >= stall
                    ctx.set(dut.out_o.valid, valid)
                    _, _, ready = await ctx.tick().sample(dut.out_o.ready)
                    if valid and ready:
                        break
        ctx.set(dut.out_o.valid, 0)

    monitor = reports(dut, fails, done)

    state = []

    async def bench(ctx):
        await start(ctx, dut.ctl, case.desc)
        for _ in range(100_000):
            await ctx.tick()
            if ctx.get(dut.idle) and (done or fails):
                break
        for _ in range(20):  # nothing more after the end
            await ctx.tick()
        state.append(bool(ctx.get(dut.idle)))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_process(dma.run)
    sim.add_process(output_buffer)
    sim.add_process(monitor)
    sim.add_testbench(bench)
    sim.run()
    return writes, dma, fails, done, state[0]


@pytest.mark.parametrize("case", conv_cases() + minner_cases(), ids=str)
def test_the_store_writes_what_the_walk_writes_with_the_buffers_beats(case):
    writes, dma, fails, done, idle = run(case, seed=zlib.crc32(case.name.encode()))
    assert idle and not fails and done == [1]
    assert dma.boxes == writes
    assert set(dma.regions) == {region_code("out")}  # the DMA checks it against the region
    for n, beats in enumerate(dma.written):
        assert beats == [(n << 16) | k for k in range(box_beats(writes[n]))]


@pytest.mark.parametrize("status", [Status.BAD_COMMAND, Status.OVERFLOW, Status.BUS_ERROR])
def test_a_failing_write_ends_the_walk_with_its_status(status):
    case = max(conv_cases(), key=lambda c: len(list(conv_writes(c.desc, c.core))))
    writes = list(conv_writes(case.desc, case.core, fused_pool=case.geometry.fused_pool))
    at = len(writes) // 2
    _, dma, fails, done, idle = run(case, fail_at=at, fail_status=status)
    assert idle and not done
    assert len(dma.boxes) == at + 1
    assert fails == [(4 | status.value, writes[at].addr + 16)]
