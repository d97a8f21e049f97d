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


def test_another_network_s_calibrated_weights_are_named_by_their_layers(tmp_path):
    """A calibrated weights file of another network is refused for its weights (the arrays of
    layers the network lacks), not for its calibration's layer names."""
    net = _tiny_network(tmp_path)
    weights, _ = calibrate(net, weights=random_weights(net, 0), x=random_input(net, 0))
    weights.save(tmp_path / "w.npz")
    other = load_network(builtin_path("c3d"))
    with pytest.raises(ValueError, match=r"unknown array\(s\) .*'c1\.generators'.* for "
                                         r"network c3d"):
        load_weights(other, str(tmp_path / "w.npz"))


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
    assert weights.layers is result.weights.layers
    assert weights.calibration.clips == 1 and weights.calibration.statistic == "max"
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


# --------------------------------------------------------------------------------------------
# Time-domain layers: a dense stem with its rfft, a head of irfft, gap and dense fc


def _stem_head_network(tmp_path, B=8):
    text = f"""
name: stem_head
input: {{channels: 3, depth: 4, height: 10, width: 10}}
classes: 13
block_size: {B}
layers:
  - {{name: stem, type: conv, dense: true, out_channels: 24, kernel: [3, 3, 3], padding: 1,
     stride: [1, 2, 2], bias: true, bn: true, relu: true, pool: {{window: [1, 2, 2]}}}}
  - {{name: fft, type: rfft}}
  - {{name: c2, type: conv, out_channels: 32, kernel: 3, padding: 1, cbn: true, crelu: true}}
  - {{name: ifft, type: irfft}}
  - {{name: avg, type: gap}}
  - {{name: fc, type: fc, dense: true, out_channels: 13, bias: true, bn: true, relu: true}}
"""
    path = tmp_path / "stem_head.yaml"
    path.write_text(text)
    return load_network(path)


@pytest.mark.parametrize("B", [4, 8, 16])
def test_time_domain_layers_in_every_mode(tmp_path, B):
    net = _stem_head_network(tmp_path, B)
    result = run_network(net, ("slots", "int"), seed=2, granularity="bin")
    errors = {r.name: r.errors for r in result.layers}
    for name, e in errors.items():  # the mappings onto the datapath are exact
        assert e["slots"] < 1e-9, (name, e)
        assert e["int"] > 25, (name, e)
    # the float reference is the time-domain network itself
    lw = result.weights.layers
    x = random_input(net, 2)
    y = sp.conv3d_dense(x, lw["stem"].weight, (1, 2, 2), 1) + lw["stem"].bias[:, None, None, None]
    y = np.maximum(y * lw["stem"].bn_gain[:, None, None, None]
                   + lw["stem"].bn_offset[:, None, None, None], 0)
    y = sp.cmaxpool(y, (1, 2, 2))
    np.testing.assert_allclose(result.slots["float"]["fft"],
                               sp.to_slots(sp.pad_channels(y, B), B), atol=1e-9)
    z = sp.from_slots(result.slots["float"]["c2"], B)[:32].mean(axis=(1, 2, 3))
    logits = lw["fc"].weight[:, :, 0, 0, 0] @ z + lw["fc"].bias
    logits = np.maximum(lw["fc"].bn_gain * logits + lw["fc"].bn_offset, 0)
    np.testing.assert_allclose(result.outputs["float"][:, 0, 0, 0], logits, atol=1e-9)


