"""Vivado scripts and XDC (:mod:`fcircnn.gen.vivado`), checked without Vivado.

Every script runs under ``tclsh`` with a prelude of stubs: each Vivado command used by the
scripts is a procedure that logs its name and arguments (hex-encoded, one call per line) and
returns a plausible value. No catch-all ``unknown``: a Vivado command the stubs do not define
fails the run, so the stub list is also the list of commands the scripts use. ``file copy`` is
logged instead of executed, ``file mkdir`` logged and executed (in the test's folder).
"""

import json
import shutil
import subprocess
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from fcircnn.gen import vivado
from fcircnn.hw.regfile import REGISTERS
from fcircnn.models.config import builtin_path, load_accelerator

#: The board part of the shipped ZCU102 configurations, as they name it; the tests install other
#: revisions of the same board to show that the scripts take what Vivado has.
ZCU102 = load_accelerator(builtin_path("c3d_zcu102")).device.board
ZCU102_BOARD = ":".join(ZCU102.split(":")[:3])  # vendor:board:component
#: What the stub Vivado has installed: a newer and an older revision of the ZCU102 than the
#: configuration names, and another board.
INSTALLED = (f"{ZCU102_BOARD}:1.0", f"{ZCU102_BOARD}:99.1", "xilinx.com:zcu104:part0:1.1")

STUBS = r"""
set ::stub_log [open $::env(STUB_LOG) w]
set ::stub_board_parts $::env(STUB_BOARD_PARTS)
set ::stub_interfaces $::env(STUB_INTERFACES)
proc _log {cmd args} {
    set words [list $cmd]
    foreach a $args { lappend words [binary encode hex [encoding convertto utf-8 $a]] }
    puts $::stub_log [join $words " "]
    flush $::stub_log
}
namespace eval ipx {}
foreach cmd {
    create_project set_property add_files update_compile_order
    ipx::package_project ipx::infer_bus_interfaces ipx::associate_bus_interfaces
    ipx::remove_bus_parameter ipx::remove_memory_map ipx::create_xgui_files
    ipx::update_checksums ipx::check_integrity ipx::save_core update_ip_catalog
    create_bd_design apply_bd_automation connect_bd_net connect_bd_intf_net
    assign_bd_address validate_bd_design save_bd_design generate_target close_project
    launch_runs wait_on_run open_run report_utilization report_timing_summary write_bitstream
    write_hw_platform exclude_bd_addr_seg ipx::remove_address_space
} {
    proc $cmd args "_log $cmd {*}\$args"
}
# Board parts as Vivado lists them: glob patterns, -latest_file_version keeps the newest file
# version of each vendor:board:component.
proc get_board_parts args {
    _log get_board_parts {*}$args
    set latest [expr {"-latest_file_version" in $args}]
    set patterns [lsearch -all -inline -not -glob $args -*]
    if {[llength $patterns] == 0} { set patterns * }
    set found {}
    foreach part $::stub_board_parts {
        foreach pattern $patterns {
            if {[string match $pattern $part]} { lappend found $part; break }
        }
    }
    if {!$latest} { return $found }
    set newest [dict create]
    foreach part [lsort -dictionary $found] {
        dict set newest [join [lrange [split $part :] 0 2] :] $part
    }
    return [dict values $newest]
}
proc current_project args { _log current_project {*}$args; return project_1 }
# The block design's .hwh as get_files lists it: STUB_HWH ("" when Vivado lists none).
proc get_files args {
    _log get_files {*}$args
    if {[string match *.hwh [lindex $args end]]} { return $::env(STUB_HWH) }
    return [lindex $args end]
}
proc get_filesets args { _log get_filesets {*}$args; return [lindex $args end] }
proc get_runs args { _log get_runs {*}$args; return [lindex $args end] }
proc get_property {name object} {
    _log get_property $name $object
    switch -- $name {
        PROGRESS { return "100%" }
        DIRECTORY { return "/stub/runs/$object" }
        SLACK { return [dict get $::stub_slack $object] }
        OFFSET { return [lindex [dict get $::stub_segments $object] 0] }
        RANGE { return [lindex [dict get $::stub_segments $object] 1] }
        CONFIG.PSU__CRL_APB__PL0_REF_CTRL__ACT_FREQMHZ { return $::env(STUB_ACT_MHZ) }
        default { return "" }
    }
}
# Worst setup and hold slack (STUB_SLACK: "setup hold" in ns).
set ::stub_slack [dict create path_-setup [lindex $::env(STUB_SLACK) 0] \
    path_-hold [lindex $::env(STUB_SLACK) 1]]
proc get_timing_paths args { _log get_timing_paths {*}$args; return path_[lindex $args end] }
proc version args { _log version {*}$args; return $::env(STUB_VIVADO) }
# The HP0 FPD segments a master sees on the ZCU102's PS: offset and range.
set ::stub_segments [dict create SEG_HP0_DDR_LOW {0x00000000 0x80000000} \
    SEG_HP0_QSPI {0xC0000000 0x20000000} SEG_HP0_LPS_OCM {0xFF000000 0x01000000} \
    SEG_HP0_DDR_HIGH {0x800000000 0x800000000}]
proc get_bd_addr_spaces args { _log get_bd_addr_spaces {*}$args; return [lindex $args end] }
# The segments of an address space (-of_objects), or a PS segment by its path (none of
# those named in STUB_MISSING_SEGS).
proc get_bd_addr_segs args {
    _log get_bd_addr_segs {*}$args
    if {"-of_objects" in $args} { return [dict keys $::stub_segments] }
    set path [lindex $args end]
    if {$path in $::env(STUB_MISSING_SEGS)} { return "" }
    return $path
}
proc create_bd_cell args { _log create_bd_cell {*}$args; return [lindex $args end] }
proc get_bd_cells args { _log get_bd_cells {*}$args; return [lindex $args end] }
proc get_bd_pins args { _log get_bd_pins {*}$args; return [lindex $args end] }
proc get_bd_intf_pins args { _log get_bd_intf_pins {*}$args; return [lindex $args end] }
proc make_wrapper args { _log make_wrapper {*}$args; return /stub/gen/system_wrapper.v }
proc ipx::current_core args { _log ipx::current_core {*}$args; return core_0 }
proc ipx::get_bus_interfaces {name args} {
    _log ipx::get_bus_interfaces $name {*}$args
    if {$name in $::stub_interfaces} { return "busif_$name" }
    return ""
}
proc ipx::infer_bus_interface {port vlnv core} {
    _log ipx::infer_bus_interface $port $vlnv $core
    lappend ::stub_interfaces $port
}
proc ipx::get_bus_parameters args { _log ipx::get_bus_parameters {*}$args; return "" }
proc ipx::add_bus_parameter {name busif} {
    _log ipx::add_bus_parameter $name $busif
    return "param_${busif}_$name"
}
proc ipx::get_memory_maps args { _log ipx::get_memory_maps {*}$args; return "" }
proc ipx::add_memory_map {name core} { _log ipx::add_memory_map $name $core; return map_$name }
proc ipx::add_address_block {name map} {
    _log ipx::add_address_block $name $map
    return block_$name
}
# The packager's own address spaces: those named in STUB_SPACES.
proc ipx::get_address_spaces {name args} {
    _log ipx::get_address_spaces $name {*}$args
    if {$name in $::env(STUB_SPACES)} { return "packaged_$name" }
    return ""
}
proc ipx::add_address_space {name core} {
    _log ipx::add_address_space $name $core
    return space_$name
}
proc ipx::add_register {name block} { _log ipx::add_register $name $block; return reg_$name }
proc ipx::get_file_groups args { _log ipx::get_file_groups {*}$args; return group_0 }
proc ipx::get_files args { _log ipx::get_files {*}$args; return xdc_0 }
# file copy and delete are logged, not done; file mkdir is logged and done (in tmp_path).
rename file _tcl_file
proc file {sub args} {
    if {$sub in {copy mkdir delete}} {
        _log file $sub {*}$args
        if {$sub eq "mkdir"} { _tcl_file mkdir {*}$args }
        return
    }
    return [_tcl_file $sub {*}$args]
}
"""

