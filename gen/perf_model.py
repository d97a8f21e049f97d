"""Performance model of the accelerator: cycles per layer of what the RTL does.

The model follows the layer engine (:mod:`fcircnn.hw.layer_engine`) and the top level
(:mod:`fcircnn.hw.accelerator`) walker by walker, over the descriptors the compiler writes
(:func:`fcircnn.gen.plan.plan_network`), with one set of constants taken from the RTL's
structure (:class:`EngineTiming`) and one memory model (:class:`MemoryModel`); nothing is fitted
per layer.

What a descriptor costs
-----------------------
* **Fetch and dispatch**: the sequencer reads the 256-byte descriptor (16 beats, one read
  command), decodes it and starts the engine; after the engine's ``done`` it writes the 16-byte
  cycle entry (one write command; the entry's count stops at its W beat) and waits for the
  write response before the next fetch.
* **Conv/FC/GAP** (``OP_CONV``, ``OP_GAP``): the tile loop nest ``mt > (td, th, tw) > nt`` with
  four walkers coupled by ping-pong buffers:

  - *loader* (one read command at a time; each costs the decision cycle, the command handshake,
    the walker's start, the memory latency, one cycle per beat, the status): per m-tile the
    ``Tm`` beats of post records (only once the drain has left m-tile ``mt - 2``), per tile the
    residual box (``FLAG_RESIDUAL``, once the drain freed that residual half), per pass the
    input box (padding delivered as zero beats at one a cycle) and the ``(mt, nt)`` weight
    tile, each once compute has released the pass two back; on a two-port accelerator
    (:func:`memory_of`) the weight tiles have a loader of their own, paced by its own last
    status and the weight buffer alone, and the input loader steps at its input's status;
    with ``FLAG_WSPLIT`` each loader reads one half of the weight tile (the input loader
    after its input box), the tile is in once both halves are, and neither half of the next
    tile starts before that; with ``FLAG_ISPLIT`` the input loader reads the lower half of the
    input box's slot groups and the weight loader the upper half before its weight tile (once
    its walk has settled on the pass: two cycles after its step), the box is in once both
    halves are, and neither half of the next box starts before that; with three or four ports
    the upper input halves (and with four the second weight halves) have a loader of their own
    instead, paced by its own last status and the buffer's commit alone; with
    ``FLAG_WQUARTER`` (four ports) the weight loader reads the first quarter of the tile, the
    input loader the second after its input box, port 3's loader the third and port 2's the
    fourth, the tile is in once all four are, and no quarter of the next tile starts before
    that; with four ports the residual boxes are port 3's loader's (the second weight halves'
    engine, ``weight_half_engine``): it reads each tile's box at the tile's first pass, before
    that pass's weight half, and spends a cycle on each other pass of a residual descriptor;
    with ``FLAG_IQUARTER`` (four ports) each of the four loaders reads a quarter of the input
    box's slot groups (the weight loader's before its weight tile, port 3's after the residual
    box and before its weight half, each once its walk has settled on the pass), the box is in
    once all four are, and no quarter of the next box starts before that;
  - *compute*: per pass one PE-array beat per output voxel of the tile's ``h x w`` extent and
    kernel tap (with ``Td`` PE lanes, the core unrolling ``td``; one lane also steps through the
    tile's depth), after both buffers hold the pass; one cycle
    from the wait to the first beat; the PE array stalls when its output finds both partial-sum
    halves full;
  - *drain*: per tile, once the partial sums of its last pass are committed (PE-array latency),
    one beat per slot group, depth lane and voxel into the post chain, one release cycle; the
    post chain stalls it while both output-buffer halves wait for the store. With a fused pool
    (``FLAG_POOL`` on a conv) the next tile waits until the last pooled voxel has left
    CMaxPool (:attr:`EngineTiming.fused_pool_gap`); a fused pool of one depth is taken on the
    partial sums instead: one cycle per slot group for the multipliers' signs, then per
    pooled voxel one read per word of its window and one beat per slot group and depth lane
    of the word, CMaxPool bypassed (no gap);
  - *store*: per tile one write box (``groups x d x h`` rows of ``w`` beats of the tile, or
    of the pooled tile, AW before W, the write walker's two cycles per row), then the write
    response and the status; with ``FLAG_DFOLD`` two, one per half of the groups, the second
    commanded in the cycle after the first's status.

  A per-pass recurrence of these event times (max-plus, exact for the modelled rules) gives
  the layer's cycles, PE-busy and DMA-stall cycles. Runs of identical tiles (interior tiles,
  identical rows, planes and m-tiles) and of a tile's identical passes (its n-tiles after the
  first) are not stepped one by one: once one iteration shifts every event time by the same
  amount as the one before (a periodic steady state), the rest of the run is extrapolated
  exactly, so a full-size layer costs a few hundred passes, whatever its channels.
* **Pool pass** (``OP_POOL``): per slot group one read box and one write box issued together,
  beats through the post chain with CMaxPool (trailing pool padding inserted as extra cycles),
  both statuses before the next group.

Throughput figures use dense-equivalent operations (``ResolvedLayer.dense_ops``: ``2 M N
Kd Kr Kc Do Ho Wo`` of the uncompressed layer) over the modelled time at the configured clock.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field, replace
from typing import ClassVar

from fcircnn.arch.descriptor import (
    DESCRIPTOR_BYTES,
    DFOLD_DEPTHS,
    FLAG_DFOLD,
    FLAG_IQUARTER,
    FLAG_ISPLIT,
    FLAG_MINNER,
    FLAG_POOL,
    FLAG_RESIDUAL,
    FLAG_WQUARTER,
    FLAG_WSPLIT,
    OP_POOL,
    LayerDescriptor,
    row_groups_of,
)
from fcircnn.arch.geometry import CoreGeometry, lane_rows, pe_chains
from fcircnn.arch.ports import AXI_PORTS, DMA_QUEUE, PortMap
from fcircnn.arch.walk import axis_tiles, halved_axes, input_groups, m_tile_slots
from fcircnn.models.config import AcceleratorConfig, CoreConfig
from fcircnn.models.layout import SLOTS_PER_BEAT

from .dma_plan import Span

__all__ = [
    "EngineTiming",
    "LayerPerformance",
    "MemoryModel",
    "NetworkPerformance",
    "gops_per_dsp",
    "memory_of",
    "model_descriptor",
]

_BEAT = 16  # bytes per 128-bit beat
_NEG = -(1 << 62)


def _check_int(name: str, value, lo: int, hi: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an integer, not {value!r}")
    if not lo <= value <= hi:
        raise ValueError(f"{name} must be in {lo}..{hi}, not {value}")


@dataclass(frozen=True)
class MemoryModel:
    """The DDR behind the AXI port(s).

    Parameters
    ----------
    read_latency : int
        Cycles from the AR handshake to the first R beat of a burst (pipelined: the DMA keeps
        up to 8 bursts in flight). Default 1: cocotbext-axi's ``AxiRam``, the test memory.
    burst_latency : int
        Extra cycles before the first beat of every burst that does not continue the previous
        one, served one burst after the other (the ``latency`` of
        :class:`fcircnn.sim.backend_cocotb.CocotbBackend`); 0 for the test memory.
    write_response : int
        Cycles from the last W beat of a burst to its B response. Default 2 (``AxiRam``).
    axi_ports : int
        128-bit AXI ports every transfer's beats are striped over (a what-if for sizing, not in
        the RTL: beats move at ``16 * axi_ports`` bytes per cycle). The RTL's second port
        (``axi_ports: 2`` in the accelerator file) is not striping but ``weight_engine``.
    efficiency : float
        Fraction of the ports' 16 bytes/cycle a long transfer reaches (measured on the RTL DMA:
        1.0, bench/README.md "Memory system"); beats take ``1 / efficiency`` cycles.
    weight_engine : bool
        The weight tiles are read by a loader and read engine of their own on an AXI port of
        their own, so a weight tile no longer waits for the loader's other transfers, nor they
        for it: the RTL of a two-port accelerator (``axi_ports: 2``,
        :class:`~fcircnn.arch.ports.PortMap`), which :func:`memory_of` sets; ``False``: one
        loader that issues every read in turn.
    dma_queue : int
        Read commands each loader keeps in flight (the accelerator's ``dma_queue``, which
        :func:`memory_of` sets): 1, one at a time; more, a command is issued the cycle after
        the previous handshake once a queue slot is free (the oldest transfer's status taken,
        ``read_status`` after its last beat) and no transfer to the same buffer is in flight,
        and its beats follow the previous transfer's on the read engine.
    pool_lanes : int
        Slot groups a pool pass moves at once, each on a port of its own (the accelerator's
        :attr:`~fcircnn.arch.ports.PortMap.pool_lanes`, which :func:`memory_of` sets).
    input_half_engine, weight_half_engine : bool
        The upper halves of split input boxes (the second halves of split weight tiles) are
        read by a loader and read engine of their own, on a port of their own: the RTL of a
        three- or four-port (four-port) accelerator, which :func:`memory_of` sets; ``False``:
        by the weight (input) loader. The second halves' loader also reads the residual
        boxes (:attr:`~fcircnn.arch.ports.PortMap.residual`): it walks every residual
        descriptor's passes, a cycle for a pass without a read.
    """

    read_latency: int = 2
    burst_latency: int = 0
    write_response: int = 2
    axi_ports: int = 1
    efficiency: float = 1.0
    weight_engine: bool = False
    dma_queue: int = 1
    pool_lanes: int = 1
    input_half_engine: bool = False
    weight_half_engine: bool = False

    def __post_init__(self) -> None:
        _check_int("read_latency", self.read_latency, 0, 100_000)
        _check_int("burst_latency", self.burst_latency, 0, 100_000)
        _check_int("write_response", self.write_response, 0, 100_000)
        _check_int("axi_ports", self.axi_ports, 1, 64)
        if not isinstance(self.efficiency, (int, float)) or not 0 < self.efficiency <= 1:
            raise ValueError(f"efficiency must be in (0, 1], not {self.efficiency!r}")
        for name in ("weight_engine", "input_half_engine", "weight_half_engine"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be a bool, not {getattr(self, name)!r}")
        _check_int("dma_queue", self.dma_queue, DMA_QUEUE[0], DMA_QUEUE[-1])
        _check_int("pool_lanes", self.pool_lanes, 1, max(AXI_PORTS))

    def beats(self, n: int) -> float:
        """Cycles to move ``n`` beats at the ports' rate."""
        return n / (self.axi_ports * self.efficiency)


