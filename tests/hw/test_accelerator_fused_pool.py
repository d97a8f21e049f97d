"""Fused pools: the layer engine pooling each output tile in the drain (one descriptor with
``FLAG_POOL``, no pool pass), run on the accelerator top level in cocotb, bit-exact.

The network (``FUSED_NET`` of ``tests/conftest.py``) has the pools C3D fuses, (1,2,2) and
(2,2,2), on a core with ``Tn = Tm = 32`` (two slot groups interleaved in CMaxPool), an
output-channel count that leaves a partial m-tile (48 = 32 + 16: one slot group in the last
m-tile), edge tiles of half the tile's size (6 = 4 + 2 over ``Tr = Tc = 4``) and several
tiles per axis, with the PE array's depth unrolled (two lanes) and not (one lane stepping
through the depth). The same network loads only the input slot groups a layer has: f1's 3
channels, depth taps folded into 24 channels, are two groups in one n-tile of the core's
four blocks, f2's 48 channels an n-tile of two groups and one of one. The compiled plan is
checked to be fused, so the test cannot fall back to pool passes unnoticed.

The two-lane core runs on two AXI ports: its FC layer (18 taps of 8 beats a weight tile, 36
input beats a pass) is weight-bound, so the compiler splits its weight tiles over both ports
(``FLAG_WSPLIT``: the weight loader reads the first half of each tile on ``m_axi1``, the input
loader the second on ``m_axi``, both filling the weight buffer at once). f1 walks its two
m-tiles innermost (``FLAG_MINNER``: each input box read once for both) and splits its input
boxes (``FLAG_ISPLIT``: its two input slot groups, the lower read by the
input loader on ``m_axi``, the upper by the weight loader on ``m_axi1`` before the weight tile,
both filling the input buffer at once); f2 keeps whole tiles and boxes (its last n-tile has one
slot group: its boxes cannot split). A read error on ``m_axi1`` (the first half of an fc weight
tile) ends the run with its address, and the next start runs the layer again.

Every run is a slow test (a Verilator build per core; the one-lane core's: see ``compiled``);
the default suite checks both cores' plans here.
"""

import pytest
from conftest import compile_saved
from engine_bench import check_run, weight_bytes

from fcircnn.arch.descriptor import FLAG_ISPLIT, FLAG_MINNER, FLAG_POOL, FLAG_WSPLIT, OP_CONV
from fcircnn.arch.geometry import CoreGeometry
from fcircnn.arch.walk import conv_reads

#: One worker runs this module (its Verilator build and shared runs): see pyproject.toml.
pytestmark = pytest.mark.xdist_group("accelerator_fused")


#: The two cores: unrolled depth lanes and ports of each.
CORES = {"two-lanes-2ports": (("td", "tn", "tm"), 2), "one-lane": (("tn", "tm"), 1)}


@pytest.fixture(scope="module")
def cores(tmp_path_factory, fused_accelerator):
    """``cores(name)``: the network compiled for the core ``name`` of :data:`CORES`, once per
    module: ``(acc, image, folder)``."""
    done = {}

    def get(name):
        if name not in done:
            unroll, ports = CORES[name]
            done[name] = compile_saved(tmp_path_factory.mktemp("fused"),
                                       lambda folder: fused_accelerator(
                                           folder, unroll=unroll, axi_ports=ports), 5)
        return done[name]
    return get


# The one-lane core's runs were slow tests before the two-lane core's (a second Verilator build
# and a 19,000-cycle run): its drain's walk through the depths, pooling the partial sums
# a word per depth, is checked beat for beat under stalls by test_engine_drain.py
# (test_a_pool_on_the_partial_sums_with_one_lane_steps_through_the_depths), the pool's
# arithmetic by the two-lane core's runs here, and the one-lane engine by test_accelerator.py.
@pytest.fixture(scope="module", params=[
    "two-lanes-2ports", pytest.param("one-lane", marks=pytest.mark.slow)])
def compiled(request, cores):
    return cores(request.param)


@pytest.fixture(scope="module")
def backpressured(compiled, run_image):
    """The image run with 30% random back-pressure on every AXI channel and a 6-cycle read
    latency (once per core: the tests below check the same run)."""
    acc, _, root = compiled
    return run_image(acc, root, "backpressure", backpressure=0.3, latency=6, seed=7)


