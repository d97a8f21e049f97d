"""Compiled images for the host (:mod:`fcircnn.runtime.image`): round trip through the files
``DdrImage.save`` writes, decoding of outputs and cycles entries, and clear errors for missing
or corrupt files."""

from __future__ import annotations

import dataclasses
import json
import shutil

import numpy as np
import pytest

from fcircnn.gen.compiler import compile_network
from fcircnn.models.config import load_accelerator
from fcircnn.models.layout import pack_ncdhw8
from fcircnn.runtime.image import (
    CompiledImage,
    CycleEntry,
    DescriptorInfo,
    ImageError,
    RegionInfo,
)

NET = """
name: tiny
input: {channels: 3, depth: 2, height: 4, width: 4}
classes: 4
block_size: 8
layers:
  - {name: c1, type: conv, out_channels: 16, kernel: 3, padding: 1, cbn: true, crelu: true,
     pool: {window: 2}}
  - {name: gap, type: gap}
  - {name: fc, type: fc, out_channels: 4}
"""

ACC = """
name: tiny_acc
network: net.yaml
device:
  part: xczu9eg-ffvb1156-2-e
  resources: {dsp: 2520, bram36: 912, lut: 274080, ff: 548160}
clock_mhz: 200
block_size: 8
address_width: 32
cores:
  - {name: main, tn: 16, tm: 16, td: 2, tr: 4, tc: 4, unroll: [tn, tm], max_kernel: [3, 3, 3]}
"""


@pytest.fixture(scope="module")
def ddr(tmp_path_factory):
    folder = tmp_path_factory.mktemp("acc")
    (folder / "net.yaml").write_text(NET)
    (folder / "acc.yaml").write_text(ACC)
    return compile_network(load_accelerator(folder / "acc.yaml"), seed=1, base=0x10000)


@pytest.fixture(scope="module")
def saved(ddr, tmp_path_factory):
    out = tmp_path_factory.mktemp("image")
    ddr.save(out)
    return out


def _check_same(a: CompiledImage, b: CompiledImage) -> None:
    assert a.data == b.data and a.base == b.base and a.desc_ptr == b.desc_ptr
    assert a.descriptors == b.descriptors
    assert a.layer_names() == b.layer_names()
    for name in a.layer_names():
        for pa, pb in zip(a.expected[name], b.expected[name], strict=True):
            assert pa.dtype == pb.dtype == np.int8
            np.testing.assert_array_equal(pa, pb)


def test_round_trip_through_the_saved_files(ddr, saved):
    mem = CompiledImage.from_ddr_image(ddr)
    disk = CompiledImage.load(saved)
    _check_same(mem, disk)
    assert disk.network == "tiny" and disk.accelerator == "tiny_acc"
    np.testing.assert_array_equal(disk.input_parts[0], ddr.input_parts[0])
    assert disk.layer_names() == ["c1", "gap", "fc"]
    for info, d in zip(disk.descriptors, ddr.descriptors, strict=True):
        assert (info.layer, info.out_base, info.out_slots, info.out_shape, info.cycles_addr) == (
            d.layer, d.out_base, d.out_slots, d.out_shape, d.cycles_addr)
    assert disk.base == 0x10000 and disk.end == ddr.plan.end
    assert disk.desc_ptr == ddr.desc_ptr


def test_decode_output_from_a_snapshot_and_a_reader(ddr):
    img = CompiledImage.from_ddr_image(ddr)
    mem = bytearray(img.data)
    for name in img.layer_names():
        out = img.output(name)
        re, im = img.expected[name]
        mem[out.addr - img.base:out.addr - img.base + out.size] = pack_ncdhw8(re, im)
    for name in img.layer_names():
        re, im = img.decode_output(bytes(mem), name)
        np.testing.assert_array_equal(re, img.expected[name][0])
        np.testing.assert_array_equal(im, img.expected[name][1])
        re2, _ = img.decode_output(lambda a, n: bytes(mem[a - img.base:a - img.base + n]), name)
        np.testing.assert_array_equal(re2, re)
        # the image as compiled holds zero outputs
        assert not img.decode_output(img.data, name)[0].any()
    with pytest.raises(ImageError, match="does not reach"):
        img.decode_output(bytes(16), "fc")
    with pytest.raises(KeyError, match="no layer 'nope'"):
        img.output("nope")


