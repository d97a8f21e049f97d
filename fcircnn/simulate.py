"""``fcircnn sim``: run a compiled network (or some of its layers) on the generated RTL.

The steps, each usable on its own:

1. :func:`prepare` -- load the accelerator file, scale its network
   (:func:`fcircnn.models.scale.scale_accelerator`), check the ``--layers`` names, compile the
   DDR image (:func:`fcircnn.gen.compiler.compile_network`) and keep the selected layers
   (:func:`fcircnn.gen.select.select_layers`);
2. :func:`save_image` -- write it to ``<build>/sim-images/<hash>/`` (:meth:`DdrImage.save`; the
   hash covers the image bytes and memory map, so equal images share a folder);
3. :func:`run_rtl` -- build the accelerator top ``fcircnn_accel``
   (:class:`fcircnn.hw.accelerator.Accelerator`) once per hardware configuration and run the
   testbench :mod:`fcircnn.sim.tb_accelerator` on the image, polling its progress file;
4. :func:`read_results` and :func:`format_results` -- the per-layer table: cycles, effective
   GOP/s at the configured clock (dense-equivalent operations of the layer over its time),
   PE utilisation (``pe_busy / cycles``), DMA-stall share (``dma_stall / cycles``), PASS/FAIL,
   then the totals.

Testbench contract
------------------
The testbench reads its parameters with :func:`fcircnn.sim.runner.tb_params`: ``image_dir``
(the saved image), ``results`` (where to write the results JSON), ``backpressure`` (probability
in ``[0, 1)`` that the AXI memory model stalls a beat), ``latency`` (extra memory latency,
cycles), ``seed``, ``timeout_cycles`` and ``poll`` (``False``: wait for the interrupt). They
travel in the environment (``extra_env``), not in ``run_cocotb``'s hashed ``parameters``, so one
RTL build serves every image. While it runs the testbench appends lines ``"<done> <total>"``
(descriptors finished, descriptors in the list) to ``<results>.progress``. At the end it writes
``<results>``::

    {"status": "done" | "error" | "timeout", "error_code": int, "error_addr": int,
     "total_cycles": int, "pe_busy": int, "dma_stall": int, "sim_cycles": int,
     "wall_seconds": float,
     "layers": [{"name": str, "cycles": int, "pe_busy": int, "dma_stall": int,
                 "passed": bool, "mismatches": int, "first_mismatch": any}]}
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import math
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fcircnn.arch.ip import TOP_NAME
from fcircnn.report import format_table

__all__ = [
    "ACCEL_TESTBENCH",
    "ACCEL_TOPLEVEL",
    "LayerResult",
    "SimResults",
    "SimulationError",
    "build_dir_env",
    "estimate_timeout_cycles",
    "failed",
    "format_results",
    "image_hash",
    "parse_input_shape",
    "parse_layers",
    "parse_results",
    "prepare",
    "read_progress",
    "read_results",
    "results_json",
    "run_rtl",
    "save_image",
]

#: Verilog module name of the accelerator top (:data:`fcircnn.arch.ip.TOP_NAME`).
ACCEL_TOPLEVEL = TOP_NAME
#: cocotb module that runs a DDR image on it.
ACCEL_TESTBENCH = "fcircnn.sim.tb_accelerator"

_STATUSES = ("done", "error", "timeout")


class SimulationError(RuntimeError):
    """The simulation could not run or produced no usable results; the message says why."""


# ------------------------------------------------------------------------------------------
# Results


@dataclass(frozen=True)
class LayerResult:
    """One layer of a simulation (all passes of the layer summed).

    ``cycles``, ``pe_busy`` and ``dma_stall`` are clock cycles; ``passed`` means the output map
    equals the golden one bit for bit; ``first_mismatch`` is the testbench's description of the
    first differing value (``None`` when it passed); ``checked`` is false for a layer whose
    output no one could compare (its map reused by a later layer and no copy kept), which then
    counts as passed.
    """

    name: str
    cycles: int
    pe_busy: int
    dma_stall: int
    passed: bool
    mismatches: int = 0
    first_mismatch: Any = None
    checked: bool = True


@dataclass(frozen=True)
class SimResults:
    """The results JSON of the accelerator testbench (module docstring), validated."""

    status: str
    error_code: int
    error_addr: int
    total_cycles: int
    pe_busy: int
    dma_stall: int
    sim_cycles: int
    wall_seconds: float
    layers: tuple[LayerResult, ...] = field(default_factory=tuple)


def _int(data: Mapping[str, Any], key: str, where: str) -> int:
    value = data.get(key, 0)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{where}{key} must be a non-negative integer, not {value!r}")
    return value


def parse_results(data: Any) -> SimResults:
    """Validate the decoded results JSON and return it as :class:`SimResults`.

    Passes of one layer reported separately (same ``name``) are summed. Missing counters
    count as 0.

    Raises
    ------
    ValueError
        Naming the key, if the data does not have the documented format.
    """
    if not isinstance(data, Mapping):
        raise ValueError("results must be a JSON object")
    status = data.get("status")
    if status not in _STATUSES:
        raise ValueError(f"status must be one of {', '.join(_STATUSES)}, not {status!r}")
    wall = data.get("wall_seconds", 0.0)
    if isinstance(wall, bool) or not isinstance(wall, (int, float)) or wall < 0:
        raise ValueError(f"wall_seconds must be a non-negative number, not {wall!r}")
    raw_layers = data.get("layers", [])
    if not isinstance(raw_layers, list):
        raise ValueError("layers must be a list")
    merged: dict[str, LayerResult] = {}
    for i, entry in enumerate(raw_layers):
        where = f"layers[{i}]."
        if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
            raise ValueError(f"{where}name must be a string")
        passed = entry.get("passed")
        if not isinstance(passed, bool):
            raise ValueError(f"{where}passed must be true or false, not {passed!r}")
        checked = entry.get("checked", True)
        if not isinstance(checked, bool):
            raise ValueError(f"{where}checked must be true or false, not {checked!r}")
        layer = LayerResult(entry["name"], _int(entry, "cycles", where),
                            _int(entry, "pe_busy", where), _int(entry, "dma_stall", where),
                            passed, _int(entry, "mismatches", where),
                            entry.get("first_mismatch"), checked)
        old = merged.get(layer.name)
        if old is not None:
            layer = LayerResult(
                layer.name, old.cycles + layer.cycles, old.pe_busy + layer.pe_busy,
                old.dma_stall + layer.dma_stall, old.passed and layer.passed,
                old.mismatches + layer.mismatches,
                old.first_mismatch if old.first_mismatch is not None else layer.first_mismatch,
                old.checked and layer.checked)
        merged[layer.name] = layer
    return SimResults(
        status, _int(data, "error_code", ""), _int(data, "error_addr", ""),
        _int(data, "total_cycles", ""), _int(data, "pe_busy", ""), _int(data, "dma_stall", ""),
        _int(data, "sim_cycles", ""), float(wall), tuple(merged.values()))


def read_results(path: str | os.PathLike[str]) -> SimResults:
    """Read and validate a results JSON file (:func:`parse_results`).

    Raises
    ------
    SimulationError
        If the file is missing, not JSON, or not in the documented format.
    """
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise SimulationError(f"no simulation results at {path}: {exc.strerror or exc}") from None
    try:
        return parse_results(json.loads(text))
    except ValueError as exc:  # json.JSONDecodeError is a ValueError
        raise SimulationError(f"bad simulation results in {path}: {exc}") from None


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def _gops_value(ops: int, cycles: int, clock_mhz: float) -> float | None:
    """Effective GOP/s of ``ops`` in ``cycles`` at the clock; ``None`` without either."""
    return ops / (cycles / (clock_mhz * 1e6)) / 1e9 if ops and cycles else None


def _gops(ops: int, cycles: int, clock_mhz: float) -> str:
    value = _gops_value(ops, cycles, clock_mhz)
    return "-" if value is None else f"{value:.2f}"


def _mismatch(layer: LayerResult) -> str:
    if not layer.checked:
        return "not checked (map reused)"
    if layer.passed:
        return "PASS"
    text = f"FAIL ({layer.mismatches} mismatches"
    if layer.first_mismatch is not None:
        first = layer.first_mismatch
        text += f", first {first if isinstance(first, str) else json.dumps(first)}"
    return text + ")"


def failed(results: SimResults, expected: Sequence[str]) -> bool:
    """Whether the run failed: status not ``done``, a layer failed, or an expected layer is
    missing from the results."""
    names = {layer.name for layer in results.layers}
    return (results.status != "done" or any(not layer.passed for layer in results.layers)
            or any(name not in names for name in expected))


def results_json(results: SimResults, dense_ops: Mapping[str, int], clock_mhz: float,
                 expected: Sequence[str] = ()) -> dict[str, Any]:
    """What :func:`format_results` prints, as a JSON-ready dict: the status, the counters,
    per layer its cycles, effective GOP/s (``None`` without operations), PE-busy and DMA-stall
    cycles, whether it passed and its mismatches, the layers ``expected`` but not run, and
    ``passed`` (not :func:`failed`)."""
    def gops(ops, cycles):
        return _gops_value(ops, cycles, clock_mhz)

    seen = {layer.name for layer in results.layers}
    total = results.total_cycles or sum(layer.cycles for layer in results.layers)
    ops = sum(dense_ops.get(layer.name, 0) for layer in results.layers)
    return {
        "status": results.status, "error_code": results.error_code,
        "error_addr": results.error_addr, "total_cycles": total,
        "pe_busy": results.pe_busy, "dma_stall": results.dma_stall,
        "clock_mhz": clock_mhz, "dense_ops": ops, "effective_gops": gops(ops, total),
        "sim_cycles": results.sim_cycles, "wall_seconds": results.wall_seconds,
        "layers": [{"name": layer.name, "cycles": layer.cycles,
                    "effective_gops": gops(dense_ops.get(layer.name, 0), layer.cycles),
                    "pe_busy": layer.pe_busy, "dma_stall": layer.dma_stall,
                    "passed": layer.passed, "checked": layer.checked,
                    "mismatches": layer.mismatches,
                    "first_mismatch": layer.first_mismatch} for layer in results.layers],
        "not_run": [name for name in expected if name not in seen],
        "passed": not failed(results, expected),
    }


def format_results(results: SimResults, dense_ops: Mapping[str, int], clock_mhz: float,
                   expected: Sequence[str] = ()) -> str:
    """The per-layer table and the totals (text, no trailing newline).

    Parameters
    ----------
    results : SimResults
    dense_ops : mapping of layer name to int
        Dense-equivalent operations of each layer (``ResolvedLayer.dense_ops``; 0 for ``gap``).
    clock_mhz : float
        The accelerator clock; effective GOP/s = ``dense_ops / (cycles / clock)``.
    expected : sequence of str
        Layers that should have run; those missing from the results are listed as
        ``NOT RUN``.
    """
    rows = []
    for layer in results.layers:
        rows.append([layer.name, layer.cycles,
                     _gops(dense_ops.get(layer.name, 0), layer.cycles, clock_mhz),
                     _pct(layer.pe_busy, layer.cycles), _pct(layer.dma_stall, layer.cycles),
                     _mismatch(layer)])
    seen = {layer.name for layer in results.layers}
    missing = [name for name in expected if name not in seen]
    rows += [[name, "-", "-", "-", "-", "NOT RUN"] for name in missing]
    ops = sum(dense_ops.get(layer.name, 0) for layer in results.layers)
    total = results.total_cycles or sum(layer.cycles for layer in results.layers)
    n_pass = sum(layer.passed and layer.checked for layer in results.layers)
    unchecked = sum(not layer.checked for layer in results.layers)
    n_all = len(results.layers) + len(missing)
    rows.append(["total", total, _gops(ops, total, clock_mhz),
                 _pct(results.pe_busy, total), _pct(results.dma_stall, total),
                 f"{n_pass}/{n_all} PASS" + (f", {unchecked} not checked" if unchecked else "")])
    lines = format_table(["layer", "cycles", "GOP/s", "PE util", "DMA stall", "result"], rows)
    seconds = total / (clock_mhz * 1e6)
    status = f"status {results.status}"
    if results.status == "error":
        status += f" (error code {results.error_code}, address {results.error_addr:#x})"
    status += (f"; {total} cycles = {seconds * 1e6:.1f} us at {clock_mhz:g} MHz, "
               f"{ops / 1e9:.4f} GOP dense-equivalent")
    if results.wall_seconds:
        rate = results.sim_cycles / results.wall_seconds if results.sim_cycles else 0
        status += f"; simulated in {results.wall_seconds:.1f} s" + (
            f" ({rate:,.0f} cycles/s)" if rate else "")
    lines.append(status)
    lines.append("FAIL" if failed(results, expected) else "PASS")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------
# Preparation


def parse_layers(text: str | None) -> list[str] | None:
    """``--layers``: comma-separated layer names (spaces ignored); ``None`` for all layers.

    Raises
    ------
    ValueError
        If no name is given.
    """
    if text is None:
        return None
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise ValueError(f"--layers needs at least one layer name, not {text!r}")
    return names


def parse_input_shape(text: str | None) -> tuple[int, int, int] | None:
    """``--input``: ``DxHxW`` (three positive integers); ``None`` when not given.

    Raises
    ------
    ValueError
        Naming ``--input`` and the text, if it is not of that form.
    """
    if text is None:
        return None
    parts = text.strip().lower().split("x")
    if len(parts) != 3 or not all(p.strip().isdigit() and int(p) > 0 for p in parts):
        raise ValueError(f"--input must be DxHxW with three positive integers, e.g. 8x32x32, "
                         f"not {text!r}")
    return (int(parts[0]), int(parts[1]), int(parts[2]))


def prepare(config: str | os.PathLike[str], *, scale: int = 1,
            layers: Sequence[str] | None = None, seed: int = 0,
            input_shape: tuple[int, int, int] | None = None,
            reuse_maps: bool = False) -> tuple[Any, Any]:
    """Load, scale (channels by ``scale``; the input map ``input_shape`` if given, see
    :func:`fcircnn.models.scale.scale_network`), check ``layers``, compile (seeded; the maps
    laid out by liveness with ``reuse_maps``, whole networks only) and select.

    Returns
    -------
    (AcceleratorConfig, DdrImage)
        The scaled accelerator and the image running ``layers`` (all layers when ``None``).

    Raises
    ------
    ConfigError
        For the configuration file.
    ValueError
        For a bad scale factor (names ``S``), an input size too small for the network (names
        ``input``) or an unknown layer (lists the valid names; checked before compiling).
    fcircnn.gen.plan.CompileError
        If the scaled network cannot be compiled for the accelerator.
    """
    from fcircnn.gen.compiler import compile_network
    from fcircnn.gen.select import check_layer_names, select_layers
    from fcircnn.models.config import load_accelerator
    from fcircnn.models.scale import check_scale, scale_accelerator

    check_scale(scale)
    if reuse_maps and layers is not None:
        raise ValueError("reused maps run the whole network, not selected layers")
    acc = scale_accelerator(load_accelerator(config), scale, input_shape)
    if layers is not None:
        check_layer_names([r.name for r in acc.network.resolved], layers)
    image = compile_network(acc, seed=seed, reuse_maps=reuse_maps)
    if layers is not None:
        image = select_layers(image, layers)
    return acc, image


def image_hash(image: Any) -> str:
    """16 hex digits of the SHA-256 of the image bytes and its memory map."""
    key = hashlib.sha256(image.data)
    key.update(json.dumps(image.memory_map(), sort_keys=True).encode())
    key.update(json.dumps(sorted(image.expected)).encode())
    return key.hexdigest()[:16]


def save_image(image: Any, build: str | os.PathLike[str]) -> Path:
    """Save ``image`` to ``<build>/sim-images/<hash>/`` and return that folder.

    Raises
    ------
    OSError
        If the folder cannot be written.
    """
    folder = Path(build) / "sim-images" / image_hash(image)
    image.save(folder)
    return folder


def estimate_timeout_cycles(acc: Any, image: Any, backpressure: float = 0.0) -> int:
    """A generous cycle limit for running ``image``: 100,000 plus 20 times, per pass, the
    tile-quantised compute cycles (``m_tiles * n_tiles * taps * ceil(D/lanes) * H * W`` of the
    conv output, ``lanes`` the core's PE lanes) plus the beats of weights, inputs (once per
    output tile), residual and output, the beats divided by ``1 - backpressure``."""
    from fcircnn.arch.descriptor import FLAG_RESIDUAL
    from fcircnn.arch.geometry import core_lanes
    from fcircnn.gen.select import layer_descriptors
    from fcircnn.models.layout import BEAT_BYTES, ncdhw8_size

    stall = 1.0 / max(1.0 - backpressure, 0.01)
    total = 0.0
    for lp in image.plan.layers:
        for d in layer_descriptors(lp):
            core = acc.cores[d.core]
            D, H, W = d.conv_shape
            compute = (d.m_tiles * d.n_tiles * math.prod(d.kernel) * -(-D // core_lanes(core))
                       * H * W)
            beats = (d.weight_bytes + ncdhw8_size(d.in_slots, *d.in_shape) * d.m_tiles
                     + ncdhw8_size(d.out_slots, *d.out_shape)
                     + (ncdhw8_size(d.out_slots, *d.conv_shape)
                        if d.flags & FLAG_RESIDUAL else 0)) / BEAT_BYTES
            total += compute + beats * stall
    return int(100_000 + 20 * total)


# ------------------------------------------------------------------------------------------
# Running


@contextlib.contextmanager
def build_dir_env(build: str | os.PathLike[str] | None) -> Iterator[Path]:
    """Within the block, ``$FCIRCNN_BUILD_DIR`` is ``build`` (if given; restored after);
    yields the build root in effect (:func:`fcircnn.sim.runner.build_root`)."""
    old = os.environ.get("FCIRCNN_BUILD_DIR")
    if build is not None:
        os.environ["FCIRCNN_BUILD_DIR"] = str(Path(build).resolve())
    try:
        yield Path(os.environ.get("FCIRCNN_BUILD_DIR", "build")).resolve()
    finally:
        if build is not None:
            if old is None:
                os.environ.pop("FCIRCNN_BUILD_DIR", None)
            else:
                os.environ["FCIRCNN_BUILD_DIR"] = old


def read_progress(path: Path) -> tuple[int, int] | None:
    """The last complete ``"<done> <total>"`` line of a progress file (``None`` if none)."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        parts = line.split()
        if len(parts) == 2 and all(p.isdigit() for p in parts) and int(parts[1]) > 0:
            return int(parts[0]), int(parts[1])
    return None


