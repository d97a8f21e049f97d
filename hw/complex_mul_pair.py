"""Activation slots times two weight slots each, summed: two complex dot products on three
cascades of packed DSP48E2s."""

from amaranth.hdl import Module, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from fcircnn.arch.geometry import INT8_MAX, PACKED_CHAIN_MAX

from .common import rejecting
from .packed_mac_chain import OPERAND_WIDTH, PackedMacChain, chain_latency, check_chain

__all__ = [
    "ACT_WIDTH",
    "PRODUCT_WIDTH",
    "WEIGHT_TERMS",
    "ComplexMultiplierPair",
    "complex_layout",
    "pair_latency",
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

#: Width of each part of a pair's summed products: ``n <= PACKED_CHAIN_MAX`` complex products
#: of int8 slots, ``|sum| <= 4 * 2 * 127**2 = 129,032 < 2**17``.
PRODUCT_WIDTH = 18


def pair_latency(n: int, delay: int = 0) -> int:
    """Enabled cycles of :class:`ComplexMultiplierPair` ``(n, delay=delay)``: its cascades
    (:func:`~fcircnn.hw.packed_mac_chain.chain_latency`) and the Gauss post-subtraction's
    register."""
    return chain_latency(n, delay) + 1


class ComplexMultiplierPair(wiring.Component):
    """``prod[j] = sum_i act[i] * w[i][j]`` for two weight slots ``j = 0, 1`` (two output
    blocks) over ``n`` activation slots, with ``3n`` DSP48E2 (``2n`` for slot 0) and no fabric
    adder but the Gauss post-subtraction.

    Gauss trick per product: ``A = (a+b)c``, ``Bm = b(c+d)``, ``C = (b-a)d``; ``re = A - Bm``,
    ``im = Bm - C``. The trick is linear, so the ``n`` products' ``A``, ``Bm`` and ``C`` are
    summed first, each on one :class:`~fcircnn.hw.packed_mac_chain.PackedMacChain` of ``n``
    cascaded DSP48E2s that multiplies the activation-side operand ``a+b``, ``b`` or ``b-a`` of
    slot ``i`` by the packed weight terms of both weight slots (the DSP's pre-adder packs them),
    and the post-subtraction runs once on the sums.

    The weight-side terms ``c``, ``c+d``, ``d`` are **precomputed by the compiler** and arrive as
    inputs (:data:`WEIGHT_TERMS`); nothing here adds weights.

    Built for slot 0 (``slot0``) it computes the component-wise product (``re = a*c``,
    ``im = b*d``) with the activation-side operands ``a`` and ``-b``, and has no ``Bm`` cascade.

    Contract
    --------
    * Ranges: ``a``, ``b``, ``c``, ``d`` in ``[-127, 127]``, ``cd = c + d``. Every Gauss product
      is at most :data:`~fcircnn.arch.geometry.GAUSS_PRODUCT_MAX`, so the cascades are exact
      (``n <= PACKED_CHAIN_MAX``) and the sums fit :data:`PRODUCT_WIDTH` bits; inputs outside
      the contract give unspecified results.
    * Latency :func:`pair_latency` (``delay + n + 4``) enabled cycles, initiation interval 1.
      ``ce`` low holds every register.

    Parameters
    ----------
    n : int
        Activation slots summed, ``1..PACKED_CHAIN_MAX`` (default 1).
    slot0 : bool
        Built for slot 0 (component-wise products).
    delay : int
        Extra enabled cycles before the cascades (:class:`PackedMacChain`'s ``delay``).

    Ports
    -----
    act : In(ArrayLayout(complex_layout(8), n))
        Activation slots ``a + bi``.
    w : In(ArrayLayout(ArrayLayout(WEIGHT_TERMS, 2), n))
        Weight terms of the two weight slots of each activation slot.
    ce : In(1)
        Clock enable.
    prod : Out(ArrayLayout(complex_layout(18), 2))
        The two sums for the operands presented :attr:`latency` enabled cycles earlier.
    """

    def __init__(self, n: int = 1, *, slot0: bool = False, delay: int = 0):
        with rejecting(self):
            if not isinstance(slot0, bool):
                raise TypeError(f"slot0 must be a bool, not {slot0!r}")
            check_chain(n, delay)
        self.n, self.slot0, self.delay = n, slot0, delay
        #: Enabled cycles from the operands to ``prod``.
        self.latency = pair_latency(n, delay)
        #: DSP48E2 instances.
        self.dsp_count = (2 if slot0 else 3) * n
        super().__init__({
            "act": In(data.ArrayLayout(complex_layout(ACT_WIDTH), n)),
            "w": In(data.ArrayLayout(data.ArrayLayout(WEIGHT_TERMS, 2), n)),
            "ce": In(1),
            "prod": Out(data.ArrayLayout(complex_layout(PRODUCT_WIDTH), 2)),
        })

    def elaborate(self, platform):
        m = Module()
        sums = {}
        for role, term in (("a", "c"), ("b", "cd"), ("c", "d")):
            if role == "b" and self.slot0:
                continue
            chain = PackedMacChain(self.n, delay=self.delay)
            m.submodules[f"chain_{role}"] = chain
            m.d.comb += chain.ce.eq(self.ce)
            for i in range(self.n):
                m.d.comb += [chain.x[i].eq(self._operand(m, role, i)),
                             chain.w0[i].eq(self.w[i][0][term]),
                             chain.w1[i].eq(self.w[i][1][term])]
            sums[role] = (chain.s0, chain.s1)
        with m.If(self.ce):
            for j in range(2):
                s_a, s_c = sums["a"][j], sums["c"][j]
                if self.slot0:  # re = a*c, im = -(-b*d)
                    m.d.sync += [self.prod[j].re.eq(s_a), self.prod[j].im.eq(-s_c)]
                else:
                    s_b = sums["b"][j]
                    m.d.sync += [self.prod[j].re.eq(s_a - s_b), self.prod[j].im.eq(s_b - s_c)]
        return m

    def _operand(self, m: Module, role: str, i: int) -> Signal:
        """The activation-side Gauss operand of slot ``i`` for cascade ``role``: ``a + b``, ``b``,
        ``b - a`` (slot 0: ``a``, none, ``-b``)."""
        a, b = self.act[i].re, self.act[i].im
        x = Signal(signed(OPERAND_WIDTH), name=f"x{role}{i}")
        value = {"a": a if self.slot0 else a + b, "b": b, "c": -b if self.slot0 else b - a}[role]
        m.d.comb += x.eq(value)
        return x


assert PACKED_CHAIN_MAX * 2 * INT8_MAX**2 < 2 ** (PRODUCT_WIDTH - 1)  # the sums fit
