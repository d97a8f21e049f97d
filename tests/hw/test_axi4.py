"""AXI4 manager signatures (:mod:`fcircnn.hw.axi4`): members, widths, directions, flipping,
parameter checks, a wired pass-through on random and extreme values, and the Verilog port names
cocotbext-axi looks up (``AxiBus.from_prefix(dut, "m_axi_")`` -> ``m_axi__araddr``)."""

import random
import re

import pytest
from amaranth.hdl import Module, Shape
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator
from cocotbext.axi.axi_channels import AxiARBus, AxiAWBus, AxiBBus, AxiRBus, AxiWBus

from fcircnn.hw.axi4 import (
    BURST_INCR,
    RESP_DECERR,
    RESP_OKAY,
    RESP_SLVERR,
    AXI4ReadSignature,
    AXI4Signature,
    AXI4WriteSignature,
)
from fcircnn.hw.axi_dma import AxiDma
from fcircnn.sim.runner import to_verilog


def expected_read(addr_width, data_width, id_width):
    """(width, flow) of every read-channel member, from the AXI4 specification."""
    return {
        "arid": (id_width, Out), "araddr": (addr_width, Out), "arlen": (8, Out),
        "arsize": (3, Out), "arburst": (2, Out), "arlock": (1, Out), "arcache": (4, Out),
        "arprot": (3, Out), "arvalid": (1, Out), "arready": (1, In),
        "rid": (id_width, In), "rdata": (data_width, In), "rresp": (2, In), "rlast": (1, In),
        "rvalid": (1, In), "rready": (1, Out),
    }


