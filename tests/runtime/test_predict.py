"""fcircnn/runtime/predict.py: class scores of clips on the golden contract and on the RTL."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

import fcircnn
from fcircnn import simulate as sim
from fcircnn.cli import main
from fcircnn.gen import compiler
from fcircnn.models import quant, spectral
from fcircnn.models.config import load_accelerator
from fcircnn.models.network import random_weights, run_network
from fcircnn.runtime.image import CompiledImage
from fcircnn.runtime.predict import predict
from fcircnn.sim.runner import find_simulator


@pytest.fixture
def acc(tmp_path, small_accelerator):
    return load_accelerator(small_accelerator(tmp_path / "acc"))


def _clips(acc, n, seed):
    net = acc.network
    shape = (n, net.input.channels, *net.input.shape)
    return np.random.default_rng(seed).standard_normal(shape)


def _golden_scores(acc, clip, clips, statistic):
    """The final int8 output of run_network's int mode, dequantized, in the time domain."""
    net = acc.network
    result = run_network(net, ("int",), weights=random_weights(net, 0), x=clip, clips=clips,
                         statistic=statistic)
    last = net.resolved[-1]
    re, im = result.int_outputs[last.name]
    slots = quant.dequantize_slots(re, im, result.int_scales[last.name])
    return spectral.from_slots(slots, last.block_size)[: last.out_channels].reshape(-1)


def test_golden_scores_are_the_int_contracts(acc):
    clips = _clips(acc, 3, 1)
    got = predict(acc, clips, statistic="p99.9")
    assert got.target == "golden" and got.bit_exact and got.scores.shape == (3, 10)
    assert got.calibration == "each clip's own scales"
    for clip, result in zip(clips, got.clips, strict=True):
        np.testing.assert_array_equal(result.scores, _golden_scores(acc, clip, None, "p99.9"))
        assert result.top1 == int(np.argmax(result.scores))
    # A separate calibration set changes the scales, not the contract.
    cal = _clips(acc, 4, 2) * 3
    other = predict(acc, clips[:2], calibration=cal)
    assert other.calibration == "tensor scales, the maximum over 4 clip(s)"
    for clip, result in zip(clips, other.clips, strict=False):
        np.testing.assert_array_equal(result.scores, _golden_scores(acc, clip, cal, "max"))


@pytest.mark.parametrize("fixed", [False, True])
def test_a_clips_scores_do_not_depend_on_its_batch(acc, fixed):
    """Alone or beside others, first or last: the same scores, with each clip's own scales
    and with fixed ones (random weights lack CBN: calibrated per clip, or on the set)."""
    clips = _clips(acc, 3, 5) * np.array([1, 4, 0.2]).reshape(3, 1, 1, 1, 1)
    cal = _clips(acc, 2, 6) if fixed else None
    together = predict(acc, clips, calibration=cal).scores
    for i in range(3):
        alone = predict(acc, clips[i:i + 1], calibration=cal).scores[0]
        np.testing.assert_array_equal(alone, together[i])
    np.testing.assert_array_equal(predict(acc, clips[::-1], calibration=cal).scores,
                                  together[::-1])


def test_a_stored_calibration_fixes_the_scales(acc, tmp_path):
    """Weights saved with their calibration (fcircnn calibrate) give what the calibration
    set gives, with no set at run time, and load back whole."""
    from fcircnn.models.network import calibrate, load_weights

    net = acc.network
    cal = _clips(acc, 3, 7)
    weights, _ = calibrate(net, weights=random_weights(net, 0), x=cal[0], clips=cal,
                           granularity="bin", statistic="p99")
    weights.save(str(tmp_path / "w.npz"))
    loaded = load_weights(net, str(tmp_path / "w.npz"))
    assert loaded.calibration.describe() == "bin scales, the 99th percentile over 3 clip(s)"
    clips = _clips(acc, 2, 8)
    stored = predict(acc, clips, weights=loaded)
    assert stored.calibration == loaded.calibration.describe()
    measured = predict(acc, clips, calibration=cal, granularity="bin", statistic="p99")
    np.testing.assert_array_equal(stored.scores, measured.scores)


def test_the_board_needs_fixed_scales(acc):
    with pytest.raises(ValueError, match="fixed int8 scales"):
        predict(acc, _clips(acc, 1, 0), on="board", backend=object())


