"""Every distinct layer kind of C3D and 3D ResNet-18, at reduced size, bit-exact on the RTL.

The hardware is the two-core test accelerator ``configs/two_core.yaml`` (a pointwise core with
Tn = 8, Tm = 16 for 1x1x1 convs, FC and GAP; a spatial core with Tn = Tm = 16 up to 7x7x7
kernels; both Td = 2, Tr = Tc = 4, B = 8), built once by Verilator (``-Os``, as ``fcircnn sim``
builds it, so the CLI test in ``tests/test_cli_sim.py`` shares the build). Its network
``configs/kinds.yaml`` has one layer of every kind (see the file): C3D conv + CBN + CReLU +
CMaxPool (1,2,2), (2,2,2) and the padded pool5, FC from a pooled map and on 1x1x1; ResNet-18
conv1 7x7x7 stride (1,2,2) pad 3 with its 3x3x3/2 pad 1 pool, identity and downsampling basic
blocks (stride-2 3x3x3, 1x1x1 stride-2 shortcut on the Tn = 8 core, residual add + CReLU),
global average pooling over 3x3x3 and FC; partial edge tiles, several output-channel tiles and
input-channel tiles (``n_tiles > 1``) on both cores, and descriptors dispatched to both cores.

Each run goes from one start through the whole descriptor list; the testbench
(:mod:`fcircnn.sim.tb_accelerator`) compares every layer's output with the golden integer
contract bit for bit. The default run is of the image laid out by liveness (``reuse_maps``):
every map but the live ones is overwritten by a later one, so each layer's output is
compared with the copy the memory model took when its layer finished.
"""

import gc
import json
from pathlib import Path

import pytest

from fcircnn.gen.compiler import compile_network
from fcircnn.gen.generate import accelerator_verilog
from fcircnn.gen.select import select_layers
from fcircnn.hw.accelerator import TOP_NAME, Accelerator
from fcircnn.hw.common import never_elaborated
from fcircnn.models.config import load_accelerator
from fcircnn.runtime.image import CompiledImage
from fcircnn.sim.runner import run_cocotb

#: One worker runs this module (its Verilator build and shared runs): see pyproject.toml.
pytestmark = pytest.mark.xdist_group("two_core")


CONFIG = Path(__file__).parent / "configs" / "two_core.yaml"
TESTBENCH = "fcircnn.sim.tb_accelerator"


@pytest.fixture(scope="module")
def accelerator():
    """The test accelerator."""
    return load_accelerator(CONFIG)


@pytest.fixture(scope="module")
def hardware(accelerator):
    """The test accelerator and its Verilog (converted once)."""
    return accelerator, accelerator_verilog(accelerator)


@pytest.fixture(scope="module")
def image(accelerator, tmp_path_factory):
    img = compile_network(accelerator, seed=5, base=0x10000)
    folder = tmp_path_factory.mktemp("kinds")
    img.save(folder / "image")
    return img, folder


@pytest.fixture(scope="module")
def reused_image(accelerator, tmp_path_factory):
    """The same network with its maps laid out by liveness (``reuse_maps``)."""
    img = compile_network(accelerator, seed=5, base=0x10000, reuse_maps=True)
    folder = tmp_path_factory.mktemp("kinds_reused")
    img.save(folder / "image")
    return img, folder


def run_image(hardware, folder: Path, name: str, **params) -> dict:
    """Run the image saved in ``folder / image`` on the shared build; the results document."""
    _, verilog = hardware
    results = folder / f"{name}.json"
    run_cocotb(verilog, TOP_NAME, TESTBENCH, "verilator", parameters={}, verilator_opt=None,
               extra_env={"FCIRCNN_TB_PARAMS": json.dumps({
                   "image_dir": str(folder / "image"), "results": str(results),
                   "timeout_cycles": 400_000, "seed": 1, **params})})
    return json.loads(results.read_text())


def check_bit_exact(doc: dict, img) -> None:
    assert doc["status"] == "done" and doc["passed"], doc["message"]
    assert [r["name"] for r in doc["layers"]] == [lp.layer.name for lp in img.plan.layers]
    for layer in doc["layers"]:
        assert layer["passed"] and layer["checked"] and layer["mismatches"] == 0, layer
        assert 0 < layer["pe_busy"] < layer["cycles"], layer


