"""Design-space exploration: which core configuration runs a network fastest on a device.

:func:`run_sweep` enumerates a :class:`SweepSpace` (``Tn, Tm, Td, Tr, Tc``, block size ``B``,
whether the depth loop is unrolled, one core or a spatial core plus a 1x1x1 "pointwise" core),
turns every point into an :class:`~fcircnn.models.config.AcceleratorConfig` for the network,
and evaluates it with the same three tools a user runs one by one:

1. the compiler's checks (:func:`fcircnn.gen.plan.plan_network`, run by the performance
   model): a point whose hardware cannot run some layer is *illegal* (the reason is kept);
2. the calibrated resource estimator (:func:`fcircnn.gen.estimate.estimate_resources`): a point
   over ``cap`` of any device resource is *over* (the binding resource is kept);
3. the performance model (:func:`fcircnn.gen.perf_network.model_network`): cycles, effective
   GOP/s, GOP/s per DSP, PE utilisation and the DDR bandwidth needed.

The best point maximises effective GOP/s among the points that fit (ties: fewer DSPs). The
paper's configurations (or any accelerator files given as references) are evaluated the same
way and marked in the CSV, the table and the plot.
"""

from __future__ import annotations

import csv
import itertools
import math
import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from fcircnn.arch.ports import AXI_PORTS, DMA_QUEUE
from fcircnn.models.config import (
    MAX_CHANNEL_TILE,
    MAX_TILE,
    AcceleratorConfig,
    ConfigError,
    NetworkConfig,
    bind_accelerator,
    channel_tile_problems,
)
from fcircnn.models.files import atomic_write

from .estimate import DEFAULT_CAP, format_cap

__all__ = [
    "DEVICES",
    "RESOURCE_NAMES",
    "Device",
    "Evaluation",
    "Objective",
    "Point",
    "SweepError",
    "SweepResult",
    "SweepSpace",
    "accelerator_for",
    "efficiency_front",
    "evaluate",
    "max_jobs",
    "pareto_front",
    "plot_pareto",
    "run_sweep",
    "write_accelerator_yaml",
    "write_csv",
]

#: Resource keys, in report order.
RESOURCE_NAMES: tuple[str, ...] = ("dsp", "bram36", "lut", "ff")


class SweepError(ValueError):
    """A sweep that cannot give an answer (bad range, no legal point); the message says why."""


@dataclass(frozen=True)
class Device:
    """A target device: Vivado part, board part and the resources a design may use."""

    name: str
    part: str
    board: str | None
    dsp: int
    bram36: int
    lut: int
    ff: int

    @property
    def resources(self) -> dict[str, int]:
        """``{"dsp": ..., "bram36": ..., "lut": ..., "ff": ...}``."""
        return {k: getattr(self, k) for k in RESOURCE_NAMES}


#: Devices known by name (``--device``).
DEVICES: dict[str, Device] = {
    "zcu102": Device("zcu102", "xczu9eg-ffvb1156-2-e", "xilinx.com:zcu102:part0:3.4",
                     dsp=2520, bram36=912, lut=274080, ff=548160),
}


@dataclass(frozen=True)
class Point:
    """One hardware configuration of the sweep.

    ``pointwise`` is ``None`` for one core running every layer, else ``(Tn, Tm)`` of a second
    core with a 1x1x1 kernel (same ``Td, Tr, Tc``) that runs the 1x1x1 convolutions, the FC
    layers and global average pooling, as in the paper's 3D ResNet-18 design. ``axi_ports``:
    the accelerator's AXI ports (:class:`~fcircnn.arch.ports.PortMap`); ``dma_queue``: the read
    commands each loader keeps in flight.
    """

    B: int
    tn: int
    tm: int
    td: int
    tr: int
    tc: int
    unroll_td: bool
    pointwise: tuple[int, int] | None = None
    axi_ports: int = 1
    dma_queue: int = 1

    @property
    def label(self) -> str:
        """``Tn/Tm/Td/Tr/Tc`` with ``u`` for an unrolled depth loop, ``+pw`` core, ``@2p``
        for two AXI ports and ``q2`` for a command queue of two."""
        text = f"{self.tn}/{self.tm}/{self.td}{'u' if self.unroll_td else ''}/{self.tr}/{self.tc}"
        if self.pointwise is not None:
            text += f"+pw{self.pointwise[0]}/{self.pointwise[1]}"
        if self.axi_ports != 1:
            text += f"@{self.axi_ports}p"
        if self.dma_queue != 1:
            text += f"q{self.dma_queue}"
        return text if self.B == 8 else f"B{self.B}:{text}"


