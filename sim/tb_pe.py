"""cocotb testbench of :class:`fcircnn.hw.pe.PE` (Verilog top).

The products fed to the PE come from random int8 activation and weight slots (extremes included)
through :func:`fcircnn.sim.tb_complex_mul_pair.slot_product`; the accumulated sums are compared
with :func:`fcircnn.models.spectral.conv3d_slots_int` (:func:`pe_reference`).

Parameters (:func:`fcircnn.sim.runner.tb_params`): ``n`` (products per beat), ``seed``,
``beats``, ``acc_width``.
"""

import random

import numpy as np

from fcircnn.sim.tb_complex_mul_pair import PART_EXTREMES, slot_product

__all__ = ["pe_beats", "pe_reference"]

#: Block size used to embed the PE's products into a slot convolution.
_B = 4


def pe_beats(rng: random.Random, n: int, count: int, slot0: bool) -> list[dict]:
    """Random beats ``{"act": [(a, b)]*n, "w": [(c, d)]*n, "first", "last"}``."""

    def part():
        return rng.choice(PART_EXTREMES) if rng.random() < 0.3 else rng.randint(-127, 127)

    beats = []
    remaining = 0
    for i in range(count):
        first = remaining == 0
        if first:
            remaining = rng.randint(1, 6)
        remaining -= 1
        beats.append(
            {
                "act": [(part(), part()) for _ in range(n)],
                "w": [(part(), part()) for _ in range(n)],
                "first": int(first),
                "last": int(remaining == 0 or i == count - 1),
                "slot0": slot0,
            }
        )
    return beats


def pe_products(beat: dict) -> list[dict]:
    """The ``n`` complex products of one beat (the PE's input)."""
    out = []
    for (a, b), (c, d) in zip(beat["act"], beat["w"], strict=True):
        re, im = slot_product(a, b, c, d, beat["slot0"])
        out.append({"re": re, "im": im})
    return out


def pe_reference(beats: list[dict]) -> list[tuple[int, int]]:
    """Expected ``(re, im)`` after each ``last`` beat, from ``conv3d_slots_int``.

    One accumulation of ``L`` beats with ``n`` products each is the output slot ``k`` (0 for
    slot-0 beats, 1 otherwise; block size 4) of a convolution with ``n`` input blocks and an
    ``L x 1 x 1`` kernel over an input of depth ``L`` (depth index = beat).
    """
    from fcircnn.models.spectral import conv3d_slots_int

    half = _B // 2
    results = []
    start = 0
    for end, beat in enumerate(beats):
        if not beat["last"]:
            continue
        run = beats[start : end + 1]
        start = end + 1
        L, n = len(run), len(run[0]["act"])
        k = 0 if run[0]["slot0"] else 1
        x_re = np.zeros((n * half, L, 1, 1), dtype=np.int64)
        x_im = np.zeros_like(x_re)
        w_re = np.zeros((1, n, half, L, 1, 1), dtype=np.int64)
        w_im = np.zeros_like(w_re)
        for t, b in enumerate(run):
            for q in range(n):
                x_re[q * half + k, t], x_im[q * half + k, t] = b["act"][q]
                w_re[0, q, k, t], w_im[0, q, k, t] = b["w"][q]
        acc_re, acc_im = conv3d_slots_int(x_re, x_im, w_re, w_im)
        results.append((int(acc_re[k, 0, 0, 0]), int(acc_im[k, 0, 0, 0])))
    return results


try:
    import cocotb
except ImportError:  # pragma: no cover
    cocotb = None

if cocotb is not None:
    from amaranth.lib import data
    from cocotb.clock import Clock
    from cocotb.triggers import FallingEdge

    from fcircnn.hw.complex_mul_pair import PRODUCT_WIDTH, complex_layout
    from fcircnn.sim.runner import pack, tb_params, unpack

    async def _check(dut, slot0: bool, seed: int):
        params = tb_params()
        n = params["n"]
        rng = random.Random(seed)
        beats = pe_beats(rng, n, params.get("beats", 120), slot0)
        want = pe_reference(beats)
        prod_lay = data.ArrayLayout(complex_layout(PRODUCT_WIDTH), n)
        acc_lay = complex_layout(params.get("acc_width", 32))

        cocotb.start_soon(Clock(dut.clk, 5, unit="ns").start())
        dut.rst.value = 1
        for name in ("ce", "valid", "first", "last", "prod"):
            getattr(dut, name).value = 0
        for _ in range(2):
            await FallingEdge(dut.clk)
        dut.rst.value = 0

        got = []
        idx = 0
        ce = 0
        cycles = 0
        while len(got) < len(want):
            await FallingEdge(dut.clk)
            cycles += 1
            assert cycles < 20 * len(beats) + 100, "timeout"
            if ce and int(dut.done.value):  # `done` was set by the enabled edge just passed
                acc = unpack(acc_lay, int(dut.acc.value))
                got.append((acc["re"], acc["im"]))
                n_got = len(got) - 1
                assert got[-1] == want[n_got], f"sum {n_got}: got {got[-1]}, want {want[n_got]}"
            ce = int(rng.random() < 0.75)
            valid = int(idx < len(beats) and rng.random() < 0.7)
            beat = beats[idx] if valid else None
            dut.ce.value = ce
            dut.valid.value = valid
            dut.first.value = beat["first"] if beat else rng.randint(0, 1)
            dut.last.value = beat["last"] if beat else rng.randint(0, 1)
            dut.prod.value = pack(prod_lay, pe_products(beat)) if beat else 0
            if ce and valid:
                idx += 1

    @cocotb.test()
    async def complex_products(dut):
        """Complex slot products (k >= 1), random valid and clock enable."""
        await _check(dut, False, tb_params().get("seed", 1))

    @cocotb.test()
    async def slot0_products(dut):
        """Component-wise slot-0 products, random valid and clock enable."""
        await _check(dut, True, tb_params().get("seed", 1) + 100)
