"""cocotb testbench of :class:`fcircnn.hw.packed_mac_chain.PackedMacChain` (Verilog top).

Parameters (:func:`fcircnn.sim.runner.tb_params`): ``n`` (stages), ``seed``, ``beats``. The
environment variable ``FCIRCNN_TB_DELIBERATE_FAIL=1`` (given as ``extra_env``, so it does not
change the build) enables ``deliberate_failure``, which the runner's own tests use to check that
a failure fails pytest. Drives
random Gauss-range operands and the guard bits' extremes (every product at the largest Gauss
magnitude, both signs) with a random clock enable, and compares every beat's two sums with
Python's.
"""

import os
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge

from fcircnn.arch.geometry import GAUSS_PRODUCT_MAX, INT8_MAX
from fcircnn.hw.packed_mac_chain import chain_latency
from fcircnn.sim.runner import tb_params

#: A Gauss product's operands: an INT9 pre-add (|x| <= 254) times an int8 part (|w| <= 127),
#: or an int8 part times a weight pre-add.
PREADD_MAX = 2 * INT8_MAX


def gauss_beat(rng: random.Random, n: int, extreme: bool) -> list[tuple[int, int, int]]:
    """``n`` operand triples ``(x, w0, w1)`` whose products are Gauss products: each stage's
    pre-add on one side (``x`` or both weights); ``extreme``: every product at
    :data:`GAUSS_PRODUCT_MAX`, one sign per sum (the guard bits' limit)."""
    beat = []
    s0, s1 = rng.choice((-1, 1)), rng.choice((-1, 1))
    for _ in range(n):
        if rng.random() < 0.5:  # the activation side holds the pre-add
            if extreme:
                x = PREADD_MAX
                beat.append((x, s0 * INT8_MAX, s1 * INT8_MAX))
            else:
                beat.append((rng.randint(-PREADD_MAX, PREADD_MAX),
                             rng.randint(-INT8_MAX, INT8_MAX), rng.randint(-INT8_MAX, INT8_MAX)))
        elif extreme:
            beat.append((-INT8_MAX, -s0 * PREADD_MAX, -s1 * PREADD_MAX))
        else:
            beat.append((rng.randint(-INT8_MAX, INT8_MAX), rng.randint(-PREADD_MAX, PREADD_MAX),
                         rng.randint(-PREADD_MAX, PREADD_MAX)))
    assert all(abs(x * w) <= GAUSS_PRODUCT_MAX for x, w0, w1 in beat for w in (w0, w1))
    return beat


def sums(beat):
    return (sum(x * w1 for x, _, w1 in beat), sum(x * w0 for x, w0, _ in beat))


@cocotb.test()
async def random_and_extreme_sums_with_stalls(dut):
    params = tb_params()
    n, rng = params["n"], random.Random(params.get("seed", 1))
    beats = [gauss_beat(rng, n, extreme=rng.random() < 0.25)
             for _ in range(params.get("beats", 400))]
    latency = chain_latency(n)
    cocotb.start_soon(Clock(dut.clk, 5, unit="ns").start())
    dut.rst.value = 1
    dut.ce.value = 0
    for _ in range(2):
        await FallingEdge(dut.clk)
    dut.rst.value = 0

    taken = 0  # beats taken at enabled edges
    checked = 0
    while checked < len(beats):
        await FallingEdge(dut.clk)
        if taken >= latency and taken - latency == checked:
            want = sums(beats[checked])
            got = (dut.s1.value.to_signed(), dut.s0.value.to_signed())
            assert got == want, f"beat {checked} {beats[checked]}: got {got}, want {want}"
            checked += 1
        ce = int(rng.random() < 0.7)
        beat = beats[taken] if taken < len(beats) else [(0, 0, 0)] * n
        dut.x.value = _packed(op[0] for op in beat)
        dut.w0.value = _packed(op[1] for op in beat)
        dut.w1.value = _packed(op[2] for op in beat)
        dut.ce.value = ce
        taken += ce


def _packed(values) -> int:
    word = 0
    for i, v in enumerate(values):
        word |= (v & 0x1FF) << (9 * i)
    return word


@cocotb.test(skip=os.environ.get("FCIRCNN_TB_DELIBERATE_FAIL") != "1")
async def deliberate_failure(dut):
    """Fails on purpose (the runner's test checks that a cocotb failure fails pytest)."""
    cocotb.start_soon(Clock(dut.clk, 5, unit="ns").start())
    await FallingEdge(dut.clk)
    assert dut.s0.value.to_signed() == 12345, "deliberate failure"
