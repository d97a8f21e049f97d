"""Loading (:mod:`fcircnn.models.loading`): the accelerator's cross checks against its network,
YAML syntax and files."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from config_cases import (
    ACC,
    NET,
    acc_error,
    assert_line,
    net_error,
    net_with,
    write,
)

from fcircnn.models.config import (
    ConfigError,
    NetworkConfig,
    load_accelerator,
    load_network,
)


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
