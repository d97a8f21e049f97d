"""Depth-tap folding of the first layer (:mod:`fcircnn.models.fold`,
``ResolvedLayer.fold_depth_taps``, ``AcceleratorConfig.folds_input``,
``AcceleratorConfig.folded_depths`` and ``AcceleratorConfig.folded_rows``), fc inputs read as
maps, subsampled inputs and trimmed kernels (``ResolvedLayer.trim_taps``).

The decisive property: the folded layer's integer accumulators equal the original's exactly,
for strides, paddings and kernels of every size the engine runs, on random and extreme data.
"""

import copy
from dataclasses import replace

import numpy as np
import pytest
import yaml

from fcircnn.models.config import (
    bind_accelerator,
    builtin_path,
    load_accelerator,
    load_network,
)
from fcircnn.models.fold import (
    compact_spread_slots,
    fold_fc_weight_slots,
    fold_input_slots,
    fold_post_slots,
    fold_weight_slots,
    trim_weight_slots,
)
from fcircnn.models.layout import pack_ncdhw8, unpack_ncdhw8
from fcircnn.models.quant import PostParams
from fcircnn.models.resolve import SPREAD
from fcircnn.models.spectral import conv3d_slots_int
from fcircnn.models.timedomain import to_layout


def _conv_layer(kernel, stride, padding, in_shape, channels=3):
    """The first layer of the built-in ResNet-18 with another geometry (shapes recomputed)."""
    base = load_accelerator(builtin_path("r3d18_zcu102")).network.resolved[0]
    conv = tuple((n + 2 * p - k) // s + 1
                 for n, k, s, p in zip(in_shape, kernel, stride, padding, strict=True))
    return replace(base, in_channels=channels, in_shape=in_shape, conv_shape=conv,
                   kernel=kernel, stride=stride, padding=padding, pool=None, out_shape=conv)


def _operands(layer, data, seed, out_blocks):
    """Input and weight slots of conv ``layer`` (``out_blocks`` output blocks of 4 slots):
    random int8, or every product at the int8 extremes with random signs (``data``)."""
    rng = np.random.default_rng(seed)
    slots, q = layer.padded_in_channels // 2, layer.padded_in_channels // 8
    weights = (out_blocks, q, 4, *layer.kernel)
    shapes = [(slots, *layer.in_shape), (slots, *layer.in_shape), weights, weights]
    if data == "random":
        return tuple(rng.integers(-127, 128, s) for s in shapes)
    return tuple(127 * rng.choice([-1, 1], s) for s in shapes)


