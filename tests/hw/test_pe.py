"""Tests of :mod:`fcircnn.hw.pe`."""

import random

import pytest
from amaranth.sim import Simulator
from conftest import unit_simulators

from fcircnn.hw.pe import PE, tree_levels
from fcircnn.sim.runner import require_simulator, run_cocotb
from fcircnn.sim.tb_pe import pe_beats, pe_products, pe_reference


def rtl_sums(n, beats, seed, p_ce=0.75, p_valid=0.7, acc_width=32):
    """Accumulated sums after each ``last`` beat, from the Amaranth simulator.

    Random clock enable and random gaps (``valid`` low, with random ``first``/``last``).
    Returns ``(sums, cycles)``; ``cycles`` counts clock edges until the last sum was seen.
    """
    dut = PE(n, acc_width=acc_width)
    state = {"latency": dut.latency}
    rng = random.Random(seed)
    n_out = sum(b["last"] for b in beats)
    got = []

    async def testbench(ctx):
        idx = 0
        cycles = 0
        while len(got) < n_out:
            ce = int(rng.random() < p_ce)
            valid = int(idx < len(beats) and rng.random() < p_valid)
            beat = beats[idx] if valid else None
            ctx.set(dut.ce, ce)
            ctx.set(dut.valid, valid)
            ctx.set(dut.first, beat["first"] if beat else rng.randint(0, 1))
            ctx.set(dut.last, beat["last"] if beat else rng.randint(0, 1))
            ctx.set(dut.prod, pe_products(beat) if beat else [{"re": 0, "im": 0}] * n)
            await ctx.tick()
            cycles += 1
            if ce and valid:
                idx += 1
            if ce and ctx.get(dut.done):
                got.append((ctx.get(dut.acc.re), ctx.get(dut.acc.im)))
        state["cycles"] = cycles

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()
    return got, state["cycles"], state["latency"]


@pytest.mark.parametrize("n", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("slot0", [False, True])
def test_sums_match_golden_model(n, slot0):
    beats = pe_beats(random.Random(n), n, 60, slot0)
    got, _, _ = rtl_sums(n, beats, seed=n + 10)
    assert got == pe_reference(beats)


@pytest.mark.parametrize("n", [1, 4, 5])
def test_latency_and_ii(n):
    """Always enabled and fed: a beat a cycle; the last sum is in ``acc`` ``latency`` cycles
    after the cycle that presented the last beat (visible after edge ``N + latency - 1``)."""
    beats = pe_beats(random.Random(1), n, 40, False)
    got, cycles, latency = rtl_sums(n, beats, seed=1, p_ce=1.0, p_valid=1.0, acc_width=40)
    assert latency == tree_levels(n) + 1
    assert got == pe_reference(beats)
    assert cycles == len(beats) + latency - 1


def test_accumulator_wraps_at_acc_width():
    """Beyond the int32 contract the accumulator wraps (the compiler prevents this)."""
    n = 8
    beats = [
        {"act": [(127, 127)] * n, "w": [(127, -127)] * n, "first": int(i == 0),
         "last": int(i == 4199), "slot0": False}
        for i in range(4200)
    ]
    got, _, _ = rtl_sums(n, beats, seed=0, p_ce=1.0, p_valid=1.0)
    re = 2 * 127 * 127 * n * 4200  # re = ac - bd = 127*127 + 127*127 per product
    wrapped = (re + 2**31) % 2**32 - 2**31
    assert got == [(wrapped, 0)]


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"n": 0}, ValueError, "n must be a positive integer, not 0"),
        ({"n": 2.0}, TypeError, "n must be an integer"),
        ({"n": True}, TypeError, "n must be an integer"),
        ({"n": 2, "acc_width": 24}, ValueError, "acc_width must be at least 32"),
    ],
)
def test_bad_parameters(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        PE(**kwargs)


def test_tree_levels():
    assert [tree_levels(n) for n in (1, 2, 3, 4, 5, 8, 9)] == [0, 1, 2, 2, 3, 3, 4]


@pytest.mark.parametrize("simulator", unit_simulators())
def test_cocotb(simulator):
    require_simulator(simulator)
    run_cocotb(
        PE(3),
        "pe",
        "fcircnn.sim.tb_pe",
        simulator,
        parameters={"n": 3, "seed": 17, "beats": 120},
    )