def test_network_has_every_kind_on_both_cores(accelerator, image):
    acc = accelerator
    img, _ = image
    by_name = {lp.layer.name: lp for lp in img.plan.layers}
    cores = {name: lp.core.name for name, lp in by_name.items()}
    assert {cores[n] for n in ("r_b2d", "gap", "fc", "fc6")} == {"pointwise"}
    assert {cores[n] for n in ("c1", "c2", "c5", "r_conv1", "r_b2a", "r_b2b")} == {"spatial"}
    assert {d.core for d in img.descriptors} == {0, 1}
    r = {n: lp.layer for n, lp in by_name.items()}
    assert r["r_conv1"].kernel == (7, 7, 7) and r["r_conv1"].stride == (1, 2, 2)
    assert r["r_conv1"].pool.window == (3, 3, 3) and r["r_conv1"].pool.padding == (1, 1, 1)
    assert r["c1"].pool.window == (1, 2, 2) and r["c2"].pool.window == (2, 2, 2)
    assert r["c5"].pool.padding == (0, 1, 1)
    assert r["r_b2d"].kernel == (1, 1, 1) and r["r_b2d"].stride == (2, 2, 2)
    assert r["gap"].in_shape == (3, 3, 3)
    # Input-channel tiles on both cores, several output-channel tiles, partial edge tiles.
    d = {n: lp.descriptor for n, lp in by_name.items()}
    assert d["r_b2b"].n_tiles == 2 and d["c5"].n_tiles == 2 and d["fc7"].n_tiles == 5
    assert d["r_b2d"].n_tiles == 2 and d["fc6"].m_tiles == 3
    assert r["c1"].conv_shape[2] % acc.cores[1].tc and r["c1"].conv_shape[0] % acc.cores[1].td


@pytest.mark.slow  # suite budget: the run under back-pressure below is the default one
def test_every_layer_kind_is_bit_exact(hardware, image):
    img, folder = image
    doc = run_image(hardware, folder, "plain")
    check_bit_exact(doc, img)
    print(json.dumps({r["name"]: [r["cycles"], r["pe_busy"], r["dma_stall"]]
                      for r in doc["layers"]}))


def test_every_layer_kind_under_axi_backpressure_and_latency_with_maps_reused(
        hardware, image, reused_image):
    """The image laid out by liveness (its maps in a third fewer bytes, residual sources kept
    live until their adds): every layer bit-exact, each checked from the copy the memory model
    takes when the layer ends, before a later map overwrites it."""
    img, folder = reused_image
    plain, _ = image
    assert img.plan.map_bytes_reused < 0.7 * plain.plan.map_bytes_separate
    assert len(img.data) < len(plain.data)
    host = CompiledImage.from_ddr_image(img)
    assert [n for n in host.layer_names() if not host.survives(n)], "no map reused"
    doc = run_image(hardware, folder, "backpressure", backpressure=0.3, latency=7, seed=11)
    check_bit_exact(doc, img)


@pytest.mark.slow  # suite budget: a third run of the shared build
def test_selected_layers_run_alone(hardware, image):
    """The downsampling block alone (inputs pre-filled with golden maps), polling for done."""
    img, folder = image
    part = select_layers(img, ["r_b2a", "r_b2d", "r_b2b"])
    part.save(folder / "part" / "image")
    doc = run_image(hardware, folder / "part", "part", poll=True)
    check_bit_exact(doc, part)


def test_engines_follow_the_unroll_list():
    """Td PE lanes only on a core that unrolls td; otherwise one lane walking the depth."""
    from fcircnn.arch.geometry import engine_geometry
    from fcircnn.hw.layer_engine import LayerEngine

    acc = load_accelerator(CONFIG)
    top = Accelerator.from_config(acc)
    never_elaborated(top, *top.engines)  # inspected, not simulated
    assert [c.unroll for c in acc.cores] == [("tn", "tm"), ("td", "tn", "tm")]
    assert [e.lanes for e in top.engines] == [1, 2]
    geo = engine_geometry(acc, acc.cores[1])
    with pytest.raises(ValueError, match=r"lanes must be 1 or Td \(2\), not 3"):
        LayerEngine(16, 16, 2, 4, 4, geometry=geo, lanes=3)
    with pytest.raises(ValueError, match=r"geometry must have one entry per core \(2\), not 1"):
        Accelerator.from_config(acc, [geo])
    del top
    gc.collect()  # the inspected hardware goes while never_elaborated's filter holds
