"""The layer engine's loader (:mod:`fcircnn.hw.engine_loader`) on Amaranth's simulator against
the Python walk (:func:`fcircnn.arch.walk.conv_reads`): the same reads in the same order, every
beat routed to its buffer, with random DMA and buffer back-pressure; a failing read ends the
walk with its status. The same for the two loaders of a two-port engine (the input loader's
reads and the weight loader's, each in the walk's order), also with every weight tile split
between them (``FLAG_WSPLIT``) and with every input box split between them
(``FLAG_ISPLIT``), the four loaders of a four-port engine reading every weight tile in
quarters (``FLAG_WQUARTER``), port 3's loader of a four-port engine reading the residual
boxes (beside the second weight halves) in the input loader's stead, and the four loaders of a
four-port engine reading every input box in quarters (``FLAG_IQUARTER``)."""

from __future__ import annotations

import dataclasses
import math
import random
import zlib

import pytest
from amaranth.sim import Simulator
from engine_bench import AW, Dma, box_beats, conv_cases, four_port_cases, minner_cases, start

from fcircnn.arch.descriptor import (
    FLAG_IQUARTER,
    FLAG_ISPLIT,
    FLAG_MINNER,
    FLAG_RESIDUAL,
    FLAG_WQUARTER,
    FLAG_WSPLIT,
    region_code,
)
from fcircnn.arch.ports import (
    ALL_READS,
    INPUT_HALF_READS,
    INPUT_READS,
    RESIDUAL_READS,
    SPLIT_INPUT_READS,
    SPLIT_WEIGHT_READS,
    WEIGHT_HALF_READS,
    WEIGHT_QUARTER_READS,
    WEIGHT_READS,
    PortMap,
)
from fcircnn.arch.walk import READ_KIND_STREAMS, conv_reads, quarters_inputs, splits_inputs
from fcircnn.hw.axi_dma_box import Status
from fcircnn.hw.buffer_input import input_box_layout
from fcircnn.hw.engine_loader import EngineLoader

#: A box layout large enough for every test layer's input box.
IN_BOX = input_box_layout(4, 64, 64, 64)


#: Each split read kind's sink port on the loader.
HALF_SINKS = {"weight_half": "w1_o", "input_half": "in1_o", "weight_quarter1": "w2_o",
              "weight_quarter3": "w3_o", "input_quarter1": "in2_o", "input_quarter3": "in3_o"}


def loader(case, reads=ALL_READS, commands=1, quarters=None, in_quarters=None):
    """The loader of ``case``'s core issuing ``reads``; it honours ``FLAG_WQUARTER`` and
    ``FLAG_IQUARTER`` wherever a four-port engine would (a multiple of four beats per tap,
    of four input slot groups), or as ``quarters`` and ``in_quarters`` say."""
    res = input_box_layout(case.core.out_groups, 64, 64, 64) if case.geometry.residual else None
    if quarters is None:
        quarters = PortMap(4).quarters_weights(case.core.weight_tile_beats(1))
    if in_quarters is None:
        in_quarters = PortMap(4).quarters_inputs(case.core.in_groups)
    return EngineLoader(case.core, case.geometry, in_box=IN_BOX, res_box=res, addr_width=AW,
                        reads=reads, commands=commands, quarters=quarters,
                        in_quarters=in_quarters)


