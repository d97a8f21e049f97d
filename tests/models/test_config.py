"""Tests for fcircnn.models.config: shipped files, shape inference and every error class."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from fcircnn.models.config import (
    AcceleratorConfig,
    ConfigError,
    NetworkConfig,
    Problem,
    ResolvedLayer,
    builtin_path,
    load_accelerator,
    load_network,
)
from fcircnn.models.errors import describe_value, label, show

C3D_OPS = 77_094_756_352
R3D18_OPS = 16_615_707_648

# A small valid network: conv with pool, a residual, fc head.
NET: dict[str, Any] = {
    "name": "tiny",
    "input": {"channels": 3, "depth": 4, "height": 8, "width": 8},
    "classes": 10,
    "block_size": 8,
    "layers": [
        {"name": "c1", "type": "conv", "out_channels": 16, "kernel": [3, 3, 3],
         "padding": [1, 1, 1], "cbn": True, "crelu": True,
         "pool": {"window": [1, 2, 2]}},
        {"name": "c2", "type": "conv", "out_channels": 16, "kernel": 3, "padding": 1,
         "cbn": True, "crelu": True, "residual": "c1"},
        {"name": "fc", "type": "fc", "out_channels": 10},
    ],
}

ACC: dict[str, Any] = {
    "name": "tiny_acc",
    "network": "net.yaml",
    "device": {"part": "xczu9eg-ffvb1156-2-e",
               "resources": {"dsp": 2520, "bram36": 912, "lut": 274080, "ff": 548160}},
    "clock_mhz": 200,
    "block_size": 8,
    "bus_width": 128,
    "cores": [
        {"name": "main", "tn": 16, "tm": 32, "td": 2, "tr": 4, "tc": 4,
         "unroll": ["tn", "tm"], "max_kernel": [3, 3, 3]},
    ],
}


def write(path: Path, data: Any) -> Path:
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
    return path


def net_error(tmp_path: Path, data: Any) -> tuple[str, ConfigError]:
    path = write(tmp_path / "net.yaml", data)
    with pytest.raises(ConfigError) as info:
        load_network(path)
    return str(path), info.value


def acc_error(tmp_path: Path, data: Any, net: Any = NET) -> tuple[str, ConfigError]:
    write(tmp_path / "net.yaml", net)
    path = write(tmp_path / "acc.yaml", data)
    with pytest.raises(ConfigError) as info:
        load_accelerator(path)
    return str(path), info.value


def net_with(**changes: Any) -> dict[str, Any]:
    data = copy.deepcopy(NET)
    data.update(changes)
    return data


def layer_with(index: int, **changes: Any) -> dict[str, Any]:
    data = copy.deepcopy(NET)
    data["layers"][index].update(changes)
    return data


def core_with(**changes: Any) -> dict[str, Any]:
    data = copy.deepcopy(ACC)
    data["cores"][0].update(changes)
    return data


def assert_line(err: ConfigError, file: str, key: str, *fragments: str) -> None:
    """Some line of ``err`` is ``file: key: ...`` and contains every fragment."""
    prefix = f"{file}: {key}: " if key else f"{file}: "
    lines = [line for line in str(err).splitlines() if line.startswith(prefix)]
    assert lines, f"no line starting with {prefix!r} in:\n{err}"
    assert any(all(f in line for f in fragments) for line in lines), \
        f"{fragments} not in {lines}"


# --------------------------------------------------------------------------------------------
# Shipped files


@pytest.mark.parametrize("name", ["c3d", "r3d18"])
def test_builtin_networks_load(name: str) -> None:
    net = load_network(builtin_path(name))
    assert isinstance(net, NetworkConfig)
    assert net.name == name
    assert net.resolve() == net.resolved
    assert all(isinstance(r, ResolvedLayer) for r in net.resolved)
    assert net.resolved[-1].out_channels == net.classes == 101


@pytest.mark.parametrize("name", ["c3d_zcu102", "r3d18_zcu102", "spectral_c3d_zcu102"])
def test_builtin_accelerators_load(name: str) -> None:
    acc = load_accelerator(builtin_path(name))
    assert isinstance(acc, AcceleratorConfig)
    assert acc.path == builtin_path(name)
    assert acc.network.path == builtin_path(name.removesuffix("_zcu102"))
    assert (acc.block_size, acc.clock_mhz, acc.bus_width, acc.address_width) == (8, 200, 128, 40)
    assert acc.device.resources.dsp == 2520


def test_builtin_path_forms() -> None:
    assert builtin_path("c3d") == builtin_path("c3d.yaml")
    assert builtin_path("c3d_zcu102").name == "c3d_zcu102.yaml"
    assert builtin_path("c3d").is_file()
    with pytest.raises(ConfigError, match=r"available: .*c3d.*r3d18"):
        builtin_path("vgg16")


def test_c3d_shapes() -> None:
    net = load_network(builtin_path("c3d"))
    assert [r.name for r in net.resolved] == [
        "conv1a", "conv2a", "conv3a", "conv3b", "conv4a", "conv4b", "conv5a", "conv5b",
        "fc6", "fc7", "fc8"]
    conv1a = net.layer("conv1a")
    assert conv1a.input is None
    assert (conv1a.in_channels, conv1a.padded_in_channels) == (3, 8)
    assert conv1a.conv_shape == (16, 112, 112) and conv1a.out_shape == (16, 56, 56)
    assert net.layer("conv2a").out_shape == (8, 28, 28)
    conv5b = net.layer("conv5b")
    assert conv5b.conv_shape == (2, 7, 7)
    assert conv5b.pool is not None and conv5b.pool.padding == (0, 1, 1)
    assert conv5b.out_dims == (512, 1, 4, 4)
    fc6 = net.layer("fc6")
    assert (fc6.kind, fc6.in_channels, fc6.kernel, fc6.in_shape) == ("fc", 512, (1, 4, 4),
                                                                       (1, 4, 4))
    assert (fc6.stride, fc6.padding, fc6.out_dims) == ((1, 1, 1), (0, 0, 0), (4096, 1, 1, 1))
    assert fc6.cbn and fc6.crelu
    fc8 = net.layer("fc8")
    assert (fc8.in_channels, fc8.out_channels, fc8.cbn, fc8.crelu) == (4096, 101, False, False)
    assert fc8.padded_out_channels == 104
    assert all(r.cbn and r.crelu and r.kernel == (3, 3, 3) and r.padding == (1, 1, 1)
               for r in net.resolved if r.kind == "conv")


def test_r3d18_shapes() -> None:
    net = load_network(builtin_path("r3d18"))
    conv1 = net.layer("conv1")
    assert (conv1.kernel, conv1.stride, conv1.padding) == ((7, 7, 7), (1, 2, 2), (3, 3, 3))
    assert (conv1.out_channels, *conv1.conv_shape) == (64, 16, 56, 56)
    assert conv1.out_dims == (64, 8, 28, 28)
    assert net.layer("l1b1_conv2").residual == "conv1"
    down = net.layer("l2b1_down")
    assert (down.input, down.kernel, down.stride, down.crelu, down.cbn) == (
        "l1b2_conv2", (1, 1, 1), (2, 2, 2), False, True)
    assert down.out_dims == (128, 4, 14, 14)
    conv2 = net.layer("l2b1_conv2")
    assert (conv2.input, conv2.residual) == ("l2b1_conv1", "l2b1_down")
    assert net.layer("l2b2_conv2").residual == "l2b1_conv2"
    assert net.layer("l4b2_conv2").out_dims == (512, 1, 4, 4)
    gap = net.layer("gap")
    assert (gap.kind, gap.in_channels, gap.in_shape, gap.out_dims) == (
        "gap", 512, (1, 4, 4), (512, 1, 1, 1))
    assert (gap.kernel, gap.dense_ops, gap.dense_params, gap.circulant_params) == (
        (1, 4, 4), 0, 0, 0)
    fc = net.resolved[-1]
    assert (fc.kind, fc.in_channels, fc.out_channels, fc.cbn, fc.crelu) == (
        "fc", 512, 101, False, False)
    convs = [r for r in net.resolved if r.kind == "conv"]
    assert len(convs) == 1 + 16 + 3


def test_gop_totals() -> None:
    c3d = load_network(builtin_path("c3d"))
    r3d18 = load_network(builtin_path("r3d18"))
    assert c3d.dense_ops == sum(r.dense_ops for r in c3d.resolved) == C3D_OPS
    assert r3d18.dense_ops == R3D18_OPS
    assert c3d.dense_ops == pytest.approx(77.1e9, rel=0.01)
    assert r3d18.dense_ops == pytest.approx(16.6e9, rel=0.01)
    conv2a = c3d.layer("conv2a")
    assert conv2a.dense_ops == 2 * 128 * 64 * 27 * 16 * 56 * 56
    assert conv2a.dense_params == 128 * 64 * 27
    assert conv2a.circulant_params == conv2a.dense_params // 8
    conv1a = c3d.layer("conv1a")  # N = 3 padded to 8 for storage, real N for ops
    assert conv1a.circulant_params == 64 * 8 * 27 // 8
    assert conv1a.dense_ops == 2 * 64 * 3 * 27 * 16 * 112 * 112


def test_core_for() -> None:
    acc = load_accelerator(builtin_path("r3d18_zcu102"))
    net = acc.network
    assert acc.core_for(net.layer("conv1")).name == "spatial"
    assert acc.core_for(net.layer("l2b1_conv1")).name == "spatial"
    assert acc.core_for(net.layer("l2b1_down")).name == "pointwise"
    assert acc.core_for(net.layer("fc")).name == "pointwise"
    assert acc.core_for(net.layer("gap")).name == "pointwise"
    spatial = acc.cores[1]
    assert (spatial.tn, spatial.tm, spatial.td, spatial.unroll) == (32, 32, 2, ("td", "tn", "tm"))
    c3d = load_accelerator(builtin_path("c3d_zcu102"))
    assert {c3d.core_for(r).name for r in c3d.network.resolved} == {"main"}


def test_tiny_network_and_defaults(tmp_path: Path) -> None:
    net = load_network(write(tmp_path / "net.yaml", NET))
    c1, c2, fc = net.resolved
    assert c1.pool is not None
    assert (c1.pool.stride, c1.pool.padding) == ((1, 2, 2), (0, 0, 0))
    assert c1.stride == (1, 1, 1) and c2.kernel == (3, 3, 3)
    assert (c2.input, c2.residual, c2.pool) == ("c1", "c1", None)
    assert fc.in_shape == (4, 4, 4) and fc.kernel == (4, 4, 4)
    assert net.path == tmp_path / "net.yaml"


def test_config_is_frozen(tmp_path: Path) -> None:
    net = load_network(write(tmp_path / "net.yaml", NET))
    with pytest.raises(Exception, match="frozen"):
        net.classes = 5  # type: ignore[misc]
    with pytest.raises(AttributeError):
        net.resolved[0].name = "x"  # type: ignore[misc]


# --------------------------------------------------------------------------------------------
# Errors: schema


def test_problem_format() -> None:
    err = ConfigError("a.yaml", [Problem("x.y", "bad"), Problem("", "whole file")])
    assert str(err) == "a.yaml: x.y: bad\na.yaml: whole file"
    assert err.file == "a.yaml" and len(err.problems) == 2


@pytest.mark.parametrize(("value", "shown"), [
    (10 ** 29, "1" + "0" * 29), (-(10 ** 30) + 1, "-" + "9" * 30), (10 ** 30, "a 31-digit integer"),
    (-(10 ** 3999), "a 4,000-digit integer"), (1 << 20000, "a 6,021-digit integer"),
    (0, "0"), (True, "true")], ids=lambda v: v if isinstance(v, str) else "")
def test_show_names_a_huge_integer_by_its_digits(value: int, shown: str) -> None:
    # Python's str() refuses integers beyond 4,300 digits; a clipped number would mislead.
    assert show(value) == shown
    assert describe_value(value) == (shown if shown.startswith("a ") else
                                     f"a boolean ({shown})" if shown == "true" else
                                     f"the integer {shown}")


def test_label_escapes_what_a_terminal_would_run() -> None:
    assert label("conv1") == "conv1"
    assert label("c\x1b[31m2") == "'c\\x1b[31m2'"
    assert label("x" * 100) == show("x" * 100) and len(label("x" * 100)) == 80


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


# --------------------------------------------------------------------------------------------
# Errors: network semantics


def test_padding_not_below_kernel(tmp_path: Path) -> None:
    file, err = net_error(tmp_path, layer_with(1, kernel=[3, 1, 3], padding=[1, 1, 1]))
    assert_line(err, file, "layers[1] (c2).padding", "padding >= kernel", "axis H",
                "must be < kernel")


def test_pool_padding_not_below_window(tmp_path: Path) -> None:
    file, err = net_error(tmp_path, layer_with(0, pool={"window": [1, 2, 2],
                                                         "padding": [0, 2, 0]}))
    assert_line(err, file, "layers[0] (c1).pool.padding", "pool padding >= window", "axis H",
                "must be < window")
    file, err = net_error(tmp_path, layer_with(0, pool={"window": [0, 2, 2]}))
    assert_line(err, file, "layers[0] (c1).pool.window[0]", "must be >= 1, not 0")


def test_empty_output(tmp_path: Path) -> None:
    file, err = net_error(tmp_path, layer_with(0, kernel=[5, 3, 3], padding=0, pool=None))
    assert_line(err, file, "layers[0] (c1).kernel", "output would be empty", ">= 1")


def test_duplicate_layer_names(tmp_path: Path) -> None:
    file, err = net_error(tmp_path, layer_with(1, name="c1", residual=None))
    assert_line(err, file, "layers[1] (c1).name", "duplicate layer name 'c1'", "layers[0]",
                "unique")


def test_unknown_reference(tmp_path: Path) -> None:
    file, err = net_error(tmp_path, layer_with(1, input="c0", residual="cc1"))
    assert_line(err, file, "layers[1] (c2).input", "unknown layer 'c0'", "earlier layer: c1")
    assert_line(err, file, "layers[1] (c2).residual", "unknown layer 'cc1'",
                "did you mean 'c1'")


def test_forward_reference(tmp_path: Path) -> None:
    file, err = net_error(tmp_path, layer_with(1, input="fc", residual="c2"))
    assert_line(err, file, "layers[1] (c2).input", "forward reference", "layers[2]",
                "earlier layer: c1")
    assert_line(err, file, "layers[1] (c2).residual", "its own output")


def test_residual_shape_mismatch(tmp_path: Path) -> None:
    file, err = net_error(tmp_path, layer_with(1, out_channels=32))
    assert_line(err, file, "layers[1] (c2).residual", "shape mismatch", "16x4x4x4",
                "32x4x4x4", "before pool")
    file, err = net_error(tmp_path, layer_with(1, stride=[1, 2, 2]))
    assert_line(err, file, "layers[1] (c2).residual", "16x4x4x4", "16x4x2x2")


def test_block_size_mismatch_between_layers(tmp_path: Path) -> None:
    file, err = net_error(tmp_path, layer_with(1, block_size=16))
    assert_line(err, file, "layers[1] (c2).block_size", "differs from B = 8 of 'c1'",
                "different FFTs")
    data = copy.deepcopy(NET)
    data["layers"][1].update(block_size=16, input=None, residual=None)
    data["layers"].insert(1, {"name": "c1b", "type": "conv", "out_channels": 16, "kernel": 1,
                              "block_size": 16, "input": "c1"})
    data["layers"][2]["residual"] = "c1"
    file, err = net_error(tmp_path, data)
    assert_line(err, file, "layers[1] (c1b).block_size", "differs from B = 8 of 'c1'")


def test_last_layer_not_classes(tmp_path: Path) -> None:
    file, err = net_error(tmp_path, net_with(classes=101))
    assert_line(err, file, "layers[2] (fc).out_channels", "classes = 101", "not 10")
    data = copy.deepcopy(NET)
    data["layers"][2] = {"name": "g", "type": "gap"}
    file, err = net_error(tmp_path, data)
    assert_line(err, file, "classes", "last layer 'g' (16)", "not 10")


def test_many_problems_reported_at_once(tmp_path: Path) -> None:
    data = copy.deepcopy(NET)
    data["layers"][0]["padding"] = [3, 3, 3]
    data["layers"][2]["input"] = "nope"
    file, err = net_error(tmp_path, data)
    assert len(err.problems) == 2
    assert err.file == file


# --------------------------------------------------------------------------------------------
# Errors: accelerator cross checks and files


def test_layer_no_core_can_run(tmp_path: Path) -> None:
    data = copy.deepcopy(ACC)
    data["network"] = str(builtin_path("r3d18"))
    data["cores"][0].update(max_kernel=[3, 3, 3], max_stride=[2, 1, 2])
    file, err = acc_error(tmp_path, data)
    assert_line(err, file, "cores", "no core can run layer 'conv1'",
                "kernel 7x7x7 > max_kernel 3x3x3", "stride 1x2x2 > max_stride 2x1x2")
    assert_line(err, file, "cores", "'l2b1_down'", "stride 2x2x2 > max_stride 2x1x2")
    data["cores"][0].update(max_kernel=7, max_stride=2, max_pool_window=[2, 2, 2])
    file, err = acc_error(tmp_path, data)
    assert_line(err, file, "cores", "'conv1'", "pool window 3x3x3 > max_pool_window 2x2x2")


def test_fc_counts_as_pointwise(tmp_path: Path) -> None:
    data = copy.deepcopy(ACC)
    data["cores"].insert(0, {"name": "pw", "tn": 8, "tm": 16, "td": 1, "tr": 1, "tc": 1,
                             "unroll": ["tn", "tm"], "max_kernel": 1, "max_pool_window": 1})
    write(tmp_path / "net.yaml", NET)
    acc = load_accelerator(write(tmp_path / "acc.yaml", data))
    net = acc.network
    assert [acc.core_for(r).name for r in net.resolved] == ["main", "main", "pw"]
    assert net.layer("fc").kernel == (4, 4, 4)


def test_yaml_syntax_error(tmp_path: Path) -> None:
    text = "name: tiny\nclasses: 10\nlayers: [\n  {name: a, type: conv\n"
    file, err = net_error(tmp_path, text)
    assert file in str(err)
    assert "YAML syntax error" in str(err)
    assert err.problems[0].key.startswith("line ")
    text = "name: tiny\nclasses: 10\ninput: {channels: 3}: 4\n"
    file, err = net_error(tmp_path, text)
    assert_line(err, file, "line 3, column 21", "YAML syntax error")


def test_duplicate_yaml_key(tmp_path: Path) -> None:
    file, err = net_error(tmp_path, "name: a\nclasses: 10\nclasses: 11\n")
    assert_line(err, file, "line 3, column 1", "duplicate key 'classes'", "line 2")


def test_yaml_merge_keys_may_be_overridden(tmp_path: Path) -> None:
    text = """\
