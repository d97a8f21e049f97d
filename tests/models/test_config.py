"""The configuration as a whole (:mod:`fcircnn.models.config`): the shipped files load,
their shapes and operation counts, the defaults, frozen objects."""

from __future__ import annotations

from pathlib import Path

import pytest
from config_cases import (
    C3D_OPS,
    NET,
    R3D18_OPS,
    write,
)

from fcircnn.models.config import (
    AcceleratorConfig,
    ConfigError,
    NetworkConfig,
    ResolvedLayer,
    builtin_path,
    load_accelerator,
    load_network,
)


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
