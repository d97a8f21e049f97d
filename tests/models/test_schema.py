"""The schema (:mod:`fcircnn.models.schema`): every key's type, range and cross-field rule,
reported with its file and key path."""

from __future__ import annotations

import copy
from pathlib import Path

from config_cases import (
    ACC,
    NET,
    acc_error,
    assert_line,
    core_with,
    layer_with,
    net_error,
    net_with,
)


def test_unknown_key_top_level(tmp_path: Path) -> None:
    data = net_with(nmae="x")
    file, err = net_error(tmp_path, data)
    assert_line(err, file, "nmae", "unknown key", "did you mean 'name'",
                "allowed keys: name, input, classes, block_size, layers")


def test_unknown_key_nested(tmp_path: Path) -> None:
    data = copy.deepcopy(NET)
    data["layers"][1]["kernal"] = 3
    data["layers"][0]["pool"]["strides"] = 2
    data["input"]["frames"] = 16
    file, err = net_error(tmp_path, data)
    assert_line(err, file, "layers[1] (c2).kernal", "unknown key", "'kernel'", "out_channels")
    assert_line(err, file, "layers[0] (c1).pool.strides", "unknown key",
                "allowed keys: window, stride, padding")
    assert_line(err, file, "input.frames", "unknown key", "channels, depth, height, width")


def test_fc_and_gap_reject_conv_keys(tmp_path: Path) -> None:
    file, err = net_error(tmp_path, layer_with(2, kernel=[1, 1, 1]))
    assert_line(err, file, "layers[2] (fc).kernel", "unknown key", "out_channels")
    data = copy.deepcopy(NET)
    data["layers"].insert(2, {"name": "g", "type": "gap", "out_channels": 16})
    file, err = net_error(tmp_path, data)
    assert_line(err, file, "layers[2] (g).out_channels", "unknown key",
                "allowed keys: name, block_size, input, type")


def test_unknown_key_accelerator(tmp_path: Path) -> None:
    file, err = acc_error(tmp_path, core_with(tx=4))
    assert_line(err, file, "cores[0] (main).tx", "unknown key", "tn, tm, td, tr, tc")


def test_wrong_type_string_for_int(tmp_path: Path) -> None:
    file, err = net_error(tmp_path, layer_with(0, out_channels="64"))
    assert_line(err, file, "layers[0] (c1).out_channels", "must be an integer",
                "the string '64'")
    file, err = net_error(tmp_path, layer_with(1, kernel=[3, "3", 3]))
    assert_line(err, file, "layers[1] (c2).kernel[1]", "must be an integer", "'3'")
    assert "YAML reads" not in str(err)  # quoted digits get no hint


def test_yaml_1_1_exponents_get_a_hint(tmp_path: Path) -> None:
    # YAML 1.1 (PyYAML) reads 2e2 and 1e-3 as strings: a float needs a dot and a signed
    # exponent
    file, err = net_error(tmp_path, layer_with(0, out_channels="6e1"))
    assert_line(err, file, "layers[0] (c1).out_channels", "the string '6e1'",
                "YAML reads 6e1 as text; write 60")
    data = copy.deepcopy(ACC)
    data.update(clock_mhz="2e2")
    file, err = acc_error(tmp_path, data)
    assert_line(err, file, "clock_mhz", "must be a number", "e.g. 200.0")
    data.update(clock_mhz="1.5e3")
    file, err = acc_error(tmp_path, data)
    assert_line(err, file, "clock_mhz", "e.g. 1500.0")
    file, err = net_error(tmp_path, layer_with(0, out_channels="1:4"))
    assert_line(err, file, "layers[0] (c1).out_channels", "the string '1:4'", "base 60")
    file, err = net_error(tmp_path, layer_with(0, out_channels="010"))
    assert_line(err, file, "layers[0] (c1).out_channels", "the string '010'", "octal")


def test_wrong_type_bool_for_int(tmp_path: Path) -> None:
    file, err = net_error(tmp_path, net_with(classes=True))
    assert_line(err, file, "classes", "must be an integer", "a boolean (true)")
    file, err = net_error(tmp_path, layer_with(0, kernel=True))
    assert_line(err, file, "layers[0] (c1).kernel", "one integer or a list of 3 integers")
    file, err = net_error(tmp_path, layer_with(0, cbn="yes"))
    assert_line(err, file, "layers[0] (c1).cbn", "must be true or false", "'yes'")
    file, err = acc_error(tmp_path, core_with(td=2.5))
    assert_line(err, file, "cores[0] (main).td", "must be an integer", "2.5")


def test_wrong_vector_length(tmp_path: Path) -> None:
    file, err = net_error(tmp_path, layer_with(0, stride=[1, 2]))
    assert_line(err, file, "layers[0] (c1).stride", "list of 3 integers [d, r, c]", "2 entries")


