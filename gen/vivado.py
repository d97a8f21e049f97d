"""Vivado project, IP packaging and block-design scripts for the generated accelerator.

From an :class:`~fcircnn.models.config.AcceleratorConfig` this module renders the text of the
XDC constraints and of four Tcl scripts that, run by Vivado in batch mode, turn the generated
Verilog top ``fcircnn_accel`` into a PYNQ overlay (``.bit`` + ``.hwh``) for a Zynq UltraScale+
MPSoC board such as the ZCU102. The scripts live in ``<output>/vivado/`` and find the other
files relative to themselves (:data:`RTL_PATH`, :data:`XDC_PATH`), so the output folder can be
moved or copied to the machine that has Vivado::

    cd <output>/vivado && vivado -mode batch -source build.tcl

==========================  ===============================================================
file                        what it does
==========================  ===============================================================
``create_project.tcl``      the IP's own project ``vivado/ip_project`` for the configured
                            part and board part (see "Board part" below); adds the RTL and
                            the XDC; top ``fcircnn_accel``
``package_ip.tcl``          packages the project as the IP ``fcircnn:fcircnn:fcircnn_accel``
                            into ``vivado/ip_repo``: AXI interfaces ``m_axi`` and
                            ``s_axi_control`` (inferred from the port names), clock ``ap_clk``
                            associated with both, reset ``ap_rst_n`` active low, interrupt
                            ``interrupt`` level high, memory map of ``s_axi_control`` with the
                            registers of :data:`fcircnn.arch.registers.REGISTERS`, and an
                            address space of its own for each AXI manager (``m_axi`` ..
                            ``m_axi3``): ``2**address_width`` bytes, 128 bits wide
``block_design.tcl``        a project of its own, ``vivado/project``, which holds the
                            packaged IP (``ip_repo``), not the RTL (as FINN and hls4ml
                            do); block design ``system``: the MPSoC PS with the board preset,
                            ``pl_clk0`` at the configured clock from the RPLL
                            (see "The PL clock" below; read back and checked),
                            HPM0 FPD -> SmartConnect -> ``s_axi_control``, ``m_axi`` ->
                            SmartConnect -> HP0 FPD (128 bit), ``proc_sys_reset`` for
                            ``ap_rst_n``, ``interrupt`` -> ``pl_ps_irq0``; addresses: each
                            manager gets its HP port's ``DDR_LOW`` (0, 2 GB) and, with 36 or
                            more address bits, ``DDR_HIGH`` (32 GB, 32 GB) explicitly (a
                            master of fewer than 36 address bits keeps only the segments it
                            reaches); validation, HDL wrapper as the new top
``build.tcl``               checks the Vivado version (:data:`MIN_VIVADO` or newer), sources
                            the three scripts above, finds the block design's ``.hwh``
                            (before synthesis: the generated file, else the documented
                            ``hw_handoff`` paths), synthesis, implementation to
                            ``write_bitstream``, utilization and timing reports; negative
                            setup or hold slack ends the build with an error (unless
                            ``FCIRCNN_ALLOW_TIMING_FAILURE=1``); copies ``fcircnn_accel.bit``
                            and ``fcircnn_accel.hwh`` (PYNQ needs both, same base name) to
                            ``vivado/out/``, writes ``fcircnn_accel.clock.json``
                            (:data:`CLOCK_FILE`: the clock ``pl_clk0`` actually gets) and
                            ``fcircnn_accel.xsa`` (``write_hw_platform``, with the bitstream)
                            beside them
==========================  ===============================================================

Board part
----------
The configuration names a board part with a revision (``xilinx.com:zcu102:part0:3.4``); the
scripts take the newest revision of that vendor, board and component this Vivado has installed
(``get_board_parts -latest_file_version xilinx.com:zcu102:part0:*``) and stop with an error
naming what is installed if there is none: without the board preset the PS keeps Vivado's
defaults (DDR, MIO, clocks) and the ``.xsa`` describes no ZCU102. A configuration without a
board part gets the PS defaults, with a warning.

The PL clock
------------
Facts the choice rests on (the comments of the generated Tcl repeat them):

* The ZCU102 board preset (XilinxBoardStore ``boards/Xilinx/zcu102/3.4/preset.xml``) sets
  ``PSU__PSS_REF_CLK__FREQMHZ`` 33.330 and ``PL0_REF_CTRL__SRCSEL`` IOPLL; its IOPLL runs at
  33.330 x 90 / 2 = 1499.85 MHz (``IOPLL_CTRL__FBDIV`` 90, ``DIV2`` 1 in Vivado-generated
  ZCU102 block designs) and feeds QSPI, SD, UART, USB, so it stays there. Integer dividers of
  it give 187.48 or 214.26 MHz, never 200: Vivado-generated ZCU102 designs asking 200 MHz from
  IOPLL show ``PL0_REF_CTRL__ACT_FREQMHZ {187.481262}`` (``DIVISOR0`` 8).
* ZCU102 designs whose PL clocks stay on the IOPLL show the preset's RPLL at
  ``RPLL_CTRL__FBDIV`` 72, ``DIV2`` 1: 1200 MHz nominal (1199.88 at 33.330 MHz); the preset
  sources only the DisplayPort audio and STC clocks from it. PL clocks may take it as their
  source (``PL0_REF_CTRL__SRCSEL {RPLL}``: PYNQ's ZCU104 base overlay puts
  all four PL clocks on it; designs with ``PL1_REF_CTRL`` RPLL / ``DIVISOR0`` 6 show
  ``ACT_FREQMHZ {200.000000}``).
* With the clock wizard in automatic mode (``PSU__OVERRIDE__BASIC_CLOCK`` 0) Vivado picks the
  PLL and divisors itself: a ZCU102 design asking 333 MHz from the RPLL got 322.19 MHz (the
  wizard had put the RPLL at FBDIV 58, 966.57 MHz, and divided by 3). In manual mode
  (``PSU__OVERRIDE__BASIC_CLOCK`` 1, PG201 "Enable Manual Mode"), as block-design scripts set
  it after applying the board preset, the ``DIVISOR0``/``DIVISOR1`` given are kept and
  ``ACT_FREQMHZ`` follows them (a manual-mode design asking 100 MHz with divisors 15 x 4
  reports 24.99975).
* ``PL0_REF_CTRL``'s divisors are 6 bits each (1..63: the register fields in PYNQ's
  ``pynq/ps.py``); a PS PLL's VCO runs at 1500..3000 MHz and its output at 750..1600 MHz (the
  PS PLL switching characteristics of the Zynq UltraScale+ data sheets, DS926 as quoted by
  m-labs' zynq-rs), the output being VCO / 2 with ``DIV2``.

So :func:`pl_clock` sets the RPLL (``FBDIV``, ``DIV2`` 1, integer mode) and ``pl_clk0``'s
divisors in manual mode so that their quotient is exactly the configured clock at the nominal
33.333 MHz reference, keeping the preset's FBDIV 72 (1200 MHz) whenever it divides: 200 MHz is
RPLL / 6. On the ZCU102, whose reference is 33.330 MHz, Vivado then reports 199.98 MHz, 0.01 %
low. A clock no RPLL setting divides exactly gets the closest one, and the scripts say so.
``block_design.tcl`` reads ``ACT_FREQMHZ`` back and stops if it is more than
:data:`CLOCK_TOLERANCE` (0.1 %) from the configured clock; ``build.tcl`` records it in
:data:`CLOCK_FILE`, which ``fcircnn deploy`` copies and :mod:`fcircnn.runtime.board` uses for times.

PYNQ's ``Overlay.download()`` writes only ``DIVISOR0``/``DIVISOR1`` of the ``.hwh`` into
``PL0_REF_CTRL`` (``pynq/overlay.py``, ``pynq/ps.py``: ``SRCSEL`` and the PLLs stay as the
boot image set them), so ``pl_clk0`` on a board is the boot image's PL0 source PLL over these
divisors: the recorded clock holds on an image whose PL0 comes from a 1200 MHz RPLL (one built
from this ``.xsa``), not on one whose PL0 source runs at 1500 MHz (/ 6 is 250 MHz there).

The block design is wired explicitly (SmartConnect and ``proc_sys_reset`` cells) rather than
with ``apply_bd_automation -rule xilinx.com:bd_rule:axi4``: the automation rule names clocks by
strings such as ``/zynq_ultra_ps_e_0/pl_clk0 (200 MHz)`` whose spelling depends on the
frequency Vivado actually synthesizes, which makes the script fragile.

Constraints: out of context
---------------------------
The XDC holds only ``create_clock`` on ``ap_clk`` with the configured period, and it is marked
``USED_IN {synthesis implementation out_of_context}`` (in the project and inside the packaged
IP). This is the convention of Vivado's own IP (the ``*_ooc.xdc`` files): the accelerator is an
IP inside a block design, where its clock is ``pl_clk0`` of the PS, whose constraint comes
from the PS IP itself; a second ``create_clock`` on the IP port in context would override it.
Out of context (the IP's own synthesis run) the file supplies the clock the netlist is
optimised for. There are no input/output delays: every AXI port connects to fabric logic in
the same clock domain (SmartConnect, PS AXI ports), so in context these are ordinary
register-to-register paths timed by the full design; delays on the OOC ports would be
invented numbers. ``ap_rst_n`` is a synchronous reset in the ``ap_clk`` domain (driven by
``proc_sys_reset``), so it is timed like any other input and gets no false path.

The Tcl is plain Tcl 8.6 plus Vivado commands; ``tests/gen/test_vivado.py`` runs every script
under ``tclsh`` with stubs of the Vivado commands and checks the calls.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from fcircnn.arch.geometry import BEAT_BYTES
from fcircnn.arch.ip import CLOCK_FILE, IP_NAME, TOP_NAME, read_clock_file
from fcircnn.arch.ports import PortMap
from fcircnn.arch.registers import CONTROL_ADDR_WIDTH, REGISTERS
from fcircnn.gen import TOOL_VERSION
from fcircnn.models.config import AcceleratorConfig
from fcircnn.models.schema import clock_problem

__all__ = [
    "BD_NAME",
    "BUILD_COMMAND",
    "CLOCK_FILE",
    "CLOCK_TOLERANCE",
    "CONTROL_WINDOW_BYTES",
    "IP_VLNV",
    "PS_REF_MHZ",
    "RTL_PATH",
    "SCRIPTS",
    "TOP_NAME",
    "XDC_PATH",
    "PlClock",
    "VivadoTarget",
    "block_design_tcl",
    "build_tcl",
    "clock_period_ns",
    "constraints_xdc",
    "create_project_tcl",
    "package_ip_tcl",
    "pl_clock",
    "read_clock_file",
    "vivado_scripts",
]

#: Paths of the generated files, relative to the output folder.
RTL_PATH = f"rtl/{TOP_NAME}.v"
XDC_PATH = f"constraints/{TOP_NAME}.xdc"
#: Script names in ``<output>/vivado/``, in the order ``build.tcl`` sources them, then
#: ``build.tcl`` itself.
SCRIPTS: tuple[str, ...] = ("create_project.tcl", "package_ip.tcl", "block_design.tcl",
                            "build.tcl")
#: The command that builds everything, run in ``<output>/vivado``.
BUILD_COMMAND = "vivado -mode batch -source build.tcl"
#: Oldest Vivado the scripts accept: ``write_hw_platform`` (the ``.xsa``) came with 2019.2.
MIN_VIVADO = "2019.2"
#: Name of the block design (its wrapper is ``system_wrapper``, the bitstream top).
BD_NAME = "system"
#: Vendor, library and name of the packaged IP (the version is the package's major.minor).
IP_VENDOR = "fcircnn"
IP_LIBRARY = "fcircnn"
IP_VERSION = ".".join(TOOL_VERSION.split(".")[:2])
IP_VLNV = f"{IP_VENDOR}:{IP_LIBRARY}:{TOP_NAME}:{IP_VERSION}"
#: The PS cell of the block design.
PS_CELL = "zynq_ultra_ps_e_0"
#: Bytes of the ``s_axi_control`` window: the register file's default 12-bit address.
CONTROL_WINDOW_BYTES = 1 << CONTROL_ADDR_WIDTH
#: Data width of the AXI managers (one beat), the width of their address spaces.
MANAGER_DATA_BITS = 8 * BEAT_BYTES
#: How far (relative) the PS's actual ``pl_clk0`` may be from the configured clock before
#: ``block_design.tcl`` stops the build: 0.1 %.
CLOCK_TOLERANCE = 0.001
#: The PS reference clock (PSS_REF_CLK) of the PLL arithmetic, MHz: 33.333... nominal. The
#: ZCU102 board preset says 33.330 MHz (``PSU__PSS_REF_CLK__FREQMHZ``), so Vivado's figures on
#: it are 0.01 % below these (199.98 MHz for RPLL 1200 MHz / 6).
PS_REF_MHZ = Fraction(100, 3)
#: RPLL feedback divisors whose VCO (PSS_REF_CLK x FBDIV) stays within 1500..3000 MHz with
#: either reference (FBDIV 45 gives 1499.85 MHz at 33.330 MHz); the output is VCO / 2 (DIV2).
RPLL_FBDIV = range(46, 91)
#: The ZCU102 preset's RPLL (Vivado-generated ZCU102 designs: ``RPLL_CTRL__FBDIV`` 72,
#: ``DIV2`` 1): 1200 MHz nominal. Kept whenever it divides to the clock, so the DisplayPort
#: clocks the preset derives from it keep their frequencies.
RPLL_PRESET_FBDIV = 72
#: ``PL0_REF_CTRL`` ``DIVISOR0`` and ``DIVISOR1``: 6 bits each.
PL_DIVISOR_MAX = 63
_DIVISOR_PRODUCTS = sorted({a * b for a in range(1, PL_DIVISOR_MAX + 1)
                            for b in range(1, PL_DIVISOR_MAX + 1)})

_WORD = re.compile(r"[A-Za-z0-9_.:+\-]+")


@dataclass(frozen=True)
class PlClock:
    """How the PS makes ``pl_clk0``: the RPLL at ``PS_REF_MHZ * fbdiv / 2`` (integer mode,
    ``DIV2``), divided by ``divisor0 * divisor1`` (module docstring, "The PL clock").

    Attributes
    ----------
    fbdiv : int
        ``PSU__CRL_APB__RPLL_CTRL__FBDIV``.
    divisor0, divisor1 : int
        ``PSU__CRL_APB__PL0_REF_CTRL__DIVISOR0`` and ``DIVISOR1`` (1..63 each).
    target : Fraction
        The configured clock, MHz.
    """

    fbdiv: int
    divisor0: int
    divisor1: int
    target: Fraction
    source: str = "RPLL"

    @property
    def pll_mhz(self) -> Fraction:
        """The RPLL's output at the nominal reference, MHz (1200 for FBDIV 72)."""
        return PS_REF_MHZ * self.fbdiv / 2

    @property
    def mhz(self) -> Fraction:
        """``pl_clk0`` at the nominal reference, MHz."""
        return self.pll_mhz / (self.divisor0 * self.divisor1)

    @property
    def exact(self) -> bool:
        """Whether :attr:`mhz` is the configured clock exactly."""
        return self.mhz == self.target

    def mhz_at(self, ref_mhz: float) -> float:
        """``pl_clk0`` with a reference of ``ref_mhz`` (33.33 on the ZCU102), MHz."""
        return ref_mhz * self.fbdiv / 2 / (self.divisor0 * self.divisor1)


