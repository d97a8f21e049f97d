"""Placement (:mod:`fcircnn.models.placement`): which core runs which layer."""

from __future__ import annotations

import copy
from pathlib import Path

from config_cases import (
    ACC,
    NET,
    acc_error,
    assert_line,
    write,
)

from fcircnn.models.config import (
    builtin_path,
    load_accelerator,
)


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
