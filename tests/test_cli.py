"""CLI: help on every command, real jobs, and bad input giving exit code 2 without a traceback."""

import subprocess
import sys

import numpy as np
import pytest

from fcircnn.cli import build_parser, main

TINY = """
name: tiny
input: {channels: 3, depth: 2, height: 4, width: 4}
classes: 10
layers:
  - {name: c1, type: conv, out_channels: 16, kernel: 3, padding: 1, cbn: true, crelu: true,
     pool: {window: [1, 2, 2]}}
  - {name: fc, type: fc, out_channels: 10}
"""


@pytest.fixture
def tiny(tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY)
    return path


def _run(*args):
    return subprocess.run([sys.executable, "-m", "fcircnn.cli", *args],
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("args", [[], ["golden"], ["check"]])
def test_help_on_every_command(args):
    proc = _run(*args, "--help")
    assert proc.returncode == 0
    assert "usage: fcircnn" in proc.stdout


def test_every_subcommand_has_help():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert {"golden", "check", "compile", "generate", "sim"} <= set(sub.choices)
    for name, sp in sub.choices.items():
        assert sp.description, name


def test_missing_command_is_a_usage_error():
    proc = _run()
    assert proc.returncode == 2 and "usage" in proc.stderr


@pytest.mark.parametrize("name", ["c3d", "r3d18", "c3d_zcu102", "r3d18_zcu102"])
def test_check_builtin_configs(name, capsys):
    assert main(["check", name]) == 0
    out = capsys.readouterr().out
    assert ("GOP" in out) and (("accelerator" in out) == name.endswith("zcu102"))


def test_golden_tiny_all_modes_and_save(tiny, tmp_path, capsys):
    out_npz, w_npz = tmp_path / "out.npz", tmp_path / "w.npz"
    assert main(["golden", str(tiny), "--seed", "4", "--save", str(out_npz),
                 "--save-weights", str(w_npz)]) == 0
    out = capsys.readouterr().out
    for word in ("c1", "fc", "int SNR dB", "slots rel.err", "GOP dense-equivalent", "top-1"):
        assert word in out
    saved = np.load(out_npz)
    assert saved["output_int"].shape == (10, 1, 1, 1)
    assert saved["int/c1.re"].dtype == np.int8
    # Same weights and input again give the same integer result.
    x = tmp_path / "x.npy"
    from fcircnn.models.config import load_network
    from fcircnn.models.network import random_input

    np.save(x, random_input(load_network(tiny), 4))
    again = tmp_path / "again.npz"
    assert main(["golden", str(tiny), "--mode", "int", "--weights", str(w_npz),
                 "--input", str(x), "--save", str(again), "-q"]) == 0
    np.testing.assert_array_equal(np.load(again)["int/fc.re"], saved["int/fc.re"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["check", "no/such/file.yaml"], "file not found"),
        (["check", "nonesuch"], "available: c3d"),
        (["golden", "{tiny}", "--weights", "{tmp}/nope.npz"], "--weights"),
        (["golden", "{tiny}", "--input", "{tmp}/nope.npy"], "nope.npy: file not found"),
        (["golden", "{tiny}", "--input", "{tmp}/bad.npy"], "shape (3, 2, 4, 5), expected"),
        (["check", "{tmp}/broken.yaml"], "broken.yaml: line 2"),
        (["check", "{tmp}/unknown.yaml"], "layers[0] (c1).kernal"),
    ],
)
def test_bad_input_exit_2_without_traceback(args, message, tiny, tmp_path):
    np.save(tmp_path / "bad.npy", np.zeros((3, 2, 4, 5)))
    (tmp_path / "broken.yaml").write_text("name: x\n  bad: [\n")
    (tmp_path / "unknown.yaml").write_text(TINY.replace("kernel: 3", "kernal: 3"))
    args = [a.format(tiny=tiny, tmp=tmp_path) for a in args]
    proc = _run(*args)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert message in proc.stderr, proc.stderr


def test_sweep_of_a_custom_network_writes_a_portable_best_yaml(tiny, tmp_path, capsys):
    # No built-in <name>_zcu102 reference exists for this network: the sweep runs without one.
    out = tmp_path / "sweep"
    assert main(["sweep", str(tiny), "--tn", "16", "--tm", "32", "--td", "1", "--tr", "4",
                 "--tc", "4", "--cores", "1", "-o", str(out), "-q"]) == 0
    assert "paper" not in capsys.readouterr().out
    elsewhere = tmp_path / "copied" / "deeper"
    elsewhere.mkdir(parents=True)
    copy = elsewhere / "best.yaml"
    copy.write_text((out / "best.yaml").read_text())
    tiny.unlink()  # the network lives in the file itself
    from fcircnn.models.config import INLINE_NETWORK, load_accelerator

    acc = load_accelerator(copy)
    assert acc.network_file == INLINE_NETWORK and acc.network.name == "tiny"
    assert main(["check", str(copy)]) == 0


def test_estimate_names_the_binding_resource(capsys):
    assert main(["estimate", "c3d_zcu102", "--cap", "0.05"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "binding resource bram36" in err and "also over:" in err


def test_check_refuses_what_compile_refuses(tmp_path, small_accelerator, capsys):
    # A design over the device: compile (whole device) and check (default cap) both refuse.
    path = small_accelerator(tmp_path)
    text = path.read_text()
    big = tmp_path / "big.yaml"
    import re

    big.write_text(re.sub(r"tr: \d+, tc: \d+", "tr: 250, tc: 250", text))
    for argv in (["check", str(big)], ["compile", str(big), "-o", str(tmp_path / "o")]):
        assert main(argv) == 2
        assert "does not fit" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
