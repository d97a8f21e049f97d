"""Shared test helpers of the post-unit testbenches (Amaranth simulator and cocotb).

* Stimulus generators (:func:`cbn_cases`, :func:`quantize_cases`, :func:`slot_cases`): seeded
  NumPy data including the contract's extremes (acc at +-(2**31 - 1), mult/res_mult at
  -32768/+-32767, bias at the int48 edges where ``t`` still fits, shifts 0 and 47, clamp
  saturation at both ends, ``.5`` ties of both signs).
* Beat conversion: :func:`to_beats` / :func:`from_beats` (per-part ``(beats, lanes)`` arrays <->
  the nested values :func:`fcircnn.sim.runner.pack` understands), :func:`map_to_beats` /
  :func:`beats_to_map` (``(slots, D, H, W)`` maps <-> raster-order beats, slot groups minor).
* Golden references on ``(re, im)`` pairs built on :mod:`fcircnn.models.spectral`:
  :func:`ref_cbn`, :func:`ref_quantize`, :func:`ref_maxpool`, :func:`ref_chain`; the chain
  configuration value :func:`chain_config`.
* Stream drivers with random valid/ready back-pressure: :func:`run_amaranth` (Amaranth's
  simulator, async testbenches) and :func:`run_cocotb_stream` / :func:`cocotb_reset` (inside a
  cocotb test).
"""

from __future__ import annotations

import numpy as np

from fcircnn.models import spectral
from fcircnn.sim.runner import pack, unpack

__all__ = [
    "PARTS",
    "T_MAX",
    "T_MIN",
    "beats_to_map",
    "cbn_cases",
    "chain_config",
    "cocotb_reset",
    "from_beats",
    "map_to_beats",
    "quantize_cases",
    "ref_cbn",
    "ref_chain",
    "ref_maxpool",
    "ref_quantize",
    "run_amaranth",
    "run_cocotb_stream",
    "slot_cases",
    "to_beats",
]

PARTS = ("re", "im")
T_MIN, T_MAX = -(1 << 47), (1 << 47) - 1
ACC_MAX = (1 << 31) - 1


def _pick(rng, n, extremes, lo, hi):
    """``n`` values: half uniform in ``[lo, hi]``, half from ``extremes``."""
    out = rng.integers(lo, hi, size=n, endpoint=True, dtype=np.int64)
    mask = rng.random(n) < 0.5
    out[mask] = rng.choice(np.asarray(extremes, dtype=np.int64), size=int(mask.sum()))
    return out


def _shift_for(t, rng):
    """A shift that brings ``t`` near the int8 range (some results saturate, some do not)."""
    bits = np.array([int(abs(int(v))).bit_length() for v in t.ravel()]).reshape(t.shape)
    return np.clip(bits - 7 + rng.integers(-1, 2, size=t.shape), 0, 47)


def cbn_cases(rng, shape, acc_width=32):
    """Random CBN operands of ``shape`` (one part), with extremes; ``t`` always fits int48;
    ``|acc| < 2**(acc_width - 1)`` (the extremes at both ends of that range).

    Returns a dict of int64 arrays: ``acc, mult, bias, res, res_mult, shift``.
    """
    n = int(np.prod(shape))
    top = min(ACC_MAX, (1 << (acc_width - 1)) - 1)
    acc = _pick(rng, n, [top, -top, 0, 1, -1], -top, top)
    mult = _pick(rng, n, [32767, -32768, -32767, 0, 1, -1], -32768, 32767)
    res = _pick(rng, n, [127, -127, 0], -127, 127)
    res_mult = _pick(rng, n, [32767, -32768, 0], -32768, 32767)
    # Small acc too, so that the quantized results are not all saturated.
    small = rng.random(n) < 0.3
    acc[small] = rng.integers(-min(2000, top), min(2000, top) + 1, size=int(small.sum()))
    partial = acc * mult + res * res_mult
    bias = _pick(rng, n, [T_MAX, T_MIN, 0], T_MIN, T_MAX)
    # Clip the bias so that t (with or without the residual term) still fits int48.
    lo = np.maximum(T_MIN, T_MIN - np.minimum(acc * mult, partial))
    hi = np.minimum(T_MAX, T_MAX - np.maximum(acc * mult, partial))
    bias = np.clip(bias, lo, hi)
    moderate = rng.random(n) < 0.5
    bias[moderate] = rng.integers(-(1 << 20), 1 << 20, size=int(moderate.sum()))
    t = acc * mult + bias + res * res_mult
    shift = _shift_for(t, rng)
    out = {"acc": acc, "mult": mult, "bias": bias, "res": res, "res_mult": res_mult,
           "shift": shift}
    return {k: v.reshape(shape) for k, v in out.items()}