def _flag(field: str) -> str:
    """The ``fcircnn sweep`` flag of the :class:`SweepSpace` field ``field`` (messages name
    the flag)."""
    return "--block-size" if field == "block_sizes" else "--" + field.replace("_", "-")


def max_jobs() -> int:
    """The most worker processes a sweep starts: the CPUs this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def _values(name: str, values: Iterable[int]) -> tuple[int, ...]:
    values = tuple(values)
    if not values:
        raise SweepError(f"{_flag(name)}: the range is empty")
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise SweepError(f"{_flag(name)}: values must be positive integers, not {v!r}")
    return tuple(sorted(set(values)))


@dataclass(frozen=True)
class SweepSpace:
    """The ranges of a sweep (every combination is one :class:`Point`).

    ``cores`` holds 1 (one core) and/or 2 (spatial core + pointwise core, whose ``(Tn, Tm)``
    come from ``pointwise``). ``block_sizes`` empty means the network's own block size.
    ``axi_ports``: the AXI port counts swept (:data:`~fcircnn.arch.ports.AXI_PORTS`);
    ``dma_queue``: the command-queue depths swept (:data:`~fcircnn.arch.ports.DMA_QUEUE`).
    """

    tn: tuple[int, ...] = (8, 16, 32, 64)
    tm: tuple[int, ...] = (32, 64, 128, 256)
    td: tuple[int, ...] = (1, 2, 3, 4)
    tr: tuple[int, ...] = (7, 8, 14, 16)
    tc: tuple[int, ...] = (7, 8, 14, 16)
    unroll_td: tuple[bool, ...] = (False, True)
    cores: tuple[int, ...] = (1, 2)
    pointwise: tuple[tuple[int, int], ...] = ((8, 32), (16, 64))
    block_sizes: tuple[int, ...] = ()
    axi_ports: tuple[int, ...] = (1,)
    dma_queue: tuple[int, ...] = (1,)

    def __post_init__(self) -> None:
        for name in ("tn", "tm", "td", "tr", "tc"):
            object.__setattr__(self, name, _values(name, getattr(self, name)))
        if not self.unroll_td:
            raise SweepError("--unroll-td: the range is empty")
        bad = [c for c in self.cores if c not in (1, 2)]
        if bad or not self.cores:
            raise SweepError(f"--cores: allowed values are 1 and 2, not {list(self.cores)}")
        if 2 in self.cores and not self.pointwise:
            raise SweepError("--pointwise: two-core points need at least one (Tn, Tm) pair")
        bad = [n for n in self.axi_ports if n not in AXI_PORTS]
        if bad or not self.axi_ports:
            raise SweepError(f"--axi-ports: allowed values are "
                             f"{', '.join(map(str, AXI_PORTS))}, not {list(self.axi_ports)}")
        bad = [n for n in self.dma_queue if n not in DMA_QUEUE]
        if bad or not self.dma_queue:
            raise SweepError(f"--dma-queue: allowed values are {DMA_QUEUE[0]}..{DMA_QUEUE[-1]}, "
                             f"not {list(self.dma_queue)}")
        from fcircnn.models.spectral import BLOCK_SIZES

        bad = [b for b in self.block_sizes if b not in BLOCK_SIZES]
        if bad:
            raise SweepError(f"--block-size: {bad} are not allowed; allowed: "
                             f"{list(BLOCK_SIZES)}")

    def check(self, network_B: int) -> None:
        """Refuse up front a range value that no point can use: a ``Tn`` or ``Tm`` the
        channel-tile rule (:func:`~fcircnn.models.config.channel_tile_problems`) rejects for
        every block size swept, a tile over the hardware's limits.

        Raises
        ------
        SweepError
            Naming the flag, the values and the rule.
        """
        blocks = self.block_sizes or (network_B,)
        limits = {"tn": MAX_CHANNEL_TILE, "tm": MAX_CHANNEL_TILE, "td": MAX_TILE,
                  "tr": MAX_TILE, "tc": MAX_TILE}
        for name, limit in limits.items():
            big = [v for v in getattr(self, name) if v > limit]
            if big:
                raise SweepError(f"--{name}: {big} over the hardware's limit of {limit}")
        big = [f"{a}x{b}" for a, b in self.pointwise if max(a, b) > MAX_CHANNEL_TILE]
        if big and 2 in self.cores:
            raise SweepError(f"--pointwise: {big} over the hardware's limit of "
                             f"{MAX_CHANNEL_TILE} for Tn and Tm")
        # (flag, value, Tn, Tm, the rule's fields that judge it): Tn and Tm are judged by
        # their own part of the rule, a pointwise pair by all of it.
        tiles = [("tn", v, v, 0, {"tn"}) for v in self.tn]
        tiles += [("tm", v, 0, v, {"tm"}) for v in self.tm]
        if 2 in self.cores:
            tiles += [("pointwise", f"{a}x{b}", a, b, {"tn", "tm"}) for a, b in self.pointwise]
        for flag, value, tn, tm, judged in tiles:
            why = [[m for f, m in channel_tile_problems(tn or B, tm or 16 * B, B) if f in judged]
                   for B in blocks]
            if all(why):
                rule = "; ".join(dict.fromkeys(m for ms in why for m in ms))
                raise SweepError(f"--{flag}: {value} is legal for no block size swept "
                                 f"(B = {', '.join(map(str, blocks))}): {rule}")

    def points(self, network_B: int) -> Iterator[Point]:
        """Every point of the space (``network_B`` when ``block_sizes`` is empty)."""
        pw: list[tuple[int, int] | None] = []
        if 1 in self.cores:
            pw.append(None)
        if 2 in self.cores:
            pw.extend(self.pointwise)
        for B, tn, tm, td, tr, tc, u, p, ports, queue in itertools.product(
                self.block_sizes or (network_B,), self.tn, self.tm, self.td, self.tr, self.tc,
                sorted(set(self.unroll_td)), pw, sorted(set(self.axi_ports)),
                sorted(set(self.dma_queue))):
            if td == 1 and u:
                continue  # unrolling a loop of one iteration is the same hardware
            yield Point(B, tn, tm, td, tr, tc, u, p, ports, queue)

    def size(self, network_B: int) -> int:
        """Number of points."""
        return sum(1 for _ in self.points(network_B))


def network_with_block_size(net: NetworkConfig, B: int) -> NetworkConfig:
    """``net`` with every layer's block size set to ``B`` (``net`` itself if already ``B``)."""
    if all(layer.block_size == B for layer in net.resolved):
        return net
    data = net.model_dump(mode="json", by_alias=True, exclude_unset=True)
    data["block_size"] = B
    for layer in data["layers"]:
        layer.pop("block_size", None)
    try:
        return NetworkConfig.model_validate(data)
    except ValidationError as exc:
        raise SweepError(f"network {net.name} with B = {B}: {exc}") from None


