"""Scaled-down networks (:mod:`fcircnn.models.scale`): legal, shapes, channel rule, errors."""

import pytest

from fcircnn.models.config import (
    AcceleratorConfig,
    ConfigError,
    NetworkConfig,
    builtin_path,
    load_accelerator,
    load_network,
)
from fcircnn.models.scale import (
    InputShapeError,
    check_input_shape,
    check_scale,
    min_input_shape,
    scale_accelerator,
    scale_channels,
    scale_network,
)

SCALES = (1, 2, 4, 8, 16)
ACCELERATORS = ("c3d_zcu102", "r3d18_zcu102")


@pytest.fixture(scope="module", params=ACCELERATORS)
def acc(request) -> AcceleratorConfig:
    return load_accelerator(builtin_path(request.param))


def _round_up(value, multiple):
    return -(-value // multiple) * multiple


@pytest.mark.parametrize("S", SCALES)
def test_scaled_accelerator_is_legal(acc, S):
    scaled = scale_accelerator(acc, S)
    net = scaled.network
    assert isinstance(scaled, AcceleratorConfig) and isinstance(net, NetworkConfig)
    # Validated like a file: the same strict model accepts its own YAML-shaped dump again.
    again = NetworkConfig.model_validate(net.model_dump(mode="json", by_alias=True,
                                                        exclude_unset=True))
    assert again.resolved == net.resolved
    assert [lay.name for lay in net.resolved] == [lay.name for lay in acc.network.resolved]
    for layer in net.resolved:
        assert min(layer.conv_shape) >= 1 and min(layer.out_shape) >= 1
        assert scaled.core_for(layer) == acc.core_for(acc.network.layer(layer.name))
    # The hardware is the same.
    assert scaled.cores == acc.cores
    assert (scaled.name, scaled.device, scaled.clock_mhz, scaled.block_size, scaled.bus_width,
            scaled.address_width) == (acc.name, acc.device, acc.clock_mhz, acc.block_size,
                                      acc.bus_width, acc.address_width)
    assert scaled.path == acc.path


def test_scale_one_is_equal(acc):
    assert scale_accelerator(acc, 1) == acc
    assert scale_network(acc.network, 1) == acc.network


@pytest.mark.parametrize("S", SCALES[1:])
def test_channel_rule(acc, S):
    full, net = acc.network, scale_accelerator(acc, S).network
    B = acc.block_size
    assert net.input.channels == full.input.channels  # e.g. 3 RGB channels kept
    assert net.name == f"{full.name}_s{S}"
    for old, new in zip(full.resolved, net.resolved, strict=True):
        if old.kind != "gap":
            assert new.out_channels == max(B, _round_up(-(-old.out_channels // S), B))
        assert new.out_channels % B == 0 and new.out_channels >= B
        assert new.kernel == old.kernel or old.kind in ("fc", "gap")
        assert (new.stride, new.padding, new.pool) == (old.stride, old.padding, old.pool)
        assert (new.input, new.residual, new.cbn, new.crelu) == (
            old.input, old.residual, old.cbn, old.crelu)
    assert net.classes == net.resolved[-1].out_channels == max(
        B, _round_up(-(-full.classes // S), B))
    assert net.dense_ops < full.dense_ops


@pytest.mark.parametrize("S", SCALES)
def test_input_shape_rule(acc, S):
    full, net = acc.network, scale_accelerator(acc, S).network
    lowest = min_input_shape(full)
    for axis, size in enumerate(full.input.shape):
        assert net.input.shape[axis] == max(lowest[axis], -(-size // S))
        assert net.input.shape[axis] <= size


def test_minimum_shapes_of_shipped_networks():
    # C3D: four pools halve D (H, W: five), the last with padding (0, 1, 1): 16 x 16 x 16.
    assert min_input_shape(load_network(builtin_path("c3d"))) == (16, 16, 16)
    # ResNet-18: padded convs and pools keep >= 1 voxel down to 1 x 1 x 1.
    assert min_input_shape(load_network(builtin_path("r3d18"))) == (1, 1, 1)
    # The paper's training code's C3D: C3D's pools; its rfft and irfft keep the map.
    assert min_input_shape(load_network(builtin_path("spectral_c3d"))) == (16, 16, 16)


def test_known_shapes():
    c3d = scale_accelerator(load_accelerator(builtin_path("c3d_zcu102")), 8).network
    assert c3d.input.shape == (16, 16, 16)
    assert [lay.out_channels for lay in c3d.resolved] == [8, 16, 32, 32, 64, 64, 64, 64, 512,
                                                          512, 16]
    assert c3d.layer("conv5b").out_shape == (1, 1, 1)
    assert c3d.layer("fc6").kernel == (1, 1, 1)
    r3d = scale_accelerator(load_accelerator(builtin_path("r3d18_zcu102")), 4).network
    assert r3d.input.shape == (4, 28, 28)
    assert r3d.layer("conv1").out_shape == (2, 7, 7)
    assert r3d.layer("l4b2_conv2").out_shape == (1, 1, 1)
    assert r3d.layer("gap").out_channels == 128 and r3d.classes == 32


@pytest.mark.parametrize("name", ["c3d", "r3d18"])
def test_minimum_is_minimal(name):
    """One voxel less than :func:`min_input_shape` on any axis is rejected by the validator."""
    net = load_network(builtin_path(name))
    lowest = min_input_shape(net)
    data = net.model_dump(mode="json", by_alias=True, exclude_unset=True)
    data["input"].update(zip(("depth", "height", "width"), lowest, strict=True))
    assert NetworkConfig.model_validate(data).resolved[-1].out_shape == (1, 1, 1)
    for axis, key in enumerate(("depth", "height", "width")):
        if lowest[axis] == 1:
            continue
        bad = {**data, "input": {**data["input"], key: lowest[axis] - 1}}
        with pytest.raises(ValueError, match="empty"):
            NetworkConfig.model_validate(bad)


def test_c3d_pool5_padding_at_minimum():
    small = scale_network(load_network(builtin_path("c3d")), 16)
    assert small.input.shape == (16, 16, 16)
    conv5b = small.layer("conv5b")
    assert conv5b.conv_shape == (2, 1, 1) and conv5b.out_shape == (1, 1, 1)  # pad (0, 1, 1)


def test_custom_network_keeps_minimum(tmp_path):
    path = tmp_path / "n.yaml"
    path.write_text(
        "name: n\ninput: {channels: 5, depth: 9, height: 40, width: 30}\nclasses: 10\n"
        "block_size: 4\nlayers:\n"
        "  - {name: a, type: conv, out_channels: 20, kernel: [1, 5, 3], padding: [0, 1, 1],"
        " pool: {window: [1, 3, 3], stride: [1, 2, 2]}}\n"
        "  - {name: b, type: conv, out_channels: 20, kernel: 1, residual: a}\n"
        "  - {name: g, type: gap}\n"
        "  - {name: f, type: fc, out_channels: 10}\n")
    net = load_network(path)
    assert min_input_shape(net) == (1, 5, 3)
    small = scale_network(net, 16)
    assert small.input.shape == (1, 5, 3) and small.input.channels == 5
    assert [lay.out_channels for lay in small.resolved] == [4, 4, 4, 4]
    assert small.classes == 4
    assert scale_network(net, 3).input.shape == (3, 14, 10)


@pytest.mark.parametrize("S,rounded", [(1, 101), (2, 56), (4, 32), (8, 16), (16, 8),
                                       (1000, 8)])
def test_scale_channels(S, rounded):
    assert scale_channels(101, S, 8) == rounded
    assert scale_channels(3, S, 4) == (3 if S == 1 else 4)


@pytest.mark.parametrize("S", [0, -2, 2.0, 1.5, "2", True, None])
def test_bad_scale_names_s(acc, S):
    with pytest.raises(ValueError, match=r"scale factor S must be an integer >= 1, not"):
        scale_accelerator(acc, S)
    with pytest.raises(ValueError, match=r"\bS\b"):
        scale_network(acc.network, S)
    with pytest.raises(ValueError):
        check_scale(S)


def test_scaled_config_is_revalidated(acc, monkeypatch):
    """A scaled configuration that breaks a cross-check is reported as a ConfigError naming
    the scale, not returned (the same loader path as a file)."""
    import fcircnn.models.scale as scale

    def broken(net, S, shape):
        data = real(net, S, shape)
        data["layers"][0]["out_channels"] = "8"  # not an integer: strict models reject it
        return data

    real = scale._scaled_network_data
    monkeypatch.setattr(scale, "_scaled_network_data", broken)
    with pytest.raises(ConfigError, match=r"\(scaled by S=2\): layers\[0\] .*out_channels"):
        scale_accelerator(acc, 2)


def test_input_chosen_separately_from_the_channel_factor():
    """ResNet-18 at S = 8 with an 8x32x32 input: channels / 8, maps from the given input."""
    acc = load_accelerator(builtin_path("r3d18_zcu102"))
    scaled = scale_accelerator(acc, 8, (8, 32, 32))
    net = scaled.network
    assert net.input.shape == (8, 32, 32) and net.name == "r3d18_s8"
    assert net.layer("conv1").conv_shape == (8, 16, 16)
    assert net.layer("l3b2_conv2").out_shape == (1, 2, 2)
    assert net.layer("conv1").out_channels == 8 and net.classes == 16
    assert scaled.cores == acc.cores
    # S = 1 with another input: the same channels, the given map; the original unchanged.
    same = scale_network(acc.network, 1, (2, 16, 16))
    assert same.input.shape == (2, 16, 16) and same.name == acc.network.name
    assert same.layer("conv1").out_channels == 64
    assert scale_network(acc.network, 1, acc.network.input.shape) is acc.network
    # Larger than the original is allowed too.
    assert scale_network(acc.network, 8, (16, 128, 128)).input.shape == (16, 128, 128)


@pytest.mark.parametrize("shape, match", [
    ((8, 32), r"input must be three positive integers \(D, H, W\), not \(8, 32\)"),
    ((8, 0, 32), "input must be three positive integers"),
    ((8, 32.0, 32), "input must be three positive integers"),
    ("8x32x32", "input must be three positive integers"),
    ((8, 15, 16), (r"input 8x15x16 is too small for network c3d on axis depth, height: .* "
                  r"smallest input is 16x16x16")),
])
def test_bad_input_shape_names_input(shape, match):
    net = load_network(builtin_path("c3d"))
    with pytest.raises(InputShapeError, match=match):
        check_input_shape(net, shape)
    with pytest.raises(ValueError, match=match):
        scale_network(net, 8, shape)
