"""CLI: help on every command, real jobs, and bad input giving exit code 2 without a traceback."""

import csv
import importlib.util
import json
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

from fcircnn.cli import build_parser, main
from fcircnn.models.config import load_accelerator, load_network

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


@pytest.mark.parametrize("name", ["c3d", "r3d18", "spectral_c3d", "c3d_zcu102", "r3d18_zcu102",
                                  "spectral_c3d_zcu102"])
def test_check_builtin_configs(name, capsys):
    assert main(["check", name]) == 0
    out = capsys.readouterr().out
    assert ("GOP" in out) and (("accelerator" in out) == name.endswith("zcu102"))


def test_check_json_of_a_network_and_an_accelerator(capsys):
    from fcircnn.models.config import builtin_path, load_accelerator

    assert main(["check", "spectral_c3d", "--json", "-q"]) == 0
    net = json.loads(capsys.readouterr().out)
    conv1 = net["layers"][0]
    assert (net["network"], net["input"], net["classes"]) == ("spectral_c3d",
                                                              [3, 16, 112, 112], 101)
    assert conv1["dense"] and conv1["post"] == ["bias", "bn", "relu"]
    assert conv1["kernel"] == [3, 3, 3] and conv1["pool"]["window"] == [1, 2, 2]
    assert net["dense_ops"] == sum(layer["dense_ops"] for layer in net["layers"])
    assert main(["check", "spectral_c3d_zcu102", "--json"]) == 0
    out = capsys.readouterr()
    doc = json.loads(out.out)
    acc = load_accelerator(builtin_path("spectral_c3d_zcu102"))
    assert doc["network"] == net and "OK" in out.err
    assert [c["name"] for c in doc["cores"]] == [c.name for c in acc.cores]
    assert set(doc["placement"]) == {r.name for r in acc.network.resolved}
    assert any("folded into input channels" in note for note in doc["notes"])


def test_golden_of_a_network_without_class_scores_shows_its_output(tmp_path, capsys):
    path = tmp_path / "no_fc.yaml"
    path.write_text(TINY[:TINY.index("  - {name: fc")].replace("classes: 10", "classes: 16"))
    assert main(["golden", str(path), "-q"]) == 0
    out = capsys.readouterr().out
    assert "top-1" not in out
    assert "float     " in out and "output 16x2x2x2 (reference)" in out


