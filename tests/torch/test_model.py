"""build(): the PyTorch model of a network file against the golden model, layer by layer.

Float: the model in float64 and ``run_network(..., ("slots",))`` on the same weights and clip
agree on every layer's output slots to 1e-9 relative (float64 FFT rounding is ~1e-15; a wrong
slot-0 rule, sign, padding, pool or residual gives errors of order 1).

QAT: with the same weights and the same calibration set (the maximum rule of ``fcircnn golden
--calibration``), the float64 model's QAT forward equals the golden integer contract
(:func:`fcircnn.models.network.run_int`) bit for bit on every layer: every int8 value, for
every clip. The tolerance is zero because nothing is approximated: the accumulators are exact
in float64 and the post-unit runs in integers with the compiler's own folded parameters.
A float32 model holds float32 weights and computes its weight slots' FFT in float32, which can
move a value sitting on a rounding boundary by one quantization step; its class scores are held
to one output step of the golden contract's (measured here: 2e-6 of a step, i.e. the same
integers, the difference being the float32 scores' own rounding).
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the PyTorch front end needs the [torch] extra")
torch.set_num_threads(1)

from pathlib import Path  # noqa: E402

from fcircnn.models import quant, spectral  # noqa: E402
from fcircnn.models.config import ConfigError, load_network  # noqa: E402
from fcircnn.models.network import calibrate, run_int, run_network  # noqa: E402
from fcircnn.torch import SlotNetwork, build, from_weights, network_config  # noqa: E402

CONFIGS = Path(__file__).resolve().parent.parent / "hw" / "configs"
#: Every layer kind of C3D and 3D ResNet-18 at reduced size, with branches and residuals.
KINDS = CONFIGS / "kinds.yaml"

#: Padded channels (5 in, 6 out at B = 4), a padded pool, fc from a 2x2x2 map, a residual
#: through a 1x1x1 stride-2 shortcut, and a last conv whose output is not 1x1x1.
CUSTOM = """
name: custom
input: {channels: 5, depth: 4, height: 6, width: 6}
classes: 6
block_size: %(B)d
layers:
  - {name: a, type: conv, out_channels: 6, kernel: 3, padding: 1, cbn: true, crelu: true,
     pool: {window: 2, stride: 2, padding: [0, 1, 1]}}
  - {name: b, type: conv, out_channels: %(W)d, kernel: [1, 3, 3], padding: [0, 1, 1],
     cbn: true, crelu: true}
  - {name: s, type: conv, input: a, out_channels: %(W)d, kernel: 1, stride: 2, cbn: true}
  - {name: c, type: conv, input: b, out_channels: %(W)d, kernel: 3, stride: 2, padding: 1,
     cbn: true, crelu: true, residual: s}
  - {name: f, type: fc, out_channels: 20, cbn: true, crelu: true}
  - {name: g, type: fc, out_channels: 6}
