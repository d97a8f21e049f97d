"""Three and four AXI ports on the accelerator top level in cocotb, bit-exact under random
back-pressure on every channel of every port.

With three ports (``axi_ports: 3``) port 2 has a loader of its own for the upper halves of
split input boxes (``FLAG_ISPLIT``); with four, port 3 one for the second halves of split
weight tiles (``FLAG_WSPLIT``), so a split no longer costs the input or the weight loader
anything (:meth:`~fcircnn.arch.ports.PortMap.loader_reads`). The network is the fused-pool one
of ``tests/conftest.py`` (``FUSED_NET``, ``Tn = Tm = 32``, the depth loop unrolled): the
compiler splits f1's input boxes (its two input slot groups) and the weight tiles of f2 (with
four ports) and fc, as the performance model finds them faster so; the tests check the flags,
that every port reads exactly its share (from the DMA plan of each read kind), and the
outputs, layer by layer, against the golden model. Cycles are recorded as ``fused_4ports_q2``
(``bench/record_rtl_cycles.py``).

Every port is also a pool-pass lane: the pool-lanes network (three slot groups) runs its pool
pass on four lanes, the fourth sitting the step out.
"""

import pytest
from conftest import (
    POOL_LANES_NET,
    compile_saved,
    write_fused_accelerator,
    write_small_accelerator,
)
from engine_bench import check_run, weight_bytes

from fcircnn.arch.descriptor import FLAG_ISPLIT, FLAG_WSPLIT, OP_POOL
from fcircnn.arch.registers import ERROR_WRITE_WINDOW

#: One worker runs this module (its Verilator builds): see pyproject.toml.
pytestmark = pytest.mark.xdist_group("accelerator_ports")

_SPLITS = FLAG_WSPLIT | FLAG_ISPLIT


def _run_fused(tmp_path, run_image, ports, queue, seed):
    acc, image, root = compile_saved(
        tmp_path, lambda f: write_fused_accelerator(f, axi_ports=ports, dma_queue=queue), 5)
    doc = run_image(acc, root, "ports", backpressure=0.3, latency=6, seed=seed)
    check_run(doc, image)
    return acc, image, doc["read_bytes"]


@pytest.mark.slow  # suite budget: the FC test's c1 and fc layers run the same splits on four
# ports with a queue (tests/hw/test_accelerator_fc.py), the trim test port 3's residual boxes
def test_four_ports_with_a_queue_are_bit_exact_and_read_their_share(tmp_path, run_image):
    acc, image, read = _run_fused(tmp_path, run_image, 4, 2, seed=41)
    flags = {lp.layer.name: lp.descriptor.flags & _SPLITS for lp in image.plan.layers}
    assert flags == {"f1": FLAG_ISPLIT, "f2": FLAG_WSPLIT, "fc": FLAG_WSPLIT}
    upper, halves = weight_bytes(acc, image, "input_half"), weight_bytes(acc, image,
                                                                        "weight_half")
    assert upper > 0 and halves > 0
    # port 1 every whole weight tile and first half, port 2 the upper input halves, port 3
    # the second weight halves; port 0 the rest (descriptors, records, lower halves, ...)
    assert read[1:] == [weight_bytes(acc, image), upper, halves]
    assert read[0] > 0


@pytest.mark.slow  # the same mechanisms, one command at a time: a second Verilator build
def test_four_ports_one_command_at_a_time_are_bit_exact(tmp_path, run_image):
    _run_fused(tmp_path, run_image, 4, 1, seed=43)


@pytest.mark.slow  # three ports: the weight halves back on the input loader
def test_three_ports_are_bit_exact_and_read_their_share(tmp_path, run_image):
    acc, image, read = _run_fused(tmp_path, run_image, 3, 2, seed=47)
    flags = {lp.layer.name: lp.descriptor.flags & _SPLITS for lp in image.plan.layers}
    assert flags["f1"] & FLAG_ISPLIT and flags["fc"] & FLAG_WSPLIT
    assert read[1:] == [weight_bytes(acc, image), weight_bytes(acc, image, "input_half")]


