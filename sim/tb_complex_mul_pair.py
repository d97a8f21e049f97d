"""cocotb testbench of :class:`fcircnn.hw.complex_mul_pair.ComplexMultiplierPair` (Verilog top).

Also holds the direct Python reference of one slot product (:func:`slot_product`), which the
tests cross-check against :func:`fcircnn.models.spectral.conv3d_slots_int` on 1x1x1 kernels.

Parameters (:func:`fcircnn.sim.runner.tb_params`): ``seed``, ``beats``.
"""

import random

__all__ = ["PART_EXTREMES", "random_operands", "slot_product"]

#: int8 slot part values the tests always include.
PART_EXTREMES = (-127, -126, -1, 0, 1, 126, 127)


def slot_product(a: int, b: int, c: int, d: int, slot0: bool) -> tuple[int, int]:
    """``(a + bi) (*) (c + di)``: complex product, or ``(a*c, b*d)`` for slot 0."""
    if slot0:
        return a * c, b * d
    return a * c - b * d, a * d + b * c


def random_operands(rng: random.Random, count: int) -> list[dict]:
    """Operand sets ``{"act", "w": [(c, d), (c, d)], "slot0"}`` with extremes first."""

    def part():
        return rng.choice(PART_EXTREMES) if rng.random() < 0.3 else rng.randint(-127, 127)

    ops = []
    for a in (-127, 127):
        for b in (-127, 127):
            for c in (-127, 127):
                for d in (-127, 127):
                    for slot0 in (0, 1):
                        ops.append({"act": (a, b), "w": [(c, d), (d, c)], "slot0": slot0})
    ops += [
        {"act": (part(), part()), "w": [(part(), part()), (part(), part())],
         "slot0": int(rng.random() < 0.3)}
        for _ in range(count)
    ]
    return ops


def pair_inputs(op: dict) -> tuple[dict, list[dict]]:
    """Port values (``act``, ``w`` payloads) of one operand set; weight terms precomputed."""
    from fcircnn.sim.tb_pe_array import weight_terms

    a, b = op["act"]
    return {"re": a, "im": b}, [weight_terms(c, d) for c, d in op["w"]]


def pair_reference(op: dict) -> list[dict]:
    a, b = op["act"]
    out = []
    for c, d in op["w"]:
        re, im = slot_product(a, b, c, d, bool(op["slot0"]))
        out.append({"re": re, "im": im})
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
        PAIR_LATENCY,
        WEIGHT_TERMS,
        complex_layout,
    )
    from fcircnn.hw.packed_mul import PRODUCT_WIDTH
    from fcircnn.sim.runner import pack, tb_params, unpack

    @cocotb.test()
    async def random_products_with_stalls(dut):
        """Random slots (extremes included), random slot-0 mode, random clock enable."""
        params = tb_params()
        rng = random.Random(params.get("seed", 1))
        ops = random_operands(rng, params.get("beats", 300))
        act_lay = complex_layout(ACT_WIDTH)
        w_lay = data.ArrayLayout(WEIGHT_TERMS, 2)
        prod_lay = data.ArrayLayout(complex_layout(PRODUCT_WIDTH), 2)

        cocotb.start_soon(Clock(dut.clk, 5, unit="ns").start())
        dut.rst.value = 1
        dut.ce.value = 0
        dut.act.value = dut.w.value = dut.slot0.value = 0
        for _ in range(2):
            await FallingEdge(dut.clk)
        dut.rst.value = 0

        captured = []
        idx = 0
        checked = 0
        while checked < len(ops):
            await FallingEdge(dut.clk)
            if len(captured) >= PAIR_LATENCY:
                n = len(captured) - PAIR_LATENCY
                got = unpack(prod_lay, int(dut.prod.value))
                want = pair_reference(captured[n])
                assert got == want, f"operands {captured[n]}: got {got}, want {want}"
                checked = n + 1
            ce = int(rng.random() < 0.7)
            op = ops[idx] if idx < len(ops) else {"act": (0, 0), "w": [(0, 0), (0, 0)],
                                                  "slot0": 0}
            act, w = pair_inputs(op)
            dut.act.value = pack(act_lay, act)
            dut.w.value = pack(w_lay, w)
            dut.slot0.value = op["slot0"]
            dut.ce.value = ce
            if ce:
                captured.append(op)
                idx += 1
