"""Network compiler (:mod:`fcircnn.gen.compiler`) and the ``fcircnn compile`` command.

The decisive test decodes the image bytes alone (descriptors, weight tiles, post tables, input
map), re-runs the golden integer contract from the decoded data and compares bit for bit with
the compiler's expected outputs and with ``run_network(..., ("int",))``.
"""

import itertools
import json
import math
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pytest

from fcircnn.arch.descriptor import (
    DESCRIPTOR_BYTES,
    FLAG_CRELU,
    FLAG_DFOLD,
    FLAG_ISPLIT,
    FLAG_LAST,
    FLAG_MINNER,
    FLAG_POOL,
    FLAG_RESIDUAL,
    FLAG_WQUARTER,
    FLAG_WSPLIT,
    OP_CONV,
    OP_GAP,
    OP_POOL,
    LayerDescriptor,
    weight_parts,
)
from fcircnn.arch.geometry import CoreGeometry, pool_fuses
from fcircnn.cli import main
from fcircnn.gen.choose import port_split
from fcircnn.gen.compiler import compile_network, image_for_clip
from fcircnn.gen.plan import ALIGN, POST_RECORD_BYTES, CompileError, plan_network
from fcircnn.models import spectral
from fcircnn.models.config import ConfigError, builtin_path, load_accelerator
from fcircnn.models.fold import fold_input_slots
from fcircnn.models.layout import ncdhw8_size, pack_ncdhw8, unpack_ncdhw8
from fcircnn.models.network import random_weights, run_network
from fcircnn.models.quant import PostParams
from fcircnn.runtime.image import CompiledImage


@pytest.fixture
def acc_path(tmp_path, small_accelerator):
    return small_accelerator(tmp_path)


@pytest.fixture
def acc(acc_path):
    return load_accelerator(acc_path)


@pytest.fixture
def image(acc):
    return compile_network(acc, seed=3, base=0x10000)


# --------------------------------------------------------------------------------------------
# Decoder: image bytes -> golden integer contract (independent of the compiler's encoders)

_POST = np.dtype([("mult", "<i2", (2,)), ("res_mult", "<i2", (2,)), ("bias", "u1", (2, 6)),
                  ("shift", "u1", (2,)), ("pad", "u1", (10,))])
assert _POST.itemsize == POST_RECORD_BYTES


