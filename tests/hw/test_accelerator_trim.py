"""Trimmed kernels on the accelerator top level in cocotb: conv layers whose kernel taps at an
end of an axis read padding for every output voxel run without them
(:func:`~fcircnn.models.placement.trims_taps`), bit-exact under random AXI back-pressure on
every port.

The network (``tests/conftest.py``, ``TRIM_NET``) is ResNet-18's stage 4 in small: ``t1``
(3x3x3, stride 2, a 2-deep input to a 1-deep output) runs as a 2x3x3 kernel without depth
padding, ``t2`` and ``t3`` (3x3x3 on a 1x4x4 map, ``t3`` with a residual) as 1x3x3 kernels;
their weights are the kept taps' slice (:func:`~fcircnn.models.fold.trim_weight_slots`), their
inputs the network's maps. Its gap reads the 64 channels of the 1x4x4 map as two planes of
32 (:func:`~fcircnn.models.placement.views_gap`): one weight tile, its 2x1x1 output the bytes
of the network's 1x1x1 map. The core unrolls the depth loop and has four AXI ports and a
command queue of two, as the ResNet-18 best configuration. Its cycles are recorded as ``trim``
(``bench/record_rtl_cycles.py``).

On four ports the residual boxes (``t3``'s) are port 3's loader's, beside the second halves of
split weight tiles (:attr:`~fcircnn.arch.ports.PortMap.residual`): the run checks that port 3
reads exactly those.
"""

import pytest
from conftest import compile_saved, write_trim_accelerator
from engine_bench import weight_bytes

#: One worker runs this module (its Verilator build): see pyproject.toml.
pytestmark = pytest.mark.xdist_group("accelerator_trim")


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    return compile_saved(tmp_path_factory.mktemp("trim"), write_trim_accelerator, 23)


def test_the_compiler_runs_trimmed_kernels_with_their_taps_weights_only(compiled):
    _, image, _ = compiled
    plans = {lp.layer.name: lp for lp in image.plan.layers}
    kernels = {name: (lp.descriptor.kernel, lp.descriptor.padding) for name, lp in plans.items()}
    assert kernels == {"t1": ((2, 3, 3), (0, 1, 1)), "t2": ((1, 3, 3), (0, 1, 1)),
                       "t3": ((1, 3, 3), (0, 1, 1)), "gap": ((1, 4, 4), (0, 0, 0)),
                       "fc": ((1, 1, 1), (0, 0, 0))}
    assert [name for name, lp in plans.items() if lp.trimmed] == ["t1", "t2", "t3"]
    # Two by two weight tiles of Tm x Tn = 32 x 32 channels: 4 x 4 blocks of 4 slots, 2 bytes.
    tile_tap = 4 * 4 * 4 * 2
    assert [plans[n].descriptor.weight_bytes for n in ("t1", "t2", "t3", "gap")] == [
        4 * tile_tap * taps for taps in (18, 9, 9)] + [tile_tap * 16]
    gap = plans["gap"].descriptor
    assert (gap.in_slots, gap.in_shape, gap.out_shape) == (16, (2, 4, 4), (2, 1, 1))
    assert gap.stored_output == (32, (1, 1, 1))


@pytest.mark.slow  # suite budget: a Verilator build of its own, 1.5 to 4 minutes cold
def test_trimmed_kernels_and_a_viewed_gap_are_bit_exact_under_backpressure(compiled,
                                                                            run_image):
    acc, image, root = compiled
    doc = run_image(acc, root, "trim", backpressure=0.3, latency=4, seed=29)
    assert doc["status"] == "done" and doc["passed"], doc.get("message")
    assert [layer["name"] for layer in doc["layers"]] == [
        lp.layer.name for lp in image.plan.layers]
    for layer in doc["layers"]:
        assert layer["passed"] and layer["mismatches"] == 0, layer
    residual = weight_bytes(acc, image, "residual")
    assert residual > 0
    assert doc["read_bytes"][3] == residual + weight_bytes(acc, image, "weight_half")
