"""The register map (:mod:`fcircnn.arch.registers`) is consistent: what the hardware, the
headers, the Vivado memory map and the driver all read from it."""

from __future__ import annotations

import pytest

from fcircnn.arch.registers import (
    CONTROL_ADDR_WIDTH,
    ERROR_BAD_DESCRIPTOR,
    ERROR_CODES,
    FIELDS,
    MIN_ADDR_WIDTH,
    REGISTERS,
    offset,
)


def test_registers_are_word_aligned_distinct_and_inside_the_window():
    offsets = [reg.offset for reg in REGISTERS]
    assert len(set(offsets)) == len(offsets)
    assert len({reg.name for reg in REGISTERS}) == len(REGISTERS)
    assert all(o % 4 == 0 for o in offsets)
    assert max(offsets) + 4 <= 1 << MIN_ADDR_WIDTH <= 1 << CONTROL_ADDR_WIDTH
    assert max(offsets) + 4 > 1 << (MIN_ADDR_WIDTH - 1)
    assert all(reg.access in {"RW", "RO", "W1C"} for reg in REGISTERS)


def test_fields_lie_in_their_register_and_do_not_overlap():
    names = {reg.name for reg in REGISTERS}
    bits: dict[str, set[int]] = {}
    for f in FIELDS:
        assert f.register in names
        assert 0 <= f.bit and f.bit + f.width <= 32
        assert f.access in {"W1P", "RO", "RW", "W1C"}
        span = set(range(f.bit, f.bit + f.width))
        assert not bits.setdefault(f.register, set()) & span, f
        bits[f.register] |= span


def test_64_bit_values_are_lo_hi_pairs():
    for reg in REGISTERS:
        if reg.name.endswith("_LO"):
            assert offset(reg.name[:-3] + "_HI") == reg.offset + 4


def test_offset_of_an_unknown_register_is_a_key_error():
    assert offset("CTRL") == 0
    with pytest.raises(KeyError):
        offset("NOPE")


def test_error_codes_are_direction_and_status_or_the_engines_own():
    for code in ERROR_CODES:
        if code < 8:
            assert code & 3 and ("read" if code < 4 else "write") in ERROR_CODES[code]
    assert ERROR_BAD_DESCRIPTOR in ERROR_CODES and ERROR_BAD_DESCRIPTOR >= 8
