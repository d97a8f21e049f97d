"""cocotb benchmark of :class:`fcircnn.hw.axi_dma.AxiDma` (toplevel ``axi_dma``): bus efficiency.

No back-pressure, cocotbext-axi ``AxiRam`` as DDR. Measures, in clock cycles from the command
handshake to the status, long contiguous reads and writes and the input tiles of C3D conv3a with
``Tr = Tc = 7`` (interior and corner tiles). Results go to the JSON file named by the environment
variable ``FCIRCNN_BENCH_OUT``. Parameters: ``block_bytes``.
"""

import json
import os

import cocotb

from fcircnn.gen.dma_plan import (
    FeatureMap,
    conv_input_range,
    plan_block,
    plan_read_box,
    plan_write_box,
)
from fcircnn.models.config import builtin_path, load_accelerator
from fcircnn.sim.runner import tb_params
from fcircnn.sim.tb_axi_dma import Dma


@cocotb.test()
async def efficiency(dut):
    """Beats per cycle of long transfers and of C3D conv3a input tiles."""
    import random

    block = tb_params()["block_bytes"]
    dma = Dma(dut, random.Random(0))
    await dma.start(4 * block + (1 << 22))
    results = {}
    (desc,) = plan_block(0, block)
    _, status, cycles = await dma.read(desc.fields())
    assert status[1] == 0
    results["long_read"] = {"beats": desc.beats, "cycles": cycles}
    fmap = FeatureMap(2 * block, 8, (1, 1, block // 16))
    wdesc = plan_write_box(fmap, (0, 1), (0, 1), (0, 1), (0, block // 16))
    status, _, cycles = await dma.write(wdesc.fields(), bytes(block))
    results["long_write"] = {"beats": wdesc.beats, "cycles": cycles}

    acc = load_accelerator(builtin_path("c3d_zcu102"))
    layer = acc.network.layer("conv3a")
    core = acc.core_for(layer)
    fmap = FeatureMap(4 * block, layer.padded_in_channels // 2, layer.in_shape)
    groups = core.tn // 16
    for name, origin in (("conv3a_tile_interior", (2, 7, 7)), ("conv3a_tile_corner", (0, 0, 0))):
        box = [conv_input_range(o, t, k, s, p) for o, t, k, s, p in zip(
            origin, (core.td, core.tr, core.tc), layer.kernel, layer.stride, layer.padding,
            strict=True)]
        desc = plan_read_box(fmap, (0, groups), *box)
        _, status, cycles = await dma.read(desc.fields())
        results[name] = {"beats": desc.beats, "bus_beats": desc.bus_beats,
                         "bursts": len(desc.bursts()), "cycles": cycles}
    dut._log.info("%s", results)
    out = os.environ.get("FCIRCNN_BENCH_OUT")
    if out:
        with open(out, "w") as f:
            json.dump(results, f, indent=1)
