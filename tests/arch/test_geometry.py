"""arch/geometry.py: a core's geometry, the channel-tile rule and the buffers' limits."""

from __future__ import annotations

import itertools

import pytest

from fcircnn.arch.geometry import (
    ACC_BITS,
    DSP_MUL_BITS,
    CoreGeometry,
    EngineGeometry,
    balanced_span,
    box_span,
    channel_tile_problems,
    core_lanes,
    engine_geometry,
    pool_fuses,
    weight_image_beats,
)
from fcircnn.models.config import builtin_path, load_accelerator


@pytest.mark.parametrize("B", [4, 8, 16])
def test_channel_tile_rule_gives_whole_block_pairs_per_weight_beat(B):
    # Every legal (Tn, Tm) packs whole block pairs into 128-bit weight beats, and the rule
    # refuses exactly the tiles whose input or output slot groups would be partial.
    for tn, tm in itertools.product(range(1, 129), range(1, 257)):
        legal = not channel_tile_problems(tn, tm, B)
        whole_in = tn % B == 0 and (tn <= 16 or tn % 16 == 0)
        whole_out = tm % 16 == 0 and tm % (2 * B) == 0
        assert legal == (whole_in and whole_out), (tn, tm, B)
        if legal:
            assert ((tm // B) * (tn // B)) % (16 // B) == 0


def test_channel_tile_messages_name_the_field_and_rule():
    assert channel_tile_problems(12, 32, 8) == [("tn", "Tn must be a multiple of B (8), not 12")]
    assert channel_tile_problems(24, 32, 8)[0][1].startswith("Tn must be a multiple of 16 above")
    [(field, message)] = channel_tile_problems(16, 16, 16)
    assert field == "tm" and "multiple of 32" in message


@pytest.mark.parametrize("tn, groups, subs", [(4, 1, 4), (8, 1, 2), (16, 1, 1), (32, 2, 1),
                                              (64, 4, 1)])
def test_slot_groups(tn, groups, subs):
    g = CoreGeometry(tn, 64, 2, 7, 7, 4 if tn == 4 else 8)
    assert (g.in_groups, g.subs, g.out_groups) == (groups, subs, 4)


def test_geometry_validates_once():
    with pytest.raises(ValueError, match=r"Tn must be a multiple of 16 above 16 \(whole input"):
        CoreGeometry(24, 32, 2, 7, 7, 8)
    with pytest.raises(ValueError, match=r"td must be an integer in 1\.\.255, not 300"):
        CoreGeometry(32, 32, 300, 7, 7, 8)
    with pytest.raises(ValueError, match=r"lanes must be 1 or Td \(2\), not 3"):
        CoreGeometry(32, 32, 2, 7, 7, 8, lanes=3)
    with pytest.raises(ValueError, match="B must be"):
        CoreGeometry(32, 32, 2, 7, 7, 6)


def test_boxes_tiles_and_weight_beats():
    g = CoreGeometry(32, 64, 2, 7, 7, 8, lanes=2)
    assert g.layer_tile((1, 28, 5)) == (1, 7, 5)
    assert g.input_box((2, 7, 7), (1, 2, 2), (3, 7, 7)) == (4, 19, 19)
    assert box_span(7, 2, 7) == 19 and box_span(1, 5, 3) == 3
    assert g.weight_tile_beats(27) == weight_image_beats(32, 64, 8, 27) == 27 * 8 * 4 * 4 // 8


@pytest.mark.parametrize("n, t, span", [(28, 8, 7), (14, 8, 7), (56, 8, 8), (13, 8, 7),
                                         (5, 4, 3), (7, 8, 7), (9, 8, 5), (112, 14, 14),
                                         (1, 8, 1)])
def test_balanced_span_needs_no_more_tiles_and_evens_them_out(n, t, span):
    assert balanced_span(n, t) == span
    tiles = -(-n // t)
    assert -(-n // span) == tiles  # as many tiles as before
    assert span * tiles - n < tiles  # each tile at most one voxel short of the widest


def test_balanced_tiles_even_out_rows_and_columns_only():
    g = CoreGeometry(64, 64, 4, 8, 8, 8, lanes=4)
    assert g.layer_tile((8, 28, 28)) == (4, 8, 8)
    assert g.layer_tile((8, 28, 28), balanced=True) == (4, 7, 7)
    assert g.layer_tile((6, 14, 56), balanced=True) == (4, 7, 8)  # depth 6: 4 and 2 stay
    assert g.layer_tile((1, 4, 4), balanced=True) == g.layer_tile((1, 4, 4)) == (1, 4, 4)


def test_engine_geometry_and_lanes_of_the_shipped_accelerators():
    acc = load_accelerator(builtin_path("r3d18_zcu102"))
    spatial = next(c for c in acc.cores if c.max_kernel == (7, 7, 7))
    geo = engine_geometry(acc, spatial)
    assert isinstance(geo, EngineGeometry) and geo.residual
    assert geo.taps == max(acc.engine_layer(r).kernel_volume for r in acc.network.resolved
                           if acc.core_for(r) is spatial)
    assert core_lanes(spatial) == (spatial.td if "td" in spatial.unroll else 1)
    assert CoreGeometry.of(spatial, acc.block_size).lanes == core_lanes(spatial)
    c3d = load_accelerator(builtin_path("c3d_zcu102_best"))
    fused = [r.name for r in c3d.network.resolved if pool_fuses(r, c3d.core_for(r))]
    assert fused == ["conv1a", "conv2a", "conv3b", "conv4b"]


@pytest.mark.parametrize("name", ["c3d_zcu102_best", "r3d18_zcu102_best", "spectral_c3d_zcu102"])
def test_acc_bits_cover_every_layer_of_the_core(name):
    # The CBN multiply's width is the bits of the largest structural accumulator bound of the
    # core's layers: every shipped network's fits the DSP48E2's 27-bit port (one DSP a part).
    acc = load_accelerator(builtin_path(name))
    for core in acc.cores:
        geo = engine_geometry(acc, core)
        bound = max(r.accumulator_bound for r in acc.network.resolved
                    if not r.transform and acc.core_for(r) is core)
        assert bound < 2 ** (geo.acc_bits - 1) and bound >= 2 ** (geo.acc_bits - 2)
        assert geo.acc_bits <= DSP_MUL_BITS


def test_acc_bits_checked_and_covered():
    g = EngineGeometry((1, 1, 1), (1, 1, 1), 1, (1, 1, 1), False)
    assert g.acc_bits == ACC_BITS
    narrow = EngineGeometry((1, 1, 1), (1, 1, 1), 1, (1, 1, 1), False, acc_bits=20)
    assert EngineGeometry.covering(narrow, g).acc_bits == ACC_BITS
    for bad in (1, 33, 27.0, True):
        with pytest.raises(ValueError, match=r"acc_bits must be an integer in 2\.\.32"):
            EngineGeometry((1, 1, 1), (1, 1, 1), 1, (1, 1, 1), False, acc_bits=bad)


@pytest.mark.parametrize("B", [4, 8, 16])
def test_each_channel_rule_holds_at_its_divisor_and_names_itself_off_it(B):
    from fcircnn.arch.geometry import CHANNEL_RULES, channel_rule_problem

    for rule, (tile, divisor, name, why) in CHANNEL_RULES.items():
        d = divisor(B)
        for k in (1, 2, 3):
            assert channel_rule_problem(rule, k * d, B) is None, (rule, k * d)
        off = 2 * d + (2 if d > 2 else 1)  # above 16, so input_slot_groups binds too
        problem = channel_rule_problem(rule, off, B)
        assert problem is not None and problem.startswith(f"{tile} must be a multiple of ")
        assert f"{why}, not {off}" in problem and (name in problem or str(d) in problem)
    # whole input slot groups bind only above 16 channels
    assert channel_rule_problem("input_slot_groups", 8, B) is None
    assert channel_rule_problem("input_slot_groups", 24, B) is not None
