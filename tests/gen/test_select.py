"""Layer selection (:mod:`fcircnn.gen.select`), checked on the image bytes alone: the descriptor
list decoded from ``DESC_PTR``, its links and flags, the pre-filled inputs and the zero outputs."""

import dataclasses

import numpy as np
import pytest

from fcircnn.arch.descriptor import (
    DESCRIPTOR_BYTES,
    FLAG_LAST,
    FLAG_POOL,
    FLAG_RESIDUAL,
    LayerDescriptor,
)
from fcircnn.gen.compiler import compile_network
from fcircnn.gen.plan import LayerPlan
from fcircnn.gen.select import check_layer_names, layer_descriptors, select_layers
from fcircnn.models.config import builtin_path, load_accelerator
from fcircnn.models.fold import fold_input_slots
from fcircnn.models.layout import ncdhw8_size, pack_ncdhw8, unpack_ncdhw8
from fcircnn.models.scale import scale_accelerator

NAMES = ["c1", "c2", "c3", "gap", "fc"]


@pytest.fixture(scope="module")
def image(tmp_path_factory, small_accelerator):
    tmp = tmp_path_factory.mktemp("select")
    return compile_network(load_accelerator(small_accelerator(tmp)), seed=3)


def _chain(img):
    """Decode the descriptor list from DESC_PTR using the image bytes only."""
    out, addr = [], img.desc_ptr
    while True:
        d = LayerDescriptor.unpack(img.read(addr, DESCRIPTOR_BYTES))
        out.append((addr, d))
        if d.next_desc == 0:
            assert d.flags & FLAG_LAST
            return out
        assert not d.flags & FLAG_LAST
        assert len(out) < 100
        addr = d.next_desc


def _map(img, addr, slots, shape):
    return unpack_ncdhw8(img.read(addr, ncdhw8_size(slots, *shape)), slots, shape)


def _equal(parts, expected):
    return all(np.array_equal(a, b) for a, b in zip(parts, expected, strict=True))


def _passes(img, name):
    return layer_descriptors(next(lp for lp in img.plan.layers if lp.layer.name == name))


def test_single_residual_layer(image):
    sel = select_layers(image, ["c2"])
    region = image.region("descriptors")
    assert sel.desc_ptr == region.base
    chain = _chain(sel)
    originals = _passes(image, "c2")
    addresses = [region.base + i * DESCRIPTOR_BYTES for i in range(len(originals))]
    assert [a for a, _ in chain] == addresses
    assert [d for _, d in chain] == [
        dataclasses.replace(o, next_desc=nxt, flags=(o.flags & ~FLAG_LAST) | (
            FLAG_LAST if nxt == 0 else 0))
        for o, nxt in zip(originals, [*addresses[1:], 0], strict=True)]
    # The rest of the descriptors region is zero.
    used = len(chain) * DESCRIPTOR_BYTES
    assert not any(sel.read(region.base + used, region.size - used))
    # Input and residual (both c1's output) hold the golden c1 output.
    first = chain[0][1]
    residual = next(d for _, d in chain if d.flags & FLAG_RESIDUAL)
    c1 = _passes(image, "c1")[-1]
    assert first.in_base == residual.res_base == c1.out_base
    assert _equal(_map(sel, c1.out_base, c1.out_slots, c1.out_shape), image.expected["c1"])
    blob = pack_ncdhw8(*image.expected["c1"])
    assert sel.read(c1.out_base, len(blob)) == blob
    # Its own outputs are zero; the plan and expected outputs only hold c2.
    for _, d in chain:
        assert not any(sel.read(d.out_base, ncdhw8_size(d.out_slots, *d.out_shape)))
    assert any(d.flags & FLAG_POOL or d.op != first.op for _, d in chain)
    assert [lp.layer.name for lp in sel.plan.layers] == ["c2"]
    assert set(sel.expected) == {"c2"}
    assert {m["name"] for m in sel.memory_map()["descriptors"]} == {"c2"}
    # Weights, post tables and the input are untouched.
    for r in image.regions:
        if r.kind in ("weights", "post", "input", "cycles"):
            assert sel.read(r.base, r.size) == image.read(r.base, r.size), r.name


