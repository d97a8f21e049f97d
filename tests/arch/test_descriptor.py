"""Layer descriptors (:mod:`fcircnn.arch.descriptor`): packing, Amaranth mirror, field limits."""

import dataclasses
import random

import pytest
from amaranth.hdl import Module, Signal
from amaranth.lib import data
from amaranth.sim import Simulator
from hypothesis import given, settings
from hypothesis import strategies as st

from fcircnn.arch.descriptor import (
    DESCRIPTOR_BYTES,
    FLAG_CBN,
    FLAG_DFOLD,
    FLAG_ISPLIT,
    FLAG_LANE0,
    FLAG_LAST,
    FLAG_MINNER,
    FLAG_POOL,
    FLAG_RESIDUAL,
    FLAG_RFFT,
    FLAG_ROWLANES,
    FLAG_SPREAD,
    NEEDED_FLAGS,
    OP_CONV,
    OP_GAP,
    OP_POOL,
    STREAM_REGIONS,
    LayerDescriptor,
    balances_tiles,
    descriptor_layout,
    field_offset,
    flags_fault,
    region_code,
    region_fault,
    stored_map,
    used_regions,
)

_VEC = ("in_shape", "conv_shape", "out_shape", "kernel", "stride", "padding", "pool_window",
        "pool_stride", "pool_padding", "tile", "tiles", "in_stride", "out_stride", "in_step",
        "in_pad_bytes", "out_step")
_ADDR = ("in_base", "out_base", "res_base", "weight_base", "post_base", "cycles_addr",
         "next_desc")


def _example(**changes) -> LayerDescriptor:
    base = dict(
        layer=3, core=1, op=0, flags=FLAG_POOL, in_slots=256, in_shape=(8, 28, 28),
        out_slots=256, conv_shape=(8, 28, 28), out_shape=(4, 14, 14), kernel=(3, 3, 3),
        stride=(1, 1, 1), padding=(1, 1, 1), pool_window=(2, 2, 2), pool_stride=(2, 2, 2),
        pool_padding=(0, 0, 0), in_base=0x10000, out_base=0x20000, res_base=0,
        weight_base=0x30000, post_base=0x40000, cycles_addr=0x1030, next_desc=0x200,
        weight_bytes=884736, m_tiles=8, n_tiles=16,
    )
    base.update(changes)
    return LayerDescriptor(**base)


def _vec(bits, lo=0):
    return st.tuples(*[st.integers(lo, (1 << bits) - 1)] * 3)


def _addr():
    return st.integers(0, (1 << 60) - 1).map(lambda a: a * 16)


descriptors = st.builds(
    LayerDescriptor,
    layer=st.integers(0, 0xFFFF), core=st.integers(0, 0xFF), op=st.sampled_from([0, 1]),
    flags=st.integers(0, 0x3FF).filter(
        lambda f: f & 0x120 != 0x100 and f & 0x240 != 0x200),
    in_slots=st.integers(1, 0xFFFF), in_shape=_vec(16, 1),
    out_slots=st.integers(1, 0xFFFF), conv_shape=_vec(16, 1), out_shape=_vec(16, 1),
    kernel=_vec(16, 1), stride=_vec(8, 1), padding=_vec(8), pool_window=_vec(8, 1),
    pool_stride=_vec(8, 1), pool_padding=_vec(8),
    in_base=_addr(), out_base=_addr(), res_base=_addr(), weight_base=_addr(),
    post_base=_addr(), cycles_addr=_addr(), next_desc=_addr(),
    weight_bytes=st.integers(0, 0xFFFFFFFF), m_tiles=st.integers(1, 0xFFFF),
    n_tiles=st.integers(1, 0xFFFF),
)


@given(desc=descriptors)
@settings(max_examples=150, deadline=None, derandomize=True)
def test_pack_unpack_round_trip(desc):
    raw = desc.pack()
    assert len(raw) == DESCRIPTOR_BYTES
    assert LayerDescriptor.unpack(raw) == desc


@given(desc=descriptors)
@settings(max_examples=60, deadline=None, derandomize=True)
def test_amaranth_layout_reads_the_same_fields(desc):
    layout = descriptor_layout()
    assert layout.size == 8 * DESCRIPTOR_BYTES
    view = data.Const(layout, int.from_bytes(desc.pack(), "little"))
    for f in dataclasses.fields(desc):
        value = getattr(desc, f.name)
        if f.name in _VEC or f.name == "rfft_mult":
            assert tuple(view[f.name][i] for i in range(len(value))) == value, f.name
        else:
            assert view[f.name] == value, f.name
    assert view["_reserved0"] == 0 and view["_reserved1"] == 0


