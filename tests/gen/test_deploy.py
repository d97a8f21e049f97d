"""The deployment folder (:mod:`fcircnn.gen.deploy`, ``fcircnn deploy``) and its ``run.py``
(:mod:`fcircnn.runtime.board`) run end to end on the simulated accelerator through a fake ``pynq``
(:mod:`fcircnn.sim.tb_deploy`): class scores equal to the golden contract's, every layer
bit-exact, per-layer cycles printed; and the folder's failures: no overlay, bad clips."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from overlay_files import write_overlay

from fcircnn.cli import main
from fcircnn.gen.compiler import compile_network
from fcircnn.gen.deploy import BOARD_FILES, OVERLAY_FILES
from fcircnn.models.config import load_accelerator
from fcircnn.models.network import load_weights, random_weights
from fcircnn.runtime.image import CompiledImage
from fcircnn.runtime.predict import predict
from fcircnn.sim.runner import PARAMS_ENV, find_simulator, run_cocotb


@pytest.fixture
def acc_path(tmp_path, small_accelerator):
    return small_accelerator(tmp_path / "acc")


def _clips(acc, n, seed):
    net = acc.network
    return np.random.default_rng(seed).standard_normal((n, net.input.channels,
                                                        *net.input.shape))


def _deploy(tmp_path, acc_path, *extra):
    out = tmp_path / "deploy"
    assert main(["deploy", str(acc_path), "-o", str(out), *extra]) == 0
    return out


def test_the_folder_holds_what_the_board_needs(tmp_path, acc_path, capsys):
    acc = load_accelerator(acc_path)
    clips = _clips(acc, 2, 3)
    np.save(tmp_path / "clips.npy", clips)
    out = _deploy(tmp_path, acc_path, "--input", str(tmp_path / "clips.npy"), "--seed", "4",
                  "--json")
    printed, err = capsys.readouterr()
    doc = json.loads(printed)
    assert (doc["folder"], doc["overlay"], doc["clips"]) == (str(out), False, 2)
    assert sorted(doc["files"]) == sorted(p.name for p in out.iterdir())
    assert doc["board_commands"][-1] == "sudo -E python3 run.py" and "RANDOM" in doc["weights"]
    assert "BITSTREAM.md" in err and "run.py" in err
    for name in (*BOARD_FILES, "BITSTREAM.md"):
        assert (out / name).is_file(), name
    assert os.access(out / "run.py", os.X_OK)
    manifest = json.loads((out / "deploy.json").read_text())
    assert manifest["accelerator"] == acc.name and manifest["mem_size"] % (1 << 20) == 0
    # The accelerator file stands alone (its network inside) and is the same accelerator.
    copy = load_accelerator(out / "accelerator.yaml")
    assert copy.cores == acc.cores and copy.network.resolved == acc.network.resolved
    np.testing.assert_array_equal(np.load(out / "clips.npy"), clips)
    assert "int8 scales fixed in the image from its 2 clip(s)" in err
    assert "RANDOM weights (seed 4)" in err
    image = CompiledImage.load(out / "image")
    assert image.layer_names() == [layer.name for layer in acc.network.resolved]
    weights = load_weights(acc.network, str(out / "weights.npz"))
    # The scales are fixed in the weights file: measured on the clips, as the image's.
    assert weights.calibration.describe() == "tensor scales, the maximum over 2 clip(s)"
    # The first clip's image is what predict's golden target computes with those files.
    pred = predict(copy, clips[:1], weights=weights)
    last = image.layer_names()[-1]
    assert pred.bit_exact
    np.testing.assert_array_equal(pred.scores, predict(
        copy, clips[:1], weights=random_weights(copy.network, 4), calibration=clips).scores)
    expected = compile_network(copy, weights=weights, x=clips[0]).expected
    for name in image.layer_names():
        for got, want in zip(image.expected[name], expected[name], strict=True):
            np.testing.assert_array_equal(got, want)
    assert image.expected[last][0].shape


def test_the_overlay_is_copied_from_the_vivado_output(tmp_path, acc_path):
    vivado = tmp_path / "vivado" / "out"
    write_overlay(vivado)
    with zipfile.ZipFile(vivado / "fcircnn_accel.xsa", "w") as xsa:
        xsa.writestr("sysdef.xml", "<xml/>")
    out = _deploy(tmp_path, acc_path, "--vivado", str(vivado))
    for name in OVERLAY_FILES:
        assert (out / name).read_bytes() == (vivado / name).read_bytes()
    assert not (out / "BITSTREAM.md").exists()
    assert "copied from the Vivado build" in (out / "README.md").read_text()


def test_a_deployment_is_redeployed_from_its_own_files_with_the_overlay(tmp_path, acc_path):
    out = _deploy(tmp_path, acc_path, "--seed", "3")
    kept = ("weights.npz", "clips.npy", "accelerator.yaml", "deploy.json")
    before = {name: (out / name).read_bytes() for name in kept}
    data = CompiledImage.load(out / "image").data
    write_overlay(tmp_path / "vivado")
    assert main(["deploy", str(out / "accelerator.yaml"), "-o", str(out), "--force",
                 "--weights", str(out / "weights.npz"), "--input", str(out / "clips.npy"),
                 "--vivado", str(tmp_path / "vivado")]) == 0
    assert {name: (out / name).read_bytes() for name in kept} == before
    assert CompiledImage.load(out / "image").data == data
    assert (out / "fcircnn_accel.bit").read_bytes() == (tmp_path / "vivado" /
                                                        "fcircnn_accel.bit").read_bytes()
    assert not (out / "BITSTREAM.md").exists()
    # Redeployed without the overlay (another accelerator, say), the old one is not left.
    assert main(["deploy", str(acc_path), "-o", str(out), "--force"]) == 0
    assert (out / "BITSTREAM.md").is_file()
    assert not any((out / name).exists() for name in OVERLAY_FILES)


@pytest.mark.parametrize(("argv", "message"), [
    (["-o", "{out}", "--vivado", "{tmp}/nowhere"], "--vivado"),
    # A Vivado folder without the overlay, or with one that is not for this accelerator.
    (["-o", "{out}", "--vivado", "{tmp}"], "--vivado: {tmp}/fcircnn_accel.bit: not found"),
    (["-o", "{out}", "--vivado", "{tmp}/empty"], "fcircnn_accel.bit: an empty file"),
    (["-o", "{out}", "--vivado", "{tmp}/zu3"], "built for xczu3eg-sbva484-1-e"),
    (["-o", "{out}", "--vivado", "{tmp}/xsa"], "fcircnn_accel.xsa: not a hardware platform"),
    (["-o", "{full}"], "not empty"),
    (["-o", "{out}", "--input", "{tmp}/bad.npy"], "--input"),
])
def test_bad_deploy_input_is_refused_before_any_work(tmp_path, acc_path, argv, message,
                                                     capsys):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    np.save(tmp_path / "bad.npy", np.zeros((1, 2, 3)))
    write_overlay(tmp_path / "empty").write_bytes(b"")
    write_overlay(tmp_path / "zu3", part="xczu3eg-sbva484-1-e")
    write_overlay(tmp_path / "xsa")
    (tmp_path / "xsa" / "fcircnn_accel.xsa").write_bytes(b"not a zip")
    argv = [a.format(out=tmp_path / "out", tmp=tmp_path, full=tmp_path / "full")
            for a in argv]
    assert main(["deploy", str(acc_path), *argv]) == 2
    assert message.format(tmp=tmp_path) in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_run_py_without_the_overlay_or_with_bad_clips_exits_2(tmp_path, acc_path):
    out = _deploy(tmp_path, acc_path)
    run = [sys.executable, str(out / "run.py")]
    proc = subprocess.run(run, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "BITSTREAM.md" in proc.stderr
    (out / "fcircnn_accel.bit").write_bytes(b"bit")
    (out / "fcircnn_accel.hwh").write_bytes(b"hwh")
    proc = subprocess.run(run, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "fcircnn_accel.bit: not a Xilinx bitstream" in proc.stderr
    write_overlay(out)
    np.save(tmp_path / "bad.npy", np.zeros((2, 3)))
    proc = subprocess.run([*run, "--clips", str(tmp_path / "bad.npy")], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2 and "clips must be" in proc.stderr
    for timeout in ("nan", "0", "1e9"):
        proc = subprocess.run([*run, "--timeout", timeout], capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 2 and "--timeout must be seconds in (0, 86400]" in proc.stderr
    # --json is checked before the run: not a file the run reads, in a folder that exists.
    for target, fragment in ((out / "clips.npy", "the same file as"),
                             (tmp_path / "no" / "r.json", "does not exist"),
                             (out, "is a folder")):
        proc = subprocess.run([*run, "--json", str(target)], capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 2 and "--json" in proc.stderr and fragment in proc.stderr
        assert "Traceback" not in proc.stderr
    # With every file in place, a host without PYNQ says so (exit 2), no traceback.
    proc = subprocess.run(run, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "pynq" in proc.stderr and "Traceback" not in proc.stderr


def run_on_fake_board(acc, folder, argv, results, *, simulator="verilator"):
    """run.py of ``folder`` on ``acc``'s RTL through the fake pynq; the results document."""
    from fcircnn.gen.generate import accelerator_verilog

    params = {"folder": str(folder), "argv": list(argv), "results": str(results)}
    run_cocotb(accelerator_verilog(acc), "fcircnn_accel", "fcircnn.sim.tb_deploy", simulator,
               extra_env={PARAMS_ENV: json.dumps(params)}, verilator_opt=None)
    return json.loads(results.read_text())


