"""export / load: the weights file between the PyTorch model and the golden model and CLI."""

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the PyTorch front end needs the [torch] extra")
torch.set_num_threads(1)

from fcircnn.models.files import ArrayFileError  # noqa: E402
from fcircnn.models.network import load_weights, run_network, weight_arrays  # noqa: E402
from fcircnn.torch import build, export, from_weights, load, network_weights  # noqa: E402

KINDS = Path(__file__).resolve().parent.parent / "hw" / "configs" / "kinds.yaml"


@pytest.fixture(scope="module")
def trained():
    """The kinds network after a few training steps (so CBN's running statistics are not the
    identity), in eval mode, float64."""
    torch.manual_seed(0)
    model = build(KINDS, seed=2, dtype=torch.float64)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(4, 3, 5, 10, 10, dtype=torch.float64)
    for _ in range(3):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), torch.tensor([0, 1, 2, 3])).backward()
        opt.step()
    return model.eval()


def test_export_round_trips_through_load_weights(trained, tmp_path):
    path = tmp_path / "w.npz"
    export(trained, path)
    net = trained.config
    weights = load_weights(net, str(path))
    names = set(np.load(path).files)
    cbn_layers = {layer.name for layer in net.resolved if layer.cbn}
    assert names == ({f"{n}.generators" for n in trained.layers if n != "gap"}
                     | {f"{n}.{p}" for n in cbn_layers for p in ("bn_gain", "bn_offset")})
    for name, layer in trained.layers.items():
        lw = weights.layers[name]
        if layer.conv is None:
            assert lw.generators is None
            continue
        np.testing.assert_array_equal(lw.generators, layer.conv.generators.detach().numpy())
        if layer.cbn is not None:
            np.testing.assert_array_equal(lw.bn_gain, layer.cbn.gain.numpy())
            np.testing.assert_array_equal(lw.bn_offset, layer.cbn.offset.numpy())
    assert not np.allclose(weights.layers["c1"].bn_offset, 0)  # trained statistics folded
    again = from_weights(KINDS, path, dtype=torch.float64).eval()
    x = torch.randn(2, 3, 5, 10, 10, dtype=torch.float64)
    with torch.no_grad():
        np.testing.assert_allclose(again(x).numpy(), trained(x).numpy(), rtol=1e-12,
                                   atol=1e-12)


