"""Closed-form resource estimate of the generated accelerator, calibrated on Yosys.

:func:`estimate_resources` counts DSP48E2, block RAM (RAMB36E2 equivalents), LUTs and flip-flops
per component of :class:`~fcircnn.hw.accelerator.Accelerator` for an
:class:`~fcircnn.models.config.AcceleratorConfig`, from the parameters the hardware is built
with (:meth:`LayerEngine.from_config <fcircnn.hw.layer_engine.LayerEngine.from_config>`,
:func:`~fcircnn.arch.geometry.engine_geometry`), in well under a millisecond per design, so a
design-space sweep can call it for thousands of points.

Components
----------
Per core (``core`` = the core's name):

``pe_array``
    :class:`~fcircnn.hw.pe_array.PEArray` ``(Tn, Tm, B, L)`` with ``L`` lanes (``Td`` if the
    core unrolls ``td``, else 1: :func:`~fcircnn.arch.geometry.core_lanes`):
    ``P = L*Tm*Tn/(4B)`` activation-slot x weight-slot-pair products of 3 DSP48E2 each, 2 for
    the ``P/(B/2)`` of slot 0 (all DSP48E2 instances), summed on cascades of up to 4
    (:func:`~fcircnn.arch.geometry.pe_chains`): per cascade a pair's Gauss post-subtraction;
    ``L*Tm/2`` PEs, each a complex adder tree over its cascades and an int32 accumulator.
``input_buffer``, ``weight_buffer``, ``psum_buffer``, ``output_buffer``, ``residual_buffer``
    The tile buffers (the residual buffer only on a core running a layer with a residual
    input); their block RAM follows from bank count, word width and depth (below).
``post_chain``
    :class:`~fcircnn.hw.post_chain.PostChain` with 8 lanes: 6 DSP48E2 per lane (CBN's split
    ``acc*mult`` and ``res*res_mult``, re and im; the residual multiply is removed when no
    layer of the core has a residual input, its operand then being the constant 0), CMaxPool's
    line and plane buffers sized by the largest pooled map; with more AXI ports also the pool
    pass's further CMaxPools (``pool1`` .., one per port, :attr:`~fcircnn.arch.ports.PortMap.
    pool_lanes`), the same memories again.
``transform_stages``
    On a core that runs a time-domain layer, the post chain's lane-0 and rfft stages
    (:data:`TRANSFORM_STAGE_LOGIC`; the rfft's 16 DSP48E2).
``param_memory``
    The double-buffered post records (``2*G`` words of 8 x 256 bits, ``G = Tm/16``).
``control``
    The four walkers, their FSMs, tag FIFOs and the drain's lane multiplexers; with three or
    four AXI ports the loaders of the split halves on ports 2 and 3 (``half_loaders``).

Shared: ``dma`` (:class:`~fcircnn.hw.axi_dma.AxiDma`), ``regfile``
(:class:`~fcircnn.hw.regfile.ControlRegisters`) and ``sequencer`` (descriptor fetch and
dispatch in :class:`~fcircnn.hw.accelerator.Accelerator`).

Block RAM
---------
Each memory (``width`` bits x ``depth`` words) is mapped the way Yosys' ``memory_libmap`` maps
it for UltraScale+ (``synth_xilinx -family xcup``): every simple-dual-port shape of a RAMB36E2
(``32K x 1`` .. ``512 x 72``, cost 257) and of a RAMB18E2 (``16K x 1`` .. ``512 x 36``, cost
129) is tried as ``ceil(width / w) * ceil(depth / d)`` primitives and the cheapest wins; a
memory without a ``ram_style`` attribute goes to LUT RAM instead when that is cheaper
(:func:`map_memory`). Block RAM is counted in RAMB36E2 equivalents (a RAMB18E2 is 0.5).

LUTs and flip-flops
-------------------
Every component's LUT and FF count is a linear function of a few structural quantities of
that component (its *features*: e.g. the PE array's pairs, PEs and adder-tree nodes; a
buffer's banks), with coefficients fitted by least squares to Yosys on the calibration points
(``calibration.json`` next to this module, written by ``bench/bench_estimate.py``), per
component: the flattened netlist of every calibration point is split by hierarchy (each
flip-flop, RAM and DSP by the RTL name of the net it drives, each LUT by the component it
feeds). ``lut`` counts logic LUTs plus the LUTs that LUT RAM and shift registers occupy (a
``RAM32M`` is 4 LUTs, a ``RAM32M16`` 8, an ``SRL16E`` 1), the way they count against the
device's LUT budget. Yosys maps the DSP pipeline registers and pre-adders to fabric, so LUT
and FF are upper bounds for Vivado's (docs/architecture.md section 6). The second AXI port's DMA
(``dma1``, ``axi_ports: 2``: read and write engine) has coefficients of its own once
calibration points with two ports are fitted, the DMA's until then; the DMAs of ports 2 and 3
count as more of it (its features times ``axi_ports - 1``). A loader of its own for the split
halves (ports 2 and 3) adds :data:`HALF_LOADER_LOGIC` until a calibration point fits it. A weight
buffer that can split its tiles over both ports (``WeightBuffer(splittable=True)``) adds
:data:`WEIGHT_SPLIT_LOGIC`, and an input buffer that can split its boxes
(``InputBuffer(splittable=True)``) :data:`INPUT_SPLIT_LOGIC`, both measured by Yosys, until a
calibration point fits them; one that can read its tiles in quarters over four ports
(``WeightBuffer(quarterable=True)``, with the quarter reads of the loaders)
:data:`WEIGHT_QUARTER_LOGIC`, and one that can read its input boxes in quarters
(``InputBuffer(quarterable=True)``, with the input quarters of the weight loader and port 3's)
:data:`INPUT_QUARTER_LOGIC`, likewise.

Example
-------
::

    from fcircnn.gen.estimate import estimate_resources
    from fcircnn.models.config import builtin_path, load_accelerator

    acc = load_accelerator(builtin_path("c3d_zcu102"))
    est = estimate_resources(acc)
    print(est.total, est.fits(acc.device.resources, cap=0.8))
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from fcircnn.arch.geometry import (
    ACC_BITS,
    DSP_MUL_BITS,
    LUTRAM_MAX_DEPTH,
    CoreGeometry,
    EngineGeometry,
    cbn_dsp_per_lane,
    engine_geometry,
    input_buffer_geometry,
    pe_chains,
    pool_carry,
)
from fcircnn.arch.ports import PortMap

__all__ = [
    "CALIBRATION_FILE",
    "HALF_LOADER_LOGIC",
    "INPUT_QUARTER_LOGIC",
    "INPUT_SPLIT_LOGIC",
    "PSUM_POOL_LOGIC",
    "RESOURCE_NAMES",
    "RFFT_DSP_PER_LANE",
    "TRANSFORM_STAGE_LOGIC",
    "WEIGHT_QUARTER_LOGIC",
    "WEIGHT_SPLIT_LOGIC",
    "ComponentEstimate",
    "ComponentModel",
    "MemoryMapping",
    "ResourceCounts",
    "ResourceEstimate",
    "calibration",
    "calibration_accelerator",
    "calibration_geometry",
    "component_models",
    "estimate_resources",
    "format_cap",
    "map_memory",
]

#: Name of the calibration data file in ``fcircnn.gen``.
CALIBRATION_FILE = "calibration.json"
#: Resource names, in the order of :class:`ResourceCounts`' fields.
RESOURCE_NAMES: tuple[str, ...] = ("dsp", "bram36", "lut", "ff")
#: Default utilisation cap of ``fcircnn estimate``, ``check`` and ``sweep``: the largest share
#: of any device resource a design may use. Above about 90% Vivado's placer and router
#: rarely close timing at 200 MHz on a design this regular and wide, so the margin is part
#: of "fits" for every command that answers that question.
DEFAULT_CAP = 0.9


def format_cap(cap: float) -> str:
    """A utilisation cap as messages show it: ``0.9`` -> ``"90%"``, ``0.005`` -> ``"0.5%"``
    (never rounded to a misleading ``0%``)."""
    return f"{cap * 100:.4g}%"

#: Slots per 128-bit beat (NC/8DHW8) and lanes of the post chain.
_LANES = 8
#: Bits of one post record and of one weight slot's Gauss terms (c, c+d, d as INT9).
_RECORD_BITS = 256
_WEIGHT_SLOT_BITS = 27
#: DSP48E2 per post-chain lane of the rfft stage: the product by the multiplier, re and im.
RFFT_DSP_PER_LANE = 2

# Yosys' UltraScale+ block RAM (brams_xc4v.txt with HAS_SIZE_36): per primitive its
# memory_libmap cost and (words, bits) shapes; RAMB36E2 up to 512 x 72, RAMB18E2 up to 512 x 36
# (simple dual port at the widest). Write enables are per 9-bit byte.
_RAMB36 = (257, tuple((1 << (15 - i), w) for i, w in enumerate((1, 2, 4, 9, 18, 36, 72))))
_RAMB18 = (129, tuple((1 << (14 - i), w) for i, w in enumerate((1, 2, 4, 9, 18, 36))))
_BRAM_BYTE = 9
# LUT RAM (lutrams_xcu.txt mapped by lutrams_xc5v_map.v): cost 16 scaled by the width used;
# per option (words, bits costed per primitive, bits per mapped cell, LUTs per cell). Single
# port (one address for write and read): RAM32M16 (16 bits, 8 LUTs), RAM64X1S (1 LUT per bit),
# RAM128X1S (2), RAM256X1S (4); a simple dual port memory (separate read address): RAM32M16
# (14 bits) or RAM64M8 (7 bits), 8 LUTs each. Deeper memories go to block RAM (gen/synth.py,
# "Deep memories").
_LUTRAM_COST = 16
_LUTRAM_SP = ((32, 16, 16, 8), (64, 8, 1, 1), (128, 4, 1, 2), (256, 2, 1, 4))
_LUTRAM_SDP = ((32, 14, 14, 8), (64, 7, 7, 8))
# memory_libmap's weights of the soft read multiplexer and write demultiplexer per bit.
_FACTOR_MUX = 0.5
_FACTOR_DEMUX = 0.5


@dataclass(frozen=True)
class ResourceCounts:
    """DSP48E2 slices, block RAM in RAMB36E2 equivalents, LUTs and flip-flops."""

    dsp: int = 0
    bram36: float = 0.0
    lut: int = 0
    ff: int = 0

    def __add__(self, other: ResourceCounts) -> ResourceCounts:
        return ResourceCounts(self.dsp + other.dsp, self.bram36 + other.bram36,
                              self.lut + other.lut, self.ff + other.ff)

    def as_dict(self) -> dict[str, float | int]:
        """``{"dsp": .., "bram36": .., "lut": .., "ff": ..}``."""
        return {name: getattr(self, name) for name in RESOURCE_NAMES}


@dataclass(frozen=True)
class ComponentEstimate:
    """One component's estimate; ``core`` is ``None`` for the shared components."""

    name: str
    core: str | None
    counts: ResourceCounts


