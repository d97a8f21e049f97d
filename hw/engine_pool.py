"""The layer engine's pool pass: a pool descriptor streamed from the read DMA through the post
chain to the write DMA, which it takes over from the conv walkers while it runs."""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from fcircnn.arch.descriptor import OP_POOL
from fcircnn.models.layout import SLOTS_PER_BEAT

from .axi_dma_box import Status, box_layout, check_addr_width, status_layout
from .axi_dma_read import read_beat_layout
from .axi_dma_write import write_beat_layout
from .common import rejecting
from .engine_walk import control_signature, fail_signature
from .post_cbn import cbn_input_layout
from .post_chain import post_config_layout
from .post_quantize import slot_layout

__all__ = ["EnginePoolPass"]


class EnginePoolPass(wiring.Component):
    """Runs a pool descriptor (``op`` :data:`~fcircnn.arch.descriptor.OP_POOL`): per slot group
    of the input map one read box (the group's whole map) and one write box (the pooled map),
    the read beats through the post chain (CBN bypassed, shift 0, CMaxPool on the map) into the
    write.

    While it runs (``active``) it owns the DMA ports and the post chain; otherwise it passes the
    conv walkers' ``conv_*`` ports through to them unchanged (the loader's reads, the store's
    writes, the drain's post-chain input, output and configuration).

    Contract
    --------
    * ``ctl.start`` with a pool descriptor starts it; ``done`` pulses after the last group's
      two statuses.
    * A read status other than OK pulses ``fail`` with it; the write box is completed with zero
      beats, then the pass ends. A write status other than OK pulses ``fail`` (code
      ``4 | status``; it wins over a read failure in the same cycle) and ends the pass.

    Parameters
    ----------
    addr_width : int
    max_size, max_groups :
        The post chain's configuration bounds (:func:`~fcircnn.hw.post_chain.post_config_layout`).
    """

    def __init__(self, *, addr_width: int = 40, max_size=(1, 1, 1), max_groups: int = 1):
        with rejecting(self):
            check_addr_width(addr_width)
            cfg = post_config_layout(max_size, max_groups)
        self.addr_width = addr_width
        box, status = stream.Signature(box_layout(addr_width)), stream.Signature(
            status_layout(addr_width))
        rd, wr = stream.Signature(read_beat_layout()), stream.Signature(write_beat_layout())
        post_in = stream.Signature(cbn_input_layout(SLOTS_PER_BEAT))
        post_out = stream.Signature(slot_layout(SLOTS_PER_BEAT))
        super().__init__({
            "ctl": In(control_signature()),
            "fail": Out(fail_signature(addr_width)),
            "active": Out(1),
            "done": Out(1),
            "rd_cmd": Out(box), "rd_data": In(rd), "rd_status": In(status),
            "wr_cmd": Out(box), "wr_data": Out(wr), "wr_status": In(status),
            "post_i": Out(post_in), "post_o": In(post_out), "post_cfg": Out(cfg),
            "conv_rd_cmd": In(box), "conv_rd_data": Out(rd), "conv_rd_status": Out(status),
            "conv_wr_cmd": In(box), "conv_wr_data": In(wr), "conv_wr_status": Out(status),
            "conv_post_i": In(post_in), "conv_post_o": Out(post_out), "conv_post_cfg": In(cfg),
        })

    def _route(self, m, pool_mode, pp_cmd_rd, pp_cmd_wr):
        """The DMA and post-chain ports: the conv walkers' unless a pool pass runs. Returns
        the pool pass's own (valid, ready) drivers to fill in."""
        # What the walkers receive: the DMA's and the chain's outputs as they are (the
        # chain's input and output only outside a pool pass).
        m.d.comb += [
            self.conv_rd_cmd.ready.eq(self.rd_cmd.ready),
            self.conv_rd_data.valid.eq(self.rd_data.valid),
            self.conv_rd_data.payload.eq(self.rd_data.payload),
            self.conv_rd_status.valid.eq(self.rd_status.valid),
            self.conv_rd_status.payload.eq(self.rd_status.payload),
            self.conv_wr_cmd.ready.eq(self.wr_cmd.ready),
            self.conv_wr_data.ready.eq(self.wr_data.ready),
            self.conv_wr_status.valid.eq(self.wr_status.valid),
            self.conv_wr_status.payload.eq(self.wr_status.payload),
            self.conv_post_i.ready.eq(self.post_i.ready & ~pool_mode),
            self.conv_post_o.valid.eq(self.post_o.valid & ~pool_mode),
            self.conv_post_o.payload.eq(self.post_o.payload),
            # The drain's post-chain input as it is; a pool pass overrides the fields it uses
            # (acc, shift) and leaves the rest, which CBN's bypass ignores: no 2016-bit
            # multiplexer, and a core without residual layers keeps its constant-zero
            # residual slots (no residual multipliers).
            self.post_i.payload.eq(self.conv_post_i.payload),
        ]
        with m.If(~pool_mode):
            m.d.comb += [
                self.rd_cmd.valid.eq(self.conv_rd_cmd.valid),
                self.rd_cmd.payload.eq(self.conv_rd_cmd.payload),
                self.rd_data.ready.eq(self.conv_rd_data.ready),
                self.rd_status.ready.eq(self.conv_rd_status.ready),
                self.wr_cmd.valid.eq(self.conv_wr_cmd.valid),
                self.wr_cmd.payload.eq(self.conv_wr_cmd.payload),
                self.wr_data.valid.eq(self.conv_wr_data.valid),
                self.wr_data.payload.eq(self.conv_wr_data.payload),
                self.wr_status.ready.eq(self.conv_wr_status.ready),
                self.post_i.valid.eq(self.conv_post_i.valid),
                self.post_o.ready.eq(self.conv_post_o.ready),
                self.post_cfg.eq(self.conv_post_cfg),
            ]
        with m.Else():
            m.d.comb += [self.rd_cmd.payload.eq(pp_cmd_rd), self.wr_cmd.payload.eq(pp_cmd_wr)]

    def _pool_config(self, m, d):
        """The post chain's configuration of a pool pass: CMaxPool on the map, the rest
        bypassed."""
        cfg = self.post_cfg
        m.d.comb += [cfg.eq(self.conv_post_cfg), cfg.cbn.bypass.eq(1), cfg.crelu.bypass.eq(1),
                     cfg.pool.bypass.eq(0), cfg.pool.groups.eq(1)]
        for a in range(3):
            m.d.comb += [cfg.pool.size[a].eq(d.in_shape[a]),
                         cfg.pool.window[a].eq(d.pool_window[a]),
                         cfg.pool.stride[a].eq(d.pool_stride[a]),
                         cfg.pool.padding[a].eq(d.pool_padding[a])]

    def elaborate(self, platform):
        m = Module()
        aw, ctl = self.addr_width, self.ctl
        d = ctl.desc
        pool_mode = Signal()
        m.d.comb += self.active.eq(pool_mode)
        pp_group = Signal(16)
        pp_groups = Signal(16)
        m.d.comb += pp_groups.eq((d.in_slots + 7) >> 3)
        pp_last_group = pp_group == pp_groups - 1
        pp_rd_ok = Signal()
        pp_wr_ok = Signal()
        pp_read_failed = Signal()  # after a read error, zero beats complete the write box
        pp_box_in = Signal(box_layout(aw))
        pp_box_out = Signal(box_layout(aw))
        pp_in_base = Signal(aw)
        pp_out_base = Signal(aw)
        m.d.comb += [
            pp_box_in.addr.eq(pp_in_base), pp_box_in.stride_g.eq(d.in_stride[0]),
            pp_box_in.stride_d.eq(d.in_stride[1]), pp_box_in.stride_h.eq(d.in_stride[2]),
            pp_box_in.groups.eq(1), pp_box_in.d_len.eq(d.in_shape[0]),
            pp_box_in.h_len.eq(d.in_shape[1]), pp_box_in.w_len.eq(d.in_shape[2]),
            pp_box_in.last_lanes.eq(8),
            pp_box_out.addr.eq(pp_out_base), pp_box_out.stride_g.eq(d.out_stride[0]),
            pp_box_out.stride_d.eq(d.out_stride[1]), pp_box_out.stride_h.eq(d.out_stride[2]),
            pp_box_out.groups.eq(1), pp_box_out.d_len.eq(d.out_shape[0]),
            pp_box_out.h_len.eq(d.out_shape[1]), pp_box_out.w_len.eq(d.out_shape[2]),
            pp_box_out.last_lanes.eq(Mux(pp_last_group, d.out_slots - (pp_group << 3), 8)),
        ]
        self._route(m, pool_mode, pp_box_in, pp_box_out)
        rd_cmd, rd_data, rd_status = self.rd_cmd, self.rd_data, self.rd_status
        wr_cmd, wr_data, wr_status = self.wr_cmd, self.wr_data, self.wr_status
        with m.If(pool_mode):
            self._pool_config(m, d)
            # Read beats (or, after a read error, zero beats until the write box is complete)
            # feed the post chain; its output the write.
            beat = data.View(data.ArrayLayout(data.StructLayout(
                {"re": signed(8), "im": signed(8)}), SLOTS_PER_BEAT), rd_data.payload.data)
            m.d.comb += [self.post_i.valid.eq(rd_data.valid | (pp_read_failed & ~pp_wr_ok)),
                         rd_data.ready.eq(self.post_i.ready)]
            for lane in range(SLOTS_PER_BEAT):
                pl = self.post_i.payload[lane]
                m.d.comb += [pl.acc.re.eq(beat[lane].re), pl.acc.im.eq(beat[lane].im),
                             pl.shift.re.eq(0), pl.shift.im.eq(0)]
            m.d.comb += [wr_data.valid.eq(self.post_o.valid),
                         wr_data.payload.data.eq(self.post_o.payload),
                         self.post_o.ready.eq(wr_data.ready)]
        rd_bad = rd_status.valid & (rd_status.payload.code != Status.OK)
        wr_bad = wr_status.valid & (wr_status.payload.code != Status.OK)
        with m.FSM(name="pool"):
            with m.State("IDLE"):
                with m.If(ctl.start & (ctl.new_desc.op == OP_POOL)):
                    m.d.sync += [pool_mode.eq(1), pp_group.eq(0),
                                 pp_in_base.eq(ctl.new_desc.in_base),
                                 pp_out_base.eq(ctl.new_desc.out_base)]
                    m.next = "CMD"
            with m.State("CMD"):
                m.d.comb += [rd_cmd.valid.eq(~pp_rd_ok), wr_cmd.valid.eq(~pp_wr_ok)]
                with m.If(rd_cmd.ready & ~pp_rd_ok):
                    m.d.sync += pp_rd_ok.eq(1)
                with m.If(wr_cmd.ready & ~pp_wr_ok):
                    m.d.sync += pp_wr_ok.eq(1)
                with m.If((pp_rd_ok | rd_cmd.ready) & (pp_wr_ok | wr_cmd.ready)):
                    m.d.sync += [pp_rd_ok.eq(0), pp_wr_ok.eq(0)]
                    m.next = "DATA"
            with m.State("DATA"):
                m.d.comb += [rd_status.ready.eq(~pp_rd_ok), wr_status.ready.eq(~pp_wr_ok)]
                with m.If(rd_status.valid & ~pp_rd_ok):
                    m.d.sync += pp_rd_ok.eq(1)
                    with m.If(rd_status.payload.code != Status.OK):
                        m.d.sync += pp_read_failed.eq(1)
                        m.d.comb += [self.fail.valid.eq(1),
                                     self.fail.code.eq(rd_status.payload.code.as_value()),
                                     self.fail.addr.eq(rd_status.payload.addr)]
                with m.If(wr_status.valid & ~pp_wr_ok):
                    m.d.sync += pp_wr_ok.eq(1)
                    with m.If(wr_status.payload.code != Status.OK):
                        m.d.comb += [self.fail.valid.eq(1),
                                     self.fail.code.eq(4 | wr_status.payload.code.as_value()),
                                     self.fail.addr.eq(wr_status.payload.addr)]
                with m.If((pp_rd_ok | rd_status.valid) & (pp_wr_ok | wr_status.valid)):
                    m.d.sync += [pp_rd_ok.eq(0), pp_wr_ok.eq(0), pp_group.eq(pp_group + 1),
                                 pp_in_base.eq(pp_in_base + d.in_stride[0]),
                                 pp_out_base.eq(pp_out_base + d.out_stride[0])]
                    with m.If(pp_last_group | ctl.failed | pp_read_failed | rd_bad | wr_bad):
                        m.d.comb += self.done.eq(1)
                        m.d.sync += [pool_mode.eq(0), pp_read_failed.eq(0)]
                        m.next = "IDLE"
                    with m.Else():
                        m.next = "CMD"
        return m
