"""Layer engine of one core: runs one layer descriptor through DMA, buffers, PE array and
post-units, with loads, compute, post-processing and stores overlapped.

The engine is its parts joined: the control (:mod:`~fcircnn.hw.engine_control`), four walkers
(:mod:`~fcircnn.hw.engine_loader`, :mod:`~fcircnn.hw.engine_compute`,
:mod:`~fcircnn.hw.engine_drain`, :mod:`~fcircnn.hw.engine_store`), the pool pass
(:mod:`~fcircnn.hw.engine_pool`), and the buffers, PE array and post chain they drive.
"""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import memory, stream, wiring
from amaranth.lib.wiring import In, Out

from fcircnn.arch.descriptor import (
    FLAG_IQUARTER,
    FLAG_ISPLIT,
    FLAG_SPREAD,
    FLAG_WQUARTER,
    FLAG_WSPLIT,
    descriptor_layout,
)
from fcircnn.arch.geometry import (
    SLOTS_PER_BEAT,
    CoreGeometry,
    EngineGeometry,
    core_lanes,
    engine_geometry,
    pool_carry,
)
from fcircnn.arch.ports import PortMap
from fcircnn.arch.registers import ERROR_CODES

from .axi_dma_box import box_layout, status_layout
from .axi_dma_read import check_commands, read_beat_layout
from .axi_dma_write import write_beat_layout
from .buffer_input import InputBuffer
from .buffer_output import OutputBuffer
from .buffer_psum import PartialSumBuffer
from .buffer_weight import WeightBuffer
from .common import check_block_size, check_tiles, mul_small, rejecting
from .engine_compute import EngineCompute
from .engine_control import EngineControl
from .engine_drain import EngineDrain, post_chain_size
from .engine_loader import EngineLoader, params_signature
from .engine_pool import EnginePoolPass
from .engine_store import EngineStore
from .engine_walk import RowLanes
from .pe_array import PEArray
from .post_chain import PostChain
from .post_maxpool import CMaxPool

__all__ = ["ERROR_CODES", "LayerEngine"]

#: The loaders' submodule names, by port (:meth:`~fcircnn.arch.ports.PortMap.loader_reads`).
_LOADER_NAMES = ("loader", "wloader", "loader2", "loader3")