def run(case, *, reads=ALL_READS, seed=0, stall=0.3, fail_at=None,
        fail_status=Status.BUS_ERROR, commands=1):
    """Run ``case``'s descriptor through a loader issuing ``reads`` (with a DMA command queue
    of ``commands``); return the boxes read, the beats each sink took (per transfer, in
    order), the failure reported, whether the loader ended idle and its final
    ``params_ready`` (``None`` without inputs)."""
    dut = loader(case, reads, commands)
    loads_in, loads_w = "input" in reads, "weights" in reads
    rng = random.Random(seed)
    dma = Dma(dut.rd_cmd, dut.rd_status, data=dut.rd_data, rng=rng, stall=stall,
              fail_at=fail_at, fail_status=fail_status, beat=lambda n, k: (n << 16) | k)
    taken = []  # (sink, transfer, beat index)
    fails = []

    async def sinks(ctx):
        sink_ports = {"input": dut.in_o} if loads_in else {}
        if loads_w:
            sink_ports["weights"] = dut.w_o
        for kind, port in HALF_SINKS.items():
            if kind in reads:
                sink_ports[kind] = getattr(dut, port)
        if case.geometry.residual and "residual" in reads:
            sink_ports["residual"] = dut.res_o
        while True:
            for port in sink_ports.values():
                ctx.set(port.ready, rng.random() >= stall)
            await ctx.tick()

    async def monitor(ctx):
        # (sink, valid, ready) of each sink the loader has (the parameter memory takes a beat
        # when it writes one)
        sinks = [("input", dut.in_o.valid, dut.in_o.ready),
                 ("params", dut.params.en, dut.params.en)] if loads_in else []
        if loads_w:
            sinks.append(("weights", dut.w_o.valid, dut.w_o.ready))
        for kind, port in HALF_SINKS.items():
            if kind in reads:
                sinks.append((kind, getattr(dut, port).valid, getattr(dut, port).ready))
        if case.geometry.residual and "residual" in reads:
            sinks.append(("residual", dut.res_o.valid, dut.res_o.ready))
        ports = [dut.rd_data.payload, dut.fail.valid, dut.fail.code, dut.fail.addr]
        ports += [p for _, valid, ready in sinks for p in (valid, ready)]
        async for _, _, beat, fv, fc, fa, *flags in ctx.tick().sample(*ports):
            data = int(beat.data)
            for k, (sink, _, _) in enumerate(sinks):
                if flags[2 * k] and flags[2 * k + 1]:
                    taken.append((sink, data >> 16, data & 0xFFFF))
            if fv:
                fails.append((int(fc), int(fa)))

    idle = []

    async def bench(ctx):
        if loads_in:
            ctx.set(dut.drain_mt, 0xFFFF)  # no drain to wait for
        await start(ctx, dut.ctl, case.desc)
        for _ in range(200_000):
            await ctx.tick()
            if ctx.get(dut.idle):
                break
        idle.append(bool(ctx.get(dut.idle)))
        idle.append(int(ctx.get(dut.params_ready)) if loads_in else None)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    for process in dma.processes(commands):
        sim.add_process(process)
    sim.add_process(sinks)
    sim.add_process(monitor)
    sim.add_testbench(bench)
    sim.run()
    kinds = {kind for kind, _ in conv_reads(case.desc, case.core) if kind in reads}
    # every read carries its stream's region code (the DMA checks it against the region)
    stream_of = {box: READ_KIND_STREAMS[kind] for kind, box in conv_reads(case.desc, case.core)}
    assert [region_code(stream_of[box]) for box in dma.boxes] == dma.regions
    if commands > 1 and len(dma.boxes) > 4 * commands and len(kinds) > 1:
        # the queue was used: several reads in flight at some point (at most one per buffer)
        assert 2 <= dma.max_pending <= commands
    return dma.boxes, taken, fails, idle


#: The layers the two-port loaders run in the default suite (the rest are slow): several
#: n-tiles and m-tiles, a residual, stride 2, an FC layer, gap, a fused pool. The one loader
#: runs every layer.
TWO_PORT_DEFAULT = {"two_core:c5", "two_core:fc6", "two_core:r_b2b", "two_core:r_b2d",
                    "two_core:gap", "fused:f2"}


def loader_matrix():
    """Every test layer with the one loader; with each two-port loader the layers of
    :data:`TWO_PORT_DEFAULT`, the others marked slow."""
    out = []
    for case in conv_cases():
        for kinds, label in ((ALL_READS, "one loader"), (INPUT_READS, "input loader"),
                             (WEIGHT_READS, "weight loader")):
            slow = kinds != ALL_READS and case.name not in TWO_PORT_DEFAULT
            out.append(pytest.param(case, kinds, id=f"{case}-{label}",
                                    marks=[pytest.mark.slow] if slow else []))
    return out


@pytest.mark.parametrize(("case", "kinds"), loader_matrix())
def test_the_loader_reads_what_the_walk_reads_and_routes_every_beat(case, kinds):
    # Every beat once, in order (a parameter beat is written in one cycle).
    params_ready = check_the_walks_reads(case, kinds)
    if "params" in kinds:
        assert params_ready & (1 << ((case.desc.m_tiles - 1) & 1))