@pytest.mark.parametrize("core", CORES)
def test_pools_are_fused(core, cores):
    _, image, _ = cores(core)
    pooled = [lp for lp in image.plan.layers if lp.layer.pool is not None]
    assert [lp.layer.name for lp in pooled] == ["f1", "f2"]
    for lp in pooled:
        (d,) = lp.descriptors
        assert d.op == OP_CONV and d.flags & FLAG_POOL
        assert d.out_shape == lp.layer.out_shape and d.conv_shape == lp.layer.conv_shape
    assert not any(r.name.endswith(".conv") for r in image.plan.regions)


@pytest.mark.slow  # suite budget: a Verilator build of its own, 1.5 to 4 minutes cold
def test_fused_pools_are_bit_exact_under_backpressure(compiled, backpressured):
    check_run(backpressured, compiled[1])


@pytest.mark.slow  # the same outputs with other timing: a minute of simulation per core
def test_fused_pools_are_bit_exact_without_backpressure(compiled, run_image):
    acc, _, root = compiled
    check_run(run_image(acc, root, "plain"), compiled[1])


@pytest.mark.slow  # suite budget: a Verilator build of its own, 1.5 to 4 minutes cold
def test_reads_split_over_two_ports_where_they_bind(compiled, backpressured):
    acc, image, _ = compiled
    flags = {lp.layer.name: lp.descriptor.flags & (FLAG_WSPLIT | FLAG_ISPLIT | FLAG_MINNER)
             for lp in image.plan.layers}
    # (on the two-lane core f1 reads each input box once for both its m-tiles, FLAG_MINNER,
    # and split; the one-lane core's f1, compute-bound, keeps its m-tiles outermost)
    assert flags == ({"f1": FLAG_ISPLIT | FLAG_MINNER, "f2": 0, "fc": FLAG_WSPLIT}
                     if acc.axi_ports == 2 else {"f1": 0, "f2": 0, "fc": 0})
    check_run(backpressured, compiled[1])
    read = backpressured["read_bytes"]
    assert len(read) == acc.axi_ports
    if acc.axi_ports == 2:
        # port 1: every whole weight tile and first half, and the upper slot groups of f1's
        # input boxes (the voxels inside the map: padding is not read; once per tile for both
        # m-tiles); port 0 the rest
        halves = weight_bytes(acc, image, "weight_half")
        upper = weight_bytes(acc, image, "input_half")
        assert halves > 0 and upper > 0
        assert read[1] == weight_bytes(acc, image) + upper
        assert read[0] > halves + upper


@pytest.mark.slow  # suite budget: a Verilator build of its own, 1.5 to 4 minutes cold
def test_a_failing_weight_read_on_the_second_port_ends_the_run_with_its_address(
        cores, run_image, tmp_path):
    """The fc layer alone (its input pre-filled with the golden map): a read error on the first
    half of its first weight tile, which only the weight loader reads (on ``m_axi1``), ends
    the run with that address; the next start runs it again, bit-exact."""
    from fcircnn.gen.select import select_layers

    acc, image, _ = cores("two-lanes-2ports")
    sub = select_layers(image, ["fc"])
    sub.save(tmp_path / "image")
    (lp,) = sub.plan.layers
    d = lp.descriptor
    assert d.flags & FLAG_WSPLIT
    first = next(box for kind, box in conv_reads(d, CoreGeometry.of(lp.core, acc.block_size))
                 if kind == "weights")
    half = d.weight_tile_bytes // 2
    doc = run_image(acc, tmp_path, "two-ports-fault", backpressure=0.2, seed=3,
                    inject_error={"addr": first.addr, "size": half, "kind": "read"})
    fault = doc["fault_run"]
    assert fault["status"] == "error" and fault["interrupt"] and fault["fault_hits"] > 0
    assert fault["error_code"] == 3 and first.addr <= fault["error_addr"] < first.addr + half
    assert doc["read_bytes"][1] > 0
    check_run(doc, sub)  # the next start runs it again, bit-exact
