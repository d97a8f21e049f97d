"""The post-processing pipeline: [lane 0] -> CBN + residual -> quantize -> CReLU -> CMaxPool
-> [rfft -> quantize].

A skid buffer (:class:`~fcircnn.hw.skid_buffer.SkidBuffer`) between CReLU and CMaxPool cuts
the combinational ready path from the output (through the pool's axis stages) off the stage
enables of CBN, quantizer and CReLU. The stages in brackets are built on a core that runs a
time-domain layer (``docs/golden.md``, "Time-domain layers"): the lane-0 sum of a dense layer
on an irfft's slots (:class:`~fcircnn.hw.post_lane0.IrfftLane0`) and the rfft of a dense
layer's time lanes (:class:`~fcircnn.hw.post_rfft.RfftSum` and a second quantizer).
"""

from amaranth.hdl import Module
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .common import check_block_size, rejecting
from .post_cbn import (
    ACC_WIDTH,
    DSP_PER_LANE,
    CBNResidual,
    cbn_config_layout,
    cbn_input_layout,
    check_lanes,
)
from .post_cbn import LATENCY as CBN_LATENCY
from .post_crelu import LATENCY as CRELU_LATENCY
from .post_crelu import CReLU, crelu_config_layout
from .post_lane0 import LATENCY as LANE0_LATENCY
from .post_lane0 import IrfftLane0, lane0_config_layout
from .post_maxpool import (
    CMaxPool,
    carry_layout,
    check_carry,
    check_max_groups,
    check_max_size,
    maxpool_config_layout,
)
from .post_quantize import LATENCY as QUANTIZE_LATENCY
from .post_quantize import Quantize, quantize_config_layout, slot_layout
from .post_rfft import DSP_PER_LANE as RFFT_DSP_PER_LANE
from .post_rfft import LATENCY as RFFT_LATENCY
from .post_rfft import RfftSum, rfft_config_layout
from .skid_buffer import LATENCY as SKID_LATENCY
from .skid_buffer import SkidBuffer

__all__ = ["DSP_PER_LANE", "LANE0_LATENCY", "LATENCY_NO_POOL", "RFFT_DSP_PER_LANE",
           "RFFT_STAGE_LATENCY", "PostChain", "post_config_layout"]

#: Cycles from an accepted input beat to its output beat with the pool bypassed (no stall):
#: CBN, quantizer, CReLU and the skid buffer before the pool (6); the pool adds 3 cycles from
#: the beat completing a window, a built lane-0 stage :data:`LANE0_LATENCY` (1) and a built
#: rfft stage :data:`RFFT_STAGE_LATENCY` (4).
LATENCY_NO_POOL = CBN_LATENCY + QUANTIZE_LATENCY + CRELU_LATENCY + SKID_LATENCY
#: Cycles the rfft stage adds: the twiddle sums and products, then the second quantizer.
RFFT_STAGE_LATENCY = RFFT_LATENCY + QUANTIZE_LATENCY


def post_config_layout(max_size, max_groups=1):
    """Runtime configuration of :class:`PostChain`: one field per stage.

    ``lane0``: :data:`~fcircnn.hw.post_lane0.lane0_config_layout` and ``rfft``:
    :data:`~fcircnn.hw.post_rfft.rfft_config_layout` (ignored where the stage is not built);
    ``cbn``: :data:`~fcircnn.hw.post_cbn.cbn_config_layout`; ``quantize``:
    :data:`~fcircnn.hw.post_quantize.quantize_config_layout`; ``crelu``:
    :data:`~fcircnn.hw.post_crelu.crelu_config_layout`; ``pool``:
    :func:`~fcircnn.hw.post_maxpool.maxpool_config_layout`.
    """
    return data.StructLayout({
        "lane0": lane0_config_layout,
        "cbn": cbn_config_layout,
        "quantize": quantize_config_layout,
        "crelu": crelu_config_layout,
        "pool": maxpool_config_layout(max_size, max_groups),
        "rfft": rfft_config_layout,
    })


