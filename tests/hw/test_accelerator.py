"""The accelerator top level (:mod:`fcircnn.hw.accelerator`) running compiled networks in cocotb.

One Verilator build of the small test core (``tests/conftest.py``: Tn = Tm = 16, B = 8, Td = 2,
Tr = Tc = 4, unroll tn and tm: one PE lane stepping through the tile's depth) runs the small
network, which has every layer kind of the engine: conv + CBN +
CReLU, a residual add with a (2,2,2) pool pass, a stride-(1,2,2) conv with a partial
output-channel tile, global average pooling and an FC layer. The first conv runs with its
depth taps and three row copies of each folded into input channels (3 channels, one block of
the core's two, become nine blocks: a 1x1x3 kernel over five n-tiles, 15 PE steps instead of
18). Every layer's output is compared bit for bit with the
golden integer contract (``expected`` of the compiled image) by
:mod:`fcircnn.sim.tb_accelerator`. Two AXI ports (the weight tiles on ``m_axi1``, split
over both ports with ``FLAG_WSPLIT``, and a failing read on ``m_axi1``) run in
``test_accelerator_fused_pool.py``.
"""

from pathlib import Path

import pytest
from conftest import compile_saved

from fcircnn.arch.descriptor import (
    ADDRESS_FIELDS,
    DESCRIPTOR_BYTES,
    FLAG_IQUARTER,
    FLAG_ISPLIT,
    FLAG_POOL,
    FLAG_RESIDUAL,
    FLAG_ROWLANES,
    FLAG_SPREAD,
    OP_POOL,
    STREAM_REGIONS,
    flags_fault,
    used_regions,
)
from fcircnn.arch.geometry import PAGE_BYTES
from fcircnn.arch.registers import (
    ERROR_ABORTED,
    ERROR_BAD_DESCRIPTOR,
    ERROR_READ_WINDOW,
    ERROR_WRITE_WINDOW,
)

#: One worker runs this module (its Verilator build and shared runs): see pyproject.toml.
pytestmark = pytest.mark.xdist_group("accelerator_small")


@pytest.fixture(scope="module")
def compiled(tmp_path_factory, small_accelerator):
    acc, image, root = compile_saved(tmp_path_factory.mktemp("accel"), small_accelerator, 3)
    first = image.plan.layers[0]
    assert first.folded and (first.rows, first.descriptor.kernel) == (3, (1, 1, 3))
    assert first.descriptor.n_tiles == 5
    return acc, image, root


def _check(doc, image):
    assert doc["status"] == "done" and doc["passed"]
    names = [layer["name"] for layer in doc["layers"]]
    assert names == [lp.layer.name for lp in image.plan.layers]
    for layer in doc["layers"]:
        assert layer["passed"] and layer["mismatches"] == 0, layer
        assert 0 < layer["pe_busy"] < layer["cycles"]
    assert doc["pe_busy"] <= doc["total_cycles"]


@pytest.fixture(scope="module")
def plain(compiled, run_image):
    """The image run once without back-pressure (compared against by the relocation tests)."""
    return run_image(compiled[0], compiled[2], "plain")


def test_every_layer_kind_is_bit_exact(compiled, plain):
    doc = plain
    _check(doc, compiled[1])
    c1 = doc["layers"][0]
    # 3x3x3 conv on 4x4 tiles of a core that takes a beat a cycle: the PE array is busy most
    # of the time (loads overlap compute).
    assert c1["pe_busy"] / c1["cycles"] > 0.8


@pytest.mark.parametrize("base", [0x0, 0x203000])
def test_the_same_image_runs_at_another_base(compiled, run_image, plain, base):
    # The driver places an image compiled for 0x10000 at another page-aligned base (as on a
    # board, where the buffer's address is known only at run time): bit-exact, and the same
    # cycles (bursts split at the same 4 KB boundaries).
    doc = run_image(compiled[0], compiled[2], f"at-{base:#x}", relocate=base)
    _check(doc, compiled[1])
    assert [la["cycles"] for la in doc["layers"]] == [la["cycles"] for la in plain["layers"]]


def test_random_axi_backpressure_and_latency(compiled, run_image):
    _check(run_image(compiled[0], compiled[2], "backpressure", backpressure=0.3, latency=6,
                     seed=7), compiled[1])