class LayerEngine(wiring.Component):
    """Runs one layer descriptor on one core: conv/fc/gap layers through the PE array, pool
    passes through the post-units.

    The engine only instantiates its parts and connects them::

        desc, start ──> EngineControl ──ctl──> loader, compute, drain, store, pool pass
                                      <─fail── loader, store, pool pass
        rd_* <──> EnginePoolPass <──conv_rd_*──> EngineLoader ──> InputBuffer, WeightBuffer,
                                                               (residual) InputBuffer,
                                                               post-parameter memory
        InputBuffer, WeightBuffer ──> EngineCompute ──> PEArray ──> EngineCompute ──>
                                                               PartialSumBuffer
        PartialSumBuffer, parameters, residual ──> EngineDrain ──conv_post_*──> EnginePoolPass
                                                  ──> PostChain ──> EngineDrain ──> OutputBuffer
        OutputBuffer ──> EngineStore ──conv_wr_*──> EnginePoolPass ──> wr_*

    Conv layers (``op`` conv or gap) walk the tile loop nest ``mt`` (output-channel tiles) >
    ``(td, th, tw)`` (output tiles of the descriptor's ``tile`` size, clipped at the map's
    edge) > ``nt`` (input-channel tiles) with four decoupled walkers, each its own component
    with its own copy of the walk (:class:`~fcircnn.hw.engine_walk.TileWalk`):

    * **loader** (:class:`~fcircnn.hw.engine_loader.EngineLoader`): per m-tile the post records into
      a double-buffered parameter memory; per tile the residual box (``FLAG_RESIDUAL``); per
      ``(tile, nt)`` the input box (conv padding as DMA zero padding) into
      :class:`~fcircnn.hw.buffer_input.InputBuffer` and the ``(mt, nt)`` weight tile into
      :class:`~fcircnn.hw.buffer_weight.WeightBuffer`; it runs ahead as far as the ping-pong buffers
      allow, so loads overlap compute. With two AXI ports (``axi_ports``) a second loader
      (``wloader``) issues the weight tiles on ``rd1_*`` and the first the rest on ``rd_*``;
      a descriptor with ``FLAG_WSPLIT`` has each loader read one half of every weight tile,
      both halves filling the weight buffer at once (``splits``); one with ``FLAG_ISPLIT``
      has the first read the lower half of every input box's slot groups and the second the
      upper half before its weight tile, both filling the input buffer at once
      (``splits_inputs``). With three ports a third loader (``loader2``, on ``rd2_*``) reads
      the upper halves of split input boxes, with four a fourth (``loader3``, on ``rd3_*``)
      the second halves of split weight tiles and, on a core with residual layers, the
      residual boxes (:meth:`~fcircnn.arch.ports.PortMap.loader_reads`);
      with four a descriptor with ``FLAG_WQUARTER`` has the four loaders read one quarter of
      every weight tile each, all four filling the weight buffer at once (``quarters``), and
      one with ``FLAG_IQUARTER`` one quarter of every input box's slot groups each, all four
      filling the input buffer at once (``quarters_inputs``);
    * **compute** (:class:`~fcircnn.hw.engine_compute.EngineCompute`): per ``(tile, nt)`` one beat
      per output voxel and kernel tap into :class:`~fcircnn.hw.pe_array.PEArray`: with ``lanes =
      Td`` (the core unrolls ``td``) the tile's ``Td`` output depths in parallel, one beat per ``(r,
      c, tap)``; with ``lanes = 1`` one depth at a time, one beat per ``(d, r, c, tap)``; the sums
      of every voxel go to :class:`~fcircnn.hw.buffer_psum.PartialSumBuffer`, which adds the
      ``n_tiles`` passes;
    * **drain** (:class:`~fcircnn.hw.engine_drain.EngineDrain`): per finished tile, ``lanes = 8``
      slots a beat with their post parameters and residual slots into
      :class:`~fcircnn.hw.post_chain.PostChain` (CBN + residual, quantize, CReLU), into
      :class:`~fcircnn.hw.buffer_output.OutputBuffer`, in raster order (depth, row, column, slot
      group fastest). With ``FLAG_POOL`` on a conv descriptor (a fused pool, :func:`pool_fuses`)
      CMaxPool pools each tile as its own map (its slot groups interleaved) and only the pooled
      voxels reach the output buffer; the drain starts a tile once the previous one has left
      CMaxPool (its configuration follows the tile). A fused pool of one depth is taken on
      the partial sums instead (:class:`~fcircnn.hw.psum_pool.PartialSumPool`: one beat per
      pooled voxel, CMaxPool bypassed). Otherwise the pool is bypassed;
    * **store** (:class:`~fcircnn.hw.engine_store.EngineStore`): per finished output tile, one DMA
      write box (NC/8DHW8, the pooled tile with a fused pool), overlapping the next tile's work.

    Timing: no walker derives its tile's geometry combinationally from the descriptor; each keeps it
    in registers beside its counters (:class:`~fcircnn.hw.engine_walk.TileWalk`), and the loader
    computes the input box in two more register stages, which its phases before the input command
    already take. The longest register-to-register path is within 8 LUT levels (Yosys, flattened;
    ``bench/README.md``).

    A pool pass (``op`` :data:`~fcircnn.arch.descriptor.OP_POOL`,
    :class:`~fcircnn.hw.engine_pool.EnginePoolPass`) streams the input map slot
    group by slot group from the read DMA through the post chain (CBN bypassed, shift 0,
    CMaxPool on) to the write DMA; with more ports one group per port at once, lane ``k`` from
    ``rdk_*`` through a CMaxPool of its own (``poolk``) to ``wrk_*``
    (:attr:`~fcircnn.arch.ports.PortMap.pool_lanes`).

    Contract
    --------
    * ``start`` (one cycle, engine idle) latches ``desc``; ``done`` pulses once the layer's
      last store has completed. Each layer output equals the golden integer contract
      (:func:`fcircnn.models.network.run_int`) for the compiler's descriptors.
    * A DMA status other than OK, or ``abort`` (code
      :data:`~fcircnn.arch.registers.ERROR_ABORTED`), stops the engine from issuing further
      transfers and raises ``failing`` (the top level then refuses every new burst: its
      windows close); once every transfer in flight has completed, ``error`` pulses with
      ``error_code`` (:data:`ERROR_CODES`) and ``error_addr``. A write burst already issued
      whose beats the datapath no longer produces is completed with zero beats by the store.
      The engine must then be reset before the next ``start`` (the top level does).
    * ``pe_busy``: the PE array takes a beat this cycle; ``dma_stall``: the compute walker
      waits for a load.

    Parameters
    ----------
    Tn, Tm, Td, Tr, Tc : int
        The core's tiles (``Tm`` a multiple of 16, ``Tn`` a multiple of ``B``).
    lanes : int
        Output depths the PE array computes in parallel: ``Td`` (default; the ``td`` loop
        unrolled) or 1 (``td`` not unrolled: the compute walker steps through the tile's
        depth, with a PE array ``Td`` times smaller).
    B : int
        Block size.
    geometry : EngineGeometry
        Buffer sizes (:func:`engine_geometry`).
    addr_width : int
        AXI address width.
    axi_ports : int
        The accelerator's AXI ports (:class:`~fcircnn.arch.ports.PortMap`): with a weight port
        the weight tiles have a loader of their own, reading on ``rd1_*`` (its read engine),
        beside the input loader on ``rd_*``; ports 2 and 3 (``rd2_*``, ``rd3_*``) carry the
        split halves where the core splits them; pool-pass lane ``k`` reads on ``rdk_*`` and
        writes on ``wrk_*`` (port ``k``'s write engine).
    commands : int
        Read commands each loader keeps in flight (``dma_queue``); its read engine must queue
        as many (:class:`~fcircnn.hw.axi_dma_read.AxiDmaRead` ``commands``).
    """

    def __init__(self, Tn: int, Tm: int, Td: int, Tr: int, Tc: int, *, B: int = 8,
                 geometry: EngineGeometry, addr_width: int = 40, lanes: int | None = None,
                 axi_ports: int = 1, commands: int = 1):
        with rejecting(self):
            check_commands("commands", commands)
            check_tiles(Tn=Tn, Tm=Tm, Td=Td, Tr=Tr, Tc=Tc)
            check_block_size(B)
            lanes = Td if lanes is None else lanes
            #: The core's geometry: the channel-tile rule, slot groups, lanes (validated).
            self.core = CoreGeometry(Tn, Tm, Td, Tr, Tc, B, lanes)
            #: Which port carries which read.
            self.ports = PortMap(axi_ports)
            #: Whether a descriptor can split this core's weight tiles over two ports.
            self.splits = self.ports.splits_weights(self.core.weight_tile_beats(1))
            #: Whether a descriptor can split this core's input boxes over two ports.
            self.splits_inputs = self.ports.splits_inputs(self.core.in_groups)
            #: Whether a descriptor can read this core's weight tiles in quarters over four.
            self.quarters = self.ports.quarters_weights(self.core.weight_tile_beats(1))
            #: Whether a descriptor can read this core's input boxes in quarters over four.
            self.quarters_inputs = self.ports.quarters_inputs(self.core.in_groups)
        self.Tn, self.Tm, self.Td, self.Tr, self.Tc, self.B = Tn, Tm, Td, Tr, Tc, B
        self.lanes = lanes
        self.commands = commands
        self.geometry = geometry
        self.addr_width = addr_width
        self.G = self.core.out_groups
        self.subs = self.core.subs
        members = {
            "desc": In(descriptor_layout()),
            "start": In(1),
            "done": Out(1),
            "error": Out(1),
            "error_code": Out(8),
            "error_addr": Out(addr_width),
            "busy": Out(1),
            "abort": In(1),
            "failing": Out(1),
            "rd_cmd": Out(stream.Signature(box_layout(addr_width))),
            "rd_data": In(stream.Signature(read_beat_layout())),
            "rd_status": In(stream.Signature(status_layout(addr_width))),
            "wr_cmd": Out(stream.Signature(box_layout(addr_width))),
            "wr_data": Out(stream.Signature(write_beat_layout())),
            "wr_status": In(stream.Signature(status_layout(addr_width))),
            "pe_busy": Out(1),
            "dma_stall": Out(1),
        }
        for k in range(1, axi_ports):  # port k: a loader's reads, pool-pass lane k
            members |= {
                f"rd{k}_cmd": Out(stream.Signature(box_layout(addr_width))),
                f"rd{k}_data": In(stream.Signature(read_beat_layout())),
                f"rd{k}_status": In(stream.Signature(status_layout(addr_width))),
                f"wr{k}_cmd": Out(stream.Signature(box_layout(addr_width))),
                f"wr{k}_data": Out(stream.Signature(write_beat_layout())),
                f"wr{k}_status": In(stream.Signature(status_layout(addr_width))),
            }
        super().__init__(members)

    @classmethod
    def from_config(cls, accelerator, core, geometry: EngineGeometry | None = None
                    ) -> LayerEngine:
        """The engine of ``core`` of an :class:`~fcircnn.models.config.AcceleratorConfig`,
        with buffers for ``geometry`` (default: :func:`engine_geometry` of the accelerator's
        network) and ``Td`` PE lanes if the core unrolls ``td`` (else one)."""
        if geometry is None:
            geometry = engine_geometry(accelerator, core)
        return cls(core.tn, core.tm, core.td, core.tr, core.tc, B=accelerator.block_size,
                   geometry=geometry, addr_width=accelerator.address_width,
                   lanes=core_lanes(core), axi_ports=accelerator.axi_ports,
                   commands=accelerator.dma_queue)

    def _buffers(self, m):
        """The core's buffers, PE array and post chain, as submodules of ``m``."""
        geo, core = self.geometry, self.core
        Tn, Tm, Td, Tr, Tc, B, L = self.Tn, self.Tm, self.Td, self.Tr, self.Tc, self.B, self.lanes
        m.submodules.inbuf = InputBuffer.of(core, geo, splittable=self.splits_inputs,
                                            quarterable=self.quarters_inputs)
        m.submodules.wbuf = WeightBuffer(Tn, Tm, B=B, taps=geo.taps, splittable=self.splits,
                                         quarterable=self.quarters)
        m.submodules.pe = PEArray(Tn, Tm, B, L)
        # Partial sums: with one lane, output depth v of the tile at addresses v*Tr*Tc + ...
        m.submodules.psum = PartialSumBuffer(Tm, L, Tr * Td // L, Tc)
        max_size, max_groups = post_chain_size(core, geo)
        carry = pool_carry(core, geo)
        m.submodules.post = PostChain(lanes=SLOTS_PER_BEAT, max_size=max_size,
                                      max_groups=max_groups,
                                      carry=(0, 0, 0) if carry is None else carry.depth,
                                      B=B, lane0=geo.lane0, rfft=geo.rfft,
                                      acc_width=geo.acc_bits)
        for k in range(1, self.ports.pool_lanes):  # the pool pass's further lanes
            m.submodules[f"pool{k}"] = CMaxPool(SLOTS_PER_BEAT, max_size, max_groups)
        m.submodules.outbuf = OutputBuffer(Tm, Td, Tr, Tc)
        if geo.residual:
            m.submodules.resbuf = InputBuffer(Tm, Td, Tr, Tc, B=B, kernel=1, stride=1)
        # Post records: two halves (m-tile parity) of G words, a word the 8 records of a group.
        params = params_signature(core)
        m.submodules.pmem = memory.Memory(shape=params.shape,
                                          depth=2 * core.out_groups, init=[])
        return m.submodules

    def _walkers(self, m, sub):
        """The control, the four walkers and the pool pass, as submodules of ``m``; returns
        the loader of each port (``None`` for a port without one)."""
        geo, core, aw = self.geometry, self.core, self.addr_width
        max_size, max_groups = post_chain_size(core, geo)
        resbuf = sub.resbuf if geo.residual else None
        m.submodules.control = EngineControl(aw)
        loaders = []
        for name, reads in zip(_LOADER_NAMES, self.ports.loader_reads(
                core.weight_tile_beats(1), core.in_groups, residual=geo.residual),
                strict=False):
            if not reads:
                loaders.append(None)
                continue
            m.submodules[name] = ld = EngineLoader(
                core, geo, in_box=sub.inbuf.box.shape(), addr_width=aw, reads=reads,
                res_box=resbuf.box.shape() if resbuf is not None else None,
                commands=self.commands, quarters=self.quarters,
                in_quarters=self.quarters_inputs)
            loaders.append(ld)
        m.submodules.compute = EngineCompute(core, geo, in_depth=sub.inbuf.depth,
                                             in_plane=sub.inbuf.plane, in_width=sub.inbuf.width)
        m.submodules.drain = EngineDrain(core, geo, psum_depth=sub.psum.depth,
                                         res_depth=resbuf.depth if resbuf is not None else None)
        m.submodules.store = EngineStore(core, geo, addr_width=aw)
        m.submodules.pool = EnginePoolPass(addr_width=aw, max_size=max_size,
                                           max_groups=max_groups, lanes=self.ports.pool_lanes)
        return loaders

    def _loaders(self, m, ctl, loaders):
        """The loaders' control: their failures (the lowest port's wins a tie) and idle."""
        loaders = [ld for ld in loaders if ld is not None]
        first, *rest = loaders
        if not rest:
            wiring.connect(m, first.fail, ctl.fail_loader)
            m.d.comb += ctl.loader_idle.eq(first.idle)
            return
        wiring.connect(m, ctl.ctl, *(ld.ctl for ld in rest))  # the first: with the walkers
        fail = ctl.fail_loader
        for k, ld in enumerate(loaders):
            with (m.If if k == 0 else m.Elif)(ld.fail.valid):
                m.d.comb += [fail.valid.eq(1), fail.code.eq(ld.fail.code),
                             fail.addr.eq(ld.fail.addr)]
        idle = first.idle
        for ld in rest:
            idle = idle & ld.idle
        m.d.comb += ctl.loader_idle.eq(idle)

    def _port(self, m, k, loader, pp, pool):
        """Port ``k`` > 0: its loader's reads (if it has one) through the pool pass, whose lane
        ``k`` owns the port's read and write engines during a pass, and lane ``k``'s
        CMaxPool."""
        flip = wiring.flipped
        for port in ("rd_cmd", "rd_data", "rd_status", "wr_cmd", "wr_data", "wr_status"):
            name = port.replace("_", f"{k}_", 1)
            wiring.connect(m, flip(getattr(self, name)), getattr(pp, name))
        if loader is not None:
            wiring.connect(m, loader.rd_cmd, getattr(pp, f"conv_rd{k}_cmd"))
            wiring.connect(m, getattr(pp, f"conv_rd{k}_data"), loader.rd_data)
            wiring.connect(m, getattr(pp, f"conv_rd{k}_status"), loader.rd_status)
        wiring.connect(m, getattr(pp, f"pool{k}_i"), pool.i)
        wiring.connect(m, pool.o, getattr(pp, f"pool{k}_o"))
        m.d.comb += pool.cfg.eq(getattr(pp, f"pool{k}_cfg"))

    def elaborate(self, platform):
        m = Module()
        sub = self._buffers(m)
        loaders = self._walkers(m, sub)
        ctl, ld, cp, dr, st, pp = (sub.control, sub.loader, sub.compute, sub.drain, sub.store,
                                   sub.pool)
        inbuf, wbuf, psum, outbuf, post = sub.inbuf, sub.wbuf, sub.psum, sub.outbuf, sub.post
        flip = wiring.flipped

        # Control: the layer's start and end, and the walkers' failures.
        m.d.comb += [ctl.desc.eq(self.desc), ctl.start.eq(self.start), self.busy.eq(ctl.busy),
                     self.done.eq(ctl.done), self.error.eq(ctl.error),
                     self.error_code.eq(ctl.error_code), self.error_addr.eq(ctl.error_addr),
                     ctl.abort.eq(self.abort), self.failing.eq(ctl.ctl.failed)]
        wiring.connect(m, ctl.ctl, ld.ctl, cp.ctl, dr.ctl, st.ctl, pp.ctl)
        wiring.connect(m, st.fail, ctl.fail_store)
        wiring.connect(m, pp.fail, ctl.fail_pool)
        m.d.comb += [ctl.store_idle.eq(st.idle), ctl.pool_active.eq(pp.active),
                     ctl.store_done.eq(st.done), ctl.pool_done.eq(pp.done)]
        self._loaders(m, ctl, loaders)
        for k in range(1, self.ports.axi_ports):
            self._port(m, k, loaders[k], pp, sub[f"pool{k}"])
        wl = loaders[self.ports.weights]
        whalf, ihalf = (next(ld for ld in loaders if ld is not None and kind in ld.reads)
                        if split else None for kind, split in (("weight_half", self.splits),
                                                               ("input_half", self.splits_inputs)))

        # The DMA, through the pool pass, to the loader and the store.
        for port in ("rd_cmd", "rd_data", "rd_status", "wr_cmd", "wr_data", "wr_status"):
            wiring.connect(m, flip(getattr(self, port)), getattr(pp, port))
        wiring.connect(m, ld.rd_cmd, pp.conv_rd_cmd)
        wiring.connect(m, pp.conv_rd_data, ld.rd_data)
        wiring.connect(m, pp.conv_rd_status, ld.rd_status)
        wiring.connect(m, st.wr_cmd, pp.conv_wr_cmd)
        wiring.connect(m, st.wr_data, pp.conv_wr_data)
        wiring.connect(m, pp.conv_wr_status, st.wr_status)

        # Loader -> input, weight, residual buffers and the post-parameter memory.
        wiring.connect(m, ld.in_o, inbuf.i)
        m.d.comb += [inbuf.box.eq(ld.in_box), inbuf.stride_d.eq(ld.in_stride_d)]
        if inbuf.row_lanes:
            rl = RowLanes(m, ctl.ctl, self.lanes, self.geometry.row_lanes, "ib")
            d = ctl.ctl.desc
            m.d.comb += [inbuf.row_shift.eq(rl.shift),
                         inbuf.row_step.eq(mul_small(rl.rows, d.stride[1],
                                                     self.geometry.stride[1]))]
        if inbuf.spreadable:
            m.d.comb += inbuf.spread.eq((ctl.ctl.desc.flags & FLAG_SPREAD).bool())
        wiring.connect(m, wl.w_o, wbuf.i)
        if self.splits:
            wiring.connect(m, whalf.w1_o, wbuf.i1)
            m.d.comb += wbuf.split.eq((ctl.ctl.desc.flags & FLAG_WSPLIT).bool())
        if self.quarters:
            for kind, stream_, port in (("weight_quarter1", "w2_o", wbuf.i2),
                                        ("weight_quarter3", "w3_o", wbuf.i3)):
                owner = next(ld for ld in loaders if ld is not None and kind in ld.reads)
                wiring.connect(m, getattr(owner, stream_), port)
            m.d.comb += wbuf.quarter.eq((ctl.ctl.desc.flags & FLAG_WQUARTER).bool())
        if self.splits_inputs:
            wiring.connect(m, ihalf.in1_o, inbuf.i1)
            m.d.comb += [inbuf.box1.eq(ihalf.in1_box),
                         inbuf.split.eq((ctl.ctl.desc.flags & FLAG_ISPLIT).bool())]
        if self.quarters_inputs:
            for kind, k in (("input_quarter1", 2), ("input_quarter3", 3)):
                owner = next(ld for ld in loaders if ld is not None and kind in ld.reads)
                wiring.connect(m, getattr(owner, f"in{k}_o"), getattr(inbuf, f"i{k}"))
                m.d.comb += getattr(inbuf, f"box{k}").eq(getattr(owner, f"in{k}_box"))
            m.d.comb += inbuf.quarter.eq((ctl.ctl.desc.flags & FLAG_IQUARTER).bool())
        wiring.connect(m, ld.params, sub.pmem.write_port(granularity=128))
        m.d.comb += [dr.params_ready.eq(ld.params_ready), ld.drain_mt.eq(dr.mt)]
        if self.geometry.residual:
            rl = loaders[self.ports.residual]
            wiring.connect(m, rl.res_o, sub.resbuf.i)
            m.d.comb += sub.resbuf.box.eq(rl.res_box)

        # Compute: input and weight tiles -> PE array -> partial sums.
        m.d.comb += [inbuf.r_addr.eq(cp.in_addr), inbuf.r_en.eq(cp.in_en),
                     inbuf.r_sub.eq(cp.in_sub), inbuf.r_release.eq(cp.in_release),
                     cp.in_valid.eq(inbuf.r_valid), cp.act.eq(inbuf.act),
                     wbuf.r_addr.eq(cp.w_addr), wbuf.r_en.eq(cp.w_en),
                     wbuf.r_release.eq(cp.w_release), cp.w_valid.eq(wbuf.r_valid),
                     cp.w.eq(wbuf.w), self.pe_busy.eq(cp.pe_busy),
                     self.dma_stall.eq(cp.dma_stall)]
        wiring.connect(m, cp.pe_i, sub.pe.i)
        wiring.connect(m, sub.pe.o, cp.pe_o)
        wiring.connect(m, cp.psum_i, psum.i)

        # Drain: partial sums, records, residual -> post chain (via the pool pass) -> output.
        m.d.comb += [psum.r_addr.eq(dr.ps_addr), psum.r_en.eq(dr.ps_en),
                     psum.r_release.eq(dr.ps_release), dr.ps_valid.eq(psum.r_valid),
                     dr.acc.eq(psum.acc)]
        wiring.connect(m, dr.records, sub.pmem.read_port())
        if self.geometry.residual:
            res = sub.resbuf
            m.d.comb += [res.r_addr.eq(dr.res_addr), res.r_en.eq(dr.res_en),
                         res.r_release.eq(dr.res_release), dr.res_valid.eq(res.r_valid),
                         dr.res_act.eq(res.act)]
        wiring.connect(m, dr.post_i, pp.conv_post_i)
        wiring.connect(m, pp.conv_post_o, dr.post_o)
        m.d.comb += pp.conv_post_cfg.eq(dr.post_cfg)
        wiring.connect(m, pp.post_i, post.i)
        wiring.connect(m, post.o, pp.post_o)
        m.d.comb += post.cfg.eq(pp.post_cfg)
        if dr.carry is not None:
            m.d.comb += post.pool_carry.eq(dr.post_carry)
        wiring.connect(m, dr.out_i, outbuf.i)
        m.d.comb += outbuf.shape.eq(dr.out_shape)

        # Store: output buffer -> write DMA (via the pool pass).
        wiring.connect(m, outbuf.o, st.out_o)
        return m
