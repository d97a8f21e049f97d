"""Tests of :mod:`fcircnn.hw.complex_mul_pair`."""

import gc
import random

import numpy as np
import pytest
from amaranth.sim import Simulator
from conftest import unit_simulators

from fcircnn.arch.geometry import PACKED_CHAIN_MAX
from fcircnn.gen.synth import synthesize
from fcircnn.hw.common import never_elaborated
from fcircnn.hw.complex_mul_pair import ComplexMultiplierPair, pair_latency
from fcircnn.models.spectral import conv3d_slots_int
from fcircnn.sim.runner import require_simulator, run_cocotb
from fcircnn.sim.tb_complex_mul_pair import (
    pair_inputs,
    pair_reference,
    random_operands,
    slot_product,
)


def rtl_sums(beats, n, slot0, delay, seed):
    """The pair's outputs for each beat from the Amaranth simulator, random clock enable."""
    dut = ComplexMultiplierPair(n, slot0=slot0, delay=delay)
    rng = random.Random(seed)
    zero = [{"act": (0, 0), "w": [(0, 0), (0, 0)]}] * n
    got = []

    async def testbench(ctx):
        taken = 0
        while len(got) < len(beats):
            ce = rng.random() < 0.7
            act, w = pair_inputs(beats[taken] if taken < len(beats) else zero)
            ctx.set(dut.act, act)
            ctx.set(dut.w, w)
            ctx.set(dut.ce, ce)
            await ctx.tick()
            taken += ce
            if ce and taken >= dut.latency:
                got.append([{"re": ctx.get(p.re), "im": ctx.get(p.im)} for p in dut.prod])

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()
    return got


def test_slot_product_matches_golden_model():
    """The direct reference equals conv3d_slots_int on 1x1x1 kernels (slot 0 and slot k)."""
    rng = np.random.default_rng(3)
    for _ in range(20):
        x_re, x_im = rng.integers(-127, 128, (2, 2, 1, 1, 1))  # [Q*B/2 = 2 slots, 1x1x1]
        w_re, w_im = rng.integers(-127, 128, (2, 1, 1, 2, 1, 1, 1))  # [P=1, Q=1, 2, 1x1x1]
        acc_re, acc_im = conv3d_slots_int(x_re, x_im, w_re, w_im)
        for k in range(2):
            want = slot_product(
                int(x_re[k, 0, 0, 0]), int(x_im[k, 0, 0, 0]),
                int(w_re[0, 0, k, 0, 0, 0]), int(w_im[0, 0, k, 0, 0, 0]), k == 0,
            )
            assert (int(acc_re[k, 0, 0, 0]), int(acc_im[k, 0, 0, 0])) == want


@pytest.mark.parametrize("slot0", [False, True])
@pytest.mark.parametrize("n", range(1, PACKED_CHAIN_MAX + 1))
def test_sums_on_corners_and_random_slots(n, slot0):
    """Every corner of the int8 range on all ``n`` slots at once (the sums' extremes, the
    cascades' guard bits at their limit) and random slots."""
    beats = random_operands(random.Random(n), 120, n)
    assert rtl_sums(beats, n, slot0, 0, seed=n) == [pair_reference(b, slot0) for b in beats]


def test_a_delayed_pair_is_the_same_pair_later():
    beats = random_operands(random.Random(9), 60, 2)
    assert rtl_sums(beats, 2, False, 2, seed=3) == [pair_reference(b, False) for b in beats]


def test_latency_and_dsp_count():
    pairs = [ComplexMultiplierPair(n, slot0=s, delay=d) for n in (1, 4) for s in (False, True)
             for d in (0, 3)]
    never_elaborated(*pairs)  # inspected, not simulated
    assert [(p.latency, p.dsp_count) for p in pairs] == [
        (5, 3), (8, 3), (5, 2), (8, 2), (8, 12), (11, 12), (8, 8), (11, 8)]
    assert all(p.latency == pair_latency(p.n, p.delay) for p in pairs)
    del pairs
    gc.collect()


@pytest.mark.parametrize("kwargs, error, match", [
    ({"n": 0}, ValueError, "n must be"), ({"n": 5}, ValueError, "n must be"),
    ({"slot0": 1}, TypeError, "slot0 must be a bool"), ({"delay": 4}, ValueError, "delay"),
    ({"delay": -1}, ValueError, "delay")])
def test_constructor_rejects(kwargs, error, match):
    with pytest.raises(error, match=match):
        ComplexMultiplierPair(**kwargs)


@pytest.mark.parametrize("slot0, dsp", [(False, 12), (True, 8)])
def test_synthesizes_to_its_dsps_and_the_post_subtraction(slot0, dsp, tmp_path):
    """Yosys: 3 cascades of 4 DSP48E2 (2 on slot 0); the fabric holds the operands' pre-adds,
    delay lines, the splits and the post-subtraction, no adder per product."""
    report = synthesize(ComplexMultiplierPair(4, slot0=slot0), "pair", workdir=tmp_path)
    assert report.dsp == dsp and report.leftover_multipliers == 0
    assert report.lut_total < 25 * dsp


@pytest.mark.parametrize("simulator", unit_simulators())
@pytest.mark.parametrize("n, slot0, delay", [(1, False, 0), (4, False, 0), (3, True, 1)])
def test_cocotb(simulator, n, slot0, delay):
    require_simulator(simulator)
    run_cocotb(
        ComplexMultiplierPair(n, slot0=slot0, delay=delay),
        "complex_mul_pair",
        "fcircnn.sim.tb_complex_mul_pair",
        simulator,
        parameters={"n": n, "slot0": slot0, "delay": delay, "seed": 13, "beats": 300},
    )
