"""cocotb testbench of :class:`fcircnn.hw.post_maxpool.CMaxPool` (toplevel ``post_maxpool``).

Parameters: ``lanes``, ``max_size`` (``[D, H, W]``), ``max_groups`` (>= 2), ``seed``. Each test
configures one pooling (window, stride, padding, map size, slot groups) at run time, streams two
seeded random maps back to back in raster order with random back-pressure and compares the pooled
voxels with :func:`fcircnn.models.spectral.cmaxpool`. One build serves all configurations.
"""

import random

import cocotb
import numpy as np

from fcircnn.hw.post_maxpool import maxpool_config, maxpool_config_layout
from fcircnn.hw.post_quantize import slot_layout
from fcircnn.sim.runner import pack, tb_params, unpack
from fcircnn.sim.tb_post_util import (
    beats_to_map,
    cocotb_reset,
    from_beats,
    map_to_beats,
    ref_maxpool,
    run_cocotb_stream,
    slot_cases,
    to_beats,
)


async def _check(dut, size, window, stride, padding, *, bypass=0, groups=1, salt=0):
    params = tb_params()
    lanes, max_size, seed = params["lanes"], tuple(params["max_size"]), params["seed"] + salt
    rng = np.random.default_rng(seed)
    slots = groups * lanes
    maps = [(slot_cases(rng, (slots, *size)), slot_cases(rng, (slots, *size))) for _ in range(2)]
    cfg = maxpool_config(max_size, size, window, stride, padding, groups=groups,
                         max_groups=params["max_groups"], bypass=bypass)
    await cocotb_reset(dut, pack(maxpool_config_layout(max_size, params["max_groups"]), cfg))
    words = [pack(slot_layout(lanes), b)
             for pair in maps for b in to_beats({None: map_to_beats(pair, lanes)})]
    if bypass:
        out_shape = (int(np.prod(size)),)
        refs = [map_to_beats(pair, lanes) for pair in maps]
    else:
        refs = [ref_maxpool(pair, window, stride, padding) for pair in maps]
        out_shape = refs[0][0].shape[1:]
    n = int(np.prod(out_shape)) * groups
    out = await run_cocotb_stream(dut, words, 2 * n, random.Random(seed))
    got = from_beats([unpack(slot_layout(lanes), w) for w in out])
    for j, ref in enumerate(refs):
        part = tuple(g[j * n:(j + 1) * n] for g in got)
        if not bypass:
            part = beats_to_map(part, out_shape)
        for k in range(2):
            np.testing.assert_array_equal(part[k], ref[k])


@cocotb.test()
async def resnet_3x3x3_stride2_pad1(dut):
    """3D ResNet-18 maxpool on an odd map."""
    await _check(dut, (3, 7, 5), (3, 3, 3), (2, 2, 2), (1, 1, 1), salt=0)


@cocotb.test()
async def c3d_pool1_1x2x2(dut):
    """C3D pool1, odd H and W."""
    await _check(dut, (3, 7, 5), (1, 2, 2), (1, 2, 2), (0, 0, 0), salt=1)


@cocotb.test()
async def c3d_pool5_pad011(dut):
    """C3D pool5: 2x2x2 stride 2 padding (0, 1, 1) on 2x7x7."""
    await _check(dut, (2, 7, 7), (2, 2, 2), (2, 2, 2), (0, 1, 1), salt=2)


@cocotb.test()
async def stride1_pad2(dut):
    """Largest trailing padding (inserted voxels on every axis)."""
    await _check(dut, (3, 5, 6), (3, 3, 3), (1, 1, 1), (2, 2, 2), salt=3)


@cocotb.test()
async def mixed_axes(dut):
    """Different window, stride and padding per axis, stride > window on one axis."""
    await _check(dut, (4, 5, 8), (2, 3, 1), (3, 1, 2), (1, 2, 0), salt=4)


@cocotb.test()
async def full_size_stride3(dut):
    """The largest map, 3x3x3 stride 3 (unused trailing voxels)."""
    await _check(dut, (4, 8, 8), (3, 3, 3), (3, 3, 3), (0, 0, 0), salt=5)


@cocotb.test()
async def interleaved_groups(dut):
    """Two slot groups per voxel (voxel major), 3x3x3 stride 2 padding 1."""
    await _check(dut, (3, 5, 4), (3, 3, 3), (2, 2, 2), (1, 1, 1), groups=2, salt=7)


@cocotb.test()
async def interleaved_groups_pad2(dut):
    """Two slot groups per voxel, inserted trailing padding on every axis."""
    await _check(dut, (2, 4, 3), (3, 3, 3), (1, 2, 1), (2, 1, 2), groups=2, salt=8)


@cocotb.test()
async def pool_bypass(dut):
    """Pass-through."""
    await _check(dut, (2, 3, 5), (3, 3, 3), (2, 2, 2), (1, 1, 1), bypass=1, salt=6)
