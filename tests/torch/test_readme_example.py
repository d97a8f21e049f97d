"""The README's "Train in PyTorch" example runs as written, and ``fcircnn run`` on its weights
gives the classes and scores the QAT model gives in PyTorch."""

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch", reason="the PyTorch front end needs the [torch] extra")

ROOT = Path(__file__).resolve().parent.parent.parent


def _blocks():
    text = (ROOT / "README.md").read_text()
    section = text.split("## Train in PyTorch", 1)[1].split("\n## ", 1)[0]
    python = re.findall(r"```python\n(.*?)```", section, re.S)
    shell = re.findall(r"```sh\n(.*?)```", section, re.S)
    assert len(python) == 1 and len(shell) == 1
    return python[0], shell[0]


def test_the_readme_example_trains_exports_and_runs_on_the_golden_contract(tmp_path):
    code, command = _blocks()
    code = code.replace("tests/hw/configs/", f"{ROOT}/tests/hw/configs/")
    code = "import torch\ntorch.set_num_threads(1)\n" + code + (
        "\nwith torch.no_grad():\n    np.save('torch_scores.npy', model(clips).numpy())\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    argv = command.split("#")[0].split()
    assert argv[:2] == ["fcircnn", "run"]
    argv = [a.replace("tests/hw/configs/", f"{ROOT}/tests/hw/configs/") for a in argv[2:]]
    proc = subprocess.run([sys.executable, "-m", "fcircnn.cli", "run", *argv, "--save",
                           "scores.npy", "--quiet"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    torch_scores = np.load(tmp_path / "torch_scores.npy")
    golden_scores = np.load(tmp_path / "scores.npy")
    np.testing.assert_array_equal(torch_scores.argmax(1), golden_scores.argmax(1))
    # float32 model: the same int8 outputs, the scores to float32 rounding (tests/torch/
    # test_model.py states the bound)
    np.testing.assert_allclose(torch_scores, golden_scores, rtol=1e-4,
                               atol=1e-4 * np.abs(golden_scores).max())