@dataclass(frozen=True)
class EngineTiming:
    """Fixed cycle costs of the RTL, read off its state machines (not fitted per layer).

    Attributes
    ----------
    read_setup : int
        Engine read command: the loader's CMD cycle to the first burst's ARVALID (handshake,
        walker start, row set-up, AR register) = 3, so the first R beat comes ``read_setup +
        read_latency`` cycles after the loader issues the command.
    fetch_setup : int
        The same for the sequencer's descriptor fetch, which drives the DMA directly (the
        FETCH_CMD handshake, walker start, row set-up, AR register) = 3.
    read_status : int
        Last R beat to the loader's next decision: status register, status handshake = 3.
    input_commit : int
        An input box's last beat to the box being readable by compute: the input buffer writes
        each beat a cycle after taking it and commits with that write (``r_valid`` two cycles
        after the last beat; the weight buffer commits with the beat itself: one) = 2.
    zero_setup : int
        Read command handshake to the first zero beat of a box that starts with padding (the
        walker's zero run needs no AR: handshake, walker start) = 2.
    row_cycles : int
        Box walker cycles per row of a box (row set-up + burst) = 2.
    write_setup : int
        Write command: handshake to the first W beat (walker, AW register, AW handshake, AW
        credit) = 4.
    write_status : int
        B response of the last burst to the store walker's next wait = 3.
    pe_latency_base : int
        PE-array latency without its cascades' lengths and the adder tree over them: a
        cascade's DSP48E2 beyond its skew (3), the post-subtraction (1), the accumulator (1);
        the longest cascade adds its length (:func:`~fcircnn.arch.geometry.pe_chains` of
        ``Tn/B``), the tree ``ceil(log2(cascades))``.
    psum_commit : int
        PE-array output of the last voxel to the partial sums being drainable = 2.
    post_latency : int
        Post chain without the pool (CBN 2, quantize 2, CReLU 1, skid 1) = 6.
    pool_latency : int
        CMaxPool: three axis stages and the output register slice = 4.
    post_slack : int
        Beats the drain can push into the post chain while the output buffer is full = 8.
    out_valid : int
        Drain's last beat to the output buffer offering the tile's first beat to the store
        (post chain, commit, read issue, read register) = post_latency + 2.
    dispatch : int
        Fetch status to the engine's first decision (DISPATCH, START, walker start) = 3.
    entry_write : int
        Engine ``done`` to the cycle entry's W beat (CYCLES_CMD, write walker, AW) = 5.
    fused_pool_gap : int
        Fused pool: the drain's release of a tile to its next wait, the tile's last beat
        passing the post chain and CMaxPool into the output buffer = post_latency +
        pool_latency + 1.

    A core built with the post chain's lane-0 stage (1 cycle) or rfft stage (its sums and
    products, 2, and a second quantizer, 2) has them on every beat's path:
    :meth:`with_post_stages` adds them to ``post_latency``, ``out_valid`` and
    ``fused_pool_gap``.
    """

    read_setup: int = 3
    fetch_setup: int = 3
    read_status: int = 3
    input_commit: int = 2
    zero_setup: int = 2
    row_cycles: int = 2
    write_setup: int = 4
    write_status: int = 3
    pe_latency_base: int = 5
    psum_commit: int = 2
    post_latency: int = 6
    pool_latency: int = 4
    post_slack: int = 8
    out_valid: int = 8
    dispatch: int = 3
    entry_write: int = 5
    fused_pool_gap: int = 11

    #: Cycles of the lane-0 stage and of the rfft stage (:class:`~fcircnn.hw.post_chain.
    #: PostChain`'s ``LANE0_LATENCY``, ``RFFT_STAGE_LATENCY``).
    LANE0_LATENCY: ClassVar[int] = 1
    RFFT_LATENCY: ClassVar[int] = 4

    def with_post_stages(self, geometry) -> EngineTiming:
        """This timing on a core built for ``geometry`` (its ``lane0`` and ``rfft``)."""
        extra = (self.LANE0_LATENCY if geometry.lane0 else 0) + (
            self.RFFT_LATENCY if geometry.rfft else 0)
        if not extra:
            return self
        return replace(self, post_latency=self.post_latency + extra,
                       out_valid=self.out_valid + extra,
                       fused_pool_gap=self.fused_pool_gap + extra)