ACC = """
name: acc_%(tag)s
network: c3d.yaml
device:
  part: xczu9eg-ffvb1156-2-e
%(board)s  resources: {dsp: 2520, bram36: 912, lut: 274080, ff: 548160}
clock_mhz: %(mhz)s
block_size: 8
address_width: 40
cores:
  - {name: main, tn: 32, tm: 64, td: 2, tr: 7, tc: 7, unroll: [tn, tm], max_kernel: [3, 3, 3]}
"""

pytestmark = pytest.mark.skipif(shutil.which("tclsh") is None, reason="tclsh not installed")


def _config(tmp_path, mhz=200, board=True):
    shutil.copy(builtin_path("c3d"), tmp_path / "c3d.yaml")
    path = tmp_path / f"acc_{mhz}.yaml"
    board_line = f"  board: {ZCU102}\n" if board else ""
    path.write_text(ACC % {"mhz": mhz, "tag": str(mhz).replace(".", "p"), "board": board_line})
    return load_accelerator(path)


@pytest.fixture(scope="module")
def zcu102():
    return load_accelerator(builtin_path("c3d_zcu102"))


def _zcu102_act_mhz(acc):
    """``ACT_FREQMHZ`` as Vivado would report it on the ZCU102 (PSS_REF_CLK 33.330 MHz) for
    the generated RPLL and divisors, six decimals."""
    clock = acc.clock_mhz if isinstance(acc, vivado.VivadoTarget) else float(acc.clock_mhz)
    return f"{vivado.pl_clock(clock).mhz_at(33.33):.6f}"


def run_tcl(tmp_path, acc, script, board_parts=INSTALLED, *, vivado_version="2023.2",
            slack=(0.125, 0.05), extra_env=None, fails=False, act_mhz=None, hwh="listed",
            spaces=(), missing_segs=()):
    """Write the scripts to ``tmp_path/vivado``, run ``script`` on the stubs; return the calls
    ``[(command, [args...]), ...]`` and the standard output (with ``fails``: the calls and the
    error output, the run having to fail).

    ``act_mhz``: the PS's ``ACT_FREQMHZ`` (default: what the ZCU102 gives for the generated
    settings); ``hwh``: ``"listed"`` makes ``get_files`` list an existing ``.hwh``, ``""`` lists
    none; ``spaces``: address spaces the packager made itself; ``missing_segs``: PS segments
    the PS lacks."""
    folder = tmp_path / "vivado"
    folder.mkdir(exist_ok=True)
    for name, text in vivado.vivado_scripts(acc).items():
        (folder / name).write_text(text)
    (tmp_path / "stubs.tcl").write_text(STUBS)
    (tmp_path / "run.tcl").write_text(
        f"source {tmp_path / 'stubs.tcl'}\nsource {folder / script}\n")
    if hwh == "listed":
        hwh = tmp_path / "listed" / "system.hwh"
        hwh.parent.mkdir(exist_ok=True)
        hwh.write_text("<hwh/>")
    log = tmp_path / "calls.log"
    ports = vivado.VivadoTarget.from_config(acc).memory_ports if not isinstance(
        acc, vivado.VivadoTarget) else acc.memory_ports
    env = {"STUB_LOG": str(log), "STUB_BOARD_PARTS": " ".join(board_parts), "PATH": "/usr/bin",
           "STUB_INTERFACES": " ".join((*ports, "s_axi_control")),
           "STUB_VIVADO": vivado_version, "STUB_SLACK": " ".join(map(str, slack)),
           "STUB_ACT_MHZ": _zcu102_act_mhz(acc) if act_mhz is None else act_mhz,
           "STUB_HWH": str(hwh), "STUB_SPACES": " ".join(spaces),
           "STUB_MISSING_SEGS": " ".join(missing_segs), **(extra_env or {})}
    proc = subprocess.run(["tclsh", str(tmp_path / "run.tcl")], capture_output=True, text=True,
                          env=env, timeout=60)
    calls = []
    for line in log.read_text().splitlines():
        cmd, *args = line.split(" ")
        calls.append((cmd, [bytes.fromhex(a).decode() for a in args]))
    if fails:
        assert proc.returncode != 0, proc.stdout
        return calls, proc.stderr
    assert proc.returncode == 0, proc.stderr + proc.stdout
    return calls, proc.stdout


def _named(calls, cmd):
    return [args for c, args in calls if c == cmd]


def _index(calls, cmd, *prefix):
    """Position of the first call of ``cmd`` whose arguments start with ``prefix``."""
    for i, (c, args) in enumerate(calls):
        if c == cmd and args[:len(prefix)] == list(prefix):
            return i
    raise AssertionError(f"no call {cmd} {' '.join(prefix)}")


