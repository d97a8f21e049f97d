"""AXI4 memory model for Amaranth's simulator (fast unit tests of the DMA, no cocotb).

:class:`AxiMemory` answers an :class:`~fcircnn.hw.axi4.AXI4Signature` manager from a
``bytearray`` with seeded random stalls on every channel, optional SLVERR address ranges, and
protocol checks (INCR, 16-byte beats, <= 256 beats, no 4 KB crossing, WLAST, every burst
answered once). The cocotb testbench (:mod:`fcircnn.sim.tb_axi_dma`) does the same with
cocotbext-axi on the generated Verilog.
"""

from __future__ import annotations

import random
from collections import deque

from fcircnn.hw.axi4 import RESP_OKAY, RESP_SLVERR
from fcircnn.models.layout import ncdhw8_address

__all__ = ["AxiMemory", "ProtocolError", "SparseMemory", "box_beat_addresses"]


class ProtocolError(AssertionError):
    """The manager broke an AXI4 rule."""


def check_burst(addr: int, length: int, size: int, burst: int, what: str) -> None:
    """Raise :class:`ProtocolError` unless the burst is a legal 128-bit INCR burst."""
    if burst != 1:
        raise ProtocolError(f"{what} burst type {burst}, expected INCR (1)")
    if size != 4:
        raise ProtocolError(f"{what} size {size}, expected 4 (16 bytes)")
    if addr % 16:
        raise ProtocolError(f"{what} address {addr:#x} not 16-byte aligned")
    beats = length + 1
    if not 1 <= beats <= 256:
        raise ProtocolError(f"{what} of {beats} beats")
    if addr // 4096 != (addr + beats * 16 - 1) // 4096:
        raise ProtocolError(f"{what} {addr:#x}+{beats} beats crosses a 4 KB boundary")


class SparseMemory(dict):
    """Byte memory as a dict, for addresses near the top of a 64-bit space (holes read as 0);
    usable as :class:`AxiMemory`'s ``mem``."""

    def __getitem__(self, key):
        if isinstance(key, slice):
            return bytes(self.get(a, 0) for a in range(key.start, key.stop))
        return self.get(key, 0)


def box_beat_addresses(fmap, groups, d, h, w) -> list[tuple[int, int | None]]:
    """Reference walk of a DMA box: ``(slot group, beat address)`` for every beat in NC/8DHW8
    order (group, d, h, w), the address ``None`` for voxels outside the map (padding).

    ``fmap`` is a :class:`fcircnn.gen.dma_plan.FeatureMap`; each range is ``(start, count)``.
    """
    D, H, W = fmap.shape
    out = []
    for g in range(groups[0], groups[0] + groups[1]):
        for z in range(d[0], d[0] + d[1]):
            for y in range(h[0], h[0] + h[1]):
                for x in range(w[0], w[0] + w[1]):
                    inside = 0 <= z < D and 0 <= y < H and 0 <= x < W
                    out.append((g, ncdhw8_address(8 * g, z, y, x, fmap.shape, fmap.base)
                                if inside else None))
    return out