def split_cases():
    """The conv cases whose core can split a weight tile, their descriptors with
    ``FLAG_WSPLIT``."""
    return [dataclasses.replace(c, name=f"{c.name}-split", desc=dataclasses.replace(
        c.desc, flags=c.desc.flags | FLAG_WSPLIT))
        for c in conv_cases() if c.core.weight_tile_beats(1) % 2 == 0]


@pytest.mark.parametrize("kinds", [SPLIT_INPUT_READS, WEIGHT_READS],
                         ids=["input loader", "weight loader"])
@pytest.mark.parametrize("case", [*split_cases(), *conv_cases()[:3]], ids=str)
def test_split_weight_tiles_are_read_half_by_each_loader(case, kinds):
    """With ``FLAG_WSPLIT`` the weight loader reads the first half of every weight tile and
    the input loader the second after its input box; without it the input loader of a core
    that can split reads no weights."""
    split = bool(case.desc.flags & FLAG_WSPLIT)
    assert split == any(kind == "weight_half" for kind, _ in conv_reads(case.desc, case.core))
    check_the_walks_reads(case, kinds)


def check_the_walks_reads(case, kinds, *, commands=1, seed=0):
    """Run ``case`` through a loader issuing ``kinds`` with ``commands`` in flight (random
    stalls seeded by the case's name plus ``seed``): the walk's reads of those kinds, each
    beat to its sink, in order, and the loader idle without a failure at the end. Returns
    its final ``params_ready``."""
    reads = [(kind, box) for kind, box in conv_reads(case.desc, case.core) if kind in kinds]
    boxes, taken, fails, (idle, params_ready) = run(
        case, reads=kinds, commands=commands, seed=zlib.crc32(case.name.encode()) + seed)
    assert idle and not fails
    assert boxes == [box for _, box in reads]
    for n, (kind, box) in enumerate(reads):
        assert {sink for sink, t, _ in taken if t == n} == {kind}, (n, kind)
        assert [k for sink, t, k in taken if t == n] == list(range(box_beats(box)))
    return params_ready


def input_split_cases():
    """The conv cases whose input boxes can split, their descriptors with ``FLAG_ISPLIT``
    (also with ``FLAG_WSPLIT``: both loaders then read half of each)."""
    return [dataclasses.replace(c, name=f"{c.name}-isplit{'-wsplit' if w else ''}",
                                desc=dataclasses.replace(c.desc, flags=c.desc.flags
                                                         | FLAG_ISPLIT | w))
            for c in conv_cases() if splits_inputs(c.desc, c.core) for w in (0, FLAG_WSPLIT)]


def input_split_loaders():
    """Every loader of a two-port core (input loader with and without weight halves, weight
    loader) with every case of :func:`input_split_cases` and the same cases unsplit; not the
    input loader without weight halves on a ``FLAG_WSPLIT`` descriptor, which it never gets."""
    loaders = [(INPUT_READS, "input loader"), (SPLIT_INPUT_READS, "input loader, weight halves"),
               (SPLIT_WEIGHT_READS, "weight loader")]
    cases = [*input_split_cases(), *(c for c in conv_cases() if splits_inputs(c.desc, c.core))]
    return [pytest.param(case, kinds, id=f"{case}-{name}") for kinds, name in loaders
            for case in cases if not (case.desc.flags & FLAG_WSPLIT and kinds == INPUT_READS)]


@pytest.mark.parametrize("case, kinds", input_split_loaders())
def test_split_input_boxes_are_read_half_by_each_loader(case, kinds):
    """With ``FLAG_ISPLIT`` the input loader reads the lower half of every input box's slot
    groups and the weight loader the upper half before its weight tile; without it the
    weight loader of a core that can split reads no input."""
    split = bool(case.desc.flags & FLAG_ISPLIT)
    assert split == any(kind == "input_half" for kind, _ in conv_reads(case.desc, case.core))
    check_the_walks_reads(case, kinds)


