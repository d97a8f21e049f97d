"""What the layer engine's component tests share: the descriptors they run (the compiler's, for
the two-core test accelerator with every C3D and ResNet-18 layer kind, and the fused-pool test
core), the descriptor as a signal value, boxes read off the simulator, and a DMA model."""

from __future__ import annotations

import importlib.util
import random
import tempfile
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

from fcircnn.arch.descriptor import (
    FLAG_MINNER,
    OP_POOL,
    LayerDescriptor,
    reuses_inputs,
)
from fcircnn.arch.geometry import CoreGeometry, EngineGeometry, engine_geometry
from fcircnn.arch.walk import Box, conv_reads
from fcircnn.gen.plan import plan_network
from fcircnn.hw.axi_dma_box import Status
from fcircnn.models.config import load_config

CONFIGS = Path(__file__).resolve().parent / "configs"
#: AXI address width of the test accelerator.
AW = 32


@dataclass(frozen=True)
class Case:
    """One descriptor with the core that runs it."""

    name: str
    desc: LayerDescriptor
    core: CoreGeometry
    geometry: EngineGeometry

    def __str__(self) -> str:
        return self.name


def _conftest():
    spec = importlib.util.spec_from_file_location("_engine_conftest", CONFIGS.parent.parent
                                                  / "conftest.py")
    conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conftest)
    return conftest


def _fused_accelerator() -> Path:
    """The fused-pool test accelerator of ``tests/conftest.py``, written to a temporary
    folder."""
    return _conftest().write_fused_accelerator(Path(tempfile.mkdtemp(prefix="fcircnn-fused-")))


def _quarters_accelerator() -> Path:
    """The ``Tn = Tm = 64`` four-port test accelerator whose input boxes the compiler reads in
    quarters (``FLAG_IQUARTER``), written to a temporary folder."""
    return _conftest().write_quarters_accelerator(
        Path(tempfile.mkdtemp(prefix="fcircnn-quarters-")))


def _dfold_accelerator() -> Path:
    """The small test accelerator with ``B = 4``, ``Tn = Tm = 32``, whose first layer folds
    pairs of output depths (``FLAG_DFOLD``) and two row copies, written to a temporary
    folder."""
    return _conftest().write_dfold_accelerator(Path(tempfile.mkdtemp(prefix="fcircnn-dfold-")))


def _rows_accelerator() -> Path:
    """The ``Td = 4`` test accelerator whose convs run rows in their idle depth lanes
    (``FLAG_ROWLANES``), written to a temporary folder."""
    return _conftest().write_rows_accelerator(Path(tempfile.mkdtemp(prefix="fcircnn-rows-")))


@cache
def cases() -> tuple[Case, ...]:
    """Every descriptor of ``configs/two_core.yaml``, of the fused-pool test core and of the
    row-lanes test core, and the depth- and row-folded first layer of the small network on a
    ``Tn = Tm = 32`` core."""
    return _cases((("two_core", CONFIGS / "two_core.yaml"), ("fused", _fused_accelerator()),
                   ("dfold", _dfold_accelerator()), ("rows", _rows_accelerator())))


@cache
def four_port_cases() -> tuple[Case, ...]:
    """The conv descriptors of the four-port ``Tn = Tm = 64`` test core, whose input boxes the
    compiler reads in quarters (the loaders' cases: the other walkers run those layer kinds
    in :func:`cases`)."""
    return tuple(c for c in _cases((("quarters", _quarters_accelerator()),))
                 if c.desc.op != OP_POOL)


def _cases(sources) -> tuple[Case, ...]:
    """Every descriptor of the accelerators ``sources`` (``(label, file)`` pairs)."""
    out = []
    for label, path in sources:
        acc = load_config(path)
        for lp in plan_network(acc).layers:
            if label == "dfold" and lp.depths == 1:
                continue
            core = acc.cores[lp.core_index]
            for k, desc in enumerate(lp.descriptors):
                name = f"{label}:{lp.layer.name}{'.pool' if k else ''}"
                out.append(Case(name, desc, CoreGeometry.of(core, acc.block_size),
                                engine_geometry(acc, core)))
    return tuple(out)


def conv_cases() -> list[Case]:
    return [c for c in cases() if c.desc.op != OP_POOL]


