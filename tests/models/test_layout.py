"""NC/8DHW8 layout: round trips, padding slots and a hand-computed address."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fcircnn.models.layout import ncdhw8_address, ncdhw8_size, pack_ncdhw8, unpack_ncdhw8


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 20), st.integers(1, 3), st.integers(1, 4), st.integers(1, 5),
       st.integers(0, 2**32 - 1))
def test_round_trip_including_padding_slots(slots, D, H, W, seed):
    rng = np.random.default_rng(seed)
    re, im = rng.integers(-127, 128, (2, slots, D, H, W))
    data = pack_ncdhw8(re, im)
    assert len(data) == ncdhw8_size(slots, D, H, W) == -(-slots // 8) * D * H * W * 16
    got_re, got_im = unpack_ncdhw8(data, slots, (D, H, W))
    np.testing.assert_array_equal(got_re, re)
    np.testing.assert_array_equal(got_im, im)
    # Padding slots are zero.
    raw = np.frombuffer(data, dtype=np.int8).reshape(-1, D, H, W, 8, 2)
    lanes = raw.transpose(0, 4, 1, 2, 3, 5).reshape(-1, D, H, W, 2)
    assert not lanes[slots:].any()


def test_hand_computed_address():
    """Slot 9 at voxel (1, 2, 3) of a 12x2x3x4 map, base 0x1000.

    group 1, beat index ((1*2 + 1)*3 + 2)*4 + 3 = 47, lane 1:
    0x1000 + 47*16 + 1*2 = 0x1000 + 754.
    """
    shape = (2, 3, 4)
    assert ncdhw8_address(9, 1, 2, 3, shape, base=0x1000) == 0x1000 + 754
    re = np.zeros((12, *shape), dtype=np.int64)
    im = np.zeros_like(re)
    re[9, 1, 2, 3], im[9, 1, 2, 3] = -5, 77
    data = pack_ncdhw8(re, im)
    assert data[754] == (-5) & 0xFF and data[755] == 77
    assert sum(1 for b in data if b) == 2


def test_lane_is_little_endian_in_the_beat():
    re = np.arange(8).reshape(8, 1, 1, 1)
    im = -np.arange(8).reshape(8, 1, 1, 1)
    beat = int.from_bytes(pack_ncdhw8(re, im), "little")
    for lane in range(8):
        half = (beat >> (16 * lane)) & 0xFFFF
        assert half & 0xFF == lane & 0xFF and half >> 8 == (-lane) & 0xFF


def test_errors():
    with pytest.raises(ValueError, match="int8"):
        pack_ncdhw8(np.full((1, 1, 1, 1), 200), np.zeros((1, 1, 1, 1), dtype=int))
    with pytest.raises(TypeError, match="integer"):
        pack_ncdhw8(np.zeros((1, 1, 1, 1)), np.zeros((1, 1, 1, 1)))
    with pytest.raises(ValueError, match="needs 16 bytes"):
        unpack_ncdhw8(b"\0" * 15, 3, (1, 1, 1))
    with pytest.raises(ValueError, match="outside"):
        ncdhw8_address(0, 2, 0, 0, (2, 1, 1))


def test_pack_box_is_the_padded_map_cut_to_the_box():
    from fcircnn.models.layout import pack_box

    rng = np.random.default_rng(5)
    re, im = (rng.integers(-127, 128, size=(12, 3, 4, 5)) for _ in range(2))
    # The whole map is the map itself (slots padded to whole groups).
    assert pack_box(re, im, (0, 2), (0, 3), (0, 4), (0, 5)) == pack_ncdhw8(re, im)
    # A box hanging over every edge reads zeros there.
    got = unpack_ncdhw8(pack_box(re, im, (1, 1), (-1, 2), (3, 3), (4, 2)), 8, (2, 3, 2))
    want_re = np.zeros((8, 2, 3, 2), dtype=np.int64)
    want_re[:4, 1, 0, 0] = re[8:12, 0, 3, 4]
    assert np.array_equal(got[0], want_re)