@pytest.mark.parametrize("kind, region", [("read", "c2.weights"), ("write", "c1.output")])
def test_injected_axi_error_sets_error_and_interrupt_then_restarts(compiled, run_image, kind,
                                                                   region):
    image = compiled[1]
    r = image.region(region)
    doc = run_image(compiled[0], compiled[2], f"fault-{kind}",
                    inject_error={"addr": r.base, "size": r.size, "kind": kind})
    fault = doc["fault_run"]
    assert fault["status"] == "error" and fault["interrupt"] and fault["fault_hits"] > 0
    assert fault["error_code"] == (3 if kind == "read" else 7)
    assert r.base <= fault["error_addr"] < r.end
    _check(doc, image)  # the next start runs the whole list again, bit-exact


@pytest.mark.parametrize(("kind", "end"), [
    ("write", "lo"),
    # suite budget: the same check, the other ends (every run also checks that no access
    # left the window, in sim.tb_accelerator)
    pytest.param("read", "lo", marks=pytest.mark.slow),
    pytest.param("write", "hi", marks=pytest.mark.slow),
])
def test_a_window_one_page_short_stops_the_run_there_then_restarts(compiled, run_image, kind,
                                                                   end):
    """The driver's windows one page short at one end (the descriptors' page for reads, the
    cycle entries' or the last output's page for writes), under back-pressure: the run stops
    with the direction's code at an address in that page, the memory model saw no access
    outside the window; the next run, with the image's own windows, is bit-exact (every run
    checks that no access left the window: sim.tb_accelerator)."""
    doc = run_image(compiled[0], compiled[2], f"window-{kind}-{end}", backpressure=0.2,
                    seed=11, window={"kind": kind, "end": end})
    fault = doc["fault_run"]
    assert fault["error_code"] == (2 if kind == "read" else 6)
    assert not fault["outside_window"] and not doc["outside_window"]
    if (kind, end) == ("read", "lo"):
        assert fault["error_addr"] == compiled[1].desc_ptr  # the first fetch
    _check(doc, compiled[1])


