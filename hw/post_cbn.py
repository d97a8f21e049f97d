"""Post-unit stage 1: CBN with the residual term, ``t = acc*mult + bias + res*res_mult``."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data

from fcircnn.arch.geometry import ACC_BITS, DSP_MUL_BITS, cbn_dsp_per_lane

from .common import stall_pipeline
from .post_stage import PostStage, check_lanes

__all__ = [
    "ACC_WIDTH",
    "BIAS_WIDTH",
    "DSP_PER_LANE",
    "LATENCY",
    "MULT_WIDTH",
    "RES_WIDTH",
    "SHIFT_WIDTH",
    "T_WIDTH",
    "CBNResidual",
    "cbn_config_layout",
    "cbn_input_layout",
    "cbn_output_layout",
    "dsp_per_lane",
]

#: Width of the signed PE accumulator ``acc``.
ACC_WIDTH = ACC_BITS
#: Width of the signed multipliers ``mult`` and ``res_mult``.
MULT_WIDTH = 16
#: Width of the signed shortcut slot part ``res``.
RES_WIDTH = 8
#: Width of the signed bias and of the result ``t``.
BIAS_WIDTH = T_WIDTH = 48
#: Width of the unsigned quantization shift (0..47), carried through to the quantizer.
SHIFT_WIDTH = 6
#: DSP48E2 per lane at the full accumulator width: per part, ``acc*mult`` (32x16 signed) is
#: split explicitly into two multiplies of one DSP each (27-bit port: the low 26 bits of
#: ``acc`` zero-extended, or its signed top 6 bits; 18-bit port: ``mult``), recombined in
#: fabric, and ``res*res_mult`` (8x16) takes one; two parts make six
#: (:func:`dsp_per_lane`: four with accumulators of at most 27 bits).
DSP_PER_LANE = cbn_dsp_per_lane(ACC_BITS)
#: DSP48E2 per lane of :class:`CBNResidual` built for ``acc_width``-bit accumulators
#: (:func:`fcircnn.arch.geometry.cbn_dsp_per_lane`, which the estimator counts too).
dsp_per_lane = cbn_dsp_per_lane
#: Cycles from an accepted input beat to its output beat (no stall).
LATENCY = 2

# acc is split at this bit for the two DSPs of acc*mult.
_ACC_SPLIT = 26

def _parts(shape):
    return data.StructLayout({"re": shape, "im": shape})


def cbn_input_layout(lanes):
    """Payload of :class:`CBNResidual`'s input: ``lanes`` slots, each with its own parameters.

    Per lane, every field has an ``re`` and an ``im`` part: ``acc`` signed 32, ``res`` signed 8
    (the shortcut slot part), ``mult`` and ``res_mult`` signed 16, ``bias`` signed 48, ``shift``
    unsigned 6 (0..47; not used here, passed to the quantizer).
    """
    check_lanes(lanes)
    lane = data.StructLayout({
        "acc": _parts(signed(ACC_WIDTH)),
        "res": _parts(signed(RES_WIDTH)),
        "mult": _parts(signed(MULT_WIDTH)),
        "res_mult": _parts(signed(MULT_WIDTH)),
        "bias": _parts(signed(BIAS_WIDTH)),
        "shift": _parts(unsigned(SHIFT_WIDTH)),
    })
    return data.ArrayLayout(lane, lanes)


def cbn_output_layout(lanes):
    """Payload of :class:`CBNResidual`'s output: per lane ``t`` (signed 48) and ``shift``."""
    check_lanes(lanes)
    lane = data.StructLayout({
        "t": _parts(signed(T_WIDTH)),
        "shift": _parts(unsigned(SHIFT_WIDTH)),
    })
    return data.ArrayLayout(lane, lanes)


#: Runtime configuration of :class:`CBNResidual` (static during a layer).
#: ``bypass``: ``t = acc`` (sign-extended); ``residual``: add ``res*res_mult`` (else 0).
cbn_config_layout = data.StructLayout({"bypass": 1, "residual": 1})


def _check_acc_width(acc_width):
    if not isinstance(acc_width, int) or isinstance(acc_width, bool):
        raise TypeError(f"acc_width must be an integer, not {acc_width!r}")
    if not 2 <= acc_width <= ACC_WIDTH:
        raise ValueError(f"acc_width must be in 2..{ACC_WIDTH}, not {acc_width}")


