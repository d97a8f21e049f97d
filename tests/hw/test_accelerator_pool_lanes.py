"""Two-lane pool passes on the accelerator top level in cocotb (``axi_ports: 2``,
:attr:`~fcircnn.arch.ports.PortMap.pool_lanes`): a pool pass moves two slot groups at once,
the second read on ``m_axi1``, pooled by a CMaxPool of its own and written by ``m_axi1``'s
write engine; bit-exact under random AXI back-pressure on both ports, and a failing write on
the second port ends the run with its address.

The network (``tests/conftest.py``, ``POOL_LANES_NET``): ``p1`` (3 -> 48 channels, three slot
groups: one step of two lanes, then the last group on lane 0 alone) pools ResNet-18 conv1's way
(window 3, stride 2, padding 1) on a map of odd width (a pool pass); ``p2``, a 1x1x1 stride-2
conv, reads only the planes and rows it uses
(:func:`~fcircnn.models.placement.subsample_steps`); an fc layer ends it. Its cycles are
recorded as ``pool_lanes`` (``bench/record_rtl_cycles.py``).
"""

import pytest
from conftest import compile_saved, write_pool_lanes_accelerator
from engine_bench import check_run, weight_bytes

from fcircnn.arch.descriptor import OP_POOL

#: One worker runs this module (its Verilator build): see pyproject.toml.
pytestmark = pytest.mark.xdist_group("accelerator_pool_lanes")


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    return compile_saved(tmp_path_factory.mktemp("pool_lanes"), write_pool_lanes_accelerator, 31)


def lane1_pool_bytes(image) -> int:
    """Bytes the pool passes' second lane reads on port 1: the odd slot groups' whole maps."""
    total = 0
    for lp in image.plan.layers:
        for d in lp.descriptors:
            if d.op == OP_POOL:
                groups = -(-d.in_slots // 8)
                total += (groups // 2) * d.in_shape[0] * d.in_shape[1] * d.in_shape[2] * 16
    return total


@pytest.mark.slow  # suite budget: a Verilator build of its own, 1.5 to 4 minutes cold
def test_two_pool_lanes_are_bit_exact_under_backpressure(compiled, run_image):
    acc, image, root = compiled
    pool = image.plan.layers[0].descriptors[1]
    assert pool.op == OP_POOL and pool.in_slots == 24  # three groups: a step of two, then one
    assert image.plan.layers[1].descriptor.stride == (1, 1, 2)  # p2 reads subsampled
    doc = run_image(acc, root, "pool-lanes", backpressure=0.3, latency=4, seed=7)
    check_run(doc, image)
    port1 = weight_bytes(acc, image) + weight_bytes(acc, image, "input_half")
    assert doc["read_bytes"][1] == port1 + lane1_pool_bytes(image)
    assert lane1_pool_bytes(image) == 4 * 8 * 7 * 16


@pytest.mark.slow  # suite budget: a Verilator build of its own, 1.5 to 4 minutes cold
@pytest.mark.parametrize("kind", ["write", "read"])
def test_a_failing_transfer_of_the_second_lane_ends_the_run_with_its_address(compiled,
                                                                           run_image, kind):
    """Group 1 of p1's pool pass is lane 1's: a fault in its pooled map (a write on
    ``m_axi1``) or in its conv map (a read on ``m_axi1``) ends the run with that address; the
    next start runs the whole list again, bit-exact."""
    acc, image, root = compiled
    pool = image.plan.layers[0].descriptors[1]
    base = (pool.out_base if kind == "write" else pool.in_base)
    stride = pool.out_stride[0] if kind == "write" else pool.in_stride[0]
    doc = run_image(acc, root, f"pool-lanes-{kind}-fault", backpressure=0.2, seed=3,
                    inject_error={"addr": base + stride, "size": stride, "kind": kind})
    fault = doc["fault_run"]
    assert fault["status"] == "error" and fault["interrupt"] and fault["fault_hits"] > 0
    assert fault["error_code"] == (7 if kind == "write" else 3)
    assert base + stride <= fault["error_addr"] < base + 2 * stride
    check_run(doc, image)
