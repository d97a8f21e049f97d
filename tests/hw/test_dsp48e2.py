"""Tests of :mod:`fcircnn.hw.dsp48e2`: the behavioural stage against the DSP48E2's arithmetic
(UG579), and its primitive form (what Yosys and Vivado get)."""

import random
import re

import pytest
from amaranth.back import verilog
from amaranth.sim import Simulator

from fcircnn.hw.dsp48e2 import DSP48E2_LATENCY, XILINX_PRIMITIVES, DSP48E2Stage


def _wrap(value, bits):
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def ref_stage(a, d, b, pcin, cascade):
    """The DSP48E2's result for one set of operands: the 27-bit pre-adder's sum (wrapping),
    times B, plus PCIN with OPMODE ``M + PCIN``, in the 48-bit P."""
    return _wrap(_wrap(d + a, 27) * b + (pcin if cascade else 0), 48)


def rtl_stage(ops, cascade, seed):
    """``p`` of the behavioural stage for each ``(a, d, b, pcin)``, with a random clock enable;
    ``pcin`` is presented in the P register's cycle, as a cascade presents it."""
    dut = DSP48E2Stage(cascade=cascade)
    rng = random.Random(seed)
    got = []

    async def bench(ctx):
        taken = []  # operands taken at enabled edges
        while len(got) < len(ops):
            ce = rng.random() < 0.7
            i = len(taken)
            a, d, b, _ = ops[i] if i < len(ops) else (0, 0, 0, 0)
            ctx.set(dut.a, a)
            ctx.set(dut.d, d)
            ctx.set(dut.b, b)
            j = i - (DSP48E2_LATENCY - 1)  # whose P register this edge loads
            ctx.set(dut.pcin, ops[j][3] if 0 <= j < len(ops) else 0)
            ctx.set(dut.ce, ce)
            await ctx.tick()
            if ce:
                taken.append(i)
                if len(taken) >= DSP48E2_LATENCY:
                    got.append(ctx.get(dut.p))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return got


EXTREMES_27 = (-(2**26), -(2**26) + 1, -1, 0, 1, 2**26 - 1)
EXTREMES_18 = (-(2**17), -1, 0, 1, 2**17 - 1)
EXTREMES_48 = (-(2**47), -1, 0, 2**47 - 1)


@pytest.mark.parametrize("cascade", [False, True])
def test_stage_is_the_dsp48e2_on_random_and_extreme_operands(cascade):
    rng = random.Random(3 + cascade)
    ops = [(a, d, b, rng.choice(EXTREMES_48)) for a in EXTREMES_27 for d in EXTREMES_27
           for b in EXTREMES_18]
    ops += [(rng.randrange(-(2**26), 2**26), rng.randrange(-(2**26), 2**26),
             rng.randrange(-(2**17), 2**17), rng.randrange(-(2**47), 2**47))
            for _ in range(300)]
    assert rtl_stage(ops, cascade, seed=5) == [ref_stage(*op, cascade) for op in ops]


def _primitive_verilog(cascade):
    return verilog.convert(DSP48E2Stage(cascade=cascade), name="stage", emit_src=False,
                           platform=XILINX_PRIMITIVES)


@pytest.mark.parametrize("cascade", [False, True])
def test_primitive_form_is_one_dsp48e2_in_the_stage_s_configuration(cascade):
    text = _primitive_verilog(cascade)
    assert len(re.findall(r"^\s*DSP48E2 #\(", text, re.M)) == 1
    assert "always" not in text  # no fabric register: every one is the DSP's own
    params = dict(re.findall(r"\.(\w+)\((32'd\d+|\"\w+\")\)", text))
    assert {k: params[k] for k in ("AREG", "BREG", "DREG", "ADREG", "MREG", "PREG")} == {
        "AREG": "32'd1", "BREG": "32'd2", "DREG": "32'd1", "ADREG": "32'd1", "MREG": "32'd1",
        "PREG": "32'd1"}
    assert params["AMULTSEL"] == '"AD"' and params["USE_MULT"] == '"MULTIPLY"'
    # INMODE D + A2, B2; OPMODE M (X, Y) plus PCIN (Z) in a cascaded stage
    assert ".INMODE(5'h04)" in text
    assert (".OPMODE(9'h015)" if cascade else ".OPMODE(9'h005)") in text
    assert (".PCIN(pcin)" if cascade else ".PCIN(48'h000000000000)") in text
    assert ".PCOUT(pcout)" in text and ".A({ a[26], a[26], a[26], a })" in text


def test_cascade_must_be_a_bool():
    with pytest.raises(TypeError, match="cascade must be a bool"):
        DSP48E2Stage(cascade=1)
