"""Fused pools: the layer engine pooling each output tile in the drain (one descriptor with
``FLAG_POOL``, no pool pass), run on the accelerator top level in cocotb, bit-exact.

The network (``FUSED_NET`` of ``tests/conftest.py``) has the pools C3D fuses, (1,2,2) and
(2,2,2), on a core with ``Tn = Tm = 32`` (two slot groups interleaved in CMaxPool), an
output-channel count that leaves a partial m-tile (48 = 32 + 16: one slot group in the last
m-tile), edge tiles of half the tile's size (6 = 4 + 2 over ``Tr = Tc = 4``) and several
tiles per axis, with the PE array's depth unrolled (two lanes) and not (one lane stepping
through the depth). The same network loads only the input slot groups a layer has: f1's 3
channels, depth taps folded into 24 channels, are two groups in one n-tile of the core's
four blocks, f2's 48 channels an n-tile of two groups and one of one. The compiled plan is
checked to be fused, so the test cannot fall back to pool passes unnoticed.
"""

import pytest

from fcircnn.arch.descriptor import FLAG_POOL, OP_CONV
from fcircnn.gen.compiler import compile_network
from fcircnn.models.config import load_accelerator


@pytest.fixture(scope="module", params=[["td", "tn", "tm"], ["tn", "tm"]],
                ids=["two-lanes", "one-lane"])
def compiled(request, tmp_path_factory, fused_accelerator):
    root = tmp_path_factory.mktemp("fused")
    acc = load_accelerator(fused_accelerator(root, unroll=request.param))
    image = compile_network(acc, seed=5, base=0x10000)
    image.save(root / "image")
    return acc, image, root


def test_pools_are_fused(compiled):
    _, image, _ = compiled
    pooled = [lp for lp in image.plan.layers if lp.layer.pool is not None]
    assert [lp.layer.name for lp in pooled] == ["f1", "f2"]
    for lp in pooled:
        (d,) = lp.descriptors
        assert d.op == OP_CONV and d.flags & FLAG_POOL
        assert d.out_shape == lp.layer.out_shape and d.conv_shape == lp.layer.conv_shape
    assert not any(r.name.endswith(".conv") for r in image.plan.regions)


@pytest.mark.parametrize("params", [{}, {"backpressure": 0.3, "latency": 6, "seed": 7}],
                         ids=["plain", "backpressure"])
def test_fused_pools_are_bit_exact(compiled, run_image, params):
    acc, _, root = compiled
    doc = run_image(acc, root, "run-" + "-".join(map(str, params.values())), **params)
    assert doc["status"] == "done" and doc["passed"]
    names = [layer["name"] for layer in doc["layers"]]
    assert names == [lp.layer.name for lp in compiled[1].plan.layers]
    for layer in doc["layers"]:
        assert layer["passed"] and layer["mismatches"] == 0, layer