def queue_matrix():
    """Every test layer on the one loader, and the two-port loaders (with the weight tiles
    and the input boxes split where the core can) on :data:`TWO_PORT_DEFAULT`, each with a
    queue of 2 or 3 commands."""
    out = []
    for case in conv_cases():
        out.append(pytest.param(case, ALL_READS, 2 + len(out) % 2, id=f"{case}-one loader"))
        if case.name not in TWO_PORT_DEFAULT:
            continue
        flags = (FLAG_WSPLIT if case.core.weight_tile_beats(1) % 2 == 0 else 0) | (
            FLAG_ISPLIT if splits_inputs(case.desc, case.core) else 0)
        split = dataclasses.replace(case, name=f"{case.name}-split", desc=dataclasses.replace(
            case.desc, flags=case.desc.flags | flags))
        inputs = SPLIT_INPUT_READS if flags & FLAG_WSPLIT else INPUT_READS
        weights = SPLIT_WEIGHT_READS if flags & FLAG_ISPLIT else WEIGHT_READS
        for kinds, label in ((inputs, "input loader"), (weights, "weight loader")):
            out.append(pytest.param(split, kinds, 3, id=f"{split}-{label}"))
    return out


@pytest.mark.parametrize(("case", "kinds", "commands"), queue_matrix())
def test_a_queued_loader_reads_what_the_walk_reads_and_routes_every_beat(case, kinds,
                                                                          commands):
    """With a DMA command queue several reads are in flight: the same reads in the walk's
    order, every beat of each to its own sink (the routing and the buffer box travel with the
    command), the post records marked loaded, the loader idle only once every status is in."""
    params_ready = check_the_walks_reads(case, kinds, commands=commands, seed=commands)
    if "params" in kinds:
        assert params_ready & (1 << ((case.desc.m_tiles - 1) & 1))


@pytest.mark.parametrize("commands", [1, 3])
@pytest.mark.parametrize("status", [Status.BAD_COMMAND, Status.OVERFLOW, Status.BUS_ERROR])
def test_a_failing_read_ends_the_walk_with_its_status(status, commands):
    """One report of the first failure; nothing issued after it (with a queue: nothing after
    the commands already in flight, which still report before the loader is idle)."""
    case = max(conv_cases(), key=lambda c: len(list(conv_reads(c.desc, c.core))))
    reads = list(conv_reads(case.desc, case.core))
    at = len(reads) // 2
    boxes, _, fails, (idle, _) = run(case, fail_at=at, fail_status=status, commands=commands)
    assert idle
    assert at + 1 <= len(boxes) <= at + commands  # nothing issued after the failure's status
    assert fails == [(status.value, reads[at][1].addr + 16)]


def test_the_loader_refuses_a_residual_box_for_a_core_without_residuals():
    case = next(c for c in conv_cases() if not c.geometry.residual)
    with pytest.raises(ValueError, match="res_box"):
        EngineLoader(case.core, case.geometry, in_box=IN_BOX, res_box=IN_BOX, addr_width=AW)
    with pytest.raises(TypeError):
        EngineLoader(None, case.geometry, in_box=IN_BOX, res_box=None)
    for reads in (frozenset(), {"input", "weights"}, {"params", "residual", "input", "bias"}):
        with pytest.raises(ValueError, match="reads must be"):
            loader(case, frozenset(reads))
    with pytest.raises(ValueError, match="input_half"):
        loader(next(c for c in conv_cases() if c.core.in_groups == 1), SPLIT_WEIGHT_READS)


def own_port_loaders():
    """The loaders of a four-port core: input and weight loader without halves, and the
    loaders of the halves, each on descriptors split both ways, one way and not at all, with
    one command at a time and a queue of three."""
    split = [c for c in input_split_cases() if c.desc.flags & FLAG_WSPLIT]
    whole = [c for c in conv_cases() if splits_inputs(c.desc, c.core)
             and c.core.weight_tile_beats(1) % 2 == 0]
    isplit_only = [c for c in input_split_cases() if not c.desc.flags & FLAG_WSPLIT][:1]
    loaders = [(INPUT_READS, "input loader"), (WEIGHT_READS, "weight loader"),
               (INPUT_HALF_READS, "input-half loader"),
               (WEIGHT_HALF_READS, "weight-half loader")]
    return [pytest.param(case, kinds, commands, id=f"{case}-{name}-q{commands}")
            for kinds, name in loaders for case in [*split, *whole[:1], *isplit_only]
            for commands in (1, 3)]


