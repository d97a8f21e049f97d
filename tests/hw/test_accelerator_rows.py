"""Row lanes on the accelerator top level in cocotb: convs shallower than the core's four
depth lanes run rows of their tiles in the idle lanes
(:data:`~fcircnn.arch.descriptor.FLAG_ROWLANES`), bit-exact under random AXI back-pressure on
both ports.

The network (``tests/conftest.py``, ``ROWS_NET``) is ResNet-18's stages 3 and 4 in small on a
``Td = 4`` core of ``4 x 4`` tiles: ``a1`` (2 deep) in two row groups of two rows, its second
row of tiles two rows long (the second group has none); ``a2`` (stride 2, two m-tiles walked
innermost) and its 1x1x1 stride-2 shortcut ``ad`` (subsampled input) 1x3x3 in four groups of
one row (the fourth has none); ``a3`` (two n-tiles, kernel trimmed) with ``ad``'s map as its
residual, read at each lane's depth and row. The PE-busy cycles the engine counts are the
walk's with row lanes (``min(Rh, ext_h)`` rows a pass), which the performance model counts
too; with ``row_lanes: false`` the same network runs every tile's rows in one lane.
"""

import math

import pytest
from conftest import compile_saved, write_rows_accelerator
from engine_bench import check_run

from fcircnn.arch.descriptor import FLAG_ROWLANES, row_groups_of
from fcircnn.arch.geometry import CoreGeometry, engine_geometry, lane_rows
from fcircnn.arch.walk import conv_passes
from fcircnn.gen.plan import plan_network
from fcircnn.models.config import load_accelerator

#: One worker runs this module (its Verilator build): see pyproject.toml.
pytestmark = pytest.mark.xdist_group("accelerator_rows")


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    return compile_saved(tmp_path_factory.mktemp("rows"), write_rows_accelerator, 41)


def pe_beats(acc, desc) -> int:
    """PE beats of a conv descriptor: per pass, ``min(Rh, ext_h) * ext_w`` voxels (the tile's
    rows without row lanes) per kernel tap."""
    core = CoreGeometry.of(acc.cores[desc.core], acc.block_size)
    rows = lane_rows(desc.tile[1], row_groups_of(desc.flags, desc.tile[0], core.lanes))
    return sum(min(rows, tile.ext[1]) * tile.ext[2] * math.prod(desc.kernel)
               for tile, _ in conv_passes(desc, core))


def test_the_compiler_gives_the_shallow_convs_row_lanes(compiled, tmp_path):
    acc, image, root = compiled
    plans = {lp.layer.name: lp.descriptor for lp in image.plan.layers}
    groups = {name: row_groups_of(d.flags, d.tile[0], 4) for name, d in plans.items()}
    assert groups == {"a1": 2, "a2": 4, "ad": 4, "a3": 4, "fc": 1}
    assert [plans[n].tile for n in ("a1", "a2", "a3")] == [(2, 4, 4), (1, 3, 3), (1, 3, 3)]
    # a1: two tiles of 4 and 2 rows (2 and 2 rows a pass), a 4 and a 1 wide column, 27 taps.
    assert pe_beats(acc, plans["a1"]) == 27 * 2 * (4 + 1) * 2
    # With row_lanes: false the compiler sets no flag and the engine no row lanes.
    (tmp_path / "net.yaml").write_text((root / "net.yaml").read_text())
    (tmp_path / "acc.yaml").write_text((root / "acc.yaml").read_text() + "row_lanes: false\n")
    flat = load_accelerator(tmp_path / "acc.yaml")
    assert not any(d.flags & FLAG_ROWLANES for lp in plan_network(flat).layers
                   for d in lp.descriptors)
    assert not engine_geometry(flat, flat.cores[0]).row_lanes
    assert engine_geometry(acc, acc.cores[0]).row_lanes


@pytest.mark.slow  # suite budget: a Verilator build of its own, 1.5 to 4 minutes cold
def test_row_lanes_are_bit_exact_under_backpressure(compiled, run_image):
    acc, image, root = compiled
    doc = run_image(acc, root, "rows", backpressure=0.3, latency=4, seed=43)
    check_run(doc, image)
    # The engine's PE-busy count is the walk's with row lanes: fewer beats than the tiles'
    # rows would take.
    busy = {layer["name"]: layer["pe_busy"] for layer in doc["layers"]}
    for lp in image.plan.layers:
        if lp.descriptor.flags & FLAG_ROWLANES:
            assert busy[lp.layer.name] == pe_beats(acc, lp.descriptor), lp.layer.name
