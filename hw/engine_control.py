"""The layer engine's control: starts a layer, collects the walkers' failures and ends the run
with ``done`` or ``error``."""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from fcircnn.arch.descriptor import descriptor_layout
from fcircnn.arch.registers import ERROR_ABORTED

from .axi_dma_box import check_addr_width
from .common import rejecting
from .engine_walk import control_signature, fail_signature

__all__ = ["EngineControl"]


class EngineControl(wiring.Component):
    """Latches a layer's descriptor at ``start`` and tells every walker (``ctl``), records the
    first failure, and ends the run.

    Contract
    --------
    * ``start`` while idle latches ``desc`` into ``ctl.desc``, pulses ``ctl.start`` (with
      ``ctl.new_desc = desc``) and raises ``busy``; ``start`` while busy is ignored.
    * ``done`` pulses (and ``busy`` falls) the cycle ``store_done`` or ``pool_done`` pulses,
      unless a failure was recorded or a ``fail_*.valid`` comes in that cycle (then the run
      ends with ``error``).
    * The first ``fail_*.valid`` of a run sets ``ctl.failed`` and records its code and address
      (in one cycle: pool pass over store over loader). Once the loader and the store are idle
      and the pool pass is not ``pool_active`` (no transfer in flight), ``error`` pulses once
      with them and ``busy`` falls.
    * ``abort`` while running and not failed sets ``ctl.failed`` too, recording
      :data:`~fcircnn.arch.registers.ERROR_ABORTED` with address 0 (the host stopped the run;
      the top level reports the descriptor's address): the walkers wind down as for a failure.

    Parameters
    ----------
    addr_width : int
        AXI address width (of ``error_addr``).
    """

    def __init__(self, addr_width: int = 40):
        with rejecting(self):
            check_addr_width(addr_width)
        self.addr_width = addr_width
        super().__init__({
            "desc": In(descriptor_layout()),
            "start": In(1),
            "ctl": Out(control_signature()),
            "busy": Out(1),
            "done": Out(1),
            "error": Out(1),
            "error_code": Out(8),
            "error_addr": Out(addr_width),
            "fail_loader": In(fail_signature(addr_width)),
            "fail_store": In(fail_signature(addr_width)),
            "fail_pool": In(fail_signature(addr_width)),
            "loader_idle": In(1),
            "store_idle": In(1),
            "pool_active": In(1),
            "store_done": In(1),
            "pool_done": In(1),
            "abort": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        running = Signal()
        failed = Signal()
        d = Signal(descriptor_layout())
        m.d.comb += [self.busy.eq(running), self.ctl.desc.eq(d), self.ctl.failed.eq(failed),
                     self.ctl.new_desc.eq(self.desc),
                     self.ctl.start.eq(self.start & ~running)]
        with m.If(self.start & ~running):
            m.d.sync += [d.eq(self.desc), running.eq(1), failed.eq(0)]

        err_code = Signal(8)
        err_addr = Signal(self.addr_width)
        with m.If(self.abort & running & ~failed):
            m.d.sync += [failed.eq(1), err_code.eq(ERROR_ABORTED), err_addr.eq(0)]
        for fail in (self.fail_loader, self.fail_store, self.fail_pool):  # the last one wins
            with m.If(fail.valid & ~failed):
                m.d.sync += [failed.eq(1), err_code.eq(fail.code), err_addr.eq(fail.addr)]

        # Done when the store walker (conv) or the pool pass has finished, unless a failure
        # was recorded or comes in the same cycle (the pool pass reports a failing last
        # status in the cycle it finishes).
        fail_now = (self.fail_loader.valid | self.fail_store.valid | self.fail_pool.valid
                    | self.abort)
        with m.If(running & (self.store_done | self.pool_done) & ~failed & ~fail_now):
            m.d.comb += self.done.eq(1)
            m.d.sync += running.eq(0)
        # A failure ends the run when every walker with a transfer in flight is idle (the top
        # sees `busy` fall); the engine signals error once.
        idle_all = ~self.pool_active & self.loader_idle & self.store_idle
        err_sent = Signal()
        with m.If(running & failed & ~err_sent & idle_all):
            m.d.comb += [self.error.eq(1), self.error_code.eq(err_code),
                         self.error_addr.eq(err_addr)]
            m.d.sync += [running.eq(0), err_sent.eq(1)]
        with m.If(self.start & ~running):
            m.d.sync += err_sent.eq(0)
        return m
