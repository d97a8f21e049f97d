"""Tests of :mod:`fcircnn.hw.pe_array`."""

import gc
import random
from pathlib import Path

import numpy as np
import pytest
from amaranth.sim import Simulator
from conftest import unit_simulators

from fcircnn.arch.geometry import pe_chains
from fcircnn.hw.common import never_elaborated
from fcircnn.hw.pe_array import PEArray, in_layout, out_layout
from fcircnn.models.spectral import conv3d_slots_int
from fcircnn.sim.runner import pack, require_simulator, run_cocotb, unpack
from fcircnn.sim.tb_pe_array import (
    conv_beats,
    conv_results,
    random_beats,
    random_conv,
    reference_beats,
    weight_terms,
)

MODELS = Path(__file__).resolve().parents[2] / "models"


def rtl_stream(dut, beats, n_out, seed, p_valid=0.7, p_ready=0.6):
    """Run ``beats`` through ``dut`` on the Amaranth simulator with random valid/ready.

    Checks the stream rules on the way (a stalled output holds ``valid`` and its payload; the
    input is ready whenever the output is empty or taken). Returns ``(outputs, cycles,
    accepted)``: ``accepted`` lists the cycles (1-based, cycle ``t`` ends with edge ``t``) whose
    edge took an input beat; ``cycles`` is the cycle that took the last output.
    """
    rng = random.Random(seed)
    ilay, olay = in_layout(dut.Tn, dut.Tm, dut.B, dut.Td), out_layout(dut.Tm, dut.Td)
    packed = [pack(ilay, b) for b in beats]
    res = {"outputs": [], "accepted": []}

    async def testbench(ctx):
        idx = 0
        cycle = 0
        held = None  # payload of an output that was valid but not taken
        while len(res["outputs"]) < n_out:
            valid = int(idx < len(packed) and rng.random() < p_valid)
            ready = int(rng.random() < p_ready)
            ctx.set(dut.i.valid, valid)
            ctx.set(dut.i.payload.as_value(), packed[idx] if idx < len(packed) else 0)
            ctx.set(dut.o.ready, ready)
            cycle += 1
            o_valid = ctx.get(dut.o.valid)
            payload = ctx.get(dut.o.payload.as_value())
            if held is not None:
                assert o_valid and payload == held, "stalled output changed"
            assert ctx.get(dut.i.ready) == int(not o_valid or ready)
            if valid and ctx.get(dut.i.ready):
                res["accepted"].append(cycle)
                idx += 1
            held = payload if o_valid and not ready else None
            if o_valid and ready:
                res["outputs"].append(unpack(olay, payload))
            await ctx.tick()
            assert cycle < 20 * (len(beats) + 50), "timeout"
        res["cycles"] = cycle

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()
    return res["outputs"], res["cycles"], res["accepted"]


#: Cores of one cascade per PE (Tn/B <= 4) and of several: 5 products on cascades of 3 and 2,
#: 16 on four of 4.
CONFIGS = [(8, 16, 4, 1), (8, 16, 4, 2), (16, 32, 8, 1), (16, 32, 16, 1), (24, 16, 8, 1),
           (40, 16, 8, 1), (64, 16, 4, 1)]


@pytest.mark.parametrize(("Tn", "Tm", "B", "Td"), CONFIGS)
def test_random_beats_with_backpressure(Tn, Tm, B, Td):
    rng = random.Random(Tn * Tm + B + Td)
    beats = random_beats(rng, Tn, Tm, B, Td, 40)
    want = reference_beats(beats, Tn, Tm, B, Td)
    got, _, _ = rtl_stream(PEArray(Tn, Tm, B, Td), beats, len(want), seed=Td)
    assert got == want


