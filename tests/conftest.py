"""Shared fixtures: the small test network and the small test accelerator.

The network has one layer of every kind the engine runs (conv + CBN + CReLU, a residual add
with a (2,2,2) pool, a stride-(1,2,2) conv with a partial output-channel tile, global average
pooling, FC); the accelerator is one small core (Tn = Tm = 16 by default, Td = 2, Tr = Tc = 4).
"""

import gc
import json
import warnings
from pathlib import Path

import pytest


def unit_simulators() -> list:
    """The simulators a unit's cocotb testbench is parametrised over (``simulator``): both,
    with the Verilator run marked ``slow`` where Icarus is installed.

    Icarus compiles a unit in about a second and Verilator in 15 to 40 s, so the default suite
    runs each unit testbench on one simulator (Icarus; Verilator where Icarus is missing) and
    ``-m slow`` on the other; Verilator stays in the default suite through the accelerator
    runs, which need it.
    """
    from fcircnn.sim.runner import SimulatorUnavailable, find_simulator

    try:
        find_simulator("icarus")
    except SimulatorUnavailable:
        return ["verilator", "icarus"]
    return [pytest.param("verilator", marks=pytest.mark.slow), "icarus"]


SMALL_NET = """
name: small
input: {channels: 3, depth: 4, height: 8, width: 8}
classes: 10
block_size: %(B)d
layers:
  - {name: c1, type: conv, out_channels: 16, kernel: 3, padding: 1, cbn: true, crelu: true}
  - {name: c2, type: conv, out_channels: 16, kernel: 3, padding: 1, cbn: true, crelu: true,
     residual: c1, pool: {window: 2}}
  - {name: c3, type: conv, out_channels: 24, kernel: 3, stride: [1, 2, 2], padding: 1,
     cbn: true, crelu: true}
  - {name: gap, type: gap}
  - {name: fc, type: fc, out_channels: 10}
"""

SMALL_ACC = """
name: small_acc
network: net.yaml
device:
  part: xczu9eg-ffvb1156-2-e
  resources: {dsp: 2520, bram36: 912, lut: 274080, ff: 548160}
clock_mhz: 200
block_size: %(B)d
address_width: 32
cores:
  - {name: main, tn: %(tn)d, tm: %(tm)d, td: %(td)d, tr: 4, tc: 4, unroll: [%(unroll)s],
     max_kernel: [3, 3, 3]}
"""


def write_small_accelerator(folder: Path, *, B: int = 8, tn: int = 16, tm: int = 16,
                            td: int = 2, net: str = SMALL_NET,
                            unroll: tuple[str, ...] = ("tn", "tm"), axi_ports: int = 1,
                            dma_queue: int = 1) -> Path:
    """Write ``net.yaml`` (``net`` with ``%(B)d`` filled in) and ``acc.yaml`` into ``folder``
    (created if missing): the core of ``td`` output depths unrolling ``unroll``, with
    ``axi_ports`` AXI ports and ``dma_queue`` read commands in flight; return the accelerator
    file's path."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "net.yaml").write_text(net % {"B": B})
    path = folder / "acc.yaml"
    text = SMALL_ACC % {"B": B, "tn": tn, "tm": tm, "td": td, "unroll": ", ".join(unroll)}
    text += f"axi_ports: {axi_ports}\n" if axi_ports != 1 else ""
    text += f"dma_queue: {dma_queue}\n" if dma_queue != 1 else ""
    path.write_text(text)
    return path


#: The pools C3D fuses into the drain, (1,2,2) and (2,2,2), with two slot groups per voxel on
#: a ``Tn = Tm = 32`` core, partial m-tiles (48 = 32 + 16 channels) and edge tiles of half a
#: tile; the input slot groups a layer has, fewer than ``Tn/16`` in f2's last n-tile (48
#: channels: n-tiles of two groups and one). f1's 3 channels run folded (24 channels, 12
#: slots: a partial second group).
FUSED_NET = """
name: fused
input: {channels: 3, depth: 4, height: 12, width: 12}
classes: 10
block_size: %(B)d
layers:
  - {name: f1, type: conv, out_channels: 48, kernel: 3, padding: 1, cbn: true, crelu: true,
     pool: {window: [1, 2, 2]}}                                   # 4x12x12 -> 4x6x6
  - {name: f2, type: conv, out_channels: 48, kernel: 3, padding: 1, cbn: true, crelu: true,
     pool: {window: 2}}                                           # 4x6x6 -> 2x3x3
  - {name: fc, type: fc, out_channels: 10}
