"""C3D's classifier in small on the accelerator top level in cocotb, bit-exact under random AXI
back-pressure on every channel of four ports: an FC layer from a map (fc1, 2x4x4 kernel) and FC
layers on 1x1x1, one of which (fc2: 512 channels) the compiler runs as a 1x4x4 map of 32
channels (``folds_fc_input``: 16-tap weight tiles, one DMA command each, instead of 16 one-tap
tiles), its weight blocks permuted to meet the same input bytes
(:func:`fcircnn.models.fold.fold_fc_weight_slots`).

The core (``Tn = 32``, ``Tm = 64``) has four AXI ports and a command queue of two, so the
compiler reads the weight tiles of the weight-bound layers in the cheapest way the performance
model finds: fc1's in quarters, one per port, with its input boxes split over ports 0 and 2
(``FLAG_WQUARTER | FLAG_ISPLIT``: port 2's loader reads the upper input half, then its
quarter), fc3's in quarters alone (``FLAG_WQUARTER``), fc2's in halves (ports 1 and 3). The test
checks those flags, that every port reads exactly its share (from the walk of each read kind)
and every layer's outputs against the golden model. The network is ``FC_NET`` of
``tests/conftest.py``; the same accelerator's cycles are recorded as ``fc_4ports_q2``
(``bench/record_rtl_cycles.py``).
"""

import pytest
from conftest import write_fc_accelerator
from engine_bench import check_run, weight_bytes

from fcircnn.arch.descriptor import FLAG_ISPLIT, FLAG_WQUARTER, FLAG_WSPLIT
from fcircnn.gen.compiler import compile_network
from fcircnn.models.config import load_accelerator

#: One worker runs this module (its Verilator build): see pyproject.toml.
pytestmark = pytest.mark.xdist_group("accelerator_fc")

_SPLITS = FLAG_WSPLIT | FLAG_ISPLIT | FLAG_WQUARTER


@pytest.mark.slow  # suite budget: a Verilator build of its own, 1.5 to 4 minutes cold
def test_fc_layers_in_quarters_over_four_ports_are_bit_exact_under_backpressure(
        tmp_path, run_image):
    acc = load_accelerator(write_fc_accelerator(tmp_path, tm=64, axi_ports=4, dma_queue=2))
    image = compile_network(acc, seed=9, base=0x10000)
    image.save(tmp_path / "image")
    plans = {lp.layer.name: lp for lp in image.plan.layers}
    assert [name for name, lp in plans.items() if lp.folded] == ["fc2"]
    assert plans["fc2"].descriptor.kernel == (1, 4, 4)
    flags = {name: lp.descriptor.flags & _SPLITS for name, lp in plans.items()}
    assert flags == {"c1": FLAG_WSPLIT | FLAG_ISPLIT, "fc1": _SPLITS, "fc2": FLAG_WSPLIT,
                     "fc3": FLAG_WSPLIT | FLAG_WQUARTER}
    doc = run_image(acc, tmp_path, "backpressure", backpressure=0.3, latency=5, seed=13)
    check_run(doc, image)
    # port 1 every first quarter (half, whole tile), port 2 the upper input halves and the
    # fourth quarters, port 3 the second halves and third quarters; port 0 the rest
    read = doc["read_bytes"]
    assert read[1:] == [weight_bytes(acc, image),
                        weight_bytes(acc, image, "input_half")
                        + weight_bytes(acc, image, "weight_quarter3"),
                        weight_bytes(acc, image, "weight_half")]
    assert weight_bytes(acc, image, "weight_quarter1") > 0 and read[0] > 0
