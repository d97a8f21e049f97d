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


def _probes(image) -> dict[str, dict]:
    """One descriptor address field moved per probe, so that only the bytes one port reaches
    (a quarter of a weight tile or of an input box, port 0's post records or output map, or a
    whole weight tile on port 1) leave the image's own window at one end; each with the error
    code and the range its ERROR_ADDR must fall in (the bytes outside the window)."""
    from fcircnn.arch.registers import ERROR_READ_WINDOW as read
    from fcircnn.arch.registers import ERROR_WRITE_WINDOW as write

    (rlo, rhi), (wlo, whi) = image.plan.windows
    top = rhi + 1
    k = {(lp.layer.name): sum(len(x.descriptors) for x in image.plan.layers[:i])
         for i, lp in enumerate(image.plan.layers)}
    q1 = image.plan.descriptors[k["q1"]]
    qd = image.plan.descriptors[k["qd"]]
    tiles = q1.m_tiles * q1.n_tiles
    quarter = q1.weight_bytes // tiles // 4  # every tap's quarter, quarter-major
    group = q1.in_stride[0]  # one input slot group's map: a quarter of the box
    tail = 64
    return {
        # weight tiles in quarters: the first on port 1, the fourth on port 2
        "port1-read-lo": dict(index=k["q1"], field="weight_base", value=rlo - quarter,
                              code=read, lo=rlo - quarter, hi=rlo),
        "port2-read-hi": dict(index=k["q1"], field="weight_base",
                              value=top - q1.weight_bytes + tail, code=read, lo=top,
                              hi=top + tail),
        # input boxes in quarters of their slot groups: the first on port 0, the fourth on 3
        "port0-read-lo": dict(index=k["q1"], field="in_base", value=rlo - group, code=read,
                              lo=rlo - group, hi=rlo),
        "port3-read-hi": dict(index=k["q1"], field="in_base", value=top - 3 * group,
                              code=read, lo=top, hi=top + group),
        # port 0's post records, port 1's whole weight tiles (qd does not split them)
        "port0-read-hi": dict(index=k["q1"], field="post_base", value=top - 512, code=read,
                              lo=top, hi=top + 512),
        "port1-read-hi": dict(index=k["qd"], field="weight_base",
                              value=top - qd.weight_bytes // 2, code=read, lo=top,
                              hi=top + qd.weight_bytes // 2),
        # port 0's stores: the output map across either end of the write window
        "port0-write-hi": dict(index=k["q1"], field="out_base", value=whi + 1 - 1024,
                               code=write, lo=whi + 1, hi=whi + 1 + 1024),
        "port0-write-lo": dict(index=k["q1"], field="out_base", value=wlo - 1024, code=write,
                               lo=wlo - 1024, hi=wlo),
        # the same bytes moved to the very edge of their window: issued, no error
        "port1-read-lo-edge": dict(index=k["q1"], field="weight_base", value=rlo, code=0,
                                   lo=0, hi=0),
        "port2-read-hi-edge": dict(index=k["q1"], field="weight_base",
                                   value=top - q1.weight_bytes, code=0, lo=0, hi=0),
        "port0-write-hi-edge": dict(index=k["q1"], field="out_base",
                                    value=whi + 1 - _map_bytes(q1), code=0, lo=0, hi=0),
        "port0-write-lo-edge": dict(index=k["q1"], field="out_base", value=wlo, code=0, lo=0,
                                    hi=0),
    }


def _map_bytes(d) -> int:
    """Bytes of the map descriptor ``d`` stores (NC/8DHW8)."""
    from fcircnn.models.layout import ncdhw8_size

    return ncdhw8_size(*d.stored_output[:1], *d.stored_output[1])


def test_each_probe_leaves_the_window_with_one_port_s_bytes_only(compiled):
    """The probes' arithmetic, without the RTL: the moved field puts part of the intended
    reads or writes outside the window and the rest inside."""
    _, image, _ = compiled
    (rlo, rhi), (wlo, whi) = image.plan.windows
    probes = _probes(image)
    assert len(probes) == 12
    for name, probe in probes.items():
        if not probe["code"]:
            continue
        lo, hi = probe["lo"], probe["hi"]
        window = (wlo, whi) if "write" in name else (rlo, rhi)
        assert hi <= window[0] or lo > window[1], name  # the bad bytes lie outside
        assert probe["value"] % 16 == 0, name  # whole beats, as the DMA reads them


@pytest.mark.slow  # suite budget: the quarters build is slow-only
@pytest.mark.parametrize("probe", ["port1-read-lo", "port2-read-hi", "port0-read-lo",
                                   "port3-read-hi", "port0-read-hi", "port1-read-hi",
                                   "port0-write-hi", "port0-write-lo", "port1-read-lo-edge",
                                   "port2-read-hi-edge", "port0-write-hi-edge",
                                   "port0-write-lo-edge"])
def test_a_burst_outside_the_window_is_refused_on_its_port_then_the_run_restarts(
        compiled, run_image, probe):
    """Issue 46's window tests on four ports: the burst outside the window is not issued
    (the memory model sees nothing outside it), the run ends with the window's error code at
    an address among the bytes only that port reaches, and the next start is bit-exact. The
    same bytes moved to the very edge of the window are issued (``-edge``: no error, the data
    read or overwritten not the layer's)."""
    acc, image, root = compiled
    moved = _probes(image)[probe]
    doc = run_image(acc, root, f"probe-{probe}", moved=moved, backpressure=0.2, seed=61)
    assert doc["fault_run"]["status"] == ("error" if moved["code"] else "done")
    check_run(doc, image)