# --------------------------------------------------------------------------------------------
# XDC


def test_xdc_clock_period_200mhz(zcu102):
    xdc = vivado.constraints_xdc(zcu102)
    commands = [line for line in xdc.splitlines() if line and not line.startswith("#")]
    assert commands == ["create_clock -period 5.000 -name ap_clk [get_ports ap_clk]"]
    assert "false_path" not in xdc and "set_input_delay" not in xdc


@pytest.mark.parametrize(("mhz", "period"), [(250, "4.000"), (187.5, "5.333"), (100, "10.000")])
def test_xdc_clock_period_follows_config(tmp_path, mhz, period):
    acc = _config(tmp_path, mhz=mhz)
    assert acc.clock_mhz == mhz
    assert f"create_clock -period {period} -name ap_clk [get_ports ap_clk]" in \
        vivado.constraints_xdc(acc)
    assert vivado.clock_period_ns(acc) == period


def test_non_mpsoc_part_is_rejected(zcu102):
    target = vivado.VivadoTarget.from_config(zcu102)
    with pytest.raises(ValueError, match=r"device.part 'xc7a35t.*Zynq UltraScale\+"):
        vivado.VivadoTarget(**{**target.__dict__, "part": "xc7a35tcpg236-1"})
    with pytest.raises(ValueError, match="not a Vivado part name"):
        vivado.VivadoTarget(**{**target.__dict__, "board": "zcu102 [exec rm]"})
    # a denormal clock would give `create_clock -period inf`
    with pytest.raises(ValueError, match=r"clock_mhz must be in the range \[1, 1000\] MHz"):
        vivado.VivadoTarget(**{**target.__dict__, "clock_mhz": 1e-320})


def test_scripts_are_deterministic(zcu102):
    assert vivado.vivado_scripts(zcu102) == vivado.vivado_scripts(zcu102)
    assert list(vivado.vivado_scripts(zcu102)) == list(vivado.SCRIPTS)


# --------------------------------------------------------------------------------------------
# create_project.tcl and the board part (both projects look it up the same way)


def test_create_project_with_board(tmp_path, zcu102):
    calls, out = run_tcl(tmp_path, zcu102, "create_project.tcl")
    (create,) = _named(calls, "create_project")
    assert create[0] == "fcircnn_accel_ip"  # the IP is packaged in a project of its own
    assert Path(create[1]) == tmp_path / "vivado" / "ip_project"
    assert create[2:] == ["-part", "xczu9eg-ffvb1156-2-e", "-force"]
    # The newest revision installed, whichever the configuration names.
    assert ["board_part", f"{ZCU102_BOARD}:99.1", "project_1"] in _named(calls, "set_property")
    assert _index(calls, "get_board_parts") < _index(calls, "create_project") < \
        _index(calls, "set_property", "board_part")
    added = _named(calls, "add_files")
    assert added == [["-norecurse", "-fileset", "sources_1", str(tmp_path / vivado.RTL_PATH)],
                     ["-norecurse", "-fileset", "constrs_1", str(tmp_path / vivado.XDC_PATH)]]
    props = _named(calls, "set_property")
    assert ["USED_IN", "synthesis implementation out_of_context",
            str(tmp_path / vivado.XDC_PATH)] in props
    assert ["top", "fcircnn_accel", "sources_1"] in props
    assert "WARNING" not in out and f"board part {ZCU102_BOARD}:99.1" in out


@pytest.mark.parametrize("installed", [(f"{ZCU102_BOARD}:1.0",), (ZCU102,),
                                       (f"{ZCU102_BOARD}:2.9", f"{ZCU102_BOARD}:2.10")])
@pytest.mark.parametrize("script", ["create_project.tcl", "block_design.tcl"])
def test_the_board_part_is_any_installed_revision(tmp_path, zcu102, installed, script):
    """Whatever revision of the configured board Vivado has, the newest is used and its preset
    applied: the lookup names the board and component, never a revision."""
    calls, _ = run_tcl(tmp_path, zcu102, script, board_parts=installed)
    newest = installed[-1]
    assert ["board_part", newest, "project_1"] in _named(calls, "set_property")
    (lookup,) = [a for a in _named(calls, "get_board_parts") if "-latest_file_version" in a]
    assert lookup[-1] == f"{ZCU102_BOARD}:*"
    revision = ZCU102.rsplit(":", 1)[1]
    assert not any(revision in arg for args in _named(calls, "get_board_parts") for arg in args)
    if script == "block_design.tcl":
        assert len([a for a in _named(calls, "apply_bd_automation")
                    if "xilinx.com:bd_rule:zynq_ultra_ps_e" in a]) == 1


@pytest.mark.parametrize("installed, near", [
    (("xilinx.com:zcu104:part0:1.1",), "none"),
    (("other.com:zcu102:part0:1.0", "xilinx.com:zcu104:part0:1.1"), "other.com:zcu102:part0:1.0"),
])
@pytest.mark.parametrize("script", ["create_project.tcl", "block_design.tcl", "build.tcl"])
def test_a_missing_board_part_stops_the_build(tmp_path, zcu102, installed, near, script):
    """No revision of the board installed: an error naming what Vivado has, before any project
    is made, instead of a warning and a PS without its board preset."""
    calls, err = run_tcl(tmp_path, zcu102, script, board_parts=installed, fails=True)
    assert f"this Vivado has no board part {ZCU102_BOARD}:*" in err
    assert f"board parts matching *zcu102*: {near}" in err and ZCU102 in err
    assert not _named(calls, "create_project") or script == "build.tcl"
    assert not _named(calls, "apply_bd_automation") and not _named(calls, "launch_runs")
    assert not [a for a in _named(calls, "set_property") if a[0] == "board_part"]


def test_create_project_config_without_board(tmp_path):
    acc = _config(tmp_path, board=False)
    calls, out = run_tcl(tmp_path, acc, "create_project.tcl")
    assert not _named(calls, "get_board_parts")
    assert not [a for a in _named(calls, "set_property") if a[0] == "board_part"]
    assert "WARNING: fcircnn: the configuration names no board part" in out


# --------------------------------------------------------------------------------------------
# package_ip.tcl


