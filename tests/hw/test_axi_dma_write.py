"""Write engine of the AXI DMA (:class:`fcircnn.hw.axi_dma_write.AxiDmaWrite`) on its own,
against the Python AXI slave :class:`fcircnn.sim.tb_axi_model.AxiMemory` with random stalls on
AW, W and B and random gaps in the beat stream.

Reference: the whole memory after the transfer equals the initial (random) memory with every
beat's bytes stored at :func:`fcircnn.models.layout.ncdhw8_address` of its voxel, only the
``last_lanes`` first slots in the box's last slot group (``WSTRB``). A bus monitor checks AW
stability and ID 0, W per burst (beat count, ``WLAST``, strobes, never before its AW), and the
outstanding limit (AW without B).
"""

import random

import numpy as np
import pytest
from amaranth.sim import Simulator

from fcircnn.gen.dma_plan import FeatureMap, plan_write_box
from fcircnn.hw.axi4 import RESP_DECERR, RESP_EXOKAY, RESP_OKAY
from fcircnn.hw.axi_dma_box import Status
from fcircnn.hw.axi_dma_write import AxiDmaWrite
from fcircnn.sim.tb_axi_model import AxiMemory, SparseMemory, box_beat_addresses

AW = 40
PAGE = 4096
FULL = 0xFFFF


def status_of(value):
    return value if isinstance(value, Status) else Status(int(value))