"""


#: C3D's classifier in small: an FC layer from a map (fc1: a 2x4x4 kernel, 32 taps, as fc6 from
#: pool5) and FC layers on 1x1x1 (fc2, fc3: one tap), several weight tiles per layer on a
#: ``Tn = Tm = 32`` core; on two AXI ports the compiler splits fc1's weight tiles
#: (``FLAG_WSPLIT``), whose 256 beats dwarf its 64 input beats a pass. fc2's 512 input
#: channels are read as a 1x4x4 map of 32 (``folds_fc_input``, as C3D's fc7 beside fc6: 16
#: taps a weight tile); fc3's 256 would leave half of ``Tn`` idle so, and stay 1x1x1.
FC_NET = """
name: fc_stack
input: {channels: 64, depth: 2, height: 4, width: 4}
classes: 10
block_size: %(B)d
layers:
  - {name: c1, type: conv, out_channels: 64, kernel: 3, padding: 1, cbn: true, crelu: true}
  - {name: fc1, type: fc, out_channels: 512, crelu: true}
  - {name: fc2, type: fc, out_channels: 256, crelu: true}
  - {name: fc3, type: fc, out_channels: 10}
"""


def write_fc_accelerator(folder: Path, *, tm: int = 32, axi_ports: int = 2,
                         dma_queue: int = 1) -> Path:
    """The small accelerator with ``Tn = 32``, ``Tm = tm``, two AXI ports (or ``axi_ports``)
    and ``dma_queue`` on :data:`FC_NET` (see :func:`write_small_accelerator`)."""
    return write_small_accelerator(folder, tn=32, tm=tm, net=FC_NET, axi_ports=axi_ports,
                                   dma_queue=dma_queue)


#: A pool pass on two lanes (``axi_ports: 2``): p1 (3 -> 48 channels, three slot groups: a
#: step of two lanes, then the last group alone) pools ResNet-18 conv1's way (window 3, stride
#: 2, padding 1) on a map of odd width, which keeps it out of the drain (a pool pass, its
#: trailing padding inserted); p2, a 1x1x1 stride-2 conv, reads only the planes and rows it
#: uses (a subsampled input); an fc layer ends it.
POOL_LANES_NET = """
name: pool_lanes
input: {channels: 3, depth: 4, height: 8, width: 7}
classes: 10
block_size: %(B)d
layers:
  - {name: p1, type: conv, out_channels: 48, kernel: 3, padding: 1, cbn: true, crelu: true,
     pool: {window: 3, stride: 2, padding: 1}}
  - {name: p2, type: conv, out_channels: 32, kernel: 1, stride: 2, cbn: true}
  - {name: fc, type: fc, out_channels: 10}
"""


def write_pool_lanes_accelerator(folder: Path) -> Path:
    """The small accelerator with ``Tn = Tm = 32`` and two AXI ports on
    :data:`POOL_LANES_NET` (see :func:`write_small_accelerator`)."""
    return write_small_accelerator(folder, tn=32, tm=32, net=POOL_LANES_NET, axi_ports=2)


#: ResNet-18's stage 4 in small, on maps one voxel deep: t1 (3x3x3, stride 2) maps a 2-deep
#: input to a 1-deep output, so its depth tap 0 reads padding only (kernel trimmed to 2x3x3,
#: depth padding 0); t2 and t3 (3x3x3, padding 1) on the 1x4x4 map keep depth tap 1 alone
#: (1x3x3), t3 with a residual; two input and two output channel tiles of ``Tn = Tm = 32``
#: each (:func:`fcircnn.models.placement.trims_taps`). Its gap reads the 64 channels of the
#: 1x4x4 map as two planes of 32 (:func:`fcircnn.models.placement.views_gap`); an fc layer
#: ends it.
TRIM_NET = """
name: trim
input: {channels: 64, depth: 2, height: 8, width: 8}
classes: 10
block_size: %(B)d
layers:
  - {name: t1, type: conv, out_channels: 64, kernel: 3, stride: 2, padding: 1, cbn: true,
     crelu: true}                                                 # 2x8x8 -> 1x4x4
  - {name: t2, type: conv, out_channels: 64, kernel: 3, padding: 1, cbn: true, crelu: true}
  - {name: t3, type: conv, out_channels: 64, kernel: 3, padding: 1, cbn: true, crelu: true,
     residual: t1}
  - {name: gap, type: gap}
  - {name: fc, type: fc, out_channels: 10}