@pytest.mark.parametrize(
    ("Td", "n_in", "shape", "stride", "padding"),
    [(1, 16, (2, 2, 3), 1, 1), (2, 32, (2, 3, 3), 1, 1), (2, 16, (3, 4, 4), (1, 2, 2), 1)],
)
def test_conv_tile_matches_golden_model(Td, n_in, shape, stride, padding):
    """A block-circulant 3x3x3 layer tile (Tn=16, Tm=32, B=8) walked beat by beat."""
    Tn, Tm, B = 16, 32, 8
    x_re, x_im, w_re, w_im = random_conv(np.random.default_rng(Td), n_in, Tm, B, shape, (3, 3, 3))
    want_re, want_im = conv3d_slots_int(x_re, x_im, w_re, w_im, stride, padding)
    beats, groups = conv_beats(x_re, x_im, w_re, w_im, Tn, Td, stride, padding)
    got, _, _ = rtl_stream(PEArray(Tn, Tm, B, Td), beats, len(groups), seed=5, p_valid=0.9,
                           p_ready=0.8)
    got_re, got_im = conv_results(got, groups, Tm // 2, want_re.shape[1:])
    np.testing.assert_array_equal(got_re, want_re)
    np.testing.assert_array_equal(got_im, want_im)


@pytest.mark.parametrize(("Tn", "Tm", "B", "Td"), [(8, 16, 4, 1), (16, 32, 8, 2), (32, 32, 8, 1),
                                                  (40, 16, 8, 1)])
def test_initiation_interval_one(Tn, Tm, B, Td):
    """Fed continuously with a ready output: a beat every cycle, results ``latency`` later."""
    beats = random_beats(random.Random(3), Tn, Tm, B, Td, 50)
    n_out = sum(b["last"] for b in beats)
    dut = PEArray(Tn, Tm, B, Td)
    got, cycles, accepted = rtl_stream(dut, beats, n_out, seed=1, p_valid=1.0, p_ready=1.0)
    assert got == reference_beats(beats, Tn, Tm, B, Td)
    assert accepted == list(range(1, len(beats) + 1))
    assert cycles == len(beats) + dut.latency
    # the longest cascade's skew and DSP48E2 (its length + 3), the post-subtraction, the tree
    # over the cascades and the accumulator
    chains = pe_chains(Tn // B)
    assert dut.latency == chains[0] + 3 + 1 + (len(chains) - 1).bit_length() + 1


@pytest.mark.parametrize(("Tn", "Tm", "B", "Td"), [(32, 16, 8, 1), (40, 16, 8, 1)])
def test_every_cascade_at_its_guard_limit(Tn, Tm, B, Td):
    """Every slot at one corner of the int8 range, in long accumulations: each cascade's two
    sums reach the largest magnitude the guard bits allow, in both signs, and the
    accumulators their largest sums."""
    rng = random.Random(Tn)
    beats = []
    for corner in ((127, 127, 127, -127), (-127, 127, 127, 127), (127, -127, -127, -127),
                   (-127, -127, 127, -127)):
        a, b, c, d = corner
        for i in range(6):
            beats.append({
                "act": [[{"re": a, "im": b}] * (Tn // 2)] * Td,
                "w": [[[weight_terms(c, d)] * (B // 2)] * (Tn // B)] * (Tm // B),
                "first": int(i == 0), "last": int(i == 5)})
    want = reference_beats(beats, Tn, Tm, B, Td)
    got, _, _ = rtl_stream(PEArray(Tn, Tm, B, Td), beats, len(want), seed=rng.randrange(9))
    assert got == want


def test_back_to_back_single_beat_accumulations():
    """``first`` and ``last`` on every beat: one output per input, still no bubbles."""
    Tn, Tm, B = 8, 16, 4
    beats = random_beats(random.Random(9), Tn, Tm, B, 1, 30)
    for b in beats:
        b["first"] = b["last"] = 1
    dut = PEArray(Tn, Tm, B)
    got, cycles, accepted = rtl_stream(dut, beats, len(beats), seed=2, p_valid=1.0, p_ready=1.0)
    assert got == reference_beats(beats, Tn, Tm, B, 1)
    assert accepted == list(range(1, 31))
    assert cycles == 30 + dut.latency


def test_structure_counts():
    dut = PEArray(32, 64, 8)
    assert dut.pairs == 64
    assert dut.slot0_pairs == 16
    assert dut.dsp_count == 176
    td2 = PEArray(32, 32, 8, 2)
    assert td2.pairs == 64
    assert in_layout(32, 64, 8, 1).size == 32 // 2 * 16 + 64 // 8 * 32 // 8 * 4 * 27 + 2
    assert out_layout(64, 2).size == 2 * 32 * 64
    for d in (dut, td2):
        never_elaborated(d)  # inspected, not simulated
    del dut, td2, d
    gc.collect()  # the inspected hardware goes while never_elaborated's filter holds


@pytest.mark.parametrize(
    ("args", "kwargs", "exc", "match"),
    [
        ((12, 32, 8), {}, ValueError, (r"Tn must be a multiple of B \(8\): whole input "
                                       r"blocks, not 12")),
        ((0, 32, 8), {}, ValueError, r"Tn must be in 1\.\.1024, not 0"),
        ((16, 24, 8), {}, ValueError, (r"Tm must be a multiple of 2B \(16\): output blocks "
                                       r"in DSP pairs, not 24")),
        ((16, 8, 8), {}, ValueError, r"Tm must be a multiple of 2B \(16.*not 8"),
        ((16, 32, 6), {}, ValueError, "B must be one of 4, 8, 16, not 6"),
        ((16, 32, 32), {}, ValueError, "B must be one of 4, 8, 16, not 32"),
        ((16, 32, 8, 0), {}, ValueError, "Td must be a positive integer, not 0"),
        ((16.0, 32, 8), {}, TypeError, "Tn must be an integer, not 16.0"),
        ((16, "32", 8), {}, TypeError, "Tm must be an integer, not '32'"),
        ((16, 32, True), {}, TypeError, "B must be an integer, not True"),
        ((16, 32, 8), {"acc_width": 31}, ValueError, "acc_width must be at least 32"),
    ],
)
def test_bad_parameters(args, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        PEArray(*args, **kwargs)


def test_from_core():
    from fcircnn.models.config import load_accelerator

    c3d = load_accelerator(MODELS / "c3d_zcu102.yaml")
    arr = PEArray.from_core(c3d.cores[0], c3d.block_size)
    assert (arr.Tn, arr.Tm, arr.B, arr.Td, arr.pairs) == (32, 64, 8, 1, 64)
    r3d = load_accelerator(MODELS / "r3d18_zcu102.yaml")
    arrays = [PEArray.from_core(core, r3d.block_size) for core in r3d.cores]
    for core, a in zip(r3d.cores, arrays, strict=True):
        assert a.Td == (core.td if "td" in core.unroll else 1)
        never_elaborated(a)
    never_elaborated(arr)
    del arrays, a, arr
    gc.collect()  # the inspected hardware goes while never_elaborated's filter holds


@pytest.mark.parametrize("simulator", unit_simulators())
def test_cocotb(simulator):
    """Random beats, a whole 3x3x3 conv tile over two input-channel tiles and the II=1 count."""
    require_simulator(simulator)
    dut = PEArray(16, 32, 8, 1)
    run_cocotb(
        dut,
        "pe_array",
        "fcircnn.sim.tb_pe_array",
        simulator,
        parameters={
            "Tn": 16, "Tm": 32, "B": 8, "Td": 1, "seed": 21, "random_beats": 40,
            "shape": [2, 2, 2], "kernel": [3, 3, 3], "stride": 1, "padding": 1, "n_in": 32,
            "ii_beats": 64, "latency": dut.latency,
        },
    )