class FaultyBMemory(AxiMemory):
    """:class:`AxiMemory` answering chosen bursts (by issue index) with a chosen BRESP."""

    def __init__(self, *args, bresp=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.bresp = dict(bresp or {})

    async def _b(self, ctx):
        axi = self.axi
        while True:
            show = bool(self._bq) and self._go()
            if show:
                ctx.set(axi.bresp, self.bresp.get(self.write_done, RESP_OKAY))
            ctx.set(axi.bvalid, show)
            _, _, ready = await ctx.tick().sample(axi.bready)
            if show and ready:
                self._bq.popleft()
                self.write_done += 1


def run_write(mem, jobs, *, aw=AW, outstanding=4, seed=0, stall=0.0, valid_p=None,
              error_ranges=(), slave=AxiMemory, slave_kwargs=None, max_cycles=100_000):
    """Run ``jobs`` (``(box fields, payload bytes)``) one after the other.

    The producer offers a command, then its beats (holding ``valid`` until each handshake,
    random gaps between beats), until the command's status. Returns a dict: ``status`` ((code,
    addr, beats taken) per job), ``aw`` ((cycle, addr, beats)), ``w`` (per burst: list of
    (cycle, strobe, last)), ``b`` ((cycle, resp)), ``max_outstanding``, ``model``.
    """
    dut = AxiDmaWrite(aw, outstanding=outstanding)
    model = slave(dut.m_axi, mem, seed=seed, stall=stall, error_ranges=error_ranges,
                  **(slave_kwargs or {}))
    rng = random.Random(seed + 1)
    valid_p = 1.0 - stall if valid_p is None else valid_p
    res = {"status": [], "aw": [], "w": [[]], "b": [], "max_outstanding": 0, "model": model,
           "accepted": [], "status_cycles": []}
    clock = {"cycle": 0}

    async def producer(ctx):
        for fields, payload in jobs:
            ctx.set(dut.cmd.payload, fields)
            ctx.set(dut.cmd.valid, 1)
            while True:
                _, _, ready = await ctx.tick().sample(dut.cmd.ready)
                if ready:
                    res["accepted"].append(clock["cycle"])
                    break
            ctx.set(dut.cmd.valid, 0)
            i, offered = 0, False
            while True:
                offered = offered or (i < len(payload) // 16 and rng.random() < valid_p)
                if offered:
                    ctx.set(dut.i.payload.data,
                            int.from_bytes(payload[16 * i:16 * i + 16], "little"))
                ctx.set(dut.i.valid, offered)
                st_ready = int(rng.random() < 0.6)
                ctx.set(dut.status.ready, st_ready)
                _, _, ready, sv, sp = await ctx.tick().sample(
                    dut.i.ready, dut.status.valid, dut.status.payload)
                if offered and ready:
                    i, offered = i + 1, False
                if sv and st_ready:
                    res["status"].append((status_of(sp.code), int(sp.addr), i))
                    res["status_cycles"].append(clock["cycle"])
                    break
            ctx.set(dut.i.valid, 0)
            ctx.set(dut.status.ready, 0)

    async def monitor(ctx):
        axi = dut.m_axi
        inflight, prev_aw, prev_w = 0, None, None
        pending_aw = []           # beats of AW bursts whose W burst has not started
        aw_count = w_bursts = 0
        while True:
            (_, _, awv, awr, awid, awaddr, awlen, wv, wr, wdata, wstrb, wlast, bv, br,
             bresp) = await ctx.tick().sample(
                axi.awvalid, axi.awready, axi.awid, axi.awaddr, axi.awlen, axi.wvalid,
                axi.wready, axi.wdata, axi.wstrb, axi.wlast, axi.bvalid, axi.bready,
                axi.bresp)
            clock["cycle"] += 1
            cycle = clock["cycle"]
            assert cycle < max_cycles, "write DMA hang"
            if prev_aw is not None:
                assert awv and (awaddr, awlen) == prev_aw, "AW changed before its handshake"
            prev_aw = (awaddr, awlen) if awv and not awr else None
            if prev_w is not None:
                assert wv and (wdata, wstrb, wlast) == prev_w, "W changed before its handshake"
            prev_w = (wdata, wstrb, wlast) if wv and not wr else None
            if awv:
                assert awid == 0
            if awv and awr:
                inflight += 1
                aw_count += 1
                res["aw"].append((cycle, awaddr, awlen + 1))
                pending_aw.append(awlen + 1)
            if wv and wr:
                if not res["w"][-1]:
                    assert aw_count > w_bursts, "W burst before its AW"
                res["w"][-1].append((cycle, wstrb, wlast))
                if wlast:
                    assert len(res["w"][-1]) == pending_aw.pop(0), "WLAST on the wrong beat"
                    res["w"].append([])
                    w_bursts += 1
            if bv and br:
                inflight -= 1
                res["b"].append((cycle, bresp))
            res["max_outstanding"] = max(res["max_outstanding"], inflight)
            assert inflight <= outstanding, "too many writes in flight"

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    for proc in model.processes():
        sim.add_testbench(proc, background=True)
    sim.add_testbench(monitor, background=True)
    sim.add_testbench(producer)
    sim.run()
    assert res["w"][-1] == [], "unfinished W burst"
    res["w"] = res["w"][:-1]
    return res


def box_voxels(fmap, groups, d, h, w):
    """(group, beat address) of every voxel of a write box (inside the map) in NC/8DHW8 order."""
    return box_beat_addresses(fmap, groups, d, h, w)


def ref_write(mem, voxels, payload, last_group, last_lanes, beats=None):
    """``mem`` after writing ``payload`` (the first ``beats`` beats) to ``voxels``."""
    out = bytearray(mem)
    for i, (g, addr) in enumerate(voxels[:beats]):
        lanes = last_lanes if g == last_group else 8
        out[addr:addr + 2 * lanes] = payload[16 * i:16 * i + 2 * lanes]
    return out


def strobes(voxels, last_group, last_lanes):
    part = (1 << (2 * last_lanes)) - 1
    return [part if g == last_group else FULL for g, _ in voxels]


def random_bytes(rng, n):
    data = rng.integers(0, 256, n, dtype=np.uint8)
    mask = rng.random(n) < 0.3
    data[mask] = rng.choice(np.array([0, 0x7F, 0x80, 0xFF], dtype=np.uint8), mask.sum())
    return bytearray(data.tobytes())


def random_write_boxes(rng, fmap, n):
    """In-map boxes (whole axes now and then: row folding) with a slot count for WSTRB."""
    out = []
    for _ in range(n):
        g0 = int(rng.integers(fmap.groups))
        groups = (g0, int(rng.integers(1, fmap.groups - g0 + 1)))
        box = [groups]
        for size in fmap.shape:
            if rng.random() < 0.35:
                box.append((0, size))
            else:
                s = int(rng.integers(size))
                box.append((s, int(rng.integers(1, size - s + 1))))
        end = groups[0] + groups[1]
        slots = min(fmap.slots, 8 * end) if rng.random() < 0.5 else 8 * end - int(
            rng.integers(8))
        out.append((tuple(box), slots))
    return out


@pytest.mark.parametrize(("seed", "outstanding", "stall"),
                         [(0, 1, 0.0), (1, 4, 0.3), (2, 2, 0.5), (3, 8, 0.2), (4, 64, 0.1)])
def test_random_boxes_byte_exact(seed, outstanding, stall):
    """Random in-map boxes (folded whole rows, maps across 4 KB pages, partial last groups)
    under random AW/W/B stalls and beat gaps: the whole memory equals the reference, every
    beat is taken, bursts are legal and cover exactly the box's voxels in order, WSTRB follows
    ``last_lanes``, at most ``outstanding`` writes in flight, status OK once every B is in."""
    rng = np.random.default_rng(seed)
    slots = int(rng.integers(1, 25))
    shape = tuple(int(v) for v in rng.integers(2, 9, 3))
    base = PAGE * int(rng.integers(1, 4)) - 16 * int(rng.integers(0, 40))
    fmap = FeatureMap(base, slots, shape)
    mem = random_bytes(rng, base + fmap.size + PAGE)
    jobs, expect = [], bytearray(mem)
    cases = random_write_boxes(rng, fmap, 6)
    for box, box_slots in cases:
        desc = plan_write_box(fmap, *box, slots=box_slots, merge=bool(rng.random() < 0.6))
        voxels = box_voxels(fmap, *box)
        payload = bytes(random_bytes(rng, 16 * len(voxels)))
        last = box[0][0] + box[0][1] - 1
        expect = ref_write(expect, voxels, payload, last, desc.last_lanes)
        jobs.append((desc.fields(), payload, voxels, last, desc.last_lanes))
    res = run_write(mem, [j[:2] for j in jobs], outstanding=outstanding, seed=seed,
                    stall=stall)
    assert mem == expect
    bursts, w = list(res["aw"]), list(res["w"])
    for i, (_, _, voxels, last, lanes) in enumerate(jobs):
        assert res["status"][i] == (Status.OK, 0, len(voxels))
        n, covered = 0, []
        while len(covered) < len(voxels):
            _, addr, beats = bursts[n]
            assert 1 <= beats <= 256 and addr // PAGE == (addr + 16 * beats - 1) // PAGE
            assert len(w[n]) == beats
            covered += [addr + 16 * k for k in range(beats)]
            n += 1
        assert covered == [a for _, a in voxels]
        assert [s for burst in w[:n] for _, s, _ in burst] == strobes(voxels, last, lanes)
        # The status comes after the last B of the command.
        assert res["b"][n - 1][0] <= res["status_cycles"][i]
        bursts, w, res["b"] = bursts[n:], w[n:], res["b"][n:]
    assert bursts == []
    model = res["model"]
    assert model.idle() and model.write_done == len(model.writes)


@pytest.mark.parametrize("outstanding", [1, 2, 5])
def test_outstanding_limit_reached_and_respected(outstanding):
    """One-beat bursts with a slow B channel: AW runs exactly ``outstanding`` bursts ahead of B,
    never more."""
    fmap = FeatureMap(0, 8, (1, 16, 4))
    mem = bytearray(fmap.size)
    box = ((0, 1), (0, 1), (0, 16), (1, 1))
    voxels = box_voxels(fmap, *box)
    payload = bytes(range(16)) * len(voxels)
    res = run_write(mem, [(plan_write_box(fmap, *box).fields(), payload)],
                    outstanding=outstanding, seed=outstanding, stall=0.6, valid_p=1.0)
    assert res["status"] == [(Status.OK, 0, 16)]
    assert mem == ref_write(bytearray(fmap.size), voxels, payload, 0, 8)
    assert res["max_outstanding"] == outstanding


@pytest.mark.parametrize("last_lanes", [1, 3, 8])
def test_wstrb_last_group(last_lanes):
    """Only the bytes of the first ``last_lanes`` slots of the last group are written; the
    other groups are written whole."""
    fmap = FeatureMap(0x40, 8 * 2 + last_lanes if last_lanes < 8 else 24, (1, 2, 3))
    mem = bytearray(b"\xa5" * (fmap.base + fmap.size + 64))
    box = ((0, 3), (0, 1), (0, 2), (0, 3))
    desc = plan_write_box(fmap, *box, slots=fmap.slots)
    assert desc.last_lanes == last_lanes
    voxels = box_voxels(fmap, *box)
    payload = bytes(random_bytes(np.random.default_rng(last_lanes), 16 * len(voxels)))
    res = run_write(mem, [(desc.fields(), payload)], seed=last_lanes, stall=0.3)
    assert res["status"] == [(Status.OK, 0, len(voxels))]
    assert mem == ref_write(b"\xa5" * len(mem), voxels, payload, 2, last_lanes)
    got = [s for burst in res["w"] for _, s, _ in burst]
    assert got == strobes(voxels, 2, last_lanes)


@pytest.mark.parametrize(("seed", "which"), [(10, 0), (11, 3), (12, -1)])
def test_bus_error_drains_and_reports(seed, which):
    """SLVERR on one burst: BUS_ERROR with the burst's address; every beat of the box is taken
    (the producer never hangs); issued bursts still get their W beats; at most the AW already
    registered goes out after the error; then the next command runs normally."""
    rng = np.random.default_rng(seed)
    fmap = FeatureMap(0x0F80, 16, (2, 5, 6))
    other = FeatureMap(fmap.base + fmap.size, 8, (1, 5, 6))
    mem = random_bytes(rng, other.base + other.size + 64)
    box = ((0, 2), (0, 2), (0, 5), (1, 4))
    desc = plan_write_box(fmap, *box, merge=False)
    bad = desc.bursts()[which][0]
    voxels = box_voxels(fmap, *box)
    payload = bytes(random_bytes(rng, 16 * len(voxels)))
    nxt_box = ((0, 1), (0, 1), (0, 5), (0, 6))
    nxt = plan_write_box(other, *nxt_box)
    nxt_voxels = box_voxels(other, *nxt_box)
    nxt_payload = bytes(random_bytes(rng, 16 * len(nxt_voxels)))
    before = bytearray(mem)
    res = run_write(mem, [(desc.fields(), payload), (nxt.fields(), nxt_payload)],
                    outstanding=3, seed=seed, stall=0.3, error_ranges=[(bad + 16, bad + 32)])
    assert res["status"][0] == (Status.BUS_ERROR, bad, len(voxels))
    assert res["status"][1] == (Status.OK, 0, len(nxt_voxels))
    model = res["model"]
    assert model.idle() and model.write_done == len(model.writes)
    err_cycle = next(c for c, resp in res["b"] if resp & 2)
    first = [c for c, _, _ in res["aw"][:len(model.writes) - len(nxt.bursts())]]
    assert len([c for c in first if c > err_cycle]) <= 1
    assert [len(b) for b in res["w"]] == [n for _, _, n in res["aw"]]
    # Bursts that went out were written (except the failing beat's range); the next command's
    # box is written in full.
    issued = sum(n for _, _, n in res["aw"][:len(first)])
    expect = ref_write(before, voxels, payload, 1, 8, beats=issued)
    expect[bad + 16:bad + 32] = before[bad + 16:bad + 32]
    expect = ref_write(expect, nxt_voxels, nxt_payload, 0, 8)
    assert mem == expect


def test_decerr_and_exokay_responses():
    """DECERR on a burst's B is a bus error like SLVERR (address of that burst, every beat
    taken); EXOKAY is not an error."""
    fmap = FeatureMap(0x300, 8, (1, 6, 5))
    mem = bytearray(fmap.base + fmap.size)
    box = ((0, 1), (0, 1), (0, 6), (0, 4))
    desc = plan_write_box(fmap, *box)
    payload = bytes(range(16)) * 24
    res = run_write(mem, [(desc.fields(), payload)] * 2, seed=9, stall=0.3,
                    slave=FaultyBMemory,
                    slave_kwargs={"bresp": {2: RESP_DECERR, 7: RESP_EXOKAY}})
    assert res["status"][0] == (Status.BUS_ERROR, desc.bursts()[2][0], 24)
    assert res["status"][1] == (Status.OK, 0, 24)
    assert res["model"].idle() and res["model"].write_done == len(res["model"].writes)


PAD = ["d_pre", "d_post", "h_pre", "h_post", "w_pre", "w_post"]
BAD = [*[(name, 1) for name in PAD], ("last_lanes", 0), ("last_lanes", 9), ("last_lanes", 15),
       ("addr", 0x148), ("stride_g", 0x11), ("stride_h", 0x14), ("groups", 0), ("d_len", 0)]


def test_bad_commands_take_nothing():
    """Padding, ``last_lanes`` outside 1..8 and the walker's bad cases: BAD_COMMAND with the
    command's address, no beat taken, no burst, memory untouched; the next good command
    works."""
    fmap = FeatureMap(0x100, 8, (2, 2, 3))
    rng = np.random.default_rng(7)
    mem = random_bytes(rng, 0x400)
    box = ((0, 1), (0, 2), (0, 2), (1, 2))
    good = plan_write_box(fmap, *box, merge=False).fields()
    voxels = box_voxels(fmap, *box)
    payload = bytes(random_bytes(rng, 16 * len(voxels)))
    jobs = []
    for name, value in BAD:
        jobs += [(good | {name: value}, payload), (good, payload)]
    before = bytearray(mem)
    res = run_write(mem, jobs, seed=7, stall=0.2)
    for i, (fields, _) in enumerate(jobs):
        if i % 2 == 0:
            assert res["status"][i] == (Status.BAD_COMMAND, fields["addr"], 0), BAD[i // 2]
        else:
            assert res["status"][i] == (Status.OK, 0, len(voxels))
    assert len(res["aw"]) == len(BAD) * len(plan_write_box(fmap, *box, merge=False).bursts())
    assert mem == ref_write(before, voxels, payload, 0, 8)


@pytest.mark.parametrize("aw", [32, 64])
def test_address_overflow(aw):
    """The bursts below ``2**addr_width`` are written and their beats taken; the burst at the top
    is not issued and its beats are not taken; OVERFLOW with the wrapped address 0."""
    top = 1 << aw
    mem = SparseMemory()
    cmd = {"addr": top - 0x40, "stride_g": 0, "stride_d": 0, "stride_h": 0, "groups": 1,
           "d_pre": 0, "d_len": 1, "d_post": 0, "h_pre": 0, "h_len": 1, "h_post": 0,
           "w_pre": 0, "w_len": 8, "w_post": 0, "last_lanes": 8}
    payload = bytes(range(128))
    res = run_write(mem, [(cmd, payload), (cmd | {"w_len": 2}, payload[64:96])], aw=aw,
                    seed=aw, stall=0.2)
    assert res["status"] == [(Status.OVERFLOW, 0, 4), (Status.OK, 0, 2)]
    assert [(a, n) for _, a, n in res["aw"]] == [(top - 0x40, 4), (top - 0x40, 2)]
    assert mem[top - 0x40:top] == payload[64:96] + payload[32:64]
    assert all(top - 0x40 <= a < top for a in mem)


def test_status_held_blocks_next_command():
    """The next command is accepted only after the previous status handshake."""
    fmap = FeatureMap(0, 8, (1, 2, 4))
    mem = bytearray(fmap.size)
    box = ((0, 1), (0, 1), (0, 2), (1, 3))
    payload = bytes(range(96))
    res = run_write(mem, [(plan_write_box(fmap, *box).fields(), payload)] * 4, seed=8,
                    stall=0.3)
    assert [s[0] for s in res["status"]] == [Status.OK] * 4
    for i in range(3):
        assert res["accepted"][i + 1] > res["status_cycles"][i]


@pytest.mark.parametrize(("kwargs", "exc", "match"), [
    ({"outstanding": 0}, ValueError, "outstanding"),
    ({"outstanding": 65}, ValueError, "outstanding"),
    ({"outstanding": 2.0}, TypeError, "outstanding"),
    ({"addr_width": 65}, ValueError, "addr_width"),
    ({"addr_width": False}, TypeError, "addr_width"),
])
def test_bad_parameters(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        AxiDmaWrite(**kwargs)
