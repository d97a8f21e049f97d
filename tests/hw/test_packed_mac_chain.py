"""Tests of :mod:`fcircnn.hw.packed_mac_chain`: the two sums of a packed DSP48E2 cascade are
exact on random and extreme Gauss products, the guard bits' arithmetic holds over the whole
range, and the primitive form is the cascade with no fabric adder but the split."""

import gc
import random

import numpy as np
import pytest
from amaranth.sim import Simulator
from conftest import unit_simulators

from fcircnn.arch.geometry import GAUSS_PRODUCT_MAX, PACKED_CHAIN_MAX, PACKED_SHIFT
from fcircnn.gen.synth import synthesize
from fcircnn.hw.common import never_elaborated
from fcircnn.hw.packed_mac_chain import PackedMacChain, chain_latency
from fcircnn.sim.runner import require_simulator, run_cocotb
from fcircnn.sim.tb_packed_mac_chain import gauss_beat
from fcircnn.sim.tb_packed_mac_chain import sums as ref_sums


def rtl_sums(n, beats, seed):
    """``(s1, s0)`` of each beat from the Amaranth simulator, with a random clock enable."""
    dut = PackedMacChain(n)
    rng = random.Random(seed)
    got = []

    async def bench(ctx):
        taken = 0
        while len(got) < len(beats):
            ce = rng.random() < 0.7
            beat = beats[taken] if taken < len(beats) else [(0, 0, 0)] * n
            for i, (x, w0, w1) in enumerate(beat):
                ctx.set(dut.x[i], x)
                ctx.set(dut.w0[i], w0)
                ctx.set(dut.w1[i], w1)
            ctx.set(dut.ce, ce)
            await ctx.tick()
            taken += ce
            if ce and taken >= dut.latency:
                got.append((ctx.get(dut.s1), ctx.get(dut.s0)))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return got


@pytest.mark.parametrize("n", range(1, PACKED_CHAIN_MAX + 1))
def test_sums_are_exact_on_random_and_extreme_gauss_products(n):
    rng = random.Random(n)
    beats = [gauss_beat(rng, n, extreme=rng.random() < 0.3) for _ in range(150)]
    assert any(abs(s) == n * GAUSS_PRODUCT_MAX for b in beats for s in ref_sums(b))
    assert rtl_sums(n, beats, seed=n) == [ref_sums(b) for b in beats]


def test_guard_bits_split_every_pair_of_sums_in_range():
    """Bit-level model of the split, over every low sum the longest chain can reach and the
    high sums at and around its limits: ``P = 2**18 * s1 + s0`` gives back both."""
    limit = PACKED_CHAIN_MAX * GAUSS_PRODUCT_MAX
    assert limit < 2 ** (PACKED_SHIFT - 1)
    s0 = np.arange(-limit, limit + 1, dtype=np.int64)
    for s1 in (-limit, -limit + 1, -1, 0, 1, limit - 1, limit):
        p = (s1 << PACKED_SHIFT) + s0
        assert abs(int(p.max())) < 2**47 and abs(int(p.min())) < 2**47  # the 48-bit P
        low = ((p & (2**PACKED_SHIFT - 1)) ^ 2 ** (PACKED_SHIFT - 1)) - 2 ** (PACKED_SHIFT - 1)
        high_field = (p >> PACKED_SHIFT) & (2**PACKED_SHIFT - 1)
        high = (high_field ^ 2 ** (PACKED_SHIFT - 1)) - 2 ** (PACKED_SHIFT - 1)
        assert np.array_equal(low, s0)
        assert np.all(high + ((p >> (PACKED_SHIFT - 1)) & 1) == s1)


def test_a_fifth_product_would_overflow_the_low_field():
    """Why the chain stops at PACKED_CHAIN_MAX: one more Gauss product of the largest
    magnitude leaves the signed 18-bit field."""
    assert (PACKED_CHAIN_MAX + 1) * GAUSS_PRODUCT_MAX >= 2 ** (PACKED_SHIFT - 1)


@pytest.mark.parametrize("n, error", [(0, ValueError), (PACKED_CHAIN_MAX + 1, ValueError),
                                      ("2", TypeError), (True, TypeError)])
def test_constructor_rejects_bad_lengths(n, error):
    with pytest.raises(error, match="n must be"):
        PackedMacChain(n)


def test_latency():
    chains = [PackedMacChain(n) for n in range(1, 5)]
    never_elaborated(*chains)  # only their latency is read
    assert [c.latency for c in chains] == [chain_latency(n) for n in range(1, 5)] == [4, 5, 6, 7]
    del chains
    gc.collect()


def test_primitive_form_synthesizes_to_the_cascade_alone(tmp_path):
    """Yosys (which gets the primitive form): a 4-stage chain is 4 DSP48E2; the fabric holds
    only the delay lines (registers, and shift-register LUTs for the 3-deep one) and the split
    (an 18-bit increment: carries and at most a LUT per bit), no adder per stage."""
    report = synthesize(PackedMacChain(4), "chain", workdir=tmp_path)
    assert report.dsp == 4 and report.leftover_multipliers == 0
    kinds = {t for t in report.cells if not t.startswith("$scopeinfo")}
    assert kinds <= {"DSP48E2", "FDRE", "SRL16E", "CARRY4", "LUT1", "LUT2", "LUT3"}, kinds
    assert report.lut <= PACKED_SHIFT and report.carry <= 5
    # the skew: stage i's three INT9 operands, i cycles deep (27 bits x 1 + 2 + 3)
    assert report.ff + 3 * report.cells.get("SRL16E", 0) == 27 * (1 + 2 + 3)


@pytest.mark.parametrize("simulator", unit_simulators())
@pytest.mark.parametrize("n", [1, PACKED_CHAIN_MAX])
def test_cocotb(simulator, n):
    require_simulator(simulator)
    run_cocotb(PackedMacChain(n), "packed_mac_chain", "fcircnn.sim.tb_packed_mac_chain",
               simulator, parameters={"n": n, "seed": 7, "beats": 400})
