"""cocotb testbench of :class:`fcircnn.hw.post_lane0.IrfftLane0` (toplevel ``post_lane0``).

Parameters: ``lanes``, ``B``, ``beats``, ``seed``. Streams seeded CBN operands (random and at
the largest magnitudes whose lane-0 sums fit int32) with random back-pressure and compares
with :func:`fcircnn.models.timedomain.irfft_lane0` (or the input itself when disabled).
"""

import random

import cocotb
import numpy as np

from fcircnn.hw.post_cbn import cbn_input_layout
from fcircnn.hw.post_lane0 import lane0_config_layout
from fcircnn.models import timedomain
from fcircnn.sim.runner import pack, tb_params, unpack
from fcircnn.sim.tb_post_util import (
    cbn_cases,
    cocotb_reset,
    from_beats,
    run_cocotb_stream,
    to_beats,
)

FIELDS = ("acc", "mult", "bias", "res", "res_mult", "shift")


async def _check(dut, enable, salt):
    params = tb_params()
    lanes, B, beats = params["lanes"], params["B"], params["beats"]
    rng = np.random.default_rng(params["seed"] + salt)
    re, im = cbn_cases(rng, (beats, lanes)), cbn_cases(rng, (beats, lanes))
    limit = (2**31 - 1) // B
    for part in (re, im):
        extreme = rng.random((beats, lanes)) < 0.3
        part["acc"] = np.where(extreme, np.where(part["acc"] < 0, -limit, limit),
                               part["acc"] // B)
    case = {name: (re[name], im[name]) for name in FIELDS}
    await cocotb_reset(dut, pack(lane0_config_layout, {"enable": enable}))
    layout = cbn_input_layout(lanes)
    words = [pack(layout, b) for b in to_beats(case)]
    out = await run_cocotb_stream(dut, words, beats, random.Random(params["seed"] + salt))
    got = from_beats([unpack(layout, w) for w in out], "acc")
    if not enable:
        expect = case["acc"]
    else:
        u = timedomain.irfft_lane0(case["acc"][0].reshape(-1), case["acc"][1].reshape(-1), B)
        first = np.zeros(beats * lanes, dtype=np.int64)
        first[:: B // 2] = u
        expect = (first.reshape(beats, lanes), np.zeros((beats, lanes), dtype=np.int64))
    for k in range(2):
        np.testing.assert_array_equal(got[k], expect[k])


@cocotb.test()
async def lane0_enabled(dut):
    """Lane 0 of each block's inverse transform in its first part."""
    await _check(dut, enable=1, salt=0)


@cocotb.test()
async def lane0_disabled(dut):
    """Pass-through."""
    await _check(dut, enable=0, salt=1)
