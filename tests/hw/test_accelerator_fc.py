"""C3D's classifier in small on the accelerator top level in cocotb, bit-exact under random AXI
back-pressure: an FC layer from a map (fc1, 2x4x4 kernel, weight tiles split over both ports)
and FC layers on 1x1x1, one of which (fc2: 512 channels) the compiler runs as a 1x4x4 map of
32 channels (``folds_fc_input``: 16-tap weight tiles, one DMA command each, instead of 16
one-tap tiles), its weight blocks permuted to meet the same input bytes
(:func:`fcircnn.models.fold.fold_fc_weight_slots`). The network is ``FC_NET`` of
``tests/conftest.py``; the same accelerator's cycles are recorded as ``fc_2ports``
(``bench/record_rtl_cycles.py``).
"""

import pytest
from conftest import write_fc_accelerator

from fcircnn.arch.descriptor import FLAG_WSPLIT
from fcircnn.gen.compiler import compile_network
from fcircnn.models.config import load_accelerator

#: One worker runs this module (its Verilator build): see pyproject.toml.
pytestmark = pytest.mark.xdist_group("accelerator_fc")


def test_fc_layers_with_an_input_read_as_a_map_are_bit_exact_under_backpressure(
        tmp_path, run_image):
    acc = load_accelerator(write_fc_accelerator(tmp_path))
    image = compile_network(acc, seed=9, base=0x10000)
    image.save(tmp_path / "image")
    plans = {lp.layer.name: lp for lp in image.plan.layers}
    assert [name for name, lp in plans.items() if lp.folded] == ["fc2"]
    assert plans["fc2"].descriptor.kernel == (1, 4, 4)
    assert plans["fc1"].descriptor.flags & FLAG_WSPLIT
    doc = run_image(acc, tmp_path, "backpressure", backpressure=0.3, latency=5, seed=13)
    assert doc["status"] == "done" and doc["passed"], doc.get("message")
    assert [layer["name"] for layer in doc["layers"]] == list(plans)
    for layer in doc["layers"]:
        assert layer["passed"] and layer["mismatches"] == 0, layer