@pytest.mark.parametrize("case, kinds, commands", own_port_loaders())
def test_the_loaders_of_a_four_port_core_read_their_kinds_only(case, kinds, commands):
    """On four ports every read kind has a loader of its own: a half loader walks only the
    descriptors split its way (otherwise it stays idle and issues nothing), the input and
    weight loaders read their whole boxes or their own halves whatever the flags."""
    reads = [(kind, box) for kind, box in conv_reads(case.desc, case.core) if kind in kinds]
    if kinds == INPUT_HALF_READS:
        assert bool(reads) == bool(case.desc.flags & FLAG_ISPLIT)
    if kinds == WEIGHT_HALF_READS:
        assert bool(reads) == bool(case.desc.flags & FLAG_WSPLIT)
    check_the_walks_reads(case, kinds, commands=commands, seed=commands)


def quarter_cases():
    """The conv cases whose core can read a weight tile in quarters, their descriptors with
    ``FLAG_WSPLIT | FLAG_WQUARTER`` (and those whose input boxes split, also with
    ``FLAG_ISPLIT``: port 2's loader then reads the upper input half, then its quarter)."""
    quarter = FLAG_WSPLIT | FLAG_WQUARTER
    return [dataclasses.replace(c, name=f"{c.name}-quarter{'-isplit' if i else ''}",
                                desc=dataclasses.replace(c.desc, flags=c.desc.flags | quarter | i))
            for c in conv_cases() if PortMap(4).quarters_weights(c.core.weight_tile_beats(1))
            for i in ((0, FLAG_ISPLIT) if splits_inputs(c.desc, c.core) else (0,))]


def quarter_loaders():
    """The loaders of a four-port core that reads weight tiles in quarters, each on
    descriptors read in quarters, split in halves (input boxes or weight tiles) and not at
    all, with one command at a time and a queue of three."""
    quarters = quarter_cases()
    assert len(quarters) >= 3, quarters  # a conv, an FC layer, a folded first layer
    halves = [c for c in split_cases()
              if PortMap(4).quarters_weights(c.core.weight_tile_beats(1))][:1]
    isplit = [c for c in input_split_cases() if not c.desc.flags & FLAG_WSPLIT
              and PortMap(4).quarters_weights(c.core.weight_tile_beats(1))][:1]
    loaders = [(INPUT_READS | {"weight_quarter1"}, "input loader"),
               (WEIGHT_READS, "weight loader"), (WEIGHT_HALF_READS, "weight-half loader"),
               (WEIGHT_QUARTER_READS, "port-2 loader"),
               (INPUT_HALF_READS | WEIGHT_QUARTER_READS, "port-2 loader, input halves")]
    out = []
    for kinds, name in loaders:
        cases = [*quarters, *halves, *isplit]
        if "input_half" in kinds:
            cases = [c for c in cases if splits_inputs(c.desc, c.core)] + isplit
        for n, case in enumerate(dict.fromkeys(cases)):
            commands = 1 + 2 * (n % 2)
            out.append(pytest.param(case, kinds, commands, id=f"{case}-{name}-q{commands}"))
    return out


@pytest.mark.parametrize("case, kinds, commands", quarter_loaders())
def test_the_loaders_of_a_four_port_core_read_a_quarter_each(case, kinds, commands):
    """With ``FLAG_WQUARTER`` the weight loader reads the first quarter of every weight tile,
    the input loader the second after its input box, port 3's loader the third and port 2's
    the fourth (the walk's quarters, each beat to its sink, in order); without it the quarter
    loaders read their halves or whole boxes, and port 2's loader only input halves
    (``FLAG_ISPLIT``) or nothing."""
    reads = [(kind, box) for kind, box in conv_reads(case.desc, case.core) if kind in kinds]
    quarter = bool(case.desc.flags & FLAG_WQUARTER)
    assert quarter == any(kind == "weight_quarter3" for kind, _ in reads) or (
        "weight_quarter3" not in kinds)
    if quarter:
        w = next(box for kind, box in conv_reads(case.desc, case.core) if kind == "weights")
        assert box_beats(w) * 4 * 16 == case.desc.weight_tile_bytes
    check_the_walks_reads(case, kinds, commands=commands, seed=commands)


