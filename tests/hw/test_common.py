"""Shared hardware helpers: constructor guard, integer check, stall pipeline, small multiply."""

import gc
import itertools
import random
import warnings

import pytest
from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from fcircnn.arch.geometry import MAX_CHANNEL_TILE, MAX_TILE
from fcircnn.hw.common import check_positive, check_tiles, mul_small, rejecting, stall_pipeline


class _Delay(wiring.Component):
    """A ``latency``-stage pipeline that adds 1 to each 8-bit beat, built on stall_pipeline."""

    i: In(stream.Signature(8))
    o: Out(stream.Signature(8))

    def __init__(self, latency):
        with rejecting(self):
            check_positive("latency", latency, 4)
        self.latency = latency
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        enable = stall_pipeline(m, self.i, self.o, self.latency)
        stages = [Signal(8, name=f"stage{n}") for n in range(self.latency)]
        with m.If(enable):
            m.d.sync += stages[0].eq(self.i.payload + 1)
            for prev, nxt in itertools.pairwise(stages):
                m.d.sync += nxt.eq(prev)
        m.d.comb += self.o.payload.eq(stages[-1])
        return m


@pytest.mark.parametrize("latency", [1, 2, 4])
def test_stall_pipeline_keeps_every_beat_under_backpressure(latency):
    dut = _Delay(latency)
    beats = list(range(200))
    got, cycles = [], []
    rng = random.Random(latency)

    async def source(ctx):
        for value in beats:
            ctx.set(dut.i.payload, value)
            ctx.set(dut.i.valid, 1)
            await ctx.tick().until(dut.i.ready)
            ctx.set(dut.i.valid, 0)
            if rng.random() < 0.3:
                await ctx.tick()

    async def sink(ctx):
        cycle = 0
        while len(got) < len(beats):
            ready = rng.random() < 0.6
            ctx.set(dut.o.ready, ready)
            # The enable is combinational: ready must follow ~o.valid | o.ready.
            assert ctx.get(dut.i.ready) == (not ctx.get(dut.o.valid) or ready)
            if ready and ctx.get(dut.o.valid):
                got.append(ctx.get(dut.o.payload))
                cycles.append(cycle)
            await ctx.tick()
            cycle += 1

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(source)
    sim.add_testbench(sink)
    sim.run()
    assert got == [(v + 1) % 256 for v in beats]


def test_stall_pipeline_initiation_interval_one():
    dut = _Delay(3)
    out = []

    async def bench(ctx):
        ctx.set(dut.o.ready, 1)
        ctx.set(dut.i.valid, 1)
        for cycle in range(40):
            ctx.set(dut.i.payload, cycle)
            assert ctx.get(dut.i.ready)
            if ctx.get(dut.o.valid):
                out.append((cycle, ctx.get(dut.o.payload)))
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    # First result after the latency, then one per cycle.
    assert out[0] == (3, 1)
    assert [c for c, _ in out] == list(range(3, 40))


def test_check_positive_messages():
    check_positive("x", 5, 8)
    with pytest.raises(TypeError, match="x must be an integer, not True"):
        check_positive("x", True)
    with pytest.raises(ValueError, match=r"x must be in 1\.\.8, not 9"):
        check_positive("x", 9, 8)
    with pytest.raises(ValueError, match="x must be in 1 or more, not 0"):
        check_positive("x", 0)


@pytest.mark.parametrize(("name", "limit"), [("Tn", MAX_CHANNEL_TILE), ("Tm", MAX_CHANNEL_TILE),
                                            ("Td", MAX_TILE), ("Tr", MAX_TILE), ("Tc", MAX_TILE)])
def test_tiles_are_checked_at_the_architecture_s_limits(name, limit):
    """A tile the descriptor can carry (Td, Tr, Tc: its 8-bit fields) or the datapath is built
    for (Tn, Tm) is taken; one more is refused, naming the limit."""
    check_tiles(**{name: limit})
    with pytest.raises(ValueError, match=rf"{name} must be in 1\.\.{limit}, not {limit + 1}"):
        check_tiles(**{name: limit + 1})


def test_a_component_refuses_a_tile_the_descriptor_cannot_carry():
    from fcircnn.hw.buffer_output import OutputBuffer

    with pytest.raises(ValueError, match=rf"Tr must be in 1\.\.{MAX_TILE}, not {MAX_TILE + 1}"):
        OutputBuffer(16, 1, MAX_TILE + 1, 4)


def test_rejected_component_raises_without_unused_warning():
    from amaranth.hdl import Fragment, UnusedElaboratable

    # Amaranth arms the unused-elaboratable warning with the first elaboration in a process.
    Fragment.get(_Delay(1), None)
    gc.collect()  # what earlier tests in this worker left behind is finalised before, not here
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        message = None
        try:
            _Delay(5)
        except ValueError as exc:  # not pytest.raises: its traceback would keep the object alive
            message = str(exc)
        gc.collect()  # the half-built object's finaliser runs here
    assert message == "latency must be in 1..4, not 5"
    assert not [w for w in caught if issubclass(w.category, UnusedElaboratable)]
    # The filter is for that object only: another unused component still warns.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _Delay(2)
        gc.collect()
    assert [w for w in caught if issubclass(w.category, UnusedElaboratable)]


@pytest.mark.parametrize("max_s", [1, 2, 4])
def test_mul_small_is_the_product_for_every_small_factor(max_s):
    """x in 0..1023 (extremes and random) times every s in 1..max_s."""
    x, s = Signal(10), Signal(range(1, max_s + 1))
    product = mul_small(x, s, max_s)
    m = Module()
    m.d.comb += Signal(16, name="p").eq(product)
    rng = random.Random(7)

    async def bench(ctx):
        for xv in [0, 1, 1023, *rng.sample(range(1024), 40)]:
            for sv in range(1, max_s + 1):
                ctx.set(x, xv)
                ctx.set(s, sv)
                assert ctx.get(product) == xv * sv

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