def minner_cases() -> list[Case]:
    """The conv descriptors of :func:`cases` and :func:`four_port_cases` that may walk their
    m-tiles innermost (:func:`~fcircnn.arch.descriptor.reuses_inputs`), with
    ``FLAG_MINNER`` set (named ``...+minner``) and with it cleared where the compiler set it
    (``...-minner``)."""
    out = []
    for c in (*conv_cases(), *four_port_cases()):
        d = c.desc
        if reuses_inputs(d.op, d.m_tiles, d.n_tiles, d.flags, d.pool_window):
            flags = c.desc.flags ^ FLAG_MINNER
            sign = "+" if flags & FLAG_MINNER else "-"
            out.append(replace(c, name=f"{c.name}{sign}minner",
                               desc=replace(c.desc, flags=flags)))
    return out


def pool_cases() -> list[Case]:
    return [c for c in cases() if c.desc.op == OP_POOL]


def desc_value(desc: LayerDescriptor) -> int:
    """The descriptor as the value of a ``descriptor_layout()`` signal."""
    return int.from_bytes(desc.pack(), "little")


def box_of(v) -> Box:
    """A :class:`~fcircnn.arch.walk.Box` from a ``box_layout`` value read off the simulator."""
    return Box(int(v.addr), int(v.stride_g), int(v.stride_d), int(v.stride_h), int(v.groups),
               (int(v.d_pre), int(v.h_pre), int(v.w_pre)),
               (int(v.d_len), int(v.h_len), int(v.w_len)),
               (int(v.d_post), int(v.h_post), int(v.w_post)), int(v.last_lanes))


def box_beats(box: Box) -> int:
    """Beats a read box delivers (padding included) or a write box takes."""
    n = box.groups
    for a in range(3):
        n *= box.pre[a] + box.len[a] + box.post[a]
    return n


async def start(ctx, ctl, desc: LayerDescriptor) -> None:
    """Pulse ``ctl.start`` with ``desc`` (as :class:`~fcircnn.hw.engine_control.EngineControl`
    does: ``new_desc`` in the start cycle, ``desc`` latched from the next one on)."""
    value = desc_value(desc)
    ctx.set(ctl.new_desc.as_value(), value)
    ctx.set(ctl.start, 1)
    await ctx.tick()
    ctx.set(ctl.start, 0)
    ctx.set(ctl.desc.as_value(), value)


def reports(dut, fails: list, done: list):
    """A simulator process that records ``dut``'s failure reports (``fail``: ``(code,
    addr)``) and ``done`` pulses into the two lists."""

    async def monitor(ctx):
        async for _, _, fv, fc, fa, dn in ctx.tick().sample(dut.fail.valid, dut.fail.code,
                                                           dut.fail.addr, dut.done):
            if fv:
                fails.append((int(fc), int(fa)))
            if dn:
                done.append(1)

    return monitor