def _network_limits(net: NetworkConfig, *, pointwise: bool):
    """``(max_kernel, max_stride, max_pool_window)`` of the spatial core, taken over the layers
    it runs (all of them, or those a pointwise core does not take)."""
    kernel, stride, pool = [1, 1, 1], [1, 1, 1], [1, 1, 1]
    for layer in net.resolved:
        if layer.kind != "conv":
            continue
        if pointwise and layer.kernel == (1, 1, 1):
            continue
        kernel = [max(a, b) for a, b in zip(kernel, layer.kernel, strict=True)]
        stride = [max(a, b) for a, b in zip(stride, layer.stride, strict=True)]
        if layer.pool is not None:
            pool = [max(a, b) for a, b in zip(pool, layer.pool.window, strict=True)]
    return kernel, stride, pool


def accelerator_data(point: Point, net: NetworkConfig, device: Device, clock_mhz: float,
                     *, name: str = "sweep", network_file: str | None = None) -> dict[str, Any]:
    """The YAML-shaped accelerator file of ``point`` for ``net`` (see ``models/*.yaml``)."""
    kernel, stride, pool = _network_limits(net, pointwise=point.pointwise is not None)
    unroll = ["td", "tn", "tm"] if point.unroll_td else ["tn", "tm"]
    cores = []
    if point.pointwise is not None:
        ptn, ptm = point.pointwise
        cores.append({"name": "pointwise", "tn": ptn, "tm": ptm, "td": point.td,
                      "tr": point.tr, "tc": point.tc, "unroll": list(unroll),
                      "max_kernel": [1, 1, 1], "max_stride": [2, 2, 2],
                      "max_pool_window": pool})
    cores.append({"name": "spatial" if point.pointwise is not None else "main",
                  "tn": point.tn, "tm": point.tm, "td": point.td, "tr": point.tr,
                  "tc": point.tc, "unroll": unroll, "max_kernel": kernel,
                  "max_stride": stride, "max_pool_window": pool})
    device_data: dict[str, Any] = {"part": device.part, "resources": device.resources}
    if device.board:
        device_data["board"] = device.board
    return {"name": name, "network": network_file or f"{net.name}.yaml", "device": device_data,
            "clock_mhz": clock_mhz, "block_size": point.B, "bus_width": 128,
            "address_width": 40, "axi_ports": point.axi_ports, "dma_queue": point.dma_queue,
            "cores": cores}


