"""The layer engine's pool pass (:mod:`fcircnn.hw.engine_pool`) on Amaranth's simulator against
the Python walk (:func:`fcircnn.arch.walk.pool_boxes`): per slot group one read box and one
write box in order, the read beats through the post chain into the write, with random
back-pressure everywhere; a failing transfer ends the pass with its status; outside a pass every
conv-side port passes through unchanged."""

from __future__ import annotations

import random
import zlib
from collections import deque
from dataclasses import replace

import pytest
from amaranth.hdl import Value
from amaranth.sim import Simulator
from engine_bench import AW, Dma, box_beats, pool_cases, reports, start

from fcircnn.arch.descriptor import region_code
from fcircnn.arch.walk import pool_boxes
from fcircnn.hw.axi_dma_box import Status
from fcircnn.hw.engine_pool import EnginePoolPass

SIZE = (8, 8, 8)


def slots_of(data: int) -> list[dict]:
    """The 8 complex int8 slots of a 128-bit beat."""
    out = []
    for s in range(8):
        re, im = (data >> 16 * s) & 0xFF, (data >> (16 * s + 8)) & 0xFF
        out.append((re - 256 if re > 127 else re, im - 256 if im > 127 else im))
    return out


def run(case, *, seed=0, stall=0.3, fail=None, lanes=1, surplus=0):
    """Run a pool descriptor on ``lanes`` lanes; each lane's CMaxPool (lane 0: the post chain)
    is a FIFO model that keeps the first beats of each map (as many as the pooled map has, and
    ``surplus`` more: a damaged descriptor's pooling that makes more than its write box takes)
    and drops the rest. ``fail``: ``("read" | "write", group, status)``. Returns the (read, write)
    box pairs, per lane its read and write DMA models, the beats read (by ``(group, beat)``),
    the failure reports, ``done`` pulses and the configurations seen."""
    dut = EnginePoolPass(addr_width=AW, max_size=SIZE, lanes=lanes)
    rng = random.Random(seed)
    pairs = list(pool_boxes(case.desc))
    data = {}
    status = fail[2] if fail else Status.OK
    rds, wrs = [], []
    for k in range(lanes):
        # Lane k moves groups k, k + lanes, ...: its n-th box is group n*lanes + k.
        def beat(n, b, k=k):
            return data.setdefault((n * lanes + k, b), rng.getrandbits(128))

        def at(kind, k=k):
            if not fail or fail[0] != kind or fail[1] % lanes != k:
                return None
            return fail[1] // lanes

        sfx = "" if k == 0 else str(k)
        rds.append(Dma(getattr(dut, f"rd{sfx}_cmd"), getattr(dut, f"rd{sfx}_status"),
                       data=getattr(dut, f"rd{sfx}_data"), rng=rng, stall=stall, beat=beat,
                       fail_at=at("read"), fail_status=status))
        wrs.append(Dma(getattr(dut, f"wr{sfx}_cmd"), getattr(dut, f"wr{sfx}_status"),
                       sink=getattr(dut, f"wr{sfx}_data"), rng=rng, stall=stall,
                       fail_at=at("write"), fail_status=status))
    fails, done, shifts = [], [], set()

    def chain(k):
        i, o = (dut.post_i, dut.post_o) if k == 0 else (getattr(dut, f"pool{k}_i"),
                                                        getattr(dut, f"pool{k}_o"))

        async def process(ctx):
            fifo, b, group = deque(), 0, k
            if k == 0:
                # The drain's post-chain input carries junk during a pass: the pass must drive
                # every field the bypassed CBN and the quantizer use (acc, and shift 0).
                junk = Value.cast(dut.conv_post_i.payload)
                ctx.set(junk, rng.getrandbits(len(junk)))
            while True:
                ready = len(fifo) < 4 and rng.random() >= stall
                ctx.set(i.ready, ready)
                if fifo:
                    ctx.set(o.payload, fifo[0])
                ctx.set(o.valid, bool(fifo))
                _, _, iv, ip, ov, orr = await ctx.tick().sample(i.valid, i.payload, o.valid,
                                                                o.ready)
                if ov and orr:
                    fifo.popleft()
                if iv and ready:
                    n_in, n_out = (box_beats(x) for x in pairs[min(group, len(pairs) - 1)])
                    if k == 0:
                        slot = [{"re": int(ip[s].acc.re), "im": int(ip[s].acc.im)}
                                for s in range(8)]
                        shifts.update((int(ip[s].shift.re), int(ip[s].shift.im))
                                      for s in range(8))
                    else:
                        slot = [{"re": int(ip[s].re), "im": int(ip[s].im)} for s in range(8)]
                    if b < n_out + surplus:
                        fifo.append(slot)
                    b += 1
                    if b == n_in:
                        b, group = 0, group + lanes

        return process

    monitor = reports(dut, fails, done)
    cfg = []

    async def bench(ctx):
        await start(ctx, dut.ctl, case.desc)
        await ctx.tick()
        cfg.append(ctx.get(dut.post_cfg))
        cfg.append([ctx.get(getattr(dut, f"pool{k}_cfg")) for k in range(1, lanes)])
        for _ in range(100_000):
            await ctx.tick()
            if done:
                break
        for _ in range(20):
            await ctx.tick()
        cfg.append(bool(ctx.get(dut.active)))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    for p in (*(d.run for d in rds + wrs), *(chain(k) for k in range(lanes)), monitor):
        sim.add_process(p)
    sim.add_testbench(bench)
    sim.run()
    assert shifts <= {(0, 0)}, f"the pool pass fed the chain shifts {shifts}"
    return pairs, rds, wrs, data, fails, done, cfg