@dataclass(frozen=True)
class LayerPerformance:
    """Modelled cost of one layer (all its descriptors: the conv and, if it pools, the pool
    pass).

    Attributes
    ----------
    name, core : str
        Layer and core names.
    kind : str
        ``conv``, ``fc`` or ``gap``.
    cycles : int
        Cycles from the first descriptor fetch to the last cycle-entry write of the layer (what
        the engine's cycle entries count, summed over the layer's descriptors).
    span_cycles : int
        ``cycles`` plus the write responses and hand-overs between descriptors: the layer's
        share of the whole run.
    pe_busy_cycles : int
        Cycles the PE array takes a beat.
    dma_stall_cycles : int
        Cycles the compute walker waits for a load.
    dense_ops : int
        Dense-equivalent operations of the uncompressed layer.
    ddr_bytes : int
        Bytes read and written over AXI (descriptors, records, maps, weights, cycle entries).
    descriptors : int
        Descriptors of the layer (1, or 2 with a pool pass).
    clock_mhz : float
    """

    name: str
    core: str
    kind: str
    cycles: int
    span_cycles: int
    pe_busy_cycles: int
    dma_stall_cycles: int
    dense_ops: int
    ddr_bytes: int
    descriptors: int
    clock_mhz: float

    @property
    def seconds(self) -> float:
        """Latency of the layer at the clock (``span_cycles``)."""
        return self.span_cycles / (self.clock_mhz * 1e6)

    @property
    def effective_gops(self) -> float:
        """Dense-equivalent GOP/s."""
        return self.dense_ops / self.seconds / 1e9 if self.span_cycles else 0.0

    @property
    def pe_utilization(self) -> float:
        """PE-busy cycles over the layer's cycles."""
        return self.pe_busy_cycles / self.span_cycles if self.span_cycles else 0.0

    @property
    def ddr_bandwidth_gbs(self) -> float:
        """Average DDR bandwidth the layer needs, GB/s."""
        return self.ddr_bytes / self.seconds / 1e9 if self.span_cycles else 0.0


@dataclass(frozen=True)
class NetworkPerformance:
    """Modelled cost of a network on an accelerator (:func:`model_network`).

    ``cycles`` is the whole run (every descriptor, fetch to the last write response);
    ``dsp`` the DSP count used by :meth:`gops_per_dsp` when none is given (``None``: unknown).
    """

    accelerator: str
    network: str
    clock_mhz: float
    layers: tuple[LayerPerformance, ...]
    memory: MemoryModel = field(default_factory=MemoryModel)
    dsp: int | None = None

    @property
    def cycles(self) -> int:
        return sum(la.span_cycles for la in self.layers)

    @property
    def seconds(self) -> float:
        """Latency of one clip."""
        return self.cycles / (self.clock_mhz * 1e6)

    @property
    def dense_ops(self) -> int:
        return sum(la.dense_ops for la in self.layers)

    @property
    def effective_gops(self) -> float:
        return self.dense_ops / self.seconds / 1e9 if self.cycles else 0.0

    @property
    def pe_busy_cycles(self) -> int:
        return sum(la.pe_busy_cycles for la in self.layers)

    @property
    def pe_utilization(self) -> float:
        """PE-busy cycles over all cycles (one core busy at a time: layers run in order)."""
        return self.pe_busy_cycles / self.cycles if self.cycles else 0.0

    @property
    def ddr_bytes(self) -> int:
        return sum(la.ddr_bytes for la in self.layers)

    @property
    def ddr_bandwidth_gbs(self) -> float:
        """Average DDR bandwidth needed, GB/s."""
        return self.ddr_bytes / self.seconds / 1e9 if self.cycles else 0.0

    def gops_per_dsp(self, dsp: int | None = None) -> float:
        """Effective GOP/s per DSP48E2 for ``dsp`` (default: :attr:`dsp`)."""
        dsp = self.dsp if dsp is None else dsp
        if dsp is None:
            raise ValueError("gops_per_dsp needs a DSP count (none stored in the result)")
        return gops_per_dsp(self.effective_gops, dsp)


def gops_per_dsp(gops: float, dsp: int) -> float:
    """``gops / dsp``; ``dsp`` must be a positive integer."""
    _check_int("dsp", dsp, 1, 1 << 30)
    return gops / dsp


# ------------------------------------------------------------------------------------------
# Read and write commands


def _read_last(mem: MemoryModel, t: EngineTiming, cmd: float, n: int, rows: int,
               burst_rows: int, gaps: int, setup: int | None = None, lead: int = 0) -> float:
    """Cycle of the last delivered beat of a read command handshaken at ``cmd``: ``n`` beats
    in ``rows`` walker rows, ``burst_rows`` of them with bus reads, ``gaps`` of those not
    continuing the previous burst (each served ``burst_latency`` after the one before);
    ``lead`` zero beats (padding) before the first bus beat, delivered while the first burst
    is on its way (from ``zero_setup`` after the command on)."""
    g = mem.burst_latency
    setup = t.read_setup if setup is None else setup
    first = cmd + setup + mem.read_latency + (g if gaps else 0)
    if lead:
        # The beats after the leading zeros start with the first burst's data, or after the
        # zeros if they take longer than its latency.
        first = max(first, cmd + t.zero_setup + lead) - lead
    # Rows are issued every row_cycles (or every burst_latency when the memory serves each
    # non-continuing burst that late); a row shorter than that spacing leaves bubbles.
    spacing = max(t.row_cycles, g if gaps > 1 else 0)
    per_row = mem.beats(n) / max(rows, 1)
    bubbles = max(0.0, (max(burst_rows, rows) - 1) * (spacing - per_row)) if rows > 1 else 0.0
    if gaps > 1 and g > t.row_cycles and rows <= 1:
        bubbles = (gaps - 1) * g
    return first + mem.beats(n) - 1 + bubbles


