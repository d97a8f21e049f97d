"""Resolution (:mod:`fcircnn.models.resolve`): the network's semantics (references, shapes,
residuals, block sizes, the classes) and the time-domain layers' layouts."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from config_cases import (
    NET,
    assert_line,
    layer_with,
    net_error,
    net_with,
    write,
)

from fcircnn.models.config import (
    builtin_path,
    load_network,
)


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
