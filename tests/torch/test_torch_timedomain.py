"""fcircnn/torch/timedomain.py (named apart from tests/models/test_timedomain.py) and the
time-domain layers of build(): against the golden model.

The layouts and the dense layer's datapath accumulators against :mod:`fcircnn.models.timedomain`;
a network with the paper's time-domain stem and head (a dense conv with bias, BN, ReLU and pool,
the rfft, two block-circulant convs, the irfft, gap, a dense fc with bias and BN): the float64
model equals ``run_network``'s float pass on every layer (1e-9), its QAT forward equals the
integer contract bit for bit, and the weights it exports are read back by the golden model
and by :func:`fcircnn.torch.from_weights`; a training step moves the dense layers' weights in
float and in QAT.
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the PyTorch front end needs the [torch] extra")
torch.set_num_threads(1)

from fcircnn.models import quant, spectral  # noqa: E402
from fcircnn.models import timedomain as td  # noqa: E402
from fcircnn.models.config import load_network  # noqa: E402
from fcircnn.models.network import run_network  # noqa: E402
from fcircnn.torch import build, export, from_weights, network_weights  # noqa: E402
from fcircnn.torch import timedomain as ttd  # noqa: E402

NET = """
name: stem_head
input: {channels: 3, depth: 4, height: 8, width: 8}
classes: 10
block_size: %(B)d
layers:
  - {name: stem, type: conv, dense: true, out_channels: 12, kernel: 3, padding: 1, bias: true,
     bn: true, relu: true, pool: {window: [1, 2, 2]}}
  - {name: fft, type: rfft}
  - {name: c2, type: conv, out_channels: 16, kernel: 3, padding: 1, cbn: true, crelu: true,
     pool: {window: 2}}
  - {name: c3, type: conv, out_channels: 16, kernel: 3, padding: 1, cbn: true, crelu: true}
  - {name: ifft, type: irfft}
  - {name: avg, type: gap}
  - {name: fc, type: fc, dense: true, out_channels: 10, bias: true, bn: true}
