"""Max pooling on the partial sums (:mod:`fcircnn.hw.psum_pool`) on Amaranth's simulator
against NumPy: per window the largest part, the smallest where the slot's multiplier is
negative, on random and extreme accumulators (``INT32`` bounds, ties), windows of one to four
words, signs rewritten between windows."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from fcircnn.hw.psum_pool import PartialSumPool

_I32 = np.iinfo(np.int32)


def words(rng, n, lanes, slots, extreme):
    """``n`` words ``[lanes, slots, 2]`` of int32 parts; ``extreme``: drawn from the bounds,
    zero and +-1 (many ties)."""
    if extreme:
        pool = np.array([_I32.min, _I32.min + 1, -1, 0, 1, _I32.max - 1, _I32.max])
        return rng.choice(pool, size=(n, lanes, slots, 2))
    return rng.integers(_I32.min, _I32.max, size=(n, lanes, slots, 2), endpoint=True)


@pytest.mark.parametrize(("Tm", "lanes"), [(32, 2), (16, 1), (64, 4)])
@pytest.mark.parametrize("extreme", [False, True])
def test_each_part_keeps_the_max_or_min_of_its_window_by_the_multipliers_sign(Tm, lanes,
                                                                              extreme):
    rng = np.random.default_rng(Tm * 10 + lanes + extreme)
    dut = PartialSumPool(Tm, lanes)
    slots, groups = Tm // 2, Tm // 16
    windows = []
    for _ in range(6):
        negative = rng.integers(0, 2, size=(slots, 2))
        windows.append((negative, words(rng, int(rng.integers(1, 5)), lanes, slots, extreme)))
    got = []

    async def bench(ctx):
        for negative, ws in windows:
            for g in range(groups):  # the signs, one group a cycle
                ctx.set(dut.sign_en, 1)
                ctx.set(dut.sign_group, g)
                ctx.set(dut.signs, [{"re": int(negative[g * 8 + k, 0]),
                                     "im": int(negative[g * 8 + k, 1])} for k in range(8)])
                await ctx.tick()
            ctx.set(dut.sign_en, 0)
            for k, w in enumerate(ws):
                ctx.set(dut.acc, [[{"re": int(w[lane, s, 0]), "im": int(w[lane, s, 1])}
                                   for s in range(slots)] for lane in range(lanes)])
                ctx.set(dut.take, 1)
                ctx.set(dut.first, int(k == 0))
                await ctx.tick()
                ctx.set(dut.take, 0)
                if rng.random() < 0.5:  # held while take is low
                    ctx.set(dut.acc, [[{"re": 0, "im": 0}] * slots] * lanes)
                    await ctx.tick()
            pooled = ctx.get(dut.pooled)
            got.append(np.array([[[int(pooled[lane][s].re), int(pooled[lane][s].im)]
                                  for s in range(slots)] for lane in range(lanes)]))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    for (negative, ws), out in zip(windows, got, strict=True):
        want = np.where(negative.astype(bool)[None], ws.min(axis=0), ws.max(axis=0))
        np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize(("kwargs", "exc", "match"), [
    ({"Tm": 24}, ValueError, "multiple of 16"),
    ({"Tm": 0}, ValueError, "Tm must be in"),
    ({"lanes": 0}, ValueError, "lanes must be in"),
    ({"lanes": 1.5}, TypeError, "lanes must be an integer"),
])
def test_bad_parameters(kwargs, exc, match):
    args = {"Tm": 32, "lanes": 2} | kwargs
    with pytest.raises(exc, match=match):
        PartialSumPool(**args)