class AxiMemory:
    """Simulated AXI4 slave backed by ``mem`` (byte address = index).

    Parameters
    ----------
    axi : the manager's AXI4 interface (``dut.m_axi``)
    mem : bytearray
    seed : int
    stall : float
        Probability, per cycle and channel, of holding ready/valid low.
    error_ranges : list of (start, end) byte ranges answered with SLVERR
    latency : int
        Cycles between an accepted AR and its first R beat.
    """

    def __init__(self, axi, mem: bytearray, *, seed: int = 0, stall: float = 0.0,
                 error_ranges=(), latency: int = 2):
        self.axi, self.mem = axi, mem
        self.rng = random.Random(seed)
        self.stall = stall
        self.error_ranges = list(error_ranges)
        self.latency = latency
        self.reads: list[tuple[int, int]] = []
        self.writes: list[tuple[int, int]] = []
        self.read_done = 0
        self.write_done = 0
        self._rq: deque = deque()
        self._wq: deque = deque()
        self._bq: deque = deque()
        self.cycle = 0

    def _go(self) -> int:
        return int(self.rng.random() >= self.stall)

    def _error(self, addr: int) -> bool:
        return any(lo <= addr < hi for lo, hi in self.error_ranges)

    def processes(self):
        """The async testbenches to add with ``sim.add_testbench`` (the channels ``axi`` has)."""
        procs = []
        if hasattr(self.axi, "arvalid"):
            procs += [self._ar, self._r]
        if hasattr(self.axi, "awvalid"):
            procs += [self._aw, self._w, self._b]
        return procs

    async def _ar(self, ctx):
        axi = self.axi
        while True:
            ready = self._go()
            ctx.set(axi.arready, ready)
            _, _, valid, addr, length, size, burst = await ctx.tick().sample(
                axi.arvalid, axi.araddr, axi.arlen, axi.arsize, axi.arburst)
            self.cycle += 1
            if valid and ready:
                check_burst(addr, length, size, burst, "read")
                self.reads.append((addr, length + 1))
                self._rq.append([addr, length + 1, 0, self.cycle + self.latency])

    def _read_resp(self, addr: int) -> int:
        """RRESP of the beat at ``addr`` (subclasses inject faults here)."""
        return RESP_SLVERR if self._error(addr) else RESP_OKAY

    def _read_last(self, burst: int, beat: int, last: bool) -> bool:
        """RLAST of beat ``beat`` of the ``burst``-th read burst (``last``: the legal value)."""
        return last

    async def _r(self, ctx):
        axi = self.axi
        burst = 0
        while True:
            head = self._rq[0] if self._rq else None
            show = head is not None and head[3] <= self.cycle and self._go()
            if show:
                addr = head[0] + 16 * head[2]
                word = int.from_bytes(self.mem[addr:addr + 16], "little")
                ctx.set(axi.rdata, word)
                ctx.set(axi.rresp, self._read_resp(addr))
                ctx.set(axi.rlast, self._read_last(burst, head[2], head[2] == head[1] - 1))
            ctx.set(axi.rvalid, show)
            _, _, ready = await ctx.tick().sample(axi.rready)
            if show and ready:
                head[2] += 1
                if head[2] == head[1]:
                    self._rq.popleft()
                    self.read_done += 1
                    burst += 1

    async def _aw(self, ctx):
        axi = self.axi
        while True:
            ready = self._go()
            ctx.set(axi.awready, ready)
            _, _, valid, addr, length, size, burst = await ctx.tick().sample(
                axi.awvalid, axi.awaddr, axi.awlen, axi.awsize, axi.awburst)
            if valid and ready:
                check_burst(addr, length, size, burst, "write")
                self.writes.append((addr, length + 1))
                self._wq.append([addr, length + 1, 0, False])

    async def _w(self, ctx):
        axi = self.axi
        pending = deque()  # W beats that arrived before their AW
        while True:
            ready = self._go()
            ctx.set(axi.wready, ready)
            _, _, valid, wdata, strb, last = await ctx.tick().sample(
                axi.wvalid, axi.wdata, axi.wstrb, axi.wlast)
            if valid and ready:
                pending.append((wdata, strb, last))
            while pending and self._wq:
                head = self._wq[0]
                wdata, strb, last = pending.popleft()
                addr = head[0] + 16 * head[2]
                if bool(last) != (head[2] == head[1] - 1):
                    raise ProtocolError(f"WLAST {last} on beat {head[2]} of {head[1]}")
                data = wdata.to_bytes(16, "little")
                err = self._error(addr)
                if not err:
                    for i in range(16):
                        if strb >> i & 1:
                            self.mem[addr + i] = data[i]
                head[3] |= err
                head[2] += 1
                if head[2] == head[1]:
                    self._wq.popleft()
                    self._bq.append(head[3])

    async def _b(self, ctx):
        axi = self.axi
        while True:
            show = bool(self._bq) and self._go()
            if show:
                ctx.set(axi.bresp, RESP_SLVERR if self._bq[0] else RESP_OKAY)
            ctx.set(axi.bvalid, show)
            _, _, ready = await ctx.tick().sample(axi.bready)
            if show and ready:
                self._bq.popleft()
                self.write_done += 1

    def idle(self) -> bool:
        """Every accepted burst has been answered."""
        return not self._rq and not self._wq and not self._bq