def test_package_ip(tmp_path, zcu102):
    calls, _ = run_tcl(tmp_path, zcu102, "package_ip.tcl")
    (pkg,) = _named(calls, "ipx::package_project")
    assert pkg[:2] == ["-root_dir", str(tmp_path / "vivado" / "ip_repo")]
    assert "-import_files" in pkg and pkg[pkg.index("-vendor") + 1] == "fcircnn"
    assert _named(calls, "ipx::infer_bus_interfaces") == [
        ["xilinx.com:interface:aximm_rtl:1.0", "core_0"]]
    # The stub packager inferred only the AXI interfaces: the others are inferred explicitly.
    assert _named(calls, "ipx::infer_bus_interface") == [
        ["ap_clk", "xilinx.com:signal:clock_rtl:1.0", "core_0"],
        ["ap_rst_n", "xilinx.com:signal:reset_rtl:1.0", "core_0"],
        ["interrupt", "xilinx.com:signal:interrupt_rtl:1.0", "core_0"]]
    assoc = _named(calls, "ipx::associate_bus_interfaces")
    assert ["-busif", "m_axi", "-clock", "ap_clk", "core_0"] in assoc
    assert ["-busif", "s_axi_control", "-clock", "ap_clk", "core_0"] in assoc
    assert ["-clock", "ap_clk", "-reset", "ap_rst_n", "core_0"] in assoc
    props = _named(calls, "set_property")
    assert ["value", "ACTIVE_LOW", "param_busif_ap_rst_n_POLARITY"] in props
    assert ["value", "LEVEL_HIGH", "param_busif_interrupt_SENSITIVITY"] in props
    assert ["name", "fcircnn_accel", "core_0"] in props
    # Memory map of s_axi_control with every register of the table.
    assert _named(calls, "ipx::add_memory_map") == [["s_axi_control", "core_0"]]
    assert ["slave_memory_map_ref", "s_axi_control", "busif_s_axi_control"] in props
    assert ["range", "4096", "block_reg0"] in props
    assert [a[0] for a in _named(calls, "ipx::add_register")] == [r.name for r in REGISTERS]
    for r in REGISTERS:
        assert ["address_offset", f"{r.offset:#04x}", f"reg_{r.name}"] in props
    assert ["used_in", "out_of_context implementation synthesis", "xdc_0"] in props
    order = [_index(calls, "ipx::package_project"), _index(calls, "ipx::infer_bus_interfaces"),
             _index(calls, "ipx::associate_bus_interfaces"),
             _index(calls, "ipx::add_address_space"), _index(calls, "ipx::add_memory_map"),
             _index(calls, "ipx::update_checksums"), _index(calls, "ipx::save_core")]
    assert order == sorted(order)


@pytest.mark.parametrize(("ports", "width"), [(1, 40), (4, 40), (2, 32)])
@pytest.mark.parametrize("packaged", [False, True])
def test_the_managers_address_spaces_are_declared(tmp_path, ports, width, packaged):
    """Each AXI manager gets an address space of its own, explicitly: the interface refers to
    it, its range is the manager's whole address range (2**40 bytes hold the HP ports'
    DDR_HIGH, 32 GB up to 64 GB), its width the 128-bit data; one the packager made itself is
    replaced, not trusted."""
    acc = _config(tmp_path).model_copy(update={"axi_ports": ports, "address_width": width})
    buses = ["m_axi"] + [f"m_axi{k}" for k in range(1, ports)]
    calls, _ = run_tcl(tmp_path, acc, "package_ip.tcl", spaces=buses if packaged else ())
    assert _named(calls, "ipx::add_address_space") == [[bus, "core_0"] for bus in buses]
    assert _named(calls, "ipx::remove_address_space") == (
        [[bus, "core_0"] for bus in buses] if packaged else [])
    props = _named(calls, "set_property")
    for bus in buses:
        assert ["master_address_space_ref", bus, f"busif_{bus}"] in props
        assert ["range", str(2 ** width), f"space_{bus}"] in props
        assert ["width", "128", f"space_{bus}"] in props
    if width == 40:
        assert 2 ** width >= 0x800000000 + 0x800000000  # DDR_HIGH's end
    assert _index(calls, "ipx::add_address_space") < _index(calls, "ipx::save_core")


# --------------------------------------------------------------------------------------------
# block_design.tcl


def _ps_config(calls):
    for args in _named(calls, "set_property"):
        if args[0] == "-dict" and args[-1] == "zynq_ultra_ps_e_0":
            words = args[1].split()
            return {k: v.strip("{}") for k, v in zip(words[::2], words[1::2], strict=True)}
    raise AssertionError("no CONFIG of the PS")


