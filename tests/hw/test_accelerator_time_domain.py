"""Time-domain layers on the accelerator: the paper's stem (a dense conv with its bias, batch
norm, ReLU and pool, the rfft in its post chain, :data:`~fcircnn.arch.descriptor.FLAG_RFFT`)
and head (the irfft deferred, global average pooling on the slots, a dense fc with a block per
class and lane 0 of the inverse transform in its post chain,
:data:`~fcircnn.arch.descriptor.FLAG_LANE0`), on the test accelerator
``tests/hw/configs/time_domain_acc.yaml`` (``time_domain.yaml``: the stem, two block-circulant
convs, the head).

The default suite checks what the compiler makes of it; the runs on the RTL (a Verilator
build of their own) are marked slow: every pass bit-exact under random AXI back-pressure, on
random and extreme clips, through ``fcircnn run --on sim``.
"""

from pathlib import Path

import numpy as np
import pytest

from fcircnn.arch.descriptor import (
    FLAG_DFOLD,
    FLAG_LANE0,
    FLAG_POOL,
    FLAG_RFFT,
    FLAG_SPREAD,
    OP_GAP,
)
from fcircnn.arch.geometry import engine_geometry
from fcircnn.arch.transforms import RFFT_SLOTS
from fcircnn.cli import main
from fcircnn.gen.compiler import compile_network
from fcircnn.gen.plan import plan_network
from fcircnn.models.config import load_accelerator
from fcircnn.models.network import run_network

ACC = Path(__file__).resolve().parent / "configs" / "time_domain_acc.yaml"

#: One worker runs this module (its Verilator build): see pyproject.toml.
pytestmark = pytest.mark.xdist_group("accelerator_time_domain")


@pytest.fixture(scope="module")
def acc():
    return load_accelerator(ACC)


@pytest.fixture(scope="module")
def image(acc):
    return compile_network(acc, seed=3)


def test_the_domain_steps_run_in_the_passes_around_them(acc, image):
    passes = {lp.layer.name: lp for lp in image.plan.layers}
    assert list(passes) == ["conv1", "conv2", "conv3", "avgpool", "fc"]
    stem, fc = passes["conv1"].descriptor, passes["fc"].descriptor
    assert stem.flags & (FLAG_RFFT | FLAG_POOL) == FLAG_RFFT | FLAG_POOL
    assert passes["conv1"].output == "fft" and passes["conv1"].rfft.name == "fft"
    # spread: a block (four slots) per real input channel; its four depth copies for two
    # output depths (FLAG_DFOLD) in six input tiles of Tn = 16
    assert stem.in_slots == 4 * 3 * 4 and stem.flags & FLAG_DFOLD and stem.n_tiles == 6
    # stored compact (FLAG_SPREAD): one slot group (16 bytes) per n-tile and voxel
    assert stem.flags & FLAG_SPREAD and stem.in_nt_step == stem.in_stride[0]
    assert image.plan.region("input").size == 6 * 16 * int(np.prod(stem.in_shape))
    assert fc.flags & FLAG_LANE0 and fc.out_slots == 10 * 4  # a block per class
    assert passes["avgpool"].descriptor.op == OP_GAP
    regions = {r.name for r in image.plan.regions}
    assert not any(name.startswith(("fft.", "ifft.")) for name in regions)
    # conv2 reads the stem pass's output (the rfft's), the gap conv3's (the irfft's input)
    assert passes["conv2"].descriptor.in_base == stem.out_base
    assert passes["avgpool"].descriptor.in_base == passes["conv3"].descriptor.out_base
    geo = engine_geometry(acc, acc.cores[0])
    assert geo.rfft and geo.lane0 and geo.spread


def test_the_rfft_requantization_is_in_the_stem_descriptor(acc, image):
    post = image.quantized.layers["fft"].post
    d = image.plan.layers[0].descriptor
    mult = np.asarray(d.rfft_mult).reshape(2, RFFT_SLOTS)
    np.testing.assert_array_equal(mult[:, :4], post.mult[:, :4])  # B = 8: four slots a block
    assert not mult[:, 4:].any()
    assert d.rfft_shift == post.shift[0, 0] and np.all(post.shift == d.rfft_shift)
    np.testing.assert_array_equal(post.mult, np.tile(post.mult[:, :4], post.mult.shape[1] // 4))


def test_each_pass_expects_what_the_contract_gives_its_last_layer(acc, image):
    result = run_network(acc.network, ("int",), seed=3)
    ints = result.int_outputs
    for name, source in (("conv1", "fft"), ("conv2", "conv2"), ("avgpool", "avgpool"),
                         ("fc", "fc")):
        for k in range(2):
            np.testing.assert_array_equal(image.expected[name][k], ints[source][k])


def test_a_plain_accelerator_has_no_time_domain_stages():
    acc = load_accelerator(ACC.parent / "two_core.yaml")
    for core in acc.cores:
        geo = engine_geometry(acc, core)
        assert not geo.rfft and not geo.lane0 and not geo.spread
    assert not any(d.flags & (FLAG_RFFT | FLAG_LANE0) for d in plan_network(acc).descriptors)


@pytest.mark.slow  # suite budget: a Verilator build of its own, about 1.5 minutes cold
def test_time_domain_layers_are_bit_exact_under_backpressure(tmp_path, capsys):
    rng = np.random.default_rng(7)
    clips = np.stack([
        rng.standard_normal((3, 4, 8, 8)),                      # random
        np.where(rng.random((3, 4, 8, 8)) < 0.5, -1e3, 1e3),    # every value at a bound
        np.zeros((3, 4, 8, 8)),                                 # all zero
    ])
    np.save(tmp_path / "clips.npy", clips)
    np.save(tmp_path / "calib.npy", clips[:1])
    code = main(["run", str(ACC), "--input", str(tmp_path / "clips.npy"), "--on", "sim",
                 "--calibration", str(tmp_path / "calib.npy"), "--backpressure", "0.3",
                 "--build-dir", str(tmp_path / "build"), "--save", str(tmp_path / "s.npy")])
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.count("PASS") == 3
    golden = tmp_path / "g.npy"
    assert main(["run", str(ACC), "--input", str(tmp_path / "clips.npy"), "--calibration",
                 str(tmp_path / "calib.npy"), "--save", str(golden)]) == 0
    np.testing.assert_array_equal(np.load(tmp_path / "s.npy"), np.load(golden))