@pytest.mark.parametrize("kernel, stride, padding, in_shape, channels", [
    ((3, 3, 3), (1, 1, 1), (1, 1, 1), (4, 6, 6), 3),      # C3D conv1a
    ((7, 7, 7), (1, 2, 2), (3, 3, 3), (5, 9, 9), 3),      # ResNet-18 conv1
    ((3, 1, 1), (2, 1, 1), (0, 0, 0), (7, 3, 3), 16),     # depth stride 2, two blocks
    ((5, 3, 3), (2, 1, 2), (2, 1, 0), (6, 5, 7), 8),      # stride 2 with padding
    ((3, 3, 3), (1, 1, 1), (2, 0, 1), (2, 4, 4), 5),      # padding deeper than the map
])
@pytest.mark.parametrize("data", ["random", "extreme"])
def test_folded_accumulators_equal_the_original(kernel, stride, padding, in_shape, channels,
                                                data):
    layer = _conv_layer(kernel, stride, padding, in_shape, channels)
    folded = layer.fold_depth_taps()
    q = layer.padded_in_channels // 8
    xr, xi, wr, wi = _operands(layer, data, sum(kernel) + sum(in_shape), 2)
    fx, fw = fold_input_slots(xr, xi, layer), fold_weight_slots(wr, wi)
    assert fx[0].shape == (folded.padded_in_channels // 2, *folded.in_shape)
    assert fw[0].shape == (2, kernel[0] * q, 4, *folded.kernel)
    want = conv3d_slots_int(xr, xi, wr, wi, layer.stride, layer.padding)
    got = conv3d_slots_int(*fx, *fw, folded.stride, folded.padding)
    for a, b in zip(want, got, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("kernel, stride, padding, in_shape, channels", [
    ((3, 3, 3), (1, 1, 1), (1, 1, 1), (4, 6, 6), 3),      # C3D conv1a
    ((7, 7, 7), (1, 2, 2), (3, 3, 3), (6, 9, 9), 3),      # ResNet-18 conv1
    ((3, 1, 1), (2, 1, 1), (0, 0, 0), (9, 3, 3), 16),     # depth stride 2: 5 copies
    ((3, 3, 3), (1, 1, 1), (2, 0, 1), (2, 4, 4), 5),      # padding deeper than the map
])
@pytest.mark.parametrize("data", ["random", "extreme"])
def test_folded_output_depths_are_the_original_accumulators(kernel, stride, padding, in_shape,
                                                            channels, data):
    """Two output depths folded into output channels: folded slot ``j*S + s`` at depth ``z`` is
    exactly the original slot ``s`` at depth ``2*z + j`` (a wrong tap shift or copy stride
    moves a product to another depth and fails)."""
    layer = _conv_layer(kernel, stride, padding, in_shape, channels)
    folded = layer.fold_depth_taps(2)
    slots, q, p = layer.padded_in_channels // 2, layer.padded_in_channels // 8, 4
    xr, xi, wr, wi = _operands(layer, data, 7 * sum(kernel) + sum(in_shape), p)
    copies = kernel[0] + stride[0]
    fx = fold_input_slots(xr, xi, layer, 2)
    fw = fold_weight_slots(wr, wi, 2, stride[0])
    assert fx[0].shape == (folded.padded_in_channels // 2, *folded.in_shape) == \
        (copies * slots, layer.conv_shape[0] // 2, *in_shape[1:])
    assert fw[0].shape == (2 * p, copies * q, 4, *folded.kernel)
    want = conv3d_slots_int(xr, xi, wr, wi, layer.stride, layer.padding)
    got = conv3d_slots_int(*fx, *fw, folded.stride, folded.padding)
    s_out = want[0].shape[0]
    for a, b in zip(want, got, strict=True):
        assert b.shape == (2 * s_out, a.shape[1] // 2, *a.shape[2:])
        for j in range(2):
            np.testing.assert_array_equal(b[j * s_out:(j + 1) * s_out], a[:, j::2])


@pytest.mark.parametrize("kernel, stride, padding, in_shape, channels", [
    ((3, 3, 3), (1, 1, 1), (1, 1, 1), (4, 6, 6), 3),      # C3D conv1a
    ((7, 7, 7), (1, 2, 2), (3, 3, 3), (6, 9, 9), 3),      # ResNet-18 conv1: row stride 2
    ((3, 5, 3), (1, 2, 1), (1, 1, 1), (4, 8, 5), 16),     # two blocks, stride 2, less padding
    ((3, 3, 3), (1, 1, 1), (2, 2, 1), (2, 3, 4), 5),      # padding deeper than the map
])
@pytest.mark.parametrize("depths", [1, 2])
@pytest.mark.parametrize("data", ["random", "extreme"])
def test_row_copies_keep_the_original_accumulators(kernel, stride, padding, in_shape, channels,
                                                   depths, data):
    """``U`` row-shifted copies of every depth copy, for every ``U`` from 2 to ``Kr`` (each
    original row tap once, at folded tap ``k`` of copy ``u``): the folded sums are exactly the
    original's, with one and with two output depths a pass (a tap given twice, or lost, or a
    copy shifted by a wrong row fails)."""
    layer = _conv_layer(kernel, stride, padding, in_shape, channels)
    slots, q, p = layer.padded_in_channels // 2, layer.padded_in_channels // 8, 4
    xr, xi, wr, wi = _operands(layer, data, 11 * sum(kernel) + sum(in_shape) + depths, p)
    want = conv3d_slots_int(xr, xi, wr, wi, layer.stride, layer.padding)
    s_out, copies = want[0].shape[0], kernel[0] + (depths - 1) * stride[0]
    for rows in range(2, kernel[1] + 1):
        folded = layer.fold_depth_taps(depths, rows=rows)
        fx = fold_input_slots(xr, xi, layer, depths, rows)
        fw = fold_weight_slots(wr, wi, depths, stride[0], rows)
        assert fx[0].shape == (folded.padded_in_channels // 2, *folded.in_shape) == \
            (copies * rows * slots, layer.conv_shape[0] // depths,
             (layer.conv_shape[1] - 1) * stride[1] + kernel[1] - rows + 1, in_shape[2])
        assert fw[0].shape == (depths * p, copies * rows * q, 4, *folded.kernel)
        assert folded.kernel == (1, kernel[1] - rows + 1, kernel[2])
        got = conv3d_slots_int(*fx, *fw, folded.stride, folded.padding)
        for a, b in zip(want, got, strict=True):
            for j in range(depths):
                np.testing.assert_array_equal(b[j * s_out:(j + 1) * s_out], a[:, j::depths])


def test_row_copies_geometry():
    """C3D conv1a with two output depths and two row copies (the 64-channel fold of a ``Tn =
    64`` core): 64 channels of 113 rows, a 1x2x3 kernel without row padding; ``rows`` outside
    ``1..Kr`` is refused."""
    layer = load_accelerator(builtin_path("c3d_zcu102")).network.resolved[0]
    folded = layer.fold_depth_taps(2, rows=2)
    assert (folded.in_channels, folded.in_shape) == (64, (8, 113, 112))
    assert (folded.kernel, folded.stride, folded.padding) == ((1, 2, 3), (1, 1, 1), (0, 0, 1))
    assert (folded.out_channels, folded.conv_shape, folded.out_shape) == \
        (128, (8, 112, 112), (8, 56, 56))
    whole = layer.fold_depth_taps(rows=3)
    assert (whole.in_channels, whole.in_shape, whole.kernel) == (72, (16, 112, 112), (1, 1, 3))
    for bad in (0, 4, True, 2.0):
        with pytest.raises(ValueError, match=r"folds 1\.\.3 row copies"):
            layer.fold_depth_taps(rows=bad)


def test_folded_output_depths_geometry_and_post():
    layer = load_accelerator(builtin_path("c3d_zcu102")).network.resolved[0]
    folded = layer.fold_depth_taps(2)
    assert (folded.in_channels, folded.in_shape) == (32, (8, 112, 112))
    assert (folded.out_channels, folded.conv_shape, folded.out_shape) == \
        (128, (8, 112, 112), (8, 56, 56))
    assert (folded.kernel, folded.stride, folded.padding) == ((1, 3, 3), (1, 1, 1), (0, 1, 1))
    # pools across depths, odd depths and partial slot groups do not fold
    for bad in (replace(layer, pool=replace(layer.pool, window=(2, 2, 2))),
                replace(layer, conv_shape=(15, 112, 112)), replace(layer, out_channels=56)):
        with pytest.raises(ValueError, match="folds no 2 output depths"):
            bad.fold_depth_taps(2)
    part = np.arange(6).reshape(2, 3)
    post = fold_post_slots(PostParams(part, part + 1, part + 2, None), 2)
    np.testing.assert_array_equal(post.bias, np.concatenate([part + 1, part + 1], axis=1))
    assert post.res_mult is None


def test_folded_layer_geometry():
    layer = load_accelerator(builtin_path("c3d_zcu102")).network.resolved[0]
    folded = layer.fold_depth_taps()
    assert (folded.in_channels, folded.in_shape) == (24, (16, 112, 112))
    assert (folded.kernel, folded.stride, folded.padding) == ((1, 3, 3), (1, 1, 1), (0, 1, 1))
    assert (folded.conv_shape, folded.out_shape, folded.pool) == \
        (layer.conv_shape, layer.out_shape, layer.pool)
    fc = load_accelerator(builtin_path("c3d_zcu102")).network.resolved[-1]
    with pytest.raises(ValueError, match="only a conv folds"):
        fc.fold_depth_taps()


def test_fold_input_rejects_the_wrong_shape():
    layer = _conv_layer((3, 3, 3), (1, 1, 1), (1, 1, 1), (4, 6, 6))
    bad = np.zeros((4, 4, 6, 5), dtype=np.int64)
    with pytest.raises(ValueError, match=r"expected \(4, 4, 6, 6\)"):
        fold_input_slots(bad, bad, layer)


def _accelerator(name, **changes):
    path = builtin_path(name)
    data = yaml.safe_load(path.read_text())
    net = load_network(path.parent / data["network"])
    data = copy.deepcopy(data)
    for key, value in changes.items():
        if key.startswith("core_"):
            data["cores"][0][key[5:]] = value
        else:
            data[key] = value
    return bind_accelerator(data, net)


def test_which_first_layers_fold():
    acc = _accelerator("c3d_zcu102_best")
    conv1a, conv2a = acc.network.resolved[:2]
    assert acc.folds_input(conv1a) and not acc.folds_input(conv2a)
    # 32-wide n-tiles: the depth taps fill them; a 64-wide core adds two row copies
    assert acc.engine_layer(conv1a).kernel == (1, 3, 3) and acc.engine_layer(conv2a) is conv2a
    wide = _accelerator("c3d_zcu102_best", core_tn=64, core_td=2)
    assert wide.engine_layer(conv1a).kernel == (1, 2, 3)
    # switched off
    off = _accelerator("c3d_zcu102_best", fold_input_taps=False)
    assert not off.folds_input(conv1a) and off.engine_layer(conv1a) is conv1a
    # a core of one input block: nothing idle to fill
    assert not _accelerator("c3d_zcu102_best", core_tn=8).folds_input(conv1a)
    # ResNet-18: conv1 on the spatial core folds, its 1x1x1 shortcuts never read the input
    r18 = _accelerator("r3d18_zcu102")
    assert [r.name for r in r18.network.resolved if r18.folds_input(r)] == ["conv1"]


def test_which_first_layers_fold_output_depths():
    """Output depth pairs fold where the layer's outputs fill at most half of ``Tm``, also
    where both depths' input copies take several input tiles."""
    conv1a = _accelerator("c3d_zcu102_best").network.resolved[0]
    assert _accelerator("c3d_zcu102_best", core_tn=32, core_tm=128).folded_depths(conv1a) == 2
    assert _accelerator("c3d_zcu102_best", core_tn=32, core_tm=64).folded_depths(conv1a) == 1
    # 4 copies of one block in two input tiles of Tn = 16
    assert _accelerator("c3d_zcu102_best", core_tn=16, core_tm=128).folded_depths(conv1a) == 2
    # no depth taps folded, no output depths either
    off = _accelerator("c3d_zcu102_best", core_tn=32, core_tm=128, fold_input_taps=False)
    assert off.folded_depths(conv1a) == 1 and off.engine_layer(conv1a) is conv1a
    acc = _accelerator("c3d_zcu102_best", core_tn=32, core_tm=128)
    assert acc.engine_layer(conv1a) == conv1a.fold_depth_taps(2)
    assert all(acc.folded_depths(r) == 1 for r in acc.network.resolved[1:])


def test_which_first_layers_fold_row_copies():
    """Row copies fold where they take the PE array fewer steps, as few as give the fewest
    (C3D conv1a with two output depths: 32 channels, on ``Tn = 64`` two copies fill it, 6
    steps for 9; on ``Tn = 32`` 9 steps at best, none), never without the depth fold or with
    ``fold_input_rows: false``."""
    conv1a, conv2a = _accelerator("c3d_zcu102_best").network.resolved[:2]
    acc = _accelerator("c3d_zcu102_best", core_tn=64, core_tm=128)
    assert (acc.folded_rows(conv1a), acc.folded_rows(conv2a)) == (2, 1)
    assert acc.engine_layer(conv1a) == conv1a.fold_depth_taps(2, rows=2)
    assert _accelerator("c3d_zcu102_best", core_tn=32, core_tm=128).folded_rows(conv1a) == 1
    # one output depth: 24 channels; on Tn = 16 three copies (72: 5 tiles x 3 taps = 15 < 18)
    assert _accelerator("c3d_zcu102_best", core_tn=16, core_tm=64,
                        core_td=2).folded_rows(conv1a) == 3
    assert _accelerator("c3d_zcu102_best", core_tn=64, core_tm=128,
                        fold_input_rows=False).folded_rows(conv1a) == 1
    assert _accelerator("c3d_zcu102_best", core_tn=64, core_tm=128,
                        fold_input_taps=False).folded_rows(conv1a) == 1
    # ResNet-18's 7x7x7 conv1: 56 channels already fill Tn = 64 (49 steps either way)
    r18 = _accelerator("r3d18_zcu102_best")
    assert r18.folded_rows(r18.network.resolved[0]) == 1


def test_a_spread_stem_reads_its_input_compact_and_takes_three_row_copies():
    """The paper's dense conv1 on the shipped Tn = 64 core reads the spread input compact
    (FLAG_SPREAD: 8 real channels in one slot group), so three row copies (15 PE steps per
    two output depths instead of 18) no longer cost the DDR reads that made them slower; a
    core whose n-tile holds more than 8 blocks cannot (and its copies would not pay)."""
    acc = _accelerator("spectral_c3d_zcu102")
    conv1, conv2 = acc.network.resolved[:2]
    assert conv1.in_layout == SPREAD and acc.spreads_input(conv1)
    assert not acc.spreads_input(conv2)
    assert acc.folded_rows(conv1) == 3
    wide = _accelerator("spectral_c3d_zcu102", core_tn=128, core_tm=128)
    assert not wide.spreads_input(wide.network.resolved[0])
    assert wide.folded_rows(wide.network.resolved[0]) == 1


@pytest.mark.parametrize(("tn", "B", "blocks"), [(64, 8, 36), (32, 4, 5), (16, 8, 3),
                                                 (128, 16, 9)])
def test_compact_spread_slots_hold_each_blocks_value_in_its_n_tiles_group(tn, B, blocks):
    """Slot ``nt*8 + j`` of the compact map is the value of block ``nt*tn/B + j`` (real part;
    the rest zero); spreading each slot back into its block, as the input buffer reads it,
    gives the spread slots again, on random and extreme values."""
    rng = np.random.default_rng(tn + B)
    x = rng.integers(-127, 128, (blocks, 2, 3, 3))
    x[0, 0] = 127
    x[-1, -1] = -127
    spread = to_layout(x, SPREAD, B)
    re, im = spread.real.astype(np.int64), spread.imag.astype(np.int64)
    c_re, c_im = compact_spread_slots(re, im, tn, B)
    per_tile, half = tn // B, B // 2
    tiles = -(-blocks // per_tile)
    assert c_re.shape == (tiles * 8, 2, 3, 3) and not c_im.any()
    for b in range(tiles * per_tile):
        nt, j = divmod(b, per_tile)
        expected = x[b] if b < blocks else 0
        np.testing.assert_array_equal(c_re[nt * 8 + j], expected)
    assert not c_re.reshape(tiles, 8, -1)[:, per_tile:].any()
    # the buffer's spreading read: slot s of n-tile nt is block s // (B/2)'s value
    back = np.stack([c_re[(s // half) // per_tile * 8 + (s // half) % per_tile]
                     for s in range(blocks * half)])
    np.testing.assert_array_equal(back, re)
    np.testing.assert_array_equal(np.where(np.arange(blocks * half)[:, None, None, None]
                                           % half == 0, back, 0), im)


def test_compact_spread_slots_refuse_what_the_buffer_cannot_spread():
    x = np.arange(2 * 8).reshape(2, 8)
    spread = to_layout(x, SPREAD, 8)
    re, im = spread.real.astype(np.int64), spread.imag.astype(np.int64)
    bins = re.copy()
    bins[1] += 1  # slot 1 of block 0 quantized with another scale than its slot 0
    with pytest.raises(ValueError, match="not spread"):
        compact_spread_slots(bins, im, 64, 8)
    with pytest.raises(ValueError, match="cannot read a spread input compact"):
        compact_spread_slots(re, im, 128, 8)
    with pytest.raises(ValueError, match="multiple of 4"):
        compact_spread_slots(re[:3], im[:3], 64, 8)


def test_a_first_layer_without_depth_taps_does_not_fold(tmp_path):
    net = {
        "name": "pointwise_first", "classes": 10, "block_size": 8,
        "input": {"channels": 3, "depth": 4, "height": 8, "width": 8},
        "layers": [
            {"name": "a", "type": "conv", "out_channels": 16, "kernel": [1, 3, 3],
             "padding": [0, 1, 1]},
            {"name": "b", "type": "conv", "out_channels": 10, "kernel": 3, "padding": 1},
        ],
    }
    acc_data = yaml.safe_load(builtin_path("c3d_zcu102_best").read_text())
    acc_data["network"] = "net.yaml"
    (tmp_path / "net.yaml").write_text(yaml.safe_dump(net))
    (tmp_path / "acc.yaml").write_text(yaml.safe_dump(acc_data))
    acc = load_accelerator(tmp_path / "acc.yaml")
    assert not any(acc.folds_input(layer) for layer in acc.network.resolved)


def _fc_layer(channels, out_channels=16, block_size=8):
    """An fc layer on a 1x1x1 input, fed by another layer (C3D's fc7 with other sizes)."""
    fc7 = load_accelerator(builtin_path("c3d_zcu102")).network.resolved[-2]
    return replace(fc7, in_channels=channels, out_channels=out_channels, block_size=block_size)


@pytest.mark.parametrize("channels, block_size", [(256, 8), (512, 8), (256, 4), (512, 16)])
@pytest.mark.parametrize("data", ["random", "extreme"])
def test_fc_folded_accumulators_equal_the_original(channels, block_size, data):
    """The folded fc layer on the same input bytes (re-read as its map through the NC/8DHW8
    unpacker) with the permuted weights sums exactly what the original sums."""
    layer = _fc_layer(channels, block_size=block_size)
    folded = layer.fold_fc_input()
    assert (folded.in_channels, folded.in_shape, folded.kernel) == \
        (channels // 16, (1, 4, 4), (1, 4, 4))
    rng = np.random.default_rng(channels + block_size)
    slots, q, p = channels // 2, channels // block_size, 16 // block_size
    shapes = [(slots, 1, 1, 1)] * 2 + [(p, q, block_size // 2, 1, 1, 1)] * 2
    if data == "random":
        xr, xi, wr, wi = (rng.integers(-127, 128, s) for s in shapes)
    else:
        xr, xi, wr, wi = (127 * rng.choice([-1, 1], s) for s in shapes)
    fx = unpack_ncdhw8(pack_ncdhw8(xr, xi), slots // 16, folded.in_shape)
    fw = fold_fc_weight_slots(wr, wi, block_size)
    assert fw[0].shape == (p, q // 16, block_size // 2, 1, 4, 4)
    want = conv3d_slots_int(xr, xi, wr, wi)
    got = conv3d_slots_int(*fx, *fw)
    for a, b in zip(want, got, strict=True):
        np.testing.assert_array_equal(a, b)


def test_fc_fold_rule_on_the_builtin_networks():
    """C3D's fc7 and fc8 fold beside fc6's 1x4x4 kernel (fc6 reads a map already); no layer
    of the paper's ResNet-18 does (its fc reads 512 channels after GAP, on the pointwise core
    with 1x1x1 kernels only)."""
    c3d = load_accelerator(builtin_path("c3d_zcu102"))
    assert [r.name for r in c3d.network.resolved if c3d.folds_fc_input(r)] == ["fc7", "fc8"]
    fc7 = c3d.engine_layer(c3d.network.resolved[-2])
    assert (fc7.in_channels, fc7.in_shape, fc7.kernel) == (256, (1, 4, 4), (1, 4, 4))
    r3d = load_accelerator(builtin_path("r3d18_zcu102"))
    assert not any(r3d.folds_fc_input(r) for r in r3d.network.resolved)


def test_fc_fold_needs_whole_groups_a_full_tn_and_a_covering_kernel():
    c3d = load_accelerator(builtin_path("c3d_zcu102"))
    fc7 = c3d.network.resolved[-2]
    assert c3d.folds_fc_input(fc7)
    assert not c3d.folds_fc_input(replace(fc7, in_channels=4096 - 128))  # not whole groups
    assert not c3d.folds_fc_input(replace(fc7, in_channels=256))  # 16 channels < Tn = 32
    assert not c3d.folds_fc_input(replace(fc7, input=None))  # the network input
    # ResNet-18's fc has whole groups and 32 channels a position for a Tn = 8 core, but no
    # other layer of that core has a kernel covering 1x4x4: its buffers would have to grow.
    r3d = load_accelerator(builtin_path("r3d18_zcu102"))
    fc = r3d.network.resolved[-1]
    assert fc.padded_in_channels == 512 and r3d.core_for(fc).tn <= 512 // 16
    assert not r3d.folds_fc_input(fc)
    with pytest.raises(ValueError, match="fc layer on a 1x1x1 input"):
        _fc_layer(256).fold_fc_input().fold_fc_input()
    with pytest.raises(ValueError, match="multiple of 256"):
        _fc_layer(128).fold_fc_input()
    with pytest.raises(ValueError, match="whole slot groups"):
        fold_fc_weight_slots(np.zeros((1, 8, 4, 1, 1, 1)), np.zeros((1, 8, 4, 1, 1, 1)), 8)


# --- Subsampled input of a 1x1x1 strided conv ------------------------------------------------


@pytest.mark.parametrize("stride, in_shape", [
    ((2, 2, 2), (8, 28, 28)),   # ResNet-18 l2b1_down
    ((2, 2, 2), (2, 7, 7)),     # l4b1_down: odd rows, the last one used
    ((1, 2, 1), (3, 5, 6)),     # rows only
    ((2, 1, 2), (5, 4, 9)),     # planes only, odd width
])
@pytest.mark.parametrize("data", ["random", "extreme"])
def test_subsampled_input_gives_the_original_accumulators(stride, in_shape, data):
    """The subsampled layer on the planes and rows the stride uses (what the engine reads with
    multiplied strides) computes the original layer's accumulators exactly."""
    layer = _conv_layer((1, 1, 1), stride, (0, 0, 0), in_shape, channels=16)
    view = layer.subsample_input()
    sd, sr, sc = stride
    assert view.in_shape == tuple(-(-n // s) for n, s in zip(in_shape, (sd, sr, 1), strict=True))
    assert (view.stride, view.kernel, view.conv_shape) == ((1, 1, sc), (1, 1, 1),
                                                           layer.conv_shape)
    rng = np.random.default_rng(sum(in_shape))
    slots, q = layer.padded_in_channels // 2, layer.padded_in_channels // 8
    shapes = [(slots, *in_shape), (slots, *in_shape), (2, q, 4, 1, 1, 1), (2, q, 4, 1, 1, 1)]
    if data == "random":
        xr, xi, wr, wi = (rng.integers(-127, 128, s) for s in shapes)
    else:
        xr, xi, wr, wi = (127 * rng.choice([-1, 1], s) for s in shapes)
    ref = conv3d_slots_int(xr, xi, wr, wi, stride, (0, 0, 0))
    got = conv3d_slots_int(xr[:, ::sd, ::sr], xi[:, ::sd, ::sr], wr, wi, view.stride, (0, 0, 0))
    assert all(np.array_equal(a, b) for a, b in zip(ref, got, strict=True))


def test_which_layers_subsample_their_input():
    """ResNet-18's three stride-2 shortcuts, nothing else of the built-in networks; a padded,
    unstrided or larger kernel is refused by name."""
    from fcircnn.models.placement import subsample_steps
    for name, steps in (("r3d18", {"l2b1_down", "l3b1_down", "l4b1_down"}), ("c3d", set())):
        acc = load_accelerator(builtin_path(f"{name}_zcu102"))
        got = {r.name for r in acc.network.resolved if subsample_steps(r) != (1, 1)}
        assert got == steps
        for r in acc.network.resolved:
            if r.name in steps:
                assert subsample_steps(r) == (2, 2)
                assert acc.engine_layer(r) == r.subsample_input()
    for kernel, stride, padding in (((1, 1, 1), (1, 1, 2), (0, 0, 0)),
                                    ((1, 3, 3), (2, 2, 2), (0, 1, 1)),
                                    ((1, 1, 1), (1, 1, 1), (0, 0, 0))):
        layer = _conv_layer(kernel, stride, padding, (4, 8, 8), channels=16)
        assert subsample_steps(layer) == (1, 1)
        with pytest.raises(ValueError, match="subsampled input"):
            layer.subsample_input()


@pytest.mark.parametrize("kernel, stride, padding, in_shape, kept", [
    ((3, 3, 3), (1, 1, 1), (1, 1, 1), (1, 4, 4), ((1, 2), (0, 3), (0, 3))),  # ResNet-18 stage 4
    ((3, 3, 3), (2, 2, 2), (1, 1, 1), (2, 8, 8), ((1, 3), (0, 3), (0, 3))),  # l4b1_conv1
    ((3, 3, 3), (1, 1, 1), (1, 1, 1), (1, 1, 2), ((1, 2), (1, 2), (0, 3))),  # two axes
    ((5, 3, 3), (1, 1, 1), (2, 1, 1), (2, 3, 3), ((1, 4), (0, 3), (0, 3))),  # both ends
    ((7, 7, 7), (1, 2, 2), (3, 3, 3), (2, 9, 9), ((2, 5), (0, 7), (0, 7))),  # deep kernel
])
@pytest.mark.parametrize("data", ["random", "extreme"])
def test_trimmed_kernels_compute_the_original_accumulators(kernel, stride, padding, in_shape,
                                                           kept, data):
    """The kept taps with their weight slice and reduced padding: the same sums on the same
    input (a tap kept wrongly or a padding off by one moves a product and fails)."""
    layer = _conv_layer(kernel, stride, padding, in_shape, channels=16)
    assert tuple((r.start, r.stop) for r in layer.useful_taps()) == kept
    trimmed = layer.trim_taps()
    assert trimmed.kernel == tuple(b - a for a, b in kept)
    assert trimmed.padding == tuple(p - a for p, (a, _) in zip(padding, kept, strict=True))
    assert (trimmed.conv_shape, trimmed.in_shape) == (layer.conv_shape, layer.in_shape)
    rng = np.random.default_rng(sum(kernel) + sum(in_shape))
    slots, q = layer.padded_in_channels // 2, layer.padded_in_channels // 8
    shapes = [(slots, *in_shape), (slots, *in_shape), (2, q, 4, *kernel), (2, q, 4, *kernel)]
    if data == "random":
        xr, xi, wr, wi = (rng.integers(-127, 128, s) for s in shapes)
    else:
        xr, xi, wr, wi = (127 * rng.choice([-1, 1], s) for s in shapes)
    tw = trim_weight_slots(wr, wi, layer)
    assert tw[0].shape == (2, q, 4, *trimmed.kernel)
    want = conv3d_slots_int(xr, xi, wr, wi, layer.stride, layer.padding)
    got = conv3d_slots_int(xr, xi, *tw, trimmed.stride, trimmed.padding)
    assert want[0].shape == got[0].shape
    assert all(np.array_equal(a, b) for a, b in zip(want, got, strict=True))


@pytest.mark.parametrize("kernel, stride, padding, in_shape", [
    ((3, 3, 3), (1, 1, 1), (1, 1, 1), (2, 4, 4)),   # every tap reads the map somewhere
    ((1, 1, 1), (1, 1, 1), (0, 0, 0), (1, 1, 1)),   # nothing to drop
    ((3, 3, 3), (2, 2, 2), (1, 1, 1), (3, 5, 5)),   # tap 0 is used by the first output
])
def test_a_kernel_whose_taps_all_read_the_map_is_not_trimmed(kernel, stride, padding, in_shape):
    from fcircnn.models.placement import trims_taps
    layer = _conv_layer(kernel, stride, padding, in_shape, channels=16)
    assert [len(r) for r in layer.useful_taps()] == list(kernel)
    assert not trims_taps(layer)
    with pytest.raises(ValueError, match="nothing to trim"):
        layer.trim_taps()


def test_an_axis_whose_trim_would_change_the_output_size_keeps_its_taps():
    """A 1-wide map with padding 2 under a 3-tap kernel: only tap 2 reads it, but a 1-tap
    kernel without padding would give one output where the layer has three (its outputs 0
    and 2 read padding only); the axis keeps every tap."""
    layer = _conv_layer((3, 3, 3), (1, 1, 1), (2, 1, 1), (1, 4, 4), channels=16)
    assert layer.conv_shape[0] == 3
    assert layer.useful_taps()[0] == range(3)


def test_which_layers_trim_their_kernels():
    """ResNet-18's stage 4 (a map one voxel deep): l4b1_conv1 keeps depth taps 1-2, the other
    three 3x3x3 convs depth tap 1; no C3D layer; the engine runs the trimmed layer, and the
    compiler a slice of its weights; fc and gap layers are refused by name."""
    from fcircnn.models.placement import trims_taps
    want = {"l4b1_conv1": (2, 3, 3), "l4b1_conv2": (1, 3, 3), "l4b2_conv1": (1, 3, 3),
            "l4b2_conv2": (1, 3, 3)}
    for name, trims in (("r3d18", want), ("c3d", {})):
        acc = load_accelerator(builtin_path(f"{name}_zcu102"))
        got = {r.name: acc.engine_layer(r).kernel for r in acc.network.resolved
               if trims_taps(r)}
        assert got == trims
        for r in acc.network.resolved:
            if r.name in trims:
                assert acc.engine_layer(r) == r.trim_taps()
            if r.kind != "conv":
                with pytest.raises(ValueError, match="only a conv trims"):
                    r.useful_taps()
    layer = _conv_layer((3, 3, 3), (1, 1, 1), (1, 1, 1), (1, 4, 4), channels=16)
    bad = np.zeros((2, 2, 4, 3, 3, 1))
    with pytest.raises(ValueError, match="weight slots"):
        trim_weight_slots(bad, bad, layer)


def _gap_layer(channels, in_shape, block_size=8):
    base = load_accelerator(builtin_path("r3d18_zcu102")).network.resolved[-2]
    assert base.kind == "gap"
    return replace(base, in_channels=channels, out_channels=channels, in_shape=in_shape,
                   kernel=in_shape, block_size=block_size)


def test_a_gap_layer_reads_its_input_as_planes_of_a_channel_tile():
    layer = _gap_layer(512, (1, 4, 4))
    view = layer.view_gap_input(64)
    assert (view.in_channels, view.in_shape, view.kernel) == (64, (8, 4, 4), (1, 4, 4))
    assert (view.out_channels, view.conv_shape, view.out_shape) == (64, (8, 1, 1), (8, 1, 1))
    assert view.dense_ops == layer.dense_ops == 0
    for bad_layer, channels in ((_gap_layer(512, (2, 4, 4)), 64),   # two planes deep
                                (layer, 512), (layer, 8), (layer, 48), (layer, True),
                                (_gap_layer(512, (1, 4, 4), block_size=32), 64),
                                (_conv_layer((3, 3, 3), (1, 1, 1), (1, 1, 1), (1, 4, 4)), 16)):
        with pytest.raises(ValueError, match="planes"):
            bad_layer.view_gap_input(channels)


def test_which_gap_layers_read_planes():
    """ResNet-18's gap on its best core (512 channels, Tn = 64: 8 planes); not on the paper's
    configuration, whose gap runs on the Tn = 8 pointwise core (less than a slot group)."""
    from fcircnn.models.placement import views_gap
    best = load_accelerator(builtin_path("r3d18_zcu102_best"))
    gap = best.network.resolved[-2]
    assert views_gap(best, gap) and best.engine_layer(gap) == gap.view_gap_input(64)
    paper = load_accelerator(builtin_path("r3d18_zcu102"))
    assert not any(views_gap(paper, r) for r in paper.network.resolved)
    assert not any(views_gap(best, r) for r in best.network.resolved if r.kind != "gap")


def test_a_gap_views_post_parameters_of_one_plane():
    from fcircnn.models.fold import view_gap_post_slots
    bins = np.tile(np.arange(4), 64)[None].repeat(2, axis=0)   # 256 slots, per-bin scales
    post = PostParams(bins + 1, bins * 0, bins + 2, None)
    view = view_gap_post_slots(post, 32)
    assert view.mult.shape == (2, 32) and view.res_mult is None
    np.testing.assert_array_equal(view.mult, np.tile(np.arange(4), 8)[None].repeat(2, 0) + 1)
    odd = PostParams(np.arange(512).reshape(2, 256), bins, bins, None)  # per slot: no view
    with pytest.raises(ValueError, match="differs"):
        view_gap_post_slots(odd, 32)
    with pytest.raises(ValueError, match="planes of"):
        view_gap_post_slots(post, 24)