def expected_write(addr_width, data_width, id_width):
    """(width, flow) of every write-channel member, from the AXI4 specification."""
    return {
        "awid": (id_width, Out), "awaddr": (addr_width, Out), "awlen": (8, Out),
        "awsize": (3, Out), "awburst": (2, Out), "awlock": (1, Out), "awcache": (4, Out),
        "awprot": (3, Out), "awvalid": (1, Out), "awready": (1, In),
        "wdata": (data_width, Out), "wstrb": (data_width // 8, Out), "wlast": (1, Out),
        "wvalid": (1, Out), "wready": (1, In),
        "bid": (id_width, In), "bresp": (2, In), "bvalid": (1, In), "bready": (1, Out),
    }


def members(sig):
    return {name: (Shape.cast(member.shape).width, member.flow)
            for name, member in sig.members.items()}


PARAMS = [(12, 32, 1), (32, 128, 1), (40, 128, 4), (64, 1024, 32), (49, 512, 7)]


@pytest.mark.parametrize(("aw", "dw", "iw"), PARAMS)
def test_members_widths_and_directions(aw, dw, iw):
    rd, wr = expected_read(aw, dw, iw), expected_write(aw, dw, iw)
    assert members(AXI4ReadSignature(addr_width=aw, data_width=dw, id_width=iw)) == rd
    assert members(AXI4WriteSignature(addr_width=aw, data_width=dw, id_width=iw)) == wr
    full = AXI4Signature(addr_width=aw, data_width=dw, id_width=iw)
    assert members(full) == rd | wr
    assert (full.addr_width, full.data_width, full.id_width) == (aw, dw, iw)
    # The name lists the DMA uses to split the port between its engines.
    assert set(AXI4Signature.read_names()) == set(rd)
    assert set(AXI4Signature.write_names()) == set(wr)


def test_defaults_and_constants():
    sig = AXI4Signature(addr_width=40)
    assert (sig.data_width, sig.id_width) == (128, 1)
    assert members(sig)["wstrb"] == (16, Out)
    assert (BURST_INCR, RESP_OKAY, RESP_SLVERR, RESP_DECERR) == (1, 0, 2, 3)


@pytest.mark.parametrize("cls", [AXI4ReadSignature, AXI4WriteSignature, AXI4Signature])
def test_flipped_reverses_every_direction(cls):
    sig = cls(addr_width=32, data_width=64, id_width=2)
    flipped = sig.flip()
    assert set(flipped.members) == set(sig.members)
    for name, member in sig.members.items():
        other = flipped.members[name]
        assert Shape.cast(other.shape).width == Shape.cast(member.shape).width
        assert other.flow == (In if member.flow == Out else Out), name
    assert flipped.flip() == sig


@pytest.mark.parametrize(("kwargs", "exc", "match"), [
    ({"addr_width": 11}, ValueError, "addr_width"),
    ({"addr_width": 65}, ValueError, "addr_width"),
    ({"addr_width": 32.0}, TypeError, "addr_width"),
    ({"addr_width": True}, TypeError, "addr_width"),
    ({"addr_width": 32, "data_width": 48}, ValueError, "data_width"),
    ({"addr_width": 32, "data_width": 16}, ValueError, "data_width"),
    ({"addr_width": 32, "data_width": 2048}, ValueError, "data_width"),
    ({"addr_width": 32, "id_width": 0}, ValueError, "id_width"),
    ({"addr_width": 32, "id_width": 33}, ValueError, "id_width"),
    ({"addr_width": 32, "id_width": "1"}, TypeError, "id_width"),
])
@pytest.mark.parametrize("cls", [AXI4ReadSignature, AXI4WriteSignature, AXI4Signature])
def test_bad_parameters(cls, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        cls(**kwargs)


class _Port(wiring.Component):
    """An empty component with one AXI port (its signals are driven by the testbench)."""

    def __init__(self, flow, sig):
        super().__init__({"bus": flow(sig)})

    def elaborate(self, platform):
        return Module()


@pytest.mark.parametrize("seed", [0, 1])
def test_connect_passes_every_member_in_its_direction(seed):
    """``wiring.connect`` of a manager (``Out``) and a subordinate (``In``) port: requests flow
    manager -> subordinate, responses back, every bit, on random, all-zero and all-one values."""
    sig = AXI4Signature(addr_width=64, data_width=256, id_width=5)
    top = Module()
    top.submodules.mgr = mgr = _Port(Out, sig)
    top.submodules.sub = sub = _Port(In, sig)
    wiring.connect(top, mgr.bus, sub.bus)
    rng = random.Random(seed)

    async def bench(ctx):
        for step in range(40):
            values = {}
            for name, member in sig.members.items():
                width = Shape.cast(member.shape).width
                value = {0: 0, 1: (1 << width) - 1}.get(step, rng.getrandbits(width))
                values[name] = value
                src = mgr.bus if member.flow == Out else sub.bus
                ctx.set(getattr(src, name), value)
            await ctx.delay(1e-9)
            for name, member in sig.members.items():
                dst = sub.bus if member.flow == Out else mgr.bus
                assert ctx.get(getattr(dst, name)) == values[name], (step, name)

    sim = Simulator(top)
    sim.add_testbench(bench)
    sim.run()


COCOTBEXT_BUSES = (AxiARBus, AxiRBus, AxiAWBus, AxiWBus, AxiBBus)


def verilog_ports(text, top="axi_dma"):
    """``{name: (direction, width)}`` of the top module's ports in Amaranth's Verilog (the
    sub-modules' ports, which may reuse a name in the other direction, left out)."""
    body = re.search(rf"^module {top}\(.*?^endmodule", text, re.MULTILINE | re.DOTALL).group(0)
    ports = {}
    for direction, msb, name in re.findall(
            r"^\s*(input|output)\s+(?:wire\s+|reg\s+)?(?:\[(\d+):0\]\s+)?(\w+)\s*;", body,
            re.MULTILINE):
        ports[name] = (direction, int(msb) + 1 if msb else 1)
    return ports


@pytest.mark.parametrize("aw", [32, 40])
def test_dma_verilog_ports_match_cocotbext_axi(aw):
    """Every AXI member of ``AxiDma`` is a Verilog port ``m_axi__<name>`` of the right direction
    and width; every signal cocotbext-axi requires is there, and every port we expose is one
    cocotbext-axi knows (required or optional), so none is left undriven."""
    ports = verilog_ports(to_verilog(AxiDma(aw), "axi_dma"))
    spec = expected_read(aw, 128, 1) | expected_write(aw, 128, 1)
    axi_ports = {name for name in ports if name.startswith("m_axi_")}
    assert axi_ports == {f"m_axi__{name}" for name in spec}
    for name, (width, flow) in spec.items():
        assert ports[f"m_axi__{name}"] == ("output" if flow == Out else "input", width), name
    prefix = "m_axi_"
    required = {s for bus in COCOTBEXT_BUSES for s in bus._signals}
    optional = {s for bus in COCOTBEXT_BUSES for s in bus._optional_signals}
    for name in required:
        assert f"{prefix}_{name}" in ports, name
    assert set(spec) <= required | optional
