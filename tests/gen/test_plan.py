"""The descriptors' stream regions (:func:`fcircnn.gen.plan.plan_network`): every box a
descriptor moves lies in the region the compiler wrote for its stream, and the regions are the
maps' and tables' own, so the hardware's per-burst region check refuses nothing a compiled
image does."""

from __future__ import annotations

from pathlib import Path

import conftest
import pytest

from fcircnn.arch.descriptor import (
    STREAM_REGIONS,
    region_fault,
    region_pages,
    used_regions,
)
from fcircnn.arch.geometry import PAGE_BITS, CoreGeometry, engine_geometry
from fcircnn.arch.walk import stream_boxes
from fcircnn.gen.plan import plan_network
from fcircnn.models.config import builtin_path, load_config

CONFIGS = Path(__file__).resolve().parent.parent / "hw" / "configs"
#: The test accelerators the RTL runs: every layer kind on two cores, the time-domain stem and
#: head, and the one-core designs of the accelerator tests (ports, splits, quarters, row
#: lanes, depth fold, carried and fused pools, pool lanes, trimmed buffers).
WRITERS = ["small", "fc", "pool_lanes", "trim", "quarters", "rows", "dfold", "carried",
           "fused"]


def _pages_of(desc, name):
    base = getattr(desc, f"{name}_base")
    first = base >> PAGE_BITS
    return first, first + getattr(desc, f"{name}_pages")


def check_plan(acc, plan) -> int:
    """Every box of every descriptor of ``plan`` inside its stream's region; the regions
    those of the plan's maps and tables. Returns the boxes checked."""
    boxes = 0
    for k, desc in enumerate(plan.descriptors):
        core = acc.cores[desc.core]
        used = used_regions(desc.op, desc.flags)
        assert not region_fault(desc), f"descriptor {k}: a stream it uses has no region"
        for name in STREAM_REGIONS:
            if not used[name]:
                assert getattr(desc, f"{name}_pages") == 0, (k, name)
                continue
            base = getattr(desc, f"{name}_base")  # each stream starts its region
            live = {region_pages(r.base, r.end) for r in plan.regions if r.base == base
                    and (r.live is None or r.live[0] <= k <= r.live[1])}
            assert getattr(desc, f"{name}_pages") in live, (k, name, live)
        for name, box in stream_boxes(desc, CoreGeometry.of(core, acc.block_size),
                                      fused_pool=engine_geometry(acc, core).fused_pool):
            span = box.byte_range()
            if span is None:
                continue
            first, end = _pages_of(desc, name)
            assert first <= span[0] >> PAGE_BITS and (span[1] - 1) >> PAGE_BITS < end, (
                f"descriptor {k} ({desc.op=}) {name} box {span[0]:#x}..{span[1]:#x} leaves "
                f"pages {first:#x}..{end:#x}")
            boxes += 1
    return boxes


@pytest.mark.parametrize("reuse", [False, True], ids=["own-maps", "maps-reused"])
@pytest.mark.parametrize("config", ["two_core", "time_domain_acc"])
def test_every_box_lies_in_its_stream_region(config, reuse):
    acc = load_config(CONFIGS / f"{config}.yaml")
    assert check_plan(acc, plan_network(acc, reuse_maps=reuse)) > 0


@pytest.mark.parametrize("writer", WRITERS)
def test_every_box_of_the_rtl_test_accelerators_lies_in_its_stream_region(writer, tmp_path):
    acc = load_config(getattr(conftest, f"write_{writer}_accelerator")(tmp_path))
    assert check_plan(acc, plan_network(acc)) > 0


@pytest.mark.parametrize("name", ["c3d_zcu102", "c3d_zcu102_best", "r3d18_zcu102_best",
                                  "spectral_c3d_zcu102"])
def test_the_shipped_designs_boxes_lie_in_their_regions_at_full_size(name):
    acc = load_config(builtin_path(name))
    assert check_plan(acc, plan_network(acc)) > 1000


def test_region_pages_count_the_pages_a_region_touches():
    assert region_pages(0x1000, 0x2000) == 1
    assert region_pages(0x1000, 0x2001) == 2
    assert region_pages(0x1ff0, 0x2010) == 2
    assert region_pages(0, 1) == 1