class _Rtl:
    """Stands in for run_rtl: an 'RTL' that computes the golden contract, except that it
    flips one output value of ``wrong`` (a layer name) when given; writes what the real
    testbench writes (results JSON and the output read back)."""

    def __init__(self, wrong=None):
        self.wrong, self.runs = wrong, 0

    def __call__(self, acc, image_dir, results, **kwargs):
        from fcircnn.sim.tb_accelerator import output_path

        self.runs += 1
        image = CompiledImage.load(image_dir)
        layers = []
        for name in image.layer_names():
            ok = name != self.wrong
            layers.append({"name": name, "cycles": 100, "pe_busy": 50, "dma_stall": 0,
                           "passed": ok, "mismatches": 0 if ok else 1,
                           "first_mismatch": None if ok else {"slot": 0}})
        results.write_text(json.dumps({
            "status": "done", "error_code": 0, "error_addr": 0, "total_cycles": 1000,
            "pe_busy": 500, "dma_stall": 0, "sim_cycles": 1010, "wall_seconds": 1.0,
            "layers": layers}))
        last = image.layer_names()[-1]
        re, im = (p.copy() for p in image.expected[last])
        if self.wrong == last:
            re[0, 0, 0, 0] += 1
        np.savez(output_path(results), layer=last, re=re, im=im)
        return image_dir


def test_sim_scores_come_from_the_output_the_rtl_wrote(acc, monkeypatch, tmp_path):
    clips = _clips(acc, 3, 3)
    monkeypatch.setattr(sim, "run_rtl", _Rtl())
    compiled = []
    real = compiler.compile_network
    monkeypatch.setattr(compiler, "compile_network",
                        lambda *a, **k: compiled.append(1) or real(*a, **k))
    ok = predict(acc, clips, on="sim", build_dir=tmp_path)
    assert ok.bit_exact and [c.cycles for c in ok.clips] == [1000, 1000, 1000]
    assert len(compiled) == 3  # each clip calibrated on itself: an image each
    np.testing.assert_array_equal(ok.scores, predict(acc, clips).scores)
    cal = _clips(acc, 2, 9)
    fixed = predict(acc, clips, on="sim", build_dir=tmp_path, calibration=cal)
    assert len(compiled) == 4  # fixed scales: compiled once, each clip written into it
    np.testing.assert_array_equal(fixed.scores, predict(acc, clips, calibration=cal).scores)
    last = acc.network.resolved[-1].name
    monkeypatch.setattr(sim, "run_rtl", _Rtl(wrong=last))
    bad = predict(acc, clips, on="sim", build_dir=tmp_path)
    assert not bad.bit_exact and bad.clips[0].mismatched == (last,)
    assert not np.array_equal(bad.scores, ok.scores)  # the RTL's own output, not the golden


def test_run_command(acc, tmp_path, capsys, monkeypatch):
    np.save(tmp_path / "clips.npy", _clips(acc, 2, 4))
    assert main(["run", str(acc.path), "--input", str(tmp_path / "clips.npy"), "-q",
                 "--save", str(tmp_path / "scores.npy")]) == 0
    out = capsys.readouterr().out
    assert "top-1" in out and out.count("\n") == 4
    assert np.load(tmp_path / "scores.npy").shape == (2, 10)
    monkeypatch.setattr(sim, "run_rtl", _Rtl(wrong="c2"))
    assert main(["run", str(acc.path), "--input", str(tmp_path / "clips.npy"), "-q",
                 "--on", "sim", "--build-dir", str(tmp_path / "b")]) == 1
    assert "FAIL: c2" in capsys.readouterr().out
    np.save(tmp_path / "one.npy", _clips(acc, 1, 4)[0])
    assert main(["run", str(acc.path), "--input", str(tmp_path / "one.npy")]) == 2
    assert "expected clips (N, " in capsys.readouterr().err


@pytest.mark.slow
def test_scores_on_the_rtl_equal_the_golden_scores(acc, tmp_path):
    find_simulator("verilator")
    clips = _clips(acc, 2, 5)
    rtl = predict(acc, clips, on="sim", build_dir=tmp_path, backpressure=0.2,
                  weights=copy.deepcopy(random_weights(acc.network, 0)))
    assert rtl.bit_exact, [c.mismatched for c in rtl.clips]
    np.testing.assert_array_equal(rtl.scores, predict(acc, clips).scores)


