"""ONNX graphs in, network files and block-circulant weights out (models/onnx_graph.py)."""

from __future__ import annotations

import json
import re
import sys
import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from fcircnn.models.config import load_network  # noqa: E402
from fcircnn.models.network import load_weights, run_network  # noqa: E402
from fcircnn.models.onnx_graph import OnnxImportError, import_onnx  # noqa: E402
from fcircnn.models.project import project_network  # noqa: E402
from fcircnn.models.spectral import expand_circulant, pad_channels, to_slots  # noqa: E402

try:  # the tests that export from PyTorch skip without it (_torch())
    import torch
    from torch import nn
except ImportError:  # pragma: no cover
    torch = nn = None

B = 8


def _torch() -> None:
    """Skip the test without PyTorch (the exporter) or without its ONNX exporter's
    onnxscript."""
    pytest.importorskip("torch")
    pytest.importorskip("onnxscript")

#: Convs (one asymmetric kernel pair, as R(2+1)D's), a padded max pool (a -inf Pad in the
#: graph), an identity and a 1x1x1-shortcut residual, gap and the fc classifier.
TINY = """\
name: tiny
input: {channels: 3, depth: 4, height: 8, width: 8}
classes: 5
block_size: 8
layers:
  - {name: c1, type: conv, out_channels: 16, kernel: 3, padding: 1, cbn: true, crelu: true,
     pool: {window: [1, 3, 3], stride: [1, 2, 2], padding: [0, 1, 1]}}
  - {name: c2, type: conv, out_channels: 16, kernel: [1, 3, 3], padding: [0, 1, 1], cbn: true,
     crelu: true}
  - {name: c3, type: conv, out_channels: 16, kernel: [3, 1, 1], padding: [1, 0, 0], cbn: true,
     residual: c1, crelu: true}
  - {name: down, type: conv, out_channels: 32, kernel: 1, stride: 2, cbn: true}
  - {name: c4, type: conv, out_channels: 32, kernel: 3, stride: 2, padding: 1, cbn: true,
     crelu: true, input: c3}
  - {name: c5, type: conv, out_channels: 32, kernel: 3, padding: 1, cbn: true, residual: down,
     crelu: true}
  - {name: gap, type: gap}
  - {name: fc, type: fc, out_channels: 5}
"""


def _export(model: nn.Module, x: torch.Tensor, path, *, exporter: str = "dynamo") -> None:
    """``torch.onnx.export`` of ``model`` in eval mode: the dynamo exporter with its optimizer
    (which folds eval batch norms into the convs), without it (``BatchNormalization`` nodes
    stay) or the TorchScript exporter (``"legacy"``, names from the module scopes)."""
    model.eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation, tracing
        if exporter == "legacy":
            torch.onnx.export(model, (x,), str(path), dynamo=False)
        else:
            torch.onnx.export(model, (x,), str(path), dynamo=True, verbose=False,
                              optimize=exporter == "dynamo")


