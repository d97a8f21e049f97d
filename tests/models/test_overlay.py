"""The overlay's files (:mod:`fcircnn.models.overlay`): a whole Xilinx bitstream for the
accelerator's part and a hardware handoff with its IP are accepted; everything else is named."""

from __future__ import annotations

import pytest
from overlay_files import ZCU102_PART, bit_bytes, hwh_text, write_overlay

from fcircnn.models.overlay import BitstreamError, overlay_problem, read_bit_header

IP = "fcircnn_accel_0"


def test_a_vivado_overlay_for_the_part_is_accepted(tmp_path):
    bit = write_overlay(tmp_path)
    assert overlay_problem(bit, ZCU102_PART, IP) is None
    # The spellings a .bit or .hwh uses for the part (full, die and package, die alone).
    for spelling in ("xczu9egffvb1156", "zu9eg-ffvb1156-2-e", "XCZU9EG-FFVB1156-2-I"):
        bit.write_bytes(bit_bytes(spelling))
        assert overlay_problem(bit, ZCU102_PART, IP) is None


def test_the_header_fields_are_read():
    data = bit_bytes(data_length=100, design="d")
    header = read_bit_header(data)
    assert header.design.startswith("d;UserID=") and header.part == ZCU102_PART
    assert (header.date, header.time, header.data_length) == ("2026/11/28", "12:00:00", 100)
    assert len(data) == header.header_length + 100


@pytest.mark.parametrize(("mangle", "fragment"), [
    (lambda b: b"", "an empty file"),
    (lambda b: b"bit", "not a Xilinx bitstream"),
    (lambda b: b"\x7fELF" + b[4:], "not a Xilinx bitstream"),
    (lambda b: b[:20], "is cut short"),
    (lambda b: b[:-1], "announces 4,096 bytes of configuration data, the file holds 4,095"),
    (lambda b: b + b"\0", "the file holds 4,097"),
    (lambda b: bit_bytes("xczu3eg-sbva484-1-e"), ("built for xczu3eg-sbva484-1-e, not for the "
                                                 "accelerator's xczu9eg-ffvb1156-2-e")),
    (lambda b: bit_bytes("xczu9"), "built for xczu9,"),
    (lambda b: bit_bytes("xczu9eg-ffvb1156-2-e-x"), "built for xczu9eg-ffvb1156-2-e-x,"),
    (lambda b: bit_bytes("xczu9egé"), "built for xczu9eg\\xc3\\xa9,"),  # escaped
    (lambda b: bit_bytes("xczu9eg-sfvc784-2-e"), "built for xczu9eg-sfvc784-2-e,"),
    (lambda b: b[:b.index(b"e\x00\x00\x10")] + b"e\x00\x00\x00\x00",
     "its header announces no configuration data"),
    (lambda b: b.replace(b"\xaa\x99\x55\x66", b"\xaa\x99\x55\x67", 1), "no sync word"),
])
def test_a_bad_bitstream_is_named(tmp_path, mangle, fragment):
    bit = write_overlay(tmp_path)
    bit.write_bytes(mangle(bit.read_bytes()))
    problem = overlay_problem(bit, ZCU102_PART, IP)
    assert problem.startswith(f"{bit}: ") and fragment in problem


@pytest.mark.parametrize(("text", "fragment"), [
    ("", "not a hardware handoff (XML"),
    ("<a><b></a>", "not a hardware handoff (XML: mismatched tag"),
    ("<project/>", "its root is <project>, not <EDKSYSTEM>"),
    (hwh_text(modules=("other_ip_0",)), ("has no fcircnn_accel_0 (the accelerator's IP; it has "
                                        "other_ip_0)")),
    (hwh_text(device="xczu3eg"), "describes a design for xczu3eg"),
])
def test_a_bad_handoff_is_named(tmp_path, text, fragment):
    bit = write_overlay(tmp_path)
    bit.with_suffix(".hwh").write_text(text)
    problem = overlay_problem(bit, ZCU102_PART, IP)
    assert problem.startswith(f"{bit.with_suffix('.hwh')}: ") and fragment in problem


def test_missing_files_and_folders_are_named(tmp_path):
    bit = write_overlay(tmp_path)
    bit.with_suffix(".hwh").unlink()
    assert overlay_problem(bit, ZCU102_PART, IP).startswith(f"{bit.with_suffix('.hwh')}: not "
                                                            "found")
    bit.with_suffix(".hwh").mkdir()
    assert "not a regular file" in overlay_problem(bit, ZCU102_PART, IP)
    assert "not found" in overlay_problem(tmp_path / "nope.bit", ZCU102_PART, IP)


def test_read_bit_header_refuses_what_is_not_one():
    with pytest.raises(BitstreamError, match="no field 'e'"):
        read_bit_header(bit_bytes()[:bit_bytes().index(b"e\x00\x00\x10")])