def test_block_design(tmp_path, zcu102):
    calls, out = run_tcl(tmp_path, zcu102, "block_design.tcl")
    # Its own project, holding the packaged IP and not the RTL.
    assert _index(calls, "close_project") < _index(calls, "create_project") < \
        _index(calls, "update_ip_catalog") < _index(calls, "create_bd_design")
    (create,) = _named(calls, "create_project")
    assert create[0] == "system" and Path(create[1]) == tmp_path / "vivado" / "project"
    assert ["ip_repo_paths", str(tmp_path / "vivado" / "ip_repo"), "project_1"] in \
        _named(calls, "set_property")
    assert not _named(calls, "add_files")[:-1]  # only the wrapper
    assert not _named(calls, "exclude_bd_addr_seg")  # 40-bit m_axi reaches every segment
    assert _named(calls, "create_bd_design") == [["system"]]
    cells = _named(calls, "create_bd_cell")
    assert ["-type", "ip", "-vlnv", "xilinx.com:ip:zynq_ultra_ps_e", "zynq_ultra_ps_e_0"] in cells
    assert ["-type", "ip", "-vlnv", vivado.IP_VLNV, "fcircnn_accel_0"] in cells
    (preset,) = [a for a in _named(calls, "apply_bd_automation")
                 if "xilinx.com:bd_rule:zynq_ultra_ps_e" in a]
    assert preset[-2:] == ['apply_board_preset "1"', "zynq_ultra_ps_e_0"]
    # The preset comes first, our PS settings override it.
    assert _index(calls, "apply_bd_automation") < _index(calls, "set_property", "-dict")
    assert "WARNING" not in out
    ps = _ps_config(calls)
    assert ps["CONFIG.PSU__CRL_APB__PL0_REF_CTRL__FREQMHZ"] == "200"
    assert ps["CONFIG.PSU__USE__S_AXI_GP2"] == "1"  # S_AXI_HP0_FPD
    assert ps["CONFIG.PSU__SAXIGP2__DATA_WIDTH"] == "128"
    assert ps["CONFIG.PSU__USE__M_AXI_GP0"] == "1"  # M_AXI_HPM0_FPD
    assert ps["CONFIG.PSU__USE__IRQ0"] == "1"
    intf = _named(calls, "connect_bd_intf_net")
    assert ["zynq_ultra_ps_e_0/M_AXI_HPM0_FPD", "ctrl_smc/S00_AXI"] in intf
    assert ["ctrl_smc/M00_AXI", "fcircnn_accel_0/s_axi_control"] in intf
    assert ["fcircnn_accel_0/m_axi", "mem_smc/S00_AXI"] in intf
    assert ["mem_smc/M00_AXI", "zynq_ultra_ps_e_0/S_AXI_HP0_FPD"] in intf
    nets = _named(calls, "connect_bd_net")
    clock = next(n for n in nets if n[0] == "zynq_ultra_ps_e_0/pl_clk0")
    assert {"fcircnn_accel_0/ap_clk", "zynq_ultra_ps_e_0/maxihpm0_fpd_aclk",
            "zynq_ultra_ps_e_0/saxihp0_fpd_aclk", "rst_pl_clk0/slowest_sync_clk"} <= set(clock)
    assert ["rst_pl_clk0/peripheral_aresetn", "fcircnn_accel_0/ap_rst_n"] in nets
    assert ["fcircnn_accel_0/interrupt", "zynq_ultra_ps_e_0/pl_ps_irq0"] in nets
    order = [_index(calls, "create_bd_design"), _index(calls, "connect_bd_intf_net"),
             _index(calls, "assign_bd_address"), _index(calls, "validate_bd_design"),
             _index(calls, "save_bd_design"), _index(calls, "make_wrapper")]
    assert order == sorted(order)
    assert _named(calls, "make_wrapper") == [["-files", "system.bd", "-top"]]
    assert ["-norecurse", "-fileset", "sources_1", "/stub/gen/system_wrapper.v"] in \
        _named(calls, "add_files")
    assert ["top", "system_wrapper", "sources_1"] in _named(calls, "set_property")


def test_block_design_config_without_board_says_so(tmp_path):
    calls, out = run_tcl(tmp_path, _config(tmp_path, board=False), "block_design.tcl")
    assert not _named(calls, "apply_bd_automation")
    assert "WARNING: fcircnn: the configuration names no board part" in out
    assert "no board preset" in out


@pytest.mark.parametrize("mhz", [200, 250, 187.5, 100, 300, 150])
def test_the_pl_clock_divides_exactly_from_the_rpll(tmp_path, mhz):
    """pl_clk0 comes from the RPLL in manual clock mode, whose frequency (PS_REF_CLK x FBDIV /
    2, the nominal 100/3 MHz reference) the divisors divide to the configured clock exactly;
    the IOPLL the preset gives PL0 (1500 MHz: 187.5 or 214.3, never 200) is not used."""
    calls, out = run_tcl(tmp_path, _config(tmp_path, mhz=mhz), "block_design.tcl")
    ps = _ps_config(calls)
    assert ps["CONFIG.PSU__CRL_APB__PL0_REF_CTRL__SRCSEL"] == "RPLL"
    assert ps["CONFIG.PSU__CRL_APB__PL0_REF_CTRL__FREQMHZ"] == f"{mhz:g}"
    assert ps["CONFIG.PSU__CRL_APB__RPLL_CTRL__DIV2"] == "1"
    assert ps["CONFIG.PSU__CRL_APB__RPLL_FRAC_CFG__ENABLED"] == "0"
    fbdiv = int(ps["CONFIG.PSU__CRL_APB__RPLL_CTRL__FBDIV"])
    d0 = int(ps["CONFIG.PSU__CRL_APB__PL0_REF_CTRL__DIVISOR0"])
    d1 = int(ps["CONFIG.PSU__CRL_APB__PL0_REF_CTRL__DIVISOR1"])
    pll = Fraction(100, 3) * fbdiv / 2
    assert pll / (d0 * d1) == Fraction(str(mhz))
    assert 1500 <= Fraction(3333, 100) * fbdiv and Fraction(100, 3) * fbdiv <= 3000  # the VCO
    assert 1 <= d0 <= 63 and 1 <= d1 <= 63
    if pll == 1200:
        assert fbdiv == 72  # the preset's RPLL, kept
    # Manual mode is set first, so Vivado keeps these divisors.
    assert ["CONFIG.PSU__OVERRIDE__BASIC_CLOCK", "1", "zynq_ultra_ps_e_0"] in \
        _named(calls, "set_property")
    assert _index(calls, "apply_bd_automation") < \
        _index(calls, "set_property", "CONFIG.PSU__OVERRIDE__BASIC_CLOCK") < \
        _index(calls, "set_property", "-dict")
    assert f"pl_clk0 {_zcu102_act_mhz(_config(tmp_path, mhz=mhz))} MHz" in out
    assert "WARNING" not in out


def test_the_200_mhz_clock_is_the_preset_rpll_over_6():
    clk = vivado.pl_clock(200)
    assert (clk.source, clk.fbdiv, clk.divisor0, clk.divisor1) == ("RPLL", 72, 6, 1)
    assert clk.exact and clk.pll_mhz == 1200
    assert round(clk.mhz_at(33.33), 2) == 199.98  # the ZCU102's 33.330 MHz PS_REF_CLK


def test_a_clock_no_rpll_divides_to_gets_the_closest_and_says_so(tmp_path):
    acc = _config(tmp_path, mhz=333)
    clk = vivado.pl_clock(333)
    assert not clk.exact and abs(clk.mhz - 333) < Fraction(1, 2)
    script = vivado.block_design_tcl(acc)
    assert "no RPLL setting divides to 333 MHz exactly, this is the closest" in script
    _, out = run_tcl(tmp_path, acc, "block_design.tcl")
    assert "WARNING: fcircnn: no RPLL setting gives pl_clk0 333 MHz exactly" in out


