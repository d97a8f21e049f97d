"""Box walker of the AXI DMA (:class:`fcircnn.hw.axi_dma_box.BoxWalker`) on its own.

The reference (:func:`ref_segments`) is written here from the documented contract: rows walked
group-major, then ``d``, ``h``; a padded row is one zero run of ``w`` total beats, an in-map row
is ``w_pre`` zeros, the in-map voxels as INCR bursts (``min(remaining, 256, beats to the next
4 KB page)``), ``w_post`` zeros. Planner-built boxes are also expanded beat by beat and compared
with :func:`fcircnn.models.layout.ncdhw8_address`, which checks whole-row folding.
"""

import random

import pytest
from amaranth.hdl import Shape
from amaranth.sim import Simulator

from fcircnn.gen.dma_plan import FeatureMap, plan_block, plan_read_box
from fcircnn.hw.axi_dma_box import (
    BEAT_BYTES,
    COUNT_WIDTH,
    BoxWalker,
    Status,
    box_layout,
    check_addr_width,
    segment_layout,
    status_layout,
)
from fcircnn.sim.tb_axi_model import box_beat_addresses

PAGE = 4096
FIELDS = ("addr", "stride_g", "stride_d", "stride_h", "groups", "d_pre", "d_len", "d_post",
          "h_pre", "h_len", "h_post", "w_pre", "w_len", "w_post", "last_lanes")


def status_of(value):
    return value if isinstance(value, Status) else Status(int(value))


def seg(burst, addr, beats, last, last_group, status=Status.OK):
    """A normalised segment: zero runs carry no address, error segments no group flag."""
    if status != Status.OK:
        return (status, addr, 0, True, None)
    return ("burst" if burst else "zero", addr if burst else None, beats, bool(last),
            bool(last_group))


