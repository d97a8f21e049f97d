"""cocotb testbench of :class:`fcircnn.hw.post_cbn.CBNResidual` (toplevel ``post_cbn``).

Parameters (:func:`fcircnn.sim.runner.tb_params`): ``lanes``, ``beats``, ``seed`` and
``acc_width`` (default 32: accumulators within that width, as the stage is built). Every test
streams seeded random operands with extremes through the generated Verilog with random
valid/ready back-pressure and compares ``t`` and the passed-through ``shift`` with
:func:`fcircnn.models.spectral.cbn`.
"""

import random

import cocotb
import numpy as np

from fcircnn.hw.post_cbn import cbn_config_layout, cbn_input_layout, cbn_output_layout
from fcircnn.sim.runner import pack, tb_params, unpack
from fcircnn.sim.tb_post_util import (
    cbn_cases,
    cocotb_reset,
    from_beats,
    ref_cbn,
    run_cocotb_stream,
    to_beats,
)

FIELDS = ("acc", "mult", "bias", "res", "res_mult", "shift")


async def _check(dut, bypass, residual, salt):
    params = tb_params()
    lanes, beats, seed = params["lanes"], params["beats"], params["seed"] + salt
    width = params.get("acc_width", 32)
    rng = np.random.default_rng(seed)
    re, im = cbn_cases(rng, (beats, lanes), width), cbn_cases(rng, (beats, lanes), width)
    case = {name: (re[name], im[name]) for name in FIELDS}
    cfg = {"bypass": bypass, "residual": residual}
    await cocotb_reset(dut, pack(cbn_config_layout, cfg))
    words = [pack(cbn_input_layout(lanes), b) for b in to_beats(case)]
    out = await run_cocotb_stream(dut, words, beats, random.Random(seed))
    out = [unpack(cbn_output_layout(lanes), w) for w in out]
    t, shift = from_beats(out, "t"), from_beats(out, "shift")
    ref = ref_cbn(case, bypass=bool(bypass), residual=bool(residual))
    for k in range(2):
        np.testing.assert_array_equal(t[k], ref[k])
        np.testing.assert_array_equal(shift[k], case["shift"][k])


@cocotb.test()
async def cbn_residual(dut):
    """acc*mult + bias + res*res_mult."""
    await _check(dut, bypass=0, residual=1, salt=0)


@cocotb.test()
async def cbn_plain(dut):
    """acc*mult + bias (residual disabled)."""
    await _check(dut, bypass=0, residual=0, salt=1)


@cocotb.test()
async def cbn_bypass(dut):
    """t = acc."""
    await _check(dut, bypass=1, residual=1, salt=2)
