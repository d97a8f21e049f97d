"""Input tile buffer (:mod:`fcircnn.hw.buffer_input`): a layer whose depth stride is smaller
than the largest the buffer is built for.

Regression: the lanes used to store their planes at the buffer's elaboration stride, so on a
core that also runs stride-2 layers (3D ResNet-18's spatial core), every stride-1 layer read
the wrong input planes on lanes ``v >= 1``. The ``stride_d`` port gives the layer's stride.
"""

import numpy as np
import pytest
from amaranth.sim import Simulator

from fcircnn.hw.buffer_input import InputBuffer
from fcircnn.models.layout import pack_ncdhw8


@pytest.mark.parametrize("stride_d", [1, 2])
def test_lanes_read_the_planes_of_the_layer_stride(stride_d):
    rng = np.random.default_rng(stride_d)
    Td, kd = 3, 3
    buf = InputBuffer(16, Td, 2, 2, kernel=(kd, 1, 1), stride=(2, 1, 1))
    depth = (Td - 1) * stride_d + kd
    re = rng.integers(-127, 128, size=(8, depth, 2, 2))
    im = rng.integers(-127, 128, size=(8, depth, 2, 2))
    raw = pack_ncdhw8(re, im)
    beats = [int.from_bytes(raw[i:i + 16], "little") for i in range(0, len(raw), 16)]
    got = []

    async def bench(ctx):
        ctx.set(buf.box, {"groups": 1, "d": depth, "h": 2, "w": 2})
        ctx.set(buf.stride_d, stride_d)
        await ctx.tick()  # stride_d one cycle ahead of the first beat (the contract)
        for k, beat in enumerate(beats):
            ctx.set(buf.i.payload, {"data": beat, "last": int(k == len(beats) - 1)})
            ctx.set(buf.i.valid, 1)
            await ctx.tick().until(buf.i.ready)
        ctx.set(buf.i.valid, 0)
        await ctx.tick().until(buf.r_valid)
        for a in range(kd):
            ctx.set(buf.r_addr, a * buf.plane + 1 * buf.width + 0)  # voxel (h, w) = (1, 0)
            ctx.set(buf.r_en, 1)
            await ctx.tick()
            ctx.set(buf.r_en, 0)
            got.append(ctx.get(buf.act))

    sim = Simulator(buf)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    for a, act in enumerate(got):
        for v in range(Td):
            plane = v * stride_d + a
            for s in range(8):
                assert (act[v][s].re, act[v][s].im) == (re[s, plane, 1, 0], im[s, plane, 1, 0]), \
                    (a, v, s)
    assert buf.lanes_of_plane(2, stride_d) == [(v, 2 - v * stride_d) for v in range(Td)
                                               if 0 <= 2 - v * stride_d < kd]