def test_golden_of_an_all_zero_clip_says_so_without_a_numpy_warning(tiny, tmp_path, capsys):
    from fcircnn.models.config import load_network

    net = load_network(tiny)
    np.save(tmp_path / "zero.npy", np.zeros((net.input.channels, *net.input.shape)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # log10(0) warned "divide by zero" on stderr
        assert main(["golden", str(tiny), "--input", str(tmp_path / "zero.npy"), "-q"]) == 0
    out = capsys.readouterr().out
    assert "top-1 class 0 (every score equal), output equal to float" in out
    assert "SNR -inf" not in out and "SNR inf" not in out


def test_golden_of_subnormal_weights_runs(tiny, tmp_path, capsys):
    # A layer's weights all 5e-324: the int8 step underflowed to 0 (internal error before).
    from fcircnn.models.config import load_network
    from fcircnn.models.network import random_weights

    weights = random_weights(load_network(tiny), 1)
    weights.layers["c1"].generators[...] = 5e-324
    weights.save(str(tmp_path / "w.npz"))
    assert main(["golden", str(tiny), "--weights", str(tmp_path / "w.npz"), "-q"]) == 0
    assert "int " in capsys.readouterr().out


def test_snr_of_an_all_zero_reference_is_undefined():
    from fcircnn.models.network import snr_db

    zero, one = np.zeros(4), np.ones(4)
    assert snr_db(zero, zero) == np.inf and snr_db(zero, one) == -np.inf
    assert snr_db(one, one * 1.1) == pytest.approx(20.0)


def test_golden_tiny_all_modes_and_save(tiny, tmp_path, capsys):
    import re

    out_npz, w_npz = tmp_path / "out.npz", tmp_path / "w.npz"
    assert main(["golden", str(tiny), "--seed", "4", "--save", str(out_npz),
                 "--save-weights", str(w_npz)]) == 0
    out, err = capsys.readouterr()
    for word in ("c1", "fc", "int SNR dB", "slots rel.err", "GOP dense-equivalent", "top-1"):
        assert word in out
    # Each pass's time is the same in its progress line and in the report.
    for mode in ("float", "slots", "int"):
        line = re.search(rf"{mode}\s+pass done: (\d+) layers in ([0-9.]+) s", err)
        report = re.search(rf"^{mode}\s+([0-9.]+) s", out, re.MULTILINE)
        assert line and report, (mode, err, out)
        assert abs(float(line[2]) - float(report[1])) <= 0.1, (line[0], report[0])
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
    assert "ref" not in capsys.readouterr().out
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


# --------------------------------------------------------------------------------------------
# Bad flags and outputs refused before any work, nothing half-written (fuzzing findings)


def _usage_error(argv, capsys) -> str:
    """The message of an argparse usage error (exit code 2) of ``argv``."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    return capsys.readouterr().err


def _acc_and_overflowing_weights(tmp_path, small_accelerator):
    """The small accelerator and a weights file whose c1 generators (all 1e4) make c2's post
    parameters overflow."""
    from fcircnn.models.config import load_accelerator
    from fcircnn.models.network import random_weights

    acc = small_accelerator(tmp_path / "acc")
    w = random_weights(load_accelerator(acc).network, 0)
    w.layers["c1"].generators = np.full(w.layers["c1"].generators.shape, 1e4)
    path = tmp_path / "w_max.npz"
    w.save(str(path))
    return acc, path


@pytest.mark.parametrize("argv", [
    ["golden", "{tiny}", "--input", ""], ["golden", "{tiny}", "--weights", ""],
    ["golden", "{tiny}", "--calibration", ""], ["golden", ""], ["check", ""],
    ["compile", "{tiny}", "-o", ""], ["run", "{tiny}", "--input", ""],
    ["sweep", "{tiny}", "-o", ""], ["sweep", "{tiny}", "--best-yaml", ""],
    ["deploy", "{tiny}", "-o", ""], ["project", "{tiny}", "--dense", "", "-o", "x.npz"],
])
def test_empty_paths_are_refused(argv, tiny, capsys):
    err = _usage_error([a.format(tiny=tiny) for a in argv], capsys)
    assert "empty path" in err and "argument " in err


def test_outputs_that_are_inputs_are_refused(tiny, tmp_path, capsys):
    before = tiny.read_text()
    assert main(["golden", str(tiny), "-q", "--save", str(tiny)]) == 2
    assert "--save" in capsys.readouterr().err and tiny.read_text() == before
    x = tmp_path / "x.npz"
    assert main(["golden", str(tiny), "-q", "--save", str(x), "--save-weights", str(x)]) == 2
    err = capsys.readouterr().err
    assert "--save-weights" in err and "the same file as the output --save" in err
    assert not x.exists()
    dense = tmp_path / "d.npz"
    assert main(["project", str(tiny), "--dense", str(dense), "-o", str(dense)]) == 2
    assert "the same file as the input --dense" in capsys.readouterr().err
    assert main(["sweep", str(tiny), "--tn", "16", "--tm", "16", "--td", "1", "--tr", "4",
                 "--tc", "4", "--cores", "1", "--unroll-td", "no", "-q", "-o",
                 str(tmp_path / "sw"), "--best-yaml", str(tiny)]) == 2
    assert "--best-yaml" in capsys.readouterr().err and tiny.read_text() == before
    assert not (tmp_path / "sw").exists()
    # --best-yaml inside the new -o folder is written with the folder's files
    assert main(["sweep", str(tiny), "--tn", "16", "--tm", "16", "--td", "1", "--tr", "4",
                 "--tc", "4", "--cores", "1", "--unroll-td", "no", "-q", "-o",
                 str(tmp_path / "sw"), "--best-yaml", str(tmp_path / "sw" / "mine.yaml")]) == 0
    assert sorted(p.name for p in (tmp_path / "sw").iterdir()) == ["mine.yaml", "pareto.png",
                                                                   "sweep.csv"]


def test_overflowing_weights_name_the_flag_in_every_command(tmp_path, small_accelerator,
                                                            capsys):
    acc, weights = _acc_and_overflowing_weights(tmp_path, small_accelerator)
    clips = tmp_path / "clips.npy"
    from fcircnn.models.config import load_accelerator
    from fcircnn.models.network import random_input

    np.save(clips, random_input(load_accelerator(acc).network, 0)[None])
    for argv in (["golden", str(acc), "-q"], ["compile", str(acc), "-o", str(tmp_path / "c")],
                 ["run", str(acc), "--input", str(clips), "-q"],
                 ["deploy", str(acc), "-o", str(tmp_path / "d")]):
        assert main([*argv, "--weights", str(weights)]) == 2, argv
        err = capsys.readouterr().err.splitlines()[-1]
        assert err.startswith(f"error: --weights {weights}: the int8 contract"), err
        assert err.count("layer ") == 1 and "does not fit" in err
    assert not (tmp_path / "c").exists() and not (tmp_path / "d").exists()


@pytest.mark.parametrize("command", ["compile", "deploy"])
def test_a_folder_where_an_output_file_goes_leaves_nothing_written(command, tmp_path,
                                                                   small_accelerator, capsys):
    acc = small_accelerator(tmp_path / "acc")
    out = tmp_path / "out"
    name = "expected.npz" if command == "compile" else "run.py"
    (out / name).mkdir(parents=True)
    argv = [command, str(acc), "-o", str(out)] + (["--force"] if command == "deploy" else [])
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"-o {out}: {out / name} is a folder" in err
    assert [p.name for p in out.iterdir()] == [name] and not any((out / name).iterdir())
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_compile_replaces_its_files_whole(tmp_path, small_accelerator, capsys):
    acc = small_accelerator(tmp_path / "acc")
    out = tmp_path / "out"
    out.mkdir()
    (out / "other.txt").write_text("kept")
    assert main(["compile", str(acc), "-o", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["expected.npz", "image.bin",
                                                    "memory_map.json", "other.txt"]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


@pytest.mark.parametrize(("extra", "message"), [
    (["--bitstream", "x.bit"], "--bitstream: only with --on board, not --on golden"),
    (["--timeout", "5"], "--timeout: only with --on board"),
    (["--backpressure", "0.5"], "--backpressure: only with --on sim"),
    (["--simulator", "icarus"], "--simulator: only with --on sim"),
    (["--build-dir", "b"], "--build-dir: only with --on sim"),
])
def test_run_refuses_flags_its_target_ignores(extra, message, tmp_path, small_accelerator,
                                              capsys):
    acc = small_accelerator(tmp_path)
    assert main(["run", str(acc), "--input", "x.npy", *extra]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("flag", [["--calibration", "c.npy"],
                                  ["--calibration-statistic", "p99"]])
def test_golden_float_refuses_calibration(flag, tiny, capsys):
    assert main(["golden", str(tiny), "--mode", "float", *flag]) == 2
    assert f"{flag[0]}: only with --mode slots, int or all" in capsys.readouterr().err


_SWEEP = ["--tn", "16", "--tm", "16", "--td", "1", "--tr", "4", "--tc", "4", "--cores", "1",
          "--unroll-td", "no", "-q"]


@pytest.mark.parametrize(("extra", "fragments"), [
    (["-j", "1000000"], ["argument -j/--jobs", "the CPUs this process may use"]),
    (["-j", "0"], ["argument -j/--jobs", "must be an integer in 1.."]),
    (["--tn", "16,,16"], ["argument --tn", "an item is empty"]),
    (["--pointwise", "9" * 5000 + "x16"], ["argument --pointwise", "values are 1..",
                                            "(5000 characters)"]),
    (["--floor", "1e9"], ["argument --floor", "[0, 1e9)"]),
])
def test_sweep_usage_errors(extra, fragments, tiny, tmp_path, capsys):
    err = _usage_error(["sweep", str(tiny), *_SWEEP, "-o", str(tmp_path / "sw"), *extra],
                       capsys)
    assert all(f in err for f in fragments), err
    assert "_pair_list" not in err and not (tmp_path / "sw").exists()


@pytest.mark.parametrize(("extra", "message"), [
    (["--axi-ports", "5"], "error: --axi-ports: allowed values are 1, 2, 3, 4, not [5]"),
    (["--reference", "c3d_zcu102"],
     "--reference c3d_zcu102: an accelerator for network 'c3d', not for the network swept"),
])
def test_sweep_refuses_before_sweeping(extra, message, tiny, tmp_path, capsys):
    assert main(["sweep", str(tiny), *_SWEEP, "-o", str(tmp_path / "sw"), *extra]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "sw").exists()


@pytest.mark.parametrize("name", ["best.yaml", "sweep.csv", "pareto.png"])
def test_sweep_refuses_a_folder_where_a_file_goes(name, tiny, tmp_path, capsys):
    (tmp_path / "sw" / name).mkdir(parents=True)
    assert main(["sweep", str(tiny), *_SWEEP, "-o", str(tmp_path / "sw")]) == 2
    assert f"{tmp_path / 'sw' / name} is a folder" in capsys.readouterr().err
    assert [p.name for p in (tmp_path / "sw").iterdir()] == [name]


def test_compile_base_past_the_address_space(tmp_path, small_accelerator, capsys):
    acc = small_accelerator(tmp_path)  # address_width: 32
    assert main(["compile", str(acc), "-o", str(tmp_path / "o"), "--base", "0xFFFFF000"]) == 2
    err = capsys.readouterr().err
    assert "--base 0xfffff000" in err and "address_width: 32" in err
    assert err.count("\n") == 2  # its first line, then refused before the compile starts
    err = _usage_error(["compile", str(acc), "--base", "9" * 5000], capsys)
    assert "argument --base: too large" in err


def test_closed_stdout_ends_quietly(tmp_path):
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first line
    try:
        proc = subprocess.run([sys.executable, "-m", "fcircnn.cli", "check", "c3d"],
                              stdout=write, stderr=subprocess.PIPE, text=True, timeout=300)
    finally:
        os.close(write)
    assert proc.returncode == 141, proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr


def test_debug_says_the_traceback_is_above(monkeypatch, capsys):
    import fcircnn.cli as cli

    def boom(args):
        raise RuntimeError("boom")

    monkeypatch.setattr(cli.check, "cmd_check", boom)
    assert main(["--debug", "check", "c3d"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and "the full traceback is above" in err
    assert "rerun with --debug" not in err


def test_a_result_file_that_fails_late_is_an_error_not_a_crash(tiny, tmp_path, capsys,
                                                                monkeypatch):
    # after the up-front checks a write can still fail (a full disk): exit 2, the file named
    from fcircnn.models import files

    def full(path, write, binary=True):
        raise files.OutputFileError(f"{path}: cannot write (No space left on device)")

    monkeypatch.setattr(files, "atomic_write", full)
    out = tmp_path / "out.npz"
    assert main(["golden", str(tiny), "--mode", "float", "-q", "--save", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"\nerror: {out}: cannot write" in err  # after golden's banner line
    assert "Traceback" not in err and not out.exists()


def test_import_names_the_checkpoint_once(tiny, tmp_path, capsys):
    empty = tmp_path / "empty.pth"
    empty.write_bytes(b"")
    assert main(["import", str(tiny), "--checkpoint", str(empty), "-o",
                 str(tmp_path / "w.npz")]) == 2
    err = capsys.readouterr().err
    assert err.count(str(empty)) == 1 and "empty file" in err


@pytest.mark.skipif(importlib.util.find_spec("pynq") is not None, reason="PYNQ is installed")
def test_run_on_a_board_without_pynq_says_so_before_any_work(tmp_path, small_accelerator,
                                                              capsys):
    from overlay_files import write_overlay

    from fcircnn.models.config import load_accelerator
    from fcircnn.models.network import random_input

    acc = small_accelerator(tmp_path / "acc")
    np.save(tmp_path / "x.npy", random_input(load_accelerator(acc).network, 1)[None])
    bit = write_overlay(tmp_path / "vivado")
    assert main(["run", str(acc), "--input", str(tmp_path / "x.npy"), "--on", "board",
                 "--bitstream", str(bit)]) == 2
    err = capsys.readouterr().err
    assert "needs the 'pynq' package" in err and "int8 scales" not in err


def test_every_command_takes_quiet():
    """-q is the same flag on every command."""
    import argparse

    from fcircnn.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for name, parser in sub.choices.items():
        flags = {o for a in parser._actions for o in a.option_strings}
        assert {"-q", "--quiet"} <= flags, name


def test_compile_shows_its_passes_unless_quiet(small_accelerator, tmp_path, capsys):
    acc = small_accelerator(tmp_path)
    assert main(["compile", str(acc), "-o", str(tmp_path / "a")]) == 0
    err = capsys.readouterr().err
    assert "float  pass done:" in err and "int    pass done:" in err
    assert main(["compile", str(acc), "-o", str(tmp_path / "b"), "-q", "--json"]) == 0
    out = capsys.readouterr()
    assert "pass done" not in out.err
    # --json: the memory map the folder holds, on one line
    assert json.loads(out.out) == json.loads((tmp_path / "b" / "memory_map.json").read_text())
    assert len(out.out.splitlines()) == 1


def test_sweep_json_gives_the_table_s_points_and_the_files(tiny, tmp_path, capsys):
    out = tmp_path / "sweep"
    argv = ["sweep", str(tiny), "--tn", "16", "--tm", "16,32", "--td", "1", "--tr", "4",
            "--tc", "4", "--cores", "1", "--unroll-td", "no", "-o", str(out), "-q",
            "--reference", "{ref}"]
    ref = tmp_path / "ref.yaml"
    assert main([*argv[:-2], "--best-yaml", str(ref)]) == 0  # a reference of this network
    capsys.readouterr()
    assert main([*(a.format(ref=ref) for a in argv), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    rows = list(csv.DictReader((out / "sweep.csv").open()))
    assert doc["points"] == 2 and doc["counts"]["ok"] + doc["counts"]["over"] == 2
    assert [p["label"] for p in doc["top"]] == [
        r["label"] for r in sorted((r for r in rows if r["status"] == "ok" and not r["reference"]),
                                   key=lambda r: -float(r["effective_gops"]))]
    best = doc["top"][0]
    assert (best["tn"], best["td"], best["unroll_td"], best["pointwise"]) == (16, 1, False, None)
    row = next(r for r in rows if r["label"] == best["label"])
    assert f"{best['effective_gops']:.4f}" == row["effective_gops"]
    assert best["dsp"] == int(row["dsp"])
    assert [r["label"] for r in doc["references"]] == [load_accelerator(ref).name]
    assert doc["references"][0]["tn"] is None and doc["references"][0]["reference"]
    assert doc["files"]["best_yaml"] == str(out / "best.yaml")
    assert load_accelerator(out / "best.yaml").cores[0].tm == best["tm"]


def test_project_and_calibrate_json(tiny, tmp_path, capsys):
    from fcircnn.models.network import load_weights
    from fcircnn.models.project import dense_shape

    net = load_network(tiny)
    rng = np.random.default_rng(1)
    dense = {f"{r.name}.weight": rng.standard_normal(dense_shape(r)) for r in net.resolved
             if r.weighted}
    np.savez(tmp_path / "dense.npz", **dense)
    assert main(["project", str(tiny), "--dense", str(tmp_path / "dense.npz"), "-o",
                 str(tmp_path / "wp.npz"), "--json", "-q"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [layer["name"] for layer in doc["layers"]] == [r.name for r in net.resolved
                                                          if r.weighted]
    projected = load_weights(net, str(tmp_path / "wp.npz"))
    for layer in doc["layers"]:
        assert layer["dense"] == list(dense[f"{layer['name']}.weight"].shape)
        assert layer["generators"] == list(projected.layers[layer["name"]].generators.shape)
        assert 0.5 < layer["error"] < 1  # random dense weights are far from circulant
    clips = rng.standard_normal((3, net.input.channels, *net.input.shape))
    np.save(tmp_path / "clips.npy", clips)
    assert main(["calibrate", str(tiny), "--weights", str(tmp_path / "wp.npz"),
                 "--calibration", str(tmp_path / "clips.npy"), "--granularity", "bin",
                 "-o", str(tmp_path / "wc.npz"), "--json", "-q"]) == 0
    doc = json.loads(capsys.readouterr().out)
    stored = load_weights(net, str(tmp_path / "wc.npz")).calibration
    assert doc["calibration"]["description"] == stored.describe()
    assert (doc["calibration"]["granularity"], doc["calibration"]["clips"]) == ("bin", 3)
    assert doc["cbn_calibrated"] is False
    np.testing.assert_array_equal(doc["calibration"]["input_scale"], stored.input_scale)
    assert doc["calibration"]["out_scales"].keys() == stored.out_scales.keys()
    for name, scale in stored.out_scales.items():
        np.testing.assert_array_equal(doc["calibration"]["out_scales"][name], scale)


@pytest.mark.parametrize("command", ["generate", "deploy"])
def test_a_non_empty_folder_is_refused_in_the_same_words_before_any_work(command, tmp_path,
                                                                         capsys):
    """``generate`` and ``deploy`` refuse a non-empty ``-o`` without ``--force`` alike, with
    one ``error:`` line and nothing printed before it."""
    (tmp_path / "keep.txt").write_text("mine")
    assert main([command, "c3d_zcu102", "-o", str(tmp_path)]) == 2
    out, err = capsys.readouterr()
    assert not out and err == (f"error: -o {tmp_path}: the folder is not empty (--force writes "
                               "into it, replacing files of the same names)\n")
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]
