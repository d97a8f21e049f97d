"""The layer engine's control (:mod:`fcircnn.hw.engine_control`) on Amaranth's simulator: start
latches the descriptor once, done ends the run, the first failure is kept (pool pass over store
over loader within a cycle) and reported once every walker is idle."""

from __future__ import annotations

import pytest
from amaranth.hdl import Value
from amaranth.sim import Simulator

from fcircnn.hw.engine_control import EngineControl

AW = 32


def simulate(bench):
    dut = EngineControl(AW)
    sim = Simulator(dut)
    sim.add_clock(1e-8)

    async def testbench(ctx):
        await bench(ctx, dut)

    sim.add_testbench(testbench)
    sim.run()


def idle(ctx, dut, loader=1, store=1, pool=0):
    ctx.set(dut.loader_idle, loader)
    ctx.set(dut.store_idle, store)
    ctx.set(dut.pool_active, pool)


def test_start_latches_once_and_done_ends_the_run():
    async def bench(ctx, dut):
        idle(ctx, dut)
        ctx.set(Value.cast(dut.desc), 0x1234)
        ctx.set(dut.start, 1)
        assert ctx.get(dut.ctl.start) and ctx.get(Value.cast(dut.ctl.new_desc)) == 0x1234
        await ctx.tick()
        ctx.set(Value.cast(dut.desc), 0x5678)  # a start while busy is ignored
        assert ctx.get(dut.busy) and not ctx.get(dut.ctl.start)
        await ctx.tick()
        ctx.set(dut.start, 0)
        assert ctx.get(Value.cast(dut.ctl.desc)) == 0x1234
        ctx.set(dut.store_done, 1)
        assert ctx.get(dut.done)
        await ctx.tick()
        ctx.set(dut.store_done, 0)
        assert not ctx.get(dut.busy) and not ctx.get(dut.done)

    simulate(bench)


@pytest.mark.parametrize(("fails", "kept"), [
    (("loader",), "loader"), (("store",), "store"), (("pool",), "pool"),
    (("loader", "store"), "store"), (("loader", "store", "pool"), "pool"),
])
def test_the_first_failure_is_reported_once_when_all_is_idle(fails, kept):
    codes = {"loader": (3, 0x100), "store": (7, 0x200), "pool": (5, 0x300)}

    async def bench(ctx, dut):
        idle(ctx, dut, loader=0, store=0)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        for name in fails:
            port = getattr(dut, f"fail_{name}")
            ctx.set(port.valid, 1)
            ctx.set(port.code, codes[name][0])
            ctx.set(port.addr, codes[name][1])
        await ctx.tick()
        for name in fails:
            ctx.set(getattr(dut, f"fail_{name}").valid, 0)
        # A later failure does not replace the first.
        ctx.set(dut.fail_loader.valid, 1)
        ctx.set(dut.fail_loader.code, 1)
        assert ctx.get(dut.ctl.failed)
        await ctx.tick()
        ctx.set(dut.fail_loader.valid, 0)
        ctx.set(dut.store_done, 1)  # done is suppressed after a failure
        assert not ctx.get(dut.done) and not ctx.get(dut.error)
        await ctx.tick()
        ctx.set(dut.store_done, 0)
        for _ in range(3):  # nothing until every walker is idle
            assert not ctx.get(dut.error)
            await ctx.tick()
        idle(ctx, dut)
        assert ctx.get(dut.error)
        assert (ctx.get(dut.error_code), ctx.get(dut.error_addr)) == codes[kept]
        await ctx.tick()
        assert not ctx.get(dut.error) and not ctx.get(dut.busy)
        # The next start clears the failure.
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        assert not ctx.get(dut.ctl.failed) and ctx.get(dut.busy)

    simulate(bench)


def test_a_pool_pass_in_flight_delays_the_error():
    async def bench(ctx, dut):
        idle(ctx, dut, pool=1)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        ctx.set(dut.fail_pool.valid, 1)
        await ctx.tick()
        ctx.set(dut.fail_pool.valid, 0)
        await ctx.tick()
        assert not ctx.get(dut.error)
        ctx.set(dut.pool_active, 0)
        assert ctx.get(dut.error)

    simulate(bench)


def test_the_address_width_is_checked():
    with pytest.raises(ValueError):
        EngineControl(16)


@pytest.mark.parametrize("walker", ["pool", "store"])
def test_a_failure_in_the_cycle_the_layer_finishes_ends_it_with_the_error(walker):
    # The pool pass reports a failing last write status in the cycle it finishes: that run
    # ends with the error, not done (before, done won and the error was lost: the pool-lanes
    # accelerator test's write fault, status "done" with the faulted map unwritten).
    async def bench(ctx, dut):
        idle(ctx, dut)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        fail = getattr(dut, f"fail_{walker}")
        ctx.set(fail.valid, 1)
        ctx.set(fail.code, 7)
        ctx.set(fail.addr, 0x400)
        ctx.set(getattr(dut, f"{walker}_done"), 1)
        assert not ctx.get(dut.done)
        await ctx.tick()
        ctx.set(fail.valid, 0)
        ctx.set(getattr(dut, f"{walker}_done"), 0)
        assert ctx.get(dut.busy) and ctx.get(dut.error)
        assert (ctx.get(dut.error_code), ctx.get(dut.error_addr)) == (7, 0x400)
        await ctx.tick()
        assert not ctx.get(dut.busy) and not ctx.get(dut.error) and not ctx.get(dut.done)

    simulate(bench)


def test_abort_fails_the_run_unless_a_failure_came_first():
    """``abort`` while running: ``ctl.failed`` with ERROR_ABORTED (address 0), the error once
    the walkers are idle; a failure recorded before keeps its code; idle, nothing happens."""
    from fcircnn.arch.registers import ERROR_ABORTED

    async def bench(ctx, dut):
        idle(ctx, dut, loader=0, store=0)
        ctx.set(dut.abort, 1)  # idle: ignored
        await ctx.tick()
        assert not ctx.get(dut.ctl.failed) and not ctx.get(dut.busy)
        ctx.set(dut.abort, 0)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        ctx.set(dut.abort, 1)
        ctx.set(dut.store_done, 1)  # the layer finishing in the abort's cycle: not done
        assert not ctx.get(dut.done)
        await ctx.tick()
        ctx.set(dut.store_done, 0)
        assert ctx.get(dut.ctl.failed) and not ctx.get(dut.error)
        idle(ctx, dut)
        assert ctx.get(dut.error)
        assert (ctx.get(dut.error_code), ctx.get(dut.error_addr)) == (ERROR_ABORTED, 0)
        await ctx.tick()
        assert not ctx.get(dut.busy)
        # A failure first: the abort does not replace its code.
        ctx.set(dut.abort, 0)
        idle(ctx, dut, loader=0, store=0)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        ctx.set(dut.fail_store.valid, 1)
        ctx.set(dut.fail_store.code, 7)
        ctx.set(dut.fail_store.addr, 0x40)
        await ctx.tick()
        ctx.set(dut.fail_store.valid, 0)
        ctx.set(dut.abort, 1)
        await ctx.tick()
        idle(ctx, dut)
        assert ctx.get(dut.error)
        assert (ctx.get(dut.error_code), ctx.get(dut.error_addr)) == (7, 0x40)

    simulate(bench)