def test_several_layers_in_network_order(image):
    sel = select_layers(image, ["fc", "c1", "gap", "fc"])
    chain = _chain(sel)
    base = image.region("descriptors").base
    passes = [d for n in ("c1", "gap", "fc") for d in _passes(image, n)]
    assert [a for a, _ in chain] == [base + i * DESCRIPTOR_BYTES for i in range(len(passes))]
    assert [d.layer for _, d in chain] == [d.layer for d in passes]
    assert [lp.layer.name for lp in sel.plan.layers] == ["c1", "gap", "fc"]
    start = {n: dict(chain)[base + passes.index(_passes(image, n)[0]) * DESCRIPTOR_BYTES]
             for n in ("c1", "gap", "fc")}
    # gap reads c3's output, produced outside the selection: pre-filled.
    c3 = _passes(image, "c3")[-1]
    assert start["gap"].in_base == c3.out_base
    assert _equal(_map(sel, c3.out_base, c3.out_slots, c3.out_shape), image.expected["c3"])
    # fc reads gap's output, produced inside the selection: zero, like every selected output.
    assert start["fc"].in_base == _passes(image, "gap")[-1].out_base
    for _, d in chain:
        assert not any(sel.read(d.out_base, ncdhw8_size(d.out_slots, *d.out_shape)))
    # c1 reads the network input (depth taps and three row copies folded: nine shifted
    # copies), already in the image.
    c1 = start["c1"]
    folded = fold_input_slots(*image.input_parts, image.plan.layers[0].layer, 1, 3)
    assert _equal(_map(sel, c1.in_base, c1.in_slots, c1.in_shape), folded)
    # c2's output (not read by the selection) stays zero as compiled.
    c2 = _passes(image, "c2")[-1]
    assert not any(sel.read(c2.out_base, ncdhw8_size(c2.out_slots, *c2.out_shape)))


def test_all_layers_is_the_same_image(image):
    sel = select_layers(image, list(reversed(NAMES)))
    assert sel.data == image.data
    assert sel.plan == image.plan
    assert sel.expected.keys() == image.expected.keys()


@pytest.mark.parametrize("name", NAMES)
def test_each_layer_alone(image, name):
    sel = select_layers(image, [name])
    chain = [d for _, d in _chain(sel)]
    assert len(chain) == len(_passes(image, name))
    outputs = {_passes(image, n)[-1].out_base: n for n in NAMES}
    written = set()
    for d in chain:
        reads = [d.in_base] + ([d.res_base] if d.flags & FLAG_RESIDUAL else [])
        for addr in reads:
            if addr in written:  # an earlier pass of the same layer
                continue
            if addr == image.region("input").base:
                expected = fold_input_slots(*image.input_parts,
                                            image.plan.layers[0].layer, 1, 3)
                slots, shape = d.in_slots, d.in_shape
            else:
                producer = _passes(image, outputs[addr])[-1]
                expected = image.expected[outputs[addr]]
                slots, shape = producer.out_slots, producer.out_shape
            assert _equal(_map(sel, addr, slots, shape), expected)
        written.add(d.out_base)


def test_unknown_names(image):
    with pytest.raises(ValueError, match=r"unknown layer 'c9'; valid layer names: c1, c2, c3, "
                                         r"gap, fc"):
        select_layers(image, ["c1", "c9"])
    with pytest.raises(ValueError, match=r"unknown layers 'x', 'y'"):
        select_layers(image, ["x", "y"])
    with pytest.raises(ValueError, match=r"no layer selected; valid layer names"):
        select_layers(image, [])