def test_fixed_offsets_of_the_documented_table():
    raw = _example(layer=0x0102, next_desc=0xABCDE0, weight_bytes=0x11223344).pack()
    assert raw[0:2] == bytes([0x02, 0x01])
    assert int.from_bytes(raw[0x68:0x70], "little") == 0xABCDE0
    assert int.from_bytes(raw[0x70:0x74], "little") == 0x11223344
    assert int.from_bytes(raw[0x1C:0x22], "little") == 3 | 3 << 16 | 3 << 32
    assert raw[0x28:0x2B] == bytes([2, 2, 2])
    derived = _example(tile=(1, 2, 3), tiles=(4, 5, 6), in_stride=(7, 8, 9),
                       weight_tile_bytes=0x55667788, out_mt_step=0x99).pack()
    assert derived[0x80:0x83] == bytes([1, 2, 3])
    assert int.from_bytes(derived[0x84:0x8A], "little") == 4 | 5 << 16 | 6 << 32
    assert int.from_bytes(derived[0x8C:0x98], "little") == 7 | 8 << 32 | 9 << 64
    assert int.from_bytes(derived[0xC8:0xCC], "little") == 0x55667788
    assert int.from_bytes(derived[0xD0:0xD4], "little") == 0x99


@pytest.mark.parametrize("field, value, limit", [
    ("layer", 1 << 16, "16-bit"),
    ("core", 256, "8-bit"),
    ("in_slots", 1 << 16, "0..65535"),
    ("kernel", (3, 1 << 16, 3), "16-bit"),
    ("stride", (256, 1, 1), "0..255"),
    ("in_base", 1 << 64, "64-bit"),
    ("weight_bytes", 1 << 32, "32-bit"),
    ("m_tiles", -1, "0..65535"),
])
def test_field_limits_name_the_field(field, value, limit):
    with pytest.raises(ValueError, match=field) as info:
        _example(**{field: value})
    assert limit in str(info.value)


@pytest.mark.parametrize("changes, match", [
    ({"out_base": 0x20008}, "out_base .* 16-byte aligned"),
    ({"op": 3}, "op must be"),
    ({"flags": 0x800}, "flags"),
    ({"flags": 0x400}, ("FLAG_MINNER needs .* one n-tile and 2 m-tiles without a carried "
                        "pool, not op 0 with 16 n-tiles and 8 m-tiles$")),
    ({"flags": 0x400 | FLAG_POOL, "n_tiles": 1, "m_tiles": 2, "pool_window": (3, 3, 3)},
     "FLAG_MINNER needs .* with 1 n-tiles and 2 m-tiles and a carried pool"),
    ({"flags": 0x400, "n_tiles": 1, "m_tiles": 3}, "FLAG_MINNER needs"),
    ({"flags": 0x400, "n_tiles": 1, "m_tiles": 2, "op": 2}, "FLAG_MINNER needs"),
    ({"flags": 0x100}, "FLAG_WQUARTER needs FLAG_WSPLIT"),
    ({"flags": 0x200}, "FLAG_IQUARTER needs FLAG_ISPLIT"),
    ({"kernel": (3, 0, 3)}, "kernel must be >= 1"),
    ({"flags": FLAG_RFFT, "op": OP_POOL}, "FLAG_RFFT is not allowed on a pool pass"),
    ({"flags": FLAG_LANE0 | FLAG_POOL}, "FLAG_LANE0 only on a conv descriptor without FLAG_POOL"),
    ({"flags": FLAG_LANE0, "op": OP_GAP}, "FLAG_LANE0 only on a conv"),
    ({"flags": FLAG_SPREAD | FLAG_ISPLIT}, "FLAG_SPREAD needs a conv descriptor without FLAG_ISPL"),
    ({"flags": FLAG_SPREAD, "op": OP_GAP}, "FLAG_SPREAD needs a conv descriptor"),
    ({"flags": FLAG_RFFT, "rfft_shift": 48}, "rfft_shift must be in 0..47"),
    ({"rfft_mult": (1,) + (0,) * 15}, "rfft_mult and rfft_shift must be 0 without FLAG_RFFT"),
    ({"flags": FLAG_RFFT, "rfft_mult": (0,) * 15}, "rfft_mult must be 16 integers"),
    ({"flags": FLAG_RFFT, "rfft_mult": (1 << 16,) + (0,) * 15}, "16-bit"),
    ({"stride": (1, 1)}, "stride must be 3 integers"),
    ({"layer": True}, "layer must be an integer"),
])
def test_invalid_values_are_rejected(changes, match):
    with pytest.raises(ValueError, match=match):
        _example(**changes)


