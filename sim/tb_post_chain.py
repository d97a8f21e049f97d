"""cocotb testbench of :class:`fcircnn.hw.post_chain.PostChain` (toplevel ``post_chain``).

Parameters: ``lanes``, ``max_size`` (``[D, H, W]``), ``max_groups`` (>= 2), ``seed``. Each test
configures a layer (residual, ReLU, pool, slot groups, bypasses) at run time, streams a seeded
random map of accumulators with their per-slot parameters in raster order with random
back-pressure and compares the result with :func:`fcircnn.models.spectral.post_process` (stage
by stage for the bypass case).
"""

import random

import cocotb
import numpy as np

from fcircnn.hw.post_cbn import cbn_input_layout
from fcircnn.hw.post_chain import post_config_layout
from fcircnn.hw.post_quantize import slot_layout
from fcircnn.models import spectral
from fcircnn.sim.runner import pack, tb_params, unpack
from fcircnn.sim.tb_post_util import (
    beats_to_map,
    cbn_cases,
    chain_config,
    cocotb_reset,
    from_beats,
    map_to_beats,
    ref_chain,
    run_cocotb_stream,
    to_beats,
)

FIELDS = ("acc", "mult", "bias", "res", "res_mult", "shift")


async def _check(dut, size, *, residual, relu, pool, salt, groups=1, **bypass):
    params = tb_params()
    lanes, max_size, seed = params["lanes"], tuple(params["max_size"]), params["seed"] + salt
    rng = np.random.default_rng(seed)
    shape = (groups * lanes, *size)
    re, im = cbn_cases(rng, shape), cbn_cases(rng, shape)
    case = {name: (re[name], im[name]) for name in FIELDS}
    cfg = chain_config(size, residual=residual, relu=relu, pool=pool, groups=groups, **bypass)
    if bypass:
        ref = ref_chain(case, cfg)
    else:
        ref = tuple(spectral.post_process(
            case["acc"][k], case["mult"][k], case["bias"][k], case["shift"][k],
            res=case["res"][k] if residual else None,
            res_mult=case["res_mult"][k] if residual else None,
            relu=relu, pool=pool) for k in range(2))
    layout = post_config_layout(max_size, params["max_groups"])
    await cocotb_reset(dut, pack(layout, cfg))
    beats = to_beats({name: map_to_beats(pair, lanes) for name, pair in case.items()})
    words = [pack(cbn_input_layout(lanes), b) for b in beats]
    out = await run_cocotb_stream(dut, words, ref[0].size // lanes, random.Random(seed))
    got = beats_to_map(from_beats([unpack(slot_layout(lanes), w) for w in out]),
                       ref[0].shape[1:])
    for k in range(2):
        np.testing.assert_array_equal(got[k], ref[k])


@cocotb.test()
async def resnet_residual_relu_pool(dut):
    """Residual, ReLU, 3x3x3 stride 2 padding 1 pool."""
    await _check(dut, (3, 5, 6), residual=True, relu=True,
                 pool=((3, 3, 3), (2, 2, 2), (1, 1, 1)), salt=0)


@cocotb.test()
async def c3d_relu_pool5(dut):
    """ReLU, 2x2x2 stride 2 padding (0, 1, 1) pool."""
    await _check(dut, (2, 5, 5), residual=False, relu=True,
                 pool=((2, 2, 2), (2, 2, 2), (0, 1, 1)), salt=1)


@cocotb.test()
async def plain_no_pool(dut):
    """CBN and quantize only."""
    await _check(dut, (2, 3, 6), residual=False, relu=False, pool=None, salt=2)


@cocotb.test()
async def interleaved_groups(dut):
    """Two slot groups per voxel, residual, ReLU, 3x3x3 stride 2 padding 1 pool."""
    await _check(dut, (2, 4, 5), residual=True, relu=True,
                 pool=((3, 3, 3), (2, 2, 2), (1, 1, 1)), salt=4, groups=2)


@cocotb.test()
async def cbn_quantize_bypassed(dut):
    """CBN and quantizer bypassed, ReLU, (1, 2, 2) pool."""
    await _check(dut, (2, 4, 4), residual=True, relu=True,
                 pool=((1, 2, 2), (1, 2, 2), (0, 0, 0)), salt=3,
                 bypass_cbn=True, bypass_quantize=True)