def test_cycles_entry():
    raw = (0x1_0000_0002).to_bytes(8, "little") + (7).to_bytes(4, "little") + (9).to_bytes(
        4, "little")
    entry = CompiledImage.decode_cycles(raw)
    assert entry == CycleEntry(0x1_0000_0002, 7, 9) and entry.finished
    assert CompiledImage.encode_cycles(entry) == raw
    assert not CompiledImage.decode_cycles(bytes(16)).finished
    with pytest.raises(ImageError, match="16 bytes, not 8"):
        CompiledImage.decode_cycles(bytes(8))


def test_a_layer_with_two_descriptors(ddr):
    """Output of a layer = its last descriptor's map; names listed once, in order."""
    img = CompiledImage.from_ddr_image(ddr)
    for name in img.layer_names():
        assert img.output(name).addr == img.layer_descriptors(name)[-1].out_base
    fc = img.layer_descriptors("fc")[-1]
    other = img.layer_descriptors("gap")[-1]
    second = DescriptorInfo("fc", fc.layer, 0, 0, other.out_base, 4, (1, 1, 2), fc.cycles_addr)
    expected = {**img.expected, "fc": (np.ones((4, 1, 1, 2), np.int8),) * 2}
    two = CompiledImage(img.data, img.base, img.desc_ptr, (*img.descriptors, second), expected)
    assert two.layer_names() == img.layer_names()
    assert two.output("fc").addr == other.out_base and two.output("fc").shape == (1, 1, 2)
    assert two.layer_descriptors("fc")[-1] == second
    assert len(two.layer_descriptors("fc")) == len(img.layer_descriptors("fc")) + 1
    with pytest.raises(ImageError, match=r"expected fc.re has shape \(4, 1, 1, 1\), the "
                                         r"descriptor says \(4, 1, 1, 2\)"):
        CompiledImage(img.data, img.base, img.desc_ptr, (*img.descriptors, second),
                      img.expected)


def test_inconsistent_images_are_rejected(ddr):
    img = CompiledImage.from_ddr_image(ddr)
    with pytest.raises(ImageError, match="has no expected output"):
        CompiledImage(img.data, img.base, img.desc_ptr, img.descriptors, {})
    with pytest.raises(ImageError, match=r"desc_ptr .* is outside the image"):
        CompiledImage(img.data, img.base, 0, img.descriptors, img.expected)
    with pytest.raises(ImageError, match=r"output map .* is outside the image"):
        CompiledImage(img.data[:0x3000], img.base, img.desc_ptr, img.descriptors, img.expected)
    with pytest.raises(ImageError, match="no descriptors"):
        CompiledImage(img.data, img.base, img.desc_ptr, (), img.expected)


@pytest.fixture
def copy(saved, tmp_path):
    for f in saved.iterdir():
        (tmp_path / f.name).write_bytes(f.read_bytes())
    return tmp_path


@pytest.mark.parametrize("missing", ["image.bin", "memory_map.json", "expected.npz"])
def test_missing_file(copy, missing):
    (copy / missing).unlink()
    with pytest.raises(ImageError, match=f"{missing}: missing"):
        CompiledImage.load(copy)


def test_missing_directory(tmp_path):
    with pytest.raises(ImageError, match="no such directory"):
        CompiledImage.load(tmp_path / "nope")


@pytest.mark.parametrize(("file", "content", "match"), [
    ("memory_map.json", "{not json", r"memory_map.json: not a readable JSON file"),
    ("memory_map.json", "[1, 2]", r"memory_map.json: must hold a JSON object"),
    ("memory_map.json", '{"base": 0, "desc_ptr": 0}', r"memory_map.json: lacks 'descriptors'"),
    ("expected.npz", "garbage", r"expected.npz: not a readable .npz file"),
    ("image.bin", "short", r"image.bin: 5 bytes, memory_map.json says"),
])
def test_corrupt_files(copy, file, content, match):
    (copy / file).write_text(content)
    with pytest.raises(ImageError, match=match):
        CompiledImage.load(copy)


