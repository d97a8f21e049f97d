"""fcircnn/describe.py: the summaries ``fcircnn check`` prints."""

from __future__ import annotations

import pytest

from fcircnn.describe import describe_accelerator, describe_network
from fcircnn.models.config import builtin_path, load_accelerator, load_network


@pytest.mark.parametrize("name", ["c3d", "r3d18"])
def test_network_summary_lists_every_layer(name):
    net = load_network(builtin_path(name))
    text = describe_network(net)
    assert all(r.name in text for r in net.resolved)
    assert f"{net.dense_ops / 1e9:.3f} GOP dense-equivalent" in text


@pytest.mark.parametrize("name", ["c3d_zcu102", "r3d18_zcu102", "c3d_zcu102_best",
                                  "r3d18_zcu102_best"])
def test_accelerator_summary_lists_cores_and_placement(name):
    acc = load_accelerator(builtin_path(name))
    text = describe_accelerator(acc)
    assert all(c.name in text for c in acc.cores)
    assert all(r.name in text for r in acc.network.resolved)
    folded = [r for r in acc.network.resolved if acc.folds_input(r)]
    assert all(f"{r.name} runs with its depth taps folded" in text for r in folded)
    paired = [r.name for r in folded if acc.folded_depths(r) > 1]
    assert paired == (["conv1a"] if name == "c3d_zcu102_best" else [])
    assert all(f"{n} computes 2 output depths a pass" in text for n in paired)
    fc = [r.name for r in acc.network.resolved if acc.folds_fc_input(r)]
    assert fc == (["fc7", "fc8"] if name.startswith("c3d") else [])
    assert all(f"{n} reads its 1x1x1 input as a 1x4x4 map" in text for n in fc)
    trimmed = {"l4b1_conv1": "2x7x7 input: 2x3x3", "l4b1_conv2": "1x4x4 input: 1x3x3",
               "l4b2_conv1": "1x4x4 input: 1x3x3", "l4b2_conv2": "1x4x4 input: 1x3x3"}
    for n, run in (trimmed if name.startswith("r3d18") else {}).items():
        assert f"{n} runs its kernel trimmed to the taps that read its {run}" in text
    assert ("trimmed" in text) == name.startswith("r3d18")
    # The paper's ResNet-18 runs its gap on the Tn = 8 pointwise core: less than a slot group.
    viewed = "gap reads its 512 channels as 8 planes of 64: one channel tile"
    assert (viewed in text) == (name == "r3d18_zcu102_best")


@pytest.mark.parametrize("ports, line", [
    (1, "1 port"),
    (2, "2 ports (weight tiles on m_axi1; 2 pool lanes)"),
    # the C3D best's Tn = 32: two input slot groups, so no input quarters (ResNet-18's below)
    (4, ("4 ports (weight tiles on m_axi1, upper halves of split input boxes on m_axi2, "
        "second halves of split weight tiles on m_axi3; 4 pool lanes)")),
])
def test_accelerator_summary_says_what_each_port_carries(ports, line):
    acc = load_accelerator(builtin_path("c3d_zcu102_best"))
    text = describe_accelerator(acc.model_copy(update={"axi_ports": ports}))
    assert line in text


def test_a_residual_network_on_four_ports_reads_its_residual_boxes_on_port_3():
    text = describe_accelerator(load_accelerator(builtin_path("r3d18_zcu102_best")))
    assert "second halves of split weight tiles and residual boxes on m_axi3" in text
    # its core's four input slot groups: the input boxes in quarters (FLAG_IQUARTER)
    assert "; input boxes in quarters over all 4; 4 pool lanes)" in text


def test_a_core_that_runs_no_layer_is_noted(tmp_path):
    # A second core like the first: every layer runs on the first core that can run it.
    text = builtin_path("c3d_zcu102").read_text().replace(
        "network: c3d.yaml", f"network: {builtin_path('c3d')}")
    spare = ("  - {name: spare, tn: 32, tm: 64, td: 2, tr: 7, tc: 7, unroll: [tn, tm], "
             "max_kernel: [3, 3, 3]}\n")
    (tmp_path / "acc.yaml").write_text(text.rstrip("\n") + "\n" + spare)
    acc = load_accelerator(tmp_path / "acc.yaml")
    assert [c.name for c in acc.cores] == ["main", "spare"]
    summary = describe_accelerator(acc)
    assert "note: core spare runs no layer of c3d" in summary
    assert "note: core main" not in summary
