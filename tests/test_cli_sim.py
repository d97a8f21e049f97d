"""``fcircnn sim``: argument handling, error paths, orchestration and the results table
without a simulator (the RTL run is replaced by fakes writing canned results), and one real
end-to-end run on the two-core test accelerator (its table and exit code)."""

import importlib.machinery
import io
import json
import subprocess
import sys
import types
from pathlib import Path

import pytest

from fcircnn import simulate as sim
from fcircnn.cli import build_parser, main
from fcircnn.models.config import builtin_path
from fcircnn.sim import runner

CONFIG = ["r3d18_zcu102", "--scale", "16"]
R3D_LAYERS = ["conv1", "l1b1_conv1", "l1b1_conv2"]


def _results(names, *, status="done", passed=True, cycles=1000):
    layers = [{"name": n, "cycles": cycles, "pe_busy": cycles // 2, "dma_stall": cycles // 4,
               "passed": passed, "mismatches": 0 if passed else 3,
               "first_mismatch": None if passed else {"slot": 1, "voxel": [0, 0, 0]}}
              for n in names]
    total = cycles * len(names) + 10
    return {"status": status, "error_code": 0, "error_addr": 0, "total_cycles": total,
            "pe_busy": total // 2, "dma_stall": total // 4, "sim_cycles": total + 20,
            "wall_seconds": 2.0, "layers": layers}


class FakeRun:
    """Stands in for :func:`fcircnn.simulate.run_rtl`: checks its inputs, writes progress and
    the results JSON."""

    def __init__(self, make=None):
        self.calls = []
        self.make = make

    def __call__(self, acc, image_dir, results, **kwargs):
        self.calls.append((acc, image_dir, results, kwargs))
        assert (image_dir / "image.bin").is_file()
        memory_map = json.loads((image_dir / "memory_map.json").read_text())
        names = list(dict.fromkeys(d["name"] for d in memory_map["descriptors"]))
        if kwargs.get("progress"):
            kwargs["progress"](len(names), len(names))
        data = self.make(names) if self.make else _results(names)
        results.write_text(json.dumps(data))
        return image_dir


@pytest.fixture
def fake_run(monkeypatch):
    fake = FakeRun()
    monkeypatch.setattr(sim, "run_rtl", fake)
    return fake