@dataclass(frozen=True)
class ResourceEstimate:
    """The estimate of a whole accelerator.

    Attributes
    ----------
    components : tuple of ComponentEstimate
        Per core in file order (``pe_array`` first), then the shared components.
    """

    components: tuple[ComponentEstimate, ...]

    @property
    def total(self) -> ResourceCounts:
        """Sum over every component."""
        total = ResourceCounts()
        for c in self.components:
            total = total + c.counts
        return total

    def core_total(self, core: str) -> ResourceCounts:
        """Sum over the components of one core."""
        total = ResourceCounts()
        for c in self.components:
            if c.core == core:
                total = total + c.counts
        return total

    def utilization(self, device_resources: Any) -> dict[str, float]:
        """Fraction of the device's resources used, per resource name."""
        total = self.total
        return {name: getattr(total, name) / getattr(device_resources, name)
                for name in RESOURCE_NAMES}

    def fits(self, device_resources: Any, cap: float = 1.0) -> list[str]:
        """Names of the resources whose use exceeds ``cap`` times the device's.

        Parameters
        ----------
        device_resources : object with ``dsp``, ``bram36``, ``lut``, ``ff`` (e.g.
            :class:`~fcircnn.models.config.Resources`)
        cap : float
            Utilisation cap in (0, 1].

        Returns
        -------
        list of str
            In :data:`RESOURCE_NAMES` order; empty when the design fits.
        """
        if not 0 < cap <= 1:
            raise ValueError(f"cap must be in (0, 1], not {cap}")
        use = self.utilization(device_resources)
        return [name for name in RESOURCE_NAMES if use[name] > cap]