name: merged
input: {channels: 3, depth: 4, height: 8, width: 8}
classes: 10
layers:
  - &c3 {name: c1, type: conv, out_channels: 16, kernel: 3, padding: 1}
  - {<<: *c3, name: c2, kernel: 1, padding: 0}
  - {name: fc, type: fc, out_channels: 10}
"""
    net = load_network(write(tmp_path / "net.yaml", text))
    assert [r.kernel for r in net.resolved[:2]] == [(3, 3, 3), (1, 1, 1)]
    assert net.resolved[1].out_channels == 16


def test_missing_files(tmp_path: Path) -> None:
    path = tmp_path / "absent.yaml"
    with pytest.raises(ConfigError) as info:
        load_network(path)
    assert str(info.value) == f"{path}: file not found"
    data = copy.deepcopy(ACC)
    data["network"] = "missing.yaml"
    file, err = acc_error(tmp_path, data)
    assert_line(err, file, "network", "network file",
                str(tmp_path / "missing.yaml"), ": not found (paths are relative to this file)")
    for network, what in ((".", "a folder"), ("/dev/null", "not a regular file"),
                          ("a\0b.yaml", "not a valid file name"), ("x" * 300, "not found")):
        data["network"] = network
        file, err = acc_error(tmp_path, data)
        assert_line(err, file, "network", what)
        assert "\0" not in str(err) and len(str(err)) < 300  # escaped and clipped


def test_invalid_network_reported_against_network_file(tmp_path: Path) -> None:
    _, err = acc_error(tmp_path, ACC, net=net_with(classes=3))
    assert err.file == str(tmp_path / "net.yaml")
    assert "classes = 3" in str(err)


def test_top_level_not_a_mapping(tmp_path: Path) -> None:
    file, err = net_error(tmp_path, [NET])
    assert_line(err, file, "", "top level must be a mapping", "name, input", "a list")
    assert str(err).startswith(f"{file}: top level must be a mapping")
    file, err = net_error(tmp_path, "")
    assert "found null" in str(err)
    write(tmp_path / "net.yaml", NET)
    acc = write(tmp_path / "acc.yaml", "- a\n- b\n")
    with pytest.raises(ConfigError, match="top level must be a mapping with keys name, network"):
        load_accelerator(acc)


def test_model_validate_without_loader_still_checks_semantics() -> None:
    data = net_with(classes=3)
    with pytest.raises(ValueError, match="classes = 3"):
        NetworkConfig.model_validate(data)


# --------------------------------------------------------------------------------------------
# Time-domain layers: dense conv/fc, rfft and irfft (models/resolve.py layouts)

TIME_NET: dict[str, Any] = {
    "name": "stem_head",
    "input": {"channels": 3, "depth": 4, "height": 8, "width": 8},
    "classes": 10,
    "block_size": 8,
    "layers": [
        {"name": "stem", "type": "conv", "dense": True, "out_channels": 16, "kernel": 3,
         "padding": 1, "bias": True, "bn": True, "relu": True, "pool": {"window": [1, 2, 2]}},
        {"name": "fft", "type": "rfft"},
        {"name": "c2", "type": "conv", "out_channels": 16, "kernel": 3, "padding": 1,
         "cbn": True, "crelu": True},
        {"name": "ifft", "type": "irfft"},
        {"name": "g", "type": "gap"},
        {"name": "fc", "type": "fc", "dense": True, "out_channels": 10, "bias": True},
    ],
}


def time_layers(*layers: dict[str, Any]) -> dict[str, Any]:
    data = copy.deepcopy(TIME_NET)
    data["layers"] = list(layers)
    return data


def test_time_domain_layers_resolve_with_their_layouts(tmp_path: Path) -> None:
    net = load_network(write(tmp_path / "net.yaml", TIME_NET))
    got = [(r.name, r.in_layout, r.out_layout, r.dense, r.bias, r.cbn, r.crelu)
           for r in net.resolved]
    assert got == [("stem", "spread", "lanes", True, True, True, True),
                   ("fft", "lanes", "slots", False, False, False, False),
                   ("c2", "slots", "slots", False, False, True, True),
                   ("ifft", "slots", "deferred", False, False, False, False),
                   ("g", "deferred", "deferred", False, False, False, False),
                   ("fc", "deferred", "lane0", True, True, False, False)]
    stem, fc = net.layer("stem"), net.layer("fc")
    assert (stem.in_slots, stem.out_slots, fc.in_slots, fc.out_slots) == (12, 8, 8, 40)
    assert stem.dense_ops == 2 * 16 * 3 * 27 * 4 * 8 * 8
    assert stem.circulant_params == stem.dense_params == 16 * 3 * 27
    assert fc.accumulator_bound == 8 * 2 * 2 * 127**2  # B x the bound of each part
    assert net.layer("fft").dense_ops == 0


def test_the_paper_network_is_exactly_its_training_code(tmp_path: Path) -> None:
    net = load_network(builtin_path("spectral_c3d"))
    kinds = [(r.name, r.kind, r.dense) for r in net.resolved]
    assert kinds[:2] == [("conv1", "conv", True), ("fft", "rfft", False)]
    assert kinds[-3:] == [("ifft", "irfft", False), ("avgpool", "gap", False),
                          ("fc", "fc", True)]
    assert net.layer("fc").bias and net.layer("conv1").bias
    assert net.resolved[-1].out_layout == "lane0"


@pytest.mark.parametrize("layers, key, fragments", [
    # a block-circulant layer after a dense one without the rfft
    ([TIME_NET["layers"][0], TIME_NET["layers"][2]], "layers[1] (c2).input",
     ["reads slots", "'stem' is a time-domain map (lanes)", "put an rfft step"]),
    # a dense layer on slots
    ([TIME_NET["layers"][2], TIME_NET["layers"][5]], "layers[1] (fc).dense",
     ["network input or an irfft's output", "put an irfft step"]),
    # a dense layer on a dense layer's output
    ([TIME_NET["layers"][0], dict(TIME_NET["layers"][5], name="fc2")], "layers[1] (fc2).input",
     ["a time-domain map made on the accelerator"]),
    # an irfft of a time-domain map
    ([TIME_NET["layers"][0], TIME_NET["layers"][3]], "layers[1] (ifft).type",
     ["an irfft reads slots"]),
    # an rfft of slots
    ([TIME_NET["layers"][2], TIME_NET["layers"][1]], "layers[1] (fft).type",
     ["already slots"]),
])
def test_layouts_that_cannot_feed_a_layer_are_named(tmp_path: Path, layers, key,
                                                    fragments) -> None:
    data = time_layers(*copy.deepcopy(layers))
    data["classes"] = 16 if layers[-1]["type"] != "fc" else 10
    file, err = net_error(tmp_path, data)
    assert_line(err, file, key, *fragments)


def test_keys_of_the_other_domain_are_refused(tmp_path: Path) -> None:
    data = copy.deepcopy(TIME_NET)
    data["layers"][0].update(cbn=True, crelu=True)
    data["layers"][2].update(bias=True, relu=True)
    file, err = net_error(tmp_path, data)
    assert_line(err, file, "layers[0] (stem).cbn", "not allowed here", "bn and relu")
    assert_line(err, file, "layers[0] (stem).crelu", "not allowed here")
    assert_line(err, file, "layers[2] (c2).bias", "only a dense layer (dense: true)")
    assert_line(err, file, "layers[2] (c2).relu", "cbn and crelu")


def test_a_residual_from_a_time_domain_map_is_refused(tmp_path: Path) -> None:
    data = copy.deepcopy(TIME_NET)
    data["layers"][2]["residual"] = "stem"
    data["layers"][2]["pool"] = None
    file, err = net_error(tmp_path, data)
    assert_line(err, file, "layers[2] (c2).residual", "'stem' is a time-domain map (lanes)")