def three_groups(case):
    """``case`` with three input slot groups (an odd last group: lane 0 alone)."""
    return replace(case.desc, in_slots=24, out_slots=20)


@pytest.mark.parametrize("lanes", [1, 2, 4])
@pytest.mark.parametrize("case", pool_cases(), ids=str)
def test_the_pool_pass_moves_every_group_through_the_chain(case, lanes):
    pairs, rds, wrs, data, fails, done, (cfg, cfgs, active) = run(
        case, seed=zlib.crc32(case.name.encode()), lanes=lanes)
    assert not fails and done == [1] and not active
    _check_lanes(pairs, rds, wrs, data, lanes)
    # CBN and CReLU bypassed, CMaxPool on the whole map; the other lanes' CMaxPools the same.
    assert cfg.cbn.bypass and cfg.crelu.bypass and not cfg.pool.bypass
    assert [int(cfg.pool.size[a]) for a in range(3)] == list(case.desc.in_shape)
    assert [int(cfg.pool.window[a]) for a in range(3)] == list(case.desc.pool_window)
    for cfg1 in cfgs:
        assert not cfg1.bypass and int(cfg1.groups) == 1
        for a in range(3):
            assert (int(cfg1.size[a]), int(cfg1.window[a]), int(cfg1.stride[a]),
                    int(cfg1.padding[a])) == (case.desc.in_shape[a], case.desc.pool_window[a],
                                              case.desc.pool_stride[a],
                                              case.desc.pool_padding[a])


def _check_lanes(pairs, rds, wrs, data, lanes):
    """Lane k read and wrote the boxes of groups k, k + lanes, ... in order, each pooled map
    its own group's beats."""
    for k in range(lanes):
        mine = list(range(k, len(pairs), lanes))
        assert rds[k].boxes == [pairs[g][0] for g in mine]
        assert wrs[k].boxes == [pairs[g][1] for g in mine]
        # in the input's and the output's regions (the DMAs check them)
        assert set(rds[k].regions) <= {region_code("in")}
        assert set(wrs[k].regions) <= {region_code("out")}
        for g, beats in zip(mine, wrs[k].written, strict=True):
            assert beats == [data[g, b] for b in range(box_beats(pairs[g][1]))]


def test_two_lanes_with_an_odd_last_group():
    """Three slot groups on two lanes: groups 0 and 1 at once, then group 2 on lane 0 alone
    (the last one writing only its 4 live slots)."""
    case = max(pool_cases(), key=lambda c: c.desc.in_slots)
    case = replace(case, desc=three_groups(case))
    pairs, rds, wrs, data, fails, done, _ = run(case, seed=11, lanes=2)
    assert not fails and done == [1]
    assert len(pairs) == 3 and pairs[2][1].last_lanes == 4
    _check_lanes(pairs, rds, wrs, data, 2)


def test_four_lanes_with_fewer_groups_than_lanes():
    """Three slot groups on four lanes: one step, lane 3 sitting it out (no transfer)."""
    case = max(pool_cases(), key=lambda c: c.desc.in_slots)
    case = replace(case, desc=three_groups(case))
    pairs, rds, wrs, data, fails, done, _ = run(case, seed=13, lanes=4)
    assert not fails and done == [1]
    assert rds[3].boxes == [] and wrs[3].boxes == []
    _check_lanes(pairs, rds, wrs, data, 4)