def test_a_quarter_loader_needs_quarters():
    case = next(c for c in conv_cases() if c.core.weight_tile_beats(1) % 4 == 0)
    odd = next(c for c in conv_cases() if c.core.weight_tile_beats(1) % 4)
    with pytest.raises(ValueError, match="quarters is False"):
        loader(case, WEIGHT_QUARTER_READS, quarters=False)
    with pytest.raises(ValueError, match="multiple of four beats per kernel tap"):
        loader(odd, WEIGHT_READS, quarters=True)
    with pytest.raises(TypeError, match="quarters must be a bool"):
        loader(case, quarters=1)


def residual_loaders():
    """The input loader without residual boxes and port 3's loader with them (alone, and
    beside the second weight halves) of a four-port core with residual layers, on the
    residual layers (one and two n-tiles, two m-tiles), split and not, and on layers without a
    residual (split: port 3 reads its halves only; not split: it stays idle), with one
    command at a time and a queue of three."""
    def split(c):
        return dataclasses.replace(c, name=f"{c.name}-split", desc=dataclasses.replace(
            c.desc, flags=c.desc.flags | FLAG_WSPLIT))
    residual = [c for c in conv_cases() if c.desc.flags & FLAG_RESIDUAL]
    assert {c.desc.n_tiles for c in residual} == {1, 2}, residual
    plain = next(c for c in conv_cases() if c.geometry.residual
                 and not c.desc.flags & FLAG_RESIDUAL and c.desc.n_tiles > 1)
    cases = [*residual, *map(split, residual), plain, split(plain)]
    loaders = [(INPUT_READS - RESIDUAL_READS, "input loader"),
               (RESIDUAL_READS, "residual loader"),
               (WEIGHT_HALF_READS | RESIDUAL_READS, "port-3 loader")]
    return [pytest.param(case, kinds, commands, id=f"{case}-{name}-q{commands}")
            for kinds, name in loaders for case in cases for commands in (1, 3)
            if not (case.desc.flags & FLAG_WSPLIT and kinds == RESIDUAL_READS)]


@pytest.mark.parametrize("case, kinds, commands", residual_loaders())
def test_port_3_reads_the_residual_boxes_of_a_four_port_core(case, kinds, commands):
    """Port 3's loader reads every tile's residual box at the tile's first pass (and each
    split pass's weight half after it), stepping over the other passes; the input loader reads
    the rest but no residual box; each beat to its sink, in the walk's order."""
    reads = [kind for kind, _ in conv_reads(case.desc, case.core) if kind in kinds]
    if "input" not in kinds:
        assert ("residual" in reads) == bool(case.desc.flags & FLAG_RESIDUAL)
    check_the_walks_reads(case, kinds, commands=commands, seed=commands)


def test_a_residual_loader_needs_a_residual_buffer():
    case = next(c for c in conv_cases() if not c.geometry.residual)
    for reads in (RESIDUAL_READS, WEIGHT_HALF_READS | RESIDUAL_READS):
        with pytest.raises(ValueError, match="no residual layer"):
            loader(case, reads)


def input_quarter_cases():
    """The conv cases of the four-port ``Tn = 64`` test core, each as compiled (which reads
    most of them in quarters); those whose boxes can be quartered also with ``FLAG_IQUARTER``
    added where the compiler did not, and taken off (halves, or no input split at all)."""
    out = []
    for c in four_port_cases():
        f = c.desc.flags
        variants = [("", f)] + ([("-iquarter", f | FLAG_ISPLIT | FLAG_IQUARTER),
                                 ("-ihalves", f & ~FLAG_IQUARTER | FLAG_ISPLIT),
                                 ("-iwhole", f & ~(FLAG_IQUARTER | FLAG_ISPLIT))]
                                if quarters_inputs(c.desc, c.core) else [])
        for name, flags in variants:
            out.append(dataclasses.replace(c, name=f"{c.name}{name}",
                                           desc=dataclasses.replace(c.desc, flags=flags)))
    return list({c.desc: c for c in out}.values())