# --------------------------------------------------------------------------------------------
# Memories


@dataclass(frozen=True)
class MemoryMapping:
    """How one memory maps: block RAM primitives, or LUT RAM (``lutram_luts`` LUTs)."""

    ramb36: int = 0
    ramb18: int = 0
    lutram_luts: int = 0

    @property
    def bram36(self) -> float:
        """RAMB36E2 equivalents."""
        return self.ramb36 + self.ramb18 / 2


def _libmap_cost(width: int, depth: int, words: int, bits: int, cost: float,
                 widthscale: float, byte: int, bytes_: Sequence[int]) -> tuple[float, int]:
    """memory_libmap's cost of one shape (``handle_geom``) and the primitives it takes.

    ``bytes_``: the widths of the memory's write-enable groups (each is padded to ``byte``).
    """
    rows = -(-depth // words)
    padded = sum(-(-b // byte) * byte for b in bytes_)
    cells = -(-rows * padded // bits)
    total = (cost - widthscale) * cells + widthscale * rows * width / bits
    if rows > 1:
        total += _FACTOR_MUX * (rows - 1) * width + _FACTOR_DEMUX * rows * len(bytes_)
    return total, cells


@functools.lru_cache(maxsize=4096)
def map_memory(width: int, depth: int, *, block: bool = True, single_port: bool = False,
               granule: int | None = None) -> MemoryMapping:
    """Map a ``width`` x ``depth`` memory with one write and one read port as Yosys does.

    The cheapest shape by memory_libmap's cost model wins (module docstring): ``cost x
    primitives`` for block RAM, ``16 x`` the width-scaled primitive count for LUT RAM, plus the
    soft multiplexers when the depth spans several primitives.

    Parameters
    ----------
    width, depth : int
        Word width in bits and words (both halves of a ping-pong buffer count).
    block : bool
        The memory carries ``ram_style = "block"``: block RAM only. Otherwise LUT RAM competes
        (up to 256 words; deeper memories go to block RAM, see :mod:`fcircnn.gen.synth`).
    single_port : bool
        Reads and writes share one address (the LUT RAM options differ).
    granule : int, optional
        Write-enable granularity in bits (default: the whole word).
    """
    step = granule or width
    groups = [min(step, width - i) for i in range(0, width, step)]
    best_cost, best = None, MemoryMapping()
    for cost, shapes in (_RAMB36, _RAMB18):
        for words, bits in shapes:
            total, cells = _libmap_cost(width, depth, words, bits, cost, 0, _BRAM_BYTE, groups)
            if best_cost is None or total < best_cost:
                best_cost = total
                best = (MemoryMapping(ramb36=cells) if cost == _RAMB36[0]
                        else MemoryMapping(ramb18=cells))
    if not block and depth <= LUTRAM_MAX_DEPTH:
        for words, bits, cell_bits, luts in _LUTRAM_SP if single_port else _LUTRAM_SDP:
            total, _ = _libmap_cost(width, depth, words, bits, _LUTRAM_COST, _LUTRAM_COST,
                                    bits, groups)
            if total < best_cost:
                rows = -(-depth // words)
                cells = sum(-(-g // cell_bits) for g in groups) * rows
                best_cost, best = total, MemoryMapping(lutram_luts=cells * luts)
    return best


# --------------------------------------------------------------------------------------------
# Calibration data


def calibration_accelerator(point: Mapping[str, Any], folder: str | os.PathLike[str]) -> Any:
    """The accelerator of a calibration point of :func:`calibration`: a built-in
    configuration, or the point's network and accelerator YAML written into ``folder``."""
    from fcircnn.models.config import builtin_path, load_accelerator

    if "builtin" in point:
        return load_accelerator(builtin_path(point["builtin"]))
    folder = Path(folder)
    (folder / "net.yaml").write_text(point["network"])
    (folder / "acc.yaml").write_text(point["accelerator"])
    return load_accelerator(folder / "acc.yaml")


def calibration_geometry(point: Mapping[str, Any], acc: Any) -> list[EngineGeometry]:
    """Per core of ``acc``, the geometry the calibration point's synthesized Verilog was built
    for: what the generator derives today, with the point's ``built`` fields where an earlier
    generator built otherwise (``{"acc_bits": 32}``: synthesized before the post chain's CBN
    multiply was built for the network's accumulator width; re-synthesizing the point with
    ``bench/bench_estimate.py synth`` drops it)."""
    built = dict(point.get("built", {}))
    return [dataclasses.replace(engine_geometry(acc, core), **built) for core in acc.cores]


@functools.lru_cache(maxsize=1)
def calibration() -> dict[str, Any]:
    """The calibration data (``calibration.json``): coefficients and the measured points."""
    text = resources.files("fcircnn.gen").joinpath(CALIBRATION_FILE).read_text()
    return json.loads(text)


def _coefficients() -> Mapping[str, Mapping[str, Mapping[str, float]]]:
    return calibration()["coefficients"]


# --------------------------------------------------------------------------------------------
# Structure


@dataclass(frozen=True)
class _Core:
    """The parameters one core's hardware is built from."""

    name: str
    Tn: int
    Tm: int
    Td: int
    Tr: int
    Tc: int
    B: int
    kernel: tuple[int, int, int]
    stride: tuple[int, int, int]
    taps: int
    pool_size: tuple[int, int, int]
    residual: bool
    addr_width: int = 40
    lanes: int = 1
    pool_groups: int = 1
    split: bool = False
    isplit: bool = False
    pool_lanes: int = 1
    half_loaders: int = 0
    quarter: bool = False
    psum_pool_parts: int = 0
    iquarter: bool = False
    carry: tuple[int, int, int] = (0, 0, 0)
    lane0: bool = False
    rfft: bool = False
    acc_bits: int = ACC_BITS
    spread: bool = False


def _cores(acc: Any, geometry: Sequence[EngineGeometry] | None = None) -> list[_Core]:
    cores = []
    for index, core in enumerate(acc.cores):
        geo = engine_geometry(acc, core) if geometry is None else geometry[index]
        cg = CoreGeometry.of(core, acc.block_size)
        # CMaxPool as the engine builds it: with a fused pool also the output tile, its
        # Tm/16 slot groups interleaved.
        pool_size, pool_groups = geo.pool_size, 1
        if geo.fused_pool:
            pool_size = tuple(max(a, b) for a, b in zip(pool_size, cg.tile, strict=True))
            pool_groups = cg.out_groups
        carry = pool_carry(cg, geo)
        ports = PortMap(acc.axi_ports)
        loaders = ports.loader_reads(cg.weight_tile_beats(1), cg.in_groups,
                                     residual=geo.residual)
        cores.append(_Core(core.name, core.tn, core.tm, core.td, core.tr, core.tc,
                           acc.block_size, geo.kernel, geo.stride, geo.taps, pool_size,
                           geo.residual, acc.address_width, cg.lanes, pool_groups,
                           ports.splits_weights(cg.weight_tile_beats(1)),
                           ports.splits_inputs(cg.in_groups), ports.pool_lanes,
                           sum(1 for reads in loaders[2:] if reads),
                           ports.quarters_weights(cg.weight_tile_beats(1)),
                           cg.lanes * core.tm if geo.fused_pool else 0,
                           ports.quarters_inputs(cg.in_groups),
                           (0, 0, 0) if carry is None else carry.depth, geo.lane0, geo.rfft,
                           geo.acc_bits, geo.spread))
    return cores


def _log2ceil(n: int) -> int:
    return max(0, (n - 1).bit_length())


def _param_memory(depth: int, residual: bool) -> MemoryMapping:
    """The post records' memory: ``depth`` words of 8 records of 256 bits, written in 128-bit
    granules, of which the post chain reads mult [0, 32), res_mult [32, 64) (only with a
    residual layer), bias [64, 160) and the two 6-bit shifts at 160 and 168.

    As LUT RAM (simple dual port, up to 64 words), Yosys lays every granule out in units of
    the primitive's width (14 bits of a RAM32M16, 7 of a RAM64M8) and builds only the units
    holding a bit that is read; deeper, it is block RAM like any memory.
    """
    used = [(0, 32), (64, 160), (160, 166), (168, 174)] + ([(32, 64)] if residual else [])
    if depth > 64:
        return map_memory(_LANES * _RECORD_BITS, depth, block=False, granule=128)
    words, unit, _, luts = _LUTRAM_SDP[0] if depth <= 32 else _LUTRAM_SDP[1]
    units = 0
    for start in range(0, _RECORD_BITS, 128):
        for lo in range(start, start + 128, unit):
            hi = min(lo + unit, start + 128)
            units += any(a < hi and lo < b for a, b in used)
    return MemoryMapping(lutram_luts=_LANES * units * -(-depth // words) * luts)


def _core_components(c: _Core) -> dict[str, tuple[int, list[MemoryMapping], dict[str, float]]]:
    """Per component of one core: DSP count, memories and LUT/FF features."""
    Tn, Tm, Td, Tr, Tc, B, L = c.Tn, c.Tm, c.Td, c.Tr, c.Tc, c.B, c.lanes
    cg = CoreGeometry(Tn, Tm, Td, Tr, Tc, B, L)
    G, Gin, subs = cg.out_groups, cg.in_groups, cg.subs  # slot groups; n-tiles per group
    vox = Tr * Tc
    # One bank per lane and input slot group, each a ping-pong pair of the buffer's depth.
    in_depth = input_buffer_geometry(cg, EngineGeometry(
        c.kernel, c.stride, c.taps, c.pool_size, c.residual)).depth
    pairs = L * Tm * Tn // (4 * B)
    pes = L * Tm // 2
    q = Tn // B
    w_banks = (Tm // B) * (Tn // B)
    _pd, ph, pw = c.pool_size
    comps: dict[str, tuple[int, list[MemoryMapping], dict[str, float]]] = {}
    chains = pe_chains(q)
    comps["pe_array"] = (3 * pairs - pairs // (B // 2), [], {
        "pairs": pairs, "cascades": pes * len(chains) // 2, "pes": pes,
        "tree": pes * (len(chains) - 1),
    })
    comps["input_buffer"] = (0, [map_memory(128, 2 * in_depth)] * (L * Gin), {
        "one": 1, "banks": L * Gin, "addr": L * _log2ceil(2 * in_depth),
        "sub_mux": L * Tn * 8 * (subs - 1),
        "isplit": int(c.isplit), "isplit_lanes": L * int(c.isplit),
        "iquarter": int(c.iquarter), "iquarter_lanes": L * int(c.iquarter),
        "spread_bits": L * Tn * 8 * int(c.spread),
    })
    comps["weight_buffer"] = (0, [map_memory(_WEIGHT_SLOT_BITS * B // 2, 2 * c.taps)] * w_banks,
                              {"one": 1, "banks": w_banks, "split": int(c.split),
                               "quarter": int(c.quarter)})
    # One word per voxel of all lanes; with one lane the tile's depths follow each other.
    comps["psum_buffer"] = (0, [map_memory(L * Tm * ACC_BITS, vox * Td // L)] * 2, {
        "one": 1, "bits": L * Tm * ACC_BITS,
    })
    # CMaxPool: w stage in registers (one slot group) or two buffers of the groups, h stage
    # two lines of (W+2) voxels, d stage two planes of (H+2)(W+2) voxels, each voxel
    # pool_groups words of 8 slots (128 bits), read and written at one address; a second
    # CMaxPool alike for the pool pass's second lane.
    pg = c.pool_groups
    pool_lines = ((pg,) if pg > 1 else ()) + ((pw + 2) * pg, (ph + 2) * (pw + 2) * pg)
    pool_mems = [map_memory(128, n, block=False, single_port=True)
                 for n in pool_lines for _ in range(2)] * c.pool_lanes
    # The carry memories of a carried pool (one per axis stage; deep ones are block RAM).
    pool_mems += [map_memory(128, n, block=n > LUTRAM_MAX_DEPTH) for n in c.carry if n]
    size_bits = sum(max(1, n).bit_length() for n in c.pool_size)
    narrow = c.acc_bits <= DSP_MUL_BITS
    comps["post_chain"] = (_LANES * cbn_dsp_per_lane(c.acc_bits, c.residual), pool_mems, {
        "one": 1, "size_bits": size_bits, "residual": int(c.residual),
        "pool1": size_bits * (c.pool_lanes - 1), "narrow_cbn": int(narrow),
    })
    if c.lane0 or c.rfft:
        comps["transform_stages"] = (_LANES * RFFT_DSP_PER_LANE if c.rfft else 0, [], {
            "lane0": int(c.lane0), f"rfft_b{B}": int(c.rfft)})
    comps["output_buffer"] = (0, [map_memory(128, 2 * vox)] * (Td * G), {
        "one": 1, "banks": Td * G,
    })
    if c.residual:
        comps["residual_buffer"] = (0, [map_memory(128, 2 * vox)] * (Td * G), {
            "one": 1, "banks": Td * G,
        })
    comps["param_memory"] = (0, [_param_memory(2 * G, c.residual)], {"one": 1})
    comps["control"] = (0, [], {
        "one": 1,
        "drain_mux": _LANES * G * (L * 2 * ACC_BITS + (Td * 16 if c.residual else 0)),
        "addr": c.addr_width,
        "split": int(c.split),
        "isplit": int(c.isplit),
        "half_loaders": c.half_loaders,
        "quarter": int(c.quarter),
        "psum_pool": c.psum_pool_parts,
        "iquarter": int(c.iquarter),
    })
    return comps


@dataclass(frozen=True)
class ComponentModel:
    """What a component's estimate is computed from (:func:`component_models`).

    Attributes
    ----------
    name, core
        As in :class:`ComponentEstimate`.
    dsp : int
        DSP48E2, exact from the structure.
    memories : tuple of MemoryMapping
        Its memories, mapped (:func:`map_memory`).
    features : dict
        The structural quantities its LUT and FF counts are linear in (besides LUT RAM).
    """

    name: str
    core: str | None
    dsp: int
    memories: tuple[MemoryMapping, ...]
    features: dict[str, float]

    @property
    def lutram_luts(self) -> int:
        """LUTs of its memories mapped to LUT RAM."""
        return sum(m.lutram_luts for m in self.memories)

    @property
    def bram36(self) -> float:
        """RAMB36E2 equivalents of its memories."""
        return sum(m.bram36 for m in self.memories)


def component_models(acc: Any, geometry: Sequence[EngineGeometry] | None = None
                     ) -> list[ComponentModel]:
    """Every component's :class:`ComponentModel`, in :func:`estimate_resources`'s order
    (``geometry`` as there)."""
    out: list[ComponentModel] = []
    for c in _cores(acc, geometry):
        for name, (dsp, mems, feats) in _core_components(c).items():
            out.append(ComponentModel(name, c.name, dsp, tuple(mems), feats))
    for name, feats in _shared_features(acc).items():
        out.append(ComponentModel(name, None, 0, (), feats))
    return out


def _shared_features(acc: Any) -> dict[str, dict[str, float]]:
    shared = {"dma": {"one": 1, "addr": acc.address_width, "regions": 1, "windows": 1}}
    more = acc.axi_ports - 1  # the further ports' DMAs, alike
    if more:
        shared["dma1"] = {"one": more, "addr": more * acc.address_width, "regions": more,
                          "windows": more}
    return shared | {
        "regfile": {"one": 1, "windows": 1},
        "sequencer": {"one": 1, "cores": len(acc.cores), "addr": acc.address_width,
                      "regions": 1},
    }


#: What splitting weight tiles over both ports adds to a core, by component: the weight
#: buffer's second load stream (the 128-bit beat multiplexer, the second beat's eight
#: pre-adders, its counters and the commit of both halves) and, in ``control``, the input
#: loader's second-half reads and the weight loader's half length. Yosys in context, the
#: calibration point ``test16_2ports`` before and after the split was built: weight buffer 281
#: -> 486 LUT, 15 -> 22 FF; control 8,388 -> 8,888 LUT, 7,131 -> 7,218 FF (the buffer alone,
#: ``WeightBuffer(32, 128, B=8, taps=27)``, grows by 241 LUT and 12 FF).
WEIGHT_SPLIT_LOGIC: Mapping[str, Mapping[str, float]] = {
    "weight_buffer": {"lut": 205, "ff": 7},
    "control": {"lut": 500, "ff": 87},
}

#: What splitting input boxes over both ports adds to a core, by component and feature: the
#: input buffer's second load stream (its box counters and per-lane plane addresses,
#: ``isplit_lanes`` per lane; the 128-bit beat and address multiplexers of the upper banks and
#: the commit of both halves, ``isplit``) and, in ``control``, the weight loader's input box
#: (the walk's input-box arithmetic, its routing and phase). Yosys, out of context: the
#: weight loader of ResNet-18's best core (``Tn = Tm = 64``, ``Td = 4``) grows from 604 to
#: 2,007 LUT and 211 to 1,125 FF; ``InputBuffer(64, Td, 8, 8, kernel=3)`` from 138 to 385 LUT
#: and 187 to 362 FF at ``Td = 2``, from 198 to 480 LUT and 209 to 398 FF at ``Td = 4``.
INPUT_SPLIT_LOGIC: Mapping[str, Mapping[str, Mapping[str, float]]] = {
    "input_buffer": {"isplit": {"lut": 212, "ff": 161}, "isplit_lanes": {"lut": 17.5, "ff": 7}},
    "control": {"isplit": {"lut": 1403, "ff": 914}},
}


#: What reading input boxes in quarters over four ports adds to a core, by component and
#: feature: the input buffer's third and fourth load streams (their box counters and per-lane
#: plane addresses, ``iquarter_lanes`` per lane; the beat and address multiplexers of the
#: second and fourth quarters' banks and the commit of four parts, ``iquarter``) and, in
#: ``control``, the input-box arithmetic, routing and phase of the input quarters on the
#: weight loader and port 3's, and the quarter's group count on the input loader and port 2's.
#: Yosys 0.70 native, out of context, on the ResNet-18 best core (``Tn = Tm = 64``, kernel
#: ``3x7x7`` at stride 2, two commands): ``InputBuffer`` splittable -> quarterable 3,976 LUT,
#: 401 FF -> 4,196, 783 at ``Td = 2`` and 6,960, 460 -> 7,690, 892 at ``Td = 4`` (the two
#: points give the constant and per-lane terms; ABC maps the constant below zero); the weight
#: loader 622, 221 -> 2,039, 1,132 and port 3's loader 1,524, 568 -> 2,739, 1,335 (their
#: input-box arithmetic), the input loader and port 2's +-9 LUT, +4 FF.
INPUT_QUARTER_LOGIC: Mapping[str, Mapping[str, Mapping[str, float]]] = {
    "input_buffer": {"iquarter": {"lut": -290, "ff": 332},
                     "iquarter_lanes": {"lut": 255, "ff": 25}},
    "control": {"iquarter": {"lut": 2628, "ff": 1682}},
}


#: What reading weight tiles in quarters over four ports adds to a core, by component: the
#: weight buffer's third and fourth load streams (two more beats' pre-adders, their counters,
#: the multiplexers of the second and fourth quarters' banks, the commit of four parts) and,
#: in ``control``, the quarter phases of the input loader and port 2's loader (address,
#: length, routing) and the quarter length of the weight and port-3 loaders. Yosys 0.70, out
#: of context, on the C3D best core (``Tn = 32``, ``Tm = 128``, 27 taps, two commands):
#: ``WeightBuffer`` splittable 382 LUT, 27 FF -> quarterable 837, 49; the input loader 2,136,
#: 1,166 -> 2,402, 1,234; port 2's loader (input halves) 1,459, 1,043 -> 2,049, 1,118; the
#: weight and port-3 loaders +2 and +14 LUT.
WEIGHT_QUARTER_LOGIC: Mapping[str, Mapping[str, float]] = {
    "weight_buffer": {"lut": 455, "ff": 22},
    "control": {"lut": 872, "ff": 143},
}


#: What taking a fused pool of one depth on the partial sums adds to a core's ``control``, per
#: accumulator part of a partial-sum word (``lanes * Tm``; built on every core with a fused
#: pool): :class:`~fcircnn.hw.psum_pool.PartialSumPool`'s compare-select and register per part,
#: the drain's second source in its lane multiplexers and its pooled-tile states. Yosys 0.70,
#: out of context, on the C3D best core (``Tm = 128``, two lanes: 256 parts): the drain 4,573
#: LUT and 281 FF without, 13,778 and 8,614 with (``PartialSumPool(128, 2)`` alone 5,896 and
#: 8,320).
PSUM_POOL_LOGIC: Mapping[str, float] = {"lut": 36.0, "ff": 32.6}


#: The post chain's time-domain stages (built on a core that runs a time-domain layer,
#: :class:`~fcircnn.arch.geometry.EngineGeometry` ``lane0`` and ``rfft``), by feature: the
#: lane-0 stage (``IrfftLane0(8, B)``: the sums and its payload register) and the rfft stage
#: of block size ``B`` (``RfftSum(8, B)``, its twiddle sums in shifts and adds and 16 products,
#: and the second ``Quantize(8)``, whose 48-bit rounding shifters are most of it). Yosys 0.70
#: (yowasp), out of context: lane 0 765 / 991 / 906 LUT and 2,017 FF at B = 4 / 8 / 16; the rfft
#: stage 5,814 / 6,842 / 9,680 LUT and 1,271 / 1,339 / 1,363 FF, 16 DSP48E2.
TRANSFORM_STAGE_LOGIC: Mapping[str, Mapping[str, float]] = {
    "lane0": {"lut": 991, "ff": 2017},
    "rfft_b4": {"lut": 5814, "ff": 1271},
    "rfft_b8": {"lut": 6842, "ff": 1339},
    "rfft_b16": {"lut": 9680, "ff": 1363},
}


#: What building CBN's multiply for accumulators of at most 27 bits (one DSP48E2 per part,
#: :class:`~fcircnn.arch.geometry.EngineGeometry` ``acc_bits``) changes in the post chain: no
#: split product to recombine. Yosys 0.70 (yowasp), out of context, ``CBNResidual(8)``: 48
#: DSP48E2, 3,793 LUT, 2,882 FF at 32 bits; 32, 3,361, 2,802 at 27.
NARROW_CBN_LOGIC: Mapping[str, float] = {"lut": -432, "ff": -80}


#: What a loader of its own for the split halves (ports 2 and 3,
#: :meth:`~fcircnn.arch.ports.PortMap.loader_reads`) adds to a core's ``control``: a loader's
#: walk, FSM and routing without the input side, as the weight loader of ResNet-18's best core
#: measures out of context in Yosys (604 LUT, 211 FF; the input-box logic of a port-2 loader
#: is ``isplit`` of :data:`INPUT_SPLIT_LOGIC`, moved there from the weight loader).
HALF_LOADER_LOGIC: Mapping[str, float] = {"lut": 604, "ff": 211}


#: What the input buffer's spreading read (:data:`~fcircnn.arch.descriptor.FLAG_SPREAD`,
#: built on a core that runs a layer reading a ``spread`` input compact) adds, per bit of the
#: slots the PE array reads (``lanes * Tn/2`` slots of two 8-bit parts): a 2:1 multiplexer
#: between the word's own slot and its block's spread value. Yosys 0.70 (yowasp), out of
#: context: ``InputBuffer(64, 2, 8, 8, kernel=3)``, 1,024 bits, 138 LUT and 187 FF without,
#: 1,146 and 187 with (ABC keeps one LUT per bit).
SPREAD_READ_LOGIC: Mapping[str, float] = {"lut": 0.984, "ff": 0}


#: What the descriptors' stream regions (:data:`~fcircnn.arch.descriptor.STREAM_REGIONS`)
#: add, by component: in the ``sequencer`` the five region windows (each from its base and
#: page count, narrowed to its memory window, registered: ``Accelerator._regions``), in each
#: port's DMA the command's region code and the window multiplexer of its read walker (four
#: regions) and write walker (one). Yosys 0.70 native, out of context, 40-bit addresses: the
#: region windows alone 1,040 LUT and 280 FF; ``AxiDma(40, read_commands=2)`` 3,250 LUT and
#: 1,474 FF, with ``read_regions=4, write_regions=1`` 3,326 and 1,480.
REGION_CHECK_LOGIC: Mapping[str, Mapping[str, float]] = {
    "sequencer": {"lut": 1040, "ff": 280},
    "dma": {"lut": 76, "ff": 6},
    "dma1": {"lut": 76, "ff": 6},
}


#: What the memory windows and the abort (register map 1.1 and 1.2) add, by component, in
#: context: the calibration point ``test32_4ports`` synthesised on 2026-11-26 (before them)
#: and again on 2026-12-07 (Yosys 0.70 native): the register file's four 64-bit window
#: registers and the abort, 560 -> 972 LUT and 513 -> 770 FF; port 0's DMA 4,516 -> 5,061 LUT
#: and 1,222 -> 1,508 FF, each further port's 3,519 -> 3,812 LUT and 1,162 -> 1,167 FF (its
#: walkers' page compares and the write engine's zero beats after a failure), less their
#: :data:`REGION_CHECK_LOGIC`. Points synthesised before them are estimated with them.
WINDOW_LOGIC: Mapping[str, Mapping[str, float]] = {
    "regfile": {"lut": 412, "ff": 257},
    "dma": {"lut": 469, "ff": 280},
    "dma1": {"lut": 218, "ff": 0},
}


def _component_coefficients(name: str) -> Mapping[str, Mapping[str, float]]:
    """A component's fitted coefficients; the second port's DMA's, until fitted, the DMA's; a
    feature the fit does not have yet, its out-of-context Yosys cost (:func:`_measured_costs`:
    :data:`WEIGHT_SPLIT_LOGIC`, :data:`WEIGHT_QUARTER_LOGIC`, :data:`INPUT_SPLIT_LOGIC`,
    :data:`INPUT_QUARTER_LOGIC`, :data:`PSUM_POOL_LOGIC`, :data:`HALF_LOADER_LOGIC`,
    :data:`TRANSFORM_STAGE_LOGIC`, :data:`NARROW_CBN_LOGIC`, :data:`SPREAD_READ_LOGIC`,
    :data:`REGION_CHECK_LOGIC`, :data:`WINDOW_LOGIC`)."""
    coeffs = _coefficients()
    fitted = coeffs["dma"] if name == "dma1" and name not in coeffs else coeffs.get(
        name, {"lut": {}, "ff": {}})
    out = {res: dict(v) for res, v in fitted.items()}
    for feature, cost in _measured_costs(name).items():
        if feature not in out["lut"]:
            for res in out:
                out[res][feature] = cost[res]
    return out


def _measured_costs(name: str) -> dict[str, Mapping[str, float]]:
    """Component ``name``'s features with an out-of-context Yosys cost, by feature: what
    :func:`_component_coefficients` uses until a fit has the feature."""
    costs = dict(INPUT_SPLIT_LOGIC.get(name, {})) | dict(INPUT_QUARTER_LOGIC.get(name, {}))
    if name in WEIGHT_SPLIT_LOGIC:
        costs["split"] = WEIGHT_SPLIT_LOGIC[name]
    if name in WEIGHT_QUARTER_LOGIC:
        costs["quarter"] = WEIGHT_QUARTER_LOGIC[name]
    if name == "control":
        costs["psum_pool"] = PSUM_POOL_LOGIC
        costs["half_loaders"] = HALF_LOADER_LOGIC
    if name == "transform_stages":
        costs |= TRANSFORM_STAGE_LOGIC
    if name == "post_chain":
        costs["narrow_cbn"] = NARROW_CBN_LOGIC
    if name == "input_buffer":
        costs["spread_bits"] = SPREAD_READ_LOGIC
    if name in REGION_CHECK_LOGIC:
        costs["regions"] = REGION_CHECK_LOGIC[name]
    if name in WINDOW_LOGIC:
        costs["windows"] = WINDOW_LOGIC[name]
    return costs


def _linear(coeffs: Mapping[str, float], feats: Mapping[str, float]) -> float:
    return sum(coeffs.get(k, 0.0) * v for k, v in feats.items())


def _counts(model: ComponentModel) -> ResourceCounts:
    coeffs = _component_coefficients(model.name)
    lut = _linear(coeffs.get("lut", {}), model.features) + model.lutram_luts
    ff = _linear(coeffs.get("ff", {}), model.features)
    return ResourceCounts(dsp=model.dsp, bram36=model.bram36, lut=max(0, round(lut)),
                          ff=max(0, round(ff)))


def estimate_resources(acc: Any, geometry: Sequence[EngineGeometry] | None = None
                       ) -> ResourceEstimate:
    """Estimate every component of the accelerator ``acc`` (module docstring).

    Parameters
    ----------
    acc : AcceleratorConfig
        Loaded with :func:`~fcircnn.models.config.load_accelerator` (bound to its network,
        which sizes the buffers).
    geometry : sequence of EngineGeometry, optional
        Per core, what its buffers and post chain are built for (default: what ``acc``'s
        network needs, :func:`~fcircnn.arch.geometry.engine_geometry`; a calibration point
        synthesized by an earlier generator: :func:`calibration_geometry`).

    Returns
    -------
    ResourceEstimate
    """
    return ResourceEstimate(tuple(ComponentEstimate(m.name, m.core, _counts(m))
                                  for m in component_models(acc, geometry)))