def test_bad_descriptor_entry(copy):
    mm = json.loads((copy / "memory_map.json").read_text())
    del mm["descriptors"][1]["out_base"]
    mm["descriptors"][0]["out_shape"] = [1, 2]
    (copy / "memory_map.json").write_text(json.dumps(mm))
    with pytest.raises(ImageError, match=r"descriptors\[0\].out_shape must be three integers"):
        CompiledImage.load(copy)
    mm["descriptors"][0]["out_shape"] = [1, 2, 2]
    (copy / "memory_map.json").write_text(json.dumps(mm))
    with pytest.raises(ImageError, match=r"descriptors\[1\] lacks out_base"):
        CompiledImage.load(copy)


def test_expected_part_missing(copy):
    with np.load(copy / "expected.npz") as npz:
        arrays = {k: npz[k] for k in npz.files if k != "fc.im"}
    np.savez(copy / "expected.npz", **arrays)
    with pytest.raises(ImageError, match="'fc' lacks its im part"):
        CompiledImage.load(copy)


def test_relocation_moves_every_address_and_nothing_else(tmp_path, small_accelerator):
    from fcircnn.arch.descriptor import DESCRIPTOR_BYTES, FLAG_RESIDUAL, OP_POOL, LayerDescriptor
    from fcircnn.gen.compiler import compile_network
    from fcircnn.models.config import load_accelerator
    from fcircnn.runtime.image import CompiledImage, ImageError

    acc = load_accelerator(small_accelerator(tmp_path))
    image = CompiledImage.from_ddr_image(compile_network(acc, seed=1, base=0x10000))
    moved = image.relocated(0x305000)
    delta = 0x305000 - 0x10000
    assert (moved.base, moved.desc_ptr) == (0x305000, image.desc_ptr + delta)
    changed = set()
    for k in range(len(image.descriptors)):
        at = image.desc_ptr - image.base + k * DESCRIPTOR_BYTES
        a = LayerDescriptor.unpack(image.data[at:at + DESCRIPTOR_BYTES])
        b = LayerDescriptor.unpack(moved.data[at:at + DESCRIPTOR_BYTES])
        addresses = ["in_base", "out_base", "cycles_addr"]
        addresses += ["next_desc"] if a.next_desc else []
        addresses += ["res_base"] if a.flags & FLAG_RESIDUAL else []
        addresses += ["weight_base", "post_base"] if a.op != OP_POOL else []
        for name in addresses:
            assert getattr(b, name) == getattr(a, name) + delta, name
        rest = {f for f in a.__dataclass_fields__ if f not in addresses}
        assert all(getattr(a, f) == getattr(b, f) for f in rest)
        changed.add(at)
    # Outside the descriptors the bytes are the same; outputs and cycles entries moved.
    mask = bytearray(image.data)
    for at in changed:
        mask[at:at + DESCRIPTOR_BYTES] = moved.data[at:at + DESCRIPTOR_BYTES]
    assert bytes(mask) == moved.data
    last = image.layer_names()[-1]
    assert moved.output(last).addr == image.output(last).addr + delta
    assert moved.relocated(0x10000).data == image.data
    with pytest.raises(ImageError, match="multiple of 4096"):
        image.relocated(0x10010)


def _with(img: CompiledImage, **changes) -> CompiledImage:
    """``img`` rebuilt with some of its constructor arguments changed."""
    args = {"data": img.data, "base": img.base, "desc_ptr": img.desc_ptr,
            "descriptors": img.descriptors, "expected": img.expected,
            "regions": img.regions, "address_width": img.address_width}
    return CompiledImage(**(args | changes))


def _region(img: CompiledImage, kind: str) -> RegionInfo:
    return next(r for r in img.regions if r.kind == kind)


