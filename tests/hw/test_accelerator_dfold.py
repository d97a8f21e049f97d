"""A first layer that folds pairs of output depths into the core's idle output lanes and row
copies of its input into the idle input lanes, on the accelerator top level in cocotb,
bit-exact under random AXI back-pressure.

The small network's c1 (3 -> 16 channels, ``B = 4``) on a ``Tn = Tm = 32`` core runs as a layer
of 32 output channels at half the depth (``FLAG_DFOLD``): it reads four depth-shifted copies of
the input at twice the depth stride, each twice, one row apart (32 channels, a 1x2x3 kernel:
:func:`fcircnn.models.fold.fold_input_slots`), its weight blocks are those of the depth taps
shifted per output depth and of the row taps per copy, zero where no tap is left
(:func:`~fcircnn.models.fold.fold_weight_slots`), and the store writes each tile's two halves
of slot groups back to the depths they belong to, so every later layer reads the network's map.
This is C3D conv1a on a ``Tn = 64, Tm = 128`` core in small.
The accelerator is ``write_dfold_accelerator`` of ``tests/conftest.py``; its cycles are
recorded as ``dfold`` (``bench/record_rtl_cycles.py``).
"""

import pytest
from conftest import write_dfold_accelerator

from fcircnn.arch.descriptor import FLAG_DFOLD
from fcircnn.gen.compiler import compile_network
from fcircnn.models.config import load_accelerator

#: One worker runs this module (its Verilator build): see pyproject.toml.
pytestmark = pytest.mark.xdist_group("accelerator_dfold")


@pytest.mark.slow  # suite budget: a Verilator build of its own, 1.5 to 4 minutes cold
def test_a_first_layer_folding_output_depths_is_bit_exact_under_backpressure(tmp_path,
                                                                              run_image):
    acc = load_accelerator(write_dfold_accelerator(tmp_path))
    image = compile_network(acc, seed=17, base=0x10000)
    image.save(tmp_path / "image")
    plans = image.plan.layers
    assert [lp.depths for lp in plans] == [2] + [1] * (len(plans) - 1)
    assert [lp.rows for lp in plans] == [2] + [1] * (len(plans) - 1)
    assert plans[0].descriptor.kernel == (1, 2, 3)
    assert plans[0].descriptor.flags & FLAG_DFOLD
    doc = run_image(acc, tmp_path, "backpressure", backpressure=0.3, latency=5, seed=19)
    assert doc["status"] == "done" and doc["passed"], doc.get("message")
    assert [layer["name"] for layer in doc["layers"]] == [lp.layer.name for lp in plans]
    for layer in doc["layers"]:
        assert layer["passed"] and layer["mismatches"] == 0, layer
