"""One activation slot times two weight slots: two complex products on three packed DSPs."""

from amaranth.hdl import Const, Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .packed_mul import OPERAND_WIDTH, PRODUCT_WIDTH, PackedDualMultiplier

__all__ = [
    "ACT_WIDTH",
    "PAIR_LATENCY",
    "WEIGHT_TERMS",
    "ComplexMultiplierPair",
    "complex_layout",
]

#: Width of each part of an activation or weight slot (int8 in [-127, 127]).
ACT_WIDTH = 8


def complex_layout(width: int) -> data.StructLayout:
    """Layout of a complex number with signed ``width``-bit real and imaginary parts."""
    return data.StructLayout({"re": signed(width), "im": signed(width)})


#: Compiler-precomputed weight-side Gauss terms of one weight slot ``c + di``:
#: ``c``, ``cd = c + d`` and ``d``, each INT9 (``c``, ``d`` in [-127, 127], ``cd`` in [-254, 254]).
#: For slot 0 (component-wise product ``re*c``, ``im*d``) ``cd`` is ignored.
WEIGHT_TERMS = data.StructLayout(
    {"c": signed(OPERAND_WIDTH), "cd": signed(OPERAND_WIDTH), "d": signed(OPERAND_WIDTH)}
)

#: Latency of :class:`ComplexMultiplierPair` in enabled cycles.
PAIR_LATENCY = 4


class ComplexMultiplierPair(wiring.Component):
    """``(a + bi) * (c_j + d_j i)`` for two weight slots ``j = 0, 1`` with 3 DSP multiplies.

    Gauss trick per product: ``A = (a+b)c``, ``Bm = b(c+d)``, ``C = (b-a)d``; ``re = A - Bm``,
    ``im = Bm - C``. The activation-side operands ``a+b``, ``b``, ``b-a`` are shared by the two
    weight slots, so each of the three multiplies is one :class:`PackedDualMultiplier`
    (``x * ((w_1 << 18) + w_0)``), i.e. 3 DSP48E2 for 2 complex products.

    The weight-side terms ``c``, ``c+d``, ``d`` are **precomputed by the compiler** and arrive as
    inputs (:data:`WEIGHT_TERMS`); nothing here adds weights.

    With ``slot0`` high the pair computes the component-wise product of slot 0 (``re = a*c``,
    ``im = b*d``) by switching the activation-side operands to ``a``, ``0``, ``-b``.

    Contract
    --------
    * Ranges: ``a``, ``b``, ``c``, ``d`` in ``[-127, 127]``, ``cd = c + d``. Products are exact
      (``|re|, |im| <= 2 * 127**2``) and fit 18 bits; inputs outside the contract give
      unspecified results.
    * Latency :data:`PAIR_LATENCY` (4) enabled cycles (3 in the DSPs, 1 for the post-subtraction
      register), initiation interval 1. ``ce`` low holds every register.
    * ``slot0`` is sampled with the operands (it may be a constant).

    Ports
    -----
    act : In(complex_layout(8))
        Activation slot ``a + bi``.
    w : In(ArrayLayout(WEIGHT_TERMS, 2))
        Weight terms of the two weight slots (two output blocks).
    slot0 : In(1)
        Component-wise (slot 0) mode.
    ce : In(1)
        Clock enable.
    prod : Out(ArrayLayout(complex_layout(18), 2))
        ``act * w[j]`` for the operands presented 4 enabled cycles earlier.
    """

    act: In(complex_layout(ACT_WIDTH))
    w: In(data.ArrayLayout(WEIGHT_TERMS, 2))
    slot0: In(1)
    ce: In(1)
    prod: Out(data.ArrayLayout(complex_layout(PRODUCT_WIDTH), 2))

    def elaborate(self, platform):
        m = Module()

        a, b = self.act.re, self.act.im
        x1 = Signal(signed(OPERAND_WIDTH))  # a + b   (slot 0: a)
        x2 = Signal(signed(OPERAND_WIDTH))  # b       (slot 0: 0)
        x3 = Signal(signed(OPERAND_WIDTH))  # b - a   (slot 0: -b)
        m.d.comb += [
            x1.eq(Mux(self.slot0, a, a + b)),
            x2.eq(Mux(self.slot0, Const(0, signed(OPERAND_WIDTH)), b)),
            x3.eq(Mux(self.slot0, -b, b - a)),
        ]

        muls = []
        for name, x, term in (("mul_a", x1, "c"), ("mul_b", x2, "cd"), ("mul_c", x3, "d")):
            mul = PackedDualMultiplier()
            m.submodules[name] = mul
            m.d.comb += [
                mul.ce.eq(self.ce),
                mul.a.eq(x),
                mul.b.eq(self.w[1][term]),
                mul.c.eq(self.w[0][term]),
            ]
            muls.append(mul)
        mul_a, mul_b, mul_c = muls

        with m.If(self.ce):
            for j, (pa, pb, pc) in enumerate(
                ((mul_a.ac, mul_b.ac, mul_c.ac), (mul_a.ab, mul_b.ab, mul_c.ab))
            ):
                m.d.sync += [
                    self.prod[j].re.eq(pa - pb),
                    self.prod[j].im.eq(pb - pc),
                ]
        return m