def _split_divisor(product: int) -> tuple[int, int]:
    if product <= PL_DIVISOR_MAX:
        return product, 1
    return next((d0, product // d0) for d0 in range(PL_DIVISOR_MAX, 0, -1)
                if product % d0 == 0 and product // d0 <= PL_DIVISOR_MAX)


def pl_clock(clock_mhz: float) -> PlClock:
    """The RPLL feedback divisor and ``pl_clk0`` divisors that give ``clock_mhz``: exactly at
    the nominal reference when some setting does (the preset's FBDIV 72 first, then the FBDIV
    nearest it), else the closest (:attr:`PlClock.exact` false)."""
    target = Fraction(repr(float(clock_mhz)))
    best: tuple[tuple[Fraction, int, int], int, int] | None = None
    for fbdiv in RPLL_FBDIV:
        pll = PS_REF_MHZ * fbdiv / 2
        at = bisect_left(_DIVISOR_PRODUCTS, pll / target)
        for product in _DIVISOR_PRODUCTS[max(at - 1, 0):at + 1]:
            key = (abs(pll / product - target), abs(fbdiv - RPLL_PRESET_FBDIV), product)
            if best is None or key < best[0]:
                best = (key, fbdiv, product)
    assert best is not None
    _, fbdiv, product = best
    return PlClock(fbdiv, *_split_divisor(product), target=target)


@dataclass(frozen=True)
class VivadoTarget:
    """What the scripts need from an accelerator configuration, validated.

    Attributes
    ----------
    name : str
        Accelerator name (``AcceleratorConfig.name``).
    part : str
        Vivado part, a Zynq UltraScale+ MPSoC (``xczu...``).
    board : str
        Board part (``xilinx.com:zcu102:part0:3.4``), ``""`` when the configuration has none;
        the scripts use the newest revision of its board installed (module docstring).
    clock_mhz : float
        ``ap_clk`` = ``pl_clk0`` frequency.
    address_width : int
        Width of the ``m_axi`` (and ``m_axi1`` .. ``m_axi3``) addresses.
    axi_ports : int
        AXI4 manager ports (:class:`~fcircnn.arch.ports.PortMap`), each read and write:
        ``m_axi`` on HP0 FPD and, with more, ``m_axik`` on HPk FPD (up to HP3).
    """

    name: str
    part: str
    board: str
    clock_mhz: float
    address_width: int
    axi_ports: int = 1

    def __post_init__(self) -> None:
        for key, value in (("device.part", self.part), ("device.board", self.board)):
            if value and not _WORD.fullmatch(value):
                raise ValueError(f"{key} {value!r} is not a Vivado part name (letters, digits "
                                 "and . : _ + - only)")
        if not self.part.lower().startswith("xczu"):
            raise ValueError(f"device.part {self.part!r} is not a Zynq UltraScale+ MPSoC "
                             "(xczu...): the generated block design needs its PS "
                             "(zynq_ultra_ps_e)")
        problem = clock_problem(self.clock_mhz)
        if problem:
            raise ValueError(f"clock_mhz {problem}")
        PortMap(self.axi_ports)  # ValueError naming axi_ports and its allowed values

    @classmethod
    def from_config(cls, acc: AcceleratorConfig) -> VivadoTarget:
        """The target of ``acc`` (``ValueError`` naming the key if it cannot be built)."""
        return cls(name=acc.name, part=acc.device.part, board=acc.device.board or "",
                   clock_mhz=float(acc.clock_mhz), address_width=acc.address_width,
                   axi_ports=acc.axi_ports)

    @property
    def memory_ports(self) -> tuple[str, ...]:
        """The AXI manager interfaces, port ``k`` on ``HPk FPD`` (``S_AXI_GP{k + 2}``)."""
        return PortMap(self.axi_ports).managers

    @property
    def period_ns(self) -> str:
        """Clock period in ns with three decimals (``"5.000"`` at 200 MHz)."""
        return f"{1000.0 / self.clock_mhz:.3f}"

    @property
    def clock_text(self) -> str:
        """Frequency as written for the PS (``"200"``, ``"187.5"``)."""
        return f"{self.clock_mhz:g}"


def _target(acc: AcceleratorConfig | VivadoTarget) -> VivadoTarget:
    return acc if isinstance(acc, VivadoTarget) else VivadoTarget.from_config(acc)


def _banner(comment: str, title: str, banner: Sequence[str]) -> str:
    lines = [f"{comment} {title}", *(f"{comment} {line}" for line in banner)]
    if not banner:
        lines.append(f"{comment} Generated by fcircnn {TOOL_VERSION}; do not edit, regenerate.")
    return "\n".join(lines) + "\n"


def _brace(text: str) -> str:
    """A Tcl word for ``text`` (descriptions: no braces or backslashes to escape)."""
    return "{" + text.replace("{", "(").replace("}", ")").replace("\\", "/") + "}"


def clock_period_ns(acc: AcceleratorConfig | VivadoTarget) -> str:
    """``ap_clk`` period of ``acc`` in ns, three decimals (``"5.000"`` at 200 MHz)."""
    return _target(acc).period_ns


def constraints_xdc(acc: AcceleratorConfig | VivadoTarget, banner: Sequence[str] = ()) -> str:
    """The out-of-context XDC of the accelerator (why out of context: module docstring).

    Parameters
    ----------
    acc : AcceleratorConfig or VivadoTarget
    banner : sequence of str
        Comment lines put at the top (tool version, config fingerprint).
    """
    t = _target(acc)
    return _banner("#", f"{TOP_NAME}: out-of-context constraints ({t.name}, "
                        f"{t.clock_text} MHz)", banner) + f"""\
#
# Used only for out-of-context synthesis and implementation of the IP (USED_IN
# synthesis implementation out_of_context): in the block design ap_clk is the PS pl_clk0,
# constrained by the PS IP. No I/O delays (all AXI ports face fabric logic in the same clock
# domain) and no false path on ap_rst_n (a synchronous reset, timed like any input).
create_clock -period {t.period_ns} -name ap_clk [get_ports ap_clk]
"""


_ROOT = "set fcircnn_root [file normalize [file join [file dirname [info script]] ..]]"


def _board_pattern(board: str) -> tuple[str, str]:
    """The ``get_board_parts`` pattern of any revision of ``board`` (vendor:board:component:*)
    and a looser one for the error message (``*zcu102*``)."""
    fields = board.split(":")
    if len(fields) >= 3:
        return ":".join(fields[:3]) + ":*", f"*{fields[1]}*"
    return f"*{board}*", f"*{board}*"


def _board_check(t: VivadoTarget) -> str:
    """Tcl that sets ``fcircnn_board_part`` to the installed revision of the configured board
    part (the newest file version) and ``fcircnn_have_board``, or stops with an error naming
    what this Vivado has: the block design needs the board preset (module docstring)."""
    if not t.board:
        return """\
set fcircnn_board_part {}
set fcircnn_have_board 0
puts "WARNING: fcircnn: the configuration names no board part (device.board): the PS keeps\\
      Vivado's defaults (no board preset), and the .xsa describes no board"
"""
    exact, loose = _board_pattern(t.board)
    return f"""\
# The board part: the newest file version installed of {exact} (the
# configuration's {t.board} names the board, not a revision to require).
set fcircnn_board_found [lsort -dictionary [get_board_parts -quiet -latest_file_version \\
    {{{exact}}}]]
if {{[llength $fcircnn_board_found] == 0}} {{
    set fcircnn_board_near [get_board_parts -quiet {{{loose}}}]
    if {{[llength $fcircnn_board_near] == 0}} {{
        set fcircnn_board_near none
    }}
    error "fcircnn: this Vivado has no board part {exact} (the configuration names\\
           {t.board}; board parts matching {loose}: [join $fcircnn_board_near {{, }}]). Install\\
           the board files (Vivado's board store, or github.com/Xilinx/XilinxBoardStore with\\
           set_param board.repoPaths): without the board preset the PS keeps Vivado's defaults\\
           and the .xsa does not describe the board"
}}
set fcircnn_board_part [lindex $fcircnn_board_found end]
set fcircnn_have_board 1
puts "fcircnn: board part $fcircnn_board_part (configured: {t.board})"
"""


def create_project_tcl(acc: AcceleratorConfig | VivadoTarget,
                       banner: Sequence[str] = ()) -> str:
    """``create_project.tcl``: the RTL project (see the module docstring)."""
    t = _target(acc)
    return _banner("#", f"create_project.tcl: Vivado project of {TOP_NAME} ({t.name})",
                   banner) + f"""\
{_ROOT}
set fcircnn_part {t.part}
{_board_check(t)}
create_project {TOP_NAME}_ip [file join $fcircnn_root vivado ip_project] -part $fcircnn_part \
    -force
if {{$fcircnn_have_board}} {{
    set_property board_part $fcircnn_board_part [current_project]
}}
set_property target_language Verilog [current_project]

set fcircnn_rtl [file join $fcircnn_root {RTL_PATH}]
set fcircnn_xdc [file join $fcircnn_root {XDC_PATH}]
add_files -norecurse -fileset sources_1 $fcircnn_rtl
add_files -norecurse -fileset constrs_1 $fcircnn_xdc
set_property USED_IN {{synthesis implementation out_of_context}} [get_files $fcircnn_xdc]
set_property top {TOP_NAME} [get_filesets sources_1]
update_compile_order -fileset sources_1
"""


def package_ip_tcl(acc: AcceleratorConfig | VivadoTarget, banner: Sequence[str] = ()) -> str:
    """``package_ip.tcl``: the project packaged as IP :data:`IP_VLNV` (module docstring)."""
    t = _target(acc)
    space = (f"Each has {t.address_width}-bit addresses, a range of {1 << t.address_width:#x} "
             f"bytes, {MANAGER_DATA_BITS}-bit data")
    reach = ("its HP port's DDR_LOW (0, 2 GB) and DDR_HIGH (32 GB, 32 GB)"
             if t.address_width >= 36 else "its HP port's DDR_LOW (0, 2 GB)")
    registers = "\n".join(
        f"fcircnn_register $fcircnn_block {r.name} {r.offset:#04x} {_brace(r.description)}"
        for r in REGISTERS)
    return _banner("#", f"package_ip.tcl: {TOP_NAME} as the IP {IP_VLNV} ({t.name})",
                   banner) + f"""\
{_ROOT}
set fcircnn_ip_dir [file join $fcircnn_root vivado ip_repo]

ipx::package_project -root_dir $fcircnn_ip_dir -vendor {IP_VENDOR} -library {IP_LIBRARY} \\
    -taxonomy /UserIP -import_files -force
set fcircnn_core [ipx::current_core]
set_property name {TOP_NAME} $fcircnn_core
set_property version {IP_VERSION} $fcircnn_core
set_property display_name {_brace(f"fcircnn accelerator ({t.name})")} $fcircnn_core
set_property description {_brace(
    f"Block-circulant 3D CNN accelerator {t.name}, generated by fcircnn {TOOL_VERSION}")} \\
    $fcircnn_core

# Interfaces: AXI from the port-name prefixes m_axi_* and s_axi_control_*; the single-signal
# interfaces only if ipx::package_project has not inferred them already.
ipx::infer_bus_interfaces xilinx.com:interface:aximm_rtl:1.0 $fcircnn_core
proc fcircnn_interface {{port vlnv}} {{
    set core [ipx::current_core]
    if {{[llength [ipx::get_bus_interfaces $port -of_objects $core]] == 0}} {{
        ipx::infer_bus_interface $port $vlnv $core
    }}
    return [ipx::get_bus_interfaces $port -of_objects $core]
}}
proc fcircnn_bus_parameter {{busif name value}} {{
    set parameter [ipx::get_bus_parameters $name -of_objects $busif]
    if {{[llength $parameter] == 0}} {{
        set parameter [ipx::add_bus_parameter $name $busif]
    }}
    set_property value $value $parameter
}}
foreach fcircnn_busif {{{" ".join(t.memory_ports)} s_axi_control}} {{
    if {{[llength [ipx::get_bus_interfaces $fcircnn_busif -of_objects $fcircnn_core]] == 0}} {{
        error "fcircnn: the packager did not infer the AXI interface $fcircnn_busif"
    }}
}}
set fcircnn_clk [fcircnn_interface ap_clk xilinx.com:signal:clock_rtl:1.0]
set fcircnn_rst [fcircnn_interface ap_rst_n xilinx.com:signal:reset_rtl:1.0]
set fcircnn_irq [fcircnn_interface interrupt xilinx.com:signal:interrupt_rtl:1.0]
foreach fcircnn_busif {{{" ".join(t.memory_ports)} s_axi_control}} {{
    ipx::associate_bus_interfaces -busif $fcircnn_busif -clock ap_clk $fcircnn_core
}}
ipx::associate_bus_interfaces -clock ap_clk -reset ap_rst_n $fcircnn_core
fcircnn_bus_parameter $fcircnn_rst POLARITY ACTIVE_LOW
fcircnn_bus_parameter $fcircnn_irq SENSITIVITY LEVEL_HIGH
# The frequency comes from the block design (pl_clk0), never a packaged constant.
if {{[llength [ipx::get_bus_parameters FREQ_HZ -of_objects $fcircnn_clk]] > 0}} {{
    ipx::remove_bus_parameter FREQ_HZ $fcircnn_clk
}}

# Address spaces of the AXI managers, declared rather than left to the packager's defaults.
# {space}. The range holds
# {reach}, which block_design.tcl assigns
# to it. (Vivado: ipx::add_address_space, the interface's master_address_space_ref, the
# space's range and width.)
foreach fcircnn_busif {{{" ".join(t.memory_ports)}}} {{
    if {{[llength [ipx::get_address_spaces $fcircnn_busif -of_objects $fcircnn_core]] > 0}} {{
        ipx::remove_address_space $fcircnn_busif $fcircnn_core
    }}
    set fcircnn_space [ipx::add_address_space $fcircnn_busif $fcircnn_core]
    set_property master_address_space_ref $fcircnn_busif \\
        [ipx::get_bus_interfaces $fcircnn_busif -of_objects $fcircnn_core]
    set_property range {1 << t.address_width} $fcircnn_space
    set_property width {MANAGER_DATA_BITS} $fcircnn_space
}}

# Memory map of s_axi_control: one {CONTROL_WINDOW_BYTES}-byte register block.
if {{[llength [ipx::get_memory_maps s_axi_control -of_objects $fcircnn_core]] > 0}} {{
    ipx::remove_memory_map s_axi_control $fcircnn_core
}}
set fcircnn_map [ipx::add_memory_map s_axi_control $fcircnn_core]
set_property slave_memory_map_ref s_axi_control \\
    [ipx::get_bus_interfaces s_axi_control -of_objects $fcircnn_core]
set fcircnn_block [ipx::add_address_block reg0 $fcircnn_map]
set_property range {CONTROL_WINDOW_BYTES} $fcircnn_block
set_property width 32 $fcircnn_block
set_property usage register $fcircnn_block
proc fcircnn_register {{block name offset description}} {{
    set register [ipx::add_register $name $block]
    set_property address_offset $offset $register
    set_property size 32 $register
    set_property description $description $register
}}
{registers}

# The XDC is an out-of-context constraint inside the IP as well.
set fcircnn_xdc [ipx::get_files -type xdc -of_objects \\
    [ipx::get_file_groups xilinx_anylanguagesynthesis -of_objects $fcircnn_core] *{TOP_NAME}.xdc]
if {{[llength $fcircnn_xdc] > 0}} {{
    set_property used_in {{out_of_context implementation synthesis}} $fcircnn_xdc
}}

ipx::create_xgui_files $fcircnn_core
ipx::update_checksums $fcircnn_core
ipx::check_integrity $fcircnn_core
ipx::save_core $fcircnn_core
"""


def _pl_clock_tcl(t: VivadoTarget, ps: str) -> tuple[str, str, str]:
    """The comment and ``set_property`` lines of ``pl_clk0`` (module docstring, "The PL
    clock"), and the Tcl that reads ``ACT_FREQMHZ`` back and checks it."""
    clk = pl_clock(t.clock_mhz)
    pll = f"{float(clk.pll_mhz):g}"
    nominal = f"{float(clk.mhz):.6g}"
    if clk.exact:
        verdict = f"= {t.clock_text} MHz exactly at the nominal 33.333 MHz PS_REF_CLK"
    else:
        verdict = (f"= {nominal} MHz: no RPLL setting divides to {t.clock_text} MHz exactly, "
                   "this is the closest")
    comment = f"""\
# pl_clk0 = ap_clk at {t.clock_text} MHz, from the RPLL in manual clock mode:
#   RPLL = PS_REF_CLK x FBDIV {clk.fbdiv} / 2 (DIV2) = {pll} MHz nominal, / DIVISOR0 {clk.divisor0}
#   / DIVISOR1 {clk.divisor1} {verdict}.
# On the ZCU102 (PSU__PSS_REF_CLK__FREQMHZ 33.330 in the board preset) Vivado reports
# {clk.mhz_at(33.33):.2f} MHz. Why: the preset's IOPLL (FBDIV 90, 1499.85 MHz) feeds the PS
# peripherals and divides only to 187.48 or 214.26 MHz (Vivado-generated ZCU102 designs asking
# 200 MHz of it show PL0_REF_CTRL__ACT_FREQMHZ 187.481262); the preset's RPLL is FBDIV 72
# (1200 MHz nominal), PL clocks may use it (PYNQ's ZCU104 base overlay does); in automatic mode
# (PSU__OVERRIDE__BASIC_CLOCK 0) Vivado picks PLL and divisors itself (333 MHz asked of the RPLL
# came out 322.19 in a ZCU102 design), in manual mode it keeps the divisors given.
# PYNQ's Overlay.download() writes only these DIVISOR0/DIVISOR1 (from the .hwh) into
# PL0_REF_CTRL; the source PLL stays as the board's boot image set it."""
    lines = f"""\
    CONFIG.PSU__CRL_APB__RPLL_CTRL__FBDIV {{{clk.fbdiv}}} \\
    CONFIG.PSU__CRL_APB__RPLL_CTRL__DIV2 {{1}} \\
    CONFIG.PSU__CRL_APB__RPLL_FRAC_CFG__ENABLED {{0}} \\
    CONFIG.PSU__CRL_APB__PL0_REF_CTRL__SRCSEL {{{clk.source}}} \\
    CONFIG.PSU__CRL_APB__PL0_REF_CTRL__DIVISOR0 {{{clk.divisor0}}} \\
    CONFIG.PSU__CRL_APB__PL0_REF_CTRL__DIVISOR1 {{{clk.divisor1}}} \\
    CONFIG.PSU__CRL_APB__PL0_REF_CTRL__FREQMHZ {{{t.clock_text}}} \\
"""
    tolerance = f"{CLOCK_TOLERANCE * 100:g} %"
    warn = "" if clk.exact else (
        f'puts "WARNING: fcircnn: no RPLL setting gives pl_clk0 {t.clock_text} MHz exactly; '
        f'the closest is {nominal} MHz nominal"\n')
    check = f"""\
# The clock the PS gives pl_clk0, as Vivado computes it from the settings above (ACT_FREQMHZ):
# more than {tolerance} from the configured {t.clock_text} MHz stops the build here.
{warn}set fcircnn_pl_clk0_mhz [get_property CONFIG.PSU__CRL_APB__PL0_REF_CTRL__ACT_FREQMHZ \\
    [get_bd_cells {ps}]]
if {{![string is double -strict $fcircnn_pl_clk0_mhz] || $fcircnn_pl_clk0_mhz <= 0}} {{
    error "fcircnn: cannot read the PS's pl_clk0 frequency\\
           (CONFIG.PSU__CRL_APB__PL0_REF_CTRL__ACT_FREQMHZ of {ps} is\\
           '$fcircnn_pl_clk0_mhz')"
}}
if {{abs($fcircnn_pl_clk0_mhz - {t.clock_text}) > {t.clock_text} * {CLOCK_TOLERANCE}}} {{
    error "fcircnn: pl_clk0 would run at $fcircnn_pl_clk0_mhz MHz (the PS's ACT_FREQMHZ), not\\
           the configured {t.clock_text} MHz: more than {tolerance} off. The scripts set\\
           RPLL FBDIV {clk.fbdiv} and PL0 divisors {clk.divisor0} x {clk.divisor1} in manual\\
           clock mode; see the PS's Clock Configuration (board preset, PSS_REF_CLK) or choose\\
           a clock_mhz the RPLL divides to"
}}
puts "fcircnn: pl_clk0 $fcircnn_pl_clk0_mhz MHz (configured {t.clock_text} MHz; RPLL FBDIV\\
      {clk.fbdiv} / {clk.divisor0} / {clk.divisor1})"
"""
    return comment, lines, check


def block_design_tcl(acc: AcceleratorConfig | VivadoTarget,
                     banner: Sequence[str] = ()) -> str:
    """``block_design.tcl``: PS + accelerator block design and its wrapper (module
    docstring)."""
    t = _target(acc)
    ps = PS_CELL
    ports = list(enumerate(t.memory_ports))
    smcs = [f"mem{k or ''}_smc" for k, _ in ports]
    hp1_text = "".join(f",\n# HP{k} FPD (S_AXI_GP{k + 2}, 128 bit) for {bus}"
                       for k, bus in ports[1:])
    hp_config = "".join(f"    CONFIG.PSU__USE__S_AXI_GP{k + 2} {{1}} \\\n"
                        f"    CONFIG.PSU__SAXIGP{k + 2}__DATA_WIDTH {{128}} \\\n"
                        for k, _ in ports)
    hp_clocks = " ".join(f"[get_bd_pins {ps}/saxihp{k}_fpd_aclk]" for k, _ in ports)
    smc_clocks = " ".join(f"[get_bd_pins {smc}/aclk]" for smc in smcs)
    smc_resets = " ".join(f"[get_bd_pins {smc}/aresetn]" for smc in smcs)
    hp_nets = "".join(
        f"connect_bd_intf_net [get_bd_intf_pins {IP_NAME}/{bus}] "
        f"[get_bd_intf_pins {smc}/S00_AXI]\n"
        f"connect_bd_intf_net [get_bd_intf_pins {smc}/M00_AXI] "
        f"[get_bd_intf_pins {ps}/S_AXI_HP{k}_FPD]\n"
        for (k, bus), smc in zip(ports, smcs, strict=True))
    clock_comment, clock_config, clock_check = _pl_clock_tcl(t, ps)
    return _banner("#", f"block_design.tcl: block design {BD_NAME} with the MPSoC PS and "
                        f"{TOP_NAME} ({t.name})", banner) + f"""\
{_ROOT}
set fcircnn_part {t.part}
{_board_check(t)}
# The block design gets a project of its own, which holds the packaged IP, not the raw RTL.
close_project
create_project {BD_NAME} [file join $fcircnn_root vivado project] -part $fcircnn_part -force
if {{$fcircnn_have_board}} {{
    set_property board_part $fcircnn_board_part [current_project]
}}
set_property target_language Verilog [current_project]
set_property ip_repo_paths [list [file join $fcircnn_root vivado ip_repo]] [current_project]
update_ip_catalog -rebuild
create_bd_design {BD_NAME}
set fcircnn_ps [create_bd_cell -type ip -vlnv xilinx.com:ip:zynq_ultra_ps_e {ps}]
if {{$fcircnn_have_board}} {{
    apply_bd_automation -rule xilinx.com:bd_rule:zynq_ultra_ps_e \\
        -config {{apply_board_preset "1"}} $fcircnn_ps
}}
{clock_comment}
# Manual clock mode first (as block-design scripts set it after applying the board preset), so
# that the divisors below are kept; the other PS clocks keep the values the preset gave them.
set_property CONFIG.PSU__OVERRIDE__BASIC_CLOCK {{1}} $fcircnn_ps
# HPM0 FPD (32 bit) for s_axi_control, HP0 FPD (S_AXI_GP2, 128 bit) for m_axi{hp1_text}, the
# other PL masters off (an enabled port with an unconnected clock fails validation), pl_clk0
# as above, PL-to-PS interrupts (pl_ps_irq0).
set_property -dict [list \\
    CONFIG.PSU__USE__M_AXI_GP0 {{1}} \\
    CONFIG.PSU__MAXIGP0__DATA_WIDTH {{32}} \\
    CONFIG.PSU__USE__M_AXI_GP1 {{0}} \\
    CONFIG.PSU__USE__M_AXI_GP2 {{0}} \\
{hp_config}    CONFIG.PSU__FPGA_PL0_ENABLE {{1}} \\
{clock_config}    CONFIG.PSU__USE__IRQ0 {{1}} \\
] $fcircnn_ps

create_bd_cell -type ip -vlnv {IP_VLNV} {IP_NAME}
create_bd_cell -type ip -vlnv xilinx.com:ip:proc_sys_reset rst_pl_clk0
foreach fcircnn_smc {{ctrl_smc {" ".join(smcs)}}} {{
    create_bd_cell -type ip -vlnv xilinx.com:ip:smartconnect $fcircnn_smc
    set_property -dict [list CONFIG.NUM_SI {{1}} CONFIG.NUM_MI {{1}}] \\
        [get_bd_cells $fcircnn_smc]
}}

connect_bd_net [get_bd_pins {ps}/pl_clk0] [get_bd_pins {ps}/maxihpm0_fpd_aclk] \\
    {hp_clocks} [get_bd_pins rst_pl_clk0/slowest_sync_clk] \\
    [get_bd_pins ctrl_smc/aclk] {smc_clocks} [get_bd_pins {IP_NAME}/ap_clk]
connect_bd_net [get_bd_pins {ps}/pl_resetn0] [get_bd_pins rst_pl_clk0/ext_reset_in]
connect_bd_net [get_bd_pins rst_pl_clk0/peripheral_aresetn] \\
    [get_bd_pins {IP_NAME}/ap_rst_n]
connect_bd_net [get_bd_pins rst_pl_clk0/interconnect_aresetn] \\
    [get_bd_pins ctrl_smc/aresetn] {smc_resets}
connect_bd_intf_net [get_bd_intf_pins {ps}/M_AXI_HPM0_FPD] [get_bd_intf_pins ctrl_smc/S00_AXI]
connect_bd_intf_net [get_bd_intf_pins ctrl_smc/M00_AXI] \\
    [get_bd_intf_pins {IP_NAME}/s_axi_control]
{hp_nets}connect_bd_net [get_bd_pins {IP_NAME}/interrupt] [get_bd_pins {ps}/pl_ps_irq0]

{_address_segments(t)}validate_bd_design
{clock_check}save_bd_design

set fcircnn_bd_file [get_files {BD_NAME}.bd]
generate_target all $fcircnn_bd_file
set fcircnn_wrapper [make_wrapper -files $fcircnn_bd_file -top]
add_files -norecurse -fileset sources_1 $fcircnn_wrapper
set_property top {BD_NAME}_wrapper [get_filesets sources_1]
update_compile_order -fileset sources_1
"""


def _address_segments(t: VivadoTarget) -> str:
    """Tcl of the addresses: each AXI manager (``m_axi`` .. ``m_axi3``) gets its HP port's
    DDR segments explicitly, with the offsets and ranges Vivado itself gives them on the
    ZCU102 (``DDR_LOW`` at 0, 2 GB; ``DDR_HIGH`` at 32 GB, 32 GB, for a manager of 36 address
    bits or more), then ``assign_bd_address`` maps the rest (``s_axi_control`` in the HPM0
    space); a manager of fewer than 36 bits keeps only the segments it reaches."""
    ps = PS_CELL
    high = t.address_width >= 36
    ddr = "".join(f"fcircnn_assign_ddr {IP_NAME}/{bus} {ps}/SAXIGP{k + 2}/HP{k} {int(high)}\n"
                  for k, bus in enumerate(t.memory_ports))
    seen = ", ".join(f"{bus} through HP{k}" for k, bus in enumerate(t.memory_ports))
    text = f"""\
# Addresses: each AXI manager ({t.address_width}-bit addresses) sees the DDR through its own HP
# port ({seen}): DDR_LOW at 0 (2 GB){" and DDR_HIGH at 32 GB (32 GB)" if high else ""},
# assigned explicitly with the offsets and ranges Vivado gives these segments on the ZCU102.
# Then s_axi_control gets a {CONTROL_WINDOW_BYTES}-byte window in the HPM0 space.
proc fcircnn_assign_ddr {{space hp high}} {{
    set fcircnn_low [get_bd_addr_segs -quiet ${{hp}}_DDR_LOW]
    if {{[llength $fcircnn_low] == 0}} {{
        error "fcircnn: the PS has no segment ${{hp}}_DDR_LOW for $space (is its HP port on?)"
    }}
    assign_bd_address -offset 0x00000000 -range 0x80000000 \\
        -target_address_space [get_bd_addr_spaces $space] $fcircnn_low
    if {{$high}} {{
        set fcircnn_high [get_bd_addr_segs -quiet ${{hp}}_DDR_HIGH]
        if {{[llength $fcircnn_high] == 0}} {{
            puts "WARNING: fcircnn: the PS has no segment ${{hp}}_DDR_HIGH: $space sees\\
                  DDR_LOW only"
            return
        }}
        assign_bd_address -offset 0x000800000000 -range 0x000800000000 \\
            -target_address_space [get_bd_addr_spaces $space] $fcircnn_high
    }}
}}
{ddr}assign_bd_address
"""
    if high:
        return text
    limit = 1 << t.address_width
    return text + f"""\
# {", ".join(t.memory_ports)}: {t.address_width}-bit addresses: exclude the HP segments that
# end beyond {limit:#x}.
foreach fcircnn_seg [get_bd_addr_segs -of_objects [get_bd_addr_spaces [list \\
        {" ".join(f"{IP_NAME}/{b}" for b in t.memory_ports)}]]] {{
    set fcircnn_end [expr {{[get_property OFFSET $fcircnn_seg] + [get_property RANGE \\
        $fcircnn_seg]}}]
    if {{$fcircnn_end > {limit:#x}}} {{
        exclude_bd_addr_seg $fcircnn_seg
    }}
}}
"""


def _clock_json(t: VivadoTarget) -> str:
    """The :data:`CLOCK_FILE` record, ``@ACTUAL_MHZ@`` standing for the measured clock."""
    clk = pl_clock(t.clock_mhz)
    record = {"clock": "pl_clk0", "actual_mhz": "@ACTUAL_MHZ@",
              "configured_mhz": t.clock_mhz, "source_pll": clk.source,
              "pll_fbdiv": clk.fbdiv, "divisor0": clk.divisor0, "divisor1": clk.divisor1,
              "from": f"CONFIG.PSU__CRL_APB__PL0_REF_CTRL__ACT_FREQMHZ of {PS_CELL}"}
    return json.dumps(record).replace('"@ACTUAL_MHZ@"', "@ACTUAL_MHZ@")


def build_tcl(acc: AcceleratorConfig | VivadoTarget, banner: Sequence[str] = ()) -> str:
    """``build.tcl``: everything from the project to the PYNQ files (module docstring).

    ``FCIRCNN_JOBS`` in the environment sets ``launch_runs -jobs`` (default 4).
    """
    t = _target(acc)
    handoff = f"sources_1 bd {BD_NAME} hw_handoff {BD_NAME}.hwh"
    return _banner("#", f"build.tcl: {TOP_NAME} ({t.name}) from RTL to bitstream and "
                        "hardware handoff", banner) + f"""\
# Run in this folder: {BUILD_COMMAND}
set fcircnn_vivado_version [version -short]
regexp {{^[0-9]+\\.[0-9]+}} $fcircnn_vivado_version fcircnn_vivado_release
if {{![info exists fcircnn_vivado_release] \\
        || [package vcompare $fcircnn_vivado_release {MIN_VIVADO}] < 0}} {{
    error "fcircnn: these scripts need Vivado {MIN_VIVADO} or newer (write_hw_platform), \\
           this is $fcircnn_vivado_version"
}}
puts "fcircnn: Vivado $fcircnn_vivado_version (the scripts need {MIN_VIVADO} or newer)"
set fcircnn_vivado_dir [file normalize [file dirname [info script]]]
set fcircnn_out_dir [file join $fcircnn_vivado_dir out]
set fcircnn_jobs 4
if {{[info exists ::env(FCIRCNN_JOBS)]}} {{
    set fcircnn_jobs $::env(FCIRCNN_JOBS)
}}

source [file join $fcircnn_vivado_dir create_project.tcl]
source [file join $fcircnn_vivado_dir package_ip.tcl]
source [file join $fcircnn_vivado_dir block_design.tcl]

# The hardware handoff (.hwh) PYNQ needs, found now, before synthesis and the bitstream: the
# file of the block design's generated targets, else where Vivado writes it
# (<project>.gen/sources_1/bd/<bd>/hw_handoff/<bd>.hwh since 2020.2, <project>.srcs/... before).
proc fcircnn_find_hwh {{project_dir}} {{
    set candidates [get_files -quiet -all -of_objects [get_files -quiet {BD_NAME}.bd] \\
        {BD_NAME}.hwh]
    foreach fcircnn_gen {{gen srcs}} {{
        lappend candidates [file join $project_dir {BD_NAME}.$fcircnn_gen {handoff}]
    }}
    foreach candidate $candidates {{
        if {{[file isfile $candidate]}} {{
            return [file normalize $candidate]
        }}
    }}
    error "fcircnn: no hardware handoff of the block design {BD_NAME} (PYNQ needs the .hwh\\
           with the .bit); looked at: [join $candidates {{, }}]"
}}
set fcircnn_hwh [fcircnn_find_hwh [file join $fcircnn_vivado_dir project]]
puts "fcircnn: hardware handoff $fcircnn_hwh"

proc fcircnn_check_run {{run}} {{
    if {{[get_property PROGRESS [get_runs $run]] ne "100%"}} {{
        error "fcircnn: $run failed; see [get_property DIRECTORY [get_runs $run]]/runme.log"
    }}
}}
launch_runs synth_1 -jobs $fcircnn_jobs
wait_on_run synth_1
fcircnn_check_run synth_1
launch_runs impl_1 -to_step write_bitstream -jobs $fcircnn_jobs
wait_on_run impl_1
fcircnn_check_run impl_1

open_run impl_1
file mkdir $fcircnn_out_dir
report_utilization -file [file join $fcircnn_out_dir utilization.rpt]
report_utilization -hierarchical -file [file join $fcircnn_out_dir utilization_hier.rpt]
report_timing_summary -file [file join $fcircnn_out_dir timing_summary.rpt]
# Timing not met ends the build, unless FCIRCNN_ALLOW_TIMING_FAILURE=1 says to go on.
set fcircnn_allow [expr {{[info exists ::env(FCIRCNN_ALLOW_TIMING_FAILURE)] \\
    && $::env(FCIRCNN_ALLOW_TIMING_FAILURE) eq "1"}}]
foreach {{fcircnn_kind fcircnn_flag}} {{setup -setup hold -hold}} {{
    set fcircnn_slack [get_property SLACK \\
        [get_timing_paths -max_paths 1 -nworst 1 $fcircnn_flag]]
    if {{$fcircnn_slack ne "" && $fcircnn_slack < 0}} {{
        set fcircnn_text "timing not met at {t.clock_text} MHz: worst $fcircnn_kind slack \\
            $fcircnn_slack ns; see $fcircnn_out_dir/timing_summary.rpt"
        if {{!$fcircnn_allow}} {{
            error "fcircnn: $fcircnn_text (FCIRCNN_ALLOW_TIMING_FAILURE=1 builds anyway)"
        }}
        puts "WARNING: fcircnn: $fcircnn_text"
    }}
}}

# PYNQ overlay: the bitstream and the hardware handoff, same base name.
set fcircnn_bit [file join [get_property DIRECTORY [get_runs impl_1]] {BD_NAME}_wrapper.bit]
file copy -force $fcircnn_bit [file join $fcircnn_out_dir {TOP_NAME}.bit]
file copy -force $fcircnn_hwh [file join $fcircnn_out_dir {TOP_NAME}.hwh]
# The clock pl_clk0 gets (the PS's ACT_FREQMHZ that block_design.tcl read back and checked),
# for fcircnn deploy and the board's cycles-to-time.
set fcircnn_clock_out [open [file join $fcircnn_out_dir {CLOCK_FILE}] w]
puts $fcircnn_clock_out [string map [list @ACTUAL_MHZ@ [format %.6f $fcircnn_pl_clk0_mhz]] \\
    {{{_clock_json(t)}}}]
close $fcircnn_clock_out
# The hardware platform (Vitis, PetaLinux) with the bitstream, beside them.
write_hw_platform -fixed -include_bit -force -file [file join $fcircnn_out_dir {TOP_NAME}.xsa]
puts "fcircnn: wrote $fcircnn_out_dir/{TOP_NAME}.bit, .hwh, .clock.json and .xsa\\
      (pl_clk0 $fcircnn_pl_clk0_mhz MHz)"
"""


def vivado_scripts(acc: AcceleratorConfig | VivadoTarget,
                   banner: Sequence[str] = ()) -> dict[str, str]:
    """All four scripts by file name (:data:`SCRIPTS` order).

    Raises
    ------
    ValueError
        If the configuration cannot be built into a block design (not a Zynq UltraScale+
        part, a part name Vivado would not accept), naming the key.
    """
    t = _target(acc)
    render = (create_project_tcl, package_ip_tcl, block_design_tcl, build_tcl)
    return {name: fn(t, banner) for name, fn in zip(SCRIPTS, render, strict=True)}