@pytest.mark.slow
def test_run_py_on_the_simulated_board_prints_the_golden_scores_bit_exact(tmp_path, acc_path):
    find_simulator("verilator")
    acc = load_accelerator(acc_path)
    clips = _clips(acc, 2, 5)
    np.save(tmp_path / "clips.npy", clips)
    vivado = tmp_path / "vivado"
    write_overlay(vivado)
    out = _deploy(tmp_path, acc_path, "--input", str(tmp_path / "clips.npy"),
                  "--vivado", str(vivado), "--calibration-statistic", "p99.9")
    doc = run_on_fake_board(acc, out, ["--timeout", "600", "--json", str(tmp_path / "r.json")],
                            tmp_path / "results.json")
    assert doc["exit_code"] == 0, doc["stdout"] + doc["stderr"]
    assert "PASS: every layer of every clip bit-exact" in doc["stdout"]
    assert doc["mmio_writes"] > 0 and doc["mmio_reads"] > 0
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["passed"] and len(report["clips"]) == 2
    golden = predict(acc, clips, weights=load_weights(acc.network, str(out / "weights.npz")),
                     calibration=clips, statistic="p99.9")
    for clip, expect in zip(report["clips"], golden.clips, strict=True):
        np.testing.assert_array_equal(np.array(clip["scores"]), expect.scores)
        names = [layer["name"] for layer in clip["layers"]]
        assert names == [layer.name for layer in acc.network.resolved]
        assert all(layer["passed"] and layer["cycles"] > 0 for layer in clip["layers"])
        assert clip["cycles"] >= sum(layer["cycles"] for layer in clip["layers"])
        for name in names:
            assert f"  {name}" in doc["stdout"]
    # A run that outlasts --timeout is aborted: a failed run (exit 1) that says how far it got
    # and where the engine stopped, no traceback.
    doc = run_on_fake_board(acc, out, ["--timeout", "0.001"], tmp_path / "timeout.json")
    assert doc["exit_code"] == 1, doc["stdout"] + doc["stderr"]
    assert "error: no done or error within 0.001 s" in doc["stderr"]
    assert "aborted: the engine stopped (aborted by the host" in doc["stderr"]
    assert "Traceback" not in doc["stderr"]