class Dma:
    """One direction of the DMA as the engine sees it: takes commands with random ready,
    then delivers the box's beats on ``data`` (a read) or takes them from ``sink`` (a write)
    and, after them, a status; ``fail_at``: the
    command whose status is ``fail_status`` instead of OK (with its address)."""

    def __init__(self, cmd, status, *, data=None, sink=None, rng: random.Random,
                 stall: float = 0.3, fail_at: int | None = None,
                 fail_status: Status = Status.BUS_ERROR, beat=lambda n, k: 0):
        self.cmd, self.status, self.data, self.sink = cmd, status, data, sink
        #: Per write box, the data of the beats taken from ``sink``.
        self.written: list[list[int]] = []
        self.rng, self.stall, self.fail_at, self.fail_status = rng, stall, fail_at, fail_status
        self.beat = beat
        self.boxes: list[Box] = []
        #: Per command, its region code (``box_layout.region``).
        self.regions: list[int] = []

    async def run(self, ctx) -> None:
        rng = self.rng
        while True:
            ready = rng.random() >= self.stall
            ctx.set(self.cmd.ready, ready)
            _, _, valid, payload = await ctx.tick().sample(self.cmd.valid, self.cmd.payload)
            if not (valid and ready):
                continue
            ctx.set(self.cmd.ready, 0)
            box = box_of(payload)
            n = len(self.boxes)
            self.boxes.append(box)
            self.regions.append(int(payload.region))
            if self.data is not None:
                await self._deliver(ctx, n, box)
            if self.sink is not None:
                self.written.append(await self._take(ctx, box_beats(box)))
            failed = n == self.fail_at
            await self._report(ctx, self.fail_status if failed else Status.OK,
                               box.addr + 16 * failed)

    def processes(self, commands: int = 1):
        """The simulator processes of a read DMA with a queue of ``commands``: one at a time
        (:meth:`run`), or an acceptor taking up to ``commands`` commands not yet reported, a
        deliverer streaming their beats in order (the next command's right after the
        previous one's last, before its status) and a reporter presenting their statuses in
        order; after the failing command the ones queued behind it end without beats with
        its status, as :class:`~fcircnn.hw.axi_dma_read.AxiDmaRead` does."""
        if commands == 1:
            return [self.run]
        queue: list[tuple[int, Box]] = []
        done: list[tuple[Status, int]] = []  # statuses of delivered commands, in order
        pending = [0]  # accepted, status not yet taken
        failed: list[tuple[Status, int]] = []
        self.max_pending = 0
        rng = self.rng

        async def accept(ctx):
            while True:
                ready = pending[0] < commands and rng.random() >= self.stall
                ctx.set(self.cmd.ready, ready)
                _, _, valid, payload = await ctx.tick().sample(self.cmd.valid,
                                                               self.cmd.payload)
                if valid and ready:
                    box = box_of(payload)
                    queue.append((len(self.boxes), box))
                    self.boxes.append(box)
                    self.regions.append(int(payload.region))
                    pending[0] += 1
                    self.max_pending = max(self.max_pending, pending[0])

        async def deliver(ctx):
            while True:
                if not queue:
                    await ctx.tick()
                    continue
                n, box = queue.pop(0)
                if not failed:
                    await self._deliver(ctx, n, box)
                    if n == self.fail_at:
                        failed.append((self.fail_status, box.addr + 16))
                done.append(failed[0] if failed else (Status.OK, box.addr))

        async def report(ctx):
            while True:
                if not done:
                    await ctx.tick()
                    continue
                await self._report(ctx, *done.pop(0))
                pending[0] -= 1

        return [accept, deliver, report]

    async def _report(self, ctx, code: Status, addr: int) -> None:
        """After 0-2 cycles, present a status until it is taken."""
        for _ in range(self.rng.randrange(3)):
            await ctx.tick()
        ctx.set(self.status.payload, {"code": code, "addr": addr})
        ctx.set(self.status.valid, 1)
        await ctx.tick().until(self.status.ready)
        ctx.set(self.status.valid, 0)

    async def _deliver(self, ctx, n: int, box: Box) -> None:
        """Deliver the beats of read ``n`` on ``data`` with random valid."""
        for k in range(box_beats(box)):
            ctx.set(self.data.payload, {"data": self.beat(n, k),
                                        "last": int(k == box_beats(box) - 1)})
            while True:
                valid = self.rng.random() >= self.stall
                ctx.set(self.data.valid, valid)
                _, _, ready = await ctx.tick().sample(self.data.ready)
                if valid and ready:
                    break
            ctx.set(self.data.valid, 0)

    async def _take(self, ctx, n: int) -> list[int]:
        """Take ``n`` beats from ``sink`` with random ready."""
        got = []
        while len(got) < n:
            ready = self.rng.random() >= self.stall
            ctx.set(self.sink.ready, ready)
            _, _, valid, payload = await ctx.tick().sample(self.sink.valid, self.sink.payload)
            if valid and ready:
                got.append(int(payload.data))
        ctx.set(self.sink.ready, 0)
        return got


def weight_bytes(acc, image, kind: str = "weights") -> int:
    """Bytes of every read of ``kind`` (a weight tile, a tile half or an input box half) the
    layer engines read (a weight tile once per spatial tile; a box's voxels inside the map:
    its padding is not read)."""
    return sum(box.groups * box.len[0] * box.len[1] * box.len[2] * 16
               for lp in image.plan.layers for d in lp.descriptors
               if d.op != OP_POOL
               for k, box in conv_reads(d, CoreGeometry.of(lp.core, acc.block_size))
               if k == kind)


def check_run(doc: dict, image) -> None:
    """The testbench's results ``doc`` of a run of ``image``: done, every layer of its plan in
    order, each bit-exact against the golden model."""
    assert doc["status"] == "done" and doc["passed"], doc.get("message")
    assert [layer["name"] for layer in doc["layers"]] == [
        lp.layer.name for lp in image.plan.layers]
    for layer in doc["layers"]:
        assert layer["passed"] and layer["mismatches"] == 0, layer
