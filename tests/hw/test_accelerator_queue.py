"""DMA command queues (``dma_queue: 2``) on the accelerator top level in cocotb, bit-exact under
random AXI back-pressure: each loader keeps up to two reads in flight on its read engine, a
read's command and memory latency overlapping the previous read's beats (one read per buffer in
flight; the beats routed by the oldest read whose last beat has not come, the statuses taken
in order).

Two accelerators of ``tests/conftest.py``: the small test core on one port (every read of every
layer kind, post records, residual, input and weight tiles, through one loader and one read
engine) and the fused-pool core on two ports (the input and the weight loader each with its own
queue, weight tiles and input boxes split over both ports). Their cycles are recorded as
``small_q2`` and, for the two-port FC accelerator, ``fc_2ports_q2``
(``bench/record_rtl_cycles.py``). Both runs are slow tests (each its own Verilator build), as
are the four-port runs of ``test_accelerator_ports.py``; the default suite checks the queued
loaders against the walk in ``test_engine_loader.py``.
"""

import pytest
from conftest import write_fused_accelerator, write_small_accelerator

from fcircnn.arch.descriptor import FLAG_ISPLIT, FLAG_WSPLIT
from fcircnn.gen.compiler import compile_network
from fcircnn.models.config import load_accelerator

#: One worker runs this module (its Verilator builds): see pyproject.toml.
pytestmark = pytest.mark.xdist_group("accelerator_queue")


def _run(acc, tmp_path, run_image, seed):
    image = compile_network(acc, seed=seed, base=0x10000)
    image.save(tmp_path / "image")
    doc = run_image(acc, tmp_path, "queue", backpressure=0.3, latency=5, seed=seed + 1)
    assert doc["status"] == "done" and doc["passed"], doc.get("message")
    assert [layer["name"] for layer in doc["layers"]] == [
        lp.layer.name for lp in image.plan.layers]
    for layer in doc["layers"]:
        assert layer["passed"] and layer["mismatches"] == 0, layer
    return image


@pytest.mark.slow  # suite budget: a Verilator build of its own, 1.5 to 4 minutes cold
def test_one_port_with_a_queue_of_two_is_bit_exact_under_backpressure(tmp_path, run_image):
    acc = load_accelerator(write_small_accelerator(tmp_path))
    acc = acc.model_copy(update={"dma_queue": 2})
    _run(acc, tmp_path, run_image, seed=23)


@pytest.mark.slow
def test_two_ports_with_a_queue_each_are_bit_exact_under_backpressure(tmp_path, run_image):
    acc = load_accelerator(write_fused_accelerator(tmp_path, axi_ports=2, dma_queue=2))
    image = _run(acc, tmp_path, run_image, seed=29)
    flags = [lp.descriptor.flags for lp in image.plan.layers]
    assert any(f & FLAG_WSPLIT for f in flags) and any(f & FLAG_ISPLIT for f in flags)
