"""AXI DMA (:mod:`fcircnn.hw.axi_dma`) on Amaranth's simulator and, through cocotb with
cocotbext-axi, on Verilator and Icarus; reference: :mod:`fcircnn.models.layout`."""

import random

import numpy as np
import pytest
from amaranth.sim import Simulator
from conftest import unit_simulators
from hypothesis import given, settings
from hypothesis import strategies as st

from fcircnn.gen.dma_plan import FeatureMap, plan_block, plan_read_box, plan_write_box
from fcircnn.gen.synth import synthesize
from fcircnn.hw.axi_dma import AxiDma
from fcircnn.hw.axi_dma_box import Status
from fcircnn.models.layout import pack_box, pack_ncdhw8, unpack_ncdhw8
from fcircnn.sim.runner import SIMULATORS, require_simulator, run_cocotb
from fcircnn.sim.tb_axi_model import AxiMemory, SparseMemory

AW = 40


def random_map(rng, slots, shape):
    re = rng.integers(-127, 128, size=(slots, *shape))
    im = rng.integers(-127, 128, size=(slots, *shape))
    return re, im


async def _send(ctx, port, payload):
    ctx.set(port.payload, payload)
    ctx.set(port.valid, 1)
    await ctx.tick().until(port.ready)
    ctx.set(port.valid, 0)


def run_dma(mem, reads=(), writes=(), *, seed=0, stall=0.0, error_ranges=(), outstanding=4,
            max_cycles=200_000, latency=2):
    """Run read and write descriptors (in order, both directions concurrently).

    ``writes`` is a list of ``(descriptor, bytes)``. Returns (read bytes per descriptor, read
    statuses, write statuses, cycles, model).
    """
    dut = AxiDma(AW, read_outstanding=outstanding, write_outstanding=outstanding)
    model = AxiMemory(dut.m_axi, mem, seed=seed, stall=stall, error_ranges=error_ranges,
                      latency=latency)
    rng = random.Random(seed + 1)
    got, rstat, wstat = [], [], []
    done = {"rd": not reads, "wr": not writes, "cycles": 0}

    async def reader(ctx):
        for desc in reads:
            await _send(ctx, dut.rd_cmd, desc.fields())
            beats = bytearray()
            while True:
                ready = int(rng.random() >= stall)
                ctx.set(dut.rd_data.ready, ready)
                ctx.set(dut.rd_status.ready, 1)
                _, _, v, p, sv, sp = await ctx.tick().sample(
                    dut.rd_data.valid, dut.rd_data.payload, dut.rd_status.valid,
                    dut.rd_status.payload)
                if v and ready:
                    beats += int(p.data).to_bytes(16, "little")
                if sv:
                    rstat.append((p_code(sp), int(sp.addr)))
                    break
            got.append(bytes(beats))
        done["rd"] = True

    async def writer(ctx):
        for desc, payload in writes:
            await _send(ctx, dut.wr_cmd, desc.fields())
            i = 0
            while True:
                valid = i < len(payload) // 16 and rng.random() >= stall
                if valid:
                    ctx.set(dut.wr_data.payload.data,
                            int.from_bytes(payload[16 * i:16 * i + 16], "little"))
                ctx.set(dut.wr_data.valid, valid)
                ctx.set(dut.wr_status.ready, 1)
                _, _, r, sv, sp = await ctx.tick().sample(
                    dut.wr_data.ready, dut.wr_status.valid, dut.wr_status.payload)
                if valid and r:
                    i += 1
                if sv:
                    wstat.append((p_code(sp), int(sp.addr), i))
                    break
            ctx.set(dut.wr_data.valid, 0)
        done["wr"] = True

    async def clock(ctx):
        while not (done["rd"] and done["wr"]):
            await ctx.tick()
            done["cycles"] += 1
            assert done["cycles"] < max_cycles, "DMA hang"

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    for proc in model.processes():
        sim.add_testbench(proc, background=True)
    sim.add_testbench(reader, background=True)
    sim.add_testbench(writer, background=True)
    sim.add_testbench(clock)
    sim.run()
    return got, rstat, wstat, done["cycles"], model


def p_code(sp):
    code = sp.code
    return code if isinstance(code, Status) else Status(int(code))


def layer_case(seed):
    rng = np.random.default_rng(seed)
    slots, shape = 20, (3, 5, 6)
    re, im = random_map(rng, slots, shape)
    return rng, re, im, slots, shape


