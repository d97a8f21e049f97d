"""Two INT9 products that share one operand, in one DSP48E2 multiply."""

from amaranth.hdl import Module, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["OPERAND_WIDTH", "PRODUCT_WIDTH", "PackedDualMultiplier"]

#: Width of every operand (INT9: the Gauss pre-adds of int8 values stay in [-254, 254]).
OPERAND_WIDTH = 9
#: Width of each product (|a*b| <= 254*254 < 2**17).
PRODUCT_WIDTH = 2 * OPERAND_WIDTH
#: Width of the packed wide operand ``(b << 18) + c`` (the DSP48E2 27-bit port).
_PACKED_WIDTH = PRODUCT_WIDTH + OPERAND_WIDTH
_SHIFT = PRODUCT_WIDTH


class PackedDualMultiplier(wiring.Component):
    """``a*b`` and ``a*c`` for signed INT9 operands with one 9x27-bit signed multiply.

    The multiply is ``o = a * ((b << 18) + c)`` with ``c`` sign-extended to 27 bits, so
    ``a*c = o[17:0]`` (as signed) and ``a*b = o[35:18] + o[17]`` (the high half is floored by the
    sign of the low product; adding the low half's sign bit undoes that).

    Contract
    --------
    * Operands ``a``, ``b``, ``c`` are signed 9-bit. Both products are exact for ``b`` in
      ``[-255, 255]`` and any INT9 ``a``, ``c`` (``|a*c| <= 2**16`` never reaches bit 17 of the
      low half; ``b = -256`` with ``c < 0`` would overflow the 27-bit operand), so in particular
      for the contract's ``[-254, 254]``.
    * Latency 3 cycles, initiation interval 1: registers after the inputs (DSP A/B registers),
      after the multiply (M register) and after the 36-bit product (P register); the 18-bit
      correction add follows the P register combinationally.
    * ``ce`` low holds every register (a stalled pipeline holds its data); it maps to the DSP
      clock enables.

    Ports
    -----
    a, b, c : In(signed(9))
        Shared operand ``a`` and the two others.
    ce : In(1)
        Clock enable of all three stages.
    ab, ac : Out(signed(18))
        Products of the operands presented 3 enabled cycles earlier.
    """

    a: In(signed(OPERAND_WIDTH))
    b: In(signed(OPERAND_WIDTH))
    c: In(signed(OPERAND_WIDTH))
    ce: In(1)
    ab: Out(signed(PRODUCT_WIDTH))
    ac: Out(signed(PRODUCT_WIDTH))

    def elaborate(self, platform):
        m = Module()

        # Stage 1: input registers; the packed operand is built from explicitly signed values
        # (a part-select would be unsigned and widen the multiply past one DSP).
        a_r = Signal(signed(OPERAND_WIDTH))
        bc_r = Signal(signed(_PACKED_WIDTH))
        # Stage 2: multiply register; stage 3: product (P) register.
        m_r = Signal(signed(OPERAND_WIDTH + _PACKED_WIDTH))
        p_r = Signal(signed(OPERAND_WIDTH + _PACKED_WIDTH))

        with m.If(self.ce):
            m.d.sync += [
                a_r.eq(self.a),
                bc_r.eq((self.b << _SHIFT) + self.c),
                m_r.eq(a_r * bc_r),
                p_r.eq(m_r),
            ]

        low = Signal(signed(PRODUCT_WIDTH))
        m.d.comb += [
            low.eq(p_r[:PRODUCT_WIDTH]),
            self.ac.eq(low),
            self.ab.eq(p_r[_SHIFT : _SHIFT + PRODUCT_WIDTH].as_signed() + p_r[PRODUCT_WIDTH - 1]),
        ]
        return m
