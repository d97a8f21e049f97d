"""Whole-network runner: C3D and 3D ResNet-18 end to end in all three modes at full size.

SNR bound. A max-abs symmetric int8 quantizer on roughly Gaussian data (crest factor c ~ 5)
has an SNR of about 10*log10(3 * 127**2 / c**2) ~ 33 dB per tensor; the noise of successive
layers adds up roughly in power, so after L ~ 10 quantized layers we expect around
33 - 10*log10(10) ~ 23 dB, minus a few dB for CReLU/pool nonlinearity and the weights' own
quantization. We measure 19.5 dB (C3D) and 18.5 dB (ResNet-18) at the output with per-tensor
scales, and assert 15 dB at the output and 30 dB after the first layer: a broken contract
(wrong slot-0 rule, sign, scale or shift) gives an SNR near or below 0 dB.
"""

import copy

import numpy as np
import pytest

from fcircnn.models import spectral as sp
from fcircnn.models.config import builtin_path, load_network
from fcircnn.models.network import (
    calibrate,
    class_scores_problem,
    load_weights,
    random_input,
    random_weights,
    run_int,
    run_network,
)


@pytest.fixture(scope="module", params=["c3d", "r3d18"])
def full_run(request):
    net = load_network(builtin_path(request.param))
    return net, run_network(net, ("float", "slots", "int"), seed=0)


def test_full_network_all_modes(full_run):
    net, result = full_run
    assert [r.name for r in result.layers] == [layer.name for layer in net.resolved]
    assert result.outputs["float"].shape == (101, 1, 1, 1)
    gop = result.total_dense_ops / 1e9
    assert gop == pytest.approx({"c3d": 77.1, "r3d18": 16.6}[net.name], rel=0.01)
    for report in result.layers:
        assert report.errors["slots"] < 1e-9, report.name
    assert result.layers[0].errors["int"] > 30
    ref = result.outputs["float"].ravel()
    for mode in ("slots", "int"):
        out = result.outputs[mode].ravel()
        snr = 10 * np.log10(np.sum(ref**2) / np.sum((out - ref) ** 2))
        assert snr > (200 if mode == "slots" else 15), (mode, snr)


def _recompute_int_layer(net, result, name, granularity="tensor"):
    """One layer of the int mode rebuilt from the golden functions and the run's scales."""
    from fcircnn.models import quant

    layer = net.layer(name)
    src = "" if layer.input is None else layer.input
    if src:
        x_re, x_im = result.int_outputs[src]
    else:
        xs = sp.to_slots(sp.pad_channels(random_input(net, 0), layer.block_size),
                         layer.block_size)
        x_re, x_im = quant.quantize_slots(xs, result.int_scales[""])
    lw = result.weights.layers[name]
    ws = sp.weight_slots(lw.generators)
    w_scale = quant.weight_scales(ws, granularity)
    wq_re, wq_im = quant.quantize_slots(ws, w_scale, axis=2)
    accs = sp.conv3d_slots_int(x_re, x_im, wq_re, wq_im, layer.stride, layer.padding)
    res = None if layer.residual is None else result.int_outputs[layer.residual]
    params = quant.fold_post(
        lw.bn_gain, lw.bn_offset, w_scale * result.int_scales[src], result.int_scales[name],
        sp.accumulator_bound(ws.shape[1], layer.kernel),
        None if res is None else result.int_scales[layer.residual])
    pool = None if layer.pool is None else (layer.pool.window, layer.pool.stride,
                                            layer.pool.padding)
    return [sp.post_process(acc, **params.part(c), res=None if res is None else res[c],
                            relu=layer.crelu, pool=pool) for c, acc in enumerate(accs)]


