"""The layer engine's pool pass (:mod:`fcircnn.hw.engine_pool`) on Amaranth's simulator against
the Python walk (:func:`fcircnn.arch.walk.pool_boxes`): per slot group one read box and one
write box in order, the read beats through the post chain into the write, with random
back-pressure everywhere; a failing transfer ends the pass with its status; outside a pass every
conv-side port passes through unchanged."""

from __future__ import annotations

import random
import zlib
from collections import deque

import pytest
from amaranth.hdl import Value
from amaranth.sim import Simulator
from engine_bench import AW, Dma, box_beats, pool_cases, reports, start

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


def run(case, *, seed=0, stall=0.3, fail=None):
    """Run a pool descriptor; the post chain is a FIFO model that keeps the first beats of
    each map (as many as the pooled map has) and drops the rest. ``fail``: ``("read" |
    "write", group, status)``."""
    dut = EnginePoolPass(addr_width=AW, max_size=SIZE)
    rng = random.Random(seed)
    pairs = list(pool_boxes(case.desc))
    data = {}

    def beat(n, k):
        return data.setdefault((n, k), rng.getrandbits(128))

    rd_fail = fail[1] if fail and fail[0] == "read" else None
    wr_fail = fail[1] if fail and fail[0] == "write" else None
    status = fail[2] if fail else Status.OK
    rd = Dma(dut.rd_cmd, dut.rd_status, data=dut.rd_data, rng=rng, stall=stall, beat=beat,
             fail_at=rd_fail, fail_status=status)
    wr = Dma(dut.wr_cmd, dut.wr_status, sink=dut.wr_data, rng=rng, stall=stall,
             fail_at=wr_fail, fail_status=status)
    fails, done, seen, shifts = [], [], [], set()

    async def chain(ctx):
        fifo, k, group = deque(), 0, 0
        # The drain's post-chain input carries junk during a pass: the pass must drive every
        # field the bypassed CBN and the quantizer use (acc, and shift 0).
        junk = Value.cast(dut.conv_post_i.payload)
        ctx.set(junk, rng.getrandbits(len(junk)))
        while True:
            ready = len(fifo) < 4 and rng.random() >= stall
            ctx.set(dut.post_i.ready, ready)
            if fifo:
                ctx.set(dut.post_o.payload, fifo[0])
            ctx.set(dut.post_o.valid, bool(fifo))
            _, _, iv, ip, ov, orr = await ctx.tick().sample(
                dut.post_i.valid, dut.post_i.payload, dut.post_o.valid, dut.post_o.ready)
            if ov and orr:
                fifo.popleft()
            if iv and ready:
                n_in, n_out = (box_beats(b) for b in pairs[min(group, len(pairs) - 1)])
                slot = [{"re": int(ip[s].acc.re), "im": int(ip[s].acc.im)} for s in range(8)]
                shifts.update((int(ip[s].shift.re), int(ip[s].shift.im)) for s in range(8))
                seen.append(slot)
                if k < n_out:
                    fifo.append(slot)
                k += 1
                if k == n_in:
                    k, group = 0, group + 1

    monitor = reports(dut, fails, done)

    cfg = []

    async def bench(ctx):
        await start(ctx, dut.ctl, case.desc)
        await ctx.tick()
        cfg.append(ctx.get(dut.post_cfg))
        for _ in range(100_000):
            await ctx.tick()
            if done:
                break
        for _ in range(20):
            await ctx.tick()
        cfg.append(bool(ctx.get(dut.active)))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    for p in (rd.run, wr.run, chain, monitor):
        sim.add_process(p)
    sim.add_testbench(bench)
    sim.run()
    assert shifts <= {(0, 0)}, f"the pool pass fed the chain shifts {shifts}"
    return pairs, rd, wr, data, fails, done, cfg


@pytest.mark.parametrize("case", pool_cases(), ids=str)
def test_the_pool_pass_moves_every_group_through_the_chain(case):
    pairs, rd, wr, data, fails, done, (cfg, active) = run(case, seed=zlib.crc32(case.name.encode()))
    assert not fails and done == [1] and not active
    assert rd.boxes == [r for r, _ in pairs]
    assert wr.boxes == [w for _, w in pairs]
    for n, beats in enumerate(wr.written):
        assert beats == [data[n, k] for k in range(box_beats(pairs[n][1]))]
    # CBN and CReLU bypassed, CMaxPool on the whole map.
    assert cfg.cbn.bypass and cfg.crelu.bypass and not cfg.pool.bypass
    assert [int(cfg.pool.size[a]) for a in range(3)] == list(case.desc.in_shape)
    assert [int(cfg.pool.window[a]) for a in range(3)] == list(case.desc.pool_window)


@pytest.mark.parametrize(("which", "status"), [("read", Status.BUS_ERROR),
                                               ("write", Status.OVERFLOW),
                                               ("read", Status.BAD_COMMAND)])
def test_a_failing_transfer_ends_the_pass_with_its_status(which, status):
    case = max(pool_cases(), key=lambda c: len(list(pool_boxes(c.desc))))
    pairs = list(pool_boxes(case.desc))
    group = min(1, len(pairs) - 1)
    _, rd, wr, _, fails, done, (_, active) = run(case, fail=(which, group, status))
    assert done == [1] and not active
    assert len(rd.boxes) == len(wr.boxes) == group + 1
    box = (pairs[group][0] if which == "read" else pairs[group][1])
    code = status.value | (4 if which == "write" else 0)
    assert fails == [(code, box.addr + 16)]
    # After a read failure the write box is still completed (zero beats).
    assert len(wr.written[group]) == box_beats(pairs[group][1])


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
