"""Shared cases of the configuration tests (tests/models/test_config.py, test_schema.py,
test_resolve.py, test_loading.py, test_placement.py): a small valid network and accelerator,
writers and error helpers."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from fcircnn.models.config import (
    ConfigError,
    load_accelerator,
    load_network,
)

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
