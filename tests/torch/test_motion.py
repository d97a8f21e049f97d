"""The motion data set, the dense twin and the training loop; the slow end-to-end accuracy
check of the int8 contract against float and of the RTL against the contract (issue 17, item
6)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the PyTorch front end needs the [torch] extra")
torch.set_num_threads(1)

from fcircnn.models.config import load_accelerator, load_network  # noqa: E402
from fcircnn.runtime.predict import predict  # noqa: E402
from fcircnn.sim.runner import find_simulator  # noqa: E402
from fcircnn.torch import build  # noqa: E402
from fcircnn.torch.dense import DenseNetwork  # noqa: E402
from fcircnn.torch.motion import (  # noqa: E402
    CLASSES,
    motion_accelerator_yaml,
    motion_clips,
    motion_network_yaml,
)
from fcircnn.torch.training import (  # noqa: E402
    accuracy,
    fit,
    golden_int_classes,
    predict_classes,
)
from fcircnn.torch.weights import network_weights  # noqa: E402


def test_clips_are_reproducible_balanced_and_split_by_seed():
    x, y = motion_clips(3, seed=5)
    assert x.shape == (3 * len(CLASSES), 3, 8, 16, 16) and x.dtype == np.float32
    assert np.bincount(y).tolist() == [3] * len(CLASSES)
    x2, y2 = motion_clips(3, seed=5)
    np.testing.assert_array_equal(x, x2)
    np.testing.assert_array_equal(y, y2)
    x3, _ = motion_clips(3, seed=6)
    assert not np.allclose(x, x3)
    assert len(CLASSES) >= 10


def test_classes_differ_in_motion_not_in_appearance():
    x, y = motion_clips(40, seed=0)
    # per class, the frame-averaged picture has the same brightness statistics ...
    still = x.mean(axis=2)
    means = np.array([still[y == c].mean() for c in range(len(CLASSES))])
    assert means.std() < 0.01
    # ... while the motion differs: the blob's centroid moves right in "right", left in "left"
    # and not at all in "static"
    def drift(c):
        w = np.clip(x[y == c].mean(axis=1), 0, None)  # [n, D, H, W]
        col = (w.sum(axis=2) * np.arange(16)).sum(axis=2) / w.sum(axis=(2, 3))
        return float((col[:, -1] - col[:, 0]).mean())
    assert drift(CLASSES.index("right")) > 1.5
    assert drift(CLASSES.index("left")) < -1.5
    assert abs(drift(CLASSES.index("static"))) < 0.5


def test_the_dense_twin_has_the_network_files_graph(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text(motion_network_yaml(8, widths=(8, 8, 16, 16)))
    dense = DenseNetwork(load_network(path))
    assert dense(torch.zeros(2, 3, 8, 16, 16)).shape == (2, len(CLASSES))
    assert dense.layers["conv1"].conv.weight.shape == (8, 3, 3, 3, 3)
    assert dense.layers["fc4"].conv.weight.shape == (16, 16, 2, 2, 2)  # over conv3's map
    with pytest.raises(ValueError, match=r"expected \[N, 3, 8, 16, 16\]"):
        dense(torch.zeros(2, 3, 8, 16))


def test_project_reads_the_dense_twins_own_state_dict(tmp_path, capsys):
    """The state dict PyTorch saves for the dense twin (wrapped in DataParallel, as training
    scripts do), written with numpy.savez: fcircnn project takes every conv and fc weight,
    leaves the batch norms out with a note, and projects exactly what project_layer does."""
    from fcircnn.cli import main
    from fcircnn.models.network import load_weights
    from fcircnn.models.project import project_layer

    path = tmp_path / "m.yaml"
    path.write_text(motion_network_yaml(8, widths=(8, 8, 16, 16)))
    net = load_network(path)
    torch.manual_seed(0)
    twin = torch.nn.DataParallel(DenseNetwork(net))
    state = {k: v.detach().numpy() for k, v in twin.state_dict().items()}
    assert "module.layers.conv1.conv.weight" in state and "module.layers.conv1.bn.running_var" \
        in state
    np.savez(tmp_path / "dense.npz", **state)
    out = tmp_path / "w.npz"
    assert main(["project", str(path), "--dense", str(tmp_path / "dense.npz"), "-o",
                 str(out)]) == 0
    err = capsys.readouterr().err
    assert "dropped the DataParallel prefix 'module.'" in err and "not projected" in err
    weights = load_weights(net, str(out))
    for layer in net.resolved:
        if layer.weighted:
            want, _ = project_layer(layer, state[f"module.layers.{layer.name}.conv.weight"])
            np.testing.assert_array_equal(weights.layers[layer.name].generators, want)


def test_fit_lowers_the_loss_and_the_golden_classes_are_the_qat_models(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text(motion_network_yaml(4, widths=(8, 8, 8, 8)))
    x, y = motion_clips(2, seed=1)
    torch.manual_seed(0)
    model = build(load_network(path), seed=0)
    losses = fit(model, x, y, epochs=3, batch_size=8, lr=1e-2)
    assert losses[-1] < losses[0]
    golden = golden_int_classes(model.eval(), x[:6], x[:12])
    model.calibrate(torch.from_numpy(x[:12])).qat(True)
    np.testing.assert_array_equal(predict_classes(model, x[:6]), golden)


@pytest.mark.parametrize("B", [4, 8, 16])
def test_the_motion_network_runs_on_the_small_test_accelerator(tmp_path, B):
    (tmp_path / "net.yaml").write_text(motion_network_yaml(B))
    (tmp_path / "acc.yaml").write_text(motion_accelerator_yaml(B))
    acc = load_accelerator(tmp_path / "acc.yaml")  # validated: every layer placed
    assert acc.network.name == "motion_c3d" and acc.cores[0].tm == max(16, 2 * B)


@pytest.mark.slow
def test_a_trained_network_keeps_its_accuracy_on_the_int8_contract(tmp_path):
    """Trains a small motion network (B = 4) for a minute on 2 cores: its float accuracy is far
    above chance and the int8 contract (golden model, scales from 48 training clips) stays
    within 5 points of it; three test clips with the trained weights through the small test
    accelerator's RTL (``fcircnn run --on sim``, random back-pressure) are bit-exact at every
    layer and give the golden int classes."""
    path = tmp_path / "m.yaml"
    path.write_text(motion_network_yaml(4, widths=(8, 16, 32, 32)))
    train, test = motion_clips(40, seed=0), motion_clips(15, seed=1000)
    torch.manual_seed(0)
    model = build(load_network(path), seed=0)
    fit(model, *train, epochs=10, batch_size=32, lr=3e-3)
    float_acc = accuracy(model, *test)
    golden = golden_int_classes(model.eval(), test[0], train[0][:48])
    int_acc = float(np.mean(golden == test[1]))
    assert float_acc > 0.6, float_acc  # chance is 1/12
    assert int_acc >= float_acc - 0.05, (float_acc, int_acc)
    find_simulator("verilator")
    (tmp_path / "acc.yaml").write_text(motion_accelerator_yaml(4, "m.yaml"))
    rtl = predict(load_accelerator(tmp_path / "acc.yaml"), test[0][:3], on="sim",
                  weights=network_weights(model), calibration=train[0][:48],
                  backpressure=0.3, build_dir=tmp_path / "build")
    assert rtl.bit_exact, [c.mismatched for c in rtl.clips]
    np.testing.assert_array_equal([c.top1 for c in rtl.clips], golden[:3])