"""


def _custom(tmp_path, B):
    path = tmp_path / f"custom{B}.yaml"
    path.write_text(CUSTOM % {"B": B, "W": 2 * B})
    return load_network(path)


def _clips(net, n, seed):
    inp = net.input
    return np.random.default_rng(seed).standard_normal((n, inp.channels, *inp.shape))


def _as_complex(t):
    a = t.detach().numpy()
    return a[0] + 1j * a[1]


def _assert_layers_match_golden_slots(net, seed):
    x = _clips(net, 2, seed)
    golden = run_network(net, ("slots",), x=x[1], seed=seed)  # calibrates CBN on the clip
    model = from_weights(net, golden.weights, dtype=torch.float64).eval()
    with torch.no_grad():
        outs = model.forward_slots(torch.from_numpy(x))
    assert list(outs) == [layer.name for layer in net.resolved]
    for name, ref in golden.slots["slots"].items():
        got = _as_complex(outs[name][1])
        assert got.shape == ref.shape, name
        err = np.abs(got - ref).max() / np.abs(ref).max()
        assert err < 1e-9, (name, err)
    with torch.no_grad():
        scores = model(torch.from_numpy(x))
    last = net.resolved[-1]
    np.testing.assert_allclose(scores[1].numpy().reshape(golden.outputs["slots"].shape),
                               golden.outputs["slots"], rtol=1e-9,
                               atol=1e-9 * np.abs(golden.outputs["slots"]).max())
    assert scores.shape[:2] == (2, last.out_channels)


def test_every_layer_kind_matches_the_golden_slot_mode():
    _assert_layers_match_golden_slots(load_network(KINDS), seed=3)


@pytest.mark.parametrize("B", [4, 16])
def test_a_custom_network_with_padded_channels_matches_the_golden_slot_mode(tmp_path, B):
    _assert_layers_match_golden_slots(_custom(tmp_path, B), seed=B)


def test_qat_forward_is_the_golden_integer_contract_bit_for_bit(tmp_path):
    for net in (load_network(KINDS), _custom(tmp_path, 4)):
        clips = _clips(net, 3, 7)
        golden = run_network(net, ("slots",), x=clips[0], seed=7)
        weights, qnet = calibrate(net, weights=golden.weights, x=clips[0], clips=list(clips))
        model = from_weights(net, weights, dtype=torch.float64).eval()
        model.calibrate(torch.from_numpy(clips), batch_size=2).qat(True)
        with torch.no_grad():
            outs = model.forward_slots(torch.from_numpy(clips))
        compared = 0
        for i, clip in enumerate(clips):
            ints = run_int(net, qnet, qnet.quantize_input(net, clip))
            for name, ref in ints.items():
                obs = model.input_quant if name == "" else model.layers[name].out_quant
                assert obs.scale == pytest.approx(ref.scale.max(), rel=1e-12), name
                got = outs[name][i].numpy() / obs.scale
                np.testing.assert_allclose(got, np.rint(got), atol=1e-6)
                np.testing.assert_array_equal(np.rint(got[0]), ref.re, err_msg=name)
                np.testing.assert_array_equal(np.rint(got[1]), ref.im, err_msg=name)
                compared += ref.re.size * 2
        assert compared > 2_000  # every value of every layer of every clip


def test_float32_qat_scores_stay_within_one_output_step_of_the_golden_contract():
    net = load_network(KINDS)
    clips = _clips(net, 2, 11)
    golden = run_network(net, ("slots",), x=clips[0], seed=11)
    model = from_weights(net, golden.weights).eval()  # float32
    model.calibrate(torch.from_numpy(clips).float()).qat(True)
    _, qnet = calibrate(net, weights=golden.weights, x=clips[0], clips=list(clips))
    last = net.resolved[-1]
    with torch.no_grad():
        scores = model(torch.from_numpy(clips).float()).numpy()
    for i, clip in enumerate(clips):
        out = run_int(net, qnet, qnet.quantize_input(net, clip))[last.name]

        # as predict(): dequantize, inverse transform, the real channels
        slots = quant.dequantize_slots(out.re, out.im, out.scale)
        ref = spectral.from_slots(slots, last.block_size)[: last.out_channels].ravel()
        step = out.scale.max()
        assert np.abs(scores[i] - ref).max() < step, (scores[i], ref, step)


def test_gradients_reach_every_generator_and_cbn_in_float_and_qat(tmp_path):
    net = _custom(tmp_path, 4)
    clips = torch.from_numpy(_clips(net, 4, 5)).float()
    for qat in (False, True):
        torch.manual_seed(0)
        model = build(net, seed=5, qat=qat)
        loss = torch.nn.functional.cross_entropy(model(clips), torch.tensor([0, 1, 2, 3]))
        loss.backward()
        for name, p in model.named_parameters():
            assert p.grad is not None and p.grad.abs().sum() > 0, (qat, name)
        assert {n.rsplit(".", 2)[-2] for n, _ in model.named_parameters()} == {"conv", "cbn"}


def test_build_takes_a_network_file_an_accelerator_file_or_a_built_in_name():
    kinds = build(KINDS)
    assert isinstance(kinds, SlotNetwork) and kinds.config.name == "kinds"
    assert build(CONFIGS / "two_core.yaml").config.name == "kinds"
    assert network_config("c3d_zcu102").name == network_config("c3d").name
    r3d18 = build("r3d18", seed=None)
    count = sum(p.numel() for n, p in r3d18.named_parameters() if n.endswith("generators"))
    assert count == sum(layer.circulant_params for layer in r3d18.config.resolved)
    # the same seed draws the golden model's random generators
    golden = run_network(kinds.config, (), seed=0).weights
    np.testing.assert_array_equal(kinds.layers["c2"].conv.generators.detach().double().numpy(),
                                  golden.layers["c2"].generators.astype(np.float32))


def test_bad_networks_and_inputs_are_refused_clearly(tmp_path):
    with pytest.raises(ConfigError, match="no built-in configuration of that name"):
        build("c3dd")
    bad = tmp_path / "bad.yaml"
    bad.write_text((CUSTOM % {"B": 4, "W": 8}).replace("kernel: 3, stride: 2", "kernal: 3"))
    with pytest.raises(ConfigError, match=r"layers\[3\] \(c\)"):
        build(bad)
    with pytest.raises(ConfigError, match="file not found"):
        build(tmp_path / "missing.yaml")
    model = build(KINDS)
    with pytest.raises(ValueError, match=r"input clips \[2, 3, 5, 10\], expected "
                                         r"\[N, 3, 5, 10, 10\]"):
        model(torch.zeros(2, 3, 5, 10))
    with pytest.raises(ValueError, match=r"layer 'c2': input slots \[1, 2, 4"):
        model.layers["c2"](torch.zeros(1, 2, 4, 5, 5, 5))
    clash = tmp_path / "clash.yaml"
    clash.write_text((CUSTOM % {"B": 4, "W": 8}).replace("name: f,", "name: train,")
                     .replace("name: g,", "name: g, input: train,"))
    with pytest.raises(ValueError, match="layer 'train': the name is an attribute"):
        build(clash)