class _Poller(threading.Thread):
    """Calls ``progress(done, total)`` from the progress file every ``interval`` seconds; the
    first time the file shows progress, ``progress(0, total)`` first: the simulation's pass
    starts there (within ``interval`` of its start), not before the build."""

    def __init__(self, path: Path, progress: Callable[[int, int], None],
                 interval: float = 0.5) -> None:
        super().__init__(daemon=True)
        self.path, self.progress, self.interval = path, progress, interval
        self.stop = threading.Event()
        self.last: tuple[int, int] | None = None

    def poll(self) -> None:
        state = read_progress(self.path)
        if state is not None and self.last is None and state[0] > 0:
            self.progress(0, state[1])
        if state is not None and (state != self.last or state[0] < state[1]):
            self.progress(*state)
            self.last = state

    def run(self) -> None:
        while not self.stop.wait(self.interval):
            self.poll()


def run_rtl(acc: Any, image_dir: Path, results: Path, *, simulator: str = "verilator",
            waves: bool = False, seed: int = 0, backpressure: float = 0.0,
            timeout_cycles: int = 1_000_000,
            progress: Callable[[int, int], None] | None = None,
            status: Callable[[str], None] | None = None) -> Path:
    """Build the accelerator (cached per configuration) and run the testbench on an image.

    Parameters
    ----------
    acc : AcceleratorConfig
        The hardware to build (``Accelerator.from_config(acc)``, converted by
        :func:`fcircnn.gen.generate.accelerator_verilog`, which caches the Verilog).
    image_dir, results : Path
        The saved image and the results JSON to write (its ``.progress`` file beside it).
    simulator, waves, seed, backpressure, timeout_cycles
        As for ``fcircnn sim``; ``waves`` is a separate build.
    progress : callable ``(done, total)``, optional
        Called from a polling thread while the simulation runs.
    status : callable, optional
        Told in a sentence what is being done before the simulation: converting or reusing
        the Verilog, building or reusing the simulator model.

    Returns
    -------
    Path
        The cocotb run folder (``sim.log``, results XML, Verilator waves).

    Raises
    ------
    SimulationError
        If the accelerator top or the testbench is not available, the build fails, or the
        cocotb test failed without writing ``results``.
    fcircnn.sim.runner.SimulatorUnavailable
        If the simulator is missing or too old.
    """
    from fcircnn.sim.runner import PARAMS_ENV, CocotbFailure, find_simulator, run_cocotb

    find_simulator(simulator)  # SimulatorUnavailable before anything is built
    try:
        import fcircnn.hw.accelerator  # noqa: F401
    except ImportError as exc:
        raise SimulationError(f"the accelerator top is not available "
                              f"(fcircnn.hw.accelerator): {exc}") from None
    from fcircnn.gen.generate import accelerator_verilog
    if importlib.util.find_spec(ACCEL_TESTBENCH) is None:
        raise SimulationError(f"the accelerator testbench {ACCEL_TESTBENCH} is not available")

    params = {"image_dir": str(image_dir), "results": str(results),
              "backpressure": backpressure, "latency": 0, "seed": seed,
              "timeout_cycles": timeout_cycles, "poll": False}
    from fcircnn.sim.tb_accelerator import output_path

    progress_file = Path(f"{results}.progress")
    for stale in (results, progress_file, output_path(results)):
        stale.unlink(missing_ok=True)
    poller = _Poller(progress_file, progress) if progress is not None else None
    if poller is not None:
        poller.start()
    try:
        # The run-time parameters go through the environment (FCIRCNN_TB_PARAMS, read by
        # tb_params()), not through the hashed ``parameters``: one build serves every image.
        xml = run_cocotb(accelerator_verilog(acc, status=status), ACCEL_TOPLEVEL,
                         ACCEL_TESTBENCH, simulator, parameters={},
                         extra_env={PARAMS_ENV: json.dumps(params)}, waves=waves, seed=seed,
                         verilator_opt=None, status=status)
        run_dir = Path(xml).parent
    except CocotbFailure as exc:
        if not results.is_file():
            raise SimulationError(str(exc)) from None
        run_dir = results.parent  # the results explain the failure
    except RuntimeError as exc:  # build failure
        raise SimulationError(str(exc)) from None
    finally:
        if poller is not None:
            poller.stop.set()
            poller.join()
            poller.poll()
    return run_dir