def test_the_rfft_fields_round_trip_at_their_offsets():
    mult = tuple(range(1000, 1016))
    d = _example(flags=FLAG_RFFT | FLAG_POOL, rfft_mult=mult, rfft_shift=47)
    raw = d.pack()
    assert field_offset("rfft_mult") == 0xD4 and field_offset("rfft_shift") == 0xF4
    assert [int.from_bytes(raw[0xD4 + 2 * k:0xD6 + 2 * k], "little") for k in range(16)] == \
        list(mult)
    assert raw[0xF4] == 47 and not any(raw[0xF5:])  # no stream regions in this example
    assert LayerDescriptor.unpack(raw) == d
    lane0 = _example(flags=FLAG_LANE0, pool_window=(1, 1, 1), pool_stride=(1, 1, 1))
    assert LayerDescriptor.unpack(lane0.pack()) == lane0
    bad = bytearray(raw)
    bad[0xF5] = 1
    with pytest.raises(ValueError, match=r"0x8A\.\.0x8B, 0xF5\)"):
        LayerDescriptor.unpack(bytes(bad))


def test_the_stream_regions_sit_after_rfft_shift_and_round_trip():
    pages = {"in_pages": 1, "out_pages": 0x1234, "res_pages": 3, "weight_pages": 0xFFFF,
             "post_pages": 5}
    d = _example(**pages)
    raw = d.pack()
    for k, (name, value) in enumerate(pages.items()):
        assert field_offset(name) == 0xF6 + 2 * k
        assert int.from_bytes(raw[0xF6 + 2 * k:0xF8 + 2 * k], "little") == value
    assert LayerDescriptor.unpack(raw) == d
    with pytest.raises(ValueError, match="in_pages = 65536 does not fit"):
        _example(in_pages=1 << 16)


def test_a_used_stream_without_region_is_a_fault_and_an_unused_one_is_not():
    whole = {f"{name}_pages": 1 for name in STREAM_REGIONS}
    assert not region_fault(_example(**whole))
    for name in STREAM_REGIONS:
        d = _example(**(whole | {f"{name}_pages": 0}))
        assert region_fault(d) == bool(used_regions(d.op, d.flags)[name]), name
    pool = _example(op=OP_POOL, flags=FLAG_POOL, in_pages=1, out_pages=1)
    assert not region_fault(pool)  # a pool pass reads no weights, posts or residual
    assert used_regions(OP_CONV, FLAG_RESIDUAL)["res"]
    assert region_code("in") == 1 and region_code("out") == 1 and region_code("post") == 4


def test_minner_on_one_n_tile_and_two_m_tiles():
    d = _example(flags=FLAG_MINNER, n_tiles=1, m_tiles=2)
    assert LayerDescriptor.unpack(d.pack()) == d


def test_tiles_are_balanced_only_on_convs_without_a_drain_pool_or_row_lanes():
    assert balances_tiles(OP_CONV, 0) and balances_tiles(OP_CONV, FLAG_CBN | FLAG_DFOLD)
    assert not balances_tiles(OP_CONV, FLAG_POOL)
    assert not balances_tiles(OP_CONV, FLAG_ROWLANES | FLAG_CBN)
    assert not balances_tiles(OP_GAP, 0) and not balances_tiles(OP_POOL, FLAG_POOL)


def test_unpack_rejects_bad_bytes():
    raw = bytearray(_example(op=OP_GAP, flags=FLAG_LAST).pack())
    assert LayerDescriptor.unpack(bytes(raw)).last
    with pytest.raises(ValueError, match="256 bytes"):
        LayerDescriptor.unpack(bytes(raw[:64]))
    raw[0x7F] = 1
    with pytest.raises(ValueError, match="reserved"):
        LayerDescriptor.unpack(bytes(raw))
    raw[0x7F] = 0
    raw[0xF5] = 1
    with pytest.raises(ValueError, match="reserved"):
        LayerDescriptor.unpack(bytes(raw))


def test_address_width_check_names_the_field():
    desc = _example(post_base=1 << 40)
    desc.check_address_width(41)
    with pytest.raises(ValueError, match=r"post_base = 0x10000000000 .* 40-bit"):
        desc.check_address_width(40)


