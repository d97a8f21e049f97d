"""Full-size layer on the paper's C3D core: C3D conv5a (512 -> 512 channels, 2x7x7 output) on
``c3d_zcu102`` ((Tn, Tm, Td, Tr, Tc) = (32, 64, 2, 7, 7)), bit-exact, PE utilisation >= 90% and
the performance model within 3% of the RTL's cycle count.

Slow: the Verilator build of the full-size accelerator takes about 2 minutes on two cores and
the run of about 341,000 cycles under a minute (3.6 minutes in all, 2026-11-28); it is the
figure of ``bench/README.md`` ("Full-size C3D conv5a").
"""

import pytest

from fcircnn import simulate as sim
from fcircnn.gen.perf_network import model_network
from fcircnn.models.config import builtin_path


@pytest.mark.slow
def test_c3d_conv5a_full_size_is_bit_exact_and_keeps_the_pe_array_busy(tmp_path):
    acc, image = sim.prepare(builtin_path("c3d_zcu102"), layers=["conv5a"], seed=0)
    image_dir = sim.save_image(image, tmp_path)
    results = image_dir / "results.json"
    sim.run_rtl(acc, image_dir, results,
                timeout_cycles=sim.estimate_timeout_cycles(acc, image))
    outcome = sim.read_results(results)
    assert outcome.status == "done"
    (layer,) = outcome.layers
    assert layer.name == "conv5a" and layer.passed and layer.mismatches == 0
    assert layer.pe_busy / layer.cycles >= 0.90
    modelled = model_network(acc, layers=["conv5a"]).layers[0]
    assert modelled.pe_busy_cycles == layer.pe_busy
    assert abs(modelled.cycles - layer.cycles) <= 0.03 * layer.cycles