"""


def write_trim_accelerator(folder: Path) -> Path:
    """The small accelerator with ``Tn = Tm = 32``, the depth loop unrolled, four AXI ports and
    a command queue of two (ResNet-18's best configuration in small: its residual boxes on
    port 3) on :data:`TRIM_NET`."""
    return write_small_accelerator(folder, tn=32, tm=32, net=TRIM_NET,
                                   unroll=("td", "tn", "tm"), axi_ports=4, dma_queue=2)


#: ResNet-18's first stage-2 block in small, on the committed best's input channel tile (``Tn =
#: 64``: four input slot groups) and half its output tile (``Tm = 32``: half the PE array to
#: build and simulate, two m-tiles a layer): after q0, q1 (3x3x3, stride 2) and qd (its 1x1x1
#: stride-2 shortcut) wait for input boxes twice their tile's extent, q2 adds qd's map as its
#: residual; the compiler reads input boxes in quarters over the four ports
#: (``FLAG_IQUARTER``), q2's beside its residual boxes on port 3, and walks q1's two m-tiles
#: innermost (``FLAG_MINNER``: one input box for both).
QUARTER_NET = """
name: quarters
input: {channels: 3, depth: 4, height: 8, width: 8}
classes: 10
block_size: %(B)d
layers:
  - {name: q0, type: conv, out_channels: 64, kernel: 3, padding: 1, cbn: true, crelu: true}
  - {name: q1, type: conv, out_channels: 64, kernel: 3, stride: 2, padding: 1, cbn: true,
     crelu: true}                                                 # 4x8x8 -> 2x4x4
  - {name: qd, type: conv, out_channels: 64, kernel: 1, stride: 2, input: q0, cbn: true}
  - {name: q2, type: conv, out_channels: 64, kernel: 3, padding: 1, cbn: true, crelu: true,
     input: q1, residual: qd}
  - {name: gap, type: gap}
  - {name: fc, type: fc, out_channels: 10}