def _randomize_bn(model: nn.Module, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            n = m.num_features
            m.running_mean.copy_(torch.randn(n, generator=gen))
            m.running_var.copy_(torch.rand(n, generator=gen) + 0.5)
            m.weight.data.copy_(torch.randn(n, generator=gen))
            m.bias.data.copy_(torch.randn(n, generator=gen))


def _folded(model: nn.Module) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The dense weights and biases of the dense twin with its batch norms folded in
    (float64): what the import projects."""
    dense, biases = {}, {}
    for name, layer in model.layers.items():
        if layer.conv is None:
            continue
        w = layer.conv.weight.detach().double().numpy()
        if layer.bn is not None:
            bn = layer.bn
            eps = float(np.float32(bn.eps))  # an ONNX attribute is float32
            g = (bn.weight.double() / torch.sqrt(bn.running_var.double() + eps)).detach().numpy()
            w = w * g.reshape(-1, 1, 1, 1, 1)
            biases[name] = (bn.bias.detach().double().numpy()
                            - g * bn.running_mean.detach().double().numpy())
        dense[name] = w
    return dense, biases


def _packed(bias: np.ndarray) -> np.ndarray:
    slots = to_slots(pad_channels(bias, B), B)
    return np.stack([slots.real, slots.imag])


def _twin(text: str, tmp_path, seed: int = 0) -> nn.Module:
    """The dense twin of the network file ``text`` (``"motion"``: the motion network), its
    batch norms' statistics and affine parameters random."""
    from fcircnn.torch.dense import DenseNetwork
    from fcircnn.torch.motion import motion_network_yaml

    text = motion_network_yaml(B) if text == "motion" else text
    (tmp_path / "net.yaml").write_text(text)
    torch.manual_seed(seed)
    model = DenseNetwork(load_network(tmp_path / "net.yaml"))
    _randomize_bn(model, seed)
    return model.eval()


# --------------------------------------------------------------------------------------------
# 1. The dense twin of a network file


@pytest.mark.parametrize(("text", "exporter"), [(TINY, "dynamo"), (TINY, "dynamo-bn"),
                                                (TINY, "legacy"),
                                                ("motion", "dynamo")],
                         ids=["tiny", "tiny-bn-nodes", "tiny-torchscript", "motion"])
def test_dense_twin_round_trip(tmp_path, text, exporter):
    _torch()
    model = _twin(text, tmp_path)
    original = model.config
    inp = original.input
    path = tmp_path / "twin.onnx"
    _export(model, torch.randn(1, inp.channels, *inp.shape), path, exporter=exporter)
    imp = import_onnx(path, block_size=B, name=original.name)

    # the network file, layer by layer (names too: the weights' module paths)
    assert imp.network.input == original.input and imp.network.classes == original.classes
    fields = ("name", "kind", "input", "residual", "in_channels", "out_channels", "in_shape",
              "out_shape", "kernel", "stride", "padding", "pool", "cbn", "crelu")
    for want, got in zip(original.resolved, imp.network.resolved, strict=True):
        assert {f: getattr(got, f) for f in fields} == {f: getattr(want, f) for f in fields}

    # the weights: the projection of the dense weights with the batch norms folded in, each
    # folded bias as the CBN offset (gain 1)
    dense, biases = _folded(model)
    expected, errors = project_network(imp.network, dense)
    tight = exporter == "dynamo-bn"  # folded by the import in float64, else by the exporter
    tol = {"rtol": 1e-9, "atol": 1e-12} if tight else {"rtol": 1e-4, "atol": 1e-6}
    for layer in imp.network.resolved:
        got, want = imp.weights.layers[layer.name], expected.layers[layer.name]
        if not layer.weighted:
            assert got.generators is None
            continue
        np.testing.assert_allclose(got.generators, want.generators, **tol)
        if layer.name in biases:
            np.testing.assert_array_equal(got.bn_gain, np.ones_like(got.bn_gain))
            np.testing.assert_allclose(got.bn_offset, _packed(biases[layer.name]), **tol)
        else:
            assert got.bn_gain is None

    # the report: one row per layer, every approximation named
    rows = {r.name: r for r in imp.report}
    assert list(rows) == [r.name for r in imp.network.resolved]
    for layer in imp.network.resolved:
        row = rows[layer.name]
        assert ("crelu" in row.approximations) == layer.crelu
        assert ("cmaxpool" in row.approximations) == (layer.pool is not None)
        assert ("projection" in row.approximations) == layer.weighted
        assert row.error == pytest.approx(errors.get(layer.name, 0.0), rel=1e-3, abs=1e-9)
        if layer.crelu:
            assert "CReLU (approximation)" in row.how
        if layer.residual:
            assert f"residual '{layer.residual}'" in row.how and "(exact)" in row.how
    notes = " ".join(imp.notes)
    assert "CReLU" in notes and "projected" in notes
    assert ("CMaxPool" in notes) == any(r.pool for r in imp.network.resolved)

    # the comments name the ONNX nodes of each layer
    graph_nodes = {n.name for n in onnx.load(str(path)).graph.node}
    named = re.findall(r"# from \w+ '([^']+)'", imp.network_yaml)
    assert len(named) == len(original.resolved) and set(named) <= graph_nodes
    (tmp_path / "again.yaml").write_text(imp.network_yaml)
    assert load_network(tmp_path / "again.yaml").resolved == imp.network.resolved


# --------------------------------------------------------------------------------------------
# 2. torchvision's video ResNets


@pytest.mark.parametrize("arch", ["r3d_18", "mc3_18", "r2plus1d_18"])
def test_torchvision_video_resnets(tmp_path, arch):
    _torch()
    video = pytest.importorskip("torchvision.models.video")
    torch.manual_seed(0)
    model = getattr(video, arch)(weights=None)
    _randomize_bn(model, 1)
    path = tmp_path / f"{arch}.onnx"
    _export(model, torch.randn(1, 3, 8, 32, 32), path)
    imp = import_onnx(path)
    net = imp.network

    kinds = [r.kind for r in net.resolved]
    convs = sum(isinstance(m, nn.Conv3d) for m in model.modules())
    assert kinds == ["conv"] * convs + ["gap", "fc"]
    assert net.classes == 400 and (net.input.channels, *net.input.shape) == (3, 8, 32, 32)
    assert sum(r.residual is not None for r in net.resolved) == 8
    assert all(r.cbn for r in net.resolved if r.kind == "conv")  # each has a batch norm
    relus = [n for n in onnx.load(str(path)).graph.node if n.op_type == "Relu"]
    assert sum(r.crelu for r in net.resolved) == len(relus)
    kernels = {r.kernel for r in net.resolved if r.kind == "conv"}
    if arch == "r2plus1d_18":
        assert {(1, 7, 7), (1, 3, 3), (3, 1, 1), (1, 1, 1)} <= kernels
        widths = {r.out_channels for r in net.resolved}
        assert {45, 144, 230, 288, 460, 576, 921, 1152} <= widths  # the mid-planes
        padded = [r.name for r in imp.report if "padding channels" in r.approximations]
        assert padded and all(net.layer(n).in_channels % B for n in padded)
    else:
        assert (3, 7, 7) in kernels
    # the file loads as written; the weights file round-trips; the float reference runs
    (tmp_path / "net.yaml").write_text(imp.network_yaml)
    assert load_network(tmp_path / "net.yaml").resolve() == net.resolved
    imp.weights.save(str(tmp_path / "w.npz"))
    weights = load_weights(net, str(tmp_path / "w.npz"))
    x = np.random.default_rng(0).standard_normal((3, 8, 32, 32))
    out = run_network(net, ("float",), weights=weights, x=x).outputs["float"]
    assert out.shape == (400, 1, 1, 1) and np.all(np.isfinite(out))


# --------------------------------------------------------------------------------------------
# 3. Exact when the weights are block-circulant and no nonlinearity is approximated


def _circulant(shape: tuple[int, ...], rng: np.random.Generator) -> torch.Tensor:
    """Dense weights ``[M, N, *K]`` that are block-circulant (expanded random generators)."""
    M, N, *K = shape
    generators = rng.standard_normal((-(-M // B), -(-N // B), B, *K)) / np.sqrt(N)
    return torch.tensor(expand_circulant(generators)[:M, :N], dtype=torch.float32)


def _block_bn(bn: nn.Module, rng: np.random.Generator) -> None:
    """A batch norm whose scale ``gamma / sqrt(var + eps)`` is the same within each block of
    ``B`` channels (else folding it leaves the block-circulant matrices)."""
    n = bn.num_features
    var = rng.uniform(0.5, 2, n)
    scale = np.repeat(rng.uniform(0.5, 2, -(-n // B)), B)[:n]
    bn.running_var.copy_(torch.tensor(var))
    bn.weight.data.copy_(torch.tensor(scale * np.sqrt(var + bn.eps)))
    bn.running_mean.copy_(torch.tensor(rng.standard_normal(n)))
    bn.bias.data.copy_(torch.tensor(rng.standard_normal(n)))


def _exact_model(head: str, seed: int = 0) -> nn.Module:
    """Convs with biases and batch norms, a residual, a global average pool or a flatten, two
    Linear layers (the first with a BatchNorm1d): all exact on block-circulant weights."""

    class Exact(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c1 = nn.Conv3d(3, 16, 3, padding=1)
            self.c2 = nn.Conv3d(16, 16, (1, 3, 3), stride=(1, 2, 2), padding=(0, 1, 1),
                                bias=False)
            self.c3 = nn.Conv3d(16, 16, (3, 1, 1), padding=(1, 0, 0), bias=False)
            self.bn1, self.bn2, self.bn3 = (nn.BatchNorm3d(16) for _ in range(3))
            self.fc1 = nn.Linear(16 if head == "gap" else 16 * 4 * 3 * 3, 16)
            self.bn4 = nn.BatchNorm1d(16)
            self.fc2 = nn.Linear(16, 10)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.bn1(self.c1(x))
            y = self.bn2(self.c2(y))
            y = self.bn3(self.c3(y)) + y
            y = y.mean(dim=(2, 3, 4)) if head == "gap" else torch.flatten(y, 1)
            return self.fc2(self.bn4(self.fc1(y)))

    model, rng = Exact(), np.random.default_rng(seed)
    with torch.no_grad():
        for conv in (model.c1, model.c2, model.c3):
            conv.weight.copy_(_circulant(tuple(conv.weight.shape), rng))
        model.c1.bias.copy_(torch.tensor(rng.standard_normal(16)))
        model.fc1.weight.copy_(_circulant((16, 16, 1, 1, 1) if head == "gap" else
                                          (16, 16, 4, 3, 3), rng).reshape(16, -1))
        model.fc2.weight.copy_(_circulant((10, 16), rng))
        for bn in (model.bn1, model.bn2, model.bn3, model.bn4):
            _block_bn(bn, rng)
    return model


@pytest.mark.parametrize(("head", "exporter"), [("gap", "dynamo-bn"), ("flatten", "dynamo")])
def test_exact_on_block_circulant_weights(tmp_path, head, exporter):
    _torch()
    model = _exact_model(head).eval()
    x = torch.randn(1, 3, 4, 6, 6, generator=torch.Generator().manual_seed(3))
    path = tmp_path / "exact.onnx"
    _export(model, x, path, exporter=exporter)
    imp = import_onnx(path)
    assert [r.kind for r in imp.network.resolved] == (
        ["conv", "conv", "conv"] + (["gap"] if head == "gap" else []) + ["fc", "fc"])
    assert all(not r.approximations for r in imp.report), imp.report_lines()
    assert all(r.error < 1e-6 for r in imp.report)  # float32 weights: BN scales rounded

    got = run_network(imp.network, ("float",), weights=imp.weights,
                      x=x[0].double().numpy()).outputs["float"].reshape(-1)
    with torch.no_grad():
        want32 = model(x)[0].numpy()
        want64 = model.double()(x.double())[0].numpy()

    def rel(a, b):
        return np.abs(a - b).max() / np.abs(b).max()

    assert rel(got, want32) < 1e-6
    assert rel(got, want64) < 1e-6
    if exporter != "dynamo":
        return  # the unoptimised export's zero conv biases are [M, 2]: no runtime takes them
    # the ONNX model itself, run by onnx's reference evaluator (no onnxruntime needed)
    reference = ReferenceEvaluator(str(path))
    (onnx_out,) = reference.run(None, {reference.input_names[0]: x.numpy()})
    assert rel(got, onnx_out[0]) < 1e-6


# --------------------------------------------------------------------------------------------
# 4. Graphs the import refuses


def _model(nodes, inputs, output, initializers=()):
    graph = helper.make_graph(nodes, "g", inputs, [output], list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def _tensor(name: str, shape) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _weight(name: str, shape) -> onnx.TensorProto:
    return numpy_helper.from_array(np.ones(shape, dtype=np.float32), name)


def _save(model, tmp_path, name="bad.onnx"):
    path = tmp_path / name
    onnx.save(model, str(path))
    return path


def test_refuses_a_grouped_conv(tmp_path):
    conv = helper.make_node("Conv", ["x", "w"], ["y"], name="grouped", group=2,
                            pads=[1] * 6)
    path = _save(_model([conv], [_tensor("x", [1, 8, 4, 4, 4])], _tensor("y", None),
                        [_weight("w", (8, 4, 3, 3, 3))]), tmp_path)
    with pytest.raises(OnnxImportError, match=r"Conv 'grouped': group=2: only group 1"):
        import_onnx(path)


def test_refuses_a_2d_conv(tmp_path):
    conv = helper.make_node("Conv", ["x", "w"], ["y"], name="conv2d", pads=[1] * 4)
    path = _save(_model([conv], [_tensor("x", [1, 3, 8, 8])], _tensor("y", None),
                        [_weight("w", (8, 3, 3, 3))]), tmp_path)
    with pytest.raises(OnnxImportError) as info:
        import_onnx(path)
    assert "Conv 'conv2d': a 2-D conv" in str(info.value)
    assert "graph input 'x' has shape [1, 3, 8, 8]" in str(info.value)


def test_refuses_unsupported_ops_all_at_once(tmp_path):
    nodes = [helper.make_node("Conv", ["x", "w"], ["a"], name="c1", pads=[1] * 6),
             helper.make_node("Sigmoid", ["a"], ["b"], name="gate"),
             helper.make_node("Mul", ["a", "b"], ["c"], name="swish"),
             helper.make_node("Conv", ["c", "w2"], ["d"], name="c2", dilations=[2, 2, 2],
                              pads=[2] * 6),
             helper.make_node("Conv", ["d", "w2"], ["y"], name="c3", pads=[1] * 6)]
    path = _save(_model(nodes, [_tensor("x", [1, 3, 4, 8, 8])], _tensor("y", None),
                        [_weight("w", (8, 3, 3, 3, 3)), _weight("w2", (8, 8, 3, 3, 3))]),
                 tmp_path)
    with pytest.raises(OnnxImportError) as info:
        import_onnx(path)
    message, problems = str(info.value), info.value.problems
    assert "Sigmoid 'gate': unsupported op" in message and "Conv, BatchNormalization" in message
    assert "Mul 'swish': unsupported op" in message
    assert "Conv 'c2': dilations=[2, 2, 2]: only dilations 1" in message
    assert len(problems) == 3  # c3 reads c2's refused output: not reported again


@pytest.mark.parametrize(("node", "match"), [
    (helper.make_node("Conv", ["x", "w"], ["y"], name="asym", pads=[0, 1, 1, 0, 0, 0]),
     r"Conv 'asym': pads=\[0, 1, 1, 0, 0, 0\]: only symmetric pads"),
    (helper.make_node("AveragePool", ["x"], ["y"], name="avg", kernel_shape=[2, 2, 2]),
     r"AveragePool 'avg': .*only an AveragePool over the whole map"),
    (helper.make_node("Relu", ["x"], ["y"], name="relu0"),
     r"Relu 'relu0': a ReLU applies to the network input"),
])
def test_refuses_what_the_mapping_cannot_take(tmp_path, node, match):
    path = _save(_model([node], [_tensor("x", [1, 8, 4, 4, 4])], _tensor("y", None),
                        [_weight("w", (8, 8, 3, 3, 3))]), tmp_path)
    with pytest.raises(OnnxImportError, match=match):
        import_onnx(path)


def test_refuses_a_relu_on_a_map_also_read_before_it(tmp_path):
    nodes = [helper.make_node("Conv", ["x", "w"], ["a"], name="c1", pads=[1] * 6),
             helper.make_node("Relu", ["a"], ["b"], name="r1"),
             helper.make_node("Add", ["a", "b"], ["y"], name="sum")]
    path = _save(_model(nodes, [_tensor("x", [1, 8, 4, 4, 4])], _tensor("y", None),
                        [_weight("w", (8, 8, 3, 3, 3))]), tmp_path)
    with pytest.raises(OnnxImportError, match=r"Add 'sum': .*before Relu 'r1'"):
        import_onnx(path)


def test_not_an_onnx_file(tmp_path):
    (tmp_path / "junk.onnx").write_bytes(b"\x01not a model")
    with pytest.raises(OnnxImportError, match="not a readable ONNX model"):
        import_onnx(tmp_path / "junk.onnx")
    with pytest.raises(OnnxImportError, match="file not found"):
        import_onnx(tmp_path / "missing.onnx")
    with pytest.raises(ValueError, match="block size"):
        import_onnx(tmp_path / "junk.onnx", block_size=6)


def test_without_onnx_the_error_names_the_extra(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "onnx", None)
    with pytest.raises(ImportError, match=re.escape("fcircnn[onnx]")):
        import_onnx(tmp_path / "model.onnx")


def test_hand_written_graph_of_the_other_forms(tmp_path):
    """GlobalAveragePool, Flatten, Identity, Dropout (inference), MatMul + Add of a bias and a
    per-channel constant Add after a conv, as other exporters write them."""
    rng = np.random.default_rng(5)
    w = rng.standard_normal((16, 3, 3, 3, 3)).astype(np.float32)
    shift = rng.standard_normal((1, 16, 1, 1, 1)).astype(np.float32)
    fc = rng.standard_normal((16, 10)).astype(np.float32)  # MatMul's B: [K, M]
    bias = rng.standard_normal(10).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "conv.weight"], ["a"], name="c", pads=[1] * 6,
                              strides=[1, 2, 2], kernel_shape=[3, 3, 3]),
             helper.make_node("Add", ["shift", "a"], ["b"], name="shift_add"),
             helper.make_node("Relu", ["b"], ["c"], name="relu"),
             helper.make_node("Identity", ["c"], ["d"], name="same"),
             helper.make_node("GlobalAveragePool", ["d"], ["e"], name="pool"),
             helper.make_node("Flatten", ["e"], ["f"], name="flat"),
             helper.make_node("Dropout", ["f"], ["g"], name="drop"),
             helper.make_node("MatMul", ["g", "head.weight"], ["h"], name="mm"),
             helper.make_node("Add", ["h", "bias"], ["y"], name="head_bias")]
    inits = [numpy_helper.from_array(v, k) for k, v in
             {"conv.weight": w, "shift": shift, "head.weight": fc, "bias": bias}.items()]
    path = _save(_model(nodes, [_tensor("x", ["batch", 3, 4, 8, 8])], _tensor("y", None),
                        inits), tmp_path, "other.onnx")
    imp = import_onnx(path, block_size=4, name="other")
    net = imp.network
    assert [(r.name, r.kind, r.out_channels, r.cbn, r.crelu) for r in net.resolved] == [
        ("conv", "conv", 16, True, True), ("pool", "gap", 16, False, False),
        ("head", "fc", 10, True, False)]
    assert net.block_size == 4 and net.layer("conv").stride == (1, 2, 2)
    assert "shift_add' (a bias) as the CBN offset (exact)" in imp.report[0].how
    head = imp.weights.layers["head"]
    expected, _ = project_network(net, {"conv": w, "head": fc.T})
    np.testing.assert_allclose(head.generators, expected.layers["head"].generators)
    slots = to_slots(pad_channels(bias.astype(np.float64), 4), 4)
    np.testing.assert_allclose(head.bn_offset, np.stack([slots.real, slots.imag]), rtol=1e-12)
    shifts = to_slots(shift.reshape(16).astype(np.float64), 4)
    np.testing.assert_allclose(imp.weights.layers["conv"].bn_offset,
                               np.stack([shifts.real, shifts.imag]), rtol=1e-12)
    assert imp.report_lines()[0].startswith("conv ")


def test_refuses_a_second_reader_of_the_network_input(tmp_path):
    nodes = [helper.make_node("Conv", ["x", "w"], ["a"], name="main", pads=[1] * 6),
             helper.make_node("Conv", ["x", "w1"], ["b"], name="side"),
             helper.make_node("Add", ["a", "b"], ["y"], name="sum")]
    path = _save(_model(nodes, [_tensor("x", [1, 8, 4, 4, 4])], _tensor("y", None),
                        [_weight("w", (8, 8, 3, 3, 3)), _weight("w1", (8, 8, 1, 1, 1))]),
                 tmp_path)
    with pytest.raises(OnnxImportError, match=r"Conv 'side' reads the network input"):
        import_onnx(path)


def test_residual_goes_on_the_main_branch_whatever_the_add_order(tmp_path):
    conv = {"c0": ("x", 3), "down": ("r0", 1), "c1": ("r0", 3), "c2": ("r1", 3)}
    nodes = [helper.make_node("Conv", [src, f"{name}.weight"], [f"{name}.out"], name=name,
                              pads=[k // 2] * 6) for name, (src, k) in conv.items()]
    nodes[1:1] = [helper.make_node("Relu", ["c0.out"], ["r0"], name="relu0")]
    nodes[4:4] = [helper.make_node("Relu", ["c1.out"], ["r1"], name="relu1")]
    nodes += [helper.make_node("Add", ["down.out", "c2.out"], ["s"], name="sum"),
              helper.make_node("Relu", ["s"], ["y"], name="relu2")]
    inits = [_weight(f"{name}.weight", (8, 8, k, k, k)) for name, (_, k) in conv.items()]
    path = _save(_model(nodes, [_tensor("x", [1, 8, 4, 4, 4])], _tensor("y", None), inits),
                 tmp_path)
    imp = import_onnx(path)
    assert [(r.name, r.input, r.residual, r.crelu) for r in imp.network.resolved] == [
        ("c0", None, None, True), ("down", "c0", None, False), ("c1", "c0", None, True),
        ("c2", "c1", "down", True)]
    assert "input: c0" in imp.network_yaml and "residual: down" in imp.network_yaml


def test_the_network_files_limits_are_reported(tmp_path):
    nodes = [helper.make_node("Conv", ["x", "w"], ["a"], name="c", pads=[1] * 6),
             helper.make_node("MaxPool", ["a"], ["y"], name="big_pool", kernel_shape=[4] * 3,
                              strides=[4] * 3)]
    path = _save(_model(nodes, [_tensor("x", [1, 8, 8, 8, 8])], _tensor("y", None),
                        [_weight("w", (8, 8, 3, 3, 3))]), tmp_path)
    with pytest.raises(OnnxImportError, match=r"network file the graph maps to is refused"
                                              r"(.|\n)*pool.window.*at most 3"):
        import_onnx(path)


# --------------------------------------------------------------------------------------------
# The command: fcircnn import MODEL.onnx -o DIR


def test_the_import_command_writes_a_network_check_and_golden_take(tmp_path, capsys):
    """An exported dense twin through `fcircnn import`: the folder's network file passes
    `check` and `golden` with the folder's weights; the report names each layer's
    approximations; bad combinations of flags are refused before any work."""
    from fcircnn.cli import main

    _torch()
    model = _twin(TINY, tmp_path, 3)
    _export(model, torch.randn(1, 3, 4, 8, 8), tmp_path / "tiny.onnx")
    out = tmp_path / "imported"
    assert main(["import", str(tmp_path / "tiny.onnx"), "-o", str(out), "-q"]) == 0
    table, err = capsys.readouterr()
    assert "projection" in table and "crelu" in table and "cmaxpool" in table
    assert "next: fcircnn check and golden" in err
    assert main(["import", str(tmp_path / "tiny.onnx"), "-o", str(tmp_path / "oj"), "-q",
                 "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["network_file"] == str(tmp_path / "oj" / "network.yaml")
    assert (tmp_path / "oj" / "network.yaml").read_text() == (out / "network.yaml").read_text()
    for layer in doc["layers"]:  # each layer as the table gives it
        assert f"{layer['error']:.4f}" in table and layer["nodes"][0] in table
    assert {a for layer in doc["layers"] for a in layer["approximated"]} >= {
        "projection", "crelu", "cmaxpool"}
    assert main(["check", str(out / "network.yaml")]) == 0
    assert main(["golden", str(out / "network.yaml"), "--weights", str(out / "weights.npz"),
                 "--mode", "int", "-q"]) == 0
    capsys.readouterr()
    assert main(["import", str(tmp_path / "tiny.onnx"), "-o", str(tmp_path / "o2"),
                 "--checkpoint", str(tmp_path / "x.npz")]) == 2
    assert "--checkpoint: not with an ONNX" in capsys.readouterr().err
    with pytest.raises(SystemExit) as usage:
        main(["import", str(tmp_path / "tiny.onnx"), "-o", str(tmp_path / "o2"),
              "--block-size", "5"])
    assert usage.value.code == 2 and "--block-size" in capsys.readouterr().err
    assert main(["import", "spectral_c3d", "-o", str(tmp_path / "w.npz"), "--block-size",
                 "8"]) == 2
    assert "--block-size: only with an ONNX model" in capsys.readouterr().err
    assert main(["import", str(tmp_path / "tiny.onnx"), "-o", str(tmp_path / "o2"),
                 "--granularity", "bin"]) == 2
    assert "--granularity: only with --calibration" in capsys.readouterr().err
    assert not (tmp_path / "o2").exists()
    # With a calibration set the folder's weights carry the int8 scales, as calibrate writes.
    np.save(tmp_path / "cal.npy", np.random.default_rng(0).standard_normal((3, 3, 4, 8, 8)))
    assert main(["import", str(tmp_path / "tiny.onnx"), "-o", str(tmp_path / "o3"), "-q",
                 "--calibration", str(tmp_path / "cal.npy"), "--granularity", "bin"]) == 0
    net = load_network(tmp_path / "o3" / "network.yaml")
    stored = load_weights(net, str(tmp_path / "o3" / "weights.npz")).calibration
    assert stored.describe() == "bin scales, the maximum over 3 clip(s)"
