"""Skid buffer (:mod:`fcircnn.hw.skid_buffer`): ordering, throughput and the registered ready."""

import random

import pytest
from amaranth.hdl import Value, signed, unsigned
from amaranth.lib import data
from amaranth.sim import Simulator
from conftest import unit_simulators

from fcircnn.hw.skid_buffer import LATENCY, SkidBuffer
from fcircnn.sim.runner import pack, require_simulator, run_cocotb, unpack

LAYOUT = data.StructLayout({"a": signed(8), "b": unsigned(5), "c": data.ArrayLayout(4, 3)})


def random_beats(rng, n):
    return [{"a": rng.randint(-128, 127), "b": rng.randint(0, 31),
             "c": [rng.randint(0, 15) for _ in range(3)]} for _ in range(n)]


def rtl_stream(beats, *, p_valid, p_ready, seed, layout=LAYOUT, max_cycles=200_000):
    """Stream ``beats`` through a :class:`SkidBuffer` with random valid/ready, one cycle at a
    time. Every cycle, before the clock edge, ``o.ready`` is flipped and restored and the
    input stream is disturbed and restored, asserting that ``i.ready`` and ``o.valid``/``o.payload``
    do not move (no combinational path through the buffer). Returns ``(out, cycles)``."""
    rng = random.Random(seed)
    dut = SkidBuffer(layout)
    out = []
    state = {"cycles": 0}

    i_payload, o_payload = Value.cast(dut.i.payload), Value.cast(dut.o.payload)

    async def testbench(ctx):
        index, pending, cycles = 0, False, 0
        while len(out) < len(beats):
            cycles += 1
            if cycles > max_cycles:
                raise AssertionError(f"timeout: {len(out)} of {len(beats)} beats")
            if not pending and index < len(beats) and rng.random() < p_valid:
                ctx.set(i_payload, pack(layout, beats[index]))
                pending = True
            ctx.set(dut.i.valid, pending)
            ready = rng.random() < p_ready
            ctx.set(dut.o.ready, ready)
            i_ready = ctx.get(dut.i.ready)
            o_valid, o_word = ctx.get(dut.o.valid), ctx.get(o_payload)
            # Disturb the other side of each path; a combinational path would show here.
            ctx.set(dut.o.ready, not ready)
            assert ctx.get(dut.i.ready) == i_ready, "i.ready follows o.ready combinationally"
            ctx.set(dut.o.ready, ready)
            saved = ctx.get(i_payload)
            ctx.set(dut.i.valid, not pending)
            ctx.set(i_payload, ~saved & ((1 << len(i_payload)) - 1))
            assert ctx.get(dut.o.valid) == o_valid, "o.valid follows i combinationally"
            assert ctx.get(o_payload) == o_word, "o.payload follows i"
            ctx.set(dut.i.valid, pending)
            ctx.set(i_payload, saved)
            await ctx.tick()
            if pending and i_ready:
                index += 1
                pending = False
            if ready and o_valid:
                out.append(unpack(layout, o_word))
                state["cycles"] = cycles
        # Nothing more may come out.
        ctx.set(dut.i.valid, 0)
        ctx.set(dut.o.ready, 1)
        for _ in range(5):
            assert not ctx.get(dut.o.valid), "a beat was duplicated"
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(testbench)
    sim.run()
    return out, state["cycles"]


@pytest.mark.parametrize(("p_valid", "p_ready"), [
    (0.5, 0.5), (0.9, 0.2), (0.2, 0.9), (1.0, 0.5), (0.6, 1.0),
    pytest.param(1.0, 0.05, marks=pytest.mark.slow),  # suite budget: 20 s, (0.9, 0.2) stays
])
def test_random_backpressure_keeps_every_beat_in_order(p_valid, p_ready):
    rng = random.Random(f"{p_valid}-{p_ready}")
    beats = random_beats(rng, 3000)
    got, _ = rtl_stream(beats, p_valid=p_valid, p_ready=p_ready, seed=rng.randrange(1 << 30))
    assert got == beats


def test_plain_shape_payload():
    rng = random.Random(5)
    beats = [rng.randrange(1 << 16) for _ in range(1000)]
    got, _ = rtl_stream(beats, p_valid=0.7, p_ready=0.6, seed=6, layout=unsigned(16))
    assert got == beats


def test_full_throughput_under_continuous_ready():
    beats = random_beats(random.Random(1), 500)
    got, cycles = rtl_stream(beats, p_valid=1.0, p_ready=1.0, seed=0)
    assert got == beats
    assert cycles == len(beats) + LATENCY


def test_ready_is_registered_in_every_state():
    # Empty, one beat held (output stalled), both entries full: i.ready must not follow o.ready.
    dut = SkidBuffer(unsigned(8))

    async def testbench(ctx):
        def check(expected):
            for ready in (0, 1, 0, 1):
                ctx.set(dut.o.ready, ready)
                assert ctx.get(dut.i.ready) == expected

        check(1)                         # empty
        ctx.set(dut.o.ready, 0)
        ctx.set(dut.i.valid, 1)
        ctx.set(dut.i.payload, 7)
        await ctx.tick()
        ctx.set(dut.i.payload, 8)
        assert ctx.get(dut.o.valid) and ctx.get(dut.o.payload) == 7
        check(1)                         # one beat, skid free
        ctx.set(dut.o.ready, 0)
        await ctx.tick()
        ctx.set(dut.i.valid, 0)
        check(0)                         # both entries full
        ctx.set(dut.o.ready, 1)
        await ctx.tick()
        assert ctx.get(dut.o.payload) == 8 and ctx.get(dut.i.ready)
        await ctx.tick()
        assert not ctx.get(dut.o.valid)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(testbench)
    sim.run()


@pytest.mark.parametrize("layout", ["x", None, True, -1])
def test_bad_layout(layout):
    with pytest.raises(TypeError, match="layout"):
        SkidBuffer(layout)


@pytest.mark.parametrize("simulator", unit_simulators())
def test_skid_buffer_cocotb(simulator):
    require_simulator(simulator)
    run_cocotb(SkidBuffer(unsigned(12)), "skid_buffer", "fcircnn.sim.tb_skid_buffer", simulator,
               parameters={"width": 12, "beats": 2000, "seed": 17})