def accelerator_for(point: Point, net: NetworkConfig, device: Device,
                    clock_mhz: float) -> AcceleratorConfig:
    """The validated accelerator of ``point``, bound to ``net`` (with block size ``point.B``).

    Raises
    ------
    ConfigError
        If the configuration file would be rejected (e.g. ``Tn`` not a multiple of ``B``).
    """
    net = network_with_block_size(net, point.B)
    return bind_accelerator(accelerator_data(point, net, device, clock_mhz), net,
                            file=f"sweep point {point.label}")


@dataclass(frozen=True)
class Evaluation:
    """What the sweep knows of one configuration.

    ``status``: ``"ok"`` (fits the device under the cap), ``"over"`` (some resource above the
    cap: ``binding`` names the one furthest over) or ``"illegal"`` (the configuration or the
    compiler rejects it: ``reason``). Performance fields are 0 for illegal points.
    """

    label: str
    status: str
    reason: str = ""
    binding: str = ""
    reference: str = ""
    dsp: int = 0
    bram36: float = 0.0
    lut: int = 0
    ff: int = 0
    cycles: int = 0
    latency_ms: float = 0.0
    effective_gops: float = 0.0
    gops_per_dsp: float = 0.0
    pe_utilization: float = 0.0
    ddr_gbs: float = 0.0
    point: Point | None = None

    def utilization(self, device: Device) -> dict[str, float]:
        """Share of each device resource this configuration uses."""
        return {k: getattr(self, k) / getattr(device, k) for k in RESOURCE_NAMES}