def test_the_regions_of_a_compiled_image_hold_together(ddr, saved):
    img = CompiledImage.from_ddr_image(ddr)
    assert {r.kind for r in img.regions} >= {"descriptors", "weights", "post", "cycles",
                                              "input", "output"}
    assert img.address_width == 32 and CompiledImage.load(saved).regions == img.regions
    assert _with(img).regions == img.regions  # a consistent image passes


def test_overlapping_regions_are_refused_naming_both(ddr):
    img = CompiledImage.from_ddr_image(ddr)
    weights = _region(img, "weights")
    grown = tuple(dataclasses.replace(r, size=r.size + 0x1000) if r == weights else r
                  for r in img.regions)
    with pytest.raises(ImageError, match=rf"region '{weights.name}' \(weights\) .* overlaps "
                                         r"region '.*'"):
        _with(img, regions=grown)


@pytest.mark.parametrize(("kind", "into", "match"), [
    ("output", "cycles", (r"output map .* is in region .* \(cycles\) .*, not in a region of kind "
                          r"conv or output$")),
    ("input", "weights", r"region 'input' \(weights\) .* is inside the write window"),
])
def test_a_region_of_the_wrong_kind_is_refused(ddr, kind, into, match):
    """Swap the kinds of two regions: an output map then lies in the cycles region, or weights
    (the input map's region) in the write window."""
    img = CompiledImage.from_ddr_image(ddr)
    a, b = _region(img, kind), _region(img, into)
    swapped = tuple(dataclasses.replace(r, kind=into) if r == a else
                    dataclasses.replace(r, kind=kind) if r == b else r for r in img.regions)
    with pytest.raises(ImageError, match=match):
        _with(img, regions=swapped)


@pytest.mark.parametrize(("field", "value", "match"), [
    ("out_base", 0x10000, r"descriptor 0 \(c1\): out_base is 0x10000 in the image, 0x"),
    ("next_desc", 0, r"descriptor 0 \(c1\): next_desc is 0x0 in the image"),
    ("weight_base", 0x10000, (r"descriptor 0 \(c1\) weight_base \[0x10000, 0x10001\) is in "
                             r"region 'descriptors'")),
    ("in_base", 0x7fff0000, r"descriptor 0 \(c1\) in_base .* is in no region of the image"),
])
def test_a_descriptor_that_is_not_the_memory_map_s_is_refused(ddr, field, value, match):
    from fcircnn.arch.descriptor import DESCRIPTOR_BYTES, LayerDescriptor

    img = CompiledImage.from_ddr_image(ddr)
    at = img.desc_ptr - img.base
    d = LayerDescriptor.unpack(img.data[at:at + DESCRIPTOR_BYTES])
    data = bytearray(img.data)
    data[at:at + DESCRIPTOR_BYTES] = dataclasses.replace(d, **{field: value}).pack()
    with pytest.raises(ImageError, match=match):
        _with(img, data=bytes(data))


def test_an_image_past_the_address_space_is_refused(ddr, copy):
    img = CompiledImage.from_ddr_image(ddr)
    with pytest.raises(ImageError, match=r"passes the 32-bit address space"):
        img.relocated((1 << 32) - 0x1000)
    mm = json.loads((copy / "memory_map.json").read_text())
    mm["address_width"] = 16
    (copy / "memory_map.json").write_text(json.dumps(mm))
    with pytest.raises(ImageError, match=r"passes the 16-bit address space"):
        CompiledImage.load(copy)


def test_a_memory_map_whose_regions_overlap_is_refused_on_load(copy):
    mm = json.loads((copy / "memory_map.json").read_text())
    regions = mm["regions"]
    out = next(r for r in regions if r["kind"] == "output")
    out["base"] = next(r for r in regions if r["kind"] == "descriptors")["base"]
    (copy / "memory_map.json").write_text(json.dumps(mm))
    with pytest.raises(ImageError, match=rf"{copy}: region .* overlaps region"):
        CompiledImage.load(copy)