def _decode_weights(raw, d, Tn, Tm, B):
    half = B // 2
    P, Q = d.out_slots // half, d.in_slots // half
    taps = math.prod(d.kernel)
    pm, qn = Tm // B, Tn // B
    flat = np.frombuffer(raw, dtype=np.int8).astype(np.int64)
    assert flat.size == d.m_tiles * d.n_tiles * taps * pm * qn * half * 2
    full = np.zeros((d.m_tiles * pm, d.n_tiles * qn, half, taps, 2), dtype=np.int64)
    tile_bytes = taps * pm * qn * half * 2
    for mt in range(d.m_tiles):
        for nt in range(d.n_tiles):
            start = (mt * d.n_tiles + nt) * tile_bytes
            tile = flat[start:start + tile_bytes]
            parts = weight_parts(d.flags)
            # part-major: every tap's first half (quarter), then the seconds, ...
            tile = tile.reshape(parts, taps, tile_bytes // taps // parts).transpose(1, 0, 2)
            tile = tile.reshape(taps, pm, qn, half, 2)
            for t in range(taps):
                for p in range(pm):
                    for q in range(qn):
                        full[mt * pm + p, nt * qn + q, :, t] = tile[t, p, q]
    assert not full[P:].any() and not full[:, Q:].any(), "partial tiles must be zero-padded"
    w = full[:P, :Q].reshape(P, Q, half, *d.kernel, 2)
    return w[..., 0], w[..., 1]


def _decode_post(raw, slots, residual):
    rec = np.frombuffer(raw, dtype=_POST)
    assert not rec["pad"].any() and not rec[slots:].tobytes().strip(b"\0")
    rec = rec[:slots]
    weights = 1 << (8 * np.arange(6, dtype=np.int64))
    bias = (rec["bias"].astype(np.int64) * weights).sum(axis=2)
    bias = np.where(bias >= 1 << 47, bias - (1 << 48), bias)
    res_mult = rec["res_mult"].T.astype(np.int64)
    if not residual:
        assert not res_mult.any()
    return PostParams(mult=rec["mult"].T.astype(np.int64), bias=bias.T,
                      shift=rec["shift"].T.astype(np.int64),
                      res_mult=res_mult if residual else None)


def _execute(data, base, desc_ptr, acc, *, zeroed=True):
    """Run every descriptor from the image bytes alone; return outputs by layer index (each
    as written, before a later map may reuse its bytes). ``zeroed``: check that every output
    map is zero before its layer writes it (an image whose maps each have their own bytes)."""
    mem = bytearray(data)

    def read(addr, size):
        assert base <= addr and addr + size <= base + len(mem)
        return bytes(mem[addr - base:addr - base + size])

    outputs = {}
    addr, seen = desc_ptr, 0
    while True:
        d = LayerDescriptor.unpack(read(addr, DESCRIPTOR_BYTES))
        if d.op == OP_POOL:
            # Pool pass of the layer just run: CMaxPool from its conv map to its output.
            assert d.layer == seen - 1 and d.flags & FLAG_POOL
            src = unpack_ncdhw8(read(d.in_base, ncdhw8_size(d.in_slots, *d.in_shape)),
                                d.in_slots, d.in_shape)
            parts = [spectral.cmaxpool(p, d.pool_window, d.pool_stride, d.pool_padding)
                     for p in src]
        else:
            assert d.layer == seen
            parts = _execute_conv(d, read, acc)
            seen += 1
        assert parts[0].shape[1:] == d.out_shape
        if d.flags & FLAG_DFOLD:
            # Two output depths per depth: slot j*S + s at depth z is slot s at depth 2z + j.
            slots, shape = d.stored_output
            parts = [np.stack([p[:slots], p[slots:]], axis=2).reshape(slots, *shape)
                     for p in parts]
        elif d.op == OP_GAP and d.out_shape[0] > 1:
            # A gap read as k planes of one channel tile: its k x 1 x 1 map is the bytes of
            # the network's 1 x 1 x 1 map.
            parts = list(unpack_ncdhw8(pack_ncdhw8(*parts), *d.stored_output))
        blob = pack_ncdhw8(*parts)
        assert not zeroed or not any(read(d.out_base, len(blob))), "output maps start zeroed"
        mem[d.out_base - base:d.out_base - base + len(blob)] = blob
        outputs[d.layer] = (parts[0], parts[1])
        if d.flags & FLAG_LAST:
            assert d.next_desc == 0
            return outputs
        addr = d.next_desc


def _read_map(read, base, slots, shape, stride):
    """The slots of a ``shape`` map at ``base`` read row by row with the descriptor's byte
    ``stride`` (slot group, plane, row), as the DMA reads it (a subsampled input is not
    dense)."""
    D, H, W = shape
    rows = [read(base + g * stride[0] + z * stride[1] + y * stride[2], W * 16)
            for g in range(-(-slots // 8)) for z in range(D) for y in range(H)]
    return unpack_ncdhw8(b"".join(rows), slots, shape)


def _execute_conv(d, read, acc):
    """The conv part of a descriptor (conv, CBN + residual, quantize, CReLU), from bytes."""
    if True:
        B = acc.block_size
        core = acc.cores[d.core]
        xr, xi = _read_map(read, d.in_base, d.in_slots, d.in_shape, d.in_stride)
        wr, wi = _decode_weights(read(d.weight_base, d.weight_bytes), d, core.tn, core.tm, B)
        residual = bool(d.flags & FLAG_RESIDUAL)
        post = _decode_post(read(d.post_base, d.m_tiles * core.tm // 2 * POST_RECORD_BYTES),
                            d.out_slots, residual)
        acc_re, acc_im = spectral.conv3d_slots_int(xr, xi, wr, wi, d.stride, d.padding)
        assert acc_re.shape[1:] == d.conv_shape
        res = None
        if residual:
            res = unpack_ncdhw8(read(d.res_base, ncdhw8_size(d.out_slots, *d.conv_shape)),
                                d.out_slots, d.conv_shape)
        pool = None
        if d.flags & FLAG_POOL:
            # Fused: the drain pools tile by tile; the tiles cut the map at stride boundaries
            # (the carried windows take their first voxel from the tile before), so that is
            # the pool of the whole map.
            for k, s, p, t in zip(d.pool_window, d.pool_stride, d.pool_padding, d.tile,
                                  strict=True):
                assert (k, s, p) in ((1, 1, 0), (2, 2, 0), (3, 2, 1)) and t % s == 0
            pool = (d.pool_window, d.pool_stride, d.pool_padding)
        return [spectral.post_process(a, **post.part(c), res=None if res is None else res[c],
                                      relu=bool(d.flags & FLAG_CRELU), pool=pool)
                for c, a in enumerate((acc_re, acc_im))]


def test_image_alone_reproduces_the_golden_integer_contract(acc, image):
    net = acc.network
    outputs = _execute(image.data, image.base, image.desc_ptr, acc)
    assert len(outputs) == len(net.resolved)
    golden = run_network(net, ("int",), seed=3).int_outputs
    for layer in net.resolved:
        got = outputs[layer.index]
        for c in (0, 1):
            np.testing.assert_array_equal(got[c], image.expected[layer.name][c], layer.name)
            np.testing.assert_array_equal(got[c], golden[layer.name][c], layer.name)
    # c1 (3 channels, one block of the core's two) runs with its depth taps folded and three
    # row copies of each (72 channels: 5 n-tiles of 3 taps instead of 2 of 9): the input
    # region holds the nine depth- and row-shifted copies of the quantized input
    first = image.plan.layers[0]
    assert first.folded and (first.depths, first.rows) == (1, 3)
    assert first.descriptor.kernel == (1, 1, 3) and first.descriptor.padding == (0, 0, 1)
    assert first.descriptor.in_slots == 9 * 4
    re, im = image.input_parts
    folded = fold_input_slots(re.astype(np.int64), im.astype(np.int64), first.layer, 1, 3)
    assert image.read(image.region("input").base, image.region("input").size) == \
        pack_ncdhw8(*folded)


def _check_golden(image, acc):
    """Every layer of ``image`` executed from its bytes equals the golden contract."""
    outputs = _execute(image.data, image.base, image.desc_ptr, acc)
    for layer in acc.network.resolved:
        for c in (0, 1):
            np.testing.assert_array_equal(outputs[layer.index][c],
                                          image.expected[layer.name][c], layer.name)


def test_split_weight_tiles_are_laid_out_half_major(tmp_path, fused_accelerator):
    # On two ports the fused test network's FC layer is weight-bound: the compiler splits
    # its tiles (the model says so) and lays each out half-major; f1 reads each input box
    # once for both its m-tiles (FLAG_MINNER) and splits it (the boxes' layout does not
    # change); the decoder above reads that layout independently and the image still
    # computes the golden contract.
    acc2 = load_accelerator(fused_accelerator(tmp_path, axi_ports=2))
    image = compile_network(acc2, seed=4, base=0x10000)
    splits = FLAG_WSPLIT | FLAG_ISPLIT | FLAG_MINNER
    flagged = {lp.layer.name: lp.descriptor.flags & splits for lp in image.plan.layers}
    assert flagged == {"f1": FLAG_ISPLIT | FLAG_MINNER, "f2": 0, "fc": FLAG_WSPLIT}
    for lp in image.plan.layers:
        unsplit = replace(lp.descriptor, flags=lp.descriptor.flags & ~splits)
        assert port_split(acc2, unsplit, lp.core) == flagged[lp.layer.name]
    _check_golden(image, acc2)
    one_port = compile_network(load_accelerator(fused_accelerator(tmp_path / "one")), seed=4,
                               base=0x10000)
    assert not any(lp.descriptor.flags & FLAG_WSPLIT for lp in one_port.plan.layers)


def test_quarter_weight_tiles_are_laid_out_quarter_major(tmp_path):
    # On four ports with a queue of two the classifier's fc1 and fc3 read their tiles in
    # quarters (the model says so: halves leave ports 0 and 2 idle), fc1 with its input boxes
    # split; the decoder reads the quarter-major layout independently and the image still
    # computes the golden contract.
    from conftest import write_fc_accelerator

    acc4 = load_accelerator(write_fc_accelerator(tmp_path, tm=64, axi_ports=4, dma_queue=2))
    image = compile_network(acc4, seed=4, base=0x10000)
    splits = FLAG_WSPLIT | FLAG_WQUARTER | FLAG_ISPLIT
    flags = {lp.layer.name: lp.descriptor.flags & splits for lp in image.plan.layers}
    assert flags == {"c1": FLAG_WSPLIT | FLAG_ISPLIT, "fc1": splits, "fc2": FLAG_WSPLIT,
                     "fc3": FLAG_WSPLIT | FLAG_WQUARTER}
    for lp in image.plan.layers:
        unsplit = replace(lp.descriptor, flags=lp.descriptor.flags & ~splits)
        assert port_split(acc4, unsplit, lp.core) == flags[lp.layer.name]
    _check_golden(image, acc4)


def test_fold_off_runs_the_first_layer_as_written(acc_path, image):
    """``fold_input_taps: false``: the first layer as written, the same outputs as folded."""
    folded = image
    assert folded.plan.layers[0].folded
    acc_path.write_text(acc_path.read_text() + "fold_input_taps: false\n")
    acc = load_accelerator(acc_path)
    image = compile_network(acc, seed=3, base=0x10000)
    first = image.plan.layers[0]
    assert not first.folded and first.descriptor.kernel == (3, 3, 3)
    outputs = _execute(image.data, image.base, image.desc_ptr, acc)
    for layer in acc.network.resolved:
        for c in (0, 1):
            np.testing.assert_array_equal(outputs[layer.index][c], image.expected[layer.name][c])
            np.testing.assert_array_equal(outputs[layer.index][c], folded.expected[layer.name][c])
    re, im = image.input_parts
    assert image.read(image.region("input").base, image.region("input").size) == \
        pack_ncdhw8(re.astype(np.int64), im.astype(np.int64))


def test_bin_granularity_and_given_weights(acc):
    net = acc.network
    w = random_weights(net, 7)
    x = np.random.default_rng(5).standard_normal((3, 4, 8, 8))
    img = compile_network(acc, weights=w, x=x, granularity="bin")
    outputs = _execute(img.data, img.base, img.desc_ptr, acc)
    golden = run_network(net, ("int",), weights=random_weights(net, 7), x=x,
                         granularity="bin").int_outputs
    for layer in net.resolved:
        for c in (0, 1):
            np.testing.assert_array_equal(outputs[layer.index][c], golden[layer.name][c])


def test_calibration_set_and_percentile(acc):
    # Scales from a set of clips at a percentile: the image the compiler writes executes to
    # the golden model's integer outputs for the same set and statistic.
    net = acc.network
    rng = np.random.default_rng(9)
    x = rng.standard_normal((3, 4, 8, 8))
    clips = rng.standard_normal((3, 3, 4, 8, 8)) * 2
    img = compile_network(acc, weights=random_weights(net, 7), x=x, calibration=clips,
                          statistic="p99.5")
    outputs = _execute(img.data, img.base, img.desc_ptr, acc)
    golden = run_network(net, ("int",), weights=random_weights(net, 7), x=x, clips=clips,
                         statistic="p99.5").int_outputs
    plain = compile_network(acc, weights=random_weights(net, 7), x=x)
    assert img.data != plain.data  # the set changed the scales
    for layer in net.resolved:
        for c in (0, 1):
            np.testing.assert_array_equal(outputs[layer.index][c], golden[layer.name][c])


def test_image_for_clip_is_the_compilation_of_that_clip(acc):
    """With a calibration set the scales do not depend on the clip: writing another clip into
    a compiled image gives exactly the image compiled for it, and its expected outputs."""
    net = acc.network
    rng = np.random.default_rng(11)
    clips = rng.standard_normal((3, 3, 4, 8, 8)) * 2
    x0, x1 = rng.standard_normal((2, 3, 4, 8, 8))
    w = random_weights(net, 5)
    first = compile_network(acc, weights=w, x=x0, calibration=clips)
    direct = compile_network(acc, weights=w, x=x1, calibration=clips)
    again = image_for_clip(acc, first, x1)
    assert again.data == direct.data and again.data != first.data
    assert again.plan == direct.plan
    for part in (0, 1):
        np.testing.assert_array_equal(again.input_parts[part], direct.input_parts[part])
    assert again.expected.keys() == direct.expected.keys()
    for name, (re, im) in direct.expected.items():
        np.testing.assert_array_equal(again.expected[name][0], re)
        np.testing.assert_array_equal(again.expected[name][1], im)
    with pytest.raises(CompileError, match="input has shape"):
        image_for_clip(acc, first, x1[:, :2])
    other = load_accelerator(builtin_path("c3d_zcu102"))
    with pytest.raises(CompileError, match="image is of"):
        image_for_clip(other, first, x1)


def test_a_gap_read_as_planes_reproduces_the_golden_contract(tmp_path, small_accelerator):
    """A gap over a 1x4x4 map of 64 channels on the Tn = 16 core runs as 4 planes of one
    channel tile: one weight tile, the descriptor's map 4x1x1 of 8 slots, stored as the
    network's 1x1x1 map of 32; decoded from the bytes alone every layer equals the golden
    integer contract."""
    net = _net("  - {name: a, type: conv, out_channels: 64, kernel: 3, padding: 1}\n"
               "  - {name: g, type: gap}\n  - {name: f, type: fc, out_channels: 16}\n",
               "{channels: 16, depth: 1, height: 4, width: 4}", classes=16)
    acc = load_accelerator(small_accelerator(tmp_path, net=net))
    image = compile_network(acc, seed=9)
    g = image.plan.layers[1]
    d = g.descriptor
    assert g.folded and d.op == OP_GAP and (d.m_tiles, d.n_tiles) == (1, 1)
    assert (d.in_slots, d.in_shape, d.out_slots, d.out_shape) == (8, (4, 4, 4), 8, (4, 1, 1))
    assert d.stored_output == (32, (1, 1, 1))
    assert d.weight_bytes == CoreGeometry.of(acc.cores[0], 8).weight_tile_beats(16) * 16
    outputs = _execute(image.data, image.base, image.desc_ptr, acc)
    for layer in acc.network.resolved:
        for c in (0, 1):
            np.testing.assert_array_equal(outputs[layer.index][c], image.expected[layer.name][c])


def test_descriptors_match_the_network(acc, image):
    net = acc.network
    descs = image.descriptors
    # One descriptor per layer, plus a pool pass after every pooling layer.
    assert len(descs) == len(net.resolved) + sum(layer.pool is not None for layer in net.resolved)
    for i, d in enumerate(descs):
        raw = image.read(image.desc_ptr + i * DESCRIPTOR_BYTES, DESCRIPTOR_BYTES)
        assert LayerDescriptor.unpack(raw) == d
        assert d.cycles_addr == image.region("cycles").base + 16 * i
    for lp in image.plan.layers:
        layer, d = lp.layer, lp.descriptor
        assert lp.descriptors[0] is d and (d.op == OP_GAP) == (layer.kind == "gap")
        run = lp.engine_layer  # the folded c1, or the layer itself
        assert d.kernel == run.kernel and d.in_shape == run.in_shape
        assert d.in_slots == run.padded_in_channels // 2 and d.out_shape == layer.conv_shape
        assert d.weight_base == image.region(f"{layer.name}.weights").base
        assert lp.descriptors[-1].out_base == image.region(f"{layer.name}.output").base
        assert lp.descriptors[-1].out_shape == layer.out_shape
        if layer.pool is not None:
            pool = lp.descriptors[1]
            assert pool.op == OP_POOL and pool.flags & FLAG_POOL and not d.flags & FLAG_POOL
            assert d.out_base == pool.in_base == image.region(f"{layer.name}.conv").base
            assert pool.pool_window == layer.pool.window
    assert descs[-1].last and not any(d.last for d in descs[:-1])
    c1, c2, c3 = (lp.descriptor for lp in image.plan.layers[:3])
    assert c2.res_base == c1.out_base
    assert (c3.m_tiles, c3.n_tiles) == (2, 1)  # 24 output channels on Tm = 16: partial tile
    # derived fields: tiles of the core's (Td, Tr, Tc), strides of the maps
    assert c1.tile == (2, 4, 4) and c1.tiles == (2, 2, 2) and c1.out_step == (
        2 * 8 * 8 * 16, 4 * 8 * 16, 4 * 16)
    assert c3.tile == (2, 2, 2) and c3.tiles == (1, 1, 1) and c3.conv_shape == (2, 2, 2)
    assert c3.in_stride == (2 * 4 * 4 * 16, 4 * 4 * 16, 4 * 16)
    assert c3.in_step == (2 * 1 * 4 * 4 * 16, 2 * 2 * 4 * 16, 2 * 2 * 16)
    assert c3.in_pad_bytes == (4 * 4 * 16, 4 * 16, 16)


def test_memory_map_regions_are_aligned_disjoint_and_in_range(acc, image):
    regions = sorted(image.regions, key=lambda r: r.base)
    assert regions[0].base == image.base == 0x10000
    for r in regions:
        assert r.base % ALIGN == 0 and r.size > 0
        assert r.end <= image.base + len(image.data) <= 1 << acc.address_width
    for a, b in itertools.pairwise(regions):
        assert a.end <= b.base
    kinds = [r.kind for r in regions]
    assert kinds.count("weights") == kinds.count("post") == kinds.count("output") == 5
    assert {"descriptors", "cycles", "input"} <= set(kinds)


def test_save_writes_the_three_files(tmp_path, acc, image):
    paths = image.save(tmp_path / "out")
    assert [p.name for p in paths] == ["image.bin", "memory_map.json", "expected.npz"]
    assert paths[0].read_bytes() == image.data
    mm = json.loads(paths[1].read_text())
    assert mm["desc_ptr"] == image.desc_ptr and len(mm["descriptors"]) == 6  # + c2's pool
    assert mm["descriptors"][1]["name"] == "c2" and mm["descriptors"][1]["kernel"] == [3, 3, 3]
    with np.load(paths[2]) as npz:
        assert npz["fc.re"].dtype == np.int8
        np.testing.assert_array_equal(npz["c2.im"], image.expected["c2"][1])


# --------------------------------------------------------------------------------------------
# Rejections


def _replace_core(acc, **changes):
    core = acc.cores[0].model_copy(update=changes)
    return acc.model_copy(update={"cores": (core,)})


@pytest.mark.parametrize("changes, match", [
    ({"max_kernel": (1, 3, 3)}, r"layer 'c1'.*kernel 3x3x3 > max_kernel 1x3x3"),
    ({"max_stride": (1, 1, 1)}, r"layer 'c3'.*stride 1x2x2 > max_stride 1x1x1"),
])
def test_core_limits(acc, changes, match):
    with pytest.raises(CompileError, match=match):
        plan_network(_replace_core(acc, **changes))


def test_channel_tile_rule_is_the_schemas(tmp_path, small_accelerator):
    # Whole block pairs per weight beat follow from the schema's Tm rule: a core that breaks
    # it never reaches the compiler.
    with pytest.raises(ConfigError, match=r"cores\[0\].*\.tm: Tm must be a multiple of 16"):
        load_accelerator(small_accelerator(tmp_path, B=4, tn=4, tm=8))


def _net(layers: str, shape: str = "{channels: 8, depth: 4, height: 8, width: 8}",
         classes: int = 16) -> str:
    return (f"name: probe\ninput: {shape}\nclasses: {classes}\nblock_size: %(B)d\n"
            f"layers:\n{layers}")


def _geometry(acc):
    from fcircnn.arch.geometry import engine_geometry

    return [engine_geometry(acc, core) for core in acc.cores]


# Hardware built for a 1x1x2 conv with stride (1, 2, 2), a 1x1x1 conv and a padded (2,2,2) pool
# (a pool pass) of a 4x4x4 map: geometry kernel 1x1x2, stride 1x2x2, 2 taps, CMaxPool 4x4x4, no
# residual buffer, no fused pool (so the probe's fusable pool runs as a pool pass there). (A
# 1x1x1 conv with stride 2 would need no stride room: it reads a subsampled input.)
_HW_LAYERS = ("  - {name: h1, type: conv, out_channels: 16, kernel: [1, 1, 2], "
              "stride: [1, 2, 2]}\n"
              "  - {name: h2, type: conv, out_channels: 16, kernel: 1,"
              " pool: {window: 2, padding: 1}}\n")


@pytest.mark.parametrize("layers, match", [
    ("  - {name: big, type: conv, out_channels: 16, kernel: 3, padding: 1}\n",
     (r"layer 'big': input tile 4x6x6 \(kernel 3x3x3\) does not fit core 'main''s input "
     r"buffer 2x7x8")),
    # 1x3x3 fits the tile (the stride-2 room) but has 9 taps.
    ("  - {name: wide, type: conv, out_channels: 16, kernel: [1, 3, 3], padding: [0, 1, 1]}\n",
     r"layer 'wide': kernel of 9 taps does not fit core 'main''s weight buffer \(2 taps\)"),
    ("  - {name: s2, type: conv, out_channels: 16, kernel: [1, 1, 2], stride: 2}\n",
     (r"layer 's2': stride 2x2x2 exceeds core 'main''s input buffer, built for strides up to "
     r"1x2x2")),
    (("  - {name: a, type: conv, out_channels: 16, kernel: 1}\n"
     "  - {name: b, type: conv, out_channels: 16, kernel: 1, residual: a}\n"),
     r"layer 'b': has a residual input, core 'main' was built without a residual buffer"),
    ("  - {name: p, type: conv, out_channels: 16, kernel: 1, pool: {window: 2}}\n",
     (r"layer 'p': pooled map 4x8x8 exceeds core 'main''s CMaxPool, built for maps up to "
     r"4x4x4")),
    # 64 input channels and two taps: accumulators past the CBN multiply's width of h1/h2.
    (("  - {name: a, type: conv, out_channels: 64, kernel: 1}\n"
      "  - {name: deep, type: conv, out_channels: 16, kernel: [1, 1, 2]}\n"),
     (r"layer 'deep': accumulators up to 516128 need 20 bits, core 'main''s post chain was "
      r"built for \d+-bit accumulators")),
])
def test_buffer_limits_of_hardware_built_for_another_network(tmp_path, small_accelerator,
                                                             layers, match):
    """An image for hardware built for another network (``geometry``) is checked against that
    hardware's buffers (kernel too large for them, ...), not against its own network's needs."""
    hw = load_accelerator(small_accelerator(tmp_path / "hw", net=_net(_HW_LAYERS)))
    geometry = _geometry(hw)
    other_path = small_accelerator(tmp_path / "net", net=_net(layers))
    # as written (a folded 'big' would be a 1x3x3 kernel: a taps error, as 'wide')
    other_path.write_text(other_path.read_text() + "fold_input_taps: false\n")
    other = load_accelerator(other_path)
    plan_network(other)  # fits hardware built for itself
    with pytest.raises(CompileError, match=match):
        plan_network(other, geometry=geometry)
    with pytest.raises(CompileError, match=match):
        compile_network(other, geometry=geometry)


def test_covering_geometry_runs_both_networks(tmp_path, small_accelerator, acc):
    from fcircnn.arch.geometry import EngineGeometry

    hw = load_accelerator(small_accelerator(tmp_path, net=_net(_HW_LAYERS)))
    both = [EngineGeometry.covering(a, b) for a, b in zip(_geometry(acc), _geometry(hw),
                                                           strict=True)]
    bits = max(a.acc_bits for a in _geometry(acc) + _geometry(hw))
    assert both[0] == EngineGeometry((3, 3, 3), (1, 2, 2), 27, (4, 8, 8), True, acc_bits=bits)
    image = compile_network(hw, geometry=both, seed=1)
    assert image.expected.keys() == {"h1", "h2"}
    plan_network(acc, geometry=both)
    with pytest.raises(TypeError, match="EngineGeometry"):
        EngineGeometry.covering()


@pytest.mark.parametrize("shape, match", [
    ("{channels: 8, depth: 1, height: 65, width: 2}",
     (r"layer 'gap': gap kernel \(its whole input map\) 1x65x2 / stride 1x1x1 exceeds the input "
     r"buffer's limit of 64 per axis")),
    ("{channels: 8, depth: 2, height: 48, width: 48}",
     (r"layer 'gap': gap kernel \(its whole input map\) 2x48x48 has 4608 taps, more than the "
     r"weight buffer's limit of 4096")),
])
def test_absolute_buffer_limits(tmp_path, small_accelerator, shape, match):
    acc = load_accelerator(small_accelerator(tmp_path, net=_net(
        "  - {name: gap, type: gap}\n", shape=shape, classes=8)))
    with pytest.raises(CompileError, match=match):
        plan_network(acc)


def test_bad_geometry_argument(acc):
    with pytest.raises(CompileError, match=r"geometry must be one EngineGeometry per core \(1\)"):
        plan_network(acc, geometry=[])


def test_post_parameter_overflow(acc):
    w = random_weights(acc.network, 0)
    w.layers["c2"].bn_gain = np.ones((2, 8))
    w.layers["c2"].bn_offset = np.full((2, 8), -1e15)  # CReLU zeroes c2: bias needs > int48
    with pytest.raises(CompileError, match=r"layer 'c2': post parameters.*int16/int48"):
        compile_network(acc, weights=w)


@pytest.mark.parametrize("base, match", [
    (0x800, "base must be a non-negative multiple of 4096"),
    (-4096, "base must be a non-negative multiple of 4096"),
    ((1 << 32) - 4096, r"passes the 32-bit address space"),
])
def test_base_and_address_range(acc, base, match):
    with pytest.raises(CompileError, match=match):
        plan_network(acc, base=base)


def test_wrong_input_shape(acc):
    with pytest.raises(CompileError, match="input has shape"):
        compile_network(acc, x=np.zeros((3, 4, 8, 9)))


# --------------------------------------------------------------------------------------------
# Fused pools


@pytest.mark.parametrize("pool, shape, fuses", [
    ("{window: 2}", "{channels: 8, depth: 4, height: 8, width: 8}", True),
    ("{window: [1, 2, 2]}", "{channels: 8, depth: 3, height: 8, width: 8}", True),
    ("{window: [1, 2, 2]}", "{channels: 8, depth: 3, height: 6, width: 8}", True),  # edge 2
    ("{window: 2}", "{channels: 8, depth: 3, height: 8, width: 8}", False),  # odd depth
    ("{window: [1, 2, 2]}", "{channels: 8, depth: 4, height: 8, width: 10}", True),
    ("{window: [1, 2, 2]}", "{channels: 8, depth: 4, height: 8, width: 9}", False),  # odd
    ("{window: 2, padding: [0, 1, 1]}", "{channels: 8, depth: 4, height: 8, width: 8}", False),
    ("{window: 3, stride: 2, padding: 1}", "{channels: 8, depth: 4, height: 8, width: 8}",
     True),  # carried
    ("{window: 3, stride: 2, padding: 1}", "{channels: 8, depth: 4, height: 6, width: 10}",
     True),  # carried, edge tiles of 2
    ("{window: 3, stride: 2, padding: 1}", "{channels: 8, depth: 4, height: 8, width: 9}",
     False),  # odd
    ("{window: [2, 3, 3], stride: 2, padding: [0, 1, 1]}",
     "{channels: 8, depth: 4, height: 8, width: 8}", True),
    ("{window: [1, 3, 3], stride: [1, 2, 2], padding: [0, 1, 1]}",
     "{channels: 8, depth: 4, height: 8, width: 8}", False),  # a carried pool halves all axes
    ("{window: 2, stride: 1}", "{channels: 8, depth: 4, height: 8, width: 8}", False),
    ("{window: 3}", "{channels: 8, depth: 6, height: 6, width: 6}", False),  # window 3
])
def test_which_pools_fuse(tmp_path, small_accelerator, pool, shape, fuses):
    """Fused (one descriptor with FLAG_POOL) exactly when window = stride, 1 or 2, no
    padding, or stride 2 on every axis with window 2 or window 3 and padding 1 (carried), and
    even map and tiles (Td = 2, Tr = Tc = 4) on the axes with stride 2; else a conv
    descriptor and a pool pass. Both are bit-exact with the golden model from the image
    alone."""
    net = _net(f"  - {{name: p, type: conv, out_channels: 16, kernel: 1, pool: {pool}}}\n",
               shape)
    acc = load_accelerator(small_accelerator(tmp_path, net=net))
    image = compile_network(acc, seed=4)
    lp = image.plan.layers[0]
    assert pool_fuses(lp.layer, lp.core) == fuses
    if fuses:
        (d,) = lp.descriptors
        assert d.op == OP_CONV and d.flags & FLAG_POOL and d.out_shape == lp.layer.out_shape
        pool = lp.layer.pool
        assert (d.pool_window, d.pool_stride, d.pool_padding) == (pool.window, pool.stride,
                                                                   pool.padding)
        assert not any(r.name == "p.conv" for r in image.plan.regions)
    else:
        conv, pool_pass = lp.descriptors
        assert conv.op == OP_CONV and not conv.flags & FLAG_POOL
        assert pool_pass.op == OP_POOL and conv.out_base == image.region("p.conv").base
    outputs = _execute(image.data, image.base, image.desc_ptr, acc)
    for layer in acc.network.resolved:
        for c in (0, 1):
            np.testing.assert_array_equal(outputs[layer.index][c], image.expected[layer.name][c])


def test_fused_pool_descriptor_walks_the_pooled_map():
    """The best C3D core fuses pool1-pool4 (pool5 has padding): the output fields describe
    the pooled map, a tile step moves tile / window pooled voxels. conv1a also folds pairs of
    output depths: its fields describe half the depth, its strides the stored map's."""
    acc = load_accelerator(builtin_path("c3d_zcu102_best"))
    plan = plan_network(acc)
    by_name = {lp.layer.name: lp for lp in plan.layers}
    assert [lp.layer.name for lp in plan.layers if lp.depths > 1] == ["conv1a"]
    for name in ("conv1a", "conv2a", "conv3b", "conv4b"):
        lp = by_name[name]
        (d,) = lp.descriptors
        D, H, W = lp.layer.out_shape
        k = lp.depths
        window = lp.layer.pool.window
        assert d.flags & FLAG_POOL and d.out_shape == (D // k, H, W)
        assert d.stored_output == (lp.layer.padded_out_channels // 2, (D, H, W))
        assert bool(d.flags & FLAG_DFOLD) == (k > 1)
        assert d.out_base == plan.region(f"{name}.output").base
        assert d.out_stride == (D * H * W * 16, k * H * W * 16, W * 16)
        axis = (k * H * W * 16, W * 16, 16)
        assert d.out_step == tuple(t // k * b for t, k, b in zip(d.tile, window, axis,
                                                                 strict=True))
        assert d.out_mt_step == acc.cores[0].tm // 16 * d.out_stride[0]
    conv, pool_pass = by_name["conv5b"].descriptors
    assert not conv.flags & FLAG_POOL and pool_pass.op == OP_POOL
    assert pool_fuses(by_name["conv5b"].layer, by_name["conv5b"].core) is False


def test_an_fc_input_read_as_a_map_reproduces_the_golden_contract(tmp_path):
    """fc2 of the FC test network (512 channels on 1x1x1, beside fc1's 2x4x4 kernel) runs as
    a 1x4x4 map of 32 channels: its descriptor reads fc1's output region as that map and its
    weight image holds 16-tap tiles; decoded from the bytes alone, every layer equals the
    golden integer contract (the permuted weight blocks meet the re-read input exactly)."""
    from conftest import write_fc_accelerator

    acc = load_accelerator(write_fc_accelerator(tmp_path))
    img = compile_network(acc, seed=4, base=0x10000)
    by_name = {lp.layer.name: lp for lp in img.plan.layers}
    assert [n for n, lp in by_name.items() if lp.folded] == ["fc2"]
    d = by_name["fc2"].descriptor
    assert (d.in_slots, d.in_shape, d.kernel) == (16, (1, 4, 4), (1, 4, 4))
    assert d.in_base == img.plan.region("fc1.output").base
    assert d.weight_tile_bytes == 16 * 4 * 4 * 4 * 2  # 16 taps, 4x4 blocks, 4 slots, re/im
    assert by_name["fc3"].descriptor.kernel == (1, 1, 1)
    outputs = _execute(img.data, img.base, img.desc_ptr, acc)
    for layer in acc.network.resolved:
        for c in (0, 1):
            np.testing.assert_array_equal(outputs[layer.index][c],
                                          img.expected[layer.name][c], layer.name)


def test_folded_row_copies_reproduce_the_golden_contract(tmp_path, small_accelerator):
    """With ``B = 4`` on a ``Tn = Tm = 32`` core c1 folds pairs of output depths and two row
    copies of its four depth copies (C3D conv1a on ``Tn = 64``, in small): 32 input channels of
    9 rows, a 1x2x3 kernel without row padding; decoded from the bytes alone every layer equals
    the golden integer contract, and the input region holds the eight shifted copies."""
    acc = load_accelerator(small_accelerator(tmp_path, B=4, tn=32, tm=32))
    img = compile_network(acc, seed=6, base=0x10000)
    first = img.plan.layers[0]
    d = first.descriptor
    assert (first.depths, first.rows) == (2, 2) and d.flags & FLAG_DFOLD
    assert (d.in_slots, d.in_shape, d.kernel, d.padding) == (16, (2, 9, 8), (1, 2, 3), (0, 0, 1))
    assert all(lp.rows == 1 for lp in img.plan.layers[1:])
    _check_golden(img, acc)
    re, im = img.input_parts
    copies = fold_input_slots(re.astype(np.int64), im.astype(np.int64), first.layer, 2, 2)
    assert img.read(img.region("input").base, img.region("input").size) == pack_ncdhw8(*copies)


def test_folded_output_depths_reproduce_the_golden_contract(tmp_path, small_accelerator):
    """On a ``Tn = Tm = 32`` core the small network's c1 (3 -> 16 channels) folds its depth
    taps and pairs of output depths: its descriptor computes 32 channels at half the depth
    (``FLAG_DFOLD``), reads 4 depth-shifted copies of the input at twice the depth stride and
    writes the network's map back (two depths per tile); decoded from the bytes alone, every
    layer equals the golden integer contract, and the image holds the copies."""
    acc = load_accelerator(small_accelerator(tmp_path, tn=32, tm=32))
    img = compile_network(acc, seed=5, base=0x10000)
    first = img.plan.layers[0]
    d = first.descriptor
    assert first.depths == 2 and d.flags & FLAG_DFOLD
    assert [lp.depths for lp in img.plan.layers[1:]] == [1] * (len(img.plan.layers) - 1)
    assert (d.in_slots, d.in_shape, d.kernel) == (16, (2, 8, 8), (1, 3, 3))
    assert (d.out_slots, d.out_shape, d.stored_output) == (16, (2, 8, 8), (8, (4, 8, 8)))
    plane = 8 * 8 * 16
    assert d.out_stride == (4 * plane, 2 * plane, 8 * 16)
    assert img.plan.region("c1.output").size == ncdhw8_size(8, 4, 8, 8)
    outputs = _execute(img.data, img.base, img.desc_ptr, acc)
    for layer in acc.network.resolved:
        for c in (0, 1):
            np.testing.assert_array_equal(outputs[layer.index][c],
                                          img.expected[layer.name][c], layer.name)
    re, im = img.input_parts
    copies = fold_input_slots(re.astype(np.int64), im.astype(np.int64), first.layer, 2)
    assert copies[0].shape == (16, 2, 8, 8)
    assert img.read(img.region("input").base, img.region("input").size) == \
        pack_ncdhw8(*copies)
    # the host reads the network's map back
    out = CompiledImage.from_ddr_image(img).output("c1")
    assert (out.slots, out.shape, out.addr) == (8, (4, 8, 8), d.out_base)


# --------------------------------------------------------------------------------------------
# Full size


@pytest.mark.parametrize("name, layers", [("c3d_zcu102", 11), ("r3d18_zcu102", 22)])
def test_full_size_plan(name, layers):
    acc = load_accelerator(builtin_path(name))
    start = time.perf_counter()
    plan = plan_network(acc, base=0x4000_0000)
    assert time.perf_counter() - start < 5
    passes = sum(lp.layer.pool is not None and not pool_fuses(lp.layer, lp.core)
                 for lp in plan.layers)
    assert len(plan.layers) == layers and len(plan.descriptors) == layers + passes
    assert plan.end <= 1 << acc.address_width
    B = acc.block_size
    # conv1a / conv1: 3 channels on Tn = 32; fc7 and fc8: 4,096 channels on 1x1x1 read as
    # 1x4x4 maps beside fc6's 1x4x4 kernel
    folded = {"c3d_zcu102": {"conv1a", "fc7", "fc8"}, "r3d18_zcu102": {"conv1"}}[name]
    for lp in plan.layers:
        layer, d = lp.layer, lp.descriptor
        core = lp.core
        taps = lp.engine_layer.kernel_volume
        assert lp.folded == (layer.name in folded), layer.name
        expect = d.m_tiles * d.n_tiles * taps * (core.tm // B) * (core.tn // B) * B
        assert d.weight_bytes == plan.region(f"{layer.name}.weights").size == expect
        assert plan.region(f"{layer.name}.output").size == ncdhw8_size(d.out_slots,
                                                                       *layer.out_shape)
    if name == "r3d18_zcu102":
        cores = {lp.layer.name: lp.core.name for lp in plan.layers}
        assert cores["l2b1_down"] == "pointwise" and cores["conv1"] == "spatial"


def test_full_size_c3d_compile():
    acc = load_accelerator(builtin_path("c3d_zcu102"))
    img = compile_network(acc)  # about 8 s
    assert len(img.data) == img.plan.end - img.plan.base
    assert len(img.plan.layers) == 11 and set(img.expected) == {
        layer.name for layer in acc.network.resolved}
    for lp in img.plan.layers:
        d, layer = lp.descriptor, lp.layer
        assert img.expected[layer.name][0].shape == (d.out_slots, *layer.out_shape)
        assert img.read(d.weight_base, d.weight_bytes).strip(b"\0")  # weights written
    regions = sorted(img.regions, key=lambda r: r.base)
    assert all(a.end <= b.base for a, b in itertools.pairwise(regions))
    assert all(r.base % ALIGN == 0 for r in regions)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["c3d_zcu102", "r3d18_zcu102"])
def test_full_size_image_alone_reproduces_the_golden_integer_contract(name):
    acc = load_accelerator(builtin_path(name))
    img = compile_network(acc, base=0x1000_0000)
    outputs = _execute(img.data, img.base, img.desc_ptr, acc)
    for layer in acc.network.resolved:
        for c in (0, 1):
            np.testing.assert_array_equal(outputs[layer.index][c],
                                          img.expected[layer.name][c], layer.name)


# --------------------------------------------------------------------------------------------
# Feature maps laid out by liveness


@dataclass(frozen=True)
class _Fill:
    """A map-byte filler: every map byte the input does not hold, for a reused image."""

    value: int

    def __call__(self, img):
        mem = bytearray(img.data)
        held = img.region("input")
        for r in img.regions:
            if r.live is not None and r.name != "input":
                for a in range(r.base, r.end, ALIGN):
                    lo, hi = max(a, r.base), min(a + ALIGN, r.end)
                    if hi <= held.base or held.end <= lo:
                        mem[lo - img.base:hi - img.base] = bytes([self.value]) * (hi - lo)
        return bytes(mem)


def test_maps_reused_by_liveness_give_the_same_outputs():
    """The kinds network (residual blocks, pool passes, two cores): the reused image, its map
    bytes filled with junk first, reproduces every layer of the separate image bit for bit,
    and is smaller."""
    acc = load_accelerator(Path(__file__).parents[1] / "hw" / "configs" / "two_core.yaml")
    plain = compile_network(acc, seed=3, base=0x10000)
    img = compile_network(acc, seed=3, base=0x10000, reuse_maps=True)
    assert img.plan.reuse_maps and not plain.plan.reuse_maps
    assert plain.plan.map_bytes_separate == img.plan.map_bytes_separate
    assert img.plan.map_bytes_reused == plain.plan.map_bytes_reused
    assert img.plan.map_bytes_reused < img.plan.map_bytes_separate
    assert len(img.data) == len(plain.data) - (img.plan.map_bytes_separate
                                               - img.plan.map_bytes_reused)
    maps = [r for r in img.regions if r.live is not None]
    assert any(a.base < b.end and b.base < a.end
               for a, b in itertools.combinations(maps, 2)), "no map reused"
    _never_shared_while_live(maps)
    for fill in (0x00, 0x5A, 0xFF):
        outputs = _execute(_Fill(fill)(img), img.base, img.desc_ptr, acc, zeroed=False)
        for layer in acc.network.resolved:
            for c in (0, 1):
                np.testing.assert_array_equal(outputs[layer.index][c],
                                              plain.expected[layer.name][c], layer.name)
    # The host sees which outputs stay after the run: the last layer's always.
    host = CompiledImage.from_ddr_image(img)
    last = host.layer_names()[-1]
    assert host.survives(last)
    gone = [n for n in host.layer_names() if not host.survives(n)]
    assert gone and all(CompiledImage.from_ddr_image(plain).survives(n) for n in gone)


def test_a_time_domain_network_keeps_the_maps_its_domain_steps_alias():
    """The rfft runs inside conv1 and the irfft is deferred to its reader: the map a step
    names is its pass's, live until the step's reader has run (the compiler's self-check of
    every descriptor's maps against their live ranges passes, and the maps do share)."""
    acc = load_accelerator(Path(__file__).parents[1] / "hw" / "configs" / "time_domain_acc.yaml")
    img = compile_network(acc, seed=3, reuse_maps=True)
    net = acc.network
    assert any(layer.transform for layer in net.resolved)
    starts = {}
    for k, lp in enumerate(img.plan.layers):
        starts.setdefault(lp.layer.name, sum(len(x.descriptors) for x in img.plan.layers[:k]))
    for lp in img.plan.layers:
        region = next(r for r in img.regions
                      if r.live and r.base <= lp.descriptor.in_base < r.end
                      and r.live[0] <= starts[lp.layer.name] <= r.live[1])
        assert region.live[1] >= starts[lp.layer.name]
    assert img.plan.map_bytes_reused < img.plan.map_bytes_separate


def _round(size):
    return -(-max(size, 1) // ALIGN) * ALIGN


def _never_shared_while_live(maps):
    """No two map regions live in one descriptor share a byte (of their whole pages)."""
    for a, b in itertools.combinations(maps, 2):
        if a.live[0] <= b.live[1] and b.live[0] <= a.live[1]:
            assert a.base + _round(a.size) <= b.base or b.base + _round(b.size) <= a.base, (a, b)


def test_maps_live_together_never_share_bytes_in_the_shipped_networks():
    """c3d, r3d18 and spectral_c3d: the reused layout is as small as the bytes live at once
    allow (the busiest descriptor's maps), and its regions pass the host's checks."""
    for name in ("c3d_zcu102", "r3d18_zcu102", "spectral_c3d_zcu102"):
        plan = plan_network(load_accelerator(builtin_path(name)), reuse_maps=True)
        maps = [r for r in plan.regions if r.live is not None]
        _never_shared_while_live(maps)
        busiest = max(sum(_round(r.size) for r in maps if r.live[0] <= t <= r.live[1])
                      for t in range(len(plan.descriptors)))
        assert busiest <= plan.map_bytes_reused <= 1.25 * busiest, name
        assert plan.map_bytes_reused < plan.map_bytes_separate, name


# --------------------------------------------------------------------------------------------
# CLI


def test_cli_compile_writes_files(tmp_path, acc_path, capsys):
    out = tmp_path / "build"
    assert main(["compile", str(acc_path), "-o", str(out), "--seed", "3",
                 "--base", "0x10000"]) == 0
    text = capsys.readouterr().out
    assert "c2.output" in text and "DESC_PTR" in text
    for f in ("image.bin", "memory_map.json", "expected.npz"):
        assert (out / f).is_file()
    assert json.loads((out / "memory_map.json").read_text())["base"] == 0x10000


def test_cli_compile_reports_the_maps_both_ways(tmp_path, acc_path, capsys):
    """The text gives the maps' bytes each its own and by liveness; with --reuse-maps the
    JSON memory map has each map's live range, and the image is smaller by the difference."""
    sizes = {}
    for reuse in (False, True):
        out = tmp_path / f"reuse{reuse}"
        assert main(["compile", str(acc_path), "-o", str(out), "-q",
                     *(["--reuse-maps"] if reuse else [])]) == 0
        text = capsys.readouterr().out
        mm = json.loads((out / "memory_map.json").read_text())
        separate, reused = mm["maps"]["bytes_separate"], mm["maps"]["bytes_reused"]
        assert mm["maps"]["reused"] == reuse and reused < separate
        assert (f"feature maps: {reused:,} bytes, reused by liveness" if reuse else
                f"feature maps: {separate:,} bytes, each its own ({reused:,} with "
                "--reuse-maps") in text
        lives = [r.get("live") for r in mm["regions"] if r["kind"] in ("input", "conv",
                                                                       "output")]
        assert all(lives) if reuse else not any(lives)
        sizes[reuse] = mm["size"]
    assert sizes[False] - sizes[True] == separate - reused


def test_cli_compile_with_weights_and_input(tmp_path, acc, acc_path):
    w = tmp_path / "w.npz"
    random_weights(acc.network, 1).save(str(w))
    x = tmp_path / "x.npy"
    np.save(x, np.ones((3, 4, 8, 8)))
    assert main(["compile", str(acc_path), "-o", str(tmp_path / "o"), "--weights", str(w),
                 "--input", str(x), "--granularity", "bin"]) == 0


@pytest.mark.parametrize("extra, message", [
    (["--base", "0x801"], "multiple of 4096"),
    (["--base", "zz"], "--base"),
    (["--input", "missing.npy"], "--input"),
    (["--weights", "missing.npz"], "--weights"),
])
def test_cli_compile_bad_input_exits_2(tmp_path, acc_path, extra, message):
    proc = subprocess.run([sys.executable, "-m", "fcircnn.cli", "compile", str(acc_path),
                           "-o", str(tmp_path / "o"), *extra],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr


def test_cli_compile_bad_config_exits_2(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\n")
    assert main(["compile", str(bad), "-o", str(tmp_path / "o")]) == 2
    proc = subprocess.run([sys.executable, "-m", "fcircnn.cli", "compile", "--help"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "--granularity" in proc.stdout


@pytest.mark.parametrize("stride, shape", [
    ((2, 2, 2), "{channels: 16, depth: 4, height: 8, width: 8}"),
    ((2, 2, 2), "{channels: 16, depth: 3, height: 7, width: 7}"),  # odd: the last plane/row used
    ((1, 2, 1), "{channels: 16, depth: 4, height: 6, width: 5}"),
])
def test_strided_pointwise_conv_reads_a_subsampled_input(tmp_path, small_accelerator, stride,
                                                         shape):
    """A 1x1x1 conv with a depth or row stride (ResNet-18's shortcuts) reads only the planes and
    rows it uses: its descriptor has the input's plane and row strides multiplied by the
    stride, the subsampled depth and height and stride ``(1, 1, sc)``; decoded from the bytes
    alone (row by row at those strides) every layer equals the golden integer contract."""
    net = _net("  - {name: a, type: conv, out_channels: 16, kernel: 3, padding: 1}\n"
               f"  - {{name: s, type: conv, out_channels: 32, kernel: 1, "
               f"stride: {list(stride)}}}\n",
               shape, classes=32)
    acc = load_accelerator(small_accelerator(tmp_path, net=net))
    image = compile_network(acc, seed=6)
    a, s = acc.network.resolved
    d = image.plan.layers[1].descriptor
    D, H, W = a.out_shape
    plane, row = H * W * 16, W * 16
    assert d.in_stride == (D * plane, stride[0] * plane, stride[1] * row)
    assert d.in_shape == (-(-D // stride[0]), -(-H // stride[1]), W)
    assert d.stride == (1, 1, stride[2]) and d.conv_shape == s.conv_shape
    assert not image.plan.layers[1].folded
    outputs = _execute(image.data, image.base, image.desc_ptr, acc)
    for layer in acc.network.resolved:
        for c in (0, 1):
            np.testing.assert_array_equal(outputs[layer.index][c], image.expected[layer.name][c])


def test_trimmed_kernels_reproduce_the_golden_contract(tmp_path, small_accelerator):
    """Convs on a map one voxel deep (ResNet-18's stage 4) run with the taps that read it: the
    descriptor carries the trimmed kernel and padding, the weight image only the kept taps'
    slice; decoded from the bytes alone every layer equals the golden integer contract."""
    net = _net("  - {name: a, type: conv, out_channels: 16, kernel: 3, stride: 2, padding: 1}\n"
               "  - {name: b, type: conv, out_channels: 16, kernel: 3, padding: 1,"
               " residual: a}\n",
               "{channels: 16, depth: 2, height: 2, width: 8}", classes=16)
    acc = load_accelerator(small_accelerator(tmp_path, net=net))
    image = compile_network(acc, seed=8)
    a, b = image.plan.layers
    assert (a.descriptor.kernel, a.descriptor.padding) == ((2, 2, 3), (0, 0, 1))
    assert (b.descriptor.kernel, b.descriptor.padding) == ((1, 1, 3), (0, 0, 1))
    assert a.trimmed and b.trimmed and not a.folded
    taps = [math.prod(lp.descriptor.kernel) for lp in (a, b)]
    assert [lp.descriptor.weight_bytes for lp in (a, b)] == [
        CoreGeometry.of(acc.cores[0], 8).weight_tile_beats(t) * 16 for t in taps]
    outputs = _execute(image.data, image.base, image.desc_ptr, acc)
    for layer in acc.network.resolved:
        for c in (0, 1):
            np.testing.assert_array_equal(outputs[layer.index][c], image.expected[layer.name][c])


@pytest.mark.parametrize("name", ["c3d_zcu102_best", "r3d18_zcu102_best", "spectral_c3d_zcu102",
                                  "two_core"])
def test_what_the_engine_writes_is_one_window_after_what_it_only_reads(name):
    """The write window (NetworkPlan.windows) holds the cycle entries and every map and no
    descriptor, weight or post table; every region lies in the read window; the driver's view
    of the image (CompiledImage.windows, from its descriptors) is the same."""
    path = (builtin_path(name) if name != "two_core"
            else Path(__file__).parents[1] / "hw" / "configs" / "two_core.yaml")
    plan = plan_network(load_accelerator(path))
    (rd_lo, rd_hi), (wr_lo, wr_hi) = plan.windows
    assert (rd_lo, rd_hi) == (plan.base, plan.end - 1) and wr_hi == rd_hi
    for r in plan.regions:
        assert rd_lo <= r.base and r.base + r.size - 1 <= rd_hi, r.name
        writable = r.kind in ("cycles", "input", "conv", "output")
        assert (r.base >= wr_lo) == writable, (r.name, r.kind)
    for d in plan.descriptors:
        for addr in (d.out_base, d.cycles_addr):
            assert wr_lo <= addr <= wr_hi
    assert wr_lo % 4096 == 0 and wr_lo == plan.region("cycles").base


def test_the_drivers_windows_are_the_plans(image):
    assert CompiledImage.from_ddr_image(image).windows == image.plan.windows