def quantize_cases(rng, shape):
    """Random ``(t, shift)`` of ``shape``: int48 edges, shifts 0 and 47, saturation at both
    ends, exact ``.5`` ties of both signs, and unsaturated values."""
    n = int(np.prod(shape))
    shift = _pick(rng, n, [0, 47, 1, 46], 0, 47)
    kind = rng.integers(0, 4, size=n)
    t = np.empty(n, dtype=np.int64)
    for j in range(n):
        s = int(shift[j])
        if kind[j] == 0:  # int48 extremes and random full range
            t[j] = int(rng.choice([T_MAX, T_MIN, T_MIN + 1, 0, -1, 1]))
            if rng.random() < 0.5:
                t[j] = int(rng.integers(T_MIN, T_MAX, endpoint=True))
        elif kind[j] == 1:  # a .5 tie: (y + 1/2) * 2**s, both signs
            y = int(rng.integers(-140, 140, endpoint=True))
            t[j] = (2 * y + 1) << (s - 1) if s > 0 else y
        elif kind[j] == 2:  # around the clamp bounds
            y = int(rng.choice([127, 128, -127, -128, -129, 126]))
            t[j] = (y << s) + int(rng.integers(0, 1 << s)) if s < 40 else y << s
        else:  # unsaturated
            y = int(rng.integers(-127, 127, endpoint=True))
            t[j] = (y << s) + int(rng.integers(0, 1 << s))
        t[j] = min(max(t[j], T_MIN), T_MAX)
    return t.reshape(shape), shift.reshape(shape)


def slot_cases(rng, shape, lo=-127):
    """int8 slot parts in ``[lo, 127]`` (both ends included often)."""
    n = int(np.prod(shape))
    return _pick(rng, n, [lo, 127, 0], lo, 127).reshape(shape)


# ------------------------------------------------------------------------------------------
# Beats
# ------------------------------------------------------------------------------------------


def to_beats(fields):
    """``{name: (re, im)}`` of ``(beats, lanes)`` arrays -> list of beats (list of lanes).

    With a single name ``None`` the lanes are the bare ``{"re", "im"}`` parts (slot layout).
    """
    first = next(iter(fields.values()))[0]
    beats, lanes = first.shape
    out = []
    for b in range(beats):
        row = []
        for lane in range(lanes):
            parts = {name: {p: int(v[k][b, lane]) for k, p in enumerate(PARTS)}
                     for name, v in fields.items()}
            row.append(parts[None] if None in parts else parts)
        out.append(row)
    return out


def from_beats(beats, name=None):
    """Inverse of :func:`to_beats` for one field: ``(re, im)`` int64 ``(beats, lanes)``."""
    res = []
    for p in PARTS:
        res.append(np.array([[lane[p] if name is None else lane[name][p] for lane in beat]
                             for beat in beats], dtype=np.int64).reshape(len(beats), -1))
    return tuple(res)


# ------------------------------------------------------------------------------------------
# Golden references on (re, im) pairs
# ------------------------------------------------------------------------------------------


def ref_cbn(case, *, bypass=False, residual=True):
    """``(t_re, t_im)`` for ``case = {name: (re, im)}`` as :class:`CBNResidual` computes it."""
    out = []
    for k in range(2):
        if bypass:
            out.append(case["acc"][k].copy())
        elif residual:
            out.append(spectral.cbn(case["acc"][k], case["mult"][k], case["bias"][k],
                                    case["res"][k], case["res_mult"][k]))
        else:
            out.append(spectral.cbn(case["acc"][k], case["mult"][k], case["bias"][k]))
    return tuple(out)


def ref_quantize(t, shift, *, bypass=False):
    """``(y_re, y_im)`` for ``t = (re, im)``, ``shift = (re, im)``."""
    return tuple(spectral.quantize(t[k], 0 if bypass else shift[k]) for k in range(2))


