"""Carried pools: ResNet-18 conv1's pool (window 3, stride 2, padding 1) fused into the layer
engine's drain, run on the accelerator top level in cocotb, bit-exact.

Each output tile is pooled as its own map in CMaxPool; a window at a tile's low edge takes its
first voxel from the tile before along that axis, which each axis stage kept in its carry
memory (:class:`~fcircnn.arch.geometry.PoolCarry`). The network (``CARRIED_NET`` of
``tests/conftest.py``) spans several tiles on every axis (an edge row of tiles of half the
tile) and two m-tiles, each walked over the whole map in turn. The compiled plan is checked to
be fused (one descriptor, no conv map in the image), so the test cannot fall back to a pool
pass unnoticed. Its cycles are recorded as ``carried`` (``bench/record_rtl_cycles.py``).
"""

import pytest
from conftest import compile_saved, write_carried_accelerator
from engine_bench import check_run

from fcircnn.arch.descriptor import FLAG_MINNER, FLAG_POOL, OP_CONV, carried_axes

#: One worker runs this module (its Verilator build and shared run): see pyproject.toml.
pytestmark = pytest.mark.xdist_group("accelerator_carried")


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    return compile_saved(tmp_path_factory.mktemp("carried"), write_carried_accelerator, 13)


def test_the_pool_is_fused_and_carried_on_every_axis(compiled):
    _, image, _ = compiled
    lp = image.plan.layers[0]
    (d,) = lp.descriptors
    assert d.op == OP_CONV and d.flags & FLAG_POOL and not d.flags & FLAG_MINNER
    assert carried_axes(d.op, d.flags, d.pool_window) == [True, True, True]
    assert d.out_shape == lp.layer.out_shape == (2, 5, 4) and d.m_tiles == 2
    assert all(n > t for n, t in zip(d.conv_shape, d.tile, strict=True))  # tiles on each axis
    assert not any(r.name.endswith(".conv") for r in image.plan.regions)


@pytest.mark.slow  # suite budget: a Verilator build of its own, 1.5 to 4 minutes cold
def test_carried_pool_is_bit_exact_under_backpressure(compiled, run_image):
    acc, image, root = compiled
    doc = run_image(acc, root, "backpressure", backpressure=0.3, latency=6, seed=3)
    check_run(doc, image)
