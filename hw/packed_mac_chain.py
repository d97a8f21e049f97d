"""Two dot products of INT9 operands on one cascade of packed DSP48E2s, with no fabric adder."""

from amaranth.hdl import Module, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from fcircnn.arch.geometry import DSP_MUL_BITS, PACKED_CHAIN_MAX, PACKED_SHIFT

from .common import check_positive, rejecting
from .dsp48e2 import DSP48E2_LATENCY, DSP48E2Stage

__all__ = ["OPERAND_WIDTH", "SUM_WIDTH", "PackedMacChain", "chain_latency", "check_chain"]

#: Width of every operand (INT9: the Gauss pre-adds of int8 values stay in [-254, 254]).
OPERAND_WIDTH = 9
#: Width of each of the two sums (the low field of the packed P, and the high one).
SUM_WIDTH = PACKED_SHIFT
assert DSP_MUL_BITS >= OPERAND_WIDTH + PACKED_SHIFT  # the packed operand fits the 27-bit port


def check_chain(n, delay=0) -> None:
    """Raise ``TypeError``/``ValueError`` unless ``n`` (stages) is in
    ``1..PACKED_CHAIN_MAX`` and ``delay`` in ``0..PACKED_CHAIN_MAX - 1``."""
    check_positive("n", n, PACKED_CHAIN_MAX)
    if not isinstance(delay, int) or isinstance(delay, bool):
        raise TypeError(f"delay must be an integer, not {delay!r}")
    if not 0 <= delay < PACKED_CHAIN_MAX:
        raise ValueError(f"delay must be in 0..{PACKED_CHAIN_MAX - 1}, not {delay}")


def chain_latency(n: int, delay: int = 0) -> int:
    """Enabled cycles from a beat's operands to its sums on a chain of ``n`` stages whose
    operands wait ``delay`` cycles first: the wait, the skew of the last stage (``n - 1``) and
    one DSP48E2 (:data:`~fcircnn.hw.dsp48e2.DSP48E2_LATENCY`)."""
    return delay + n - 1 + DSP48E2_LATENCY


class PackedMacChain(wiring.Component):
    """``s1 = sum_i x[i] * w1[i]`` and ``s0 = sum_i x[i] * w0[i]`` for ``i < n``, summed in the
    DSP48E2s' own adders along their PCOUT -> PCIN cascade.

    Stage ``i`` is a :class:`~fcircnn.hw.dsp48e2.DSP48E2Stage` whose pre-adder packs its two
    weights, ``(w1[i] << 18) + w0[i]``, and multiplies them by ``x[i]``; its P register adds the
    previous stage's P. The stages form a systolic chain: stage ``i`` takes its operands ``i``
    enabled cycles after stage 0 (a delay line per stage, in fabric registers), so the last P
    holds ``P = 2**18 * s1 + s0`` and the two sums are split from it:
    ``s0 = P[17:0]`` as signed, ``s1 = P[35:18] + P[17]`` (adding ``P[17]`` undoes the borrow a
    negative low sum takes from the high field).

    Contract
    --------
    * Exact when ``|w1[i]| <= 255`` (the packed operand stays inside the 27-bit pre-adder) and
      each sum of magnitudes stays inside its signed 18-bit field:
      ``sum_i |x[i] * w0[i]| < 2**17`` and ``sum_i |x[i] * w1[i]| < 2**17``. The PE array's Gauss
      products are at most :data:`~fcircnn.arch.geometry.GAUSS_PRODUCT_MAX` each, so a chain of
      up to :data:`~fcircnn.arch.geometry.PACKED_CHAIN_MAX` (4) of them is exact:
      4 x 32,258 = 129,032 < 131,072. The 48-bit P never overflows (``|P| < 2**36``).
    * Latency :func:`chain_latency` (``delay + n + 3``) enabled cycles from the operands to
      ``s0``, ``s1`` (combinational from the last P register), initiation interval 1.
    * ``ce`` low holds every register, delay lines included.

    Parameters
    ----------
    n : int
        Stages (products per sum), ``1..PACKED_CHAIN_MAX``.
    delay : int
        Enabled cycles every operand waits before its stage's skew, ``0..PACKED_CHAIN_MAX-1``
        (default 0): a shorter chain beside longer ones ends with them.

    Ports
    -----
    x, w0, w1 : In(ArrayLayout(signed(9), n))
    ce : In(1)
    s0, s1 : Out(signed(18))
    """

    def __init__(self, n: int, *, delay: int = 0):
        with rejecting(self):
            check_chain(n, delay)
        self.n, self.delay = n, delay
        #: Enabled cycles from the operands to the sums.
        self.latency = chain_latency(n, delay)
        operands = data.ArrayLayout(signed(OPERAND_WIDTH), n)
        super().__init__({"x": In(operands), "w0": In(operands), "w1": In(operands),
                          "ce": In(1), "s0": Out(signed(SUM_WIDTH)),
                          "s1": Out(signed(SUM_WIDTH))})

    def elaborate(self, platform):
        m = Module()
        previous = None
        for i in range(self.n):
            x, w0, w1 = self._delayed(m, i)
            stage = DSP48E2Stage(cascade=previous is not None)
            m.submodules[f"dsp{i}"] = stage
            m.d.comb += [stage.ce.eq(self.ce), stage.b.eq(x), stage.a.eq(w0),
                         stage.d.eq(w1.as_signed() << PACKED_SHIFT)]
            if previous is not None:
                m.d.comb += stage.pcin.eq(previous.pcout)
            previous = stage
        p = previous.p
        m.d.comb += [
            self.s0.eq(p[:PACKED_SHIFT].as_signed()),
            self.s1.eq(p[PACKED_SHIFT:PACKED_SHIFT + SUM_WIDTH].as_signed()
                       + p[PACKED_SHIFT - 1]),
        ]
        return m

    def _delayed(self, m: Module, i: int):
        """Stage ``i``'s operands, ``delay + i`` enabled cycles late."""
        ops = (self.x[i], self.w0[i], self.w1[i])
        for k in range(self.delay + i):
            regs = tuple(Signal(signed(OPERAND_WIDTH), name=f"{nm}{i}_d{k}", reset_less=True)
                         for nm in ("x", "w0", "w1"))
            with m.If(self.ce):
                m.d.sync += [r.eq(v) for r, v in zip(regs, ops, strict=True)]
            ops = regs
        return ops
