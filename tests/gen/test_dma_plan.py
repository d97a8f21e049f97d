"""Compiler-side DMA planning (:mod:`fcircnn.gen.dma_plan`): validation and burst rules."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fcircnn.gen.dma_plan import (
    DmaLimits,
    FeatureMap,
    Span,
    conv_input_range,
    plan_block,
    plan_read_box,
    plan_write_box,
    split_bursts,
)
from fcircnn.models.config import builtin_path, load_accelerator
from fcircnn.models.layout import ncdhw8_address


@given(addr=st.integers(0, 1 << 20).map(lambda a: 16 * a), beats=st.integers(1, 3000))
@settings(max_examples=200, deadline=None, derandomize=True)
def test_bursts_are_legal_and_cover_the_run(addr, beats):
    bursts = split_bursts(addr, beats)
    assert sum(n for _, n in bursts) == beats
    nxt = addr
    for a, n in bursts:
        assert a == nxt and 1 <= n <= 256
        assert a // 4096 == (a + 16 * n - 1) // 4096
        nxt = a + 16 * n


def test_read_box_segments_follow_layout():
    fmap = FeatureMap(0x1230, 20, (3, 5, 6))
    desc = plan_read_box(fmap, (1, 2), (-1, 4), (2, 4), (4, 3), merge=False)
    assert (desc.d, desc.h, desc.w) == (Span(1, 3, 0), Span(0, 3, 1), Span(0, 2, 1))
    assert desc.beats == 2 * 4 * 4 * 3 and desc.bus_beats == 2 * 3 * 3 * 2
    # Every burst address is the NC/8DHW8 address of an in-map voxel, in box order.
    expected = []
    for g in (1, 2):
        for d in range(3):
            for h in range(2, 5):
                expected.append((ncdhw8_address(8 * g, d, h, 4, fmap.shape, fmap.base), 2))
    assert desc.bursts() == expected
    kinds = [(s.is_burst, s.beats) for s in desc.segments()][:6]
    assert kinds == [(False, 3)] * 4 + [(True, 2), (False, 1)]


def test_whole_rows_are_merged_into_long_bursts():
    fmap = FeatureMap(0, 16, (4, 8, 8))
    merged = plan_read_box(fmap, (0, 2), (0, 4), (-1, 10), (0, 8))
    plain = plan_read_box(fmap, (0, 2), (0, 4), (-1, 10), (0, 8), merge=False)
    assert merged.beats == plain.beats and merged.bus_beats == plain.bus_beats
    assert max(n for _, n in merged.bursts()) == 64 and len(plain.bursts()) == 2 * 4 * 8
    assert [s.beats for s in merged.segments()][:3] == [8, 64, 8]
    assert merged.extent == plain.extent == (2, 4, 10, 8)
    # Whole planes too: the full map is two bursts of 256 beats per group.
    full = plan_read_box(fmap, (0, 2), (0, 4), (0, 8), (0, 8))
    assert full.bursts() == [(0, 256), (4096, 256)]


def test_write_box_strobes_last_group():
    fmap = FeatureMap(0, 20, (2, 2, 2))
    desc = plan_write_box(fmap, (1, 2), (0, 2), (0, 2), (0, 2), slots=20)
    assert desc.last_lanes == 4
    strobes = desc.strobes()
    assert strobes[:8] == [0xFFFF] * 8 and strobes[8:] == [0x00FF] * 8


def test_contiguous_block_split():
    limits = DmaLimits(count_width=8)
    descs = plan_block(0x100, 16 * 1000, limits=limits)
    assert sum(d.beats for d in descs) == 1000
    bursts = [b for d in descs for b in d.bursts()]
    nxt = 0x100
    for addr, beats in bursts:  # contiguous, in order, legal
        assert addr == nxt and 1 <= beats <= 256 and addr // 4096 == (nxt + 16 * beats - 1) // 4096
        nxt += 16 * beats
    assert nxt == 0x100 + 16 * 1000
    # With the default 16-bit counts a 1 MB block is one descriptor of full 256-beat bursts.
    (one,) = plan_block(0, 1 << 20)
    assert {n for _, n in one.bursts()} == {256}


def test_conv_input_range_edge_tiles():
    # 3x3 pad 1 stride 1: the first tile starts in the padding, the last passes the map.
    assert conv_input_range(0, 7, 3, 1, 1) == (-1, 9)
    assert conv_input_range(21, 7, 3, 1, 1) == (20, 9)
    # ResNet conv1 on h: 7x7 stride 2 pad 3.
    assert conv_input_range(0, 7, 7, 2, 3) == (-3, 19)


def test_real_layers_plan():
    """Every tile of C3D conv3a (Tr = Tc = 7) plans and reads each in-map voxel once."""
    acc = load_accelerator(builtin_path("c3d_zcu102"))
    layer = acc.network.layer("conv3a")
    core = acc.core_for(layer)
    fmap = FeatureMap(0, layer.padded_in_channels // 2, layer.in_shape)
    seen = np.zeros((fmap.groups, *layer.in_shape), dtype=np.int64)
    for od in range(0, layer.conv_shape[0], core.td):
        for orow in range(0, layer.conv_shape[1], core.tr):
            for oc in range(0, layer.conv_shape[2], core.tc):
                box = [conv_input_range(o, min(t, n - o), k, s, p) for o, t, n, k, s, p in zip(
                    (od, orow, oc), (core.td, core.tr, core.tc), layer.conv_shape,
                    layer.kernel, layer.stride, layer.padding, strict=True)]
                desc = plan_read_box(fmap, (0, fmap.groups), *box)
                for addr, beats in desc.bursts():
                    for b in range(beats):
                        i = (addr - fmap.base) // 16 + b
                        seen.reshape(-1)[i] += 1
    assert seen.min() >= 1  # halo voxels are read by neighbouring tiles too


@pytest.mark.parametrize(("call", "match"), [
    (lambda: FeatureMap(0x108, 8, (1, 1, 1)), "base must be aligned to 16 bytes"),
    (lambda: FeatureMap(0, 0, (1, 1, 1)), "slots must be a positive integer"),
    (lambda: plan_read_box(FeatureMap(0, 8, (2, 2, 2)), (0, 1), (0, 0), (0, 2), (0, 2)),
     "d count must be >= 1"),
    (lambda: plan_read_box(FeatureMap(0, 8, (2, 2, 2)), (0, 2), (0, 2), (0, 2), (0, 2)),
     "groups range"),
    (lambda: plan_read_box(FeatureMap(0, 8, (2, 2, 70000)), (0, 1), (0, 1), (0, 1),
                           (0, 70000), merge=False), r"w_len must be in 0\.\.65535"),
    (lambda: plan_read_box(FeatureMap((1 << 40) - 64, 8, (1, 1, 8)), (0, 1), (0, 1), (0, 1),
                           (0, 8)), "address overflow"),
    (lambda: plan_write_box(FeatureMap(0, 8, (2, 2, 2)), (0, 1), (-1, 3), (0, 2), (0, 2)),
     "a write box must lie inside the map"),
    (lambda: plan_write_box(FeatureMap(0, 20, (2, 2, 2)), (0, 2), (0, 2), (0, 2), (0, 2),
                            slots=20), "slots must end inside the box's last group"),
    (lambda: plan_block(0x104, 64), "addr must be a non-negative multiple of 16"),
    (lambda: plan_block(0, 0), "nbytes must be a positive multiple of 16"),
    (lambda: plan_block((1 << 32) - 16, 32, limits=DmaLimits(address_width=32)),
     "address overflow"),
    (lambda: DmaLimits(address_width=20), "address_width must be in 32..64"),
])
def test_bad_requests_rejected(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_bad_types_rejected():
    with pytest.raises(TypeError, match=r"d must be a \(start, count\) pair"):
        plan_read_box(FeatureMap(0, 8, (2, 2, 2)), (0, 1), 3, (0, 2), (0, 2))
    with pytest.raises(TypeError, match="address_width must be an integer"):
        DmaLimits(address_width=40.0)
