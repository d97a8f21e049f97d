"""cocotb testbench of :class:`fcircnn.hw.skid_buffer.SkidBuffer` (toplevel ``skid_buffer``).

Parameters: ``width`` (payload ``unsigned(width)``), ``beats``, ``seed``. Streams seeded random
words with random idle cycles and random ``o.ready`` back-pressure (light and heavy) and
compares the whole output sequence with the input (nothing lost, duplicated or reordered).
"""

import random

import cocotb

from fcircnn.sim.runner import tb_params
from fcircnn.sim.tb_post_util import cocotb_reset, run_cocotb_stream


async def _check(dut, salt, *, p_idle, p_stall):
    params = tb_params()
    width, beats, seed = params["width"], params["beats"], params["seed"] + salt
    rng = random.Random(seed)
    words = [rng.randrange(1 << width) for _ in range(beats)]
    await cocotb_reset(dut)
    out = await run_cocotb_stream(dut, words, beats, rng, p_idle=p_idle, p_stall=p_stall)
    assert out == words


@cocotb.test()
async def random_backpressure(dut):
    """Random idle and stall cycles, 30 % each."""
    await _check(dut, 0, p_idle=0.3, p_stall=0.3)


@cocotb.test()
async def heavy_backpressure(dut):
    """Input nearly always valid, output mostly stalled: the skid entry is exercised."""
    await _check(dut, 1, p_idle=0.05, p_stall=0.7)