class PostChain(wiring.Component):
    """The four post-units joined with :func:`amaranth.lib.wiring.connect`, with skid buffers.

    Per slot and part: ``t = acc*mult + bias [+ res*res_mult]``, ``y = clip(round-shift(t))``,
    optional ReLU, optional max pooling; bit-exact with
    :func:`fcircnn.models.spectral.post_process` per map.

    Contract
    --------
    * Input beats: ``lanes`` slots of one output voxel with their per-slot parameters
      (:func:`~fcircnn.hw.post_cbn.cbn_input_layout`); voxels of a map in raster order
      ``d, h, w``, each voxel ``cfg.pool.groups`` beats (slot groups), see
      :class:`~fcircnn.hw.post_maxpool.CMaxPool`. Output beats: the int8 slots
      (:func:`~fcircnn.hw.post_quantize.slot_layout`) of the pooled (or, with the pool
      bypassed, every) voxel in the same order.
    * Latency :data:`LATENCY_NO_POOL` (6) cycles with the pool bypassed; initiation interval 1
      (except for the pool's inserted padding cycles); full valid/ready back-pressure.
    * Ready timing: a :class:`~fcircnn.hw.skid_buffer.SkidBuffer` between CReLU and CMaxPool
      ends the combinational path from ``o.ready`` (through the pool's axis stages). The CBN,
      quantizer and CReLU stage enables, and so ``i.ready``, depend only on flip-flops (their
      valid registers and the skid buffer's registered ready), one LUT level deep, not on
      ``o.ready`` or ``i.valid``. (A skid buffer at the input would hold two copies of the
      252-bit-per-lane CBN input, about 4300 FF for 8 lanes, for no shorter path.)
      ``o.valid``/``o.payload`` are the pool's (combinational from the skid buffer when the
      pool is bypassed).
    * DSP48E2: :func:`~fcircnn.hw.post_cbn.dsp_per_lane` per lane in the CBN stage (6 at
      ``acc_width = 32``, 4 at 27 or fewer), and a built rfft stage's
      :data:`RFFT_DSP_PER_LANE` (2).
    * ``cfg`` (:func:`post_config_layout`) static while a map is in flight.
    * Built with ``lane0``: :class:`~fcircnn.hw.post_lane0.IrfftLane0` before CBN (with
      ``cfg.lane0.enable`` the accumulators of each block become its lane-0 sum); with
      ``rfft``: :class:`~fcircnn.hw.post_rfft.RfftSum` and a second quantizer after the
      pool (with ``cfg.rfft.enable`` each block's int8 time lanes become its requantized
      slots; without it the slots pass unchanged). :attr:`latency_no_pool` counts them.

    Parameters
    ----------
    lanes : int
        Slots per beat, 1..64.
    max_size : tuple of three int
        Largest map ``(D, H, W)`` the pool accepts, each 1..1024.
    max_groups : int
        Largest number of interleaved slot groups per voxel for the pool, 1..256.
    carry : tuple of three int
        The pool's carry memories (:class:`~fcircnn.hw.post_maxpool.CMaxPool`), ``(0, 0, 0)``:
        none.
    B : int
        Block size (4, 8 or 16) of the lane-0 and rfft stages.
    lane0, rfft : bool
        Build the lane-0 stage, the rfft stage.
    acc_width : int
        Width of the signed accumulators CBN multiplies (2..32; at most 27: one DSP48E2 per
        part, :class:`~fcircnn.hw.post_cbn.CBNResidual`).

    Ports
    -----
    i : In(stream.Signature(cbn_input_layout(lanes)))
    o : Out(stream.Signature(slot_layout(lanes)))
    cfg : In(post_config_layout(max_size, max_groups))
    pool_carry : In(carry_layout(carry)), with a carry: the pool's ``carry``
    """

    def __init__(self, lanes=8, max_size=(8, 8, 8), max_groups=1, carry=(0, 0, 0), *, B=8,
                 lane0=False, rfft=False, acc_width=ACC_WIDTH):
        with rejecting(self):
            check_lanes(lanes)
            check_max_size(max_size)
            check_max_groups(max_groups)
            check_carry(carry)
            check_block_size(B)
            for name, value in (("lane0", lane0), ("rfft", rfft)):
                if not isinstance(value, bool):
                    raise TypeError(f"{name} must be a bool, not {value!r}")
            self._lane0 = IrfftLane0(lanes, B) if lane0 else None
            self._rfft = RfftSum(lanes, B) if rfft else None
            self._rfft_quantize = Quantize(lanes) if rfft else None
            self._cbn = CBNResidual(lanes, acc_width)
        self._quantize = Quantize(lanes)
        self._crelu = CReLU(lanes)
        self._skid_pool = SkidBuffer(slot_layout(lanes))
        self._pool = CMaxPool(lanes, max_size, max_groups, carry)
        self.lanes = lanes
        self.max_size = tuple(max_size)
        #: Cycles from an input beat to its output beat with the pool bypassed (no stall).
        self.latency_no_pool = (LATENCY_NO_POOL + (LANE0_LATENCY if lane0 else 0)
                                + (RFFT_STAGE_LATENCY if rfft else 0))
        ports = {
            "i": In(stream.Signature(cbn_input_layout(lanes))),
            "o": Out(stream.Signature(slot_layout(lanes))),
            "cfg": In(post_config_layout(self.max_size, max_groups)),
        }
        if any(carry):
            ports["pool_carry"] = In(carry_layout(carry))
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        m.submodules.cbn = cbn = self._cbn
        m.submodules.quantize = quantize = self._quantize
        m.submodules.crelu = crelu = self._crelu
        m.submodules.skid_pool = skid_pool = self._skid_pool
        m.submodules.pool = pool = self._pool

        if self._lane0 is None:
            wiring.connect(m, wiring.flipped(self.i), cbn.i)
        else:
            m.submodules.lane0 = lane0 = self._lane0
            wiring.connect(m, wiring.flipped(self.i), lane0.i)
            wiring.connect(m, lane0.o, cbn.i)
            m.d.comb += lane0.cfg.eq(self.cfg.lane0)
        wiring.connect(m, cbn.o, quantize.i)
        wiring.connect(m, quantize.o, crelu.i)
        wiring.connect(m, crelu.o, skid_pool.i)
        wiring.connect(m, skid_pool.o, pool.i)
        if self._rfft is None:
            wiring.connect(m, pool.o, wiring.flipped(self.o))
        else:
            m.submodules.rfft = rfft = self._rfft
            m.submodules.rfft_quantize = rfft_quantize = self._rfft_quantize
            wiring.connect(m, pool.o, rfft.i)
            wiring.connect(m, rfft.o, rfft_quantize.i)
            wiring.connect(m, rfft_quantize.o, wiring.flipped(self.o))
            m.d.comb += [rfft.cfg.eq(self.cfg.rfft), rfft_quantize.cfg.bypass.eq(0)]
        m.d.comb += [
            cbn.cfg.eq(self.cfg.cbn),
            quantize.cfg.eq(self.cfg.quantize),
            crelu.cfg.eq(self.cfg.crelu),
            pool.cfg.eq(self.cfg.pool),
        ]
        if any(pool.carry_depth):
            m.d.comb += pool.carry.eq(self.pool_carry)
        return m
