"""Tests of :mod:`fcircnn.hw.complex_mul_pair`."""

import random

import numpy as np
import pytest
from amaranth.sim import Simulator
from conftest import unit_simulators

from fcircnn.hw.complex_mul_pair import PAIR_LATENCY, ComplexMultiplierPair
from fcircnn.models.spectral import conv3d_slots_int
from fcircnn.sim.runner import require_simulator, run_cocotb
from fcircnn.sim.tb_complex_mul_pair import (
    pair_inputs,
    pair_reference,
    random_operands,
    slot_product,
)


def rtl_products(ops, seed):
    """Products of ``ops`` from the Amaranth simulator, with a random clock enable."""
    dut = ComplexMultiplierPair()
    rng = random.Random(seed)
    got = []

    async def testbench(ctx):
        captured = 0
        idx = 0
        while len(got) < len(ops):
            ce = int(rng.random() < 0.7)
            op = ops[idx] if idx < len(ops) else {"act": (0, 0), "w": [(0, 0)] * 2, "slot0": 0}
            act, w = pair_inputs(op)
            ctx.set(dut.act, act)
            ctx.set(dut.w, w)
            ctx.set(dut.slot0, op["slot0"])
            ctx.set(dut.ce, ce)
            await ctx.tick()
            if ce:
                captured += 1
                idx += 1
                if captured >= PAIR_LATENCY:
                    got.append(
                        [{"re": ctx.get(p.re), "im": ctx.get(p.im)} for p in dut.prod]
                    )

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


def test_products_extremes_and_random():
    ops = random_operands(random.Random(5), 400)
    assert rtl_products(ops, seed=4) == [pair_reference(op) for op in ops]


@pytest.mark.parametrize("slot0", [0, 1])
def test_all_extreme_corners(slot0):
    corners = (-127, 127)
    ops = [
        {"act": (a, b), "w": [(c, d), (-c, -d)], "slot0": slot0}
        for a in corners for b in corners for c in corners for d in corners
    ]
    assert rtl_products(ops, seed=slot0) == [pair_reference(op) for op in ops]


@pytest.mark.parametrize("simulator", unit_simulators())
def test_cocotb(simulator):
    require_simulator(simulator)
    run_cocotb(
        ComplexMultiplierPair(),
        "complex_mul_pair",
        "fcircnn.sim.tb_complex_mul_pair",
        simulator,
        parameters={"seed": 13, "beats": 300},
    )