@pytest.mark.parametrize(("seed", "stall"), [(0, 0.0), (1, 0.3)])
def test_read_boxes_match_layout(seed, stall):
    _rng, re, im, slots, shape = layer_case(seed)
    base = 0x1FC0  # the map straddles a 4 KB boundary
    image = pack_ncdhw8(re, im)
    mem = bytearray(base + len(image) + 64)
    mem[base:base + len(image)] = image
    fmap = FeatureMap(base, slots, shape)
    boxes = [((0, 3), (-1, 5), (-1, 7), (-1, 8)),   # whole map with a padding border
             ((1, 1), (1, 1), (2, 3), (4, 3)),      # edge tile, padding on w
             ((2, 1), (0, 3), (0, 5), (0, 6))]      # whole rows (merged bursts)
    descs = [plan_read_box(fmap, *b) for b in boxes]
    got, stat, _, _, model = run_dma(mem, reads=descs, seed=seed, stall=stall)
    for b, desc, data, status in zip(boxes, descs, got, stat, strict=True):
        assert status[0] == Status.OK
        assert data == pack_box(re, im, *b)
        assert len(data) == desc.beats * 16
    assert model.reads == [b for desc in descs for b in desc.bursts()]
    assert model.idle()


@pytest.mark.parametrize(("seed", "stall"), [(2, 0.0), (3, 0.3)])
def test_write_boxes_match_layout(seed, stall):
    rng, re, im, slots, shape = layer_case(seed)
    base = 0x0FE0
    image = pack_ncdhw8(re, im)
    mem = bytearray(base + len(image) + 64)
    mem[base:base + len(image)] = image
    fmap = FeatureMap(base, slots, shape)
    tre, tim = random_map(rng, 12, (2, 2, 3))
    box = ((1, 2), (1, 2), (3, 2), (2, 3))
    desc = plan_write_box(fmap, *box, slots=slots)
    _, _, wstat, _, model = run_dma(mem, writes=[(desc, pack_ncdhw8(tre, tim))], seed=seed,
                                    stall=stall)
    assert wstat[0][0] == Status.OK
    ore, oim = unpack_ncdhw8(mem[base:base + len(image)], slots, shape)
    exp_re, exp_im = re.copy(), im.copy()
    exp_re[8:20, 1:3, 3:5, 2:5] = tre[:12]
    exp_im[8:20, 1:3, 3:5, 2:5] = tim[:12]
    np.testing.assert_array_equal(ore, exp_re)
    np.testing.assert_array_equal(oim, exp_im)
    # The padding slots 20..23 of the last group keep their (zero) bytes: WSTRB.
    raw = np.frombuffer(bytes(mem[base:base + len(image)]), np.int8).reshape(3, *shape, 8, 2)
    assert not raw[2, :, :, :, 4:].any()
    assert model.writes == desc.bursts()
    assert model.idle()


def test_contiguous_block():
    rng = np.random.default_rng(7)
    mem = bytearray(rng.integers(0, 256, 0x3000, dtype=np.uint8).tobytes())
    descs = plan_block(0x0100, 0x2200)
    got, stat, _, _, model = run_dma(mem, reads=descs)
    assert stat[0][0] == Status.OK
    assert got[0] == bytes(mem[0x100:0x2300])
    assert all(b <= 256 for _, b in model.reads)


def test_read_error_drains_and_reports():
    _rng, re, im, slots, shape = layer_case(4)
    image = pack_ncdhw8(re, im)
    mem = bytearray(len(image))
    mem[:] = image
    fmap = FeatureMap(0, slots, shape)
    desc = plan_read_box(fmap, (0, 3), (0, 3), (0, 5), (0, 6), merge=False)
    bad = desc.bursts()[5][0] + 32
    good = plan_read_box(fmap, (0, 1), (0, 1), (0, 1), (0, 2))
    got, stat, _, _cycles, model = run_dma(mem, reads=[desc, good], error_ranges=[(bad, bad + 16)],
                                          seed=4, stall=0.2)
    assert stat[0] == (Status.BUS_ERROR, bad)
    # Beats before the failing one are delivered intact, nothing after it.
    assert got[0] == pack_box(re, im, (0, 3), (0, 3), (0, 5), (0, 6))[:(5 * 6 + 2) * 16]
    # The DMA returned to idle and serves the next command.
    assert stat[1][0] == Status.OK and got[1] == pack_box(re, im, (0, 1), (0, 1), (0, 1), (0, 2))
    assert model.read_done == len(model.reads) and model.idle()


