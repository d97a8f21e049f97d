"""cocotb testbench of :class:`fcircnn.hw.complex_mul_pair.ComplexMultiplierPair` (Verilog top).

Also holds the direct Python reference of one slot product (:func:`slot_product`), which the
tests cross-check against :func:`fcircnn.models.spectral.conv3d_slots_int` on 1x1x1 kernels,
and of a pair's two sums (:func:`pair_reference`).

Parameters (:func:`fcircnn.sim.runner.tb_params`): ``n`` (activation slots summed), ``slot0``,
``delay`` (the pair's construction), ``seed``, ``beats``.
"""

import random

__all__ = ["PART_EXTREMES", "pair_inputs", "pair_reference", "random_operands", "slot_product"]

#: int8 slot part values the tests always include.
PART_EXTREMES = (-127, -126, -1, 0, 1, 126, 127)


def slot_product(a: int, b: int, c: int, d: int, slot0: bool) -> tuple[int, int]:
    """``(a + bi) (*) (c + di)``: complex product, or ``(a*c, b*d)`` for slot 0."""
    if slot0:
        return a * c, b * d
    return a * c - b * d, a * d + b * c


def random_operands(rng: random.Random, count: int, n: int) -> list[list[dict]]:
    """Beats of ``n`` operand sets ``{"act": (a, b), "w": [(c, d), (c, d)]}``: first every
    corner of the int8 range (all slots at the same corner: the sums' extremes), then random
    parts with extremes often."""

    def part():
        return rng.choice(PART_EXTREMES) if rng.random() < 0.3 else rng.randint(-127, 127)

    corners = (-127, 127)
    beats = [[{"act": (a, b), "w": [(c, d), (d, c)]}] * n
             for a in corners for b in corners for c in corners for d in corners]
    beats += [[{"act": (part(), part()), "w": [(part(), part()), (part(), part())]}
               for _ in range(n)] for _ in range(count)]
    return beats


def pair_inputs(beat: list[dict]) -> tuple[list[dict], list[list[dict]]]:
    """Port values (``act``, ``w`` payloads) of one beat; weight terms precomputed."""
    from fcircnn.sim.tb_pe_array import weight_terms

    return ([{"re": op["act"][0], "im": op["act"][1]} for op in beat],
            [[weight_terms(c, d) for c, d in op["w"]] for op in beat])


def pair_reference(beat: list[dict], slot0: bool) -> list[dict]:
    """The pair's two outputs: per weight slot, the sum of the beat's slot products."""
    out = []
    for j in range(2):
        parts = [slot_product(*op["act"], *op["w"][j], slot0) for op in beat]
        out.append({"re": sum(p[0] for p in parts), "im": sum(p[1] for p in parts)})
    return out


try:
    import cocotb
except ImportError:  # pragma: no cover
    cocotb = None

if cocotb is not None:
    from amaranth.lib import data
    from cocotb.clock import Clock
    from cocotb.triggers import FallingEdge

    from fcircnn.hw.complex_mul_pair import (
        ACT_WIDTH,
        PRODUCT_WIDTH,
        WEIGHT_TERMS,
        complex_layout,
        pair_latency,
    )
    from fcircnn.sim.runner import pack, tb_params, unpack

    @cocotb.test()
    async def random_sums_with_stalls(dut):
        """Random slots (the corners first), random clock enable."""
        params = tb_params()
        n, slot0, delay = params["n"], params["slot0"], params["delay"]
        rng = random.Random(params.get("seed", 1))
        beats = random_operands(rng, params.get("beats", 300), n)
        latency = pair_latency(n, delay)
        act_lay = data.ArrayLayout(complex_layout(ACT_WIDTH), n)
        w_lay = data.ArrayLayout(data.ArrayLayout(WEIGHT_TERMS, 2), n)
        prod_lay = data.ArrayLayout(complex_layout(PRODUCT_WIDTH), 2)
        zero = [{"act": (0, 0), "w": [(0, 0), (0, 0)]}] * n

        cocotb.start_soon(Clock(dut.clk, 5, unit="ns").start())
        dut.rst.value = 1
        dut.ce.value = 0
        dut.act.value = dut.w.value = 0
        for _ in range(2):
            await FallingEdge(dut.clk)
        dut.rst.value = 0

        taken = checked = 0
        while checked < len(beats):
            await FallingEdge(dut.clk)
            if taken >= latency and taken - latency == checked:
                got = unpack(prod_lay, int(dut.prod.value))
                want = pair_reference(beats[checked], slot0)
                assert got == want, f"beat {beats[checked]}: got {got}, want {want}"
                checked += 1
            ce = int(rng.random() < 0.7)
            act, w = pair_inputs(beats[taken] if taken < len(beats) else zero)
            dut.act.value = pack(act_lay, act)
            dut.w.value = pack(w_lay, w)
            dut.ce.value = ce
            taken += ce
