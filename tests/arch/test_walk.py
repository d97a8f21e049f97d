"""The layer engine's walk in Python (:mod:`fcircnn.arch.walk`) against what the compiler's
descriptors mean: the tiles cover every output voxel once, the input boxes are the conv's input
ranges, the reads load every weight tile once per tile, the pool boxes cover every group."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from fcircnn.arch.descriptor import (
    FLAG_IQUARTER,
    FLAG_ISPLIT,
    FLAG_MINNER,
    FLAG_RESIDUAL,
    FLAG_SPREAD,
    FLAG_WSPLIT,
    OP_POOL,
    reuses_inputs,
)
from fcircnn.arch.geometry import CoreGeometry, engine_geometry
from fcircnn.arch.walk import (
    Box,
    conv_passes,
    conv_reads,
    conv_tiles,
    conv_writes,
    halved_axes,
    input_groups,
    pool_boxes,
    quarters_inputs,
    splits_inputs,
)
from fcircnn.gen.dma_plan import conv_input_range
from fcircnn.gen.plan import plan_network
from fcircnn.models.config import builtin_path, load_config

CONFIGS = Path(__file__).resolve().parent.parent / "hw" / "configs"


def descriptors():
    """``(descriptor, core geometry, fused pool)`` of every layer of the two-core test
    accelerator (every C3D and ResNet-18 layer kind) and of C3D on the ZCU102."""
    out = []
    for config in (CONFIGS / "two_core.yaml", builtin_path("c3d_zcu102")):
        acc = load_config(config)
        for desc in plan_network(acc).descriptors:
            core = acc.cores[desc.core]
            out.append((desc, CoreGeometry.of(core, acc.block_size),
                        engine_geometry(acc, core).fused_pool))
    return out


CASES = descriptors()
CONV = [c for c in CASES if c[0].op != OP_POOL]
POOL = [c for c in CASES if c[0].op == OP_POOL]


@pytest.mark.parametrize(("desc", "core", "fused"), CONV)
def test_the_tiles_cover_every_output_voxel_of_every_m_tile_once(desc, core, fused):
    seen = np.zeros((desc.m_tiles, *desc.conv_shape), dtype=int)
    for tile in conv_tiles(desc, core):
        (d0, h0, w0), (d, h, w) = tile.lo, tile.ext
        seen[tile.mt, d0:d0 + d, h0:h0 + h, w0:w0 + w] += 1
    assert (seen == 1).all()


@pytest.mark.parametrize(("desc", "core", "fused"), CONV)
def test_input_boxes_are_the_conv_input_ranges(desc, core, fused):
    reads = [box for kind, box in conv_reads(desc, core) if kind == "input"]
    passes = list(conv_passes(desc, core))
    assert len(passes) == desc.m_tiles * desc.n_tiles * int(np.prod(desc.tiles))
    if desc.flags & FLAG_MINNER:  # one box per tile, for its first m-tile's pass
        passes = [(tile, nt) for tile, nt in passes if tile.mt == 0]
    assert len(reads) == len(passes)
    for box, (tile, nt) in zip(reads, passes, strict=True):
        for a in range(3):
            start, count = conv_input_range(tile.lo[a], tile.ext[a], desc.kernel[a],
                                            desc.stride[a], desc.padding[a])
            assert box.pre[a] == max(0, -start)
            assert box.pre[a] + box.len[a] + box.post[a] == count
            assert box.post[a] == max(0, start + count - desc.in_shape[a])
        assert box.stride_g == desc.in_stride[0]
        # The box's first in-map voxel, from the map's base and the strides.
        first = [max(0, tile.lo[a] * desc.stride[a] - desc.padding[a]) for a in range(3)]
        group = (nt // core.subs) * desc.in_nt_step // desc.in_stride[0] * desc.in_stride[0]
        expect = (desc.in_base + group + first[0] * desc.in_stride[1]
                  + first[1] * desc.in_stride[2] + first[2] * 16)
        assert box.addr == expect


@pytest.mark.parametrize(("desc", "core", "fused"), CONV)
def test_reads_come_in_the_loaders_order_with_every_weight_tile_per_tile(desc, core, fused):
    kinds = [kind for kind, _ in conv_reads(desc, core)]
    tiles = int(np.prod(desc.tiles))
    assert kinds.count("params") == desc.m_tiles
    assert kinds.count("residual") == (desc.m_tiles * tiles
                                       if desc.flags & FLAG_RESIDUAL else 0)
    weights = [box for kind, box in conv_reads(desc, core) if kind == "weights"]
    assert len(weights) == desc.m_tiles * tiles * desc.n_tiles
    per_tile = {box.addr for box in weights[:desc.n_tiles]}
    assert len(per_tile) == desc.n_tiles  # every n-tile's weights, once per tile
    assert all(box.len[2] * 16 == desc.weight_tile_bytes for box in weights)
    end = max(box.addr for box in weights) + desc.weight_tile_bytes
    assert end - desc.weight_base == desc.m_tiles * desc.n_tiles * desc.weight_tile_bytes
    # Each (tile, nt): [params] [residual] input weights (no input on a tile's later m-tiles
    # with FLAG_MINNER).
    order = "".join({"params": "p", "residual": "r", "input": "i", "weights": "w"}[k]
                    for k in kinds)
    assert order.replace("p", "").replace("r", "") == "".join(
        ("w" if _reuses_box(desc, tile) else "iw") for tile, _ in conv_passes(desc, core))
    assert order.startswith("p") and "rp" not in order  # records before the residual


MINNER = [c for c in CONV if reuses_inputs(c[0].op, c[0].m_tiles, c[0].n_tiles, c[0].flags,
                                            c[0].pool_window)]


def _reuses_box(desc, tile) -> bool:
    """Whether the pass of ``tile`` reuses the input box of its tile's first m-tile."""
    return bool(desc.flags & FLAG_MINNER) and tile.mt > 0