def test_write_error_drains_and_reports():
    rng, re, im, slots, shape = layer_case(5)
    image = pack_ncdhw8(re, im)
    mem = bytearray(len(image))
    fmap = FeatureMap(0, slots, shape)
    desc = plan_write_box(fmap, (0, 3), (0, 3), (0, 5), (0, 2), merge=False)
    bad = desc.bursts()[3][0]
    payload = pack_ncdhw8(*random_map(rng, 24, (3, 5, 2)))
    _, _, wstat, _, model = run_dma(mem, writes=[(desc, payload), (desc, payload)],
                                    error_ranges=[(bad, bad + 16)], seed=5, stall=0.2)
    assert wstat[0][:2] == (Status.BUS_ERROR, bad)
    assert wstat[0][2] == desc.beats  # every beat taken: the producer never hangs
    assert wstat[1][0] == Status.BUS_ERROR
    assert model.write_done == len(model.writes) and model.idle()


@pytest.mark.parametrize(("field", "value"), [("addr", 0x108), ("groups", 0), ("w_len", 0),
                                              ("stride_h", 0x14)])
def test_bad_command_flagged(field, value):
    fmap = FeatureMap(0x100, 8, (2, 2, 2))
    desc = plan_read_box(fmap, (0, 1), (0, 2), (0, 2), (0, 2), merge=False)
    fields = desc.fields() | {field: value}

    class Raw:
        def fields(self):
            return fields

    mem = bytearray(0x400)
    got, stat, wstat, _, model = run_dma(mem, reads=[Raw()], writes=[(Raw(), b"")])
    assert stat[0][0] == Status.BAD_COMMAND and got[0] == b""
    assert wstat[0][0] == Status.BAD_COMMAND
    assert model.reads == [] and model.writes == [] and not any(mem)


def test_address_overflow_flagged():
    top = (1 << AW) - 0x40
    desc = plan_block(0, 0x80)[0]
    fields = desc.fields() | {"addr": top}

    class Raw:
        def fields(self):
            return fields

    got, stat, _, _, model = run_dma(bytearray(16), reads=[Raw()])
    # The 4 beats below 2**40 are read; the next burst would start at 2**40 (reported as its
    # low address bits, 0) and is never issued.
    assert stat[0] == (Status.OVERFLOW, 0)
    assert model.reads == [(top, 4)] and len(got[0]) == 4 * 16


def test_write_padding_rejected():
    fmap = FeatureMap(0, 8, (2, 2, 2))
    desc = plan_read_box(fmap, (0, 1), (-1, 3), (0, 2), (0, 2))
    _, _, wstat, _, model = run_dma(bytearray(0x100), writes=[(desc, bytes(16))])
    assert wstat[0][0] == Status.BAD_COMMAND and model.writes == []


def test_long_transfer_efficiency():
    mem = bytearray(0x8000)
    descs = plan_block(0, 0x8000)
    _got, stat, _, cycles, _ = run_dma(mem, reads=descs, outstanding=4)
    beats = 0x8000 // 16
    assert stat[0][0] == Status.OK
    assert beats / cycles >= 0.95, f"{beats} beats in {cycles} cycles"


def _row_box(**fields):
    """Box fields of a one-group, one-plane command (``fields`` override)."""
    box = {"addr": 0x1000, "stride_g": 0, "stride_d": 0, "stride_h": 0x100, "groups": 1,
           "d_pre": 0, "d_len": 1, "d_post": 0, "h_pre": 0, "h_len": 1, "h_post": 0,
           "w_pre": 0, "w_len": 1, "w_post": 0, "last_lanes": 8}
    return box | fields