def _write_last(mem: MemoryModel, t: EngineTiming, cmd: float, n: int, rows: int) -> float:
    """Cycle of the last W beat of a write command handshaken at ``cmd``."""
    per_row = mem.beats(n) / max(rows, 1)
    bubbles = max(0.0, (rows - 1) * (t.row_cycles - per_row))
    return cmd + t.write_setup + mem.beats(n) - 1 + bubbles


# ------------------------------------------------------------------------------------------
# Tile geometry


@dataclass(frozen=True)
class _Axis(Span):
    """One tile class along an axis: the input box's span (pre/length/post) and the tile's
    output extent."""

    ext: int


def _leading_zeros(ad: Span, ah: Span, aw: Span) -> int:
    """Zero beats of a one-group box (axes ``ad``, ``ah``, ``aw``) before its first bus beat:
    its leading padding planes, then rows, then voxels (all of it if it has no bus beat)."""
    if not (ad.length and ah.length and aw.length):
        return 0
    return (ad.pre * ah.total + ah.pre) * aw.total + aw.pre


def _axis_runs(d: LayerDescriptor, a: int) -> list[tuple[_Axis, int]]:
    """Tile classes of axis ``a`` in walk order (:func:`~fcircnn.arch.walk.axis_tiles`),
    run-length encoded; the first tile is always its own run (it may be the first tile of an
    m-tile)."""
    runs: list[tuple[_Axis, int]] = []
    for i, t in enumerate(axis_tiles(d, a)):
        ax = _Axis(t.pre, t.len, t.post, t.ext)
        if runs and i > 1 and runs[-1][0] == ax:
            runs[-1] = (ax, runs[-1][1] + 1)
        else:
            runs.append((ax, 1))
    return runs


