"""models/project.py: dense weights projected onto the nearest block-circulant ones."""

from __future__ import annotations

import numpy as np
import pytest

from fcircnn.cli import main
from fcircnn.models import spectral
from fcircnn.models.config import load_network
from fcircnn.models.files import ArrayFileError
from fcircnn.models.network import load_weights, random_weights, run_network
from fcircnn.models.project import dense_shape, load_dense, project_layer, project_network

NET = """
name: tiny
input: {channels: 3, depth: 2, height: 4, width: 4}
classes: 10
block_size: 4
layers:
  - {name: c1, type: conv, out_channels: 12, kernel: 3, padding: 1, cbn: true, crelu: true}
  - {name: fc, type: fc, out_channels: 10}
"""


@pytest.fixture
def net(tmp_path):
    (tmp_path / "net.yaml").write_text(NET)
    return load_network(tmp_path / "net.yaml")


def _dense_of(net, weights):
    """The dense weights (PyTorch layouts) of block-circulant ``weights``."""
    out = {}
    for layer in net.resolved:
        full = spectral.expand_circulant(weights.layers[layer.name].generators)
        full = full[: layer.out_channels, : layer.in_channels]
        out[layer.name] = full.reshape(dense_shape(layer))
    return out


def test_a_circulant_network_projects_onto_itself(net):
    weights = random_weights(net, 1)
    projected, errors = project_network(net, _dense_of(net, weights))
    assert max(errors.values()) < 1e-12
    for layer in net.resolved:
        np.testing.assert_allclose(projected.layers[layer.name].generators,
                                   weights.layers[layer.name].generators, atol=1e-12)


def test_projection_is_the_least_squares_fit(net):
    rng = np.random.default_rng(2)
    layer = net.layer("c1")
    dense = rng.standard_normal(dense_shape(layer))
    generators, error = project_layer(layer, dense)
    residual = dense - spectral.expand_circulant(generators)[:12, :3]
    # Orthogonal to every block-circulant matrix: the nearest one in the Frobenius norm.
    for _ in range(3):
        other = spectral.expand_circulant(rng.standard_normal(generators.shape))[:12, :3]
        assert abs(np.sum(residual * other)) < 1e-9 * np.linalg.norm(other)
    assert error == pytest.approx(np.linalg.norm(residual) / np.linalg.norm(dense))
    assert 0.5 < error < 1.0  # random dense weights lose most of their energy at B = 4


def test_fc_follows_pytorchs_flatten_order(net):
    # A Linear over x.flatten(1) of [N, D, H, W] equals the golden fc of the projection when
    # the dense matrix is circulant: same outputs as a direct dense computation.
    rng = np.random.default_rng(3)
    fc = net.layer("fc")
    generators = rng.standard_normal((3, 3, 4, 2, 4, 4))
    dense = spectral.expand_circulant(generators)[:10, :12].reshape(10, -1)
    got, error = project_layer(fc, dense)
    assert error < 1e-12
    x = rng.standard_normal((12, 2, 4, 4))
    want = dense @ x.reshape(-1)  # PyTorch: Linear(x.flatten())
    y = spectral.conv3d_dense(x, spectral.expand_circulant(got)[:10, :12], 1, 0).reshape(-1)
    np.testing.assert_allclose(y, want, rtol=1e-10)


def test_load_dense_checks_every_array(net, tmp_path):
    dense = _dense_of(net, random_weights(net, 1))
    np.savez(tmp_path / "ok.npz", **{f"{k}.weight": v for k, v in dense.items()})
    got, notes = load_dense(net, str(tmp_path / "ok.npz"))
    assert set(got) == {"c1", "fc"} and notes == []
    np.savez(tmp_path / "bad.npz", **{"c1.weight": dense["c1"], "fc.bias": np.zeros(10)})
    with pytest.raises(ArrayFileError, match="unknown array"):
        load_dense(net, str(tmp_path / "bad.npz"))
    np.savez(tmp_path / "shape.npz", **{"c1.weight": dense["c1"][:, :2], "fc.weight": dense["fc"]})
    with pytest.raises(ArrayFileError, match=r"'c1.weight': shape \(12, 2, 3, 3, 3\)"):
        load_dense(net, str(tmp_path / "shape.npz"))


def test_load_dense_reports_every_problem_at_once(net, tmp_path):
    dense = _dense_of(net, random_weights(net, 1))
    np.savez(tmp_path / "bad.npz", **{"c1.weight": dense["c1"][:, :2], "junk": np.zeros(1)})
    with pytest.raises(ArrayFileError) as err:
        load_dense(net, str(tmp_path / "bad.npz"))
    text = str(err.value)
    assert "3 problem(s)" in text and "unknown array(s) 'junk'" in text
    assert "no weight for layer 'fc'" in text and "'c1.weight': shape (12, 2, 3, 3, 3)" in text



def test_project_command_writes_weights_golden_reads(net, tmp_path, capsys):
    dense = {f"{k}.weight": v for k, v in _dense_of(net, random_weights(net, 4)).items()}
    np.savez(tmp_path / "dense.npz", **dense)
    out = tmp_path / "w.npz"
    assert main(["project", str(net.path), "--dense", str(tmp_path / "dense.npz"),
                 "-o", str(out)]) == 0
    assert "rel. projection error" in capsys.readouterr().out
    weights = load_weights(net, str(out))
    assert run_network(net, ("int",), weights=weights).outputs["int"].shape[0] == 10