def handshake_cycles(read=None, write=None, latency=2):
    """Cycles of each handshake of one read and/or one write command, every ready high and a
    slave that never stalls: a dict name -> list of cycles (cycle 0 is the command's)."""
    dut = AxiDma(AW)
    model = AxiMemory(dut.m_axi, SparseMemory(), latency=latency)
    axi = dut.m_axi
    channels = {
        "rd_cmd": (dut.rd_cmd.valid, dut.rd_cmd.ready), "ar": (axi.arvalid, axi.arready),
        "r": (axi.rvalid, axi.rready), "rd_status": (dut.rd_status.valid, dut.rd_status.ready),
        "wr_cmd": (dut.wr_cmd.valid, dut.wr_cmd.ready), "aw": (axi.awvalid, axi.awready),
        "w": (axi.wvalid, axi.wready), "b": (axi.bvalid, axi.bready),
        "wr_status": (dut.wr_status.valid, dut.wr_status.ready),
    }
    seen = {name: [] for name in channels}

    async def bench(ctx):
        for port in (dut.rd_data.ready, dut.rd_status.ready, dut.wr_status.ready,
                     dut.wr_data.valid):
            ctx.set(port, 1)
        await ctx.tick()
        await ctx.tick()
        for cmd, fields in ((dut.rd_cmd, read), (dut.wr_cmd, write)):
            if fields is not None:
                ctx.set(cmd.payload, fields)
                ctx.set(cmd.valid, 1)
        for cycle in range(700):
            flags = await ctx.tick().sample(*(s for pair in channels.values() for s in pair))
            for i, name in enumerate(channels):
                if flags[2 + 2 * i] and flags[3 + 2 * i]:
                    seen[name].append(cycle)
            for name, cmd in (("rd_cmd", dut.rd_cmd), ("wr_cmd", dut.wr_cmd)):
                if seen[name]:
                    ctx.set(cmd.valid, 0)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    for proc in model.processes():
        sim.add_testbench(proc, background=True)
    sim.add_testbench(bench)
    sim.run()
    return seen


def test_command_latencies():
    """The DMA's fixed latencies, which :class:`fcircnn.gen.perf_model.EngineTiming` is
    calibrated on (``read_setup``, ``row_cycles``, ``write_setup``): a command handshake to
    its first AR / AW handshake 3 cycles, first W beat 4; bursts of one row one cycle apart,
    rows without leading padding two; the last R beat / B response to the status 2 cycles."""
    # Read: a 600-beat row from 0x1F00 (bursts of 16, 256, 256, 72 beats), then three rows.
    rd = handshake_cycles(read=_row_box(addr=0x1F00, w_len=600))
    assert rd["rd_cmd"] == [0] and rd["ar"] == [3, 4, 5, 6]
    assert rd["r"][0] == 3 + 3 and len(rd["r"]) == 600
    assert rd["rd_status"] == [rd["r"][-1] + 2]
    rd = handshake_cycles(read=_row_box(h_len=3, w_len=2))
    assert rd["ar"] == [3, 5, 7]
    assert rd["rd_status"] == [rd["r"][-1] + 2]
    # Write: three rows of two beats.
    wr = handshake_cycles(write=_row_box(h_len=3, w_len=2))
    assert wr["wr_cmd"] == [0] and wr["aw"] == [3, 5, 7]
    assert wr["w"] == [4, 5, 6, 7, 8, 9]
    assert wr["wr_status"] == [wr["b"][-1] + 2]


@pytest.mark.slow
@pytest.mark.parametrize(("aw", "commands"), [(32, 1), (40, 1), (40, 4)])
def test_logic_levels(aw, commands, tmp_path):
    """Issue 6: the DMA alone stays far below the accelerator's 8-LUT-level budget (4 measured
    with Yosys 0.70; the engines' command and data paths add to the DMA's in the
    accelerator), with and without a command queue."""
    report = synthesize(AxiDma(aw, read_commands=commands), "axi_dma", levels=True,
                        workdir=tmp_path)
    assert report.path.levels <= 6, report.path.cells


@pytest.mark.parametrize(("name", "value", "exc"), [
    ("addr_width", 31, ValueError), ("addr_width", 65, ValueError),
    ("addr_width", 40.0, TypeError), ("read_outstanding", 0, ValueError),
    ("write_outstanding", 65, ValueError), ("read_outstanding", True, TypeError),
    ("read_commands", 0, ValueError), ("read_commands", 9, ValueError)])
def test_bad_parameters(name, value, exc):
    kwargs = {"addr_width": 40, name: value}
    with pytest.raises(exc, match=name):
        AxiDma(**kwargs)