def _m_runs(d: LayerDescriptor, tm: int) -> list[tuple[int, int]]:
    """Output slot groups per m-tile (:func:`~fcircnn.arch.walk.m_tile_slots`), run-length
    encoded (first m-tile its own run)."""
    runs: list[tuple[int, int]] = []
    for mt, slots in enumerate(m_tile_slots(d, tm)):
        groups = -(-slots // SLOTS_PER_BEAT)
        if runs and mt > 1 and runs[-1][0] == groups:
            runs[-1] = (groups, runs[-1][1] + 1)
        else:
            runs.append((groups, 1))
    return runs


# ------------------------------------------------------------------------------------------
# The conv recurrence

# Event-time state (all shift together in a periodic steady state).
(_LD, _CPW, _DRW, _STW,            # loader decision, compute wait, drain wait, store wait
 _CR1, _CR2,                       # compute releases of the last two passes
 _DR1, _DR2,                       # drain releases of the last two tiles
 _SR1, _SR2,                       # output-buffer releases (store) of the last two tiles
 _MD1, _MD2,                       # drain finished m-tile mt-1 / mt-2 (params gating)
 _PRM,                             # post records of the current m-tile loaded
 _LAST,                            # last event (engine done candidate)
 _WL,                              # weight engine's next decision (what-if weight_engine)
 _WC,                              # split weight tile: commit of the last tile (both halves)
 _IC,                              # split input box: commit of the last box (both halves)
 _I1L, _W1L,                       # next decision of the input-half / weight-half loaders
 _BR1, _BR2) = range(21)           # input box releases of the last two boxes (FLAG_MINNER:
#                                    a box serves both m-tiles of its tile)
_NSTATE = 21
#: What a tile's passes after its first leave alone: the drain's and store's state, the
#: m-tile's post-record gates and the tile's post records.
_TILE_STATE = [_DRW, _STW, _DR1, _DR2, _SR1, _SR2, _MD1, _MD2, _PRM, _LAST]


class _Queue:
    """The transfers in flight of one loader with a command queue of ``depth``: oldest first,
    their destinations (``dests``, ``None`` for a free slot) and the cycles their slots free
    (``read_status`` after the last beat: the status taken); the read engine's last beat
    (``r_end``) and the cycle its walker takes the next command (``walk``). The times live in
    the recurrence's state from index ``base`` on (they shift with it)."""

    def __init__(self, base: int, depth: int):
        self.depth = depth
        self.r_end, self.walk = base, base + 1
        self.free = list(range(base + 2, base + 2 + depth))
        self.slots = self.size(depth)
        self.dests: list[str | None] = [None] * depth

    @staticmethod
    def size(depth: int) -> int:
        return 2 + depth

    def _pop(self, s: list, count: int) -> None:
        """Retire the ``count`` oldest transfers."""
        keep = [s[i] for i in self.free[count:]]
        for i, v in zip(self.free, keep + [_NEG] * count, strict=True):
            s[i] = v
        self.dests = self.dests[count:] + [None] * count

    def wait(self, s: list, at: float, dest: str) -> float:
        """The cycle a command to ``dest`` can be decided, from ``at``: once a slot is free
        and no transfer to ``dest`` is in flight (the transfers retired meanwhile, in
        order)."""
        while True:
            live = [k for k, d in enumerate(self.dests) if d is not None]
            done = sum(1 for k in live if s[self.free[k]] <= at)
            if done:
                self._pop(s, done)
                continue
            if len(live) == self.depth:
                at = max(at, s[self.free[0]])
            elif dest in self.dests:
                at = max(at, s[self.free[self.dests.index(dest)]])
            else:
                return at

    def push(self, s: list, dest: str, free: float) -> None:
        k = self.dests.index(None)
        self.dests[k] = dest
        s[self.free[k]] = free


class _Conv:
    """The per-pass recurrence of one conv descriptor (see the module docstring)."""

    def __init__(self, d: LayerDescriptor, core: CoreConfig, B: int, mem: MemoryModel,
                 t: EngineTiming, *, extrapolate: bool = True):
        self.extrapolate = extrapolate
        self.d, self.core, self.mem, self.t = d, core, mem, t
        self.taps = math.prod(d.kernel)
        self.residual = bool(d.flags & FLAG_RESIDUAL)
        # Fused pool: axes whose stride-2 window halves the stored tile.
        self.fused = d.op != OP_POOL and bool(d.flags & FLAG_POOL)
        self.halved = halved_axes(d, True)
        # A fused pool of one depth is taken on the partial sums (PartialSumPool), CMaxPool
        # bypassed.
        self.psum_pool = self.fused and not self.halved[0]
        # Input slot groups per n-tile: Tn/16, but only those the layer has (the last n-tile
        # may hold fewer; a beat holds several n-tiles when Tn < 16).
        cg = CoreGeometry.of(core, B)
        self.in_groups = input_groups(d, cg)
        self.lanes = cg.lanes
        # FLAG_ROWLANES: each lane computes Rh rows of a tile (else the tile's rows).
        self.lane_rows = lane_rows(d.tile[1], row_groups_of(d.flags, d.tile[0], cg.lanes))
        self.w_beats = d.weight_tile_bytes // _BEAT
        self.split = bool(d.flags & FLAG_WSPLIT)
        self.quarter = bool(d.flags & FLAG_WQUARTER)
        if self.quarter and not (mem.weight_half_engine and mem.input_half_engine):
            raise ValueError("FLAG_WQUARTER needs the four-port memory model (loaders of their "
                             "own on ports 2 and 3)")
        self.i_split = bool(d.flags & FLAG_ISPLIT)
        self.i_quarter = bool(d.flags & FLAG_IQUARTER)
        if self.i_quarter and not (mem.weight_half_engine and mem.input_half_engine):
            raise ValueError("FLAG_IQUARTER needs the four-port memory model (loaders of their "
                             "own on ports 2 and 3)")
        self.out_boxes = DFOLD_DEPTHS if d.flags & FLAG_DFOLD else 1
        self.minner = bool(d.flags & FLAG_MINNER)
        chains = pe_chains(core.tn // B)
        self.pe_latency = t.pe_latency_base + chains[0] + (len(chains) - 1).bit_length()
        self.n_tiles = d.n_tiles
        # A tile's passes in runs alike: the first alone, then one run per input group count.
        self.pass_runs: list[tuple[int, int]] = [(0, 1)]
        for nt in range(1, self.n_tiles):
            start, count = self.pass_runs[-1]
            if start > 0 and self.in_groups[nt] == self.in_groups[start]:
                self.pass_runs[-1] = (start, count + 1)
            else:
                self.pass_runs.append((nt, 1))
        self.steps = 0
        # accumulators: pe_busy, stall, bytes read, bytes written
        self.acc = [0, 0, 0, 0]
        # The loaders of the split halves: port 2's and 3's, or the weight and input loaders.
        self.i1_who = "i1" if mem.input_half_engine else "w"
        self.w1_who = "w1" if mem.weight_half_engine else "in"
        # With a command queue, per loader (input "in", weights "w", halves "i1", "w1") its
        # transfers in flight.
        self.queues = ({who: _Queue(_NSTATE + k * _Queue.size(mem.dma_queue), mem.dma_queue)
                        for k, who in enumerate(("in", "w", "i1", "w1"))}
                       if mem.dma_queue > 1 else {})
        # Each loader's next-decision state (the input loader's is the walk's, ``ld``).
        self.walker = {"w": _WL, "i1": _I1L, "w1": _W1L}
        self.nstate = _NSTATE + sum(q.slots for q in self.queues.values())
        # The half loaders this descriptor runs (their positions bound the clamp's floor).
        self.half_walkers = ([_I1L] if (self.i_split or self.quarter)
                             and mem.input_half_engine else []) + (
            [_W1L] if mem.weight_half_engine and (self.split or self.residual
                                                  or self.i_quarter) else [])
        # What the extrapolation shifts, and the walkers whose earliest position bounds the
        # clamp: between tiles the whole state and every walker; between a tile's passes the
        # state its passes read and write (the rest must stay put), and the pass walkers (the
        # drain and store walkers wait for the tile's end).
        everything = list(range(self.nstate))
        self.scopes = {
            False: (everything, [], [_LD, _CPW, _DRW, _STW, _WL, *self.half_walkers]),
            True: ([i for i in everything if i not in _TILE_STATE], _TILE_STATE,
                   [_LD, _CPW, _WL, *self.half_walkers]),
        }

    def _read(self, s: list, who: str, dec: float, dest: str, gate: float, n: int, rows: int,
              burst_rows: int, gaps: int, lead: int = 0) -> tuple[float, float]:
        """One read command of loader ``who`` deciding at ``dec``, its buffer free at
        ``gate``: returns the loader's next decision cycle and the read's last beat (one at a
        time: ``read_status`` after it; with a queue: the cycle after the handshake)."""
        mem, t = self.mem, self.t
        if not self.queues:
            last = _read_last(mem, t, max(dec, gate) + 1, n, rows, burst_rows, gaps,
                              lead=lead)
            return last + t.read_status, last
        q = self.queues[who]
        cmd = max(q.wait(s, max(dec, gate), dest) + 1, s[q.walk])
        # Its beats come after the previous transfer's: its first burst's latency overlaps
        # them, its later bursts are served in turn (the row bubbles of _read_last).
        after = (_read_last(mem, t, 0, n, rows, burst_rows, gaps, setup=0) - mem.read_latency
                 - (mem.burst_latency if gaps else 0))
        last = max(_read_last(mem, t, cmd, n, rows, burst_rows, gaps, lead=lead),
                   s[q.r_end] + 1 + after)
        s[q.r_end], s[q.walk] = last, cmd + 1 + rows * t.row_cycles
        q.push(s, dest, last + t.read_status)
        return cmd + 1, last

    # ---- one tile -------------------------------------------------------------------------
    def tile(self, s: list, groups: int, ax: tuple[_Axis, _Axis, _Axis], first_of_mt: bool,
             mt: int = 0):
        """One tile of ``groups`` output slot groups over the axes ``ax``: per n-tile its
        passes' reads (post records on the m-tile's first tile, residual box, input box,
        weight tile) and compute, then its drain and store, advancing the walkers' state
        ``s``. ``mt``: the tile's m-tile (``first_of_mt``: its first tile)."""
        d, t, mem = self.d, self.t, self.mem
        # FLAG_MINNER: a tile's later m-tile reuses the input box its first one read; the
        # last releases it.
        reuse = self.minner and mt > 0
        releases = not self.minner or mt == d.m_tiles - 1
        ad, ah, aw = ax
        ext_d, ext_h, ext_w = ad.ext, ah.ext, aw.ext
        acc = self.acc
        whole_rows = aw.length == d.in_shape[2]
        out_rows = groups * ext_d * ext_h
        out_beats = out_rows * ext_w
        out_whole = ext_w == d.conv_shape[2]
        # Td lanes (td unrolled) take the tile's depths in parallel (with row lanes also its row
        # groups, each lane min(Rh, ext_h) rows); one lane steps through them.
        rows = min(self.lane_rows, ext_h)
        compute = (1 if self.lanes > 1 else ext_d) * rows * ext_w * self.taps
        res_ready = [_NEG]

        def one_pass(s: list, nt: int) -> None:
            self.steps += 1
            ld = s[_LD]
            # phase 0: post records of this m-tile
            if first_of_mt and nt == 0:
                ld, last = self._read(s, "in", ld, "params", s[_MD2], self.core.tm, 1, 1, 1)
                s[_PRM] = last + t.read_status
                acc[2] += self.core.tm * _BEAT
            else:
                ld += 1
            # phase 1: residual box (on port 3's loader, which steps over a pass without it:
            # one cycle, before the pass's weight half if split)
            if self.residual and nt == 0:
                gaps = out_rows if not out_whole else groups * ext_d
                if self.w1_who == "w1":
                    s[_W1L], last = self._read(s, "w1", s[_W1L], "residual", s[_DR2] + 1,
                                               out_beats, out_rows, out_rows, gaps)
                    ld += 1
                else:
                    ld, last = self._read(s, "in", ld, "residual", s[_DR2] + 1, out_beats,
                                          out_rows, out_rows, gaps)
                res_ready[0] = last + 1
                acc[2] += out_beats * _BEAT
            else:
                ld += 1
                if self.residual and self.w1_who == "w1":
                    s[_W1L] += 1
            # phase 2: input box, once compute released the box two back (weights: the pass
            # two back)
            free = s[_CR2] + 1
            ld, in_ready = self._input_box(s, ld, self.in_groups[nt], reuse, ax, whole_rows)
            # phase 3: weight tile (what-if: on an engine of its own, paced by its last status)
            if self.split:
                ld, w_ready = self._split_weights(s, ld, free)
            elif mem.weight_engine:
                s[_WL], last = self._read(s, "w", s[_WL], "weights", free, self.w_beats, 1, 1, 1)
                w_ready = last + 1
            else:
                ld, last = self._read(s, "in", ld, "weights", free, self.w_beats, 1, 1, 1)
                w_ready = last + 1
            acc[2] += self.w_beats * _BEAT
            # compute
            ready = max(s[_CPW], in_ready, w_ready)
            acc[1] += ready - s[_CPW]
            end = ready + compute
            if nt == 0:
                # the first voxel's sums need a free partial-sum half (drain of tile j-2)
                first_out = ready + self.taps + 1 + self.pe_latency
                blocked = s[_DR2] + 1
                if blocked > first_out:
                    end += blocked - first_out
            acc[0] += compute
            s[_CR2], s[_CR1] = s[_CR1], end
            if releases:
                s[_BR2], s[_BR1] = s[_BR1], end
            s[_CPW] = end + 1
            s[_LD] = ld

        # The n-tiles' passes: the first (post records, residual box) alone, then runs of
        # passes alike (the same input groups), extrapolated once steady (a steady state
        # shows after three passes at the earliest: shorter runs are stepped).
        for start, count in self.pass_runs:
            if count > 3:
                self._run_repeat(s, count, lambda s, nt=start: one_pass(s, nt), passes=True)
            else:
                for nt in range(start, start + count):
                    one_pass(s, nt)
        self._drain_and_store(s, groups, ax, out_beats, max(s[_PRM], res_ready[0]))

    def _input_box(self, s: list, ld: int, g_in: int, reuse: bool, ax, whole_rows: bool):
        """Phase 2 of a pass: its input box of ``g_in`` slot groups, once compute released the
        box two back; whole on the input loader, in halves or quarters over the loaders, or
        not at all when the pass reuses its tile's box (``FLAG_MINNER``). ``(ld, in_ready)``:
        the input loader's next decision cycle and when the box is in the buffer."""
        d, acc, t = self.d, self.acc, self.t
        free_in = s[_BR2] + 1

        def in_read(who, dec, dest, gate, groups, ax=ax):
            ad, ah, aw = ax
            rows, bus_rows = groups * ad.total * ah.total, groups * ad.length * ah.length
            gaps = bus_rows if not whole_rows else max(1, groups * (
                ad.length if ah.length != d.in_shape[1] else 1))
            acc[2] += bus_rows * aw.length * _BEAT
            return self._read(s, who, dec, dest, gate, rows * aw.total, rows, bus_rows,
                              gaps, lead=_leading_zeros(ad, ah, aw))

        if reuse:
            # every loader of a part steps over it (one decision cycle)
            for who in (("w", "i1", "w1") if self.i_quarter else
                        (self.i1_who,) if self.i_split else ()):
                s[self.walker[who]] += 1
            return ld + 1, _NEG
        if self.i_quarter:
            # a quarter on each loader (the weight loader's and port 3's settled on the pass
            # as port 2's are), all once the last box committed
            q = g_in // 4
            gate = max(free_in, s[_IC])
            ld, last = in_read("in", ld, "input", gate, q)
            lasts = [last]
            for who, kind in (("w", "input_quarter1"), ("i1", "input_half"),
                              ("w1", "input_quarter3")):
                settled = s[self.walker[who]] + (1 if self.queues else 2)
                s[self.walker[who]], last = in_read(who, settled, kind, gate, q)
                lasts.append(last)
            s[_IC] = max(lasts) + t.input_commit
            return ld, s[_IC]
        if self.i_split:
            # lower half on the input loader, upper half on the weight loader or port 2's (two
            # cycles after its step, its box then settled), both once the last box committed
            half = g_in // 2
            gate = max(free_in, s[_IC])
            ld, last = in_read("in", ld, "input", gate, half)
            who = self.i1_who
            settled = s[self.walker[who]] + (1 if self.queues else 2)
            s[self.walker[who]], last1 = in_read(who, settled, "input_half", gate, g_in - half)
            s[_IC] = max(last, last1) + t.input_commit
            return ld, s[_IC]
        ld, last = in_read("in", ld, "input", free_in, g_in)
        return ld, last + t.input_commit

    def _drain_and_store(self, s: list, groups: int, ax, out_beats: int, inputs: int) -> None:
        """A tile's drain, once its sums are committed and its records and residual box
        (``inputs``: the later of the two) are in, then its store (with a fused pool, of the
        pooled tile; ``FLAG_DFOLD``: two boxes)."""
        t, mem, acc = self.t, self.mem, self.acc
        ext_d, ext_h, ext_w = (a.ext for a in ax)
        # What the store writes: the tile, or with a fused pool the pooled tile.
        st_d, st_h, st_w = (e >> h for e, h in zip((ext_d, ext_h, ext_w), self.halved,
                                                   strict=True))
        st_rows = groups * st_d * st_h
        st_beats = st_rows * st_w
        commit = s[_CR1] + self.pe_latency + 1 + t.psum_commit
        ready = max(s[_DRW], commit, inputs)
        if self.psum_pool:
            # the signs (a group a cycle), then per pooled voxel its window's words (a read a
            # cycle) and its word's beats (every lane of the word, a group a cycle)
            drain = groups + self._pooled_drain(groups, ext_d, ext_h, ext_w)
            into_buffer = st_beats
        else:
            drain = into_buffer = out_beats
        rel = ready + drain + 1
        # output buffer half of tile j-2 must have been stored
        rel = max(rel, s[_SR2] + 1 + into_buffer + 1 - t.post_slack)
        s[_DR2], s[_DR1] = s[_DR1], rel
        s[_DRW] = rel + (t.fused_pool_gap if self.fused and not self.psum_pool else 1)
        # store
        out_valid = t.out_valid + (t.pool_latency if self.fused and not self.psum_pool else 0)
        cmd = max(s[_STW], rel + out_valid) + 1
        # FLAG_DFOLD: one box per half of the groups, the second's command right after the
        # first's status
        boxes = self.out_boxes
        last_w = _write_last(mem, t, cmd, st_beats // boxes, st_rows // boxes)
        for _ in range(boxes - 1):
            last_w = _write_last(mem, t, last_w + mem.write_response + t.write_status,
                                 st_beats // boxes, st_rows // boxes)
        s[_SR2], s[_SR1] = s[_SR1], last_w
        s[_STW] = last_w + mem.write_response + t.write_status
        s[_LAST] = s[_STW]
        acc[3] += st_beats * _BEAT

    def _pooled_drain(self, groups: int, ext_d: int, ext_h: int, ext_w: int) -> int:
        """Cycles of a tile's pooled voxels on :class:`~fcircnn.hw.psum_pool.PartialSumPool`
        (no back-pressure): per pooled voxel one read per word of its window, then one beat per
        group and depth lane of the word (all ``ext_d`` lanes with the depth unrolled, else
        one, the depths stepped through)."""
        reads = (1 + self.halved[1]) * (1 + self.halved[2])
        voxels = (ext_h >> self.halved[1]) * (ext_w >> self.halved[2])
        if self.lanes > 1:
            return voxels * (reads + ext_d * groups)
        return ext_d * voxels * (reads + groups)

    def _split_weights(self, s: list, ld: float, free: float) -> tuple[float, float]:
        """A ``FLAG_WSPLIT`` weight tile: the first half on the weight engine, the second on
        the input loader after its input box (or on port 3's), both once the previous tile
        committed. Returns the input loader's next decision and the cycle the tile is in the
        buffer."""
        if self.quarter:
            return self._quarter_weights(s, ld, free)
        half = self.w_beats // 2
        gate = max(free, s[_WC])
        s[_WL], last0 = self._read(s, "w", s[_WL], "weights", gate, half, 1, 1, 1)
        if self.w1_who == "in":
            ld, last1 = self._read(s, "in", ld, "weight_half", gate, half, 1, 1, 1)
        else:
            s[_W1L], last1 = self._read(s, "w1", s[_W1L], "weight_half", gate, half, 1, 1, 1)
        s[_WC] = max(last0, last1) + 1
        return ld, max(last0, last1) + 1

    def _quarter_weights(self, s: list, ld: float, free: float) -> tuple[float, float]:
        """A ``FLAG_WQUARTER`` weight tile: its quarters on the weight loader, the input
        loader (after its input box), port 3's and port 2's loaders, all once the previous
        tile committed. Returns the input loader's next decision and the cycle the tile is in
        the buffer."""
        q = self.w_beats // 4
        gate = max(free, s[_WC])
        s[_WL], last0 = self._read(s, "w", s[_WL], "weights", gate, q, 1, 1, 1)
        ld, last1 = self._read(s, "in", ld, "weight_quarter1", gate, q, 1, 1, 1)
        s[_W1L], last2 = self._read(s, "w1", s[_W1L], "weight_half", gate, q, 1, 1, 1)
        s[_I1L], last3 = self._read(s, "i1", s[_I1L], "weight_quarter3", gate, q, 1, 1, 1)
        s[_WC] = max(last0, last1, last2, last3) + 1
        return ld, s[_WC]

    def end_of_mt(self, s: list):
        s[_MD2], s[_MD1] = s[_MD1], s[_DR1] + 1

    # ---- the nest with steady-state extrapolation ------------------------------------------
    def run(self) -> tuple[float, list]:
        s = [0] * self.nstate
        s[_CR1] = s[_CR2] = s[_DR1] = s[_DR2] = s[_SR1] = s[_SR2] = _NEG
        s[_MD1] = s[_MD2] = _NEG
        s[_PRM] = s[_WC] = s[_IC] = s[_BR1] = s[_BR2] = _NEG
        for i in range(_NSTATE, self.nstate):
            s[i] = _NEG
        dr, hr, wr = (_axis_runs(self.d, a) for a in range(3))
        mruns = _m_runs(self.d, self.core.tm)

        def mtile(s, groups):
            self._nest(s, dr, hr, wr, lambda s, ad, ah, aw, first: self.tile(
                s, groups, (ad, ah, aw), first))
            self.end_of_mt(s)

        if self.minner:
            # (td, th, tw) > mt: each tile's m-tiles in turn, the post records of every m-tile
            # on the first tile
            m_groups = [g for g, c in mruns for _ in range(c)]

            def tiles(s, ad, ah, aw, first):
                for mt, groups in enumerate(m_groups):
                    self.tile(s, groups, (ad, ah, aw), first, mt)
            self._nest(s, dr, hr, wr, tiles)
            self.end_of_mt(s)
        else:
            for groups, cm in mruns:
                self._run_repeat(s, cm, lambda s, groups=groups: mtile(s, groups))
        return s[_LAST], self.acc

    def _nest(self, s: list, dr, hr, wr, body) -> None:
        """Run ``body(s, ad, ah, aw, first)`` over the tiles (``w`` fastest) with the
        steady-state extrapolation; ``first``: the layer's first tile."""
        first = True
        for ad, cd in dr:
            def plane(s, ad=ad, first=first):
                first_row = first
                for ah, ch in hr:
                    def row(s, ah=ah, first_row=first_row):
                        first_tile = first_row
                        for aw, cw in wr:
                            self._run_repeat(s, cw, lambda s, aw=aw, ft=first_tile: body(
                                s, ad, ah, aw, ft))
                            first_tile = False
                    self._run_repeat(s, ch, row)
                    first_row = False
            self._run_repeat(s, cd, plane)
            first = False

    def _run_repeat(self, s: list, count: int, body, *, passes: bool = False) -> None:
        """Run ``body(s)`` ``count`` times; once an iteration shifts every (clamped) event
        time in scope by the same amount as the previous one did, and the rest not at all,
        extrapolate the remaining iterations exactly. ``passes``: the iterations are passes of
        one tile (:attr:`scopes`)."""
        moving, fixed, walkers = self.scopes[passes]
        prev_shift = None
        done = 0
        while done < count:
            self._clamp(s, moving, walkers)
            before = list(s)
            dests_before = [q.dests[:] for q in self.queues.values()]
            acc_before = list(self.acc)
            body(s)
            done += 1
            self._clamp(s, moving, walkers)
            diffs = {s[i] - before[i] for i in moving}
            still = all(s[i] == before[i] for i in fixed)
            same_dests = dests_before == [q.dests for q in self.queues.values()]
            if len(diffs) == 1 and still and same_dests:
                (shift,) = diffs
                if self.extrapolate and shift == prev_shift and done < count:
                    rem = count - done
                    inc = [a - b for a, b in zip(self.acc, acc_before, strict=True)]
                    for i in moving:
                        s[i] += shift * rem
                    for i in range(4):
                        self.acc[i] += inc[i] * rem
                    return
                prev_shift = shift
            else:
                prev_shift = None

    @staticmethod
    def _clamp(s: list, moving: list[int], walkers: list[int]) -> None:
        # Event times older than every walker's position can no longer bind: raise them to
        # the cycle before that floor (a gate one cycle after an event then still does not
        # bind a walker at the floor) so a steady state shifts the whole state uniformly.
        # Between passes the drain and store walkers may lag the floor: of what they read
        # only the last compute end is in scope, and it is never below the floor's cycle
        # before (it is the compute walker's position less one).
        floor = min(s[i] for i in walkers)
        for i in moving:
            if s[i] < floor:
                s[i] = floor - 1


def _pool_pass(d: LayerDescriptor, mem: MemoryModel, t: EngineTiming) -> tuple[float, int]:
    """Cycles from the engine's start to its ``done`` and the bytes moved, of a pool pass."""
    D, H, W = d.in_shape
    n_in = D * H * W
    Do, Ho, Wo = d.out_shape
    n_out = Do * Ho * Wo
    # CMaxPool's axis stages insert virtual (padding) positions after a sweep's last real one
    # while windows still end in the trailing padding; the input waits during them. The w stage
    # inserts voxels per row, the h stage lines of Wo voxels per plane, the d stage planes.
    # Per axis the input index the last window ends at (past the map: trailing padding).
    ends = [(o - 1) * s + k - 1 - p for k, p, s, o in zip(
        d.pool_window, d.pool_padding, d.pool_stride, d.out_shape, strict=True)]
    virtual = [max(0, e - (n - 1)) for e, n in zip(ends, d.in_shape, strict=True)]
    inserted = D * H * virtual[2] + D * virtual[1] * Wo + virtual[0] * Ho * Wo
    # The input voxel that completes the last window: the voxels after it on an axis that no
    # window takes (an odd map under a window of 2, no padding) still stream in, after it.
    need = [min(e, n - 1) for e, n in zip(ends, d.in_shape, strict=True)]
    need_rows = need[0] * H + need[1] + 1
    completing = (need_rows - 1) * W + need[2] + 1   # beats up to it
    groups = -(-d.in_slots // 8)
    t_now = 0.0
    end = 0.0
    # A step moves pool_lanes groups at once, each lane on its own port: a step takes what one
    # group takes.
    for _ in range(-(-groups // mem.pool_lanes)):
        cmd = t_now  # both commands handshake in the CMD cycle
        last_in = _read_last(mem, t, cmd, n_in, D * H, D * H, 1) + inserted
        complete = last_in if completing == n_in else _read_last(
            mem, t, cmd, completing, need_rows, need_rows, 1)
        last_out = max(complete + t.post_latency + t.pool_latency,
                       _write_last(mem, t, cmd, n_out, Do * Ho))
        # the step ends with the later of the read's status and the last write's
        end = max(last_in + t.read_status, last_out + mem.write_response + t.write_status) - 1
        t_now = end + 1
    return end, groups * (n_in + n_out) * _BEAT


def memory_of(acc: AcceleratorConfig, memory: MemoryModel | None = None) -> MemoryModel:
    """``memory`` (default :class:`MemoryModel`) with ``acc``'s AXI ports (its own weight
    engine when the accelerator has a weight port, :class:`~fcircnn.arch.ports.PortMap`) and
    its loaders' command queue (``dma_queue``)."""
    mem = memory or MemoryModel()
    if PortMap(acc.axi_ports).weight_loader and not mem.weight_engine:
        mem = replace(mem, weight_engine=True)
    if acc.dma_queue > mem.dma_queue:
        mem = replace(mem, dma_queue=acc.dma_queue)
    ports = PortMap(acc.axi_ports)
    lanes = ports.pool_lanes
    if lanes > mem.pool_lanes:
        mem = replace(mem, pool_lanes=lanes)
    if ports.input_half >= 2 and not mem.input_half_engine:
        mem = replace(mem, input_half_engine=True)
    if ports.weight_half >= 2 and not mem.weight_half_engine:
        mem = replace(mem, weight_half_engine=True)
    return mem


def model_descriptor(d: LayerDescriptor, core: CoreConfig, B: int,
                     memory: MemoryModel | None = None,
                     timing: EngineTiming | None = None) -> dict:
    """Model one descriptor; return ``cycles`` (the cycle entry), ``span`` (to the next
    fetch), ``pe_busy``, ``dma_stall``, ``ddr_bytes`` and ``steps`` (recurrence steps).

    The result depends on its arguments alone (all immutable), so it is remembered: the
    compiler models a descriptor to choose its port split, and the network's model takes the
    chosen one again (:data:`MODEL_CACHE` entries, least recently used dropped first)."""
    return dict(_model_descriptor(d, core, B, memory or MemoryModel(), timing or EngineTiming()))


#: Descriptors :func:`model_descriptor` remembers (a sweep point's network has tens; its
#: port-split candidates a few times more).
MODEL_CACHE = 4096


@functools.lru_cache(maxsize=MODEL_CACHE)
def _model_descriptor(d: LayerDescriptor, core: CoreConfig, B: int, mem: MemoryModel,
                      t: EngineTiming) -> dict:
    fetch_last = _read_last(mem, t, 0, DESCRIPTOR_BYTES // _BEAT, 1, 1, 1, t.fetch_setup)
    start = fetch_last + t.read_status - 1 + t.dispatch   # engine's first decision cycle
    if d.op == OP_POOL:
        done, moved = _pool_pass(d, mem, t)
        pe, stall, steps = 0, 0, 1
    else:
        conv = _Conv(d, core, B, mem, t)
        done, acc = conv.run()
        pe, stall, moved, steps = acc[0], acc[1], acc[2] + acc[3], conv.steps
    entry = start + done + t.entry_write
    cycles = round(entry)
    span = cycles + 1 + mem.write_response + t.write_status
    return {"cycles": cycles, "span": span, "pe_busy": int(pe), "dma_stall": round(stall),
            "ddr_bytes": int(moved) + DESCRIPTOR_BYTES + _BEAT, "steps": steps}