def test_fcircnn_golden_reads_the_exported_weights(trained, tmp_path):
    path, clip, out = tmp_path / "w.npz", tmp_path / "x.npy", tmp_path / "out.npz"
    export(trained, path)
    x = np.random.default_rng(1).standard_normal((3, 5, 10, 10))
    np.save(clip, x)
    proc = subprocess.run([sys.executable, "-m", "fcircnn.cli", "golden", str(KINDS),
                           "--mode", "all", "--weights", str(path), "--input", str(clip),
                           "--save", str(out), "--quiet"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    with torch.no_grad():
        scores = trained(torch.from_numpy(x[None]))[0].numpy()
    saved = np.load(out)
    for mode in ("float", "slots"):
        np.testing.assert_allclose(saved[f"output_{mode}"].ravel(), scores, rtol=1e-9,
                                   atol=1e-9)
    # the int mode: within the output's quantization noise of the float scores
    err = np.abs(saved["output_int"].ravel() - scores).max()
    assert err < 0.1 * np.abs(scores).max()


def test_network_weights_feed_run_network_directly(trained):
    x = np.random.default_rng(2).standard_normal((3, 5, 10, 10))
    result = run_network(trained.config, ("slots",), weights=network_weights(trained), x=x)
    with torch.no_grad():
        scores = trained(torch.from_numpy(x[None]))[0].numpy()
    np.testing.assert_allclose(result.outputs["slots"].ravel(), scores, rtol=1e-9, atol=1e-9)


def _arrays(model):
    w = network_weights(model)
    arrays = {}
    for name, lw in w.layers.items():
        if lw.generators is not None:
            arrays[f"{name}.generators"] = lw.generators
        if lw.bn_gain is not None:
            arrays[f"{name}.bn_gain"], arrays[f"{name}.bn_offset"] = lw.bn_gain, lw.bn_offset
    return arrays


def test_bad_weights_name_the_array_and_the_expected_shape(trained, tmp_path):
    model = build(KINDS, seed=None)
    good = _arrays(trained)
    shape = weight_arrays(model.config)["c2.generators"][0]
    missing = {k: v for k, v in good.items() if k != "c2.generators"}
    with pytest.raises(ArrayFileError, match=re.escape(f"missing array 'c2.generators' of "
                                                       f"shape {shape}")):
        load(model, missing)
    with pytest.raises(ArrayFileError, match=r"unknown array.*'c2\.weight'"):
        load(model, {**good, "c2.weight": np.zeros(3)})
    expected = weight_arrays(model.config)["fc6.generators"][0]
    assert expected == (5, 4, 8, 1, 2, 2)  # fc6 covers c5's 1x2x2 map
    with pytest.raises(ArrayFileError, match=re.escape(
            "'fc6.generators': shape (5, 4, 8, 1, 1, 1), expected (5, 4, 8, 1, 2, 2)")):
        load(model, {**good, "fc6.generators": np.zeros((5, 4, 8, 1, 1, 1))})
    with pytest.raises(ArrayFileError, match=r"'c1\.bn_gain' without 'c1\.bn_offset'"):
        load(model, {k: v for k, v in good.items() if k != "c1.bn_offset"})
    with pytest.raises(ArrayFileError, match=re.escape(
            "'fc8.bn_gain' for layer 'fc8', which has no CBN")):
        load(model, {**good, "fc8.bn_gain": np.ones((2, 12)),
                     "fc8.bn_offset": np.ones((2, 12))})
    path = tmp_path / "bad.npz"
    np.savez(path, **missing)
    with pytest.raises(ArrayFileError, match=re.escape(f"{path}: missing array 'c2.generators'")):
        load(model, path)
    # torch's own state dicts name the key and both shapes
    state = trained.state_dict()
    state["layers.c2.conv.generators"] = torch.zeros(1, 2, 8, 3, 3, 3)
    with pytest.raises(RuntimeError, match=r"layers.c2.conv.generators.*torch.Size\(\[4, 2, 8, "
                                           r"3, 3, 3\]\)"):
        model.load_state_dict(state)


def test_export_refuses_weights_the_golden_model_would_refuse(trained, tmp_path):
    model = build(KINDS, seed=1)
    with torch.no_grad():
        model.layers["c5"].conv.generators[0, 0, 0, 0, 0, 0] = float("nan")
    with pytest.raises(ArrayFileError, match=r"'c5\.generators': 1 value.*not finite"):
        export(model, tmp_path / "nan.npz")
    assert not (tmp_path / "nan.npz").exists()


def test_the_models_scales_go_into_the_weights_file_and_back(trained, tmp_path):
    """After calibrate(), export writes the scales as the file's calibration (max over the
    clips, per tensor): the golden int contract from the file alone equals the golden model
    calibrated on the same clips, bit for bit. A QAT step marks them as QAT's; load sets them
    back and a second export writes the same file."""
    import copy

    from fcircnn.models.network import calibrate, random_input, run_int

    model = copy.deepcopy(trained)
    net = model.config
    clips = np.stack([random_input(net, s) for s in range(3)])
    model.calibrate(torch.from_numpy(clips))
    export(model, tmp_path / "w.npz")
    stored = load_weights(net, str(tmp_path / "w.npz"))
    assert stored.calibration.describe() == "tensor scales, the maximum over 3 clip(s)"
    _, from_file = calibrate(net, weights=stored)
    _, measured = calibrate(net, weights=load_weights(net, str(tmp_path / "w.npz")),
                            x=clips[0], clips=list(clips))
    for name in from_file.layers:  # the same maxima, computed by PyTorch and by NumPy
        np.testing.assert_allclose(from_file.layers[name].out_scale,
                                   measured.layers[name].out_scale, rtol=1e-12)
    # The golden int contract from the file is the model's QAT forward, bit for bit.
    model.eval().qat(True)
    with torch.no_grad():
        outs = model.forward_slots(torch.from_numpy(clips[1:2]))
    ints = run_int(net, from_file, from_file.quantize_input(net, clips[1]))
    for name, ref in ints.items():
        obs = model.input_quant if name == "" else model.layers[name].out_quant
        got = np.rint(outs[name][0].numpy() / obs.scale)
        np.testing.assert_array_equal(got[0], ref.re, err_msg=name)
        np.testing.assert_array_equal(got[1], ref.im, err_msg=name)
    model.qat(False)
    # A QAT training step moves the observers: the file says so.
    model.train().qat(True)
    model(torch.from_numpy(clips[:2]))
    export(model.eval(), tmp_path / "q.npz")
    qat = load_weights(net, str(tmp_path / "q.npz")).calibration
    assert qat.statistic == "qat" and "quantization-aware training" in qat.describe()
    again = from_weights(KINDS, tmp_path / "q.npz", dtype=torch.float64)
    assert again.scales_from == ("qat", 0)
    export(again, tmp_path / "q2.npz")
    first, second = np.load(tmp_path / "q.npz"), np.load(tmp_path / "q2.npz")
    for key in first.files:
        np.testing.assert_array_equal(first[key], second[key])
