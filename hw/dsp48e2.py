"""One DSP48E2 as a pipelined multiply-add stage of a cascade: ``P = (D + A) * B [+ PCIN]``."""

from amaranth.hdl import ClockSignal, Const, Instance, Module, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from fcircnn.arch.geometry import DSP_MUL_BITS

from .common import rejecting

__all__ = ["DSP48E2_LATENCY", "XILINX_PRIMITIVES", "DSP48E2Stage", "XilinxPrimitives",
           "uses_primitives"]

#: Width of the DSP48E2's narrow multiplier port (B).
B_WIDTH = 18
#: Width of its A port (the multiplier and the pre-adder take the low 27 bits).
A_PORT_WIDTH = 30
#: Width of its P register and cascade (PCIN, PCOUT).
P_WIDTH = 48
#: Enabled cycles from ``a``, ``d``, ``b`` to ``p``: the A, D and B input registers (B through
#: two, B1 and B2, to meet the pre-adder's), the pre-adder register AD, the multiplier register M
#: and the P register.
DSP48E2_LATENCY = 4

#: OPMODE of a stage: W = 0, Z = 0 or PCIN, Y = X = M (the multiplier's two partial products).
_OPMODE_M = 0b00_000_01_01
_OPMODE_M_PCIN = 0b00_001_01_01
#: INMODE: the pre-adder adds D (INMODE[2]) and A2 (INMODE[0] = 0); the multiplier takes B2.
_INMODE_D_PLUS_A2 = 0b00100


class XilinxPrimitives:
    """Elaboration platform under which components that have a Xilinx primitive form build it
    (an ``Instance``) instead of their behavioural description: what Yosys and Vivado get
    (:func:`fcircnn.gen.verilog.to_verilog` with ``primitives=True``). Simulation uses the
    behavioural form, which the tests hold to the primitive's documented behaviour."""

    primitives = "xilinx"


#: The one :class:`XilinxPrimitives` platform.
XILINX_PRIMITIVES = XilinxPrimitives()


def uses_primitives(platform) -> bool:
    """Whether ``platform`` (an ``elaborate`` argument) asks for Xilinx primitives."""
    return getattr(platform, "primitives", None) == "xilinx"