def ref_segments(c, aw, window=None):
    """The segments of box command ``c`` (a dict of :func:`box_layout` fields) per contract;
    ``window``: its (first, last) page, every page if ``None``."""
    limit = 1 << aw
    lo, hi = window or (0, (limit // PAGE) - 1)
    totals = [c[f"{x}_pre"] + c[f"{x}_len"] + c[f"{x}_post"] for x in "dhw"]
    if (any(c[k] % BEAT_BYTES for k in ("addr", "stride_g", "stride_d", "stride_h"))
            or c["groups"] == 0 or 0 in totals):
        return [seg(0, c["addr"], 0, 1, 0, Status.BAD_COMMAND)]
    dt, ht, wt = totals
    out = []

    def padded(axis, i):
        return not c[f"{axis}_pre"] <= i < c[f"{axis}_pre"] + c[f"{axis}_len"]

    for g in range(c["groups"]):
        lg = g == c["groups"] - 1
        for d in range(dt):
            for h in range(ht):
                if padded("d", d) or padded("h", h) or c["w_len"] == 0:
                    out.append(seg(0, None, wt, 0, lg))
                    continue
                a = (c["addr"] + g * c["stride_g"] + (d - c["d_pre"]) * c["stride_d"]
                     + (h - c["h_pre"]) * c["stride_h"])
                if c["w_pre"]:
                    out.append(seg(0, None, c["w_pre"], 0, lg))
                n = c["w_len"]
                while n:
                    k = min(n, 256, (PAGE - a % PAGE) // BEAT_BYTES)
                    if a + k * BEAT_BYTES > limit:
                        return [*out, seg(0, a % limit, 0, 1, lg, Status.OVERFLOW)]
                    if not lo <= a // PAGE <= hi:
                        return [*out, seg(0, a, 0, 1, lg, Status.OVERFLOW)]
                    out.append(seg(1, a, k, 0, lg))
                    a += k * BEAT_BYTES
                    n -= k
                if c["w_post"]:
                    out.append(seg(0, None, c["w_post"], 0, lg))
    out[-1] = (*out[-1][:3], True, out[-1][4])
    return out


def in_map_rows_without_pre(c):
    """Rows that cost the walker one extra cycle (no leading padding)."""
    if c["w_pre"] or not c["w_len"]:
        return 0
    return c["groups"] * c["d_len"] * c["h_len"]


def expand(segments):
    """Beats of a segment list: ``None`` for a zero beat, else the beat's byte address."""
    beats = []
    for kind, addr, n, _, _ in segments:
        beats += [None] * n if kind == "zero" else [addr + BEAT_BYTES * i for i in range(n)]
    return beats


def box_beats(fmap, groups, d, h, w):
    """Beat addresses of a read box in NC/8DHW8 order, ``None`` where padded."""
    return [addr for _, addr in box_beat_addresses(fmap, groups, d, h, w)]


def full(fields):
    return {k: 0 for k in FIELDS} | {"last_lanes": 8} | fields


def run_walker(cmds, *, aw=40, seed=0, ready_p=0.7, gap=3, abort_after=None, max_cycles=60_000,
               windows=None, regions=None):
    """Feed ``cmds`` (field dicts) to a BoxWalker under random back-pressure.

    Returns (segments per command, accept cycle per command, (cycle, segment) handshakes).
    ``abort_after`` = (command index, segments) raises ``abort`` once that many segments of
    that command were taken, until its last segment. ``windows``: per command its (first,
    last) page, set while the walker is idle (every page if ``None``). ``regions``: the
    walker's region windows, (first, last) pages, set once (a walker without if ``None``).
    """
    dut = BoxWalker(aw, regions=len(regions or ()))
    rng = random.Random(seed)
    accepted, taken = [], []
    state = {"done": False, "abort": False}

    async def producer(ctx):
        cycle = 0
        for k, (lo, hi) in enumerate(regions or ()):
            ctx.set(dut.regions[k].lo, lo)
            ctx.set(dut.regions[k].hi, hi)
        for i, c in enumerate(cmds):
            for _ in range(rng.randrange(gap + 1)):
                await ctx.tick()
                cycle += 1
            if windows is not None:  # static while a command runs: set once the last ended
                while len(state.get("ended", ())) < i:
                    await ctx.tick()
                    cycle += 1
                ctx.set(dut.window.lo, windows[i][0])
                ctx.set(dut.window.hi, windows[i][1])
            ctx.set(dut.cmd.payload, c)
            ctx.set(dut.cmd.valid, 1)
            while True:
                _, _, ready = await ctx.tick().sample(dut.cmd.ready)
                cycle += 1
                if ready:
                    accepted.append(cycle)
                    break
            ctx.set(dut.cmd.valid, 0)

    async def consumer(ctx):
        cycle, held = 0, None
        per_cmd = [[]]
        while True:
            ready = int(rng.random() < ready_p)
            ctx.set(dut.seg.ready, ready)
            if abort_after is not None:
                i, k = abort_after
                ctx.set(dut.abort, len(per_cmd) - 1 == i and len(per_cmd[-1]) >= k)
            _, _, valid, p = await ctx.tick().sample(dut.seg.valid, dut.seg.payload)
            cycle += 1
            assert cycle < max_cycles, "walker hang"
            if not valid:
                if abort_after is None:
                    assert held is None, "valid dropped before the handshake"
                continue
            s = seg(p.burst, int(p.addr), int(p.beats), p.last, p.last_group,
                    status_of(p.status))
            if held is not None and abort_after is None:
                assert s == held, "payload changed while waiting for ready"
            held = None if ready else s
            if ready:
                taken.append((cycle, s))
                per_cmd[-1].append(s)
                if s[3]:
                    state.setdefault("ended", []).append(cycle)
                    per_cmd.append([])
                    if len(per_cmd) > len(cmds):
                        break
        state["segments"] = per_cmd[:-1]

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(producer, background=True)
    sim.add_testbench(consumer)
    sim.run()
    return state["segments"], accepted, taken


def random_raw_box(rng, aw):
    """A random valid command: aligned addresses near 4 KB pages and the top of the address
    space, small and long rows, padding on every axis."""
    top = 1 << aw

    def aligned(limit):
        return rng.randrange(limit // BEAT_BYTES) * BEAT_BYTES

    page = rng.randrange(1, top // PAGE - 64)
    addr = page * PAGE - BEAT_BYTES * rng.randrange(0, 40)
    fields = {
        "addr": addr, "stride_g": aligned(1 << 16), "stride_d": aligned(1 << 14),
        "stride_h": rng.choice([0, BEAT_BYTES, aligned(1 << 12)]),
        "groups": rng.randint(1, 2), "last_lanes": rng.randint(1, 8),
    }
    for axis, n in (("d", 3), ("h", 3), ("w", rng.choice([4, 40, 300, 600]))):
        fields[f"{axis}_pre"] = rng.choice([0, 0, 1, 2])
        fields[f"{axis}_len"] = rng.choice([0, 1, rng.randint(1, n)])
        fields[f"{axis}_post"] = rng.choice([0, 0, 1, 3])
        if fields[f"{axis}_pre"] + fields[f"{axis}_len"] + fields[f"{axis}_post"] == 0:
            fields[f"{axis}_len"] = 1
    return full(fields)


@pytest.mark.parametrize(("aw", "seed"), [(40, 0), (32, 1), (64, 2)])
def test_random_boxes_match_reference(aw, seed):
    """Random commands (padding, empty axes, 256-beat and 4 KB splits) under random
    back-pressure: every segment, in order, equals the reference."""
    rng = random.Random(seed)
    cmds = [random_raw_box(rng, aw) for _ in range(10)]
    got, _, _ = run_walker(cmds, aw=aw, seed=seed)
    for c, segments in zip(cmds, got, strict=True):
        assert segments == ref_segments(c, aw), c


def planner_cases(seed, n):
    rng = random.Random(seed)
    cases = []
    for _ in range(n):
        slots = rng.randint(1, 24)
        shape = tuple(rng.randint(1, 6) for _ in range(3))
        groups = -(-slots // 8)
        g0 = rng.randrange(groups)
        box = [(g0, rng.randint(1, groups - g0))]
        for size in shape:
            if rng.random() < 0.4:
                box.append((0, size))                       # whole axis: row folding
            else:
                box.append((rng.randint(-2, size), rng.randint(1, size + 3)))
        base = rng.choice([PAGE - 16 * rng.randrange(64), 16 * rng.randrange(1 << 12)])
        cases.append((FeatureMap(base, slots, shape), tuple(box), rng.random() < 0.7))
    return cases


@pytest.mark.parametrize("seed", [3, 4])
def test_planner_boxes_beat_addresses(seed):
    """Planner descriptors (padded borders, folded whole rows and planes, maps across 4 KB
    pages): the walker's segments equal the reference and the planner's model, and expanded
    beat by beat they address exactly the box's voxels (``ncdhw8_address``), zeros elsewhere."""
    cases = planner_cases(seed, 12)
    descs = [plan_read_box(fmap, *box, merge=merge) for fmap, box, merge in cases]
    assert any(d.w.length > fmap.shape[2] for d, (fmap, _, _) in zip(descs, cases, strict=True))
    got, _, _ = run_walker([d.fields() for d in descs], seed=seed)
    for (fmap, box, _), desc, segments in zip(cases, descs, got, strict=True):
        assert segments == ref_segments(desc.fields(), 40)
        model = [seg(s.is_burst, s.addr, s.beats, 0, s.last_group) for s in desc.segments()]
        assert [s[:3] + s[4:] for s in segments] == [s[:3] + s[4:] for s in model]
        assert expand(segments) == box_beats(fmap, *box)
        for kind, addr, n, _, _ in segments:
            if kind == "burst":
                assert 1 <= n <= 256 and addr // PAGE == (addr + 16 * n - 1) // PAGE


def test_whole_rows_fold_into_long_bursts():
    """A box of whole planes folds into one contiguous run: 256-beat bursts split only at 4 KB
    pages (16 bursts of 1600 beats at an odd page offset)."""
    fmap = FeatureMap(0x10_0F00, 8, (4, 20, 20))
    desc = plan_read_box(fmap, (0, 1), (0, 4), (0, 20), (0, 20))
    assert (desc.w.length, desc.h.total, desc.d.total) == (1600, 1, 1)
    (segments,), _, _ = run_walker([desc.fields()], ready_p=0.8)
    assert segments == ref_segments(desc.fields(), 40)
    assert [s[2] for s in segments] == [16] + [256] * 6 + [48]
    assert expand(segments) == box_beats(fmap, (0, 1), (0, 4), (0, 20), (0, 20))


def test_extreme_counts():
    """Count fields at their maximum (zero runs of 3 x 65535 beats, 65535-beat rows) and a
    contiguous block split into maximal rows."""
    big = (1 << COUNT_WIDTH) - 1
    cmds = [
        full({"addr": 0x7000, "groups": 1, "d_len": 1, "h_len": 1, "w_pre": big, "w_len": big,
              "w_post": big}),
        full({"addr": 0x7000, "groups": 1, "d_pre": 1, "h_len": 1, "w_pre": big,
              "w_len": big, "w_post": big}),
        *[d.fields() for d in plan_block(0x1230, ((1 << 15) + 100) * 16)],
    ]
    got, _, _ = run_walker(cmds, ready_p=1.0)
    assert len(cmds) == 4
    for c, segments in zip(cmds, got, strict=True):
        assert segments == ref_segments(c, 40)
    assert got[1] == [("zero", None, 3 * big, True, True)]


@pytest.mark.parametrize("aw", [32, 64])
def test_overflow_stops_the_box(aw):
    """A burst that would pass ``2**addr_width`` ends the box with OVERFLOW at the low bits of
    the first unreachable address; the bursts before it are emitted, nothing after."""
    top = 1 << aw
    cmds = [
        # 4 beats below the top, then the next row would start at 2**aw (reported as 0).
        full({"addr": top - 0x40, "groups": 1, "d_len": 1, "h_len": 1, "w_len": 8}),
        # Row stride carries the third row past the top: rows 0 and 1 are read.
        full({"addr": top - 0x3000, "stride_h": 0x1800, "groups": 1, "d_len": 1, "h_len": 3,
              "h_post": 2, "w_len": 4, "w_post": 1}),
        # Group stride wraps past the top; reported address is the wrapped low bits.
        full({"addr": top - 0x1000, "stride_g": top - 0x800, "groups": 2, "d_len": 1,
              "h_len": 1, "w_len": 2}),
        # A following good command is served normally.
        full({"addr": 0x40, "groups": 1, "d_len": 1, "h_len": 1, "w_len": 3}),
    ]
    got, _, _ = run_walker(cmds, aw=aw, seed=aw)
    for c, segments in zip(cmds, got, strict=True):
        assert segments == ref_segments(c, aw)
    assert got[0] == [seg(1, top - 0x40, 4, 0, 1), seg(0, 0, 0, 1, 1, Status.OVERFLOW)]
    assert got[1][-1] == seg(0, 0, 0, 1, 1, Status.OVERFLOW)
    assert got[2][-1] == seg(0, top - 0x1800, 0, 1, 1, Status.OVERFLOW)


@pytest.mark.parametrize(("aw", "seed"), [(40, 5), (32, 6)])
def test_windows_stop_the_first_burst_outside(aw, seed):
    """Random boxes with random windows: around each box's pages, exactly its pages, one page
    short at either end, or far away. The bursts inside are emitted; the first outside ends
    the box with OVERFLOW at its address, the reference's segments exactly, under
    back-pressure."""
    rng = random.Random(seed)
    cmds, windows = [], []
    for i in range(24):
        c = random_raw_box(rng, aw)
        pages = [a // PAGE for a in expand(ref_segments(c, aw)) if a is not None]
        first, last = (min(pages), max(pages)) if pages else (0, 0)
        kinds = [(first, last), (first + 1, last), (first, last - 1),
                 (max(0, first - 3), last + 2), (last + 1, last + 9), (0, (1 << (aw - 12)) - 1)]
        windows.append(kinds[i % len(kinds)])
        cmds.append(c)
    got, _, _ = run_walker(cmds, aw=aw, seed=seed, windows=windows)
    refused = 0
    for c, w, segments in zip(cmds, windows, got, strict=True):
        assert segments == ref_segments(c, aw, w), (c, w)
        refused += segments[-1][0] == Status.OVERFLOW
    assert 4 <= refused < len(cmds)  # both outcomes exercised


def test_a_burst_at_the_window_limits_is_issued():
    """A box on exactly the window's first and last page runs whole; one byte-page beyond at
    either end is refused at the burst that leaves it."""
    box = full({"addr": 5 * PAGE - 0x40, "groups": 1, "d_len": 1, "h_len": 1, "w_len": 8})
    cmds = [box, box, box]
    windows = [(4, 5), (5, 5), (4, 4)]
    got, _, _ = run_walker(cmds, windows=windows, seed=9)
    assert got[0] == [seg(1, 5 * PAGE - 0x40, 4, 0, 1), seg(1, 5 * PAGE, 4, 1, 1)]
    assert got[1] == [seg(0, 5 * PAGE - 0x40, 0, 1, 1, Status.OVERFLOW)]
    assert got[2] == [seg(1, 5 * PAGE - 0x40, 4, 0, 1),
                      seg(0, 5 * PAGE, 0, 1, 1, Status.OVERFLOW)]


@pytest.mark.parametrize(("aw", "seed"), [(40, 7), (32, 8)])
def test_a_command_s_region_code_chooses_its_window(aw, seed):
    """A walker with four region windows: each command's code picks ``window`` (0) or
    ``regions[code - 1]``; random boxes with random codes and windows around, on or off their
    pages, under back-pressure, give the reference's segments for the window chosen; a code
    past the regions keeps ``window``."""
    rng = random.Random(seed)
    top = (1 << (aw - 12)) - 1
    cmds = [random_raw_box(rng, aw) for _ in range(30)]
    spans = []
    for c in cmds:
        pages = [a // PAGE for a in expand(ref_segments(c, aw)) if a is not None]
        spans.append((min(pages), max(pages)) if pages else (1, 1))
    regions = []
    for k in range(4):  # each region on (or one page off) one of the first commands' pages
        first, last = spans[k]
        regions.append([(first, last), (first + 1, last), (first, last - 1),
                        (max(0, first - 2), last + 3)][k])
    windows = [(0, top)] * len(cmds)
    for i, c in enumerate(cmds):
        c["region"] = i % 6  # 5: past the four regions
        if 4 <= i and c["region"] in (1, 2, 3, 4):  # start where its region's box starts
            c["addr"] = cmds[c["region"] - 1]["addr"]
        if i % 7 == 3:
            windows[i] = (spans[i][0] + 1, top)  # window 0 excludes its first page
    got, _, _ = run_walker(cmds, aw=aw, seed=seed, windows=windows, regions=regions)
    refused = 0
    for c, w, segments in zip(cmds, windows, got, strict=True):
        chosen = regions[c["region"] - 1] if c["region"] in (1, 2, 3, 4) else w
        assert segments == ref_segments(c, aw, chosen), (c, chosen)
        refused += segments[-1][0] == Status.OVERFLOW
    assert 3 <= refused < len(cmds)  # both outcomes exercised


def test_region_counts_are_checked():
    from fcircnn.hw.common import never_elaborated

    walker = BoxWalker(40, regions=7)
    never_elaborated(walker)
    assert walker.region_count == 7
    for bad, exc in ((8, ValueError), (-1, ValueError), (1.0, TypeError), (True, TypeError)):
        with pytest.raises(exc, match="regions"):
            BoxWalker(40, regions=bad)


BAD = [("addr", 0x108), ("stride_g", 0x11), ("stride_d", 0x8), ("stride_h", 0x14),
       ("groups", 0), ("d", 0), ("h", 0), ("w", 0)]


def test_bad_commands_yield_one_error_segment():
    """Unaligned address or stride, no group, empty axis: a single BAD_COMMAND ``last``
    segment with ``beats = 0`` and the command's address; the next good command is served."""
    good = full({"addr": 0x100, "stride_g": 0x100, "stride_d": 0x40, "stride_h": 0x20,
                 "groups": 2, "d_pre": 1, "d_len": 1, "h_len": 2, "w_len": 2, "w_post": 1})
    cmds = []
    for name, value in BAD:
        if name in "dhw":
            cmds.append(good | {f"{name}_pre": 0, f"{name}_len": 0, f"{name}_post": 0})
        else:
            cmds.append(good | {name: value})
        cmds.append(good)
    got, _, _ = run_walker(cmds, seed=5)
    for i, (c, segments) in enumerate(zip(cmds, got, strict=True)):
        if i % 2 == 0:
            assert segments == [seg(0, c["addr"], 0, 1, 0, Status.BAD_COMMAND)], c
        else:
            assert segments == ref_segments(good, 40)


def test_throughput_one_segment_per_cycle():
    """With ``ready`` always high: one segment per cycle plus one cycle per in-map row without
    leading padding, and the next command is accepted the cycle after the last segment."""
    rng = random.Random(6)
    cmds = [random_raw_box(rng, 40) for _ in range(6)] + [full({"addr": 3, "groups": 1})]
    got, accepted, taken = run_walker(cmds, ready_p=1.0, gap=0)
    last_cycles = [cycle for cycle, s in taken if s[3]]
    for i, (c, segments) in enumerate(zip(cmds, got, strict=True)):
        assert segments == ref_segments(c, 40)
        overhead = 0 if isinstance(segments[-1][0], Status) else in_map_rows_without_pre(c)
        assert last_cycles[i] - accepted[i] == len(segments) + overhead, i
        if i + 1 < len(cmds):
            assert accepted[i + 1] == last_cycles[i] + 1


@pytest.mark.parametrize("after", [0, 1, 5, 17])
def test_abort_ends_box_with_zero_beat_last(after):
    """``abort`` after ``after`` segments: those are a prefix of the reference, then one
    zero-beat ``last`` segment; the next command runs in full."""
    c = full({"addr": 0xF80, "stride_g": 0x2000, "stride_d": 0x400, "stride_h": 0x100,
              "groups": 2, "d_pre": 1, "d_len": 2, "h_len": 2, "h_post": 1, "w_pre": 1,
              "w_len": 12, "w_post": 2})
    nxt = full({"addr": 0x200, "groups": 1, "d_len": 1, "h_len": 2, "w_len": 3})
    got, _, _ = run_walker([c, nxt], seed=after, abort_after=(0, after))
    ref = ref_segments(c, 40)
    *head, tail = got[0]
    assert head == ref[:after]
    assert tail[0] == "zero" and tail[2] == 0 and tail[3]
    assert got[1] == ref_segments(nxt, 40)


def test_layouts_and_parameters():
    assert check_addr_width(32) is None and check_addr_width(64) is None
    for bad, exc in ((31, ValueError), (65, ValueError), (40.0, TypeError), (True, TypeError)):
        with pytest.raises(exc, match="addr_width"):
            BoxWalker(bad)
    box = box_layout(40)
    assert {name: Shape.cast(box[name].shape).width for name in FIELDS} == {
        "addr": 40, "stride_g": 40, "stride_d": 40, "stride_h": 40, "last_lanes": 4,
        **{name: COUNT_WIDTH for name in FIELDS[4:14]}}
    s = segment_layout(48)
    assert Shape.cast(s["addr"].shape).width == 48
    assert Shape.cast(s["beats"].shape).width == COUNT_WIDTH + 2
    st = status_layout(33)
    assert (Shape.cast(st["addr"].shape).width, st["code"].shape) == (33, Status)
    assert [Status(v) for v in range(4)] == [Status.OK, Status.BAD_COMMAND, Status.OVERFLOW,
                                             Status.BUS_ERROR]
