"""cocotb testbench of :class:`fcircnn.hw.post_crelu.CReLU` (toplevel ``post_crelu``).

Parameters: ``lanes``, ``beats``, ``seed``. Streams seeded int8 slots (with -127, 0, 127) with
random back-pressure and compares with :func:`fcircnn.models.spectral.crelu` (or the input
itself in bypass).
"""

import random

import cocotb
import numpy as np

from fcircnn.hw.post_crelu import crelu_config_layout
from fcircnn.hw.post_quantize import slot_layout
from fcircnn.models import spectral
from fcircnn.sim.runner import pack, tb_params, unpack
from fcircnn.sim.tb_post_util import (
    cocotb_reset,
    from_beats,
    run_cocotb_stream,
    slot_cases,
    to_beats,
)


async def _check(dut, bypass, salt):
    params = tb_params()
    lanes, beats, seed = params["lanes"], params["beats"], params["seed"] + salt
    rng = np.random.default_rng(seed)
    y = slot_cases(rng, (beats, lanes)), slot_cases(rng, (beats, lanes))
    await cocotb_reset(dut, pack(crelu_config_layout, {"bypass": bypass}))
    words = [pack(slot_layout(lanes), b) for b in to_beats({None: y})]
    out = await run_cocotb_stream(dut, words, beats, random.Random(seed))
    got = from_beats([unpack(slot_layout(lanes), w) for w in out])
    for k in range(2):
        np.testing.assert_array_equal(got[k], y[k] if bypass else spectral.crelu(y[k]))


@cocotb.test()
async def crelu_enabled(dut):
    """max(y, 0) on re and im."""
    await _check(dut, bypass=0, salt=0)


@cocotb.test()
async def crelu_bypass(dut):
    """Pass-through."""
    await _check(dut, bypass=1, salt=1)