"""


def _net(tmp_path, B=8):
    path = tmp_path / f"stem_head{B}.yaml"
    path.write_text(NET % {"B": B})
    return load_network(path)


@pytest.mark.parametrize("B", [4, 8, 16])
@pytest.mark.parametrize("layout", ["slots", "lanes", "lane0", "deferred", "spread"])
def test_layouts_are_the_golden_models(B, layout):
    x = np.random.default_rng(B).standard_normal((2, 11, 2, 3, 1))
    xs = ttd.to_layout(torch.from_numpy(x), layout, B).numpy()
    for n in range(2):
        ref = td.to_layout(x[n], layout, B)
        np.testing.assert_allclose(xs[n, 0] + 1j * xs[n, 1], ref, atol=1e-12)
    back = ttd.from_layout(torch.from_numpy(xs), layout, B, 11).numpy()
    np.testing.assert_allclose(back, x, atol=1e-12)


@pytest.mark.parametrize("B", [4, 8, 16])
def test_the_integer_transforms_are_the_golden_models(B):
    rng = np.random.default_rng(B)
    t = rng.integers(-127, 128, (2, 2, 3 * B // 2, 2, 1, 1)).astype(np.float64)
    v = ttd.rfft_int(torch.from_numpy(t), B).numpy()
    acc = rng.integers(-1000, 1000, (2, 2, 3 * B // 2, 1, 2, 1)).astype(np.float64)
    u = ttd.irfft_lane0(torch.from_numpy(acc), B).numpy()
    for n in range(2):
        ref = td.rfft_int(t[n, 0].astype(np.int64), t[n, 1].astype(np.int64), B)
        np.testing.assert_array_equal(v[n], np.stack(ref))
        ref_u = td.irfft_lane0(acc[n, 0], acc[n, 1], B)
        np.testing.assert_array_equal(u[n, 0, :: B // 2], ref_u)
        assert not u[n, 1].any() and not np.delete(u[n, 0], np.s_[:: B // 2], axis=0).any()


@pytest.mark.parametrize("B", [4, 8])
def test_float_model_is_the_golden_float_pass(tmp_path, B):
    net = _net(tmp_path, B)
    model = build(net, seed=2, dtype=torch.float64)
    clips = torch.randn(3, 3, 4, 8, 8, dtype=torch.float64)
    model.train()
    model(clips).sum().backward()  # batch statistics into the BN and CBN running ones
    model.eval()
    weights = network_weights(model)
    x = clips[0].numpy()
    result = run_network(net, ("slots",), weights=weights, x=x)
    with torch.no_grad():
        outs = model.forward_slots(clips[:1])
    for layer in net.resolved:
        ref = result.slots["float"][layer.name]
        got = outs[layer.name][0].numpy()
        got = got[0] + 1j * got[1]
        assert np.abs(got - ref).max() <= 1e-9 * max(np.abs(ref).max(), 1.0), layer.name
    np.testing.assert_allclose(model(clips[:1])[0].detach().numpy(),
                               result.outputs["float"][:, 0, 0, 0], atol=1e-9)


def test_qat_forward_is_the_integer_contract(tmp_path):
    net = _net(tmp_path)
    model = build(net, seed=4, dtype=torch.float64)
    clips = torch.randn(4, 3, 4, 8, 8, dtype=torch.float64)
    model.train()
    model(clips).sum().backward()
    model.eval().calibrate(clips).qat(True)
    weights = network_weights(model)
    for clip in clips:
        result = run_network(net, ("int",), weights=weights, x=clip.numpy(),
                             clips=clips.numpy())
        with torch.no_grad():
            outs = model.forward_slots(clip[None])
        for name, (re, im) in result.int_outputs.items():
            scale = result.int_scales[name]
            got = outs[name][0].numpy()
            ref = quant.dequantize_slots(re, im, scale)
            np.testing.assert_array_equal(np.rint(got[0] / scale[0, 0]),
                                          np.rint(ref.real / scale[0, 0]), err_msg=name)


def test_exported_weights_run_on_the_golden_model_and_load_back(tmp_path):
    net = _net(tmp_path)
    model = build(net, seed=5)
    clips = torch.randn(2, 3, 4, 8, 8)
    model.train()
    model(clips).sum().backward()
    model.eval()
    export(model, tmp_path / "w.npz")
    arrays = dict(np.load(tmp_path / "w.npz"))
    assert arrays["stem.weight"].shape == (12, 3, 3, 3, 3)
    assert arrays["fc.bias"].shape == arrays["fc.bn_gain"].shape == (10,)
    again = from_weights(net, tmp_path / "w.npz").eval()
    with torch.no_grad():
        np.testing.assert_allclose(again(clips).numpy(), model(clips).numpy(), rtol=1e-5,
                                   atol=1e-5)
    result = run_network(net, ("float",), weights=network_weights(again),
                         x=clips[0].double().numpy())
    with torch.no_grad():
        np.testing.assert_allclose(model(clips[:1])[0].numpy(), result.outputs["float"][:, 0, 0,
                                   0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("qat", [False, True])
def test_a_training_step_moves_the_dense_layers(tmp_path, qat):
    net = _net(tmp_path)
    model = build(net, seed=6)
    clips, labels = torch.randn(4, 3, 4, 8, 8), torch.randint(0, 10, (4,))
    if qat:
        model.calibrate(clips).qat(True)
    before = {k: v.detach().clone() for k, v in model.named_parameters()}
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = torch.nn.functional.cross_entropy(model(clips), labels)
    loss.backward()
    opt.step()
    # (a bias before a batch norm in training mode has no gradient: the batch mean takes it)
    for name in ("layers.stem.dense.weight", "layers.stem.bn.bias", "layers.fc.dense.weight",
                 "layers.fc.bn.weight", "layers.c2.conv.generators"):
        assert not torch.equal(before[name], dict(model.named_parameters())[name]), name


def test_the_golden_spread_input_is_the_models(tmp_path):
    net = _net(tmp_path)
    model = build(net, seed=1, dtype=torch.float64)
    x = torch.randn(1, 3, 4, 8, 8, dtype=torch.float64)
    xs = model._input_slots(x)[0].numpy()
    from fcircnn.models.network import input_slots
    np.testing.assert_allclose(xs[0] + 1j * xs[1], input_slots(net, x[0].numpy()))
    assert spectral.INT8_MAX == 127