def test_the_stored_map_of_folded_and_viewed_descriptors():
    """The map a descriptor writes: its own, the unfolded map of a depth fold, the 1x1x1 map
    of a gap read as planes (a gap of output depth 1 or a conv of depth 8 is its own)."""
    assert stored_map(0, 32, (4, 14, 14)) == (32, (4, 14, 14))
    assert stored_map(FLAG_DFOLD, 32, (4, 14, 14)) == (16, (8, 14, 14))
    assert stored_map(0, 32, (8, 1, 1), OP_GAP) == (256, (1, 1, 1))
    assert stored_map(0, 32, (1, 1, 1), OP_GAP) == (32, (1, 1, 1))
    assert stored_map(0, 32, (8, 1, 1), OP_CONV) == (32, (8, 1, 1))
    gap = _example(op=OP_GAP, flags=0, out_slots=32, conv_shape=(8, 1, 1), out_shape=(8, 1, 1))
    assert gap.stored_output == (256, (1, 1, 1))


def _flag_cases():
    """Every flag alone, with the flag it needs and with each neighbour, a bit outside the
    defined ones, the m-tiles innermost with a pool, the row lanes with a pool and a depth fold,
    on conv, gap and pool descriptors of one to three m- and n-tiles, without a pool window and
    with carried (3-wide) windows, on one depth tile of 2 or 3 depths and two tiles of 2."""
    rng = random.Random(5)
    flags = [0, 0x1000, 0x8000, FLAG_MINNER | FLAG_POOL, FLAG_ROWLANES | FLAG_POOL,
             FLAG_ROWLANES | FLAG_DFOLD, FLAG_ROWLANES | FLAG_MINNER, FLAG_RFFT | FLAG_POOL,
             FLAG_LANE0 | FLAG_POOL, FLAG_RFFT | FLAG_LANE0, FLAG_SPREAD | FLAG_ISPLIT,
             FLAG_SPREAD | FLAG_DFOLD | FLAG_RFFT] + [1 << b for b in range(15)]
    flags += [f | n for f, n in NEEDED_FLAGS.items()] + [rng.randrange(1 << 16) for _ in range(40)]
    flags += [rng.randrange(1 << 12) for _ in range(40)]
    return [(f, op, mt, nt, pw, td, tds) for f in flags for op in (OP_CONV, OP_GAP, 2)
            for mt in (1, 2, 3) for nt in (1, 2) for pw in ((1, 1, 1), (3, 3, 3), (2, 2, 3))
            for td, tds in ((2, 1), (3, 1), (2, 2))]


def test_the_flag_rules_are_what_the_descriptor_accepts_in_python_and_in_amaranth():
    cases = _flag_cases()
    for flags, op, mt, nt, pw, td, tds in cases:
        try:
            _example(flags=flags, op=op, m_tiles=mt, n_tiles=nt, pool_window=pw,
                     tile=(td, 4, 4), tiles=(tds, 7, 7))
        except ValueError:
            accepted = False
        else:
            accepted = True
        assert flags_fault(flags, op, mt, nt, pw, td, tds) is (not accepted), (
            hex(flags), op, mt, nt, pw, td, tds)
    m = Module()
    d = Signal(descriptor_layout())
    fault = Signal()
    m.d.comb += fault.eq(flags_fault(d.flags, d.op, d.m_tiles, d.n_tiles, d.pool_window,
                                     d.tile[0], d.tiles[0]))

    async def bench(ctx):
        for case in cases:
            flags, op, mt, nt, pw, td, tds = case
            ctx.set(d.flags, flags)
            ctx.set(d.op, op)
            ctx.set(d.m_tiles, mt)
            ctx.set(d.n_tiles, nt)
            ctx.set(d.pool_window, list(pw))
            ctx.set(d.tile, [td, 4, 4])
            ctx.set(d.tiles, [tds, 7, 7])
            assert ctx.get(fault) == flags_fault(*case), case

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()


def test_field_offsets_are_where_pack_writes_the_fields():
    raw = _example(flags=FLAG_POOL | FLAG_LAST, m_tiles=7, n_tiles=9).pack()
    for name, value, size in (("op", 0, 1), ("core", 1, 1), ("flags", FLAG_POOL | FLAG_LAST, 2),
                              ("m_tiles", 7, 2), ("n_tiles", 9, 2), ("in_base", 0x10000, 8)):
        at = field_offset(name)
        assert int.from_bytes(raw[at:at + size], "little") == value, name
    with pytest.raises(KeyError):
        field_offset("nope")