def test_sim_is_a_subcommand():
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert "sim" in sub.choices and sub.choices["sim"].description
    proc = subprocess.run([sys.executable, "-m", "fcircnn.cli", "sim", "--help"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "--layers" in proc.stdout and "--scale" in proc.stdout


@pytest.mark.parametrize("args,message", [
    (["nothere.yaml"], "nothere.yaml: file not found"),
    (["c3d"], "not an accelerator file"),
    (["no_such_builtin"], "no built-in configuration of that name"),
])
def test_bad_config(args, message, capsys, tmp_path):
    assert main(["sim", *args, "--build-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_invalid_yaml(tmp_path, capsys):
    bad = tmp_path / "acc.yaml"
    bad.write_text("name: x\ncores: [\n")
    assert main(["sim", str(bad)]) == 2
    assert "YAML syntax error" in capsys.readouterr().err


def test_unknown_layer_checked_before_compiling(monkeypatch, capsys, tmp_path):
    import fcircnn.gen.compiler as compiler

    def forbidden(*args, **kwargs):
        raise AssertionError("compiled before checking --layers")

    monkeypatch.setattr(compiler, "compile_network", forbidden)
    assert main(["sim", *CONFIG, "--layers", "conv1,l9_conv", "--build-dir",
                 str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--layers: unknown layer 'l9_conv'; valid layer names: conv1, l1b1_conv1" in err
    assert not (tmp_path / "sim-images").exists()


@pytest.mark.parametrize("layers", [",", " , ,"])
def test_empty_layers(layers, capsys):
    assert main(["sim", *CONFIG, "--layers", layers]) == 2
    assert "--layers needs at least one layer name" in capsys.readouterr().err


def test_reused_maps_run_the_whole_network_only(capsys):
    assert main(["sim", *CONFIG, "--layers", "conv1", "--reuse-maps"]) == 2
    assert "--reuse-maps runs the whole network: not with --layers" in capsys.readouterr().err


@pytest.mark.parametrize("scale", ["0", "-2", "1.5", "two", ""])
def test_bad_scale(scale, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["sim", "c3d_zcu102", "--scale", scale])
    assert exc.value.code == 2
    assert "scale factor S must be an integer >= 1" in capsys.readouterr().err


@pytest.mark.parametrize("args,message", [
    (["--simulator", "xsim"], "invalid choice: 'xsim'"),
    (["--backpressure", "1"], "must be a number in [0, 1)"),
    (["--backpressure", "-0.1"], "must be a number in [0, 1)"),
    (["--timeout-cycles", "0"], "must be a positive integer"),
    (["--seed", "x"], "must be an integer in 0..4294967295"),
    (["--seed", "-1"], "must be an integer in 0..4294967295"),
])
def test_bad_options(args, message, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["sim", "c3d_zcu102", *args])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("value, message", [
    ("8x32", "--input must be DxHxW with three positive integers, e.g. 8x32x32, not '8x32'"),
    ("8x0x32", "--input must be DxHxW"),
    ("axbxc", "--input must be DxHxW"),
    ("8x15x16", "--input: input 8x15x16 is too small for network c3d on axis depth, height"),
])
def test_bad_input_shape(value, message, capsys, tmp_path):
    assert main(["sim", "c3d_zcu102", "--scale", "8", "--input", value, "--build-dir",
                 str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_input_shape_reaches_the_image(fake_run, capsys, tmp_path):
    assert main(["sim", "r3d18_zcu102", "--scale", "16", "--input", "2x24x24", "--layers",
                 "conv1", "--build-dir", str(tmp_path), "-q"]) == 0
    acc = fake_run.calls[0][0]
    assert acc.network.input.shape == (2, 24, 24)
    assert acc.network.layer("conv1").out_channels == 8
    assert "3x2x24x24 input, scale 16" in capsys.readouterr().err


def test_json_result(fake_run, capsys, tmp_path):
    fake_run.make = lambda names: _results(names, passed=False, cycles=2000)
    assert main(["sim", "r3d18_zcu102", "--scale", "16", "--layers", "conv1,l1b1_conv1",
                 "--build-dir", str(tmp_path), "-q", "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert [layer["name"] for layer in doc["layers"]] == ["conv1", "l1b1_conv1"]
    assert not doc["passed"] and doc["not_run"] == [] and doc["status"] == "done"
    assert doc["layers"][0]["mismatches"] == 3 and doc["layers"][0]["cycles"] == 2000
    assert doc["total_cycles"] == 4010 and doc["effective_gops"] > 0
    assert isinstance(doc["layers"][0]["effective_gops"], float)  # a number, not text


def test_subprocess_has_no_traceback(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "fcircnn.cli", "sim", *CONFIG, "--layers",
                           "bogus", "--build-dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: --layers: unknown layer 'bogus'")
    assert "Traceback" not in proc.stderr


def test_simulator_unavailable(monkeypatch, capsys, tmp_path):
    def unavailable(name):
        raise runner.SimulatorUnavailable("Icarus Verilog is not installed")

    monkeypatch.setattr(runner, "find_simulator", unavailable)
    assert main(["sim", *CONFIG, "--layers", "fc", "--simulator", "icarus", "--build-dir",
                 str(tmp_path), "-q"]) == 2
    assert "--simulator icarus: Icarus Verilog is not installed" in capsys.readouterr().err


def test_missing_accelerator_top(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(runner, "find_simulator", lambda name: None)
    monkeypatch.setitem(sys.modules, "fcircnn.hw.accelerator", None)  # import fails
    assert main(["sim", *CONFIG, "--layers", "fc", "--build-dir", str(tmp_path), "-q"]) == 1
    assert "the accelerator top is not available" in capsys.readouterr().err


def test_whole_run_passes(fake_run, capsys, tmp_path):
    code = main(["sim", *CONFIG, "--layers", "l1b1_conv2,conv1", "--seed", "5",
                 "--backpressure", "0.25", "--build-dir", str(tmp_path)])
    out, err = capsys.readouterr()
    assert code == 0, err
    ((acc, image_dir, results, kwargs),) = fake_run.calls
    assert acc.network.name == "r3d18_s16"
    assert image_dir.parent == tmp_path.resolve() / "sim-images"
    assert results == image_dir / "results-verilator.json"
    assert kwargs["simulator"] == "verilator" and kwargs["seed"] == 5
    assert kwargs["backpressure"] == 0.25 and kwargs["waves"] is False
    assert kwargs["timeout_cycles"] >= 100_000
    memory_map = json.loads((image_dir / "memory_map.json").read_text())
    assert list(dict.fromkeys(d["name"] for d in memory_map["descriptors"])) == [
        "conv1", "l1b1_conv2"]
    lines = out.splitlines()
    assert lines[0].split() == ["layer", "cycles", "GOP/s", "PE", "util", "DMA", "stall",
                                "result"]
    assert lines[2].split()[0] == "conv1" and lines[2].split()[-1] == "PASS"
    assert lines[4].split()[:2] == ["total", "2010"] and "2/2 PASS" in lines[4]
    assert lines[-1] == "PASS"
    assert "r3d18_s16" in err and "2 of 22 layers" in err


def test_same_image_same_folder(fake_run, tmp_path):
    for _ in range(2):
        assert main(["sim", *CONFIG, "--layers", "fc", "--build-dir", str(tmp_path), "-q"]) == 0
    assert fake_run.calls[0][1] == fake_run.calls[1][1]
    assert main(["sim", *CONFIG, "--layers", "fc", "--seed", "1", "--build-dir", str(tmp_path),
                 "-q"]) == 0
    assert fake_run.calls[2][1] != fake_run.calls[0][1]


@pytest.mark.parametrize("make,word", [
    (lambda names: _results(names, passed=False), "FAIL (3 mismatches"),
    (lambda names: _results(names, status="timeout"), "status timeout"),
    (lambda names: _results(names[:-1]), "NOT RUN"),
    (lambda names: {**_results(names), "status": "error", "error_code": 2,
                    "error_addr": 4096}, "error code 2, address 0x1000"),
])
def test_failures_exit_1(monkeypatch, capsys, tmp_path, make, word):
    monkeypatch.setattr(sim, "run_rtl", FakeRun(make))
    assert main(["sim", *CONFIG, "--layers", "gap,fc", "--build-dir", str(tmp_path), "-q"]) == 1
    out = capsys.readouterr().out
    assert word in out and out.splitlines()[-1] == "FAIL"


def test_no_results(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(sim, "run_rtl", lambda *a, **k: tmp_path)
    assert main(["sim", *CONFIG, "--layers", "fc", "--build-dir", str(tmp_path), "-q"]) == 1
    assert "no simulation results at" in capsys.readouterr().err


def test_build_dir_env_restored(monkeypatch, tmp_path):
    monkeypatch.setenv("FCIRCNN_BUILD_DIR", "/somewhere")
    with sim.build_dir_env(tmp_path) as root:
        assert root == tmp_path.resolve()
        assert runner.build_root() == tmp_path.resolve()
    assert runner.build_root() == Path("/somewhere")


# ------------------------------------------------------------------------------------------
# run_rtl with a fake cocotb runner and accelerator


FAKE_VERILOG = "module fcircnn_accel(); endmodule\n"


@pytest.fixture
def fake_hardware(monkeypatch):
    from fcircnn.gen import generate

    top = types.ModuleType("fcircnn.hw.accelerator")
    converted = []

    def accelerator_verilog(acc, geometry=None, *, cache=True, status=None):
        converted.append(acc)
        return FAKE_VERILOG

    monkeypatch.setattr(generate, "accelerator_verilog", accelerator_verilog)
    tb = types.ModuleType("fcircnn.sim.tb_accelerator")
    tb.__spec__ = importlib.machinery.ModuleSpec("fcircnn.sim.tb_accelerator", None)
    tb.output_path = lambda results: results.with_name(results.name + ".output.npz")
    monkeypatch.setitem(sys.modules, "fcircnn.hw.accelerator", top)
    monkeypatch.setitem(sys.modules, "fcircnn.sim.tb_accelerator", tb)
    monkeypatch.setattr(runner, "find_simulator", lambda name: None)
    calls = []

    def run_cocotb(design, toplevel, test_module, simulator, **kwargs):
        calls.append((design, toplevel, test_module, simulator, kwargs))
        params = json.loads(kwargs["extra_env"][runner.PARAMS_ENV])
        progress = Path(params["results"] + ".progress")
        with progress.open("a") as f:
            f.write("1 2\n2 2\n3")  # the last line is incomplete
        Path(params["results"]).write_text(json.dumps(_results(["fc"])))
        run = Path(params["image_dir"]) / "run"
        run.mkdir(exist_ok=True)
        return run / "results.xml"

    monkeypatch.setattr(runner, "run_cocotb", run_cocotb)
    return calls, converted


def test_run_rtl_parameters_not_hashed(fake_hardware, tmp_path):
    acc, image = sim.prepare(builtin_path("r3d18_zcu102"), scale=16, layers=["fc"], seed=2)
    image_dir = sim.save_image(image, tmp_path)
    results = image_dir / "results.json"
    results.write_text("stale")
    seen = []
    run_dir = sim.run_rtl(acc, image_dir, results, simulator="icarus", waves=True, seed=2,
                          backpressure=0.5, timeout_cycles=1234,
                          progress=lambda d, t: seen.append((d, t)))
    calls, converted = fake_hardware
    ((design, toplevel, module, simulator, kwargs),) = calls
    assert converted == [acc] and design == FAKE_VERILOG
    assert toplevel == "fcircnn_accel" == sim.ACCEL_TOPLEVEL
    assert module == "fcircnn.sim.tb_accelerator" and simulator == "icarus"
    assert kwargs["parameters"] == {}  # nothing per image in the build hash
    assert kwargs["waves"] is True and kwargs["seed"] == 2
    assert json.loads(kwargs["extra_env"][runner.PARAMS_ENV]) == {
        "image_dir": str(image_dir), "results": str(results), "backpressure": 0.5,
        "latency": 0, "seed": 2, "timeout_cycles": 1234, "poll": False}
    assert run_dir == image_dir / "run"
    assert seen and seen[-1] == (2, 2)
    assert sim.read_results(results).layers[0].name == "fc"


# ------------------------------------------------------------------------------------------
# Results parsing and the table


def test_format_results_canned():
    canned = {
        "status": "done", "error_code": 0, "error_addr": 0, "total_cycles": 3_000_000,
        "pe_busy": 1_500_000, "dma_stall": 300_000, "sim_cycles": 3_000_100,
        "wall_seconds": 10.0,
        "layers": [
            {"name": "conv1", "cycles": 1_000_000, "pe_busy": 500_000, "dma_stall": 100_000,
             "passed": True, "mismatches": 0, "first_mismatch": None},
            {"name": "gap", "cycles": 500_000, "pe_busy": 0, "dma_stall": 0, "passed": True,
             "mismatches": 0, "first_mismatch": None},
            {"name": "fc", "cycles": 1_000_000, "pe_busy": 1_000_000, "dma_stall": 200_000,
             "passed": False, "mismatches": 7, "first_mismatch": "slot 3 at (0, 0, 0)"},
        ],
    }
    results = sim.parse_results(canned)
    text = sim.format_results(results, {"conv1": 2 * 10**9, "gap": 0, "fc": 10**9}, 200.0,
                              ["conv1", "gap", "fc", "extra"])
    rows = {line.split()[0]: line.split() for line in text.splitlines()[2:6]}
    # 2 GOP in 1e6 cycles at 200 MHz (5 ms) = 400 GOP/s; PE 50 %, DMA stall 10 %.
    assert rows["conv1"] == ["conv1", "1000000", "400.00", "50.0%", "10.0%", "PASS"]
    assert rows["gap"][:3] == ["gap", "500000", "-"]
    assert rows["fc"][:5] == ["fc", "1000000", "200.00", "100.0%", "20.0%"]
    assert "FAIL (7 mismatches, first slot 3 at (0, 0, 0))" in text
    assert rows["extra"] == ["extra", "-", "-", "-", "-", "NOT", "RUN"]
    total = text.splitlines()[6].split()
    # 3 GOP in 3e6 cycles (15 ms) = 200 GOP/s.
    assert total == ["total", "3000000", "200.00", "50.0%", "10.0%", "2/4", "PASS"]
    assert "status done; 3000000 cycles = 15000.0 us at 200 MHz" in text
    assert "simulated in 10.0 s (300,010 cycles/s)" in text
    assert text.splitlines()[-1] == "FAIL"
    assert sim.failed(results, ["conv1"])  # fc failed


def test_a_layer_not_checked_is_shown_and_does_not_fail():
    """A layer whose map a later one reused, with no copy kept (``checked`` false): shown as
    such, counted apart in the total, and the run passes."""
    data = _results(["a", "b"])
    data["layers"][0]["checked"] = False
    res = sim.parse_results(data)
    assert [lay.checked for lay in res.layers] == [False, True]
    text = sim.format_results(res, {}, 200.0, ["a", "b"])
    assert "not checked (map reused)" in text and "1/2 PASS, 1 not checked" in text
    assert text.splitlines()[-1] == "PASS" and not sim.failed(res, ["a", "b"])
    assert sim.results_json(res, {}, 200.0)["layers"][0]["checked"] is False
    with pytest.raises(ValueError, match=r"layers\[0\]\.checked must be true or false"):
        sim.parse_results({**data, "layers": [{**data["layers"][0], "checked": "no"}]})


def test_parse_results_merges_passes_and_rejects_bad_data():
    data = _results(["a", "a", "b"])
    data["layers"][1]["passed"] = False
    data["layers"][1]["first_mismatch"] = "x"
    res = sim.parse_results(data)
    assert [(lay.name, lay.cycles, lay.passed) for lay in res.layers] == [
        ("a", 2000, False), ("b", 1000, True)]
    assert res.layers[0].first_mismatch == "x"
    for bad, key in [({**data, "status": "ok"}, "status"),
                     ({**data, "layers": [{"name": "a"}]}, "passed"),
                     ({**data, "total_cycles": -1}, "total_cycles"),
                     ({**data, "layers": [{"name": "a", "passed": True, "cycles": "9"}]},
                      "cycles"),
                     ([], "object")]:
        with pytest.raises(ValueError, match=key):
            sim.parse_results(bad)


def test_read_results_errors(tmp_path):
    with pytest.raises(sim.SimulationError, match="no simulation results"):
        sim.read_results(tmp_path / "none.json")
    (tmp_path / "r.json").write_text("{")
    with pytest.raises(sim.SimulationError, match="bad simulation results"):
        sim.read_results(tmp_path / "r.json")


def test_read_progress(tmp_path):
    path = tmp_path / "p"
    assert sim.read_progress(path) is None
    path.write_text("1 5\n2 5\n3")
    assert sim.read_progress(path) == (2, 5)
    path.write_text("garbage\n")
    assert sim.read_progress(path) is None


def test_a_pass_first_seen_finished_starts_when_it_is_seen(tmp_path):
    """A simulation over before the first poll (three descriptors after a long Verilator
    build) starts its pass where the poller first sees it: `sim` printed the build's minutes
    as the pass's time."""
    from fcircnn.cli.common import _Progress

    path, calls = tmp_path / "p", []
    poller = sim._Poller(path, lambda done, total: calls.append((done, total)))
    poller.poll()
    assert calls == []  # no file yet: the build
    path.write_text("3 3\n")
    poller.poll()
    poller.poll()
    assert calls == [(0, 3), (3, 3)]
    out = io.StringIO()
    bar = _Progress(out, unit="descriptors")
    bar.start = bar.pass_start = bar.last = bar.start - 200  # a 200 s build before the pass
    for done, total in calls:
        bar("sim", done, total)
    seconds = float(out.getvalue().split(" in ")[1].split(" s")[0])
    assert out.getvalue().startswith("  sim    pass done: 3 descriptors") and seconds < 1


def test_parse_layers():
    assert sim.parse_layers(None) is None
    assert sim.parse_layers(" conv1, fc ,") == ["conv1", "fc"]
    with pytest.raises(ValueError, match="at least one"):
        sim.parse_layers(" , ")


def test_timeout_estimate_grows_with_backpressure():
    acc, image = sim.prepare(builtin_path("c3d_zcu102"), scale=16, layers=["conv1a"])
    quick = sim.estimate_timeout_cycles(acc, image)
    assert 100_000 < quick < sim.estimate_timeout_cycles(acc, image, 0.9)


# --------------------------------------------------------------------------------------------
# One real run: the two-core test accelerator of tests/hw/test_accelerator_layers.py (its
# Verilator build is shared: the same Verilog, -Os, no parameters).

TEST_ACCELERATOR = Path(__file__).parent / "hw" / "configs" / "two_core.yaml"


@pytest.mark.xdist_group("two_core")  # the build tests/hw/test_accelerator_layers.py shares
def test_real_run_on_the_test_accelerator(tmp_path):
    runner.require_simulator("verilator")
    layers = ["c5", "fc6"]  # a spatial-core conv with its pool pass, a pointwise-core FC
    proc = subprocess.run(
        [sys.executable, "-m", "fcircnn.cli", "sim", str(TEST_ACCELERATOR), "--layers",
         ",".join(layers), "--seed", "2", "-q"],
        capture_output=True, text=True, timeout=1800, cwd=Path.cwd())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split() == ["layer", "cycles", "GOP/s", "PE", "util", "DMA", "stall",
                                "result"]
    rows = {line.split()[0]: line.split() for line in lines[2:] if line.split()}
    for name in layers:
        row = rows[name]
        assert row[-1] == "PASS" and int(row[1]) > 0, row
        assert 0 < float(row[3].rstrip("%")) < 100, row
    assert rows["total"][-2:] == ["2/2", "PASS"]
    assert lines[-1] == "PASS"
    assert "status done" in proc.stdout and "Traceback" not in proc.stderr
