"""Tests of :mod:`fcircnn.hw.packed_mul`."""

import gc
import random

import numpy as np
import pytest
from amaranth.sim import Simulator
from conftest import unit_simulators

from fcircnn.hw.common import never_elaborated
from fcircnn.hw.packed_mul import PackedDualMultiplier
from fcircnn.sim.runner import require_simulator, run_cocotb

LATENCY = 3
EXTREMES = (-255, -254, -128, -127, -1, 0, 1, 127, 128, 254, 255)


def ref_products(ops):
    return [(a * b, a * c) for a, b, c in ops]


def rtl_products(ops, seed):
    """Products of ``ops`` from the Amaranth simulator, with a random clock enable."""
    dut = PackedDualMultiplier()
    rng = random.Random(seed)
    got = []

    async def testbench(ctx):
        captured = 0
        idx = 0
        while len(got) < len(ops):
            ce = int(rng.random() < 0.7)
            op = ops[idx] if idx < len(ops) else (0, 0, 0)
            ctx.set(dut.a, op[0])
            ctx.set(dut.b, op[1])
            ctx.set(dut.c, op[2])
            ctx.set(dut.ce, ce)
            await ctx.tick()
            if ce:
                captured += 1
                idx += 1
                if captured >= LATENCY:
                    got.append((ctx.get(dut.ab), ctx.get(dut.ac)))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()
    return got


def test_products_extremes_and_random():
    rng = random.Random(7)
    ops = [(a, b, c) for a in EXTREMES for b in EXTREMES for c in EXTREMES]
    ops += [tuple(rng.randint(-256, 255) for _ in range(3)) for _ in range(500)]
    # b = -256 is the one value outside the exact range (with c < 0)
    ops = [op for op in ops if op[1] != -256]
    assert rtl_products(ops, seed=1) == ref_products(ops)


def test_low_product_uses_all_18_bits():
    ops = [(-256, 0, -256), (-256, 255, -256), (255, -255, 255), (-256, -255, 255)]
    assert rtl_products(ops, seed=2) == ref_products(ops)


def _signed(x, bits):
    x = x & ((1 << bits) - 1)
    return np.where(x >> (bits - 1), x - (1 << bits), x)


def test_packing_exact_on_documented_range():
    """Bit-level model of the packing, exhaustively: exact for b in [-255, 255], any a, c."""
    b, c = np.meshgrid(np.arange(-255, 256), np.arange(-256, 256), indexing="ij")
    for a in range(-256, 256):
        wide = _signed((b << 18) + c, 27)  # the 27-bit packed operand
        o = a * wide
        ac = _signed(o, 18)
        ab = _signed(o >> 18, 18) + ((o >> 17) & 1)
        assert np.array_equal(ac, a * c) and np.array_equal(ab, a * b), a


def test_ports_are_signed_int9():
    dut = PackedDualMultiplier()
    never_elaborated(dut)  # inspected, not simulated
    for name in ("a", "b", "c"):
        shape = getattr(dut, name).shape()
        assert shape.signed and shape.width == 9
    assert dut.ab.shape().signed and dut.ab.shape().width == 18
    del dut
    gc.collect()  # the inspected hardware goes while never_elaborated's filter holds


@pytest.mark.parametrize("simulator", unit_simulators())
def test_cocotb(simulator):
    require_simulator(simulator)
    run_cocotb(
        PackedDualMultiplier(),
        "packed_mul",
        "fcircnn.sim.tb_packed_mul",
        simulator,
        parameters={"seed": 11, "beats": 300},
    )
