"""The corrupted images of the fuzzing campaign (:mod:`fcircnn.sim.fuzz`)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import compile_saved

from fcircnn.arch.descriptor import DESCRIPTOR_BYTES, FLAG_LAST, LayerDescriptor
from fcircnn.runtime.image import CompiledImage
from fcircnn.sim.fuzz import KINDS, corrupt


@pytest.fixture(scope="module")
def image(tmp_path_factory, small_accelerator):
    ddr = compile_saved(tmp_path_factory.mktemp("fuzz"), small_accelerator, 1)[1]
    return CompiledImage.from_ddr_image(ddr)  # as the testbench loads it


def _corrupt(image, seed, kind=None):
    return corrupt(image.data, image.base, image.desc_ptr, len(image.descriptors), 40,
                   np.random.default_rng(seed), kind)


def _list_span(image):
    first = image.desc_ptr - image.base
    return first, first + len(image.descriptors) * DESCRIPTOR_BYTES


def _changed(image, data):
    a, b = np.frombuffer(image.data, np.uint8), np.frombuffer(data, np.uint8)
    return np.flatnonzero(a != b)


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_damages_one_descriptor_and_nothing_else(image, kind):
    first, end = _list_span(image)
    damaged = 0
    for seed in range(20):
        bad = _corrupt(image, seed, kind)
        assert bad.kind == kind and len(bad.data) == len(image.data)
        changed = _changed(image, bad.data)
        assert ((changed >= first) & (changed < end)).all(), bad.detail
        if changed.size:
            damaged += 1
            assert len({(i - first) // DESCRIPTOR_BYTES for i in changed}) == 1, bad.detail
            k = int(bad.detail.split(":")[0].split()[1])
            assert ((changed - first) // DESCRIPTOR_BYTES == k).all()
    assert damaged >= 15  # a field may already hold the value drawn, now and then


def _descriptor(data, image, k):
    at = image.desc_ptr - image.base + k * DESCRIPTOR_BYTES
    return LayerDescriptor.unpack(data[at:at + DESCRIPTOR_BYTES])


def test_a_loop_points_back_and_never_ends(image):
    for seed in range(10):
        bad = _corrupt(image, seed, "loop")
        k = int(bad.detail.split(":")[0].split()[1])
        d = _descriptor(bad.data, image, k)
        assert not d.flags & FLAG_LAST
        assert image.desc_ptr <= d.next_desc <= image.desc_ptr + k * DESCRIPTOR_BYTES
        assert (d.next_desc - image.desc_ptr) % DESCRIPTOR_BYTES == 0


def test_garbage_points_past_the_list_into_the_image(image):
    _, end = _list_span(image)
    for seed in range(10):
        bad = _corrupt(image, seed, "garbage")
        k = int(bad.detail.split(":")[0].split()[1])
        d = _descriptor(bad.data, image, k)
        assert image.base + end <= d.next_desc <= image.end - DESCRIPTOR_BYTES
        assert not d.flags & FLAG_LAST


def test_a_truncated_list_ends_before_its_last_descriptor(image):
    for seed in range(10):
        bad = _corrupt(image, seed, "truncate")
        k = int(bad.detail.split(":")[0].split()[1])
        assert k < len(image.descriptors) - 1
        d = _descriptor(bad.data, image, k)
        assert d.flags & FLAG_LAST or d.next_desc == 0


def test_seeded_and_every_kind_drawn(image):
    assert _corrupt(image, 7) == _corrupt(image, 7)
    assert {_corrupt(image, seed).kind for seed in range(80)} == set(KINDS)


def test_bad_arguments(image):
    with pytest.raises(ValueError, match="kind must be one of bits, field"):
        _corrupt(image, 0, "nope")
    with pytest.raises(ValueError, match="the descriptor list does not lie in the image"):
        corrupt(image.data, image.base, image.desc_ptr, 10_000, 40, np.random.default_rng(0))
