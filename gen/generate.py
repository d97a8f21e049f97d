"""``fcircnn generate``: everything a hardware engineer needs for one accelerator configuration.

:func:`generate` writes, into an output folder::

    rtl/fcircnn_accel.v             the Verilog top (fcircnn.hw.accelerator.Accelerator)
    constraints/fcircnn_accel.xdc   out-of-context clock constraint (fcircnn.gen.vivado)
    vivado/create_project.tcl       Vivado project, IP packaging, block design and the
    vivado/package_ip.tcl           build to bitstream + hardware handoff for PYNQ
    vivado/block_design.tcl
    vivado/build.tcl
    include/fcircnn_regs.h          register map and DDR record layouts for C drivers
    python/fcircnn_regs.py          the same constants for Python (no imports)
    report.json                     config fingerprint, cores, files (see below)

and the command that builds the bitstream, ``cd <output>/vivado && vivado -mode batch -source
build.tcl`` (:attr:`GenerateResult.vivado_command`).

Every file starts with a comment naming the tool version, the configuration and its
fingerprint, :func:`config_fingerprint`: the SHA-256 of :func:`canonical_config` (the validated
accelerator and network as JSON with sorted keys and no whitespace). The output depends only on
the configuration and the tool versions: the same configuration gives byte-identical files.

``report.json``
---------------
``schema`` (1), ``tool`` (fcircnn and Amaranth versions), ``config`` (accelerator and network
names, fingerprint), ``top``, ``device``, ``clock_mhz``, ``clock_period_ns``, ``block_size``,
``bus_width``, ``address_width``, ``axi_ports``, ``cores`` (each core's parameters and the
layers it runs),
``files`` (path -> SHA-256 of the other generated files) and ``estimate``: resources per
component and performance on the configured network (:func:`estimate_report`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fcircnn.gen import TOOL_VERSION
from fcircnn.models.config import AcceleratorConfig

from . import headers, vivado
from .staging import staged_folder, target_conflict

__all__ = [
    "HEADER_PATH",
    "OUTPUT_FILES",
    "PYTHON_PATH",
    "REPORT_PATH",
    "GenerateError",
    "GenerateResult",
    "accelerator_verilog",
    "canonical_config",
    "config_fingerprint",
    "estimate_report",
    "generate",
    "render",
    "vivado_command",
]

#: Paths of the host files and the report, relative to the output folder.
HEADER_PATH = "include/fcircnn_regs.h"
PYTHON_PATH = "python/fcircnn_regs.py"
REPORT_PATH = "report.json"
#: Every file :func:`generate` writes, relative to the output folder (:func:`render`'s keys).
OUTPUT_FILES = (vivado.RTL_PATH, vivado.XDC_PATH, *(f"vivado/{n}" for n in vivado.SCRIPTS),
                HEADER_PATH, PYTHON_PATH, REPORT_PATH)


class GenerateError(Exception):
    """The files cannot be generated: the message says why (output folder not empty, not
    writable, a configuration the generators cannot build)."""


@dataclass(frozen=True)
class GenerateResult:
    """What :func:`generate` wrote.

    Attributes
    ----------
    output : pathlib.Path
        The output folder.
    files : tuple of str
        Paths written, relative to ``output``, in writing order.
    fingerprint : str
        :func:`config_fingerprint` of the configuration.
    vivado_command : str
        Shell command that builds the bitstream.
    """

    output: Path
    files: tuple[str, ...]
    fingerprint: str
    vivado_command: str


#: Accelerator keys added after fingerprints were first recorded, with their default: left out
#: of :func:`canonical_config` at that value, so the fingerprints of earlier configurations
#: (recordings, calibration points, build caches) hold. A default that changes what the
#: compiler makes of a configuration (``row_lanes``) changes its recordings: the model's PE
#: beats then differ from the recorded ones and the recording test asks for a new recording.
_LATER_KEYS = {"dma_queue": 1, "fold_input_rows": True, "row_lanes": True}
#: The same for a layer of the network (the keys of the time-domain layers).
_LATER_LAYER_KEYS = {"dense": False, "bias": False, "bn": False, "relu": False}


def canonical_config(acc: AcceleratorConfig) -> dict[str, Any]:
    """The validated accelerator and its network as plain JSON data (defaults applied; a key
    of :data:`_LATER_KEYS` or, in a layer, :data:`_LATER_LAYER_KEYS` at its earlier value left
    out)."""
    accelerator = acc.model_dump(mode="json", by_alias=True)
    for key, value in _LATER_KEYS.items():
        if accelerator.get(key) == value:
            del accelerator[key]
    network = acc.network.model_dump(mode="json")
    for layer in network["layers"]:
        for key, value in _LATER_LAYER_KEYS.items():
            if key in layer and layer[key] == value:
                del layer[key]
    return {"accelerator": accelerator, "network": network}


def config_fingerprint(acc: AcceleratorConfig) -> str:
    """SHA-256 (hex) of :func:`canonical_config` as JSON with sorted keys and no spaces."""
    text = json.dumps(canonical_config(acc), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _amaranth_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("amaranth")
    except PackageNotFoundError:  # pragma: no cover - amaranth is a dependency
        return "unknown"


def _banner(acc: AcceleratorConfig, fingerprint: str) -> list[str]:
    return [
        (f"Generated by fcircnn {TOOL_VERSION} (Amaranth {_amaranth_version()}); do not edit, "
         "regenerate."),
        f"Accelerator {acc.name} (network {acc.network.name}), config sha256 {fingerprint}",
    ]


def accelerator_verilog(acc: AcceleratorConfig, geometry=None, *, primitives: bool = False,
                        cache: bool = True, status: Callable[[str], None] | None = None) -> str:
    """Verilog text of the accelerator top level, module :data:`~fcircnn.gen.vivado.TOP_NAME`.

    ``primitives``: the form for Yosys and Vivado, whose DSP48E2 cascades are ``DSP48E2``
    instances (:func:`fcircnn.gen.verilog.to_verilog`); without it the form the simulators
    run, with their behavioural description.

    ``geometry``: as :meth:`~fcircnn.hw.accelerator.Accelerator.from_config`. Converting a
    paper-size design takes 20-90 s, so with ``cache`` the text is kept in
    ``<build root>/verilog`` (:func:`fcircnn.gen.verilog.build_root`) under a key of the
    configuration (:func:`config_fingerprint`), the geometry, the sources of the hardware and
    everything it imports (``fcircnn.hw``, ``.gen``, ``.models``) and the Amaranth version: any
    change to one of them converts again.

    ``status`` is told in a sentence whether the text is converted or reused.

    Raises
    ------
    GenerateError
        If the top level rejects the configuration.
    """
    from fcircnn.hw.accelerator import Accelerator

    from .verilog import build_root, to_verilog

    key = hashlib.sha256("\0".join([
        config_fingerprint(acc), repr(None if geometry is None else list(geometry)),
        _sources_digest(), _amaranth_version(), f"primitives={primitives}"]).encode()).hexdigest()
    cached = build_root() / "verilog" / f"{vivado.TOP_NAME}-{key[:24]}.v"
    if cache and cached.is_file():
        if status is not None:
            status(f"reusing the cached Verilog {cached}")
        return cached.read_text()
    if status is not None:
        status(f"converting {acc.name} to Verilog (Amaranth; a paper-size design takes a "
               "minute or more)")
    try:
        top = Accelerator.from_config(acc, geometry)
    except (TypeError, ValueError) as exc:
        raise GenerateError(f"accelerator {acc.name}: {exc}") from None
    text = to_verilog(top, vivado.TOP_NAME, primitives=primitives)
    if cache:
        cached.parent.mkdir(parents=True, exist_ok=True)
        partial = cached.with_name(f"{cached.name}.{os.getpid()}.tmp")
        partial.write_text(text)
        os.replace(partial, cached)  # atomic: concurrent runs never read half a file
    return text


@functools.lru_cache(maxsize=1)
def _sources_digest() -> str:
    """SHA-256 of the Python sources the generated Verilog can depend on."""
    import fcircnn.gen
    import fcircnn.hw
    import fcircnn.models

    digest = hashlib.sha256()
    for package in (fcircnn.hw, fcircnn.gen, fcircnn.models):
        root = Path(package.__file__).parent
        for path in sorted(root.rglob("*.py")):
            digest.update(f"{package.__name__}/{path.relative_to(root).as_posix()}\0".encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def estimate_report(acc: AcceleratorConfig) -> dict[str, Any]:
    """The ``estimate`` entry of ``report.json``.

    ``resources``: the calibrated estimate (:func:`fcircnn.gen.estimate.estimate_resources`):
    ``total`` and per-component ``dsp``/``bram36``/``lut``/``ff``, the device ``use`` fractions
    and ``calibration`` (the Yosys version it was calibrated on); ``performance``: the
    performance model's ``cycles``, ``latency_ms``, ``effective_gops`` and ``gops_per_dsp``
    for the configured network (``null`` if the network does not compile for it).
    """
    from .estimate import calibration, estimate_resources
    from .perf_network import model_network
    from .plan import CompileError

    est = estimate_resources(acc)
    total = est.total
    try:
        perf = model_network(acc)
    except CompileError:
        performance = None
    else:
        performance = {"cycles": perf.cycles, "latency_ms": perf.seconds * 1e3,
                       "effective_gops": perf.effective_gops,
                       "gops_per_dsp": perf.effective_gops / total.dsp if total.dsp else None}
    return {
        "resources": {
            "total": total.as_dict(),
            "components": [{"name": c.name, "core": c.core, **c.counts.as_dict()}
                           for c in est.components],
            "use": est.utilization(acc.device.resources),
            "calibration": calibration().get("yosys", ""),
        },
        "performance": performance,
    }


def _core_report(acc: AcceleratorConfig) -> list[dict[str, Any]]:
    runs: dict[str, list[str]] = {c.name: [] for c in acc.cores}
    for layer in acc.network.resolved:
        runs[acc.core_for(layer).name].append(layer.name)
    return [{**core.model_dump(mode="json"), "layers": runs[core.name]} for core in acc.cores]


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def render(acc: AcceleratorConfig, status=None) -> dict[str, str]:
    """Every output file's text by relative path (module docstring), ``report.json`` last;
    ``status(line)``, if given, as each long step starts.

    Raises
    ------
    GenerateError
        If a generator rejects the configuration or the top level is unavailable.
    """
    fingerprint = config_fingerprint(acc)
    banner = _banner(acc, fingerprint)
    try:
        target = vivado.VivadoTarget.from_config(acc)
    except ValueError as exc:
        raise GenerateError(f"accelerator {acc.name}: {exc}") from None
    say = status or (lambda _: None)
    rtl = "".join(f"// {line}\n" for line in banner) + accelerator_verilog(
        acc, primitives=True, status=status)
    say("the Vivado scripts, the headers and report.json (the resource estimate)")
    files = {
        vivado.RTL_PATH: rtl,
        vivado.XDC_PATH: vivado.constraints_xdc(target, banner),
        **{f"vivado/{name}": text
           for name, text in vivado.vivado_scripts(target, banner).items()},
        HEADER_PATH: headers.c_header(banner),
        PYTHON_PATH: headers.python_module(banner),
    }
    report = {
        "schema": 1,
        "tool": {"fcircnn": TOOL_VERSION, "amaranth": _amaranth_version()},
        "config": {"accelerator": acc.name, "network": acc.network.name,
                   "fingerprint": fingerprint},
        "top": vivado.TOP_NAME,
        "ip": vivado.IP_VLNV,
        "device": acc.device.model_dump(mode="json"),
        "clock_mhz": acc.clock_mhz,
        "clock_period_ns": float(target.period_ns),
        "block_size": acc.block_size,
        "bus_width": acc.bus_width,
        "address_width": acc.address_width,
        "axi_ports": acc.axi_ports,
        "cores": _core_report(acc),
        "files": {path: _sha256(text) for path, text in files.items()},
        "estimate": estimate_report(acc),
    }
    files[REPORT_PATH] = json.dumps(report, indent=2, sort_keys=False) + "\n"
    return files


def vivado_command(output: str | os.PathLike[str]) -> str:
    """The shell command that builds the bitstream of the files in ``output``."""
    folder = Path(output) / "vivado"
    return f"cd {shlex.quote(str(folder))} && {vivado.BUILD_COMMAND}"


def generate(acc: AcceleratorConfig, output: str | os.PathLike[str], *,
             force: bool = False, status=None) -> GenerateResult:
    """Write the files of :func:`render` into ``output``.

    Parameters
    ----------
    acc : AcceleratorConfig
        A configuration loaded with :func:`~fcircnn.models.config.load_accelerator`.
    output : path
        Output folder; created if missing. It must be empty unless ``force``.
    force : bool
        Write into a non-empty folder, replacing files of the same names (other files are
        left alone).
    status : callable, optional
        Called with a line as each long step starts (:func:`render`'s, then the writing).

    Raises
    ------
    GenerateError
        If ``output`` is a file, is not empty (without ``force``), holds a folder where a
        file goes, cannot be written, or the configuration cannot be generated; ``output`` is
        then unchanged (all files are written, or none).
    """
    out = Path(output)
    if out.exists() and not out.is_dir():
        raise GenerateError(f"-o: {out} exists and is not a folder")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise GenerateError(f"-o: {out} is not empty; use --force to write into it "
                            "(files of the same names are replaced)")
    if why := target_conflict(out, OUTPUT_FILES):
        raise GenerateError(f"-o {out}: {why}")
    files = render(acc, status)  # everything is rendered before anything is written
    if status is not None:
        status(f"writing {len(files)} files")
    try:
        with staged_folder(out) as tmp:  # all files or none
            for rel, text in files.items():
                path = tmp / rel
                path.parent.mkdir(parents=True, exist_ok=True)
                with open(path, "w", encoding="utf-8", newline="\n") as fh:
                    fh.write(text)
    except OSError as exc:
        raise GenerateError(f"-o: cannot write {out}: {exc}") from None
    return GenerateResult(output=out, files=tuple(files), fingerprint=config_fingerprint(acc),
                          vivado_command=vivado_command(out))
