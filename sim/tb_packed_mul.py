"""cocotb testbench of :class:`fcircnn.hw.packed_mul.PackedDualMultiplier` (Verilog top).

Parameters (:func:`fcircnn.sim.runner.tb_params`): ``seed``, ``beats``. The environment variable
``FCIRCNN_TB_DELIBERATE_FAIL=1`` (given as ``extra_env``, so it does not change the build) enables
``deliberate_failure``, which the runner's own tests use to check that a failure fails pytest.
"""

import os
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge

from fcircnn.sim.runner import tb_params

LATENCY = 3
EXTREMES = (-255, -254, -127, -1, 0, 1, 127, 254, 255)


async def _reset(dut):
    cocotb.start_soon(Clock(dut.clk, 5, unit="ns").start())
    dut.rst.value = 1
    dut.ce.value = 0
    dut.a.value = dut.b.value = dut.c.value = 0
    for _ in range(2):
        await FallingEdge(dut.clk)
    dut.rst.value = 0


@cocotb.test()
async def random_operands_with_stalls(dut):
    """Random INT9 operands (extremes included) with a random clock enable."""
    params = tb_params()
    rng = random.Random(params.get("seed", 1))
    beats = params.get("beats", 300)
    operands = [tuple(rng.choice(EXTREMES) for _ in range(3)) for _ in range(len(EXTREMES) ** 2)]
    operands += [tuple(rng.randint(-255, 255) for _ in range(3)) for _ in range(beats)]
    await _reset(dut)

    captured = []  # operands taken at enabled edges, in order
    checked = 0
    idx = 0
    ce = 0
    while checked < len(operands):
        await FallingEdge(dut.clk)
        # outputs now reflect the edge that just happened
        if len(captured) >= LATENCY:
            a, b, c = captured[len(captured) - LATENCY]
            got = (dut.ab.value.to_signed(), dut.ac.value.to_signed())
            assert got == (a * b, a * c), f"operands {(a, b, c)}: got {got}, want {(a * b, a * c)}"
            checked = len(captured) - LATENCY + 1
        # drive the next cycle
        ce = int(rng.random() < 0.7)
        op = operands[idx] if idx < len(operands) else (0, 0, 0)
        dut.a.value, dut.b.value, dut.c.value = op
        dut.ce.value = ce
        if ce:
            captured.append(op)
            idx += 1


@cocotb.test(skip=os.environ.get("FCIRCNN_TB_DELIBERATE_FAIL") != "1")
async def deliberate_failure(dut):
    """Fails on purpose (the runner's test checks that a cocotb failure fails pytest)."""
    await _reset(dut)
    assert dut.ab.value.to_signed() == 12345, "deliberate failure"