@pytest.mark.parametrize("lanes", [1, 2, 4])
def test_pooled_voxels_past_the_write_box_are_dropped(lanes):
    """A damaged descriptor whose pooling makes every read beat a voxel (a read box larger than
    its pooled write box): each write box takes its first beats, the rest are dropped once its
    status is in, the reads drain and the pass ends (it used to stall its reads for ever).
    Later steps' maps may start with the previous step's surplus, still in its region."""
    case = max(pool_cases(), key=lambda c: c.desc.in_slots)
    case = replace(case, desc=three_groups(case))
    pairs, rds, wrs, data, fails, done, (_, _, active) = run(case, seed=17, lanes=lanes,
                                                             surplus=1 << 20)
    assert box_beats(pairs[0][0]) > 4 * box_beats(pairs[0][1]) + 4  # more than the FIFO holds
    assert not fails and done == [1] and not active
    for k in range(lanes):
        mine = list(range(k, len(pairs), lanes))
        assert rds[k].boxes == [pairs[g][0] for g in mine]
        assert wrs[k].boxes == [pairs[g][1] for g in mine]
        if mine:  # the first step's maps are exact: the first beats of the group's read
            assert wrs[k].written[0] == [data[k, b] for b in range(box_beats(pairs[k][1]))]


def test_the_pool_pass_refuses_other_lane_counts():
    for lanes in (0, 5, True, 2.0):
        with pytest.raises(ValueError, match=r"lanes must be 1\.\.4"):
            EnginePoolPass(addr_width=AW, max_size=SIZE, lanes=lanes)


@pytest.mark.parametrize("lanes", [1, 2, 4])
@pytest.mark.parametrize(("which", "group", "status"), [("read", 1, Status.BUS_ERROR),
                                                        ("write", 1, Status.OVERFLOW),
                                                        ("read", 0, Status.BAD_COMMAND),
                                                        ("write", 2, Status.BUS_ERROR)])
def test_a_failing_transfer_ends_the_pass_with_its_status(which, group, status, lanes):
    """The failing group's step completes (its other transfers too, a failed read's write box
    with junk beats), then the pass ends with the failure's status and address."""
    case = max(pool_cases(), key=lambda c: c.desc.in_slots)
    case = replace(case, desc=three_groups(case))
    pairs = list(pool_boxes(case.desc))
    _, rds, wrs, _, fails, done, (_, _, active) = run(case, fail=(which, group, status),
                                                      lanes=lanes)
    assert done == [1] and not active
    step_end = (group // lanes + 1) * lanes  # groups moved: the failing group's whole step
    moved = list(range(min(step_end, len(pairs))))
    assert sorted(b.addr for d in rds for b in d.boxes) == [pairs[g][0].addr for g in moved]
    assert sorted(b.addr for d in wrs for b in d.boxes) == [pairs[g][1].addr for g in moved]
    box = (pairs[group][0] if which == "read" else pairs[group][1])
    code = status.value | (4 if which == "write" else 0)
    assert fails == [(code, box.addr + 16)]
    # After a read failure the write box is still completed (junk beats).
    k = group % lanes
    assert len(wrs[k].written[group // lanes]) == box_beats(pairs[group][1])


def test_outside_a_pass_the_conv_ports_pass_through():
    dut = EnginePoolPass(addr_width=AW, max_size=SIZE)
    rng = random.Random(7)
    ins = [(dut.conv_rd_cmd.valid, dut.rd_cmd.valid), (dut.conv_rd_cmd.payload, dut.rd_cmd.payload),
           (dut.rd_cmd.ready, dut.conv_rd_cmd.ready), (dut.rd_data.valid, dut.conv_rd_data.valid),
           (dut.rd_data.payload, dut.conv_rd_data.payload),
           (dut.conv_rd_data.ready, dut.rd_data.ready),
           (dut.rd_status.payload, dut.conv_rd_status.payload),
           (dut.conv_wr_cmd.payload, dut.wr_cmd.payload),
           (dut.conv_wr_data.valid, dut.wr_data.valid),
           (dut.conv_wr_data.payload, dut.wr_data.payload),
           (dut.wr_data.ready, dut.conv_wr_data.ready),
           (dut.conv_wr_status.ready, dut.wr_status.ready),
           (dut.conv_post_i.valid, dut.post_i.valid), (dut.post_i.ready, dut.conv_post_i.ready),
           (dut.conv_post_i.payload, dut.post_i.payload),
           (dut.post_o.valid, dut.conv_post_o.valid), (dut.conv_post_o.ready, dut.post_o.ready),
           (dut.post_o.payload, dut.conv_post_o.payload),
           (dut.conv_post_cfg, dut.post_cfg)]

    async def bench(ctx):
        for _ in range(50):
            values = []
            for src, _ in ins:
                v = rng.getrandbits(len(Value.cast(src)))
                ctx.set(Value.cast(src), v)
                values.append(v)
            for (_, dst), v in zip(ins, values, strict=True):
                got = ctx.get(Value.cast(dst))
                assert got == v
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
