"""The compiler's byte packing (:mod:`fcircnn.gen.pack`): split weight tiles and the identity
weights a global average pool runs as. The packed images decoded independently against the
golden contract are in ``test_compiler.py``."""

import numpy as np
import pytest

from fcircnn.arch.descriptor import FLAG_WQUARTER, FLAG_WSPLIT, weight_parts
from fcircnn.gen.pack import gap_weight_slots, network_input_slots, pack_weight_image
from fcircnn.models import spectral
from fcircnn.models.layout import pack_ncdhw8, unpack_ncdhw8


@pytest.mark.parametrize("parts", [2, 4])
def test_a_split_tile_image_is_the_whole_tiles_parts_reordered(parts):
    rng = np.random.default_rng(parts)
    re, im = (rng.integers(-127, 128, size=(4, 8, 4, 1, 2, 3)) for _ in range(2))
    whole = np.frombuffer(pack_weight_image(re, im, 64, 32, 8), np.int8).reshape(1, 1, 6, -1)
    split = np.frombuffer(pack_weight_image(re, im, 64, 32, 8, parts=parts), np.int8)
    reordered = whole.reshape(1, 1, 6, parts, -1).transpose(0, 1, 3, 2, 4)
    assert split.tobytes() == np.ascontiguousarray(reordered).tobytes() != whole.tobytes()
    assert weight_parts(FLAG_WSPLIT | FLAG_WQUARTER) == 4 and weight_parts(FLAG_WSPLIT) == 2
    with pytest.raises(ValueError, match="parts must be 1, 2 or 4"):
        pack_weight_image(re, im, 64, 32, 8, parts=3)


def test_gap_lowered_to_a_conv_is_the_voxel_sum():
    rng = np.random.default_rng(0)
    for B, shape in ((8, (2, 3, 5)), (4, (1, 7, 7)), (16, (3, 2, 2))):
        S = 3 * B // 2
        re = rng.integers(-127, 128, (S, *shape))
        im = rng.integers(-127, 128, (S, *shape))
        wr, wi = gap_weight_slots(3, B, shape)
        acc_re, acc_im = spectral.conv3d_slots_int(re, im, wr, wi)
        np.testing.assert_array_equal(acc_re, re.sum(axis=(1, 2, 3), keepdims=True))
        np.testing.assert_array_equal(acc_im, im.sum(axis=(1, 2, 3), keepdims=True))


@pytest.mark.parametrize("B, channels, tn, shape", [
    (8, 512, 64, (1, 4, 4)),    # ResNet-18's gap on its best core: 8 planes of 64 channels
    (4, 96, 32, (1, 3, 5)),     # B = 4, 3 planes
    (16, 64, 16, (1, 2, 2)),    # a block of a whole slot group, 4 planes
])
@pytest.mark.parametrize("data", ["random", "extreme"])
def test_a_gap_read_as_planes_of_a_channel_tile_is_the_voxel_sum(B, channels, tn, shape, data):
    """The gap's map read as planes of ``Tn`` channels (the same bytes), pooled per plane with
    one tile's identity blocks, writes the bytes of the voxel sums of every channel."""
    rng = np.random.default_rng(channels + tn)
    S = channels // 2
    if data == "random":
        re, im = (rng.integers(-127, 128, (S, *shape)) for _ in range(2))
    else:
        re, im = (127 * rng.choice([-1, 1], (S, *shape)) for _ in range(2))
    k = channels // tn
    view = unpack_ncdhw8(pack_ncdhw8(re, im), tn // 2, (k, *shape[1:]))
    wr, wi = gap_weight_slots(tn // B, B, shape)
    sums = spectral.conv3d_slots_int(*view, wr, wi)
    assert sums[0].shape == (tn // 2, k, 1, 1)
    # View slot 8*g + r at plane j is slot 8*(g*k + j) + r of the 1x1x1 map (its bytes).
    got = [a.reshape(tn // 16, 8, k).transpose(0, 2, 1).reshape(S, 1, 1, 1) for a in sums]
    np.testing.assert_array_equal(got[0], re.sum(axis=(1, 2, 3), keepdims=True))
    np.testing.assert_array_equal(got[1], im.sum(axis=(1, 2, 3), keepdims=True))


def test_a_compact_input_refuses_slots_that_are_not_spread():
    """The scaled paper network reads its spread input compact; slots quantized with scales
    that differ between a block's bins cannot be stored so, and the compiler says why
    instead of writing an input the hardware would spread wrongly."""
    from fcircnn.gen.plan import CompileError, plan_network
    from fcircnn.models.config import builtin_path, load_config
    from fcircnn.models.scale import scale_accelerator

    acc = scale_accelerator(load_config(builtin_path("spectral_c3d_zcu102")), 16)
    plan = plan_network(acc)
    assert plan.layers[0].spread
    first = acc.network.resolved[0]
    slots = (first.in_slots, *first.in_shape)
    re, im = np.zeros(slots, np.int64), np.zeros(slots, np.int64)
    re[::4], im[::4] = 5, 5  # slot 0 of each block: x + i*x
    re[1::4] = 5
    re[2::4] = 5
    re[3::4] = 6  # bin 3 of every block another value
    with pytest.raises(CompileError, match=r"conv1.*not spread.*one input scale"):
        network_input_slots(plan, re, im)
    re[3::4] = 5
    c_re, c_im = network_input_slots(plan, re, im)
    assert c_re.shape[0] == 8 * plan.layers[0].descriptor.n_tiles and not c_im.any()