def ref_maxpool(maps, window, stride, padding):
    """Pool ``(re, im)`` maps of shape ``(lanes, D, H, W)``."""
    return tuple(spectral.cmaxpool(maps[k], window, stride, padding) for k in range(2))


def chain_config(size, *, residual, relu, pool, bypass_cbn=False, bypass_quantize=False,
                 groups=1, lane0=False, rfft=None):
    """The :class:`~fcircnn.hw.post_chain.PostChain` configuration value for a layer.

    ``pool`` is ``None`` (bypassed) or ``(window, stride, padding)`` triples; ``lane0``
    enables the lane-0 stage; ``rfft`` is ``None`` or ``(mult, shift)``, the rfft stage's
    sixteen multipliers (part-major) and its shift.
    """
    window, stride, padding = pool if pool is not None else ((1, 1, 1),) * 3
    mult, shift = rfft if rfft is not None else ([0] * 16, 0)
    return {
        "lane0": {"enable": int(lane0)},
        "rfft": {"enable": int(rfft is not None), "mult": list(mult), "shift": shift},
        "cbn": {"bypass": int(bypass_cbn), "residual": int(residual)},
        "quantize": {"bypass": int(bypass_quantize)},
        "crelu": {"bypass": int(not relu)},
        "pool": {"bypass": int(pool is None), "groups": groups, "window": list(window),
                 "stride": list(stride), "padding": list(padding), "size": list(size)},
    }


def ref_chain(case, cfg, B=8):
    """The chain's golden output ``(re, im)`` for ``case = {name: (re, im)}`` of
    ``(lanes, D, H, W)`` maps and a :func:`chain_config` value, stage by stage (blocks of
    ``B`` lanes for the lane-0 and rfft stages)."""
    from fcircnn.models import timedomain

    if cfg["lane0"]["enable"]:
        half = B // 2
        u = timedomain.irfft_lane0(*case["acc"], B)
        acc_re = np.zeros_like(case["acc"][0])
        acc_re[::half] = u
        case = dict(case, acc=(acc_re, np.zeros_like(acc_re)))
    t = ref_cbn(case, bypass=bool(cfg["cbn"]["bypass"]), residual=bool(cfg["cbn"]["residual"]))
    y = ref_quantize(t, case["shift"], bypass=bool(cfg["quantize"]["bypass"]))
    if not cfg["crelu"]["bypass"]:
        y = tuple(spectral.crelu(v) for v in y)
    pool = cfg["pool"]
    if not pool["bypass"]:
        y = ref_maxpool(y, pool["window"], pool["stride"], pool["padding"])
    rfft = cfg["rfft"]
    if rfft["enable"]:
        half = B // 2
        v = timedomain.rfft_int(*y, B)
        mult = np.asarray(rfft["mult"]).reshape(2, 8)[:, :half]
        k = np.arange(y[0].shape[0]) % half
        y = tuple(spectral.quantize(v[c] * mult[c][k].reshape(-1, *[1] * (v[c].ndim - 1)),
                                    rfft["shift"]) for c in (0, 1))
    return y


def map_to_beats(maps, lanes=None):
    """``(re, im)`` maps ``(slots, D, H, W)`` -> ``(re, im)`` of ``(D*H*W*groups, lanes)``.

    Voxels in raster order, each as ``groups = slots / lanes`` beats of consecutive slots
    (``lanes`` defaults to ``slots``: one beat per voxel).
    """
    return tuple(np.moveaxis(m, 0, -1).reshape(-1, lanes or m.shape[0]) for m in maps)


def beats_to_map(pair, shape):
    """Inverse of :func:`map_to_beats` for output maps of spatial ``shape``."""
    return tuple(np.moveaxis(p.reshape(*shape, -1), -1, 0) for p in pair)


# ------------------------------------------------------------------------------------------
# Stream drivers
# ------------------------------------------------------------------------------------------


