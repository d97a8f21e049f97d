"""Input boxes read in quarters over four AXI ports (``FLAG_IQUARTER``), and once for two
m-tiles (``FLAG_MINNER``), on the accelerator top level in cocotb, bit-exact under random
back-pressure on every channel of every port.

The network (``tests/conftest.py``, ``QUARTER_NET``) is ResNet-18's first stage-2 block in
small on the committed best's input channel tile (``Tn = 64``: four input slot groups; ``Tm =
32``), four ports and a command queue of two: q1 (3x3x3, stride 2, 64 channels) and its
shortcut qd (1x1x1, stride 2) wait for input boxes twice their tile's extent, q2 takes qd's map
as its residual. The compiler walks q1's two m-tiles innermost (``FLAG_MINNER``: each input box
read once for both) and reads their input boxes in quarters (as the gap's and the fc layer's),
one quarter per port:
the input loader the first, the weight loader the second before its weight tile, port 2's
loader the third, port 3's the fourth, after q2's residual boxes and before the weight halves
(:meth:`~fcircnn.arch.ports.PortMap.loader_reads`). The test checks the flags, that every
port reads exactly its share (from the walk's reads of each kind) and the outputs, layer by
layer, against the golden model. Its cycles are recorded as ``quarters``
(``bench/record_rtl_cycles.py``).
"""

import pytest
from conftest import compile_saved, write_quarters_accelerator
from engine_bench import check_run, weight_bytes

from fcircnn.arch.descriptor import (
    FLAG_IQUARTER,
    FLAG_ISPLIT,
    FLAG_MINNER,
    FLAG_RESIDUAL,
    FLAG_WSPLIT,
)

#: One worker runs this module (its Verilator build): see pyproject.toml.
pytestmark = pytest.mark.xdist_group("accelerator_quarters")


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    return compile_saved(tmp_path_factory.mktemp("quarters"), write_quarters_accelerator, 53)


def test_the_compiler_reads_the_stride_2_block_in_quarters(compiled):
    _, image, _ = compiled
    flags = {lp.layer.name: lp.descriptor.flags for lp in image.plan.layers}
    quartered = {name for name, f in flags.items() if f & FLAG_IQUARTER}
    assert quartered == {"q1", "qd", "q2", "gap", "fc"}
    assert all(flags[name] & FLAG_ISPLIT for name in quartered)
    # q1 (64 channels: two m-tiles of one n-tile) reads each box once for both
    assert flags["q1"] & FLAG_MINNER
    # q2: residual boxes, input quarter and weight halves, all three on port 3's loader
    assert flags["q2"] & FLAG_RESIDUAL and flags["q2"] & FLAG_WSPLIT
    # q0 (the folded first layer: 12 slots, fewer than the four groups) reads no quarters
    assert not flags["q0"] & FLAG_IQUARTER


@pytest.mark.slow  # suite budget: a Verilator build of its own, 1.5 to 4 minutes cold
def test_input_quarters_are_bit_exact_and_every_port_reads_its_share(compiled, run_image):
    acc, image, root = compiled
    doc = run_image(acc, root, "quarters", backpressure=0.3, latency=5, seed=59)
    check_run(doc, image)
    read = doc["read_bytes"]
    share = {kind: weight_bytes(acc, image, kind) for kind in (
        "weights", "input_quarter1", "input_half", "weight_quarter3", "weight_half",
        "residual", "input_quarter3")}
    assert min(share[k] for k in ("input_quarter1", "input_quarter3", "residual")) > 0
    assert read[1] == share["weights"] + share["input_quarter1"]
    assert read[2] == share["input_half"] + share["weight_quarter3"]
    assert read[3] == share["weight_half"] + share["residual"] + share["input_quarter3"]
    assert read[0] > 0