def test_calibrate_then_run_with_the_stored_scales(acc, tmp_path, capsys):
    """fcircnn calibrate writes the weights with fixed scales; run announces where its scales
    and weights come from, and a clip's scores are the same alone or in a batch."""
    np.save(tmp_path / "cal.npy", _clips(acc, 3, 10))
    clips = _clips(acc, 3, 11)
    np.save(tmp_path / "clips.npy", clips)
    np.save(tmp_path / "one.npy", clips[2:])
    w = tmp_path / "w.npz"
    assert main(["calibrate", str(acc.path), "--calibration", str(tmp_path / "cal.npy"),
                 "--granularity", "bin", "-o", str(w), "-q"]) == 0
    out, err = capsys.readouterr()
    assert "RANDOM weights (seed 0)" in err and "fixed int8 scales (bin scales" in err
    assert not out  # the names of the files written go to stderr, as on every command
    for name in ("clips", "one"):
        assert main(["run", str(acc.path), "--weights", str(w), "-q", "--input",
                     str(tmp_path / f"{name}.npy"), "--save", str(tmp_path / f"s_{name}.npy")]
                    ) == 0
        err = capsys.readouterr().err
        assert f"int8 scales stored in {w} (bin scales, the maximum over 3 clip(s))" in err
        assert f"weights {w}" in err and "RANDOM" not in err
    batch, alone = np.load(tmp_path / "s_clips.npy"), np.load(tmp_path / "s_one.npy")
    np.testing.assert_array_equal(alone[0], batch[2])
    # Without a calibration: each clip's own scales, random weights, both said.
    assert main(["run", str(acc.path), "-q", "--input", str(tmp_path / "clips.npy")]) == 0
    err = capsys.readouterr().err
    assert "tensor int8 scales of each clip alone (no calibration given" in err
    assert "RANDOM weights (seed 0), not a trained network" in err


def test_predict_takes_files_as_the_command_line_does(acc, tmp_path):
    """An accelerator file (or built-in name), a clips file and a weights file, loaded and
    checked as `fcircnn run` loads them; ``fcircnn.predict`` is the same function."""
    from fcircnn.models.config import ConfigError
    from fcircnn.models.files import ArrayFileError

    clips = _clips(acc, 2, 12)
    np.save(tmp_path / "clips.npy", clips)
    random_weights(acc.network, 3).save(str(tmp_path / "w.npz"))
    by_path = fcircnn.predict(str(acc.path), tmp_path / "clips.npy", weights=tmp_path / "w.npz")
    by_object = predict(acc, clips, weights=random_weights(acc.network, 3))
    np.testing.assert_array_equal(by_path.scores, by_object.scores)
    with pytest.raises(ConfigError, match="a network file, not an accelerator file"):
        predict(acc.network.path, clips)
    np.save(tmp_path / "bad.npy", clips[:, :1])
    with pytest.raises(ArrayFileError, match=r"bad\.npy"):
        predict(acc.path, tmp_path / "bad.npy")


def test_a_board_run_that_stops_says_its_error_not_wrong_scores(acc):
    """On the board target a run that ends in an error names the code and the address (the
    driver's report), before the layers it left unfinished."""
    from test_driver import FakeAccelerator

    from fcircnn.models.network import calibrate
    from fcircnn.runtime.image import CompiledImage

    clips = _clips(acc, 1, 13)
    weights, _ = calibrate(acc.network, weights=random_weights(acc.network, 0), x=clips[0],
                           clips=clips)
    image = CompiledImage.from_ddr_image(compiler.compile_network(acc, weights=weights,
                                                                  x=clips[0]))
    fake = FakeAccelerator(image, mode="error")
    got = predict(acc, clips, on="board", backend=fake, weights=weights)
    first = got.clips[0].mismatched[0]
    assert first.startswith("run stopped with error 3 (DMA read: bus error")
    assert f"at {image.descriptors[2].out_base + 0x40:#x}" in first and not got.bit_exact


def test_run_and_golden_print_one_json_object_with_json(acc, tmp_path, capsys):
    import json

    np.save(tmp_path / "clips.npy", _clips(acc, 2, 14))
    assert main(["run", str(acc.path), "--input", str(tmp_path / "clips.npy"), "-q",
                 "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    table = predict(acc, tmp_path / "clips.npy")
    assert doc["bit_exact"] and doc["on"] == "golden" and len(doc["clips"]) == 2
    assert [c["top1"] for c in doc["clips"]] == [c.top1 for c in table.clips]
    np.testing.assert_array_equal([c["scores"] for c in doc["clips"]], table.scores)
    assert main(["golden", str(acc.network.path), "-q", "--json", "--mode", "int"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc["modes"]) == {"float", "int"} and doc["modes"]["int"]["output_snr_db"] > 0
    assert [r["name"] for r in doc["layers"]] == [r.name for r in acc.network.resolved]