@pytest.mark.parametrize(("desc", "core", "fused"), MINNER)
def test_m_tiles_innermost_read_each_input_box_once_for_all_its_m_tiles(desc, core, fused):
    outer = dataclasses.replace(desc, flags=desc.flags & ~FLAG_MINNER)
    inner = dataclasses.replace(desc, flags=desc.flags | FLAG_MINNER)
    tiles = list(conv_tiles(inner, core))
    assert sorted(tiles) == sorted(conv_tiles(outer, core))
    assert [t.mt for t in tiles] == [0, 1] * (len(tiles) // 2)
    assert [t.t for t in tiles[::2]] == [t.t for t in tiles[1::2]]
    reads = list(conv_reads(inner, core))
    passes, kinds = [], []  # each pass's read kinds (a pass ends with its weight tile)
    for kind, _ in reads:
        kinds.append(kind)
        if kind == "weights":
            passes.append(kinds)
            kinds = []
    for tile, kinds in zip(tiles, passes, strict=True):
        assert any(kind.startswith("input") for kind in kinds) == (tile.mt == 0)
    # The boxes are the outer walk's first m-tile's, the weights the pass's m-tile's.
    boxes = [(kind, box) for kind, box in reads if kind.startswith("input")]
    first = [(kind, box) for kind, box in conv_reads(outer, core) if kind.startswith("input")]
    assert boxes == first[:len(boxes)] and len(boxes) * desc.m_tiles == len(first)
    weights = [box.addr for kind, box in reads if kind == "weights"]
    assert weights[:2] == [desc.weight_base + mt * desc.weight_tile_bytes for mt in (0, 1)]
    assert [kind for kind, _ in reads].count("params") == desc.m_tiles == 2
    # The same write boxes, in the inner walk's tile order.
    writes = list(conv_writes(inner, core, fused_pool=fused))
    assert sorted(writes) == sorted(conv_writes(outer, core, fused_pool=fused))
    assert writes[1].addr - writes[0].addr == desc.out_mt_step


@pytest.mark.parametrize(("desc", "core", "fused"), CONV[:4])
def test_a_split_weight_tile_is_read_in_two_contiguous_halves(desc, core, fused):
    whole = [box for kind, box in conv_reads(desc, core) if kind == "weights"]
    split = dataclasses.replace(desc, flags=desc.flags | FLAG_WSPLIT)
    kinds = [kind for kind, _ in conv_reads(split, core) if kind != "params"]
    halves = [box for kind, box in conv_reads(split, core) if kind.startswith("weight")]
    assert len(halves) == 2 * len(whole)
    half = desc.weight_tile_bytes // 2
    for box, first, second in zip(whole, halves[::2], halves[1::2], strict=True):
        assert (first.addr, first.len[2] * 16) == (box.addr, half)
        assert (second.addr, second.len[2] * 16) == (box.addr + half, half)
    # Each pass: [residual] input (not on a tile's later m-tiles with FLAG_MINNER), the weight
    # loader's half, the input loader's half.
    assert "".join(k[0] for k in kinds if k != "residual") == "".join(
        ("ww" if _reuses_box(desc, tile) else "iww") for tile, _ in conv_passes(desc, core))


def test_a_split_input_box_is_its_lower_and_upper_slot_groups():
    # ResNet-18's folded conv1 on the two-port best core: four slot groups in one n-tile, the
    # compiler splits its boxes; the halves are the whole box's groups, upper after lower.
    acc = load_config(builtin_path("r3d18_zcu102_best"))
    desc = plan_network(acc).layers[0].descriptor
    core = CoreGeometry.of(acc.cores[0], acc.block_size)
    assert desc.flags & FLAG_ISPLIT and splits_inputs(desc, core)
    desc = dataclasses.replace(desc, flags=desc.flags & ~FLAG_IQUARTER)
    whole = dataclasses.replace(desc, flags=desc.flags & ~FLAG_ISPLIT)
    boxes = [box for kind, box in conv_reads(whole, core) if kind == "input"]
    reads = [(kind, box) for kind, box in conv_reads(desc, core) if kind.startswith("input")]
    assert len(reads) == 2 * len(boxes) > 0
    for box, (k0, lo), (k1, hi) in zip(boxes, reads[::2], reads[1::2], strict=True):
        assert (k0, k1, lo.groups, hi.groups, box.groups) == ("input", "input_half", 2, 2, 4)
        assert lo == box._replace(groups=2)
        assert hi == box._replace(addr=box.addr + 2 * box.stride_g, groups=2)


def test_a_quartered_input_box_is_its_four_quarters_of_slot_groups():
    # ResNet-18's folded conv1 on the four-port best core: four slot groups in one n-tile, the
    # compiler reads its boxes in quarters; the quarters are the whole box's groups in order
    # on the input loader, the weight loader, port 2's and port 3's.
    acc = load_config(builtin_path("r3d18_zcu102_best"))
    desc = plan_network(acc).layers[0].descriptor
    core = CoreGeometry.of(acc.cores[0], acc.block_size)
    assert desc.flags & FLAG_IQUARTER and quarters_inputs(desc, core)
    whole = dataclasses.replace(desc, flags=desc.flags & ~(FLAG_ISPLIT | FLAG_IQUARTER))
    boxes = [box for kind, box in conv_reads(whole, core) if kind == "input"]
    reads = [(kind, box) for kind, box in conv_reads(desc, core) if kind.startswith("input")]
    assert len(reads) == 4 * len(boxes) > 0
    for box, *parts in zip(boxes, *(reads[k::4] for k in range(4)), strict=True):
        assert [k for k, _ in parts] == ["input", "input_quarter1", "input_half",
                                         "input_quarter3"]
        for g, (_, part) in enumerate(parts):
            assert part == box._replace(addr=box.addr + g * box.stride_g, groups=1)
    with pytest.raises(ValueError, match="cannot be quartered"):
        list(conv_reads(desc, dataclasses.replace(core, tn=32)))


def test_a_spread_input_box_is_one_slot_group_per_n_tile():
    # The paper's dense conv1 on its shipped core: 36 blocks of one real channel in five
    # n-tiles of 8; each box one slot group, the n-tiles' groups a plane of the map apart.
    acc = load_config(builtin_path("spectral_c3d_zcu102"))
    desc = plan_network(acc).layers[0].descriptor
    core = CoreGeometry.of(acc.cores[0], acc.block_size)
    assert desc.flags & FLAG_SPREAD and not desc.flags & FLAG_ISPLIT
    assert (desc.n_tiles, input_groups(desc, core)) == (5, (1,) * 5)
    assert desc.in_nt_step == desc.in_stride[0] and not splits_inputs(desc, core)
    boxes = [box for kind, box in conv_reads(desc, core) if kind == "input"]
    assert {box.groups for box in boxes} == {1}
    assert [b.addr - boxes[0].addr for b in boxes[:5]] == [k * desc.in_stride[0]
                                                            for k in range(5)]


@pytest.mark.parametrize(("desc", "core", "fused"), CONV)
def test_input_boxes_quarter_only_where_every_n_tile_has_every_slot_group(desc, core, fused):
    groups = input_groups(desc, core)
    assert quarters_inputs(desc, core) == (core.in_groups % 4 == 0 and core.tn > 16
                                           and all(g == core.in_groups for g in groups))


@pytest.mark.parametrize(("desc", "core", "fused"), CONV)
def test_input_boxes_split_only_where_every_n_tile_has_every_slot_group(desc, core, fused):
    groups = input_groups(desc, core)
    assert splits_inputs(desc, core) == (core.in_groups % 2 == 0 and core.tn > 16
                                         and set(groups) == {core.in_groups})
    if not splits_inputs(desc, core):
        with pytest.raises(ValueError, match="FLAG_ISPLIT"):
            list(conv_reads(dataclasses.replace(desc, flags=desc.flags | FLAG_ISPLIT), core))


@pytest.mark.parametrize(("desc", "core", "fused"), CONV)
def test_write_boxes_are_the_tiles_pooled_where_the_pool_is_fused(desc, core, fused):
    halved = halved_axes(desc, fused)
    for box, tile in zip(conv_writes(desc, core, fused_pool=fused), conv_tiles(desc, core),
                         strict=True):
        assert box.len == tuple(e // 2 if h else e for e, h in zip(tile.ext, halved,
                                                                   strict=True))
        assert box.pre == box.post == (0, 0, 0)
        slots = min(core.tm // 2, desc.out_slots - tile.mt * core.tm // 2)
        assert (box.groups - 1) * 8 + box.last_lanes == slots


@pytest.mark.parametrize(("desc", "core", "fused"), POOL)
def test_pool_boxes_cover_every_slot_group(desc, core, fused):
    pairs = list(pool_boxes(desc))
    assert len(pairs) == -(-desc.in_slots // 8)
    assert sum(w.last_lanes for _, w in pairs) == desc.out_slots
    for g, (r, w) in enumerate(pairs):
        assert r.addr == desc.in_base + g * desc.in_stride[0] and r.len == desc.in_shape
        assert w.addr == desc.out_base + g * desc.out_stride[0] and w.len == desc.out_shape


def test_the_walk_refuses_what_it_cannot_walk():
    pool = POOL[0]
    with pytest.raises(ValueError, match="pool"):
        list(conv_tiles(pool[0], pool[1]))
    with pytest.raises(ValueError, match="pool descriptor"):
        list(pool_boxes(CONV[0][0]))
    with pytest.raises(TypeError):
        list(conv_tiles(CONV[0][0], None))
    assert Box.block(0x100, 64).len == (1, 1, 4)
