"""cocotb testbench of :class:`fcircnn.hw.post_rfft.RfftSum` (toplevel ``post_rfft``).

Parameters: ``lanes``, ``B``, ``beats``, ``seed``. Streams seeded int8 time lanes (random and
every lane at +-127) with random back-pressure and compares with
:func:`fcircnn.models.timedomain.rfft_int` times each slot's multiplier (or the lanes
themselves when disabled).
"""

import random

import cocotb
import numpy as np

from fcircnn.arch.transforms import RFFT_SLOTS
from fcircnn.hw.post_cbn import cbn_output_layout
from fcircnn.hw.post_quantize import slot_layout
from fcircnn.hw.post_rfft import rfft_config_layout
from fcircnn.models import timedomain
from fcircnn.sim.runner import pack, tb_params, unpack
from fcircnn.sim.tb_post_util import cocotb_reset, from_beats, run_cocotb_stream, slot_cases
from fcircnn.sim.tb_post_util import to_beats as beats_of


async def _check(dut, enable, salt):
    params = tb_params()
    lanes, B, beats = params["lanes"], params["B"], params["beats"]
    rng = np.random.default_rng(params["seed"] + salt)
    y = slot_cases(rng, (beats, lanes)), slot_cases(rng, (beats, lanes))
    extreme = rng.random((beats, 1)) < 0.3
    y = tuple(np.where(extreme, np.where(rng.random((beats, lanes)) < 0.5, -127, 127), p)
              for p in y)
    mult = [int(v) for v in rng.integers(-32768, 32768, 2 * RFFT_SLOTS)]
    shift = int(rng.integers(0, 48))
    cfg = {"enable": enable, "mult": mult, "shift": shift}
    await cocotb_reset(dut, pack(rfft_config_layout, cfg))
    words = [pack(slot_layout(lanes), b) for b in beats_of({None: y})]
    out = await run_cocotb_stream(dut, words, beats, random.Random(params["seed"] + salt))
    layout = cbn_output_layout(lanes)
    got = from_beats([unpack(layout, w) for w in out], "t")
    if enable:
        v = timedomain.rfft_int(y[0].reshape(-1), y[1].reshape(-1), B)
        k = np.arange(beats * lanes) % (B // 2)
        m = np.asarray(mult).reshape(2, RFFT_SLOTS)[:, : B // 2]
        expect = tuple((v[c] * m[c][k]).reshape(beats, lanes) for c in (0, 1))
    else:
        expect = y
    for c in range(2):
        np.testing.assert_array_equal(got[c], expect[c])


@cocotb.test()
async def rfft_enabled(dut):
    """Each block's integer rfft times its slots' multipliers."""
    await _check(dut, enable=1, salt=0)


@cocotb.test()
async def rfft_disabled(dut):
    """Pass-through."""
    await _check(dut, enable=0, salt=1)