def test_an_image_with_reused_maps_is_not_cut(tmp_path, small_accelerator):
    reused = compile_network(load_accelerator(small_accelerator(tmp_path)), seed=3,
                             reuse_maps=True)
    with pytest.raises(ValueError, match=r"laid out by liveness \(reuse_maps\): select layers "
                                         r"from an image compiled without it"):
        select_layers(reused, ["c2"])


def test_check_layer_names():
    assert check_layer_names(NAMES, "gap") == ["gap"]
    assert check_layer_names(NAMES, ["fc", "c1", "c1"]) == ["c1", "fc"]


def _with_passes(lp, passes):
    """``lp`` carrying ``passes`` as its descriptors, whether or not ``LayerPlan`` has a
    ``descriptors`` field yet."""
    names = {f.name for f in dataclasses.fields(LayerPlan)}
    if "descriptors" in names:
        changes = {"descriptors": passes}
        if "descriptor" in names:
            changes["descriptor"] = passes[0]
        return dataclasses.replace(lp, **changes)

    @dataclasses.dataclass(frozen=True)
    class TwoPassPlan(LayerPlan):
        descriptors: tuple = ()

    values = {f.name: getattr(lp, f.name) for f in dataclasses.fields(lp)}
    values["descriptor"] = passes[0]
    return TwoPassPlan(**values, descriptors=passes)


def test_two_pass_layers(image):
    """A layer with two descriptors (pool as its own pass): both are selected, in order, linked;
    the map between the passes is written by the first and not pre-filled."""
    layers = list(image.plan.layers)
    lp = layers[1]
    if len(layer_descriptors(lp)) == 2:  # the compiler already splits c2's pool off
        conv, pool = layer_descriptors(lp)
        scratch = conv.out_base
    else:
        d = lp.descriptor
        scratch = image.region("c2.output").base  # stand-in for an intermediate map
        conv = dataclasses.replace(d, flags=d.flags & ~FLAG_POOL, out_shape=d.conv_shape,
                                   out_base=scratch)
        pool = dataclasses.replace(d, flags=d.flags & ~FLAG_RESIDUAL, in_base=scratch,
                                   res_base=0)
        layers[1] = _with_passes(lp, (conv, pool))
    assert layer_descriptors(layers[1]) == (conv, pool)
    assert len(layer_descriptors(layers[0])) == 1
    two = dataclasses.replace(image, plan=dataclasses.replace(image.plan, layers=tuple(layers)))
    sel = select_layers(two, ["c3", "c2"])
    chain = _chain(sel)
    c3 = layer_descriptors(layers[2])[-1]
    assert [d.flags & ~FLAG_LAST for _, d in chain] == [
        conv.flags & ~FLAG_LAST, pool.flags & ~FLAG_LAST, c3.flags & ~FLAG_LAST]
    assert chain[0][1].in_base == image.region("c1.output").base
    assert chain[1][1].in_base == scratch
    assert tuple(sel.plan.layers[0].descriptors) == (chain[0][1], chain[1][1])
    assert not any(sel.read(scratch, ncdhw8_size(conv.out_slots, *conv.out_shape)))


@pytest.mark.parametrize("name", ["r3d18_zcu102", "c3d_zcu102"])
def test_scaled_shipped_networks(name):
    acc = scale_accelerator(load_accelerator(builtin_path(name)), 16)
    img = compile_network(acc, seed=1)
    names = [lp.layer.name for lp in img.plan.layers]
    for layer in names:
        chain = _chain(select_layers(img, [layer]))
        assert {d.layer for _, d in chain} == {names.index(layer)}
    # A residual add, the global average pool and the classifier together.
    picks = ["l4b2_conv2", "gap", "fc"] if name.startswith("r3d") else ["conv5b", "fc8"]
    sel = select_layers(img, picks)
    assert [lp.layer.name for lp in sel.plan.layers] == picks
    assert len(_chain(sel)) == sum(len(_passes(img, n)) for n in picks)