@pytest.mark.parametrize(("act", "message"), [
    ("187.481262", ("pl_clk0 would run at 187.481262 MHz (the PS's ACT_FREQMHZ), not the "
                    "configured 200 MHz: more than 0.1 % off")),
    ("214.264297", ("pl_clk0 would run at 214.264297 MHz (the PS's ACT_FREQMHZ), not the "
                    "configured 200 MHz")),
    ("199.7", "pl_clk0 would run at 199.7 MHz (the PS's ACT_FREQMHZ), not the configured 200"),
    ("", "cannot read the PS's pl_clk0 frequency"),
    ("n/a", "cannot read the PS's pl_clk0 frequency"),
])
def test_the_actual_pl_clock_is_read_back_and_checked(tmp_path, zcu102, act, message):
    """ACT_FREQMHZ of the PS is read back after validation: off by more than 0.1 % (the
    187.48 MHz Vivado gives 200 MHz asked of the IOPLL), or unreadable, it stops the build
    naming both values, before the wrapper, synthesis or the bitstream."""
    calls, err = run_tcl(tmp_path, zcu102, "build.tcl", act_mhz=act, fails=True)
    assert message in " ".join(err.split())
    assert ["CONFIG.PSU__CRL_APB__PL0_REF_CTRL__ACT_FREQMHZ", "zynq_ultra_ps_e_0"] in \
        _named(calls, "get_property")
    assert _index(calls, "validate_bd_design") < \
        _index(calls, "get_property", "CONFIG.PSU__CRL_APB__PL0_REF_CTRL__ACT_FREQMHZ")
    assert not _named(calls, "make_wrapper") and not _named(calls, "launch_runs")


@pytest.mark.parametrize("act", ["199.980011", "200", "200.19"])
def test_an_actual_clock_within_a_tenth_of_a_percent_passes(tmp_path, zcu102, act):
    calls, out = run_tcl(tmp_path, zcu102, "block_design.tcl", act_mhz=act)
    assert f"fcircnn: pl_clk0 {act} MHz (configured 200 MHz" in out
    assert _named(calls, "make_wrapper")


def test_each_manager_is_assigned_its_hp_ports_ddr_explicitly(tmp_path, zcu102):
    """m_axi gets HP0's DDR_LOW (0, 2 GB) and DDR_HIGH (32 GB, 32 GB) with explicit offsets
    and ranges, in its own address space, before the rest is assigned."""
    calls, _ = run_tcl(tmp_path, zcu102, "block_design.tcl")
    assigned = _named(calls, "assign_bd_address")
    assert assigned == [
        ["-offset", "0x00000000", "-range", "0x80000000", "-target_address_space",
         "fcircnn_accel_0/m_axi", "zynq_ultra_ps_e_0/SAXIGP2/HP0_DDR_LOW"],
        ["-offset", "0x000800000000", "-range", "0x000800000000", "-target_address_space",
         "fcircnn_accel_0/m_axi", "zynq_ultra_ps_e_0/SAXIGP2/HP0_DDR_HIGH"],
        [],  # then everything else: s_axi_control in the HPM0 space
    ]
    assert _index(calls, "connect_bd_intf_net") < _index(calls, "assign_bd_address") < \
        _index(calls, "validate_bd_design")


def test_a_missing_ddr_segment_is_named(tmp_path, zcu102):
    _, err = run_tcl(tmp_path, zcu102, "block_design.tcl", fails=True,
                     missing_segs=["zynq_ultra_ps_e_0/SAXIGP2/HP0_DDR_LOW"])
    assert "the PS has no segment zynq_ultra_ps_e_0/SAXIGP2/HP0_DDR_LOW" in err
    calls, out = run_tcl(tmp_path, zcu102, "block_design.tcl",
                         missing_segs=["zynq_ultra_ps_e_0/SAXIGP2/HP0_DDR_HIGH"])
    assert "no segment zynq_ultra_ps_e_0/SAXIGP2/HP0_DDR_HIGH" in out
    assert [a[-1] for a in _named(calls, "assign_bd_address") if a] == [
        "zynq_ultra_ps_e_0/SAXIGP2/HP0_DDR_LOW"]


# --------------------------------------------------------------------------------------------
# build.tcl


def test_build_runs_everything_in_order(tmp_path, zcu102):
    calls, out = run_tcl(tmp_path, zcu102, "build.tcl")
    steps = [
        ("create_project",), ("ipx::package_project",), ("ipx::save_core",),
        ("create_bd_design",), ("make_wrapper",),
        ("launch_runs", "synth_1"), ("wait_on_run", "synth_1"),
        ("launch_runs", "impl_1"), ("wait_on_run", "impl_1"),
        ("open_run", "impl_1"), ("report_utilization",), ("report_timing_summary",),
    ]
    positions = [_index(calls, *step) for step in steps]
    assert positions == sorted(positions)
    assert _named(calls, "launch_runs")[0] == ["synth_1", "-jobs", "4"]
    assert _named(calls, "launch_runs")[1] == ["impl_1", "-to_step", "write_bitstream",
                                               "-jobs", "4"]
    outdir = tmp_path / "vivado" / "out"
    assert ["-file", str(outdir / "utilization.rpt")] in _named(calls, "report_utilization")
    assert _named(calls, "report_timing_summary") == [["-file",
                                                       str(outdir / "timing_summary.rpt")]]
    copies = [a for a in _named(calls, "file") if a[0] == "copy"]
    assert copies == [
        ["copy", "-force", "/stub/runs/impl_1/system_wrapper.bit",
         str(outdir / "fcircnn_accel.bit")],
        ["copy", "-force", str(tmp_path / "listed" / "system.hwh"),
         str(outdir / "fcircnn_accel.hwh")],
    ]
    # Run status is checked after each wait.
    assert _index(calls, "get_property", "PROGRESS", "synth_1") > \
        _index(calls, "wait_on_run", "synth_1")
    assert "fcircnn_accel.bit" in out and "WARNING" not in out
    assert _named(calls, "write_hw_platform") == [
        ["-fixed", "-include_bit", "-force", "-file", str(outdir / "fcircnn_accel.xsa")]]
    assert _index(calls, "write_hw_platform") > _index(calls, "wait_on_run", "impl_1")
    assert out.startswith("fcircnn: Vivado 2023.2")
    # Setup and hold are both checked.
    assert _named(calls, "get_timing_paths") == [["-max_paths", "1", "-nworst", "1", "-setup"],
                                                 ["-max_paths", "1", "-nworst", "1", "-hold"]]