def test_the_int_contract_of_the_time_domain_layers(tmp_path):
    """Each time-domain layer's int8 output recomputed from the contract's functions."""
    from fcircnn.arch.transforms import irfft_lane0_weights
    from fcircnn.models import timedomain as td

    net = _stem_head_network(tmp_path)
    result = run_network(net, ("int",), seed=5)
    q, out = result.quantized.layers, result.int_outputs
    xq = result.quantized.quantize_input(net, random_input(net, 5))
    np.testing.assert_array_equal(xq[0][1::4], xq[0][0::4])  # spread: every bin the value
    np.testing.assert_array_equal(xq[1][1::4], 0)
    stem = net.layer("stem")
    acc = sp.conv3d_slots_int(*xq, q["stem"].wq_re, q["stem"].wq_im, stem.stride, stem.padding)
    pool = (stem.pool.window, stem.pool.stride, stem.pool.padding)
    for c in (0, 1):
        expect = sp.post_process(acc[c], **q["stem"].post.part(c), relu=True, pool=pool)
        np.testing.assert_array_equal(out["stem"][c], expect)
    v = td.rfft_int(*out["stem"], 8)
    for c in (0, 1):
        np.testing.assert_array_equal(out["fft"][c],
                                      sp.post_process(v[c], **q["fft"].post.part(c)))
    assert np.all(q["fft"].post.bias == 0)
    # the irfft is deferred: the gap sums the slots; the fc sums lane 0 of each block
    np.testing.assert_array_equal(out["ifft"][0], out["c2"][0])
    fc = net.layer("fc")
    acc = sp.conv3d_slots_int(*out["avg"], q["fc"].wq_re, q["fc"].wq_im, 1, 0)
    w_re, w_im = irfft_lane0_weights(8)
    u = (acc[0].reshape(-1, 4) @ np.asarray(w_re) + acc[1].reshape(-1, 4) @ np.asarray(w_im))
    post = q["fc"].post
    expect = sp.post_process(u, post.mult[0, ::4], post.bias[0, ::4], post.shift[0, ::4],
                             relu=True)
    np.testing.assert_array_equal(out["fc"][0][::4, 0, 0, 0], expect)
    assert not out["fc"][0].reshape(-1, 4)[:, 1:].any() and not out["fc"][1].any()
    assert out["fc"][0].shape == (fc.out_slots, 1, 1, 1)
    # a lane0 layer's accumulators share one scale: weights scaled per bin against the input
    np.testing.assert_allclose(q["fc"].w_scale * q["avg"].out_scale,
                               (q["fc"].w_scale * q["avg"].out_scale)[0, 0])


def test_time_domain_weights_round_trip_and_are_checked(tmp_path):
    net = _stem_head_network(tmp_path)
    first = run_network(net, ("int",), seed=1)
    path = tmp_path / "w.npz"
    first.weights.save(path)
    arrays = dict(np.load(path))
    assert arrays["stem.weight"].shape == (24, 3, 3, 3, 3)
    assert arrays["stem.bias"].shape == arrays["stem.bn_gain"].shape == (24,)
    assert arrays["fc.weight"].shape == (13, 32, 1, 1, 1)
    again = run_network(net, ("int",), weights=load_weights(net, str(path)),
                        x=random_input(net, 1))
    np.testing.assert_array_equal(again.int_outputs["fc"][0], first.int_outputs["fc"][0])
    del arrays["fc.bias"]
    np.savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises(ValueError, match=r"missing array 'fc\.bias' of shape \(13,\)"):
        load_weights(net, str(tmp_path / "bad.npz"))
    arrays["fc.generators"] = np.zeros((2, 4, 8, 1, 1, 1))
    np.savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises(ValueError, match=r"unknown array\(s\) 'fc.generators'.*<layer>.weight"):
        load_weights(net, str(tmp_path / "bad.npz"))


@pytest.mark.parametrize("clip", ["zero", "huge", "constant"])
def test_time_domain_layers_on_extreme_clips(tmp_path, clip):
    net = _stem_head_network(tmp_path)
    x = {"zero": np.zeros((3, 4, 10, 10)), "huge": np.full((3, 4, 10, 10), 1e5),
         "constant": np.ones((3, 4, 10, 10))}[clip]
    calib = np.stack([random_input(net, 0), random_input(net, 1)])
    result = run_network(net, ("slots", "int"), x=x, seed=0, clips=calib)
    assert np.isfinite(result.outputs["int"]).all()
    assert result.layers[-1].errors["slots"] < 1e-9
