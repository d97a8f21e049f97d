"""fcircnn/predict.py: class scores of clips on the golden contract and on the RTL."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from fcircnn import simulate as sim
from fcircnn.cli import main
from fcircnn.gen import compiler
from fcircnn.gen.image import CompiledImage
from fcircnn.models import quant, spectral
from fcircnn.models.config import load_accelerator
from fcircnn.models.network import random_weights, run_network
from fcircnn.predict import predict
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
    for clip, result in zip(clips, got.clips, strict=True):
        np.testing.assert_array_equal(result.scores, _golden_scores(acc, clip, clips, "p99.9"))
        assert result.top1 == int(np.argmax(result.scores))
    # A separate calibration set changes the scales, not the contract.
    cal = _clips(acc, 4, 2) * 3
    other = predict(acc, clips[:1], calibration=cal)
    np.testing.assert_array_equal(other.clips[0].scores,
                                  _golden_scores(acc, clips[0], cal, "max"))


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
    assert len(compiled) == 1  # compiled and calibrated once, each clip written into it
    np.testing.assert_array_equal(ok.scores, predict(acc, clips).scores)
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