"""


def write_quarters_accelerator(folder: Path) -> Path:
    """The small accelerator with ``Tn = 64``, ``Tm = 32``, the depth loop unrolled, four AXI
    ports and a command queue of two (the ResNet-18 best's memory system) on
    :data:`QUARTER_NET`."""
    return write_small_accelerator(folder, tn=64, tm=32, net=QUARTER_NET,
                                   unroll=("td", "tn", "tm"), axi_ports=4, dma_queue=2)


#: ResNet-18's stages 3 and 4 in small on four depth lanes (``Td = 4``, ``Tr = Tc = 4``), each
#: conv shallower than the lanes, so its tiles' rows run in the idle lanes
#: (:data:`~fcircnn.arch.descriptor.FLAG_ROWLANES`): a1 (2x6x5, stride 2 in depth) in two
#: row groups of two rows, its second row of tiles two rows (the second group idle); a2 (3x3x3,
#: stride 2, two m-tiles) and its 1x1x1 stride-2 shortcut ad (subsampled input) 1x3x3 in four
#: groups of one row (the fourth idle); a3 (two n-tiles, its kernel trimmed to 1x3x3) adds
#: ad's map as its residual; an fc layer reads a3's map.
ROWS_NET = """
name: rows
input: {channels: 16, depth: 4, height: 6, width: 5}
classes: 10
block_size: %(B)d
layers:
  - {name: a1, type: conv, out_channels: 16, kernel: 3, stride: [2, 1, 1], padding: 1,
     cbn: true, crelu: true}                                      # 4x6x5 -> 2x6x5
  - {name: a2, type: conv, out_channels: 32, kernel: 3, stride: 2, padding: 1, cbn: true,
     crelu: true}                                                 # 2x6x5 -> 1x3x3
  - {name: ad, type: conv, out_channels: 32, kernel: 1, stride: 2, input: a1, cbn: true}
  - {name: a3, type: conv, out_channels: 32, kernel: 3, padding: 1, cbn: true, crelu: true,
     input: a2, residual: ad}
  - {name: fc, type: fc, out_channels: 10}
"""


def write_rows_accelerator(folder: Path, *, axi_ports: int = 2, dma_queue: int = 2) -> Path:
    """The small accelerator with ``Tn = Tm = 16`` and four depth lanes (``Td = 4``, the depth
    unrolled) on :data:`ROWS_NET` (see :func:`write_small_accelerator`)."""
    return write_small_accelerator(folder, tn=16, tm=16, td=4, net=ROWS_NET,
                                   unroll=("td", "tn", "tm"), axi_ports=axi_ports,
                                   dma_queue=dma_queue)


def compile_saved(folder: Path, writer, seed: int):
    """The accelerator ``writer`` writes into ``folder``, its network compiled with ``seed``
    at base ``0x10000`` and saved to ``folder / "image"``: ``(acc, image, folder)``."""
    from fcircnn.gen.compiler import compile_network
    from fcircnn.models.config import load_accelerator

    acc = load_accelerator(writer(folder))
    image = compile_network(acc, seed=seed, base=0x10000)
    image.save(folder / "image")
    return acc, image, folder


def write_dfold_accelerator(folder: Path) -> Path:
    """The small accelerator with ``B = 4`` and ``Tn = Tm = 32`` on :data:`SMALL_NET`: c1's 16
    output channels fill half of ``Tm``, so it folds its depth taps and pairs of output depths
    (``FLAG_DFOLD``, :func:`fcircnn.models.placement.folded_depths`), and its four depth copies
    of one block fill half of ``Tn``, so two row copies fill it (a 1x2x3 kernel,
    :func:`fcircnn.models.placement.folded_rows`): C3D conv1a on a ``Tn = 64, Tm = 128`` core
    in small."""
    return write_small_accelerator(folder, B=4, tn=32, tm=32)


#: ResNet-18 conv1's pool fused into the drain (window 3, stride 2, padding 1: every tile's
#: first window takes its first voxel from the tile before, carried in CMaxPool) on a ``Tn =
#: Tm = 32`` core of ``2 x 4 x 4`` tiles: k1's conv map (4x10x8) spans two depth tiles, three
#: rows of tiles (the last of two rows) and two columns, so every axis carries; its 48
#: output channels make two m-tiles (the second of one slot group), each walked over the map
#: in turn.
CARRIED_NET = """
name: carried
input: {channels: 16, depth: 4, height: 10, width: 8}
classes: 10
block_size: %(B)d
layers:
  - {name: k1, type: conv, out_channels: 48, kernel: 3, padding: 1, cbn: true, crelu: true,
     pool: {window: 3, stride: 2, padding: 1}}                    # 4x10x8 -> 2x5x4
  - {name: fc, type: fc, out_channels: 10}
"""


def write_carried_accelerator(folder: Path, *, axi_ports: int = 2, dma_queue: int = 2) -> Path:
    """The small accelerator with ``Tn = Tm = 32``, the depth unrolled (two lanes), on
    :data:`CARRIED_NET` (see :func:`write_small_accelerator`)."""
    return write_small_accelerator(folder, tn=32, tm=32, net=CARRIED_NET,
                                   unroll=("td", "tn", "tm"), axi_ports=axi_ports,
                                   dma_queue=dma_queue)


def write_fused_accelerator(folder: Path, *, unroll: tuple[str, ...] = ("td", "tn", "tm"),
                            axi_ports: int = 1, dma_queue: int = 1) -> Path:
    """The small accelerator with ``Tn = Tm = 32``, the given ``unroll``, ports and command
    queue on :data:`FUSED_NET` (see :func:`write_small_accelerator`)."""
    return write_small_accelerator(folder, tn=32, tm=32, net=FUSED_NET, unroll=unroll,
                                   axi_ports=axi_ports, dma_queue=dma_queue)


@pytest.fixture(autouse=True)
def _collect_hardware_never_elaborated():
    """Hardware a test marks :func:`~fcircnn.hw.common.never_elaborated` (or a constructor
    rejects: ``rejecting``) is collected before the test ends: the per-object filter of
    Amaranth's "created but never used" warning lives in the test's own warning filters, which
    pytest drops after the test."""
    yield
    from amaranth.hdl import UnusedElaboratable

    if any(f[2] is UnusedElaboratable for f in warnings.filters):
        gc.collect()


@pytest.fixture(scope="session")
def small_accelerator():
    """:func:`write_small_accelerator`, for tests in any folder."""
    return write_small_accelerator


@pytest.fixture(scope="session")
def fused_accelerator():
    """:func:`write_fused_accelerator`, for tests in any folder."""
    return write_fused_accelerator


def run_compiled_image(acc, folder: Path, name: str, *, simulator: str = "verilator",
                       **params) -> dict:
    """Run the image saved in ``folder / "image"`` on ``acc``'s accelerator top level in cocotb
    and return the testbench's results document (:mod:`fcircnn.sim.tb_accelerator`), which it
    writes to ``folder / f"{name}.json"``.

    ``params`` override the testbench parameters (``timeout_cycles`` 200,000 and ``seed`` 1 by
    default; ``backpressure``, ``latency``, ``inject_error``, ...).
    """
    from fcircnn.gen.generate import accelerator_verilog
    from fcircnn.sim.runner import run_cocotb

    results = folder / f"{name}.json"
    run_cocotb(accelerator_verilog(acc), "fcircnn_accel", "fcircnn.sim.tb_accelerator",
               simulator, parameters={},
               extra_env={"FCIRCNN_TB_PARAMS": json.dumps({
                   "image_dir": str(folder / "image"), "results": str(results),
                   "timeout_cycles": 200_000, "seed": 1, **params})})
    return json.loads(results.read_text())


@pytest.fixture(scope="session")
def run_image():
    """:func:`run_compiled_image`, for tests in any folder."""
    return run_compiled_image