def _abort_points(plain, every_layer):
    """Cycles after the start to abort at: during the first fetch, then the middle of the
    layer with a pool pass (or of every layer), as the run without back-pressure times them
    (a run under back-pressure is only slower)."""
    starts, at = [], 0
    for layer in plain["layers"]:
        starts.append((at, layer["cycles"], layer["descriptors"]))
        at += layer["cycles"]
    picked = starts if every_layer else [next(s for s in starts if s[2] > 1)]
    return [5] + [start + cycles // 2 for start, cycles, _ in picked]


@pytest.mark.parametrize("every_layer", [
    False,
    pytest.param(True, marks=pytest.mark.slow),
])
def test_abort_stops_the_run_then_restarts(compiled, run_image, plain, every_layer):
    """CTRL.abort (``Driver.abort``) during the first descriptor fetch and in the middle of
    the layer with a pool pass (of every layer under ``slow``), under back-pressure: each
    run ends idle with ERROR_ABORTED and the interrupt, at an address inside the image's
    windows, with no access outside them, and is idle within a few hundred cycles; a run whose
    driver timeout is half its length raises DriverTimeout saying it was aborted; the run
    after all of them is bit-exact (sim.tb_accelerator)."""
    points = _abort_points(plain, every_layer)
    doc = run_image(compiled[0], compiled[2], f"abort-{len(points)}", backpressure=0.2,
                    seed=13, abort=points, timeout_abort_cycles=plain["total_cycles"] // 2,
                    far_desc_ptr=compiled[0].address_width)
    # (and a DESC_PTR past the address space is refused unfetched: sim.tb_accelerator)
    assert doc["far_desc_ptr_run"]["error_code"] == 2
    runs = doc["abort_runs"]
    assert [r["after"] for r in runs] == points
    for r in runs:
        assert r["status"] == "error" and r["error_code"] == ERROR_ABORTED and r["interrupt"]
        assert not r["outside_window"]
        assert r["stop_cycles"] < 500, r  # 50 to 92 measured: the bursts in flight, the polls
    assert "aborted: the engine stopped" in doc["timeout_run"]
    _check(doc, compiled[1])


@pytest.mark.slow
def test_corrupted_images_end_and_stay_inside_the_windows(compiled, run_image, plain):
    """A fuzzing campaign (:mod:`fcircnn.sim.fuzz`; ``bench/bench_fuzz.py`` runs the long
    one): 40 images with damaged descriptor lists, each run with the image's windows and
    aborted by the driver after twice the clean run; every run ends (no abort that does not
    stop the engine), the memory model sees no access outside the windows, and the clean
    image then runs bit-exact."""
    doc = run_image(compiled[0], compiled[2], "fuzz", backpressure=0.1, seed=17,
                    fuzz={"runs": 40, "seed": 3, "timeout_cycles": 2 * plain["total_cycles"],
                          "address_width": compiled[0].address_width})
    fuzz = doc["fuzz"]
    assert fuzz["runs"] == 40 and "hung" not in fuzz["outcomes"], fuzz["log"][-1]
    assert fuzz["outside_window"] == 0
    assert len(fuzz["outcomes"]) >= 3  # done, aborted and errors of several kinds
    _check(doc, compiled[1])


@pytest.mark.slow
def test_the_hangs_the_fuzzing_campaign_found_are_aborted(compiled, run_image, plain):
    """The two hangs the first campaigns found (bench/README.md, "Corrupted images"), each a
    write box larger than what its datapath produces, which waits for beats that never come
    (inside its region: the region check does not see it). Run 21 of ``bench/bench_fuzz.py
    --case small`` (seed 1: flipped bits of c3's descriptor, 16,386 m-tiles and a far input
    step); and a pool pass's output height of 260 instead of 4 (a write box 65 times the
    pooled read; run 266 of the second campaign, whose draws the descriptor's region fields
    have since moved), replayed as that field. Both hung for good; both are now aborted after
    the driver's timeout. And the opposite of the second, found by the four-port campaign of
    2026-12-07: a pool pass's input depth of 26,839 instead of 2, whose pooled voxels
    outnumber its write box (their surplus used to stall its reads for good); now dropped,
    its reads run on to the end of its input's region, where they are refused (error 2)."""
    k, pool = next((k, d) for k, d in enumerate(compiled[1].plan.descriptors)
                   if d.op == OP_POOL)
    assert pool.out_shape[1] == 4
    tall = [pool.out_shape[0], 260, pool.out_shape[2]]
    deep = [26_839, *pool.in_shape[1:]]
    doc = run_image(compiled[0], compiled[2], "fuzz-hangs", backpressure=0.1, seed=1,
                    fuzz={"runs": 22, "seed": 1, "only": [21],
                          "replay": [{"index": k, "field": "out_shape", "value": tall},
                                     {"index": k, "field": "in_shape", "value": deep}],
                          "timeout_cycles": 2 * 12_843,  # the recorded clean run's, as there
                          "address_width": compiled[0].address_width})
    assert doc["fuzz"]["outcomes"] == {"aborted": 2, "error 2": 1}, doc["fuzz"]["log"]
    assert doc["fuzz"]["outside_window"] == 0
    _check(doc, compiled[1])


def test_a_descriptor_whose_flags_do_not_go_together_is_refused_then_restarts(compiled,
                                                                              run_image):
    # The second descriptor with FLAG_IQUARTER but not FLAG_ISPLIT (which the compiler never
    # writes and LayerDescriptor refuses): the engine stops with ERROR_BAD_DESCRIPTOR at that
    # descriptor's address, before starting it; the unchanged list then runs bit-exact.
    image = compiled[1]
    d = image.descriptors[1]
    flags = (d.flags | FLAG_IQUARTER) & ~FLAG_ISPLIT
    assert flags_fault(flags, d.op, 1, 1, d.pool_window, d.tile[0], d.tiles[0])
    doc = run_image(compiled[0], compiled[2], "bad-descriptor",
                    bad_descriptor={"index": 1, "flags": flags})
    fault = doc["fault_run"]
    assert fault["status"] == "error" and fault["interrupt"]
    assert (fault["error_code"], fault["error_addr"]) == (ERROR_BAD_DESCRIPTOR,
                                                          image.desc_ptr + DESCRIPTOR_BYTES)
    assert [la["finished"] for la in fault["layers"][:2]] == [True, False]
    _check(doc, image)


def _region_probe(image, probe):
    """Descriptor fields changed so that one stream leaves its region while staying inside
    the image's windows: ``(descriptor, field, value, error code, error address range)`` on
    the small image (its maps one after another, the first layer's input five pages, each
    later map one, the write window from the cycles entries to the end)."""
    plan = image.plan
    (_, top), _ = plan.windows
    d0, d1 = plan.descriptors[:2]
    assert (d0.in_pages, d0.out_pages, d1.in_pages) == (5, 1, 1) and d0.tiles[0] == 2
    assert d1.in_base == d0.out_base and d0.out_step[0] < PAGE_BYTES
    far = (d0.out_step[0] + PAGE_BYTES, *d0.out_step[1:])
    return {
        # the first layer's input one page short: its reads of the fifth page
        "input-pages": (0, "in_pages", 4, ERROR_READ_WINDOW,
                        (d0.in_base + 4 * PAGE_BYTES, d0.in_base + 5 * PAGE_BYTES)),
        # a depth-tile step a page too long: the second depth tile's writes land in the maps
        # after its own
        "output-step": (0, "out_step", list(far), ERROR_WRITE_WINDOW,
                        (d0.out_base + PAGE_BYTES, top + 1)),
        # the same on c2's input (c1's map): its second depth tile reads the maps after it
        "input-step": (1, "in_step", [d1.in_step[0] + PAGE_BYTES, *d1.in_step[1:]],
                       ERROR_READ_WINDOW, (d1.in_base + PAGE_BYTES, top + 1)),
    }[probe]


@pytest.mark.parametrize("probe", [
    "input-pages",
    pytest.param("output-step", marks=pytest.mark.slow),
    pytest.param("input-step", marks=pytest.mark.slow),
])
def test_a_stream_leaving_its_region_is_refused_at_that_burst_then_restarts(
        compiled, run_image, probe):
    """Issue 46's descriptor regions: a corrupted page count or tile step walks a stream out
    of the region the compiler gave it, into another map inside the windows; the first burst
    outside the region is not issued, the run ends with the direction's code at that burst's
    address, nothing leaves the windows, and the unchanged image then runs bit-exact."""
    acc, image, root = compiled
    index, field, value, code, (lo, hi) = _region_probe(image, probe)
    moved = {"index": index, "field": field, "value": value, "code": code, "lo": lo, "hi": hi}
    doc = run_image(acc, root, f"region-{probe}", moved=moved, backpressure=0.2, seed=67)
    fault = doc["fault_run"]  # its code and address: checked by the testbench
    assert fault["status"] == "error" and fault["error_code"] == code
    assert [la["finished"] for la in fault["layers"][:index + 1]] == [True] * index + [False]
    _check(doc, image)


def test_a_stream_without_a_region_is_refused_before_any_transfer(compiled, run_image):
    """A descriptor whose op reads weights with ``weight_pages = 0`` is refused at DISPATCH
    (ERROR_BAD_DESCRIPTOR at its address), before it moves a byte; the list then runs."""
    acc, image, root = compiled
    at = image.desc_ptr + DESCRIPTOR_BYTES
    moved = {"index": 1, "field": "weight_pages", "value": 0, "code": ERROR_BAD_DESCRIPTOR,
             "lo": at, "hi": at + 1}
    doc = run_image(acc, root, "region-none", moved=moved)
    fault = doc["fault_run"]
    assert [la["finished"] for la in fault["layers"][:2]] == [True, False]
    _check(doc, image)


def test_the_sequencer_refuses_row_lanes_a_core_cannot_run_and_far_addresses(
        tmp_path, small_accelerator):
    # The rule the sequencer's DISPATCH applies (Accelerator._refused), on the small core (one
    # lane: no row lanes) and the rows test core (four lanes, row lanes built): FLAG_ROWLANES
    # only where the tile depth is 4 / R for R = 2 or 4; FLAG_SPREAD only on a core built
    # with the spreading read, never with FLAG_ISPLIT; a core that does not exist, always;
    # an address past the address space, always.
    from amaranth.hdl import Module, Signal
    from amaranth.sim import Simulator
    from conftest import write_rows_accelerator

    from fcircnn.arch.descriptor import descriptor_layout
    from fcircnn.hw.accelerator import Accelerator
    from fcircnn.hw.common import never_elaborated
    from fcircnn.hw.layer_engine import LayerEngine
    from fcircnn.models.config import load_accelerator

    engines = []
    for writer, folder in ((small_accelerator, "small"), (write_rows_accelerator, "rows")):
        acc = load_accelerator(writer(tmp_path / folder))
        engines.append(LayerEngine.from_config(acc, acc.cores[0]))
    # and a core built with the spreading read (FLAG_SPREAD): the time-domain test core's
    acc = load_accelerator(Path(__file__).parent / "configs" / "time_domain_acc.yaml")
    engines.append(LayerEngine.from_config(acc, acc.cores[0]))
    assert [e.lanes for e in engines] == [1, 4, 2] and engines[1].geometry.row_lanes
    assert engines[2].geometry.spread and not engines[0].geometry.spread
    m = Module()
    desc = Signal(descriptor_layout())
    refused = Signal()
    m.d.comb += refused.eq(Accelerator._refused(desc, engines, 32))
    # (core, flags, tile depth): refused?
    cases = [((0, 0, 2), False), ((0, FLAG_ROWLANES, 2), True), ((0, FLAG_ROWLANES, 1), True),
             ((1, 0, 4), False), ((1, FLAG_ROWLANES, 2), False), ((1, FLAG_ROWLANES, 1), False),
             ((1, FLAG_ROWLANES, 4), True), ((1, FLAG_ROWLANES, 3), True),
             ((0, FLAG_SPREAD, 2), True), ((2, FLAG_SPREAD, 2), False),
             ((2, FLAG_SPREAD | FLAG_ISPLIT, 2), True), ((3, 0, 2), True)]

    async def bench(ctx):
        ctx.set(desc.m_tiles, 1)
        ctx.set(desc.n_tiles, 1)
        ctx.set(desc.pool_window, [1, 1, 1])
        ctx.set(desc.tiles, [1, 2, 2])
        for name in STREAM_REGIONS:
            ctx.set(getattr(desc, f"{name}_pages"), 1)
        for (core, flags, depth), expected in cases:
            ctx.set(desc.core, core)
            ctx.set(desc.flags, flags)
            ctx.set(desc.tile, [depth, 4, 4])
            assert ctx.get(refused) == expected, (core, hex(flags), depth)
        # An address field past the 32-bit address space (the DMAs would take it modulo
        # 2**32): refused, whichever field; the last address of the space is not.
        ctx.set(desc.core, 0)
        ctx.set(desc.flags, 0)
        ctx.set(desc.tile, [2, 4, 4])
        for name in ADDRESS_FIELDS:
            for value, expected in ((2**32 - 16, False), (2**32, True), (2**63, True)):
                ctx.set(getattr(desc, name), value)
                assert ctx.get(refused) == expected, (name, hex(value))
            ctx.set(getattr(desc, name), 0)
        # A stream its op uses without a region (0 pages): refused; one it does not use
        # (the residual without FLAG_RESIDUAL, the weights and posts of a pool pass): not.
        for op, flags in ((0, 0), (0, FLAG_RESIDUAL), (OP_POOL, FLAG_POOL)):
            ctx.set(desc.op, op)
            ctx.set(desc.flags, flags)
            used = used_regions(op, flags)
            for name in STREAM_REGIONS:
                ctx.set(getattr(desc, f"{name}_pages"), 0)
                assert ctx.get(refused) == bool(used[name]), (op, hex(flags), name)
                ctx.set(getattr(desc, f"{name}_pages"), 1)

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    never_elaborated(*engines)  # built for their parameters only


@pytest.mark.slow  # suite budget (55 s); every unit's cocotb test runs on Icarus too
def test_icarus_runs_the_top_level_bit_exact(compiled, run_image, tmp_path):
    """The second simulator: the stride-2 conv, GAP and FC layers (from one start, inputs
    pre-filled with the golden maps) on Icarus, whose time-0 evaluation of combinational logic
    needs :func:`fcircnn.sim.runner.icarus_time_zero_fix` (applied by ``run_cocotb``)."""
    from fcircnn.gen.select import select_layers
    from fcircnn.sim.runner import require_simulator

    require_simulator("icarus")
    acc, image, _ = compiled
    sub = select_layers(image, ["c3", "gap", "fc"])
    sub.save(tmp_path / "image")
    doc = run_image(acc, tmp_path, "icarus", simulator="icarus", timeout_cycles=20_000, seed=2,
                    backpressure=0.2)
    _check(doc, sub)
