"""cocotb testbench of :class:`fcircnn.hw.post_quantize.Quantize` (toplevel ``post_quantize``).

Parameters: ``lanes``, ``beats``, ``seed``. Streams seeded random ``(t, shift)`` with int48
edges, shifts 0 and 47, clamp saturation at both ends and ``.5`` ties of both signs, with random
back-pressure, and compares with :func:`fcircnn.models.spectral.quantize`.
"""

import random

import cocotb
import numpy as np

from fcircnn.hw.post_quantize import quantize_config_layout, quantize_input_layout, slot_layout
from fcircnn.sim.runner import pack, tb_params, unpack
from fcircnn.sim.tb_post_util import (
    cocotb_reset,
    from_beats,
    quantize_cases,
    ref_quantize,
    run_cocotb_stream,
    to_beats,
)


async def _check(dut, bypass, salt):
    params = tb_params()
    lanes, beats, seed = params["lanes"], params["beats"], params["seed"] + salt
    rng = np.random.default_rng(seed)
    (t_re, s_re), (t_im, s_im) = (quantize_cases(rng, (beats, lanes)) for _ in range(2))
    t, shift = (t_re, t_im), (s_re, s_im)
    await cocotb_reset(dut, pack(quantize_config_layout, {"bypass": bypass}))
    words = [pack(quantize_input_layout(lanes), b) for b in to_beats({"t": t, "shift": shift})]
    out = await run_cocotb_stream(dut, words, beats, random.Random(seed))
    y = from_beats([unpack(slot_layout(lanes), w) for w in out])
    ref = ref_quantize(t, shift, bypass=bool(bypass))
    for k in range(2):
        np.testing.assert_array_equal(y[k], ref[k])


@cocotb.test()
async def quantize_random_with_edges(dut):
    """Rounding shift and clamp."""
    await _check(dut, bypass=0, salt=0)


@cocotb.test()
async def quantize_bypass(dut):
    """Shift ignored: saturating pass-through."""
    await _check(dut, bypass=1, salt=1)
