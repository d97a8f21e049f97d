"""Read engine of the AXI DMA (:class:`fcircnn.hw.axi_dma_read.AxiDmaRead`) on its own, against
the Python AXI slave :class:`fcircnn.sim.tb_axi_model.AxiMemory` with random stalls on AR and R
and random back-pressure on the beat and status streams.

Reference: every delivered beat is compared byte for byte with the memory at
:func:`fcircnn.models.layout.ncdhw8_address` of its voxel (zeros where padded). A bus monitor
checks burst legality, the outstanding-burst limit, AR stability and ID 0.
"""

import itertools
import random

import numpy as np
import pytest
from amaranth.sim import Simulator

from fcircnn.gen.dma_plan import FeatureMap, plan_block, plan_read_box
from fcircnn.hw.axi4 import RESP_DECERR, RESP_OKAY, RESP_SLVERR
from fcircnn.hw.axi_dma_box import Status
from fcircnn.hw.axi_dma_read import AxiDmaRead, check_outstanding
from fcircnn.models.layout import ncdhw8_address
from fcircnn.sim.tb_axi_model import AxiMemory, SparseMemory, box_beat_addresses

AW = 40
PAGE = 4096


def status_of(value):
    return value if isinstance(value, Status) else Status(int(value))


class FaultyMemory(AxiMemory):
    """:class:`AxiMemory` whose R channel can misbehave on chosen beats.

    ``resp``: byte address -> RRESP of that beat; ``bad_last``: set of (burst index, beat) whose
    RLAST is inverted (an early RLAST, or a missing one on the final beat).
    """

    def __init__(self, *args, resp=None, bad_last=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.resp = dict(resp or {})
        self.bad_last = set(bad_last)

    def _read_resp(self, addr):
        return self.resp.get(addr, RESP_OKAY)

    def _read_last(self, burst, beat, last):
        return last ^ ((burst, beat) in self.bad_last)


def run_read(mem, cmds, *, aw=AW, outstanding=4, commands=1, seed=0, stall=0.0, ready_p=None,
             error_ranges=(), latency=2, slave=AxiMemory, slave_kwargs=None,
             max_cycles=100_000, hold=None):
    """Run ``cmds`` (box field dicts) one after the other; the next command is offered as soon
    as the previous one is accepted (command ``i`` of ``hold`` only once ``hold[i]`` statuses
    have been taken).

    Returns a dict: ``data`` (bytes per command), ``lasts`` (last flags per command),
    ``status`` ((code, addr) per command), ``model``, ``max_outstanding``, ``ar`` (cycle,
    addr, beats) handshakes, ``err_cycles`` (R handshakes with an error), ``accepted``,
    ``status_cycles`` and ``beats`` (every delivered beat: cycle, data bytes, last). With a
    command queue (``commands > 1``) beats of the next command may come before the previous
    status: ``data`` and ``lasts`` are then split at the status, not the command (use
    ``beats``).
    """
    dut = AxiDmaRead(aw, outstanding=outstanding, commands=commands)
    model = slave(dut.m_axi, mem, seed=seed, stall=stall, error_ranges=error_ranges,
                  latency=latency, **(slave_kwargs or {}))
    rng = random.Random(seed + 1)
    ready_p = 1.0 - stall if ready_p is None else ready_p
    res = {"data": [bytearray()], "lasts": [[]], "status": [], "status_cycles": [],
           "accepted": [], "busy": [], "ar": [], "err_cycles": [], "max_outstanding": 0,
           "model": model, "beats": []}

    async def producer(ctx):
        cycle = 0
        for i, c in enumerate(cmds):
            ctx.set(dut.cmd.valid, 0)
            while len(res["status"]) < (hold or {}).get(i, 0):
                await ctx.tick()
                cycle += 1
            ctx.set(dut.cmd.payload, c)
            ctx.set(dut.cmd.valid, 1)
            while True:
                _, _, ready = await ctx.tick().sample(dut.cmd.ready)
                cycle += 1
                if ready:
                    res["accepted"].append(cycle)
                    break
        ctx.set(dut.cmd.valid, 0)

    async def consumer(ctx):
        cycle = 0
        while len(res["status"]) < len(cmds):
            ready = int(rng.random() < ready_p)
            st_ready = int(rng.random() < 0.5)
            ctx.set(dut.o.ready, ready)
            ctx.set(dut.status.ready, st_ready)
            _, _, valid, p, sv, sp, busy = await ctx.tick().sample(
                dut.o.valid, dut.o.payload, dut.status.valid, dut.status.payload, dut.busy)
            cycle += 1
            res["busy"].append(busy)
            assert cycle < max_cycles, "read DMA hang"
            if valid and ready:
                res["data"][-1] += int(p.data).to_bytes(16, "little")
                res["lasts"][-1].append(int(p.last))
                res["beats"].append((cycle, int(p.data).to_bytes(16, "little"), int(p.last)))
            if sv and st_ready:
                res["status"].append((status_of(sp.code), int(sp.addr)))
                res["status_cycles"].append(cycle)
                res["data"].append(bytearray())
                res["lasts"].append([])

    async def monitor(ctx):
        axi = dut.m_axi
        inflight, cycle, prev = 0, 0, None
        while True:
            _, _, arv, arr, arid, addr, alen, rv, rr, rlast, rresp = await ctx.tick().sample(
                axi.arvalid, axi.arready, axi.arid, axi.araddr, axi.arlen, axi.rvalid,
                axi.rready, axi.rlast, axi.rresp)
            cycle += 1
            if prev is not None:
                assert arv and (addr, alen) == prev, "AR changed before its handshake"
            prev = (addr, alen) if arv and not arr else None
            if arv:
                assert arid == 0
            if arv and arr:
                inflight += 1
                res["ar"].append((cycle, addr, alen + 1))
            if rv and rr:
                if rresp & 2:
                    res["err_cycles"].append(cycle)
                if rlast:
                    inflight -= 1
            res["max_outstanding"] = max(res["max_outstanding"], inflight)
            assert inflight <= outstanding, "too many reads in flight"

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    for proc in model.processes():
        sim.add_testbench(proc, background=True)
    sim.add_testbench(producer, background=True)
    sim.add_testbench(monitor, background=True)
    sim.add_testbench(consumer)
    sim.run()
    res["data"] = [bytes(d) for d in res["data"][:-1]]
    res["lasts"] = res["lasts"][:-1]
    return res


def box_beats(fmap, groups, d, h, w):
    """Beat addresses of a read box in NC/8DHW8 order, ``None`` where padded."""
    return [addr for _, addr in box_beat_addresses(fmap, groups, d, h, w)]


def ref_read(mem, beats):
    return b"".join(bytes(16) if a is None else bytes(mem[a:a + 16]) for a in beats)


def check_bursts(ar, beats):
    """The AR bursts are legal and cover exactly the box's in-map beats, in order."""
    covered = []
    for _, addr, n in ar:
        assert 1 <= n <= 256 and addr % 16 == 0
        assert addr // PAGE == (addr + 16 * n - 1) // PAGE, "4 KB crossing"
        covered += [addr + 16 * i for i in range(n)]
    assert covered == [a for a in beats if a is not None]


def random_image(rng, size):
    """Random bytes with runs of the extremes 0x00, 0x7F, 0x80, 0xFF."""
    image = rng.integers(0, 256, size, dtype=np.uint8)
    mask = rng.random(size) < 0.3
    image[mask] = rng.choice(np.array([0, 0x7F, 0x80, 0xFF], dtype=np.uint8), mask.sum())
    return bytearray(image.tobytes())


def random_boxes(rng, fmap, n):
    boxes = []
    for _ in range(n):
        g0 = int(rng.integers(fmap.groups))
        box = [(g0, int(rng.integers(1, fmap.groups - g0 + 1)))]
        for size in fmap.shape:
            if rng.random() < 0.3:
                box.append((0, size))
            else:
                box.append((int(rng.integers(-2, size + 1)), int(rng.integers(1, size + 4))))
        boxes.append(tuple(box))
    return boxes


@pytest.mark.parametrize(("seed", "outstanding", "stall"),
                         [(0, 1, 0.0), (1, 4, 0.3), (2, 2, 0.5), (3, 8, 0.2), (4, 64, 0.1)])
def test_random_boxes_byte_exact(seed, outstanding, stall):
    """Random maps across 4 KB pages, random boxes with padded borders and folded whole rows,
    random AR/R stalls and beat back-pressure: every beat equals the memory at its voxel's
    ``ncdhw8_address`` (zero where padded), ``last`` only on the final beat, status OK after it,
    legal bursts covering exactly the in-map beats, at most ``outstanding`` reads in flight."""
    rng = np.random.default_rng(seed)
    slots = int(rng.integers(1, 25))
    shape = tuple(int(v) for v in rng.integers(2, 9, 3))
    base = PAGE * int(rng.integers(1, 4)) - 16 * int(rng.integers(0, 40))
    fmap = FeatureMap(base, slots, shape)
    mem = random_image(rng, base + fmap.size + PAGE)
    boxes = random_boxes(rng, fmap, 6)
    descs = [plan_read_box(fmap, *b, merge=bool(rng.random() < 0.6)) for b in boxes]
    res = run_read(mem, [d.fields() for d in descs], outstanding=outstanding, seed=seed,
                   stall=stall)
    ar = list(res["ar"])
    for i, (box, desc) in enumerate(zip(boxes, descs, strict=True)):
        beats = box_beats(fmap, *box)
        assert res["status"][i] == (Status.OK, 0)
        assert res["data"][i] == ref_read(mem, beats), i
        assert res["lasts"][i] == [0] * (len(beats) - 1) + [1]
        n = len(desc.bursts())
        check_bursts(ar[:n], beats)
        ar = ar[n:]
    assert ar == []
    assert res["model"].idle() and res["model"].read_done == len(res["model"].reads)


@pytest.mark.parametrize("outstanding", [1, 3, 6])
def test_outstanding_limit_reached_and_respected(outstanding):
    """Short rows with a long read latency: the engine keeps exactly ``outstanding`` bursts in
    flight (the AR channel runs ahead of R) and never more."""
    fmap = FeatureMap(0, 8, (1, 12, 12))
    mem = random_image(np.random.default_rng(outstanding), fmap.size)
    box = ((0, 1), (0, 1), (0, 12), (2, 3))
    res = run_read(mem, [plan_read_box(fmap, *box).fields()], outstanding=outstanding,
                   latency=12, ready_p=1.0)
    assert res["status"] == [(Status.OK, 0)]
    assert res["data"][0] == ref_read(mem, box_beats(fmap, *box))
    assert res["max_outstanding"] == outstanding


def test_long_block_streams():
    """A 9000-beat contiguous block at an odd page offset: 256-beat bursts split at 4 KB pages,
    at one beat per cycle once streaming."""
    mem = random_image(np.random.default_rng(9), 0x24000)
    (desc,) = plan_block(0x0230, 9000 * 16)
    res = run_read(mem, [desc.fields()], outstanding=4, ready_p=1.0)
    assert res["status"] == [(Status.OK, 0)]
    assert res["data"][0] == bytes(mem[0x230:0x230 + 9000 * 16])
    check_bursts(res["ar"], [0x230 + 16 * i for i in range(9000)])
    assert [n for _, _, n in res["ar"]][:3] == [221, 256, 256]
    assert res["status_cycles"][0] < 9000 * 1.05


def error_case(seed):
    rng = np.random.default_rng(seed)
    fmap = FeatureMap(0x0F00, 16, (2, 4, 20))
    mem = random_image(rng, fmap.base + fmap.size + 64)
    box = ((0, 2), (-1, 3), (0, 4), (-1, 22))
    return fmap, mem, box


@pytest.mark.parametrize(("seed", "which"), [(10, 0), (11, 1), (12, "first"), (13, "last")])
def test_bus_error_drains_and_reports(seed, which):
    """SLVERR on one beat: the beats before it are delivered intact, none after; every issued
    burst is completed; no new AR after the error; BUS_ERROR with the beat's address; then the
    engine is idle and serves the next command."""
    fmap, mem, box = error_case(seed)
    beats = box_beats(fmap, *box)
    bus = [a for a in beats if a is not None]
    bad = {0: bus[37], 1: bus[100], "first": bus[0], "last": bus[-1]}[which]
    nxt = ((1, 1), (1, 1), (1, 2), (3, 4))
    cmds = [plan_read_box(fmap, *box, merge=False).fields(), plan_read_box(fmap, *nxt).fields()]
    res = run_read(mem, cmds, outstanding=4, seed=seed, stall=0.3,
                   error_ranges=[(bad, bad + 16)])
    assert res["status"][0] == (Status.BUS_ERROR, bad)
    assert res["data"][0] == ref_read(mem, beats[:beats.index(bad)])
    assert 1 not in res["lasts"][0]
    err_cycle = res["err_cycles"][0]
    assert len([c for c, _, _ in res["ar"] if c > err_cycle]) <= 1 + len(
        plan_read_box(fmap, *nxt).bursts())
    model = res["model"]
    assert model.read_done == len(model.reads) and model.idle()
    assert res["status"][1] == (Status.OK, 0)
    assert res["data"][1] == ref_read(mem, box_beats(fmap, *nxt))


def test_no_read_issued_after_error():
    """Between the failing beat and the status, at most the one AR already registered goes out
    (a 1-beat-row box with many bursts left)."""
    fmap = FeatureMap(0, 8, (1, 40, 3))
    mem = random_image(np.random.default_rng(3), fmap.size)
    box = ((0, 1), (0, 1), (0, 40), (1, 1))
    bad = ncdhw8_address(0, 0, 5, 1, fmap.shape)
    res = run_read(mem, [plan_read_box(fmap, *box).fields()], outstanding=2, latency=6,
                   error_ranges=[(bad, bad + 16)], ready_p=1.0)
    assert res["status"] == [(Status.BUS_ERROR, bad)]
    err_cycle = res["err_cycles"][0]
    late = [a for c, a, _ in res["ar"] if c > err_cycle]
    assert len(late) <= 1 and len(res["ar"]) < 10
    assert res["data"][0] == ref_read(mem, box_beats(fmap, *box)[:5])


@pytest.mark.parametrize(("fault", "index"), [("decerr", 20), ("early_last", 20),
                                              ("missing_last", 0)])
def test_protocol_faults_reported(fault, index):
    """DECERR, an RLAST before the end of a burst and a missing RLAST are BUS_ERROR at the
    beat's address; the burst's remaining beats are still taken (the slave is drained)."""
    fmap = FeatureMap(0x200, 8, (1, 2, 64))
    mem = random_image(np.random.default_rng(5), fmap.base + fmap.size)
    box = ((0, 1), (0, 1), (0, 2), (0, 64))
    cmd = plan_read_box(fmap, *box, merge=False).fields()
    beats = box_beats(fmap, *box)
    if fault == "decerr":
        bad, kw = beats[index], {"resp": {beats[index]: RESP_DECERR}}
    elif fault == "early_last":
        bad, kw = beats[index], {"bad_last": {(0, index)}}
    else:
        bad, kw = beats[63], {"bad_last": {(0, 63)}}
    res = run_read(mem, [cmd, cmd], seed=index, stall=0.2, slave=FaultyMemory,
                   slave_kwargs=kw)
    assert res["status"][0] == (Status.BUS_ERROR, bad)
    assert res["data"][0] == ref_read(mem, beats[:beats.index(bad)])
    model = res["model"]
    assert model.read_done == len(model.reads) and model.idle()
    if fault == "decerr":
        assert res["status"][1] == (Status.BUS_ERROR, bad)
    else:
        assert res["status"][1] == (Status.OK, 0) and res["data"][1] == ref_read(mem, beats)


def test_slverr_code_on_single_beat_burst():
    fmap = FeatureMap(0, 8, (1, 1, 1))
    mem = bytearray(range(16))
    cmd = plan_read_box(fmap, (0, 1), (0, 1), (0, 1), (0, 1)).fields()
    res = run_read(mem, [cmd], slave=FaultyMemory, slave_kwargs={"resp": {0: RESP_SLVERR}})
    assert res["status"] == [(Status.BUS_ERROR, 0)] and res["data"] == [b""]


BAD = [("addr", 0x108), ("stride_g", 0x11), ("stride_d", 0x8), ("stride_h", 0x14),
       ("groups", 0), ("w", 0), ("h", 0), ("d", 0)]


def test_bad_commands_issue_nothing():
    """Bad commands: BAD_COMMAND with the command's address, no AR, no beat; each is followed
    by a good command that is served normally."""
    fmap = FeatureMap(0x100, 8, (2, 2, 3))
    mem = random_image(np.random.default_rng(6), 0x400)
    box = ((0, 1), (-1, 3), (0, 2), (0, 4))
    good = plan_read_box(fmap, *box, merge=False).fields()
    cmds = []
    for name, value in BAD:
        if name in "dhw":
            cmds.append(good | {f"{name}_pre": 0, f"{name}_len": 0, f"{name}_post": 0})
        else:
            cmds.append(good | {name: value})
        cmds.append(good)
    res = run_read(mem, cmds, seed=6, stall=0.2)
    nburst = len(plan_read_box(fmap, *box, merge=False).bursts())
    assert len(res["ar"]) == nburst * len(BAD)
    for i, c in enumerate(cmds):
        if i % 2 == 0:
            assert res["status"][i] == (Status.BAD_COMMAND, c["addr"]) and res["data"][i] == b""
        else:
            assert res["status"][i] == (Status.OK, 0)
            assert res["data"][i] == ref_read(mem, box_beats(fmap, *box))


@pytest.mark.parametrize("aw", [32, 64])
def test_address_overflow(aw):
    """Leading padding and the bursts below ``2**addr_width`` are delivered; the burst at the
    top is not issued; OVERFLOW with the wrapped address 0."""
    top = 1 << aw
    mem = SparseMemory({top - 0x40 + i: (7 * i + 1) & 0xFF for i in range(0x40)})
    cmd = {"addr": top - 0x40, "stride_g": 0, "stride_d": 0, "stride_h": 0, "groups": 1,
           "d_pre": 0, "d_len": 1, "d_post": 0, "h_pre": 0, "h_len": 1, "h_post": 0,
           "w_pre": 2, "w_len": 8, "w_post": 1, "last_lanes": 8}
    res = run_read(mem, [cmd, cmd | {"w_len": 4}], aw=aw, seed=aw, stall=0.2)
    assert res["status"] == [(Status.OVERFLOW, 0), (Status.OK, 0)]
    expect = bytes(32) + mem[top - 0x40:top]
    assert res["data"] == [expect, expect + bytes(16)]
    assert [(a, n) for _, a, n in res["ar"]] == [(top - 0x40, 4)] * 2


def test_status_held_blocks_next_command():
    """The next command is accepted only after the previous status was taken, and ``busy`` is
    high from acceptance to status."""
    fmap = FeatureMap(0, 8, (1, 2, 4))
    mem = random_image(np.random.default_rng(8), fmap.size)
    cmd = plan_read_box(fmap, (0, 1), (0, 1), (0, 2), (-1, 5)).fields()
    res = run_read(mem, [cmd] * 4, seed=8, stall=0.3)
    assert res["status"] == [(Status.OK, 0)] * 4
    busy = [None, *res["busy"]]  # busy[c]: during cycle c (1-based, as the handshakes)
    for i in range(4):
        accepted, status = res["accepted"][i], res["status_cycles"][i]
        assert all(busy[accepted + 1:status + 1]), i
        if i < 3:
            assert res["accepted"][i + 1] > status
            assert not any(busy[status + 1:res["accepted"][i + 1] + 1]), i


def split_at_lasts(beats):
    """The delivered beats (``run_read``'s ``beats``) as bytes per command, cut after each
    ``last``; what follows the final ``last`` is the trailing entry."""
    out, cur = [], bytearray()
    for _, data, last in beats:
        cur += data
        if last:
            out.append(bytes(cur))
            cur = bytearray()
    return [*out, bytes(cur)]


@pytest.mark.parametrize(("seed", "commands", "stall"), [(20, 2, 0.0), (21, 2, 0.3),
                                                          (22, 4, 0.2), (23, 8, 0.5)])
def test_queued_commands_byte_exact_in_order(seed, commands, stall):
    """A queue of ``commands``: random boxes offered back to back under random AR/R stalls and
    beat back-pressure; every command's beats are the memory's (split at the ``last`` flags),
    in command order, each status OK and in order, no more than ``commands`` accepted and not
    reported, legal bursts covering exactly the in-map beats of the commands in order."""
    rng = np.random.default_rng(seed)
    fmap = FeatureMap(PAGE - 16 * int(rng.integers(0, 40)), int(rng.integers(1, 25)),
                      tuple(int(v) for v in rng.integers(2, 9, 3)))
    mem = random_image(rng, fmap.base + fmap.size + PAGE)
    boxes = random_boxes(rng, fmap, 10)
    descs = [plan_read_box(fmap, *b, merge=bool(rng.random() < 0.6)) for b in boxes]
    res = run_read(mem, [d.fields() for d in descs], commands=commands, seed=seed,
                   stall=stall)
    beats = [box_beats(fmap, *b) for b in boxes]
    assert res["status"] == [(Status.OK, 0)] * len(boxes)
    assert split_at_lasts(res["beats"]) == [ref_read(mem, b) for b in beats] + [b""]
    check_bursts(res["ar"], [a for b in beats for a in b])
    for i, accepted in enumerate(res["accepted"]):
        reported = sum(c < accepted for c in res["status_cycles"])
        assert i - reported < commands, "more commands in the queue than it holds"
    assert res["model"].idle() and res["model"].read_done == len(res["model"].reads)


def test_a_queue_streams_small_commands_back_to_back():
    """Twenty 8-beat blocks at a read latency of 12 (statuses taken every other cycle on
    average): one command at a time pays the command, the walker's start and the latency per
    block; a queue keeps the next commands' bursts behind the previous ones', and four queued
    commands cover the latency, so the beats come one a cycle across commands."""
    mem = random_image(np.random.default_rng(30), 20 * 128)
    cmds = [plan_block(128 * i, 128)[0].fields() for i in range(20)]
    spans = {}
    for commands in (1, 2, 4):
        res = run_read(mem, cmds, commands=commands, latency=12, ready_p=1.0)
        assert res["status"] == [(Status.OK, 0)] * 20
        assert split_at_lasts(res["beats"]) == [bytes(mem[128 * i:128 * i + 128])
                                                for i in range(20)] + [b""]
        cycles = [c for c, _, _ in res["beats"]]
        gaps = [b - a - 1 for a, b in itertools.pairwise(cycles)]
        spans[commands] = cycles[-1] - cycles[0] + 1
        if commands == 1:
            assert min(gaps[7::8]) >= 12  # every command waits for its data
        if commands == 4:
            assert max(gaps) == 0
    assert spans[4] == 160 < spans[2] < 0.6 * spans[1]


@pytest.mark.parametrize(("commands", "which"), [(2, 0), (3, 1), (4, "last")])
def test_an_error_in_a_queue_ends_every_queued_command(commands, which):
    """SLVERR on one beat of the first of several queued commands: its beats before the error
    are delivered, none after (of it or of the commands queued behind it); every queued
    command reports BUS_ERROR with the beat's address, the first only once no burst is in
    flight; every issued burst completes; then the queue serves a new command."""
    fmap, mem, box = error_case(40 + commands)
    beats = box_beats(fmap, *box)
    bus = [a for a in beats if a is not None]
    bad = {0: bus[37], 1: bus[100], "last": bus[-1]}[which]
    nxt = ((1, 1), (1, 1), (1, 2), (3, 4))
    queued = [plan_read_box(fmap, *nxt).fields()] * (commands - 1)
    after = plan_read_box(fmap, *nxt, merge=False).fields()
    cmds = [plan_read_box(fmap, *box, merge=False).fields(), *queued]
    n = len(cmds)
    res = run_read(mem, [*cmds, after], commands=commands, seed=commands, stall=0.3,
                   error_ranges=[(bad, bad + 16)], hold={n: n})
    assert res["status"][:n] == [(Status.BUS_ERROR, bad)] * n
    err_cycle = res["err_cycles"][0]
    before = b"".join(d for c, d, _ in res["beats"] if c <= res["status_cycles"][n - 1])
    assert before == ref_read(mem, beats[:beats.index(bad)])
    assert not [1 for c, _, last in res["beats"] if c <= res["status_cycles"][n - 1] and last]
    model = res["model"]
    assert model.read_done == len(model.reads) and model.idle()
    assert res["ar"] and max(c for c, _, _ in res["ar"] if c < res["status_cycles"][0]) \
        <= err_cycle + 1
    # the command after the statuses: served normally
    assert res["status"][n] == (Status.OK, 0)
    after_beats = b"".join(d for c, d, _ in res["beats"] if c > res["status_cycles"][n - 1])
    assert after_beats == ref_read(mem, box_beats(fmap, *nxt))


@pytest.mark.parametrize(("kwargs", "exc", "match"), [
    ({"commands": 0}, ValueError, "commands"),
    ({"commands": 9}, ValueError, "commands"),
    ({"commands": 2.0}, TypeError, "commands"),
    ({"outstanding": 0}, ValueError, "outstanding"),
    ({"outstanding": 65}, ValueError, "outstanding"),
    ({"outstanding": True}, TypeError, "outstanding"),
    ({"addr_width": 31}, ValueError, "addr_width"),
    ({"addr_width": 40.0}, TypeError, "addr_width"),
])
def test_bad_parameters(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        AxiDmaRead(**kwargs)
    check_outstanding("x", 64)
