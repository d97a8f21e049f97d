"""Vivado scripts and XDC (:mod:`fcircnn.gen.vivado`), checked without Vivado.

Every script runs under ``tclsh`` with a prelude of stubs: each Vivado command used by the
scripts is a procedure that logs its name and arguments (hex-encoded, one call per line) and
returns a plausible value. No catch-all ``unknown``: a Vivado command the stubs do not define
fails the run, so the stub list is also the list of commands the scripts use. ``file copy`` and
``file mkdir`` are logged instead of executed.
"""

import shutil
import subprocess
from pathlib import Path

import pytest

from fcircnn.gen import vivado
from fcircnn.hw.regfile import REGISTERS
from fcircnn.models.config import builtin_path, load_accelerator

ZCU102 = "xilinx.com:zcu102:part0:3.4"

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
    write_hw_platform exclude_bd_addr_seg
} {
    proc $cmd args "_log $cmd {*}\$args"
}
proc get_board_parts args { _log get_board_parts {*}$args; return $::stub_board_parts }
proc current_project args { _log current_project {*}$args; return project_1 }
proc get_files args { _log get_files {*}$args; return [lindex $args end] }
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
proc get_bd_addr_segs args {
    _log get_bd_addr_segs {*}$args
    return [dict keys $::stub_segments]
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
proc ipx::add_register {name block} { _log ipx::add_register $name $block; return reg_$name }
proc ipx::get_file_groups args { _log ipx::get_file_groups {*}$args; return group_0 }
proc ipx::get_files args { _log ipx::get_files {*}$args; return xdc_0 }
rename file _tcl_file
proc file {sub args} {
    if {$sub in {copy mkdir delete}} {
        _log file $sub {*}$args
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


def run_tcl(tmp_path, acc, script, board_parts=(ZCU102, "xilinx.com:zcu104:part0:1.1"), *,
            vivado_version="2023.2", slack=(0.125, 0.05), extra_env=None, fails=False):
    """Write the scripts to ``tmp_path/vivado``, run ``script`` on the stubs; return the calls
    ``[(command, [args...]), ...]`` and the standard output (with ``fails``: the error
    output, the run having to fail)."""
    folder = tmp_path / "vivado"
    folder.mkdir(exist_ok=True)
    for name, text in vivado.vivado_scripts(acc).items():
        (folder / name).write_text(text)
    (tmp_path / "stubs.tcl").write_text(STUBS)
    (tmp_path / "run.tcl").write_text(
        f"source {tmp_path / 'stubs.tcl'}\nsource {folder / script}\n")
    log = tmp_path / "calls.log"
    ports = vivado.VivadoTarget.from_config(acc).memory_ports if not isinstance(
        acc, vivado.VivadoTarget) else acc.memory_ports
    env = {"STUB_LOG": str(log), "STUB_BOARD_PARTS": " ".join(board_parts), "PATH": "/usr/bin",
           "STUB_INTERFACES": " ".join((*ports, "s_axi_control")),
           "STUB_VIVADO": vivado_version, "STUB_SLACK": " ".join(map(str, slack)),
           **(extra_env or {})}
    proc = subprocess.run(["tclsh", str(tmp_path / "run.tcl")], capture_output=True, text=True,
                          env=env, timeout=60)
    if fails:
        assert proc.returncode != 0, proc.stdout
        return None, proc.stderr
    assert proc.returncode == 0, proc.stderr + proc.stdout
    calls = []
    for line in log.read_text().splitlines():
        cmd, *args = line.split(" ")
        calls.append((cmd, [bytes.fromhex(a).decode() for a in args]))
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
# create_project.tcl


def test_create_project_with_board(tmp_path, zcu102):
    calls, out = run_tcl(tmp_path, zcu102, "create_project.tcl")
    (create,) = _named(calls, "create_project")
    assert create[0] == "fcircnn_accel_ip"  # the IP is packaged in a project of its own
    assert Path(create[1]) == tmp_path / "vivado" / "ip_project"
    assert create[2:] == ["-part", "xczu9eg-ffvb1156-2-e", "-force"]
    assert ["board_part", ZCU102, "project_1"] in _named(calls, "set_property")
    assert _index(calls, "get_board_parts") < _index(calls, "create_project") < \
        _index(calls, "set_property", "board_part")
    added = _named(calls, "add_files")
    assert added == [["-norecurse", "-fileset", "sources_1", str(tmp_path / vivado.RTL_PATH)],
                     ["-norecurse", "-fileset", "constrs_1", str(tmp_path / vivado.XDC_PATH)]]
    props = _named(calls, "set_property")
    assert ["USED_IN", "synthesis implementation out_of_context",
            str(tmp_path / vivado.XDC_PATH)] in props
    assert ["top", "fcircnn_accel", "sources_1"] in props
    assert "WARNING" not in out


def test_create_project_without_installed_board(tmp_path, zcu102):
    calls, out = run_tcl(tmp_path, zcu102, "create_project.tcl",
                         board_parts=("xilinx.com:zcu104:part0:1.1",))
    assert _named(calls, "get_board_parts")
    assert not [a for a in _named(calls, "set_property") if a[0] == "board_part"]
    assert _named(calls, "create_project")[0][2:4] == ["-part", "xczu9eg-ffvb1156-2-e"]
    assert "WARNING" in out and ZCU102 in out


def test_create_project_config_without_board(tmp_path):
    acc = _config(tmp_path, board=False)
    calls, out = run_tcl(tmp_path, acc, "create_project.tcl")
    assert not _named(calls, "get_board_parts")
    assert not [a for a in _named(calls, "set_property") if a[0] == "board_part"]
    assert "WARNING" not in out


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
             _index(calls, "ipx::associate_bus_interfaces"), _index(calls, "ipx::add_memory_map"),
             _index(calls, "ipx::update_checksums"), _index(calls, "ipx::save_core")]
    assert order == sorted(order)


# --------------------------------------------------------------------------------------------
# block_design.tcl


def _ps_config(calls):
    for args in _named(calls, "set_property"):
        if args[0] == "-dict" and args[-1] == "zynq_ultra_ps_e_0":
            words = args[1].split()
            return {k: v.strip("{}") for k, v in zip(words[::2], words[1::2], strict=True)}
    raise AssertionError("no CONFIG of the PS")


@pytest.mark.parametrize("board", [True, False])
def test_block_design(tmp_path, zcu102, board):
    parts = (ZCU102,) if board else ()
    calls, out = run_tcl(tmp_path, zcu102, "block_design.tcl", board_parts=parts)
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
    preset = [a for a in _named(calls, "apply_bd_automation")
              if "xilinx.com:bd_rule:zynq_ultra_ps_e" in a]
    assert len(preset) == int(board)
    if board:
        assert preset[0][-2:] == ['apply_board_preset "1"', "zynq_ultra_ps_e_0"]
        # The preset comes first, our PS settings override it.
        assert _index(calls, "apply_bd_automation") < _index(calls, "set_property", "-dict")
    else:
        assert "WARNING" in out
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


def test_block_design_pl_clock_follows_config(tmp_path):
    calls, _ = run_tcl(tmp_path, _config(tmp_path, mhz=250), "block_design.tcl")
    assert _ps_config(calls)["CONFIG.PSU__CRL_APB__PL0_REF_CTRL__FREQMHZ"] == "250"


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
        ["copy", "-force", "system.hwh", str(outdir / "fcircnn_accel.hwh")],
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
    assert _index(calls, "assign_bd_address") < _index(calls, "exclude_bd_addr_seg") < \
        _index(calls, "validate_bd_design")


@pytest.mark.parametrize("ports", [2, 4])
def test_more_ports_connect_port_k_to_hpk(tmp_path, ports):
    """``axi_ports`` 2 and 4: the packaged IP has every manager on ``ap_clk``; the block
    design enables HPk FPD (S_AXI_GP{k+2}, 128 bit) on ``pl_clk0`` for each port ``k`` and
    connects ``m_axik`` to it through a SmartConnect of its own; a 32-bit design leaves every
    manager only the segments it reaches."""
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
    for k, bus in enumerate(buses):
        smc = f"mem{k or ''}_smc"
        assert [f"fcircnn_accel_0/{bus}", f"{smc}/S00_AXI"] in intf
        assert [f"{smc}/M00_AXI", f"zynq_ultra_ps_e_0/S_AXI_HP{k}_FPD"] in intf
        assert {f"zynq_ultra_ps_e_0/saxihp{k}_fpd_aclk", f"{smc}/aclk"} <= set(clock)
        assert f"{smc}/aresetn" in resets
    spaces = _named(calls, "get_bd_addr_spaces")
    assert spaces == [[" ".join(f"fcircnn_accel_0/{bus}" for bus in buses)]]
    assert _named(calls, "exclude_bd_addr_seg") == [["SEG_HP0_DDR_HIGH"]]
    with pytest.raises(ValueError, match="axi_ports must be one of 1, 2, 3, 4, not 5"):
        vivado.VivadoTarget.from_config(acc.model_copy(update={"axi_ports": 5}))
