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
                            part; the board part is set only when Vivado has it installed;
                            adds the RTL and the XDC; top ``fcircnn_accel``
``package_ip.tcl``          packages the project as the IP ``fcircnn:fcircnn:fcircnn_accel``
                            into ``vivado/ip_repo``: AXI interfaces ``m_axi`` and
                            ``s_axi_control`` (inferred from the port names), clock ``ap_clk``
                            associated with both, reset ``ap_rst_n`` active low, interrupt
                            ``interrupt`` level high, memory map of ``s_axi_control`` with the
                            registers of :data:`fcircnn.arch.registers.REGISTERS`
``block_design.tcl``        a project of its own, ``vivado/project``, which holds the
                            packaged IP (``ip_repo``), not the RTL (as FINN and hls4ml
                            do); block design ``system``: the MPSoC PS (board preset when the
                            board part is installed), ``pl_clk0`` at the configured clock,
                            HPM0 FPD -> SmartConnect -> ``s_axi_control``, ``m_axi`` ->
                            SmartConnect -> HP0 FPD (128 bit), ``proc_sys_reset`` for
                            ``ap_rst_n``, ``interrupt`` -> ``pl_ps_irq0``; addresses (a
                            master of fewer than 36 address bits keeps only the HP0 segments
                            it reaches: DDR_HIGH at 32 GB is excluded), validation, HDL
                            wrapper as the new top
``build.tcl``               checks the Vivado version (:data:`MIN_VIVADO` or newer), sources
                            the three scripts above, synthesis, implementation to
                            ``write_bitstream``, utilization and timing reports; negative
                            setup or hold slack ends the build with an error (unless
                            ``FCIRCNN_ALLOW_TIMING_FAILURE=1``); copies ``fcircnn_accel.bit``
                            and ``fcircnn_accel.hwh`` (PYNQ needs both, same base name) to
                            ``vivado/out/`` and writes ``fcircnn_accel.xsa``
                            (``write_hw_platform``, with the bitstream) beside them
==========================  ===============================================================

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

import re
from collections.abc import Sequence
from dataclasses import dataclass

from fcircnn.arch.ip import IP_NAME, TOP_NAME
from fcircnn.arch.ports import PortMap
from fcircnn.arch.registers import CONTROL_ADDR_WIDTH, REGISTERS
from fcircnn.gen import TOOL_VERSION
from fcircnn.models.config import AcceleratorConfig
from fcircnn.models.schema import clock_problem

__all__ = [
    "BD_NAME",
    "BUILD_COMMAND",
    "CONTROL_WINDOW_BYTES",
    "IP_VLNV",
    "RTL_PATH",
    "SCRIPTS",
    "TOP_NAME",
    "XDC_PATH",
    "VivadoTarget",
    "block_design_tcl",
    "build_tcl",
    "clock_period_ns",
    "constraints_xdc",
    "create_project_tcl",
    "package_ip_tcl",
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
#: Bytes of the ``s_axi_control`` window: the register file's default 12-bit address.
CONTROL_WINDOW_BYTES = 1 << CONTROL_ADDR_WIDTH

_WORD = re.compile(r"[A-Za-z0-9_.:+\-]+")


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
        Board part (``xilinx.com:zcu102:part0:3.4``), ``""`` when the configuration has none.
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


def _board_check(t: VivadoTarget) -> str:
    return f"""\
set fcircnn_board_part {_brace(t.board)}
set fcircnn_have_board 0
if {{$fcircnn_board_part ne ""}} {{
    if {{[lsearch -exact [get_board_parts] $fcircnn_board_part] >= 0}} {{
        set fcircnn_have_board 1
    }} else {{
        puts "WARNING: fcircnn: board part $fcircnn_board_part is not installed in this\\
              Vivado; continuing with the part only (no board preset for the PS)"
    }}
}}
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


def block_design_tcl(acc: AcceleratorConfig | VivadoTarget,
                     banner: Sequence[str] = ()) -> str:
    """``block_design.tcl``: PS + accelerator block design and its wrapper (module
    docstring)."""
    t = _target(acc)
    ps = "zynq_ultra_ps_e_0"
    ports = list(enumerate(t.memory_ports))
    smcs = [f"mem{k or ''}_smc" for k, _ in ports]
    hp1_text = "".join(f",\n# HP{k} FPD (S_AXI_GP{k + 2}, 128 bit) for {bus}"
                       for k, bus in ports[1:])
    hp1_seen = "".join(f", {bus} through HP{k}" for k, bus in ports[1:])
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
# HPM0 FPD (32 bit) for s_axi_control, HP0 FPD (S_AXI_GP2, 128 bit) for m_axi{hp1_text}, the
# other PL masters off (an enabled port with an unconnected clock fails validation), pl_clk0
# at {t.clock_text} MHz, PL-to-PS interrupts (pl_ps_irq0).
set_property -dict [list \\
    CONFIG.PSU__USE__M_AXI_GP0 {{1}} \\
    CONFIG.PSU__MAXIGP0__DATA_WIDTH {{32}} \\
    CONFIG.PSU__USE__M_AXI_GP1 {{0}} \\
    CONFIG.PSU__USE__M_AXI_GP2 {{0}} \\
{hp_config}    CONFIG.PSU__FPGA_PL0_ENABLE {{1}} \\
    CONFIG.PSU__CRL_APB__PL0_REF_CTRL__FREQMHZ {{{t.clock_text}}} \\
    CONFIG.PSU__USE__IRQ0 {{1}} \\
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

# s_axi_control gets a {CONTROL_WINDOW_BYTES}-byte window in the HPM0 space; m_axi
# ({t.address_width}-bit addresses) sees the DDR through HP0{hp1_seen}.
assign_bd_address
{_address_segments(t)}validate_bd_design
save_bd_design

set fcircnn_bd_file [get_files {BD_NAME}.bd]
generate_target all $fcircnn_bd_file
set fcircnn_wrapper [make_wrapper -files $fcircnn_bd_file -top]
add_files -norecurse -fileset sources_1 $fcircnn_wrapper
set_property top {BD_NAME}_wrapper [get_filesets sources_1]
update_compile_order -fileset sources_1
"""


def _address_segments(t: VivadoTarget) -> str:
    """Tcl that leaves each AXI manager (``m_axi`` .. ``m_axi3``) only the address segments its
    ``address_width`` reaches (the HP port's DDR_HIGH, at 32 GB, needs 36 bits); nothing for a
    36-bit or wider master."""
    if t.address_width >= 36:
        return ""
    limit = 1 << t.address_width
    return f"""\
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


def build_tcl(acc: AcceleratorConfig | VivadoTarget, banner: Sequence[str] = ()) -> str:
    """``build.tcl``: everything from the project to the PYNQ files (module docstring).

    ``FCIRCNN_JOBS`` in the environment sets ``launch_runs -jobs`` (default 4).
    """
    t = _target(acc)
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
set fcircnn_hwh [lindex [get_files -all -of_objects [get_files {BD_NAME}.bd] {BD_NAME}.hwh] 0]
file copy -force $fcircnn_hwh [file join $fcircnn_out_dir {TOP_NAME}.hwh]
# The hardware platform (Vitis, PetaLinux) with the bitstream, beside them.
write_hw_platform -fixed -include_bit -force -file [file join $fcircnn_out_dir {TOP_NAME}.xsa]
puts "fcircnn: wrote $fcircnn_out_dir/{TOP_NAME}.bit, .hwh and .xsa"
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