@pytest.mark.slow  # suite budget: the two-lane pool pass (test_accelerator_pool_lanes.py) is
# the same lane logic; this adds lanes 2 and 3 (and a lane sitting the step out)
def test_four_pool_lanes_are_bit_exact_under_backpressure(tmp_path, run_image):
    acc, image, root = compile_saved(
        tmp_path, lambda f: write_small_accelerator(f, tn=32, tm=32, net=POOL_LANES_NET,
                                                    axi_ports=4), 31)
    pools = [d for lp in image.plan.layers for d in lp.descriptors if d.op == OP_POOL]
    assert pools and max(-(-d.in_slots // 8) for d in pools) == 3  # 3 groups on 4 lanes
    check_run(run_image(acc, root, "lanes", backpressure=0.3, latency=4, seed=37), image)


@pytest.mark.slow  # the four-lane build of the test above, and a run of the damaged pool pass
def test_a_pool_pass_pooling_more_than_its_write_box_ends_on_every_lane(tmp_path, run_image):
    """The hang the four-port fuzzing campaign found (bench/README.md, "Corrupted images"): a
    pool pass whose input depth was damaged to 26,839 pools far more voxels than its write
    boxes take. Each lane drops its surplus once its write box is done, so its reads drain
    and run on to the end of the input's region, where they are refused (error 2); nothing
    is moved outside the windows and the clean image then runs bit-exact."""
    acc, image, root = compile_saved(
        tmp_path, lambda f: write_small_accelerator(f, tn=32, tm=32, net=POOL_LANES_NET,
                                                    axi_ports=4), 31)
    k, pool = next((k, d) for k, d in enumerate(image.plan.descriptors) if d.op == OP_POOL)
    deep = [26_839, *pool.in_shape[1:]]
    doc = run_image(acc, root, "lanes-deep", backpressure=0.1, seed=5,
                    fuzz={"runs": 0, "replay": [{"index": k, "field": "in_shape",
                                                 "value": deep}],
                          "timeout_cycles": 4 * 4_868,  # the recorded clean run's, twice
                          "address_width": acc.address_width})
    assert doc["fuzz"]["outcomes"] == {"error 2": 1}, doc["fuzz"]["log"]
    assert doc["fuzz"]["outside_window"] == 0
    check_run(doc, image)


@pytest.mark.slow  # the four-lane build of the tests above
def test_a_pool_lane_s_write_past_the_window_is_refused_on_its_port(tmp_path, run_image):
    """Issue 46's window test on a write port other than 0: the pool pass moves its three slot
    groups on lanes 0, 1 and 2 at once, each writing on its own port. Its output base moved so
    that only lane 2's pooled map (port 2's writes) crosses the top of the write window: that
    burst is refused (error 6 at an address among port 2's bytes), nothing is written outside
    the windows, and the next start runs bit-exact."""
    acc, image, root = compile_saved(
        tmp_path, lambda f: write_small_accelerator(f, tn=32, tm=32, net=POOL_LANES_NET,
                                                    axi_ports=4), 31)
    k, pool = next((k, d) for k, d in enumerate(image.plan.descriptors) if d.op == OP_POOL)
    _, (_, whi) = image.plan.windows
    box = 16 * pool.out_shape[0] * pool.out_shape[1] * pool.out_shape[2]  # one group's map
    group = pool.out_stride[0]
    assert group >= box and box >= 32
    half = box // 32 * 16  # whole beats
    base = whi + 1 - 2 * group - half  # lane 1's map ends inside, lane 2's crosses the top
    assert base + group + box <= whi + 1 < base + 2 * group + box
    moved = dict(index=k, field="out_base", value=base, code=ERROR_WRITE_WINDOW, lo=whi + 1,
                 hi=base + 2 * group + box)
    doc = run_image(acc, root, "lane2-write-hi", moved=moved, backpressure=0.2, seed=61)
    assert doc["fault_run"]["status"] == "error"
    check_run(doc, image)