def test_build_records_the_actual_clock_beside_the_bitstream(tmp_path, zcu102):
    """out/fcircnn_accel.clock.json holds the PS's ACT_FREQMHZ that block_design.tcl read
    back, and the settings that gave it."""
    run_tcl(tmp_path, zcu102, "build.tcl", act_mhz="199.980011")
    path = tmp_path / "vivado" / "out" / vivado.CLOCK_FILE
    record = json.loads(path.read_text())
    assert record == {"clock": "pl_clk0", "actual_mhz": 199.980011, "configured_mhz": 200.0,
                      "source_pll": "RPLL", "pll_fbdiv": 72, "divisor0": 6, "divisor1": 1,
                      "from": "CONFIG.PSU__CRL_APB__PL0_REF_CTRL__ACT_FREQMHZ of "
                              "zynq_ultra_ps_e_0"}
    assert vivado.read_clock_file(path) == 199.980011
    assert vivado.CLOCK_FILE == "fcircnn_accel.clock.json"


@pytest.mark.parametrize("where", ["gen", "srcs"])
def test_the_hwh_is_found_at_the_hw_handoff_path(tmp_path, zcu102, where):
    """get_files lists no .hwh: the documented hw_handoff path (<project>.gen/... since Vivado
    2020.2, <project>.srcs/... before) is used, found before synthesis."""
    hwh = (tmp_path / "vivado" / "project" / f"system.{where}" / "sources_1" / "bd" / "system" /
           "hw_handoff" / "system.hwh")
    hwh.parent.mkdir(parents=True)
    hwh.write_text("<hwh/>")
    calls, out = run_tcl(tmp_path, zcu102, "build.tcl", hwh="")
    assert f"fcircnn: hardware handoff {hwh}" in out
    assert ["copy", "-force", str(hwh), str(tmp_path / "vivado" / "out" / "fcircnn_accel.hwh")] \
        in _named(calls, "file")


def test_no_hwh_stops_the_build_before_the_bitstream(tmp_path, zcu102):
    calls, err = run_tcl(tmp_path, zcu102, "build.tcl", hwh="", fails=True)
    assert "no hardware handoff of the block design system" in err
    flat = " ".join(err.split())
    for where in ("gen", "srcs"):
        assert str(tmp_path / "vivado" / "project" / f"system.{where}" / "sources_1" / "bd" /
                   "system" / "hw_handoff" / "system.hwh") in flat
    # Looked for right after the block design, before any run.
    assert _named(calls, "make_wrapper") and not _named(calls, "launch_runs")


@pytest.mark.parametrize("slack, kind", [((-0.2, 0.05), "setup"), ((0.1, -0.01), "hold")])
def test_build_fails_on_negative_slack_unless_allowed(tmp_path, zcu102, slack, kind):
    _, err = run_tcl(tmp_path, zcu102, "build.tcl", slack=slack, fails=True)
    assert f"timing not met at 200 MHz: worst {kind} slack" in err
    assert "FCIRCNN_ALLOW_TIMING_FAILURE=1" in err
    calls, out = run_tcl(tmp_path, zcu102, "build.tcl", slack=slack,
                         extra_env={"FCIRCNN_ALLOW_TIMING_FAILURE": "1"})
    assert f"WARNING: fcircnn: timing not met at 200 MHz: worst {kind} slack" in out
    assert _named(calls, "write_hw_platform")


@pytest.mark.parametrize("version, ok", [("2019.1", False), ("2018.3.1", False), ("2019.2", True),
                                         ("2024.1.2", True), ("custom", False)])
def test_build_checks_the_vivado_version(tmp_path, zcu102, version, ok):
    if ok:
        calls, _ = run_tcl(tmp_path, zcu102, "build.tcl", vivado_version=version)
        assert _named(calls, "launch_runs")
    else:
        _, err = run_tcl(tmp_path, zcu102, "build.tcl", vivado_version=version, fails=True)
        assert f"need Vivado {vivado.MIN_VIVADO} or newer" in err and version in err


def test_32_bit_master_keeps_only_the_segments_it_reaches(tmp_path):
    acc = _config(tmp_path)
    acc = acc.model_copy(update={"address_width": 32})
    calls, _ = run_tcl(tmp_path, vivado.VivadoTarget.from_config(acc), "block_design.tcl")
    assert _named(calls, "exclude_bd_addr_seg") == [["SEG_HP0_DDR_HIGH"]]
    # DDR_LOW explicitly, no DDR_HIGH for a 32-bit master.
    assert [a[-1] for a in _named(calls, "assign_bd_address") if a] == [
        "zynq_ultra_ps_e_0/SAXIGP2/HP0_DDR_LOW"]
    assert _index(calls, "assign_bd_address") < _index(calls, "exclude_bd_addr_seg") < \
        _index(calls, "validate_bd_design")


@pytest.mark.parametrize("ports", [2, 4])
def test_more_ports_connect_port_k_to_hpk(tmp_path, ports):
    """``axi_ports`` 2 and 4: the packaged IP has every manager on ``ap_clk``; the block
    design enables HPk FPD (S_AXI_GP{k+2}, 128 bit) on ``pl_clk0`` for each port ``k`` and
    connects ``m_axik`` to it through a SmartConnect of its own, assigning it HPk's DDR_LOW; a
    32-bit design leaves every manager only the segments it reaches."""
    acc = _config(tmp_path).model_copy(update={"axi_ports": ports, "address_width": 32})
    buses = ["m_axi"] + [f"m_axi{k}" for k in range(1, ports)]
    calls, _ = run_tcl(tmp_path, acc, "package_ip.tcl")
    assoc = _named(calls, "ipx::associate_bus_interfaces")
    for busif in (*buses, "s_axi_control"):
        assert ["-busif", busif, "-clock", "ap_clk", "core_0"] in assoc
    calls, _ = run_tcl(tmp_path, acc, "block_design.tcl")
    ps = _ps_config(calls)
    for k in range(ports):
        assert ps[f"CONFIG.PSU__USE__S_AXI_GP{k + 2}"] == "1"
        assert ps[f"CONFIG.PSU__SAXIGP{k + 2}__DATA_WIDTH"] == "128"
    assert f"CONFIG.PSU__USE__S_AXI_GP{ports + 2}" not in ps
    intf = _named(calls, "connect_bd_intf_net")
    clock = next(n for n in _named(calls, "connect_bd_net") if n[0] == "zynq_ultra_ps_e_0/pl_clk0")
    resets = next(n for n in _named(calls, "connect_bd_net")
                  if n[0] == "rst_pl_clk0/interconnect_aresetn")
    assigned = [a for a in _named(calls, "assign_bd_address") if a]
    for k, bus in enumerate(buses):
        smc = f"mem{k or ''}_smc"
        assert [f"fcircnn_accel_0/{bus}", f"{smc}/S00_AXI"] in intf
        assert [f"{smc}/M00_AXI", f"zynq_ultra_ps_e_0/S_AXI_HP{k}_FPD"] in intf
        assert {f"zynq_ultra_ps_e_0/saxihp{k}_fpd_aclk", f"{smc}/aclk"} <= set(clock)
        assert f"{smc}/aresetn" in resets
        assert ["-offset", "0x00000000", "-range", "0x80000000", "-target_address_space",
                f"fcircnn_accel_0/{bus}", f"zynq_ultra_ps_e_0/SAXIGP{k + 2}/HP{k}_DDR_LOW"] \
            in assigned
    assert len(assigned) == ports
    spaces = _named(calls, "get_bd_addr_spaces")
    assert spaces[-1] == [" ".join(f"fcircnn_accel_0/{bus}" for bus in buses)]
    assert _named(calls, "exclude_bd_addr_seg") == [["SEG_HP0_DDR_HIGH"]]
    with pytest.raises(ValueError, match="axi_ports must be one of 1, 2, 3, 4, not 5"):
        vivado.VivadoTarget.from_config(acc.model_copy(update={"axi_ports": 5}))


