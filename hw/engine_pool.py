"""The layer engine's pool pass: a pool descriptor streamed from the read DMA through the post
chain to the write DMA, which it takes over from the conv walkers while it runs; with more AXI
ports, one slot group per port at once, each further one from its port's read engine through a
CMaxPool of its own to its port's write engine."""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from fcircnn.arch.descriptor import OP_POOL, region_code
from fcircnn.arch.geometry import SLOTS_PER_BEAT
from fcircnn.arch.ports import AXI_PORTS

from .axi_dma_box import Status, box_layout, check_addr_width, status_layout
from .axi_dma_read import read_beat_layout
from .axi_dma_write import write_beat_layout
from .common import mul_const, rejecting
from .engine_walk import control_signature, fail_signature
from .post_cbn import cbn_input_layout
from .post_chain import post_config_layout
from .post_maxpool import maxpool_config_layout
from .post_quantize import slot_layout

__all__ = ["EnginePoolPass"]


class EnginePoolPass(wiring.Component):
    """Runs a pool descriptor (``op`` :data:`~fcircnn.arch.descriptor.OP_POOL`): per slot group
    of the input map one read box (the group's whole map) and one write box (the pooled map).

    Lane 0 streams its group's read beats on ``rd_*`` through the post chain (CBN bypassed,
    shift 0, CMaxPool on the map) into the write on ``wr_*``. With ``lanes = n > 1``
    (:attr:`~fcircnn.arch.ports.PortMap.pool_lanes`) lane ``k`` streams group ``g + k`` at the
    same time on port ``k`` (``rdk_*``, ``wrk_*``) through a CMaxPool of its own (``poolk_*``,
    the engine's): groups ``g .. g + n - 1`` are one step, every lane's commands issued in the
    same cycle and the step over once all their statuses are in (lanes past the last group sit
    the last step out). The bypassed stages of lane 0 pass an int8 slot unchanged (the maps
    are the quantizer's, in ``[-127, 127]``), so every lane computes
    :func:`~fcircnn.models.spectral.cmaxpool`.

    While it runs (``active``) it owns the DMA ports and the post chain; otherwise it passes the
    conv walkers' ``conv_*`` ports through to them unchanged (the loaders' reads, the store's
    writes, the drain's post-chain input, output and configuration).

    Contract
    --------
    * ``ctl.start`` with a pool descriptor starts it; ``done`` pulses after the last step's
      statuses.
    * A read status other than OK pulses ``fail`` with it; that lane's write box is completed
      with junk beats, the other lanes' transfers complete, then the pass ends. A write status
      other than OK pulses ``fail`` (code ``4 | status``) and ends the pass after the step.
      Failures in the same cycle report one: writes before reads, lower lanes first. After
      ``ctl.failed`` (another walker's failure, or an abort) every lane's write box is
      completed with junk beats too (the top level refuses its next burst), so a write box
      that wants more beats than the read box gives never waits for ever. Once a lane's
      write status is in, its CMaxPool's further voxels are dropped, so a read box that gives
      more than the write box takes (a damaged descriptor's) drains its reads and the step
      ends. The engine's reset between descriptors empties CMaxPool.

    Parameters
    ----------
    addr_width : int
    max_size, max_groups :
        The post chain's configuration bounds (:func:`~fcircnn.hw.post_chain.post_config_layout`).
    lanes : int
        Slot groups at once, 1..4 (lane ``k`` needs port ``k``'s read and write engines).
    """

    def __init__(self, *, addr_width: int = 40, max_size=(1, 1, 1), max_groups: int = 1,
                 lanes: int = 1):
        with rejecting(self):
            check_addr_width(addr_width)
            cfg = post_config_layout(max_size, max_groups)
            if type(lanes) is not int or not 1 <= lanes <= _MAX_LANES:
                raise ValueError(f"lanes must be 1..{_MAX_LANES}, not {lanes!r}")
        self.addr_width = addr_width
        self.lanes = lanes
        box, status = stream.Signature(box_layout(addr_width)), stream.Signature(
            status_layout(addr_width))
        rd, wr = stream.Signature(read_beat_layout()), stream.Signature(write_beat_layout())
        post_in = stream.Signature(cbn_input_layout(SLOTS_PER_BEAT))
        post_out = stream.Signature(slot_layout(SLOTS_PER_BEAT))
        members = {
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
        }
        for k in range(1, lanes):
            members |= {
                f"rd{k}_cmd": Out(box), f"rd{k}_data": In(rd), f"rd{k}_status": In(status),
                f"wr{k}_cmd": Out(box), f"wr{k}_data": Out(wr), f"wr{k}_status": In(status),
                f"pool{k}_i": Out(post_out), f"pool{k}_o": In(post_out),
                f"pool{k}_cfg": Out(maxpool_config_layout(max_size, max_groups)),
                f"conv_rd{k}_cmd": In(box), f"conv_rd{k}_data": Out(rd),
                f"conv_rd{k}_status": Out(status),
            }
        super().__init__(members)

    def _route(self, m, pool_mode, boxes):
        """The DMA and post-chain ports: the conv walkers' unless a pool pass runs; during one,
        the read and write boxes of each lane (``boxes``)."""
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
        for k in range(1, self.lanes):  # port k's reads: its loader's
            rd, conv = self._read_ports(k)
            m.d.comb += [
                conv.cmd.ready.eq(rd.cmd.ready),
                conv.data.valid.eq(rd.data.valid),
                conv.data.payload.eq(rd.data.payload),
                conv.status.valid.eq(rd.status.valid),
                conv.status.payload.eq(rd.status.payload),
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
            for k in range(1, self.lanes):
                rd, conv = self._read_ports(k)
                m.d.comb += [
                    rd.cmd.valid.eq(conv.cmd.valid),
                    rd.cmd.payload.eq(conv.cmd.payload),
                    rd.data.ready.eq(conv.data.ready),
                    rd.status.ready.eq(conv.status.ready),
                ]
        with m.Else():
            for lane, (box_in, box_out) in zip(self._lanes(), boxes, strict=True):
                m.d.comb += [lane.rd_cmd.payload.eq(box_in), lane.wr_cmd.payload.eq(box_out)]

    def _read_ports(self, k: int):
        """Port ``k``'s read engine and the conv walkers' side of it: each a namespace of
        ``cmd``, ``data``, ``status``."""
        return tuple(_Read(*(getattr(self, f"{pre}rd{k}_{n}") for n in ("cmd", "data", "status")))
                     for pre in ("", "conv_"))

    def _lanes(self) -> list:
        """Per lane its ports: ``rd_cmd``, ``rd_data``, ``rd_status``, ``wr_cmd``, ``wr_data``,
        ``wr_status``."""
        names = ("rd_cmd", "rd_data", "rd_status", "wr_cmd", "wr_data", "wr_status")
        return [_Ports(**{n: getattr(self, n if k == 0 else n.replace("_", f"{k}_", 1))
                          for n in names}) for k in range(self.lanes)]

    def _pool_config(self, m, d):
        """The post chain's configuration of a pool pass: CMaxPool on the map, the rest
        bypassed (a pool pass has no transform: :func:`~fcircnn.arch.descriptor.
        transform_fault`)."""
        cfg = self.post_cfg
        m.d.comb += [cfg.eq(self.conv_post_cfg), cfg.cbn.bypass.eq(1), cfg.crelu.bypass.eq(1),
                     cfg.pool.bypass.eq(0), cfg.pool.groups.eq(1), cfg.lane0.enable.eq(0),
                     cfg.rfft.enable.eq(0)]
        for a in range(3):
            m.d.comb += [cfg.pool.size[a].eq(d.in_shape[a]),
                         cfg.pool.window[a].eq(d.pool_window[a]),
                         cfg.pool.stride[a].eq(d.pool_stride[a]),
                         cfg.pool.padding[a].eq(d.pool_padding[a])]

    def _lane_pool_config(self, m, start, desc):
        """The CMaxPool configuration of lanes 1 and up: a register loaded when a pool
        descriptor starts (``desc``: its descriptor), a 1x1x1 map before the first one.
        CMaxPool needs a valid map size at all times: with size 0 it would emit padding voxels
        while idle."""
        layout = self.pool1_cfg.shape()
        cfg1 = Signal(layout, init={"groups": 1, "size": [1, 1, 1], "window": [1, 1, 1],
                                    "stride": [1, 1, 1]})
        m.d.comb += [getattr(self, f"pool{k}_cfg").eq(cfg1) for k in range(1, self.lanes)]
        with m.If(start):
            for a in range(3):
                m.d.sync += [cfg1.size[a].eq(desc.in_shape[a]),
                             cfg1.window[a].eq(desc.pool_window[a]),
                             cfg1.stride[a].eq(desc.pool_stride[a]),
                             cfg1.padding[a].eq(desc.pool_padding[a])]

    def _boxes(self, m, d, group, groups, in_base, out_base):
        """Per lane the read box (the group's whole map) and write box (its pooled map) of the
        step starting at slot group ``group``; lane ``k`` moves group ``group + k``."""
        aw = self.addr_width
        boxes = []
        for k in range(self.lanes):
            box_in, box_out = Signal(box_layout(aw)), Signal(box_layout(aw))
            last = group + k == groups - 1
            m.d.comb += [
                box_in.addr.eq(in_base + mul_const(d.in_stride[0], k)),
                box_in.stride_g.eq(d.in_stride[0]),
                box_in.stride_d.eq(d.in_stride[1]), box_in.stride_h.eq(d.in_stride[2]),
                box_in.groups.eq(1), box_in.d_len.eq(d.in_shape[0]),
                box_in.h_len.eq(d.in_shape[1]), box_in.w_len.eq(d.in_shape[2]),
                box_in.last_lanes.eq(8),
                box_out.addr.eq(out_base + mul_const(d.out_stride[0], k)),
                box_out.stride_g.eq(d.out_stride[0]),
                box_out.stride_d.eq(d.out_stride[1]), box_out.stride_h.eq(d.out_stride[2]),
                box_out.groups.eq(1), box_out.d_len.eq(d.out_shape[0]),
                box_out.h_len.eq(d.out_shape[1]), box_out.w_len.eq(d.out_shape[2]),
                box_out.last_lanes.eq(Mux(last, d.out_slots - ((group + k) << 3), 8)),
                box_in.region.eq(region_code("in")), box_out.region.eq(region_code("out")),
            ]
            boxes.append((box_in, box_out))
        return boxes

    def _datapath(self, m, on, read_failed, wr_ok, wr_done):
        """Each lane's read beats (or, after its read failed or the layer failed, junk beats
        until its write box is complete: a damaged descriptor's write box may want more beats
        than its read box gives) into its CMaxPool, and its output into its write; once its
        write status is in (``wr_done``), its pooled voxels are dropped: a damaged
        descriptor's read box may give more than its write box takes, and the reads in flight
        must drain for the step (or an abort) to end."""
        lanes = self._lanes()
        beat = data.View(data.ArrayLayout(data.StructLayout(
            {"re": signed(8), "im": signed(8)}), SLOTS_PER_BEAT), lanes[0].rd_data.payload.data)
        for lane in range(SLOTS_PER_BEAT):
            pl = self.post_i.payload[lane]
            m.d.comb += [pl.acc.re.eq(beat[lane].re), pl.acc.im.eq(beat[lane].im),
                         pl.shift.re.eq(0), pl.shift.im.eq(0)]
        pools = [(self.post_i, self.post_o)]
        for k in range(1, self.lanes):
            pool_i = getattr(self, f"pool{k}_i")
            m.d.comb += pool_i.payload.eq(lanes[k].rd_data.payload.data)
            pools.append((pool_i, getattr(self, f"pool{k}_o")))
        for k, (port, (pool_i, pool_o)) in enumerate(zip(lanes, pools, strict=True)):
            m.d.comb += [
                pool_i.valid.eq(on[k] & (port.rd_data.valid
                                         | ((read_failed[k] | self.ctl.failed) & ~wr_ok[k]))),
                port.rd_data.ready.eq(pool_i.ready),
                port.wr_data.valid.eq(on[k] & pool_o.valid & ~wr_done[k]),
                port.wr_data.payload.data.eq(pool_o.payload),
                pool_o.ready.eq(port.wr_data.ready | wr_done[k]),
            ]

    def _steps(self, m, ctl, group, groups, advance):
        """Per lane whether its group of the step starting at ``group`` exists, and whether
        the step is the last: registers, set at the start and at each step's end for the next
        step (comparisons on ``group`` would sit on the path into the write queue and to the
        sequencer and take a ninth LUT level: Yosys, ``test32_4ports`` with four lanes,
        ``test16_2ports`` with one once the lanes drop their surplus, ``wr_done``)."""
        n = self.lanes
        live = [Signal(name=f"live{k}") for k in range(n)]
        last_step = Signal()
        new_groups = (ctl.new_desc.in_slots + 7) >> 3
        with m.If(ctl.start & (ctl.new_desc.op == OP_POOL)):
            m.d.sync += [live[k].eq(k < new_groups) for k in range(n)]
            m.d.sync += last_step.eq(n >= new_groups)
        with m.Elif(advance):
            m.d.sync += [live[k].eq(group + n + k < groups) for k in range(n)]
            m.d.sync += last_step.eq(group + 2 * n >= groups)
        return live, last_step

    def _report(self, m, lanes, rd_ok, wr_ok):
        """``fail`` for the first failing status this cycle (writes before reads, lane 0
        first); returns whether any status this cycle failed."""
        cases = []
        for kind, oks in (("wr", wr_ok), ("rd", rd_ok)):
            for port, ok in zip(lanes, oks, strict=True):
                st = getattr(port, f"{kind}_status")
                bad = st.valid & ~ok & (st.payload.code != Status.OK)
                code = st.payload.code.as_value() | (4 if kind == "wr" else 0)
                cases.append((bad, code, st.payload.addr))
        any_bad = Signal()
        with m.If(cases[0][0]):
            m.d.comb += [self.fail.valid.eq(1), self.fail.code.eq(cases[0][1]),
                         self.fail.addr.eq(cases[0][2])]
        for bad, code, addr in cases[1:]:
            with m.Elif(bad):
                m.d.comb += [self.fail.valid.eq(1), self.fail.code.eq(code),
                             self.fail.addr.eq(addr)]
        m.d.comb += any_bad.eq(self.fail.valid)
        return any_bad

    def elaborate(self, platform):
        m = Module()
        aw, ctl, n = self.addr_width, self.ctl, self.lanes
        d = ctl.desc
        pool_mode = Signal()
        m.d.comb += self.active.eq(pool_mode)
        group = Signal(16)  # the step's first slot group
        groups = Signal(16)
        m.d.comb += groups.eq((d.in_slots + 7) >> 3)
        in_base, out_base = Signal(aw), Signal(aw)
        rd_ok = [Signal(name=f"rd_ok{k}") for k in range(n)]  # command, then status, taken
        wr_ok = [Signal(name=f"wr_ok{k}") for k in range(n)]
        read_failed = [Signal(name=f"read_failed{k}") for k in range(n)]
        wr_done = [Signal(name=f"wr_done{k}") for k in range(n)]  # write status in, this step
        failed = Signal()  # a status of this step failed
        # Lane k runs in this step unless its group is past the last one.
        on = [Signal(name=f"on{k}") for k in range(n)]
        advance = Signal()  # the step ends (for the registered flags)
        live, last_step = self._steps(m, ctl, group, groups, advance)
        m.d.comb += [o.eq(pool_mode & live_k) for o, live_k in zip(on, live, strict=True)]
        self._route(m, pool_mode, self._boxes(m, d, group, groups, in_base, out_base))
        lanes = self._lanes()
        with m.If(pool_mode):
            self._pool_config(m, d)
            self._datapath(m, on, read_failed, wr_ok, wr_done)
        # Every transfer of the step: (stream, taken flag, lane on).
        cmds = [(p.rd_cmd, rd_ok[k], on[k]) for k, p in enumerate(lanes)] + \
               [(p.wr_cmd, wr_ok[k], on[k]) for k, p in enumerate(lanes)]
        stats = [(p.rd_status, rd_ok[k], on[k]) for k, p in enumerate(lanes)] + \
                [(p.wr_status, wr_ok[k], on[k]) for k, p in enumerate(lanes)]
        if n > 1:
            self._lane_pool_config(m, ctl.start & (ctl.new_desc.op == OP_POOL), ctl.new_desc)
        with m.FSM(name="pool"):
            with m.State("IDLE"):
                with m.If(ctl.start & (ctl.new_desc.op == OP_POOL)):
                    m.d.sync += [pool_mode.eq(1), group.eq(0),
                                 in_base.eq(ctl.new_desc.in_base),
                                 out_base.eq(ctl.new_desc.out_base)]
                    m.next = "CMD"
            with m.State("CMD"):
                for cmd, ok, lane_on in cmds:
                    m.d.comb += cmd.valid.eq(lane_on & ~ok)
                    with m.If(cmd.ready & lane_on & ~ok):
                        m.d.sync += ok.eq(1)
                with m.If(_all(ok | cmd.ready | ~lane_on for cmd, ok, lane_on in cmds)):
                    m.d.sync += [ok.eq(0) for _, ok, _ in cmds]
                    m.next = "DATA"
            with m.State("DATA"):
                bad = self._report(m, lanes, rd_ok, wr_ok)
                for k, (port, ok) in enumerate(zip(lanes, rd_ok, strict=True)):
                    with m.If(port.rd_status.valid & ~ok & (port.rd_status.payload.code
                                                            != Status.OK)):
                        m.d.sync += read_failed[k].eq(1)
                for st, ok, lane_on in stats:
                    m.d.comb += st.ready.eq(lane_on & ~ok)
                    with m.If(st.valid & lane_on & ~ok):
                        m.d.sync += ok.eq(1)
                for k, port in enumerate(lanes):
                    with m.If(port.wr_status.valid & on[k] & ~wr_ok[k]):
                        m.d.sync += wr_done[k].eq(1)
                with m.If(bad):
                    m.d.sync += failed.eq(1)
                with m.If(_all(ok | st.valid | ~lane_on for st, ok, lane_on in stats)):
                    m.d.sync += [ok.eq(0) for _, ok, _ in stats]
                    m.d.sync += [w.eq(0) for w in wr_done]
                    m.d.comb += advance.eq(1)
                    m.d.sync += [group.eq(group + n),
                                 in_base.eq(in_base + mul_const(d.in_stride[0], n)),
                                 out_base.eq(out_base + mul_const(d.out_stride[0], n))]
                    with m.If(last_step | ctl.failed | failed | bad
                              | _any(read_failed)):
                        m.d.comb += self.done.eq(1)
                        m.d.sync += [pool_mode.eq(0), failed.eq(0)]
                        m.d.sync += [f.eq(0) for f in read_failed]
                        m.next = "IDLE"
                    with m.Else():
                        m.next = "CMD"
        return m


#: Lanes a pool pass can have: one per AXI port.
_MAX_LANES = max(AXI_PORTS)


@dataclass(frozen=True)
class _Read:
    """A read engine's three streams."""

    cmd: object
    data: object
    status: object


@dataclass(frozen=True)
class _Ports:
    """One lane's DMA ports."""

    rd_cmd: object
    rd_data: object
    rd_status: object
    wr_cmd: object
    wr_data: object
    wr_status: object


def _all(values):
    """AND of a non-empty iterable of Amaranth values."""
    values = list(values)
    out = values[0]
    for v in values[1:]:
        out = out & v
    return out


def _any(values):
    """OR of a non-empty list of Amaranth values."""
    out = values[0]
    for v in values[1:]:
        out = out | v
    return out