def input_quarter_loaders():
    """The four loaders of the four-port ``Tn = 64`` core (as the layer engine builds them:
    :meth:`~fcircnn.arch.ports.PortMap.loader_reads`, with residual layers) on every case of
    :func:`input_quarter_cases`, one command at a time and a queue of three, alternately."""
    cases = input_quarter_cases()
    assert {c.name.split(":")[1].split("-")[0] for c in cases} >= {"q1", "qd", "q2", "fc"}
    assert sum(1 for c in cases if c.desc.flags & FLAG_IQUARTER and c.desc.flags
               & FLAG_RESIDUAL and c.desc.flags & FLAG_WSPLIT) >= 1
    core = cases[0].core
    reads = PortMap(4).loader_reads(core.weight_tile_beats(1), core.in_groups, residual=True)
    return [pytest.param(case, kinds, 1 + 2 * ((n + port) % 2),
                         id=f"{case}-port{port}-q{1 + 2 * ((n + port) % 2)}")
            for port, kinds in enumerate(reads) for n, case in enumerate(cases)]


@pytest.mark.parametrize("case, kinds, commands", input_quarter_loaders())
def test_the_loaders_of_a_four_port_core_read_an_input_quarter_each(case, kinds, commands):
    """With ``FLAG_IQUARTER`` the input loader reads the first quarter of every input box's
    slot groups, the weight loader the second before its weight tile, port 2's loader the
    third and port 3's the fourth (after the tile's residual box, before the pass's weight
    half), each beat to its sink, in the walk's order; without it the input halves and
    whole boxes as before and port 3's loader no input."""
    reads = [kind for kind, _ in conv_reads(case.desc, case.core) if kind in kinds]
    quartered = bool(case.desc.flags & FLAG_IQUARTER)
    assert ("input_quarter1" in reads) == quartered or "input_quarter1" not in kinds
    assert ("input_quarter3" in reads) == quartered or "input_quarter3" not in kinds
    check_the_walks_reads(case, kinds, commands=commands, seed=commands)


def test_an_input_quarter_loader_needs_input_quarters():
    case = four_port_cases()[0]
    two = next(c for c in conv_cases() if c.core.in_groups == 2)
    with pytest.raises(ValueError, match="in_quarters is False"):
        loader(case, WEIGHT_READS | {"input_quarter1"}, in_quarters=False)
    with pytest.raises(ValueError, match="multiple of four input slot groups"):
        loader(two, WEIGHT_READS, in_quarters=True)
    with pytest.raises(TypeError, match="in_quarters must be a bool"):
        loader(case, in_quarters=1)


def minner_loaders():
    """Every loader of a one-, two- and four-port engine (as the layer engine builds them) on
    each case of :func:`~engine_bench.minner_cases` (m-tiles innermost, ``FLAG_MINNER``, on and
    off; the input boxes and weight tiles split or quartered where the compiler did, on the
    engines with that many ports), one command at a time and a queue of three,
    alternately; those of one and two ports marked slow."""
    out = []
    for n, case in enumerate(minner_cases()):
        core, flags = case.core, case.desc.flags
        # (a descriptor with its reads split or quartered runs on that many ports only)
        least = (4 if flags & (FLAG_IQUARTER | FLAG_WQUARTER) else
                 2 if flags & (FLAG_ISPLIT | FLAG_WSPLIT) else 1)
        for ports in [p for p in (1, 2, 4) if p >= least]:
            reads = PortMap(ports).loader_reads(core.weight_tile_beats(1), core.in_groups,
                                                residual=case.geometry.residual)
            for port, kinds in enumerate(reads):
                if kinds:
                    commands = 1 + 2 * ((n + port + ports) % 2)
                    # (suite budget: the four-port loaders in the default suite)
                    out.append(pytest.param(case, kinds, commands,
                                            id=f"{case}-{ports}ports-port{port}-q{commands}",
                                            marks=[] if ports == 4 else [pytest.mark.slow]))
    return out


@pytest.mark.parametrize("case, kinds, commands", minner_loaders())
def test_m_tiles_innermost_read_each_input_box_once_per_tile(case, kinds, commands):
    """With ``FLAG_MINNER`` every loader that reads a part of the input boxes reads it on a
    tile's first m-tile only and steps over it on the others (on to the pass's next read, or
    to the next pass where it was the last); the other reads as the walk has them."""
    inputs = [kind for kind, _ in conv_reads(case.desc, case.core) if kind.startswith("input")]
    reads_per_tile = 1 if case.desc.flags & FLAG_MINNER else case.desc.m_tiles
    assert len(inputs) == len(set(inputs)) * math.prod(case.desc.tiles) * reads_per_tile
    check_the_walks_reads(case, kinds, commands=commands, seed=commands)