class DSP48E2Stage(wiring.Component):
    """``p = (d + a) * b + (pcin if cascade else 0)``, pipelined as one DSP48E2.

    The configuration (UltraScale+ DSP48E2, UG579): ``AREG = DREG = ADREG = MREG = PREG = 1``,
    ``BREG = 2``, ``AMULTSEL = "AD"``, INMODE ``D + A2`` (the pre-adder adds ``d`` and ``a``;
    its sum wraps to 27 bits as the DSP's does), OPMODE ``M`` or ``M + PCIN``, ALUMODE add; no
    C, carry, reset or pattern detector. ``pcout`` is ``p`` (the P register), routed to the next
    stage's ``pcin`` on the dedicated cascade when built as a primitive.

    Elaborated under :data:`XILINX_PRIMITIVES` it is a ``DSP48E2`` instance (no fabric logic);
    otherwise the same registers described in Amaranth, which simulate it.

    Contract
    --------
    * Latency :data:`DSP48E2_LATENCY` enabled cycles from ``a``, ``d``, ``b`` to ``p``; ``pcin``
      is added in the P register's cycle (a cascade's stage ``i`` takes its operands ``i``
      cycles after stage 0's).
    * ``ce`` low holds every register (all the DSP's clock enables).
    * ``p`` wraps at 48 bits; the product ``(d + a) * b`` is exact (27 x 18 bits).

    Parameters
    ----------
    cascade : bool
        Add ``pcin`` (OPMODE ``M + PCIN``); a chain's first stage has none.

    Ports
    -----
    a, d : In(signed(27))
        Pre-adder operands.
    b : In(signed(18))
        Multiplier operand.
    pcin : In(signed(48))
        The previous stage's ``pcout`` (ignored without ``cascade``).
    ce : In(1)
    p, pcout : Out(signed(48))
    """

    a: In(signed(DSP_MUL_BITS))
    d: In(signed(DSP_MUL_BITS))
    b: In(signed(B_WIDTH))
    pcin: In(signed(P_WIDTH))
    ce: In(1)
    p: Out(signed(P_WIDTH))
    pcout: Out(signed(P_WIDTH))

    def __init__(self, *, cascade: bool):
        with rejecting(self):
            if not isinstance(cascade, bool):
                raise TypeError(f"cascade must be a bool, not {cascade!r}")
        self.cascade = cascade
        super().__init__()

    def elaborate(self, platform):
        if uses_primitives(platform):
            return self._primitive()
        m = Module()
        a_r = Signal(signed(DSP_MUL_BITS), reset_less=True)
        d_r = Signal(signed(DSP_MUL_BITS), reset_less=True)
        b1 = Signal(signed(B_WIDTH), reset_less=True)
        b2 = Signal(signed(B_WIDTH), reset_less=True)
        ad = Signal(signed(DSP_MUL_BITS), reset_less=True)
        m_r = Signal(signed(DSP_MUL_BITS + B_WIDTH), reset_less=True)
        p_r = Signal(signed(P_WIDTH), reset_less=True)
        with m.If(self.ce):
            m.d.sync += [
                a_r.eq(self.a), d_r.eq(self.d), b1.eq(self.b), b2.eq(b1),
                ad.eq((d_r + a_r)[:DSP_MUL_BITS].as_signed()),
                m_r.eq(ad * b2),
                p_r.eq(m_r + self.pcin if self.cascade else m_r),
            ]
        m.d.comb += [self.p.eq(p_r), self.pcout.eq(p_r)]
        return m

    def _primitive(self) -> Module:
        m = Module()
        zero = Const(0, 1)
        a_port = Signal(signed(A_PORT_WIDTH))  # a, sign-extended to the A port
        m.d.comb += a_port.eq(self.a)
        registers = {"AREG": 1, "ACASCREG": 1, "DREG": 1, "ADREG": 1, "BREG": 2, "BCASCREG": 2,
                     "MREG": 1, "PREG": 1, "CREG": 1, "INMODEREG": 0, "OPMODEREG": 0,
                     "ALUMODEREG": 0, "CARRYINREG": 0, "CARRYINSELREG": 0}
        settings = {"AMULTSEL": "AD", "BMULTSEL": "B", "PREADDINSEL": "A", "USE_MULT": "MULTIPLY",
                    "USE_SIMD": "ONE48", "A_INPUT": "DIRECT", "B_INPUT": "DIRECT",
                    "USE_PATTERN_DETECT": "NO_PATDET", "USE_WIDEXOR": "FALSE"}
        enables = {f"i_CE{n}": self.ce for n in ("A2", "B1", "B2", "D", "AD", "M", "P")}
        enables |= {f"i_CE{n}": zero for n in ("A1", "C", "CTRL", "INMODE", "ALUMODE",
                                               "CARRYIN")}
        resets = {f"i_RST{n}": zero for n in ("A", "B", "C", "D", "M", "P", "CTRL", "INMODE",
                                              "ALUMODE", "ALLCARRYIN")}
        m.submodules.dsp = Instance(
            "DSP48E2",
            **{f"p_{k}": v for k, v in (registers | settings).items()},
            i_CLK=ClockSignal("sync"),
            i_A=a_port,
            i_B=self.b, i_D=self.d, i_C=Const(0, P_WIDTH),
            i_PCIN=self.pcin if self.cascade else Const(0, P_WIDTH),
            i_ACIN=Const(0, A_PORT_WIDTH), i_BCIN=Const(0, B_WIDTH),
            i_CARRYIN=zero, i_CARRYCASCIN=zero, i_MULTSIGNIN=zero,
            i_CARRYINSEL=Const(0, 3), i_ALUMODE=Const(0, 4),
            i_INMODE=Const(_INMODE_D_PLUS_A2, 5),
            i_OPMODE=Const(_OPMODE_M_PCIN if self.cascade else _OPMODE_M, 9),
            o_P=self.p, o_PCOUT=self.pcout,
            **enables, **resets,
        )
        return m