@st.composite
def box_cases(draw):
    slots = draw(st.integers(1, 24))
    shape = tuple(draw(st.integers(1, 6)) for _ in range(3))
    groups = -(-slots // 8)
    g0 = draw(st.integers(0, groups - 1))
    ng = draw(st.integers(1, groups - g0))
    ranges = []
    for n in shape:
        start = draw(st.integers(-2, n))
        ranges.append((start, draw(st.integers(1, n + 3))))
    base = 16 * draw(st.integers(0, 600))
    return slots, shape, base, ((g0, ng), *ranges), draw(st.booleans())


@given(case=box_cases())
@settings(max_examples=12, deadline=None, derandomize=True)
def test_random_boxes_read_and_write(case):
    """Random maps, boxes (padding, empty in-map parts), bases near 4 KB pages: the read equals
    the zero-padded cut, the bursts are the planner's, and writing the read-back in-map part of
    the box to a second map reproduces it."""
    slots, shape, base, box, merge = case
    rng = np.random.default_rng(len(shape) + base)
    re, im = random_map(rng, slots, shape)
    image = pack_ncdhw8(re, im)
    mem = bytearray(base + 2 * len(image) + 64)
    mem[base:base + len(image)] = image
    fmap = FeatureMap(base, slots, shape)
    desc = plan_read_box(fmap, *box, merge=merge)
    got, stat, _, _, model = run_dma(mem, reads=[desc], seed=base, stall=0.25)
    assert stat[0][0] == Status.OK and got[0] == pack_box(re, im, *box)
    assert model.reads == desc.bursts()
    # Write the in-map part of the box to an empty copy of the map.
    inside = []
    for (s, n), size in zip(box[1:], shape, strict=True):
        lo, hi = max(s, 0), min(s + n, size)
        if hi <= lo:
            return
        inside.append((lo, hi - lo))
    g0, ng = box[0]
    out = FeatureMap(base + len(image), slots, shape)
    wdesc = plan_write_box(out, box[0], *inside, slots=min(slots, 8 * (g0 + ng)), merge=merge)
    payload = pack_box(re, im, box[0], *inside)
    _, _, wstat, _, _ = run_dma(mem, writes=[(wdesc, payload)], seed=base + 1, stall=0.25)
    assert wstat[0][0] == Status.OK
    ore, oim = unpack_ncdhw8(mem[out.base:out.base + len(image)], slots, shape)
    cut = (slice(8 * g0, min(slots, 8 * (g0 + ng))), *(slice(s, s + n) for s, n in inside))
    exp_re, exp_im = np.zeros_like(re), np.zeros_like(im)
    exp_re[cut], exp_im[cut] = re[cut], im[cut]
    np.testing.assert_array_equal(ore, exp_re)
    np.testing.assert_array_equal(oim, exp_im)


def test_from_config_and_port_names():
    from fcircnn.models.config import builtin_path, load_accelerator
    from fcircnn.sim.runner import to_verilog

    acc = load_accelerator(builtin_path("c3d_zcu102"))
    dma = AxiDma.from_config(acc)
    assert dma.addr_width == acc.address_width == 40
    text = to_verilog(dma, "axi_dma")
    for port in ("output [39:0] m_axi__araddr", "output [127:0] m_axi__wdata",
                 "output [15:0] m_axi__wstrb", "input [1:0] m_axi__rresp"):
        assert port in text


# ------------------------------------------------------------------------------------------
# cocotb on the generated Verilog (cocotbext-axi AxiRam as DDR)


@pytest.mark.parametrize("simulator", unit_simulators())
def test_axi_dma_cocotb(simulator):
    require_simulator(simulator)
    run_cocotb(AxiDma(AW, read_outstanding=4, write_outstanding=4), "axi_dma",
               "fcircnn.sim.tb_axi_dma", simulator,
               parameters={"seed": 11 + SIMULATORS.index(simulator), "boxes": 3})


@pytest.mark.parametrize(("outstanding", "minimum", "maximum"), [(1, 0.0, 0.5), (8, 0.8, 1.0)])
def test_short_row_tile_efficiency_needs_outstanding_reads(outstanding, minimum, maximum):
    """C3D conv3a input tile (Tr = Tc = 7: 9-beat rows of a 28-wide map) with a 16-cycle read
    latency: one burst at a time idles the bus, 8 outstanding bursts keep it >= 80% busy."""
    fmap = FeatureMap(0, 64, (8, 28, 28))
    desc = plan_read_box(fmap, (0, 2), (1, 4), (6, 9), (6, 9))
    mem = bytearray(fmap.size)
    got, stat, _, cycles, _ = run_dma(mem, reads=[desc], outstanding=outstanding, latency=16)
    assert stat[0][0] == Status.OK and len(got[0]) == 16 * desc.beats
    assert minimum <= desc.beats / cycles <= maximum, desc.beats / cycles