def evaluate(acc: AcceleratorConfig, device: Device, cap: float, *, label: str = "",
             reference: str = "", point: Point | None = None, memory=None) -> Evaluation:
    """Check, size and time one accelerator (see the module docstring); ``memory`` is the
    performance model's :class:`~fcircnn.gen.perf_model.MemoryModel` (default: the RTL's)."""
    from fcircnn.gen.estimate import estimate_resources
    from fcircnn.gen.perf_network import model_network
    from fcircnn.gen.plan import CompileError

    label = label or acc.name
    try:
        # compiles the network first: CompileError if it cannot run
        perf = model_network(acc, memory=memory)
    except CompileError as exc:
        return Evaluation(label, "illegal", reason=str(exc), reference=reference, point=point)
    total = estimate_resources(acc).total
    counts = {k: getattr(total, k) for k in RESOURCE_NAMES}
    ratios = {k: counts[k] / (cap * getattr(device, k)) for k in RESOURCE_NAMES}
    worst = max(ratios, key=ratios.__getitem__)
    over = ratios[worst] > 1.0
    return Evaluation(
        label, "over" if over else "ok", binding=worst if over else "", reference=reference,
        dsp=counts["dsp"], bram36=counts["bram36"], lut=counts["lut"], ff=counts["ff"],
        cycles=perf.cycles, latency_ms=perf.seconds * 1e3, effective_gops=perf.effective_gops,
        gops_per_dsp=perf.effective_gops / counts["dsp"] if counts["dsp"] else 0.0,
        pe_utilization=perf.pe_utilization, ddr_gbs=perf.ddr_bandwidth_gbs, point=point)


# ------------------------------------------------------------------------------------------
# Workers: each process validates the network once and evaluates points sent to it.

_WORKER: dict[str, Any] = {}


def _init_worker(net_data: dict[str, Any], device: Device, clock_mhz: float,
                 cap: float, memory=None) -> None:
    net = NetworkConfig.model_validate(net_data)
    _WORKER.update(net=net, device=device, clock=clock_mhz, cap=cap, memory=memory)


def _evaluate_point(point: Point) -> Evaluation:
    w = _WORKER
    try:
        acc = accelerator_for(point, w["net"], w["device"], w["clock"])
    except (ConfigError, SweepError) as exc:
        return Evaluation(point.label, "illegal", reason=str(exc), point=point)
    return evaluate(acc, w["device"], w["cap"], label=point.label, point=point,
                    memory=w["memory"])


@dataclass(frozen=True)
class Objective:
    """How a sweep ranks the points that fit: maximise ``maximise`` (``"gops"``, effective
    GOP/s, or ``"gops_per_dsp"``) among the points whose other figure is at least ``floor``
    (GOP/s per DSP when maximising GOP/s, GOP/s when maximising GOP/s per DSP); ties go to
    fewer DSPs."""

    maximise: str = "gops"
    floor: float = 0.0

    def __post_init__(self) -> None:
        if self.maximise not in ("gops", "gops_per_dsp"):
            raise SweepError(f"objective: maximise 'gops' or 'gops_per_dsp', not "
                             f"{self.maximise!r}")
        if not (self.floor >= 0 and math.isfinite(self.floor)):
            raise SweepError(f"objective: the floor must be a number >= 0, not {self.floor!r}")

    def _figures(self, e: Evaluation) -> tuple[float, float]:
        """(the figure maximised, the figure floored)."""
        if self.maximise == "gops":
            return e.effective_gops, e.gops_per_dsp
        return e.gops_per_dsp, e.effective_gops

    def admits(self, e: Evaluation) -> bool:
        return self._figures(e)[1] >= self.floor

    def key(self, e: Evaluation) -> tuple:
        return (-self._figures(e)[0], e.dsp, e.label)

    def describe(self) -> str:
        names = {"gops": "GOP/s", "gops_per_dsp": "GOP/s per DSP"}
        other = "gops_per_dsp" if self.maximise == "gops" else "gops"
        text = f"maximise {names[self.maximise]}"
        return text + (f" with {names[other]} >= {self.floor:g}" if self.floor else "")