def test_int_mode_is_the_integer_contract(full_run):
    """The first layer's int8 output, recomputed from the golden functions, matches exactly."""
    net, result = full_run
    first = net.resolved[0].name
    re, im = _recompute_int_layer(net, result, first)
    np.testing.assert_array_equal(result.int_outputs[first][0], re)
    np.testing.assert_array_equal(result.int_outputs[first][1], im)
    assert re.min() >= 0 and re.max() <= 127 and im.min() >= 0  # CReLU, int8
    assert re.shape == (net.resolved[0].padded_out_channels // 2, *net.resolved[0].out_shape)


def _tiny_network(tmp_path, residual=True):
    text = """
name: tiny
input: {channels: 5, depth: 4, height: 6, width: 6}
classes: 12
block_size: 4
layers:
  - {name: c1, type: conv, out_channels: 8, kernel: 3, padding: 1, cbn: true, crelu: true}
  - {name: c2, type: conv, out_channels: 8, kernel: 3, padding: 1, cbn: true,
     crelu: true, residual: c1, pool: {window: 2}}
  - {name: c3, type: conv, out_channels: 16, kernel: 1, stride: [1, 2, 2], cbn: true,
     crelu: true}
  - {name: gap, type: gap}
  - {name: fc, type: fc, out_channels: 12}
"""
    path = tmp_path / "tiny.yaml"
    path.write_text(text if residual else text.replace(", residual: c1", ""))
    return load_network(path)


def test_tiny_network_int_layers_match_golden_functions(tmp_path):
    net = _tiny_network(tmp_path)
    result = run_network(net, ("int",), seed=3, granularity="bin")
    assert set(result.seconds) == {"float", "int"}
    c2 = result.int_outputs["c2"]
    assert c2[0].shape == (4, 2, 3, 3)
    for name in ("c2", "c3"):  # residual + pool; stride-2 1x1x1
        got = _recompute_int_layer(net, result, name, "bin")
        np.testing.assert_array_equal(result.int_outputs[name][0], got[0])
        np.testing.assert_array_equal(result.int_outputs[name][1], got[1])
    assert result.outputs["int"].shape == (12, 1, 1, 1)
    snr = [r.errors["int"] for r in result.layers]
    assert min(snr) > 15, snr


def test_weights_round_trip_through_npz(tmp_path):
    net = _tiny_network(tmp_path)
    first = run_network(net, ("int",), seed=1)
    path = tmp_path / "w.npz"
    first.weights.save(path)
    loaded = load_weights(net, str(path))
    again = run_network(net, ("int",), weights=loaded, x=random_input(net, 1))
    np.testing.assert_array_equal(again.int_outputs["fc"][0], first.int_outputs["fc"][0])
    np.testing.assert_allclose(again.outputs["float"], first.outputs["float"], atol=1e-12)


def test_load_weights_names_bad_arrays(tmp_path):
    net = _tiny_network(tmp_path)
    w = random_weights(net, 0)
    bad = {f"{n}.generators": lw.generators for n, lw in w.layers.items() if lw.generators
           is not None}
    bad["c2.generators"] = bad["c2.generators"][:, :, :, :1]
    np.savez(tmp_path / "bad.npz", **bad)
    with pytest.raises(ValueError, match=r"'c2.generators': shape \(2, 2, 4, 1, 3, 3\), "
                                         r"expected \(2, 2, 4, 3, 3, 3\)"):
        load_weights(net, str(tmp_path / "bad.npz"))
    del bad["c2.generators"]
    np.savez(tmp_path / "missing.npz", **bad)
    with pytest.raises(ValueError, match=r"missing array 'c2\.generators'"):
        load_weights(net, str(tmp_path / "missing.npz"))


def test_class_scores_need_a_1x1x1_output(tmp_path):
    net = _tiny_network(tmp_path)  # ends in a gap: 12 scores
    assert class_scores_problem(net) is None  # ends in an fc of 12 outputs
    path = tmp_path / "no_head.yaml"
    text = (tmp_path / "tiny.yaml").read_text()
    path.write_text(text[:text.index("  - {name: gap")].replace("classes: 12", "classes: 16"))
    assert class_scores_problem(load_network(path)) == (
        "network tiny has no class scores: its last layer 'c3' outputs 16 channels on a "
        "2x2x2 map, not on 1x1x1 (end the network with an fc or gap layer)")


def test_gap_equals_conv_with_identity_circulant_weights(tmp_path):
    """Global average pooling is the conv over the whole map with delta generators / V."""
    rng = np.random.default_rng(0)
    B, Q = 8, 3
    shape = (Q * B // 2, 2, 3, 3)
    xs = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    w = np.zeros((Q, Q, B, 2, 3, 3))
    for q in range(Q):
        w[q, q, 0] = 1.0 / 18
    got = sp.conv3d_slots(xs, sp.weight_slots(w))
    np.testing.assert_allclose(got, xs.mean(axis=(1, 2, 3), keepdims=True), atol=1e-14)


def test_run_network_rejects_wrong_input(tmp_path):
    net = _tiny_network(tmp_path)
    with pytest.raises(ValueError, match="expects"):
        run_network(net, ("int",), x=np.zeros((3, 4, 6, 6)))
    with pytest.raises(ValueError, match="mode must be"):
        run_network(net, ("fast",))


def test_calibrate_gives_the_int_mode_network(tmp_path):
    """The compiler's entry point quantizes exactly as the int mode does."""
    net = _tiny_network(tmp_path)
    result = run_network(net, ("int",), seed=2)
    weights, qnet = calibrate(net, weights=result.weights, x=random_input(net, 2))
    assert weights is result.weights
    np.testing.assert_array_equal(qnet.input_scale, result.int_scales[""])
    for name, ql in qnet.layers.items():
        ref = result.quantized.layers[name]
        for field in ("mult", "bias", "shift"):
            np.testing.assert_array_equal(getattr(ql.post, field), getattr(ref.post, field))
        if ql.wq_re is not None:
            np.testing.assert_array_equal(ql.wq_re, ref.wq_re)
            assert ql.wq_re.shape[2] == net.layer(name).block_size // 2
        np.testing.assert_array_equal(ql.out_scale, result.int_scales[name])
    assert qnet.layers["c2"].post.res_mult is not None and qnet.layers["c1"].post.res_mult is None
    xq = qnet.quantize_input(net, random_input(net, 2))
    assert max(np.abs(xq[0]).max(), np.abs(xq[1]).max()) == 127


def test_calibration_set(tmp_path):
    from fcircnn.models.network import load_clips

    net = _tiny_network(tmp_path)
    x = random_input(net, 1)
    weights = random_weights(net, 0)
    # A set of one clip, the input itself, is the default calibration.
    _, alone = calibrate(net, weights=copy.deepcopy(weights), x=x)
    _, as_set = calibrate(net, weights=copy.deepcopy(weights), x=x, clips=[x])
    for name in alone.layers:
        np.testing.assert_array_equal(alone.layers[name].out_scale, as_set.layers[name].out_scale)
    # A larger set: golden and compiler see the same integer network.
    clips = np.stack([random_input(net, s) for s in range(2, 6)])
    np.save(tmp_path / "clips.npy", clips)
    clips = load_clips(net, str(tmp_path / "clips.npy"))
    w1, qnet = calibrate(net, weights=copy.deepcopy(weights), x=x, clips=clips,
                         statistic="p99")
    result = run_network(net, ("int",), weights=copy.deepcopy(weights), x=x, clips=clips,
                         statistic="p99")
    ints = run_int(net, qnet, qnet.quantize_input(net, x))
    for name, (re, im) in result.int_outputs.items():
        np.testing.assert_array_equal(re, ints[name].re)
        np.testing.assert_array_equal(im, ints[name].im)
    # CBN calibrated over the whole set, not the first clip.
    first = net.resolved[0]
    gain_x, _ = calibrate(net, weights=copy.deepcopy(weights), x=x, clips=clips[:1])
    assert not np.allclose(w1.layers[first.name].bn_gain, gain_x.layers[first.name].bn_gain)