def test_the_folders_readme_installs_the_wheel_offline_and_run_py_runs_from_it(tmp_path,
                                                                               acc_path):
    """The folder's README, step by step, on a Python that has the core's dependencies but
    not fcircnn (-S: no site-packages, so no editable install): pip installs the wheel with
    no index, and run.py runs from that install up to the board (no pynq here: exit 2)."""
    import re

    import numpy
    import pydantic
    import tqdm
    import yaml

    out = _deploy(tmp_path, acc_path)
    steps = re.search(r"```sh\n(.*?)```", (out / "README.md").read_text(), re.S)[1]
    commands = [line.split("#")[0].split() for line in steps.splitlines() if line.strip()]
    assert commands[0][:3] == ["pip", "install", "--no-deps"] and (out / commands[0][3]).is_file()
    assert commands[1] == ["sudo", "-E", "python3", "run.py"]
    target = tmp_path / "board-site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-index", "--target",
                    str(target), *commands[0][2:]], cwd=out, check=True, capture_output=True)
    deps = {str(Path(m.__file__).resolve().parents[1]) for m in (numpy, pydantic, tqdm, yaml)}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(target), *sorted(deps)])}
    probe = subprocess.run([sys.executable, "-S", "-c", "import fcircnn; print(fcircnn.__file__)"],
                           env=env, cwd=tmp_path, capture_output=True, text=True, check=True)
    assert probe.stdout.startswith(str(target))  # the wheel's, not the checkout's
    write_overlay(out)
    proc = subprocess.run([sys.executable, "-S", *commands[1][3:]], cwd=out, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "pynq" in proc.stderr and "Traceback" not in proc.stderr