@dataclass
class SweepResult:
    """All evaluations of a sweep, the references and the best point under ``objective``."""

    network: NetworkConfig
    device: Device
    cap: float
    evaluations: list[Evaluation]
    references: list[Evaluation] = field(default_factory=list)
    objective: Objective = field(default_factory=Objective)

    @property
    def fitting(self) -> list[Evaluation]:
        """The points that fit and meet the objective's floor, best first."""
        ok = [e for e in self.evaluations if e.status == "ok" and self.objective.admits(e)]
        return sorted(ok, key=self.objective.key)

    @property
    def counts(self) -> dict[str, int]:
        """The points by status: ``ok``, ``over`` and ``illegal`` (:class:`Evaluation`)."""
        return {s: sum(e.status == s for e in self.evaluations) for s in ("ok", "over", "illegal")}

    @property
    def best(self) -> Evaluation:
        """The best fitting point (:class:`SweepError` if none fits or meets the floor,
        naming why)."""
        fitting = self.fitting
        if fitting:
            return fitting[0]
        ok = [e for e in self.evaluations if e.status == "ok"]
        if ok:
            top = max(ok, key=lambda e: self.objective._figures(e)[1])
            raise SweepError(f"no fitting point meets the objective ({self.objective.describe()})"
                             f": the highest of the {len(ok)} fitting points is "
                             f"{top.label} at {top.effective_gops:.1f} GOP/s, "
                             f"{top.gops_per_dsp:.3f} GOP/s per DSP")
        raise SweepError(no_fit_message(self.evaluations, self.device, self.cap))


def no_fit_message(evaluations: Sequence[Evaluation], device: Device, cap: float) -> str:
    """Why no point of a sweep fits: the binding resource with the smallest need, or the most
    common reason the compiler gave."""
    legal = [e for e in evaluations if e.status != "illegal"]
    if not legal:
        reasons = Counter(e.reason for e in evaluations).most_common(3)
        text = "; ".join(f"{r} ({n} points)" for r, n in reasons)
        return (f"no point of the sweep is a legal configuration for this network ("
                f"{len(evaluations)} points): {text}")
    lines = []
    for k in RESOURCE_NAMES:
        need = min(getattr(e, k) for e in legal)
        limit = cap * getattr(device, k)
        if need > limit:
            text = (f"{k} (the smallest legal point needs {need:g}, the cap is {limit:g} = "
                    f"{format_cap(cap)} of {getattr(device, k)})")
            lines.append((need / limit, text))
    if not lines:  # each resource fits somewhere, but never all at once
        binding = Counter(e.binding for e in legal).most_common(1)[0][0]
        return (f"no legal point fits {device.name} under the {format_cap(cap)} cap: every "
                f"point is over on some resource, most often {binding}")
    lines.sort(reverse=True)
    return (f"no legal point fits {device.name} under the {format_cap(cap)} cap; binding resource: "
            + "; ".join(text for _, text in lines))


def run_sweep(net: NetworkConfig, space: SweepSpace, device: Device, *, clock_mhz: float = 200.0,
              cap: float = DEFAULT_CAP, jobs: int = 1,
              references: Sequence[AcceleratorConfig] = (),
              progress: Callable[[int, int], None] | None = None,
              objective: Objective | None = None, memory=None) -> SweepResult:
    """Evaluate every point of ``space`` for ``net`` on ``device`` (``jobs`` processes, at most
    one per point); the result ranks them by ``objective`` (default: the most GOP/s).

    ``memory`` (a :class:`~fcircnn.gen.perf_model.MemoryModel`, default the RTL's) times every
    point and reference: a what-if of the memory system sweeps under it.

    ``references`` (e.g. the paper's accelerator files) are evaluated with the same model,
    clock and cap and returned separately. ``progress(done, total)`` is called as points finish.

    Raises
    ------
    SweepError
        For a bad ``cap``, ``jobs`` outside ``1..max_jobs()``, or a range value no point can use
        (:meth:`SweepSpace.check`).
    """
    if not 0 < cap <= 1:
        raise SweepError(f"cap must be in (0, 1], not {cap}")
    if not 1 <= jobs <= max_jobs():
        raise SweepError(f"jobs must be in 1..{max_jobs()} (the CPUs this process may use), "
                         f"not {jobs}")
    space.check(net.block_size)
    points = list(space.points(net.block_size))
    jobs = min(jobs, len(points))  # never more workers than points
    net_data = net.model_dump(mode="json", by_alias=True, exclude_unset=True)
    evaluations: list[Evaluation] = []
    total = len(points)
    if jobs <= 1:
        _init_worker(net_data, device, clock_mhz, cap, memory)
        for point in points:
            evaluations.append(_evaluate_point(point))
            if progress:
                progress(len(evaluations), total)
    else:
        # One point per task, submitted in a seeded random order and counted as each
        # finishes: the first tick comes after one point, not a chunk, and the rate so far
        # predicts the rest (small and large points mixed); the results keep the points'
        # order.
        order = np.random.default_rng(0).permutation(total)
        done: dict[int, Evaluation] = {}
        with ProcessPoolExecutor(jobs, initializer=_init_worker,
                                 initargs=(net_data, device, clock_mhz, cap, memory)) as pool:
            futures = {pool.submit(_evaluate_point, points[i]): int(i) for i in order}
            for future in as_completed(futures):
                done[futures[future]] = future.result()
                if progress:
                    progress(len(done), total)
        evaluations = [done[i] for i in range(total)]
    refs = [evaluate(acc, device, cap, label=acc.name, reference="reference", memory=memory)
            for acc in references]
    return SweepResult(net, device, cap, evaluations, refs, objective or Objective())


