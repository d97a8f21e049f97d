"""The performance model (:mod:`fcircnn.gen.perf_model`) against the RTL's recorded cycle
counts (``tests/data/rtl_cycles.json``, written by ``bench/record_rtl_cycles.py``), its
constants against the RTL's, its steady-state shortcut against the full recurrence, and its
report."""

import gc
import importlib.util
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from fcircnn.arch.descriptor import FLAG_IQUARTER, FLAG_MINNER
from fcircnn.arch.geometry import CoreGeometry
from fcircnn.arch.walk import conv_reads
from fcircnn.gen.perf_model import (
    EngineTiming,
    MemoryModel,
    _Conv,
    gops_per_dsp,
    memory_of,
    model_descriptor,
)
from fcircnn.gen.perf_network import model_layer, model_network
from fcircnn.gen.plan import plan_network
from fcircnn.models.config import load_accelerator

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "rtl_cycles.json"
MODELS = ROOT / "models"
#: Agreement the issue asks for, per layer.
TOLERANCE = 0.03


def _recorder():
    spec = importlib.util.spec_from_file_location("_record_rtl_cycles",
                                                  ROOT / "bench" / "record_rtl_cycles.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


RECORDER = _recorder()
RECORDING = json.loads(DATA.read_text())


def _case(name):
    return next(c for c in RECORDER.CASES if c.name == name)


@pytest.mark.parametrize("record", RECORDING["cases"], ids=lambda c: c["name"])
def test_model_agrees_with_recorded_rtl_cycles(record, tmp_path):
    from fcircnn.gen.generate import config_fingerprint

    case = _case(record["name"])
    acc = RECORDER.load_case(case, tmp_path)
    assert config_fingerprint(acc) == record["fingerprint"], (
        f"case {case.name}: the test configuration changed since the recording; run "
        f"python bench/record_rtl_cycles.py --case {case.name}")
    perf = model_network(acc, memory=MemoryModel(burst_latency=case.latency))
    assert [la.name for la in perf.layers] == [x["name"] for x in record["layers"]]
    errors = []
    for la, rtl in zip(perf.layers, record["layers"], strict=True):
        # PE-busy cycles are exact: one beat per voxel, tap and pass.
        assert la.pe_busy_cycles == rtl["pe_busy"], la.name
        err = (la.cycles - rtl["cycles"]) / rtl["cycles"]
        if abs(err) > TOLERANCE:
            errors.append(f"{la.name}: model {la.cycles}, RTL {rtl['cycles']} ({err:+.1%})")
    assert not errors, "; ".join(errors)


#: Recorded cases the model matches to the cycle on every layer (but those named): one, two and
#: four ports, a command queue, split and quartered input boxes, carried pools, row lanes and
#: pool passes of odd maps (the fetch's set-up, the input buffer's commit, the clamped state
#: and a pool pass's unused trailing voxels are the RTL's, not fitted). ``kinds``' r_conv1 is
#: 4 cycles over (left: within 3%).
EXACT_CASES = {name: () for name in (
    "small", "fused", "dfold", "small_q2", "small_2ports", "fc_2ports", "pool_lanes",
    "fused_4ports_q2", "pool_lanes_4ports", "quarters", "carried", "rows")}
EXACT_CASES |= {"kinds": ("r_conv1",), "kinds_2ports": ("r_conv1",)}


@pytest.mark.parametrize("name", EXACT_CASES)
def test_model_is_exact_to_the_cycle_on_these_cases(name, tmp_path):
    record = next(c for c in RECORDING["cases"] if c["name"] == name)
    case = _case(name)
    perf = model_network(RECORDER.load_case(case, tmp_path),
                         memory=MemoryModel(burst_latency=case.latency))
    skip = EXACT_CASES[name]
    assert [(la.name, la.cycles, la.dma_stall_cycles) for la in perf.layers
            if la.name not in skip] == [(x["name"], x["cycles"], x["dma_stall"])
                                        for x in record["layers"] if x["name"] not in skip]


def test_constants_are_the_rtls():
    """The model's fixed latencies are the RTL's own (one set for every layer)."""
    from fcircnn.hw.common import never_elaborated
    from fcircnn.hw.dsp48e2 import DSP48E2_LATENCY
    from fcircnn.hw.pe_array import PEArray
    from fcircnn.hw.post_chain import LANE0_LATENCY, LATENCY_NO_POOL, RFFT_STAGE_LATENCY
    from fcircnn.hw.post_maxpool import LATENCY as POOL_LATENCY

    t = EngineTiming()
    assert (t.LANE0_LATENCY, t.RFFT_LATENCY) == (LANE0_LATENCY, RFFT_STAGE_LATENCY)
    assert t.post_latency == LATENCY_NO_POOL
    assert t.pool_latency == POOL_LATENCY
    # a cascade's DSP48E2 after its skew, the post-subtraction, the accumulator
    assert t.pe_latency_base == DSP48E2_LATENCY - 1 + 1 + 1
    assert t.out_valid == LATENCY_NO_POOL + 2
    for tn in (8, 16, 32, 48, 64, 80):
        conv = _Conv(plan_network(load_accelerator(MODELS / "c3d_zcu102.yaml")).layers[4]
                     .descriptor, _core(tn), 8, MemoryModel(), t)
        array = PEArray(tn, 16, 8, 1)
        never_elaborated(array)  # only its latency is read
        assert conv.pe_latency == array.latency
    del array
    gc.collect()  # collected while this test's warning filters (never_elaborated's) hold


def _core(tn):
    from fcircnn.models.config import CoreConfig

    return CoreConfig(name="c", tn=tn, tm=64, td=2, tr=7, tc=7, unroll=["tn", "tm"],
                      max_kernel=[3, 3, 3])


@pytest.mark.parametrize("config, names", [
    ("c3d_zcu102.yaml", ["conv2a", "conv4a", "conv5b", "fc6"]),
    ("r3d18_zcu102.yaml", ["l2b1_conv1", "l2b1_down", "l4b1_conv2", "gap"]),
    # four ports, weight tiles in quarters with input boxes split (FLAG_WQUARTER |
    # FLAG_ISPLIT); conv1a: output depth pairs (FLAG_DFOLD)
    ("c3d_zcu102_best.yaml", ["conv1a", "fc6", "fc7"]),
    # four ports: the residual boxes on port 3's loader
    ("r3d18_zcu102_best.yaml", ["l1b1_conv2", "l2b2_conv2", "l4b2_conv2"]),
    # four ports, input boxes in quarters (FLAG_IQUARTER): stride-2 convs and a shortcut
    ("r3d18_zcu102_best.yaml", ["l2b1_conv1", "l2b1_down", "l3b1_conv1"]),
])
def test_steady_state_shortcut_is_exact(config, names):
    acc = load_accelerator(MODELS / config)
    plan = plan_network(acc)
    for lp in plan.layers:
        if lp.layer.name not in names:
            continue
        mem = memory_of(acc)
        fast = _Conv(lp.descriptor, lp.core, acc.block_size, mem, EngineTiming())
        full = _Conv(lp.descriptor, lp.core, acc.block_size, mem, EngineTiming(),
                     extrapolate=False)
        assert fast.run() == full.run(), lp.layer.name
        assert fast.steps <= full.steps


def test_full_size_networks_are_fast_and_consistent():
    for config in ("c3d_zcu102.yaml", "r3d18_zcu102.yaml"):
        acc = load_accelerator(MODELS / config)
        t0 = time.perf_counter()
        perf = model_network(acc)
        assert time.perf_counter() - t0 < 5
        assert perf.cycles == sum(la.span_cycles for la in perf.layers)
        assert perf.dense_ops == acc.network.dense_ops
        assert 0 < perf.pe_utilization <= 1
        for la in perf.layers:
            assert la.pe_busy_cycles <= la.cycles <= la.span_cycles
            assert la.ddr_bytes > 0
        # the engine's peak: Td voxels x Tm x Tn channels x 2 ops per cycle
        core = acc.cores[-1]
        peak = 2 * core.td * core.tm * core.tn * acc.clock_mhz * 1e6 / 1e9
        assert perf.effective_gops < peak


def test_model_layer_and_layer_selection():
    acc = load_accelerator(MODELS / "c3d_zcu102.yaml")
    one = model_layer(acc, "conv3a")
    sub = model_network(acc, layers=["conv3a"])
    assert sub.layers == (one,)
    # m x n x tiles x voxels (one PE lane: the tile's 2 depths one after the other) x taps
    assert one.pe_busy_cycles == 4 * 4 * 64 * 2 * 7 * 7 * 27
    with pytest.raises(KeyError, match="has no layer nope"):
        model_network(acc, layers=["nope"])


def test_more_bandwidth_never_slows_down():
    acc = load_accelerator(MODELS / "c3d_zcu102.yaml")
    one = model_network(acc, layers=["fc6", "conv5a"])
    two = model_network(acc, layers=["fc6", "conv5a"], memory=MemoryModel(axi_ports=2))
    slow = model_network(acc, layers=["fc6", "conv5a"], memory=MemoryModel(read_latency=40))
    for a, b, c in zip(one.layers, two.layers, slow.layers, strict=True):
        assert b.cycles <= a.cycles <= c.cycles
    assert two.layers[0].cycles < one.layers[0].cycles  # fc6 is weight-bound


def test_own_weight_engine_what_if():
    """Weights on a read engine of their own: never slower, and a weight-bound layer (fc6,
    whose input and weight reads take turns on the one loader) gains."""
    acc = load_accelerator(MODELS / "c3d_zcu102.yaml")
    names = ["conv1a", "conv5a", "fc6"]
    one = model_network(acc, layers=names)
    own = model_network(acc, layers=names, memory=MemoryModel(weight_engine=True))
    for a, b in zip(one.layers, own.layers, strict=True):
        assert b.cycles <= a.cycles
        assert b.ddr_bytes == a.ddr_bytes and b.pe_busy_cycles == a.pe_busy_cycles
    assert own.layers[2].cycles < 0.9 * one.layers[2].cycles


def test_four_ports_give_the_split_halves_engines_of_their_own():
    """``memory_of`` of a three- and four-port accelerator: the input halves (three) and the
    weight halves (four) on engines of their own, a pool lane per port; on the ResNet-18 best
    core, never slower than two ports with the same flags, and the input-bound first layer
    faster (its split input boxes no longer wait for the weight loader's tiles)."""
    acc = load_accelerator(MODELS / "r3d18_zcu102_best.yaml")
    mems = {n: memory_of(acc.model_copy(update={"axi_ports": n})) for n in (2, 3, 4)}
    assert [(m.weight_engine, m.input_half_engine, m.weight_half_engine, m.pool_lanes)
            for m in mems.values()] == [(True, False, False, 2), (True, True, False, 3),
                                        (True, True, True, 4)]
    names = ["conv1", "l2b1_conv1", "l4b1_conv1", "fc"]
    two, four = (model_network(acc.model_copy(update={"axi_ports": n}), layers=names)
                 for n in (2, 4))
    for a, b in zip(two.layers, four.layers, strict=True):
        assert b.cycles <= a.cycles and b.pe_busy_cycles == a.pe_busy_cycles
    assert four.layers[0].cycles < 0.97 * two.layers[0].cycles


def test_input_quarters_free_the_stride_2_layers_of_their_input_wait():
    """On the ResNet-18 best core the compiler reads the input boxes of the stride-2 convs and
    their shortcuts in quarters (``FLAG_IQUARTER``): each is faster than with the boxes in
    halves (``FLAG_ISPLIT`` alone) for the same PE beats, l2b1_conv1 by a third."""
    acc = load_accelerator(MODELS / "r3d18_zcu102_best.yaml")
    mem = memory_of(acc)
    for lp in plan_network(acc).layers:
        if lp.layer.name not in ("l2b1_conv1", "l2b1_down", "l3b1_conv1"):
            continue
        d = lp.descriptor
        assert d.flags & FLAG_IQUARTER, lp.layer.name
        d = replace(d, flags=d.flags & ~FLAG_MINNER)  # (every m-tile reads its boxes)
        halves = replace(d, flags=d.flags & ~FLAG_IQUARTER)
        q, h = (model_descriptor(x, lp.core, acc.block_size, mem) for x in (d, halves))
        assert q["cycles"] < h["cycles"] and q["pe_busy"] == h["pe_busy"], lp.layer.name
        assert q["ddr_bytes"] == h["ddr_bytes"]
        if lp.layer.name == "l2b1_conv1":
            assert q["cycles"] < 0.67 * h["cycles"]


def test_m_tiles_innermost_read_each_input_box_once():
    """On the ResNet-18 best core the compiler walks the m-tiles of l2b1_conv1 innermost
    (``FLAG_MINNER``): the same PE beats, each input box read once instead of once per m-tile
    (the bytes read drop by the second m-tile's boxes), faster by a quarter. (Its shortcut
    l2b1_down did too until its tiles were balanced: on 7 x 7 tiles the model finds it faster
    with the m-tiles outermost.)"""
    acc = load_accelerator(MODELS / "r3d18_zcu102_best.yaml")
    mem = memory_of(acc)
    seen = set()
    for lp in plan_network(acc).layers:
        d = lp.descriptor
        if not d.flags & FLAG_MINNER:
            continue
        seen.add(lp.layer.name)
        outer = replace(d, flags=d.flags & ~FLAG_MINNER)
        i, o = (model_descriptor(x, lp.core, acc.block_size, mem) for x in (d, outer))
        assert i["cycles"] < o["cycles"] and i["pe_busy"] == o["pe_busy"], lp.layer.name
        boxes = sum(box.len[0] * box.len[1] * box.len[2] * box.groups * 16
                    for kind, box in conv_reads(outer, CoreGeometry.of(lp.core, acc.block_size))
                    if kind.startswith("input"))
        assert o["ddr_bytes"] - i["ddr_bytes"] == boxes // 2
        if lp.layer.name == "l2b1_conv1":
            assert i["cycles"] < 0.75 * o["cycles"]
    assert seen == {"l2b1_conv1"}


def test_gops_per_dsp():
    acc = load_accelerator(MODELS / "c3d_zcu102.yaml")
    perf = model_network(acc, layers=["conv5a", "fc8"], dsp=400)
    assert perf.gops_per_dsp() == pytest.approx(perf.effective_gops / 400)
    assert perf.gops_per_dsp(800) == pytest.approx(perf.effective_gops / 800)
    with pytest.raises(ValueError, match="dsp must be in"):
        gops_per_dsp(1.0, 0)
    with pytest.raises(ValueError, match="needs a DSP count"):
        model_network(acc, layers=["fc8"]).gops_per_dsp()


@pytest.mark.parametrize("kwargs, message", [
    ({"axi_ports": 0}, "axi_ports must be in 1..64, not 0"),
    ({"read_latency": -1}, "read_latency must be in"),
    ({"efficiency": 1.5}, "efficiency must be in"),
    ({"weight_engine": 1}, "weight_engine must be a bool"),
    ({"input_half_engine": 1}, "input_half_engine must be a bool"),
    ({"weight_half_engine": None}, "weight_half_engine must be a bool"),
    ({"pool_lanes": 5}, "pool_lanes must be in 1..4"),
])
def test_memory_model_rejects_bad_parameters(kwargs, message):
    with pytest.raises((TypeError, ValueError), match=message):
        MemoryModel(**kwargs)


@pytest.mark.slow
@pytest.mark.parametrize("record", RECORDING["cases"], ids=lambda c: c["name"])
def test_recording_is_current(record):
    """Re-simulate the case: the recorded counts must be what the RTL does now (else re-run
    bench/record_rtl_cycles.py)."""
    fresh = RECORDER.record_case(_case(record["name"]))
    assert fresh["layers"] == record["layers"], (
        f"RTL cycle counts of {record['name']} changed: run python bench/record_rtl_cycles.py")


def test_a_tiles_passes_are_extrapolated_exactly(tmp_path):
    # 65,536 input channels: 1,024 n-tiles a tile on a Tn = 64 core. Their passes are
    # extrapolated like tiles are (an estimate of such a network took minutes).
    text = (MODELS / "r3d18_zcu102_best.yaml").read_text().replace(
        "network: r3d18.yaml", "network: {name: wide, input: {channels: 65536, depth: 2, "
        "height: 16, width: 16}, classes: 8, layers: [{name: c1, type: conv, out_channels: 8, "
        "kernel: 1}]}")
    (tmp_path / "wide.yaml").write_text(text)
    acc = load_accelerator(tmp_path / "wide.yaml")
    for lp in plan_network(acc).layers:
        mem = memory_of(acc)
        fast = _Conv(lp.descriptor, lp.core, acc.block_size, mem, EngineTiming())
        full = _Conv(lp.descriptor, lp.core, acc.block_size, mem, EngineTiming(),
                     extrapolate=False)
        assert fast.run() == full.run(), lp.layer.name
        assert full.steps >= lp.descriptor.n_tiles
        if lp.descriptor.n_tiles > 1:
            assert fast.steps < lp.descriptor.n_tiles / 20, (lp.layer.name, fast.steps)
