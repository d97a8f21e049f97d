"""Input tile buffer (:mod:`fcircnn.hw.buffer_input`) on Amaranth's simulator."""

import numpy as np
import pytest
from amaranth.hdl import Fragment
from amaranth.sim import Simulator

from fcircnn.gen.dma_plan import conv_input_range
from fcircnn.hw.buffer_input import InputBuffer
from fcircnn.models.config import builtin_path, load_accelerator
from fcircnn.models.layout import pack_ncdhw8


def padded_box(rng, slots, shape, box):
    """Random map; the zero-padded box ([G*8, d, h, w] re, im) and its DMA beats."""
    re = rng.integers(-127, 128, size=(slots, *shape))
    im = rng.integers(-127, 128, size=(slots, *shape))
    G = -(-slots // 8)
    parts = []
    for part in (re, im):
        full = np.zeros((G * 8, *shape), dtype=np.int64)
        full[:slots] = part
        pad = [(0, 0)] + [(max(-s, 0), max(s + n - size, 0))
                          for (s, n), size in zip(box, shape, strict=True)]
        padded = np.pad(full, pad)
        parts.append(padded[(slice(None), *(slice(s + p[0], s + p[0] + n)
                                            for (s, n), p in zip(box, pad[1:], strict=True)))])
    data = pack_ncdhw8(*parts)
    beats = [int.from_bytes(data[i:i + 16], "little") for i in range(0, len(data), 16)]
    return parts, beats


def run_buffer(dut, tiles, reads, *, stall_reads=False, config=None):
    """Load ``tiles`` (lists of beats with their box), then read ``reads[t]`` from tile ``t``
    (``config``: inputs set before the first beat, ``[(signal, value), ...]``).

    Returns the act values read per tile and the cycles at which tile loads completed.
    """
    out = [[] for _ in tiles]
    events = {"loaded": [], "conflict": 0}

    async def loader(ctx):
        for signal, value in config or ():
            ctx.set(signal, value)
        for box, beats in tiles:
            ctx.set(dut.box, box)
            for k, beat in enumerate(beats):
                ctx.set(dut.i.payload, {"data": beat, "last": int(k == len(beats) - 1)})
                ctx.set(dut.i.valid, 1)
                await ctx.tick().until(dut.i.ready)
            ctx.set(dut.i.valid, 0)
            events["loaded"].append(len(events["loaded"]))

    async def reader(ctx):
        for t, addrs in enumerate(reads):
            await ctx.tick().until(dut.r_valid)
            for addr, sub in addrs:
                ctx.set(dut.r_addr, addr)
                ctx.set(dut.r_sub, sub)
                ctx.set(dut.r_en, 1)
                await ctx.tick()
                ctx.set(dut.r_en, 0)
                out[t].append(ctx.get(dut.act))
                if stall_reads:
                    await ctx.tick()
            ctx.set(dut.r_release, 1)
            await ctx.tick()
            ctx.set(dut.r_release, 0)
        events["conflict"] = ctx.get(dut.conflict)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(loader, background=True)
    sim.add_testbench(reader)
    sim.run()
    return out, events


def conv_reads(buf, shape_out):
    """Addresses of every kernel tap x output voxel of a tile, with the expected coordinates."""
    (kd, kr, kc), (_, sr, sc) = buf.kernel, buf.stride
    reads, coords = [], []
    for a in range(kd):
        for b in range(kr):
            for c in range(kc):
                for r in range(shape_out[1]):
                    for q in range(shape_out[2]):
                        h, w = r * sr + b, q * sc + c
                        reads.append(a * buf.plane + h * buf.width + w)
                        coords.append((a, h, w))
    return reads, coords


def check_tile(buf, parts, got, coords, sub=0):
    re, im = parts
    n = buf.Tn // 2
    for value, (a, h, w) in zip(got, coords, strict=True):
        for v in range(buf.Td):
            d = v * buf.stride[0] + a
            for s in range(n):
                exp = (re[sub * n + s, d, h, w], im[sub * n + s, d, h, w])
                slot = value[v][s]
                assert (slot.re, slot.im) == exp, (v, s, a, h, w)


@pytest.mark.parametrize(("Tn", "Td", "kernel", "stride"), [
    (32, 2, 3, 1),          # C3D core, small tile
    (16, 3, 3, (2, 2, 2)),  # strided: lanes share no plane
    (32, 2, (7, 3, 3), (1, 2, 2)),  # R3D conv1-like depth kernel
])
def test_conv_reads_match_padded_map(Tn, Td, kernel, stride):
    rng = np.random.default_rng(Tn + Td)
    buf = InputBuffer(Tn, Td, 3, 2, kernel=kernel, stride=stride)
    shape = (9, 7, 6)
    k = buf.kernel
    s = buf.stride
    # Edge tile at the map's origin with padding 1 (d, h, w).
    box = [conv_input_range(0, n, k[a], s[a], 1) for a, n in enumerate((Td, 3, 2))]
    parts, beats = padded_box(rng, Tn // 2, shape, box)
    cfg = {"groups": buf.groups, "d": box[0][1], "h": box[1][1], "w": box[2][1]}
    reads, coords = conv_reads(buf, (Td, 3, 2))
    got, ev = run_buffer(buf, [(cfg, beats)], [[(a, 0) for a in reads]])
    check_tile(buf, parts, got[0], coords)
    assert not ev["conflict"]


def test_ping_pong_overlaps_load_and_compute():
    rng = np.random.default_rng(3)
    buf = InputBuffer(16, 2, 2, 2, kernel=3, stride=1)
    box = [conv_input_range(0, n, 3, 1, 1) for n in (2, 2, 2)]
    tiles, parts = [], []
    for _ in range(3):
        p, beats = padded_box(rng, 8, (4, 4, 4), box)
        parts.append(p)
        tiles.append(({"groups": 1, "d": 4, "h": 4, "w": 4}, beats))
    reads, coords = conv_reads(buf, (2, 2, 2))
    got, ev = run_buffer(buf, tiles, [[(a, 0) for a in reads]] * 3, stall_reads=True)
    for t in range(3):
        check_tile(buf, parts[t], got[t], coords)
    assert not ev["conflict"]


def run_split(dut, tiles, reads, *, parts, seed, config=None):
    """Load ``tiles`` ((box, beats) of the whole box) in ``parts`` (1, 2 or 4) parts of the
    slot groups at once, on ``i`` (the whole box, or its lower half or first quarter), ``i1``
    (the upper half, or the third quarter), ``i2`` and ``i3`` (the second and fourth
    quarters), each stream pausing at random; read as :func:`run_buffer`. ``config``: values
    of the buffer's configuration inputs, set before the first beat."""
    import random

    rng = random.Random(seed)
    out = [[] for _ in tiles]
    events = {"conflict": 0}

    def stream(port, box_port, k):
        async def feed(ctx):
            for box, beats in tiles:
                n = len(beats) // parts
                part = beats[k * n:(k + 1) * n]
                ctx.set(box_port, box | {"groups": box["groups"] // parts})
                for j, beat in enumerate(part):
                    while rng.random() < 0.3:
                        ctx.set(port.valid, 0)
                        await ctx.tick()
                    ctx.set(port.payload, {"data": beat, "last": int(j == len(part) - 1)})
                    ctx.set(port.valid, 1)
                    await ctx.tick().until(port.ready)
                ctx.set(port.valid, 0)
        return feed

    async def reader(ctx):
        for t, addrs in enumerate(reads):
            await ctx.tick().until(dut.r_valid)
            for addr in addrs:
                ctx.set(dut.r_addr, addr)
                ctx.set(dut.r_en, 1)
                await ctx.tick()
                ctx.set(dut.r_en, 0)
                out[t].append(ctx.get(dut.act))
                if rng.random() < 0.3:
                    await ctx.tick()
            ctx.set(dut.r_release, 1)
            await ctx.tick()
            ctx.set(dut.r_release, 0)
        events["conflict"] = ctx.get(dut.conflict)

    async def setup(ctx):
        ctx.set(dut.split, int(parts > 1))
        if dut.quarterable:
            ctx.set(dut.quarter, int(parts == 4))
        for name, value in (config or {}).items():
            ctx.set(getattr(dut, name), value)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(setup)
    # The parts in slot-group order: i, (i2,) i1, (i3).
    ports = {1: ["i"], 2: ["i", "i1"], 4: ["i", "i2", "i1", "i3"]}[parts]
    for k, name in enumerate(ports):
        box_port = getattr(dut, "box" + name[1:])
        sim.add_testbench(stream(getattr(dut, name), box_port, k), background=True)
    sim.add_testbench(reader)
    sim.run()
    return out, events


def random_tiles(rng, buf, box, shape, n):
    """``n`` random maps of ``shape`` and the box ``box`` of each as ``buf`` loads it:
    ``(tiles, maps)``, a tile being ``(box config, beats)``, a map its padded ``(re, im)``."""
    tiles, maps = [], []
    for _ in range(n):
        p, beats = padded_box(rng, buf.Tn // 2, shape, box)
        maps.append(p)
        tiles.append(({"groups": buf.groups, "d": box[0][1], "h": box[1][1], "w": box[2][1]},
                      beats))
    return tiles, maps


def load_in_parts(Tn, Td, parts, *, quarterable=False):
    """Three random boxes loaded in ``parts`` into a split (and ``quarterable``) buffer and
    read back as the PE array reads them, against the padded map."""
    rng = np.random.default_rng(Tn + Td + parts)
    buf = InputBuffer(Tn, Td, 2, 3, kernel=3, stride=1, splittable=True,
                      quarterable=quarterable)
    box = [conv_input_range(0, n, 3, 1, 1) for n in (Td, 2, 3)]
    tiles, maps = random_tiles(rng, buf, box, (5, 4, 4), 3)
    reads, coords = conv_reads(buf, (Td, 2, 3))
    got, ev = run_split(buf, tiles, [reads] * 3, parts=parts, seed=Tn * Td + parts)
    for t in range(3):
        check_tile(buf, maps[t], got[t], coords)
    assert not ev["conflict"]


@pytest.mark.parametrize("split", [True, False], ids=["split", "one stream"])
@pytest.mark.parametrize(("Tn", "Td"), [(64, 2), (32, 3)])
def test_split_load_fills_both_halves_of_the_slot_groups(Tn, Td, split):
    # FLAG_ISPLIT: the lower slot groups on i, the upper on i1, both streams and the reader
    # pausing at random over three ping-pong tiles; the same buffer without split takes the
    # whole box on i.
    load_in_parts(Tn, Td, 2 if split else 1)


@pytest.mark.parametrize(("Tn", "Td", "parts"), [
    (64, 3, 4),
    # suite budget: halves and whole boxes on the same buffer, quarters on a wider core
    pytest.param(64, 3, 2, marks=pytest.mark.slow),
    pytest.param(64, 3, 1, marks=pytest.mark.slow),
    pytest.param(128, 2, 4, marks=pytest.mark.slow)])
def test_quartered_load_fills_the_four_quarters_of_the_slot_groups(Tn, Td, parts):
    # FLAG_IQUARTER: the four quarters of the slot groups on i, i2, i1, i3 at once, every
    # stream and the reader pausing at random over three ping-pong tiles; the same buffer
    # takes halves (FLAG_ISPLIT alone) and the whole box on i too.
    load_in_parts(Tn, Td, parts, quarterable=True)


def test_a_quarterable_buffer_needs_a_multiple_of_four_slot_groups():
    with pytest.raises(ValueError, match="multiple of four slot groups"):
        InputBuffer(32, 2, 2, 2, splittable=True, quarterable=True)
    with pytest.raises(ValueError, match="quarterable needs splittable"):
        InputBuffer(64, 2, 2, 2, quarterable=True)
    with pytest.raises(TypeError, match="quarterable must be a bool"):
        InputBuffer(64, 2, 2, 2, splittable=True, quarterable=1)


def test_a_split_buffer_needs_an_even_number_of_slot_groups():
    with pytest.raises(ValueError, match="even number of slot groups"):
        InputBuffer(16, 2, 2, 2, splittable=True)
    with pytest.raises(TypeError, match="splittable must be a bool"):
        InputBuffer(32, 2, 2, 2, splittable=1)


@pytest.mark.parametrize(("shift", "stride", "ext_h", "parts"), [
    (1, (1, 1, 1), 4, 1),   # two row groups of two depths, whole tile
    (1, (2, 2, 1), 3, 2),   # strided, an odd tile: the second group has one row; split load
    (2, (1, 2, 1), 3, 1),   # four groups of one depth: the fourth has no row
    (2, (2, 1, 1), 1, 2),   # an edge tile of one row: only the first group has it
])
def test_row_lanes_store_each_lanes_rows_from_its_first(shift, stride, ext_h, parts):
    # FLAG_ROWLANES: lane v is depth v mod (Td/R) of row group v div (Td/R); every lane read at
    # one address gives its own depth's and rows' voxel (rows past the box: not checked).
    Td, Tr, Tc, Tn = 4, 4, 3, 32
    rng = np.random.default_rng(shift * 10 + ext_h)
    buf = InputBuffer(Tn, Td, Tr, Tc, kernel=3, stride=stride, splittable=True, row_lanes=True)
    groups = 1 << shift
    depths, rows = Td // groups, -(-ext_h // groups)
    box = [conv_input_range(0, n, 3, st, 1) for n, st in zip((depths, ext_h, Tc), stride,
                                                             strict=True)]
    tiles, maps = random_tiles(rng, buf, box, (5, 9, 7), 2)
    sd, sr, sc = stride
    reads, coords = [], []
    for a in range(3):
        for b in range(3):
            for c in range(3):
                for r in range(min(rows, ext_h)):
                    for q in range(Tc):
                        reads.append(a * buf.plane + (r * sr + b) * buf.width + q * sc + c)
                        coords.append((a, r * sr + b, q * sc + c))
    config = {"stride_d": sd, "row_shift": shift, "row_step": rows * sr}
    got, ev = run_split(buf, tiles, [reads] * 2, parts=parts, seed=shift + ext_h,
                        config=config)
    assert not ev["conflict"]
    for t in range(2):
        re, im = maps[t]
        for value, (a, h, w) in zip(got[t], coords, strict=True):
            for v in range(Td):
                dv, u = v % depths, v // depths
                d, hh = dv * sd + a, u * rows * sr + h
                if hh >= box[1][1]:
                    continue
                for slot in range(Tn // 2):
                    got_slot = value[v][slot]
                    assert (got_slot.re, got_slot.im) == (re[slot, d, hh, w],
                                                          im[slot, d, hh, w]), (t, v, a, h, w)


def test_row_lanes_need_a_power_of_two_of_lanes():
    with pytest.raises(ValueError, match="row_lanes needs Td a power of two > 1"):
        InputBuffer(16, 3, 2, 2, row_lanes=True)
    with pytest.raises(TypeError, match="row_lanes must be a bool"):
        InputBuffer(16, 2, 2, 2, row_lanes=1)


def test_small_tn_selects_sub_group():
    rng = np.random.default_rng(4)
    buf = InputBuffer(8, 2, 2, 2, kernel=1, stride=(2, 2, 2))
    assert buf.subs == 2
    box = [conv_input_range(0, n, 1, 2, 0) for n in (2, 2, 2)]
    parts, beats = padded_box(rng, 8, (4, 4, 4), box)
    cfg = {"groups": 1, "d": 3, "h": 3, "w": 3}
    reads, coords = conv_reads(buf, (2, 2, 2))
    got, _ = run_buffer(buf, [(cfg, beats)], [[(a, 1) for a in reads]])
    check_tile(buf, parts, got[0], coords, sub=1)


@pytest.mark.parametrize(("Tn", "B", "spread"), [
    (64, 8, 1), (64, 8, 0), (32, 4, 1), (16, 8, 1),
    pytest.param(128, 16, 1, marks=pytest.mark.slow)])  # suite budget: 16 s
def test_spreading_read_gives_the_spread_slots_of_the_compact_group(Tn, B, spread):
    """FLAG_SPREAD: one compact group per voxel, slot j the real channel of block j; every
    slot of block j reads x + i*x (its first) or x. Without ``spread`` the same buffer reads
    its Tn/16 groups as ever."""
    rng = np.random.default_rng(Tn + B)
    buf = InputBuffer(Tn, 2, 3, 2, B=B, kernel=3, stride=1, spreadable=True)
    box = [conv_input_range(0, n, 3, 1, 1) for n in (2, 3, 2)]
    slots = 8 if spread else Tn // 2
    parts, beats = padded_box(rng, slots, (5, 6, 4), box)
    cfg = {"groups": 1 if spread else buf.groups, "d": box[0][1], "h": box[1][1],
           "w": box[2][1]}
    reads, coords = conv_reads(buf, (2, 3, 2))
    got, ev = run_buffer(buf, [(cfg, beats)], [[(a, 0) for a in reads]],
                         config=[(buf.spread, spread)])
    assert not ev["conflict"]
    if not spread:
        check_tile(buf, parts, got[0], coords)
        return
    half = B // 2
    for value, (a, h, w) in zip(got[0], coords, strict=True):
        for v in range(buf.Td):
            for s in range(Tn // 2):
                x = parts[0][s // half, v + a, h, w]
                slot = value[v][s]
                assert (slot.re, slot.im) == (x, x if s % half == 0 else 0), (v, s, a, h, w)


def test_conflict_flag_on_read_without_tile():
    buf = InputBuffer(16, 1, 1, 1, kernel=1)

    async def tb(ctx):
        ctx.set(buf.r_en, 1)
        await ctx.tick()
        assert ctx.get(buf.conflict) == 1

    sim = Simulator(buf)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()


def test_sizes_from_config():
    acc = load_accelerator(builtin_path("c3d_zcu102"))
    buf = InputBuffer.from_config(acc, acc.cores[0])
    # C3D's core (Td = 2, not unrolled: one lane) also runs fc6, whose 1x4x4 input map is one
    # box: kernel (3, 4, 4), one lane holding the tile's (2-1)*1 + 3 = 4 planes of 10x10.
    assert (buf.Td, buf.kernel, buf.stride) == (1, (4, 4, 4), (1, 1, 1))
    assert (buf.height, buf.width, buf.depth) == (10, 10, 400)
    assert len(buf.banks) == 2
    assert buf.lanes_of_plane(3) == [(0, 3)]
    r3d = load_accelerator(builtin_path("r3d18_zcu102"))
    spatial = InputBuffer.from_config(r3d, r3d.cores[1])
    # conv1's 7x7x7 runs folded (1x7x7): the depth needs only the other layers' 3; Td = 2
    # unrolled: two lanes of 3 planes, lane 1 starting at plane sd = 2
    assert (spatial.Td, spatial.kernel) == (2, (3, 7, 7)) and spatial.height == 6 * 2 + 7
    assert spatial.lanes_of_plane(2) == [(0, 2), (1, 0)]
    for b in (buf, spatial):
        Fragment.get(b, None)  # elaborates


@pytest.mark.parametrize(("kwargs", "exc", "match"), [
    ({"Tn": 12}, ValueError, "Tn must be a multiple of B"),
    ({"Td": 0}, ValueError, "Td must be in"),
    ({"Tr": 2.0}, TypeError, "Tr must be an integer"),
    ({"B": 6}, ValueError, "B must be one of"),
    ({"kernel": (3, 3)}, ValueError, "kernel must have three"),
    ({"stride": 0}, ValueError, "stride must be in"),
    ({"Tn": 128, "spreadable": True}, ValueError, "spreadable needs Tn >= 16 and Tn/B <= 8"),
    ({"Tn": 8, "spreadable": True}, ValueError, "spreadable needs"),
    ({"spreadable": 1}, TypeError, "spreadable must be a bool"),
])
def test_bad_parameters(kwargs, exc, match):
    args = {"Tn": 16, "Td": 2, "Tr": 2, "Tc": 2} | kwargs
    with pytest.raises(exc, match=match):
        InputBuffer(args.pop("Tn"), args.pop("Td"), args.pop("Tr"), args.pop("Tc"), **args)


@pytest.mark.slow
def test_c3d_buffer_maps_to_block_ram():
    """The paper's C3D configuration: every bank in RAMB36E2/RAMB18E2, none in LUTs or FFs."""
    from fcircnn.gen.synth import synthesize

    acc = load_accelerator(builtin_path("c3d_zcu102"))
    report = synthesize(InputBuffer.from_config(acc, acc.cores[0]), "buffer_input")
    lutram, bram36 = report.lutram, report.bram36
    print(f"C3D input buffer: {report.bram}, {bram36:g} BRAM36-equivalent, "
          f"{report.lut} LUT, {report.ff} FF")
    assert not lutram, lutram
    # The words are not in flip-flops: the write stage's one beat (128 bits), its addresses
    # and enables, and the counters.
    assert report.ff < 128 + 100
    # 2 lanes x 2 slot groups, 128 bit x (2 x 243) words: 2 RAMB36 (512 x 72) each.
    assert report.bram == {"RAMB18E2": 0, "RAMB36E2": 8}


def test_dma_fills_buffer_end_to_end():
    """AxiDmaRead -> InputBuffer: a padded C3D-style tile read from an NC/8DHW8 map in
    simulated DDR lands where the PE array's conv reads expect it."""
    from amaranth.hdl import Elaboratable, Module
    from amaranth.lib import wiring

    from fcircnn.gen.dma_plan import FeatureMap, plan_read_box
    from fcircnn.hw.axi_dma_read import AxiDmaRead
    from fcircnn.sim.tb_axi_model import AxiMemory

    class Top(Elaboratable):
        def __init__(self):
            self.dma = AxiDmaRead(40, outstanding=4)
            self.buf = InputBuffer(32, 2, 3, 3, kernel=3, stride=1)

        def elaborate(self, platform):
            m = Module()
            m.submodules.dma, m.submodules.buf = self.dma, self.buf
            wiring.connect(m, self.dma.o, self.buf.i)
            return m

    rng = np.random.default_rng(9)
    shape = (4, 6, 7)
    top = Top()
    dma, buf = top.dma, top.buf
    box = [conv_input_range(o, n, 3, 1, 1) for o, n in ((2, 2), (3, 3), (6, 1))]  # far corner
    re = rng.integers(-127, 128, size=(16, *shape))
    im = rng.integers(-127, 128, size=(16, *shape))
    # Expected tile: the map zero-padded by 1 on every spatial side, cut to the box.
    cut = (slice(None), *(slice(s + 1, s + 1 + n) for s, n in box))
    parts = [np.pad(p, [(0, 0)] + [(1, 1)] * 3)[cut] for p in (re, im)]
    image = pack_ncdhw8(re, im)
    fmap = FeatureMap(0x40, 16, shape)
    mem = bytearray(0x40) + bytearray(image)
    model = AxiMemory(dma.m_axi, mem, seed=3, stall=0.2)
    desc = plan_read_box(fmap, (0, 2), *box)
    reads, coords = conv_reads(buf, (2, 3, 1))
    got = []

    async def control(ctx):
        groups, d, h, w = desc.extent
        ctx.set(buf.box, {"groups": groups, "d": d, "h": h, "w": w})
        ctx.set(dma.cmd.payload, desc.fields())
        ctx.set(dma.cmd.valid, 1)
        await ctx.tick().until(dma.cmd.ready)
        ctx.set(dma.cmd.valid, 0)
        ctx.set(dma.status.ready, 1)
        await ctx.tick().until(buf.r_valid)
        for a in reads:
            ctx.set(buf.r_addr, a)
            ctx.set(buf.r_en, 1)
            await ctx.tick()
            got.append(ctx.get(buf.act))
        assert not ctx.get(buf.conflict)

    sim = Simulator(top)
    sim.add_clock(1e-8)
    for proc in model.processes():
        sim.add_testbench(proc, background=True)
    sim.add_testbench(control)
    sim.run()
    check_tile(buf, parts, got, coords)