def test_out_of_range(tmp_path: Path) -> None:
    file, err = net_error(tmp_path, layer_with(0, out_channels=0))
    assert_line(err, file, "layers[0] (c1).out_channels", "must be >= 1, not 0")
    file, err = net_error(tmp_path, layer_with(1, kernel=[3, 0, 3], padding=[1, -1, 1]))
    assert_line(err, file, "layers[1] (c2).kernel[1]", "must be >= 1, not 0")
    assert_line(err, file, "layers[1] (c2).padding[1]", "must be >= 0, not -1")
    file, err = net_error(tmp_path, net_with(layers=[]))
    assert_line(err, file, "layers", "at least 1")
    data = copy.deepcopy(ACC)
    data.update(clock_mhz=0, address_width=16, axi_ports=5)
    file, err = acc_error(tmp_path, data)
    assert_line(err, file, "clock_mhz", "[1, 1000]", "not 0")
    assert_line(err, file, "address_width", "32..64", "not 16")
    assert_line(err, file, "axi_ports", "allowed values are 1, 2, 3, 4", "not 5")
    for tiny in (1e-320, 0.5):  # a positive clock below 1 MHz is a typo, not a design
        data.update(clock_mhz=tiny, address_width=40, axi_ports=1)
        file, err = acc_error(tmp_path, data)
        assert_line(err, file, "clock_mhz", "[1, 1000]", f"not {tiny}")


def test_missing_key_and_bad_layer_type(tmp_path: Path) -> None:
    data = copy.deepcopy(NET)
    del data["classes"]
    data["layers"][0]["type"] = "pool"
    del data["layers"][1]["type"]
    del data["layers"][2]["out_channels"]
    file, err = net_error(tmp_path, data)
    assert_line(err, file, "classes", "required key missing")
    assert_line(err, file, "layers[0] (c1).type", "must be one of conv, fc, gap", "'pool'")
    assert_line(err, file, "layers[1] (c2).type", "required key missing", "conv, fc or gap")
    assert_line(err, file, "layers[2] (fc).out_channels", "required key missing")


def test_identifier_names(tmp_path: Path) -> None:
    file, err = net_error(tmp_path, layer_with(0, name="conv 1"))
    assert_line(err, file, "layers[0] (conv 1).name", "must be an identifier", "'conv 1'")


def test_block_size_network(tmp_path: Path) -> None:
    file, err = net_error(tmp_path, net_with(block_size=12))
    assert_line(err, file, "block_size", "B must be an even power of two: 4, 8 or 16, not 12")
    file, err = net_error(tmp_path, layer_with(0, block_size=6))
    assert_line(err, file, "layers[0] (c1).block_size", "4, 8 or 16, not 6")


def test_block_size_accelerator(tmp_path: Path) -> None:
    data = copy.deepcopy(ACC)
    data["block_size"] = 32
    file, err = acc_error(tmp_path, data)
    assert_line(err, file, "block_size", "B must be an even power of two: 4, 8 or 16, not 32")


def test_block_size_accelerator_differs_from_network(tmp_path: Path) -> None:
    data = copy.deepcopy(ACC)
    data["block_size"] = 4
    file, err = acc_error(tmp_path, data)
    assert_line(err, file, "block_size", "must equal every layer's block size", "'c1'", "B = 8")


def test_tn_not_multiple_of_b(tmp_path: Path) -> None:
    file, err = acc_error(tmp_path, core_with(tn=12))
    assert_line(err, file, "cores[0] (main).tn", "Tn must be a multiple of B (8), not 12")


def test_tm_not_a_whole_slot_group(tmp_path: Path) -> None:
    file, err = acc_error(tmp_path, core_with(tm=24))
    assert_line(err, file, "cores[0] (main).tm",
                "Tm must be a multiple of 16 (whole output slot groups of 16 channels, output "
                "blocks in DSP pairs of 2*B), not 24")


def test_tn_above_16_not_a_whole_slot_group(tmp_path: Path) -> None:
    # The rule the engine is built on, checked by the schema (fcircnn check refuses it).
    file, err = acc_error(tmp_path, core_with(tn=24))
    assert_line(err, file, "cores[0] (main).tn",
                "Tn must be a multiple of 16 above 16 (whole input slot groups), not 24")


def test_unroll(tmp_path: Path) -> None:
    file, err = acc_error(tmp_path, core_with(unroll=["td", "tm"]))
    assert_line(err, file, "cores[0] (main).unroll", "must contain tn and tm", "missing tn",
                "td, tr, tc, tn, tm")
    file, err = acc_error(tmp_path, core_with(unroll=["tn", "tm", "tx"]))
    assert_line(err, file, "cores[0] (main).unroll[2]", "must be one of td, tr, tc, tn", "'tx'")
    file, err = acc_error(tmp_path, core_with(unroll=["tn", "tm", "tn"]))
    assert_line(err, file, "cores[0] (main).unroll", "duplicate loop tn")


def test_bad_bus_width(tmp_path: Path) -> None:
    data = copy.deepcopy(ACC)
    data["bus_width"] = 64
    file, err = acc_error(tmp_path, data)
    assert_line(err, file, "bus_width", "only 128 is supported", "not 64")


def test_duplicate_core_names(tmp_path: Path) -> None:
    data = copy.deepcopy(ACC)
    data["cores"].append(copy.deepcopy(data["cores"][0]))
    file, err = acc_error(tmp_path, data)
    assert_line(err, file, "cores[1] (main).name", "duplicate core name 'main'", "cores[0]")