# ------------------------------------------------------------------------------------------
# Reports


_CSV_FIELDS = ("label", "reference", "status", "binding", "B", "tn", "tm", "td", "tr", "tc",
               "unroll_td", "pointwise", "dsp", "bram36", "lut", "ff", "cycles", "latency_ms",
               "effective_gops", "gops_per_dsp", "pe_utilization", "ddr_gbs", "reason")


def write_csv(result: SweepResult, path: str | os.PathLike[str]) -> Path:
    """Every point (then the references) as one CSV row each; returns the path."""
    return atomic_write(path, lambda f: _write_rows(result, f), binary=False)


def _write_rows(result: SweepResult, f) -> None:
    writer = csv.DictWriter(f, fieldnames=_CSV_FIELDS)
    writer.writeheader()
    for ev in [*result.evaluations, *result.references]:
        row = evaluation_row(ev)
        row["unroll_td"] = "" if row["unroll_td"] is None else int(row["unroll_td"])
        row["pointwise"] = "x".join(map(str, row["pointwise"] or ()))
        row = {k: "" if v is None else v for k, v in row.items()}
        for k in ("latency_ms", "effective_gops", "gops_per_dsp", "pe_utilization",
                  "ddr_gbs", "bram36"):
            row[k] = f"{row[k]:.4f}"
        writer.writerow(row)


def evaluation_row(ev: Evaluation) -> dict[str, Any]:
    """One evaluation as the fields of a ``sweep.csv`` row (:data:`_CSV_FIELDS`), unformatted:
    the point's parameters are ``None`` for a reference, ``pointwise`` a ``[Tn, Tm]`` list or
    ``None``."""
    row = {k: v for k, v in asdict(ev).items() if k in _CSV_FIELDS}
    p = ev.point
    row.update(B=None, tn=None, tm=None, td=None, tr=None, tc=None, unroll_td=None,
               pointwise=None)
    if p is not None:
        row.update(B=p.B, tn=p.tn, tm=p.tm, td=p.td, tr=p.tr, tc=p.tc, unroll_td=p.unroll_td,
                   pointwise=None if p.pointwise is None else list(p.pointwise))
    return {k: row[k] for k in _CSV_FIELDS}


def result_json(result: SweepResult, top: int) -> dict[str, Any]:
    """``sweep --json``: the counts, the ``top`` best fitting points, the efficiency front and
    the references, each point as :func:`evaluation_row`."""
    return {"network": result.network.name, "device": result.device.name, "cap": result.cap,
            "objective": result.objective.describe(), "points": len(result.evaluations),
            "counts": result.counts, "top": [evaluation_row(e) for e in result.fitting[:top]],
            "front": [evaluation_row(e) for e in efficiency_front(result.evaluations)],
            "references": [evaluation_row(e) for e in result.references]}