# --------------------------------------------------------------------------------------------
# The clock record on the way to the board: fcircnn deploy copies it, fcircnn.runtime.board uses it.


@pytest.mark.parametrize(("text", "message"), [
    ("{", "not JSON"), ("[]", "no clock"), ('{"actual_mhz": "200"}', "no clock"),
    ('{"actual_mhz": 0}', "no clock"), ('{"actual_mhz": true}', "no clock"),
    ('{"actual_mhz": NaN}', "no clock"), ('{"configured_mhz": 200}', "no clock"),
])
def test_a_bad_clock_record_is_named(tmp_path, text, message):
    """fcircnn deploy (read_clock_file) and the board (which does not import the Vivado flow)
    refuse the same records, naming the file."""
    from fcircnn.runtime.board import BoardError, _pl_clock

    path = tmp_path / vivado.CLOCK_FILE
    path.write_text(text)
    with pytest.raises(ValueError, match=message) as info:
        vivado.read_clock_file(path)
    assert str(path) in str(info.value)
    with pytest.raises(BoardError, match=message) as info:
        _pl_clock(tmp_path / "fcircnn_accel.bit", 200.0)
    assert str(path) in str(info.value)


def test_deploy_copies_the_clock_record_with_the_overlay(tmp_path, small_accelerator):
    """The record beside the overlay is copied into the folder (and checked first); a
    redeployment from a build without one leaves none behind."""
    from overlay_files import write_overlay

    from fcircnn.cli import main
    from fcircnn.gen.deploy import OUTPUT_FILES, overlay_problem_in

    acc_path = small_accelerator(tmp_path / "acc")
    acc = load_accelerator(acc_path)
    build = tmp_path / "build" / "out"
    write_overlay(build)
    (build / vivado.CLOCK_FILE).write_text('{"actual_mhz": 199.980011}')
    out = tmp_path / "deploy"
    assert main(["deploy", str(acc_path), "-o", str(out), "--vivado", str(build)]) == 0
    assert (out / vivado.CLOCK_FILE).read_bytes() == (build / vivado.CLOCK_FILE).read_bytes()
    assert vivado.CLOCK_FILE in OUTPUT_FILES
    (build / vivado.CLOCK_FILE).write_text('{"actual_mhz": -1}')
    assert "no clock" in overlay_problem_in(build, acc)
    (build / vivado.CLOCK_FILE).unlink()  # an older build
    assert overlay_problem_in(build, acc) is None
    assert main(["deploy", str(acc_path), "-o", str(out), "--vivado", str(build),
                 "--force"]) == 0
    assert not (out / vivado.CLOCK_FILE).exists() and (out / "fcircnn_accel.bit").is_file()


def test_the_board_turns_cycles_into_time_at_the_recorded_clock(tmp_path, capsys):
    """fcircnn.runtime.board uses the record beside the bitstream for times, and says so; without
    one (an older build) the configured clock, saying that too; a bad record is bad input."""
    from types import SimpleNamespace

    from fcircnn.runtime.board import BoardError, _pl_clock, _report

    bit = tmp_path / "fcircnn_accel.bit"
    mhz, line = _pl_clock(bit, 200.0)
    assert mhz == 200.0
    assert "pl_clk0 200 MHz as configured: no fcircnn_accel.clock.json" in line
    assert "older build" in line
    (tmp_path / vivado.CLOCK_FILE).write_text('{"actual_mhz": 199.98}')
    mhz, line = _pl_clock(bit, 200.0)
    assert mhz == 199.98 and "pl_clk0 199.98 MHz, the build's" in line
    assert "configured 200 MHz" in line
    clip = SimpleNamespace(scores=np.array([0.1, 0.9]), mismatched=(), cycles=199_980,
                           layers=[])
    _report(SimpleNamespace(clips=[clip]), mhz, 1)
    assert "199980 cycles (1000.0 us at 199.98 MHz)" in capsys.readouterr().out
    (tmp_path / vivado.CLOCK_FILE).write_text("{}")
    with pytest.raises(BoardError, match="no clock"):
        _pl_clock(bit, 200.0)


def test_run_py_takes_the_clock_pynq_reports_and_says_when_it_is_not_the_builds(
        monkeypatch, capsys):
    """PYNQ loads the overlay's pl_clk dividers, not the PS PLL: on an image whose PLL differs
    the clock differs, and run.py uses (and names) what PYNQ reports."""
    import sys
    from types import SimpleNamespace

    from fcircnn.runtime.board import _running_clock

    monkeypatch.setitem(sys.modules, "pynq", SimpleNamespace(
        Clocks=SimpleNamespace(fclk0_mhz=249.975)))
    assert _running_clock(199.98) == 249.975
    assert "pl_clk0 runs at 249.975 MHz, not the build's 199.98 MHz" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "pynq", SimpleNamespace(
        Clocks=SimpleNamespace(fclk0_mhz=199.98)))
    assert _running_clock(199.98) == 199.98 and capsys.readouterr().err == ""
    monkeypatch.setitem(sys.modules, "pynq", SimpleNamespace())  # no Clocks: the record
    assert _running_clock(199.98) == 199.98