class CBNResidual(PostStage):
    """CBN + residual post-unit: ``t = acc*mult + bias [+ res*res_mult]`` per slot and part.

    Each beat carries ``lanes`` output slots of the PE array together with their per-slot
    parameters (fed by the control unit from the parameter buffer), so the stage keeps no state
    besides its pipeline. The order of the beats is irrelevant to this stage.

    Contract
    --------
    * ``t = acc*mult + bias + (res*res_mult if cfg.residual else 0)``, or ``t = acc`` when
      ``cfg.bypass``; re and im separately. The result is taken modulo ``2**48`` as signed 48-bit:
      the compiler guarantees that ``t`` fits int48 (the golden :func:`fcircnn.models.spectral.cbn`
      raises ``OverflowError`` otherwise). ``shift`` is passed through unchanged.
    * Latency :data:`LATENCY` (2) cycles, initiation interval 1: a product register, then the
      sum register. The stages share one enable, ``i.ready = ~o.valid | o.ready``; a stalled
      output holds the whole pipeline (full valid/ready back-pressure, no beat lost or
      duplicated).
    * DSP48E2 use: :func:`dsp_per_lane` per lane (6 at ``acc_width = 32``, 4 at ``acc_width
      <= 27``); the adds are in fabric.
    * With ``acc_width < 32`` the multiply takes the low ``acc_width`` bits of ``acc`` as a
      signed value: the caller guarantees ``|acc| < 2**(acc_width - 1)`` on every beat that
      is not bypassed (the engine builds the stage for its layers' accumulator bound,
      :attr:`fcircnn.arch.geometry.EngineGeometry.acc_bits`). Bypass passes all 32 bits.
    * ``cfg`` must be static while beats are in flight.

    Parameters
    ----------
    lanes : int
        Slots per beat, 1..64.
    acc_width : int
        Width of the signed accumulators the multiply takes, 2..32 (default 32).

    Ports
    -----
    i : In(stream.Signature(cbn_input_layout(lanes)))
    o : Out(stream.Signature(cbn_output_layout(lanes)))
    cfg : In(cbn_config_layout)
    """

    def __init__(self, lanes=8, acc_width=ACC_WIDTH):
        super().__init__(lanes, cbn_input_layout, cbn_output_layout, cbn_config_layout,
                         lambda: _check_acc_width(acc_width))
        self.acc_width = acc_width

    def elaborate(self, platform):
        m = Module()

        enable = stall_pipeline(m, self.i, self.o, LATENCY)

        for lane in range(self.lanes):
            src = self.i.payload[lane]
            dst = self.o.payload[lane]
            shift = Signal.like(src.shift, name=f"shift_{lane}")
            with m.If(enable):
                m.d.sync += [shift.eq(src.shift), dst.shift.eq(shift)]
            for part in ("re", "im"):
                acc = src.acc[part]
                # Stage 1: the two products (DSPs) and the bias, or ``acc`` alone in bypass.
                prod = Signal(signed(T_WIDTH), name=f"prod_{lane}_{part}")
                res = Signal(signed(T_WIDTH), name=f"res_{lane}_{part}")
                bias = Signal(signed(T_WIDTH), name=f"bias_{lane}_{part}")
                product = self._product(m, acc, src.mult[part], f"{lane}_{part}")
                with m.If(enable):
                    m.d.sync += [
                        prod.eq(Mux(self.cfg.bypass, acc, product)),
                        res.eq(Mux(self.cfg.residual & ~self.cfg.bypass,
                                   src.res[part] * src.res_mult[part], 0)),
                        bias.eq(Mux(self.cfg.bypass, 0, src.bias[part])),
                        # Stage 2: the sum, modulo 2**48.
                        dst.t[part].eq(prod + res + bias),
                    ]
        return m

    def _product(self, m, acc, mult, suffix):
        """``acc * mult`` in DSP48E2-sized multiplies (27x18 signed): one when the accumulators
        fit ``acc_width <= 27`` bits, else the low 26 bits of ``acc`` zero-extended to a signed
        27-bit operand and its signed top 6 bits, recombined in fabric."""
        if self.acc_width <= DSP_MUL_BITS:
            prod = Signal(signed(self.acc_width + MULT_WIDTH), name=f"prod_n_{suffix}")
            m.d.comb += prod.eq(acc[:self.acc_width].as_signed() * mult)
            return prod
        acc_lo = Cat(acc[:_ACC_SPLIT], Const(0, 1)).as_signed()
        acc_hi = acc[_ACC_SPLIT:].as_signed()
        prod_lo = Signal(signed(_ACC_SPLIT + 1 + MULT_WIDTH), name=f"prod_lo_{suffix}")
        prod_hi = Signal(signed(ACC_WIDTH - _ACC_SPLIT + MULT_WIDTH), name=f"prod_hi_{suffix}")
        m.d.comb += [prod_lo.eq(acc_lo * mult), prod_hi.eq(acc_hi * mult)]
        return (prod_hi << _ACC_SPLIT) + prod_lo