def _front(evaluations: Sequence[Evaluation], order: Callable[[Evaluation], Any],
           figure: Callable[[Evaluation], float]) -> list[Evaluation]:
    """The fitting points, taken in ``order``, that each beat every earlier one on
    ``figure``."""
    front, best = [], -math.inf
    for e in sorted((e for e in evaluations if e.status == "ok"), key=order):
        if figure(e) > best:
            front.append(e)
            best = figure(e)
    return front


def efficiency_front(evaluations: Sequence[Evaluation]) -> list[Evaluation]:
    """The fitting points not dominated in (more GOP/s, more GOP/s per DSP), by falling GOP/s:
    what the objective picks from for every floor."""
    return _front(evaluations, lambda e: (-e.effective_gops, -e.gops_per_dsp),
                  lambda e: e.gops_per_dsp)


def pareto_front(evaluations: Sequence[Evaluation], cost: str) -> list[Evaluation]:
    """The fitting points not dominated in (more GOP/s, less ``cost``), by rising cost."""
    return _front(evaluations, lambda e: (getattr(e, cost), -e.effective_gops),
                  lambda e: e.effective_gops)


def plot_pareto(result: SweepResult, path: str | os.PathLike[str]) -> Path:
    """PNG with GOP/s against DSP and against BRAM36: every fitting point, the Pareto front,
    the best point and the references; returns the path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 5), constrained_layout=True)
    ok = [e for e in result.evaluations if e.status == "ok"]
    best = result.fitting[0] if ok else None
    for ax, cost, title in ((axes[0], "dsp", "DSP48E2"), (axes[1], "bram36", "BRAM36")):
        ax.scatter([getattr(e, cost) for e in ok], [e.effective_gops for e in ok], s=8,
                   color="0.7", label=f"fitting points ({len(ok)})")
        front = pareto_front(result.evaluations, cost)
        ax.plot([getattr(e, cost) for e in front], [e.effective_gops for e in front], "-o",
                color="tab:blue", ms=3, label="Pareto front")
        if best is not None:
            ax.scatter([getattr(best, cost)], [best.effective_gops], marker="*", s=200,
                       color="tab:green", zorder=5, label=f"best {best.label}")
        for ref in result.references:
            if ref.status == "illegal":
                continue
            ax.scatter([getattr(ref, cost)], [ref.effective_gops], marker="X", s=120,
                       color="tab:red", zorder=6, label=f"reference {ref.label} (model)")
        ax.axvline(result.cap * getattr(result.device, cost), color="k", ls="--", lw=0.8,
                   label=f"{format_cap(result.cap)} of {result.device.name}")
        ax.set_xlabel(title)
        ax.set_ylabel("effective GOP/s")
        ax.set_title(f"{result.network.name} on {result.device.name}: GOP/s vs {title}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    path = Path(path)
    atomic_write(path, lambda f: fig.savefig(f, dpi=120, format="png"))
    plt.close(fig)
    return path


def write_accelerator_yaml(point: Point, net: NetworkConfig, device: Device, clock_mhz: float,
                           path: str | os.PathLike[str], *, name: str,
                           network_file: str | None = None, comment: str = "") -> Path:
    """Write the accelerator file of ``point``, written whole or not at all.

    By default the network is written into the file (``network:`` a mapping, with the point's
    block size), so the file works wherever it is copied; ``network_file`` instead refers to a
    network file (relative to ``path``'s folder, as
    :func:`~fcircnn.models.config.load_accelerator` resolves it).
    """
    import yaml

    sized = network_with_block_size(net, point.B)
    data = accelerator_data(point, sized, device, clock_mhz, name=name,
                            network_file=network_file)
    if network_file is None:
        data["network"] = sized.model_dump(mode="json", by_alias=True, exclude_unset=True)
    text = "".join(f"# {line}\n" if line else "#\n" for line in comment.splitlines())
    text += yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=100)
    return atomic_write(path, lambda f: f.write(text), binary=False)