# ----------------------------------------------------------------------- maps reused by liveness


@pytest.fixture(scope="module")
def reused(tmp_path_factory):
    folder = tmp_path_factory.mktemp("acc_reused")
    (folder / "net.yaml").write_text(NET)
    (folder / "acc.yaml").write_text(ACC)
    img = compile_network(load_accelerator(folder / "acc.yaml"), seed=1, base=0x10000,
                          reuse_maps=True)
    img.save(folder / "image")
    return CompiledImage.from_ddr_image(img), folder / "image"


def _shared(img: CompiledImage) -> tuple[RegionInfo, RegionInfo]:
    """Two maps of ``img`` that share bytes, the earlier-live first."""
    maps = sorted((r for r in img.regions if r.live is not None), key=lambda r: r.live)
    return next((a, b) for i, a in enumerate(maps) for b in maps[i + 1:]
                if a.base < b.end and b.base < a.end)


def test_maps_share_bytes_only_when_their_live_ranges_do_not_meet(reused):
    img, folder = reused
    a, b = _shared(img)
    assert a.live[1] < b.live[0]
    assert CompiledImage.load(folder).regions == img.regions  # "live" round-trips
    # Stretch the earlier map's life into the later one's: refused, naming both.
    stretched = tuple(dataclasses.replace(r, live=(a.live[0], b.live[0])) if r == a else r
                      for r in img.regions)
    names = rf"'({a.name}|{b.name})'"
    with pytest.raises(ImageError, match=rf"region {names} .* overlaps region {names} .* "
                                         r"while both are live"):
        _with(img, regions=stretched)


def test_a_descriptor_using_a_map_outside_its_live_range_is_refused(reused):
    """The map a descriptor writes must be live at that descriptor: one that says its life
    starts later is refused, naming the descriptor."""
    img, _ = reused
    first = img.descriptors[0]
    out = next(r for r in img.regions if r.live is not None
               and r.base <= first.out_base < r.end and r.live[0] == 0)
    late = tuple(dataclasses.replace(r, live=(1, max(1, r.live[1]))) if r == out else r
                 for r in img.regions)
    with pytest.raises(ImageError, match=rf"descriptor 0 \({first.name}\) output map .* is in "
                                         rf"region '{out.name}' .*, live only from descriptor 1"):
        _with(img, regions=late)


@pytest.mark.parametrize(("change", "match"), [
    ({"live": [3, 1]}, r"regions\[\d+\]\.live must be two descriptor indices"),
    ({"live": [0]}, r"regions\[\d+\]\.live must be two descriptor indices"),
    ({"live": [0, 99]}, r"is live to descriptor 99, past the list's"),
])
def test_a_bad_live_range_is_refused_on_load(reused, tmp_path, change, match):
    _, folder = reused
    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)
    mm = json.loads((copy / "memory_map.json").read_text())
    next(r for r in mm["regions"] if "live" in r).update(change)
    (copy / "memory_map.json").write_text(json.dumps(mm))
    with pytest.raises(ImageError, match=match):
        CompiledImage.load(copy)


def test_live_is_for_maps_only(reused, tmp_path):
    _, folder = reused
    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)
    mm = json.loads((copy / "memory_map.json").read_text())
    next(r for r in mm["regions"] if r["kind"] == "weights")["live"] = [0, 1]
    (copy / "memory_map.json").write_text(json.dumps(mm))
    with pytest.raises(ImageError, match=r"\.live is for maps \(input, conv, output\), not "
                                         r"'weights'"):
        CompiledImage.load(copy)


def test_which_outputs_survive_the_run(ddr, reused):
    """Every output of an image whose maps have their own bytes; of a reused one, those no
    later map overwrites: here c1's map is reused by fc's, gap's by nothing after it."""
    plain = CompiledImage.from_ddr_image(ddr)
    assert all(plain.survives(n) for n in plain.layer_names())
    img, _ = reused
    assert img.output("c1").addr == img.output("fc").addr
    assert [img.survives(n) for n in ("c1", "gap", "fc")] == [False, True, True]