def run_amaranth(dut, cfg, in_beats, n_out, *, seed=0, p_idle=0.3, p_stall=0.3, extra=20,
                 max_cycles=200_000):
    """Run ``dut`` (ports ``i``, ``o``, ``cfg``) on Amaranth's simulator.

    Sends ``in_beats`` (nested values of the input payload layout) with random idle cycles
    (probability ``p_idle``), takes ``n_out`` output beats with random ``ready`` low cycles
    (``p_stall``); once all input beats are accepted and ``n_out`` taken, checks that no further
    beat appears for ``extra`` cycles. Fails if the inputs are not all accepted.
    Returns ``(out_beats, cycles)``.
    """
    import random

    from amaranth.sim import Simulator

    rng = random.Random(seed)
    in_layout = dut.i.payload.shape()
    out_layout = dut.o.payload.shape()
    out: list = []
    state = {"cycles": 0, "sent": 0}

    async def sender(ctx):
        ctx.set(dut.cfg.as_value(), pack(dut.cfg.shape(), cfg))
        await ctx.tick()  # configuration one cycle before the first beat (CMaxPool's contract)
        for beat in in_beats:
            while rng.random() < p_idle:
                await ctx.tick()
            ctx.set(dut.i.payload.as_value(), pack(in_layout, beat))
            ctx.set(dut.i.valid, 1)
            await ctx.tick().until(dut.i.ready)
            ctx.set(dut.i.valid, 0)
            state["sent"] += 1

    async def receiver(ctx):
        await ctx.tick()  # the sender's configuration cycle: not counted
        cycles = 0
        tail = 0
        while len(out) < n_out or tail < extra:
            ready = rng.random() >= p_stall
            if len(out) >= n_out:
                ready = True
                if state["sent"] == len(in_beats):
                    tail += 1
            ctx.set(dut.o.ready, ready)
            _, _, valid, payload = await ctx.tick().sample(dut.o.valid, dut.o.payload.as_value())
            cycles += 1
            if cycles > max_cycles:
                raise AssertionError(f"timeout: {len(out)} of {n_out} beats after {cycles}")
            if ready and valid:
                if len(out) >= n_out:
                    raise AssertionError(f"more than the expected {n_out} output beats")
                out.append(unpack(out_layout, payload))
                state["cycles"] = cycles
        ctx.set(dut.o.ready, 0)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(sender, background=True)
    sim.add_testbench(receiver)
    sim.run()
    return out, state["cycles"]


async def run_cocotb_stream(dut, in_words, n_out, rng, *, p_idle=0.3, p_stall=0.3, extra=20,
                            max_cycles=200_000):
    """Inside a cocotb test: stream packed ``in_words`` into ``i__*`` and collect ``n_out``
    packed words from ``o__*``, with random idle/stall cycles from ``rng`` (``random.Random``).

    Inputs change on the falling clock edge; handshakes are evaluated in the ReadOnly phase
    before the next rising edge (valid stays high until accepted). Once all inputs are accepted
    and ``n_out`` words taken, checks for ``extra`` cycles that no further beat appears.
    Returns the output words.
    """
    from cocotb.triggers import FallingEdge, ReadOnly

    out = []
    index = 0
    pending = False
    cycles = 0
    tail = 0
    while len(out) < n_out or tail < extra:
        await FallingEdge(dut.clk)
        cycles += 1
        if cycles > max_cycles:
            raise AssertionError(f"timeout: {len(out)} of {n_out} beats after {cycles} cycles")
        if not pending:
            if index < len(in_words) and rng.random() >= p_idle:
                dut.i__payload.value = in_words[index]
                dut.i__valid.value = 1
                pending = True
            else:
                dut.i__valid.value = 0
        ready = rng.random() >= p_stall or len(out) >= n_out
        if len(out) >= n_out and index == len(in_words):
            tail += 1
        dut.o__ready.value = int(ready)
        await ReadOnly()
        if pending and int(dut.i__ready.value):
            index += 1
            pending = False
        if ready and int(dut.o__valid.value):
            if len(out) >= n_out:
                raise AssertionError(f"more than the expected {n_out} output beats")
            out.append(int(dut.o__payload.value.to_unsigned()))
    return out


async def cocotb_reset(dut, cfg_word=None):
    """Start the 5 ns clock, apply ``cfg_word`` (if the design has a ``cfg`` port), idle the
    streams and pulse ``rst``."""
    from cocotb.clock import Clock
    from cocotb.triggers import ClockCycles

    Clock(dut.clk, 5, unit="ns").start()
    if cfg_word is not None:
        dut.cfg.value = cfg_word
    dut.i__valid.value = 0
    dut.i__payload.value = 0
    dut.o__ready.value = 0
    dut.rst.value = 1
    await ClockCycles(dut.clk, 3)
    dut.rst.value = 0
