"""cocotb testbench of :class:`fcircnn.hw.pe_array.PEArray` (Verilog top), plus the beat walk.

:func:`conv_beats` turns one block-circulant convolution (int8 slots and weight slots, as taken by
:func:`fcircnn.models.spectral.conv3d_slots_int`) into the input beats of the array: for every
group of ``Td`` output voxels, for every input-channel tile and every kernel offset, one beat with
the activation slots of the ``Td`` voxels and the weight terms of all block pairs.
:func:`conv_results` puts the output beats back into ``[P*B/2, Do, Ho, Wo]`` arrays. The
Amaranth-simulator tests use both as well.

Parameters (:func:`fcircnn.sim.runner.tb_params`): ``Tn``, ``Tm``, ``B``, ``Td``, ``seed``,
``shape`` (input ``[D, H, W]``), ``kernel``, ``stride``, ``padding``, ``n_in`` (input channels,
a multiple of ``Tn``), ``random_beats``.
"""

import itertools
import json
import os
import random
import time

import numpy as np

__all__ = ["conv_beats", "conv_results", "random_conv", "weight_terms"]


def weight_terms(re: int, im: int) -> dict:
    """Gauss weight-side terms of one weight slot (the compiler's job)."""
    return {"c": int(re), "cd": int(re) + int(im), "d": int(im)}


def random_conv(rng: np.random.Generator, n_in, n_out, B, shape, kernel, extremes=True):
    """Random int8 slots ``x`` ``[n_in/2, *shape]`` and weights ``[n_out/B, n_in/B, B/2, *kernel]``.

    With ``extremes``, about a quarter of the values are -127 or 127.
    """

    def draw(size):
        v = rng.integers(-127, 128, size=size)
        if extremes:
            mask = rng.random(size) < 0.25
            v = np.where(mask, rng.choice([-127, 127], size=size), v)
        return v.astype(np.int64)

    xs = (n_in // 2, *shape)
    ws = (n_out // B, n_in // B, B // 2, *kernel)
    return draw(xs), draw(xs), draw(ws), draw(ws)


def _out_size(n, k, s, p):
    return (n + 2 * p - k) // s + 1


def conv_beats(xq_re, xq_im, wq_re, wq_im, Tn, Td, stride=1, padding=0):
    """Input beats (payload dicts of :func:`fcircnn.hw.pe_array.in_layout`) of a conv tile.

    The output channels must equal the array's ``Tm`` (``wq.shape[0] * B``); the input channels
    are walked in tiles of ``Tn``. Returns ``(beats, groups)``: ``groups[g]`` lists the ``Td``
    output voxels (or ``None`` for padding) of the ``g``-th output beat.
    """
    P, Q, half = wq_re.shape[:3]
    B = 2 * half
    K = wq_re.shape[3:]
    stride = (stride,) * 3 if isinstance(stride, int) else tuple(stride)
    padding = (padding,) * 3 if isinstance(padding, int) else tuple(padding)
    nq = Tn // B
    assert Q % nq == 0, "input channels must be a multiple of Tn"
    spatial = xq_re.shape[1:]
    out = [_out_size(n, k, s, p) for n, k, s, p in zip(spatial, K, stride, padding, strict=True)]
    voxels = list(itertools.product(*(range(n) for n in out)))
    groups = [voxels[i : i + Td] for i in range(0, len(voxels), Td)]
    groups = [g + [None] * (Td - len(g)) for g in groups]

    beats = []
    offsets = list(itertools.product(*(range(k) for k in K)))
    for group in groups:
        steps = [(t, off) for t in range(Q // nq) for off in offsets]
        for n, (t, off) in enumerate(steps):
            act = []
            for vox in group:
                slots = []
                pos = None
                if vox is not None:
                    pos = [
                        o * s + k - p
                        for o, s, k, p in zip(vox, stride, off, padding, strict=True)
                    ]
                    if not all(0 <= x < n_ for x, n_ in zip(pos, spatial, strict=True)):
                        pos = None
                for s in range(t * nq * half, (t + 1) * nq * half):
                    if pos is None:
                        slots.append({"re": 0, "im": 0})
                    else:
                        slots.append(
                            {"re": int(xq_re[(s, *pos)]), "im": int(xq_im[(s, *pos)])}
                        )
                act.append(slots)
            w = [
                [
                    [
                        weight_terms(
                            wq_re[(p, t * nq + q, k, *off)], wq_im[(p, t * nq + q, k, *off)]
                        )
                        for k in range(half)
                    ]
                    for q in range(nq)
                ]
                for p in range(P)
            ]
            beats.append(
                {"act": act, "w": w, "first": int(n == 0), "last": int(n == len(steps) - 1)}
            )
    return beats, groups


def conv_results(outputs, groups, n_slots, out_shape):
    """Output beats (``[Td][Tm/2]`` of ``{"re", "im"}``) -> ``(acc_re, acc_im)`` int64 arrays."""
    acc_re = np.zeros((n_slots, *out_shape), dtype=np.int64)
    acc_im = np.zeros_like(acc_re)
    assert len(outputs) == len(groups), f"{len(outputs)} output beats for {len(groups)} groups"
    for beat, group in zip(outputs, groups, strict=True):
        for v, vox in enumerate(group):
            if vox is None:
                continue
            for s in range(n_slots):
                acc_re[(s, *vox)] = beat[v][s]["re"]
                acc_im[(s, *vox)] = beat[v][s]["im"]
    return acc_re, acc_im


def random_beats(rng: random.Random, Tn, Tm, B, Td, count):
    """Random beats (extremes included) with random accumulation lengths."""
    half = B // 2

    def part():
        return rng.choice((-127, 127)) if rng.random() < 0.25 else rng.randint(-127, 127)

    beats = []
    remaining = 0
    for n in range(count):
        first = remaining == 0
        if first:
            remaining = rng.randint(1, 5)
        remaining -= 1
        last = remaining == 0 or n == count - 1
        beats.append(
            {
                "act": [[{"re": part(), "im": part()} for _ in range(Tn // 2)] for _ in range(Td)],
                "w": [
                    [[weight_terms(part(), part()) for _ in range(half)] for _ in range(Tn // B)]
                    for _ in range(Tm // B)
                ],
                "first": int(first),
                "last": int(last),
            }
        )
    return beats


def reference_beats(beats, Tn, Tm, B, Td):
    """Expected output beats of :func:`random_beats`, via ``conv3d_slots_int`` on 1x1x1 kernels.

    Each accumulation of ``L`` beats is a convolution with a ``L x 1 x 1`` kernel over an input
    of depth ``L`` whose depth index is the beat.
    """
    from fcircnn.models.spectral import conv3d_slots_int

    half = B // 2
    outputs = []
    start = 0
    for end, beat in enumerate(beats):
        if not beat["last"]:
            continue
        run = beats[start : end + 1]
        start = end + 1
        L = len(run)
        out = []
        for v in range(Td):
            x_re = np.array([[b["act"][v][s]["re"] for b in run] for s in range(Tn // 2)])
            x_im = np.array([[b["act"][v][s]["im"] for b in run] for s in range(Tn // 2)])
            w_re = np.array(
                [
                    [
                        [[b["w"][p][q][k]["c"] for b in run] for k in range(half)]
                        for q in range(Tn // B)
                    ]
                    for p in range(Tm // B)
                ]
            )
            w_im = np.array(
                [
                    [
                        [[b["w"][p][q][k]["d"] for b in run] for k in range(half)]
                        for q in range(Tn // B)
                    ]
                    for p in range(Tm // B)
                ]
            )
            acc_re, acc_im = conv3d_slots_int(
                x_re.reshape(Tn // 2, L, 1, 1),
                x_im.reshape(Tn // 2, L, 1, 1),
                w_re.reshape(Tm // B, Tn // B, half, L, 1, 1),
                w_im.reshape(Tm // B, Tn // B, half, L, 1, 1),
            )
            out.append(
                [
                    {"re": int(acc_re[s, 0, 0, 0]), "im": int(acc_im[s, 0, 0, 0])}
                    for s in range(Tm // 2)
                ]
            )
        outputs.append(out)
    return outputs


# ------------------------------------------------------------------------------------------
# cocotb tests
# ------------------------------------------------------------------------------------------

try:
    import cocotb
except ImportError:  # pragma: no cover - cocotb is a dependency
    cocotb = None

if cocotb is not None:
    from cocotb.clock import Clock
    from cocotb.triggers import FallingEdge, ReadOnly

    from fcircnn.hw.pe_array import in_layout, out_layout
    from fcircnn.sim.runner import pack, tb_params, unpack

    async def _start(dut):
        cocotb.start_soon(Clock(dut.clk, 5, unit="ns").start())
        dut.rst.value = 1
        dut.i__valid.value = 0
        dut.i__payload.value = 0
        dut.o__ready.value = 0
        for _ in range(2):
            await FallingEdge(dut.clk)
        dut.rst.value = 0

    def _pack_beats(params, beats):
        ilay = in_layout(params["Tn"], params["Tm"], params["B"], params["Td"])
        return [pack(ilay, b) for b in beats]

    async def _drive(dut, params, packed, rng, p_valid, p_ready, n_out):
        """Feed the packed beats ``packed`` (random gaps with probability ``1-p_valid``), take
        ``n_out`` outputs (random ``ready`` with probability ``p_ready``); returns
        ``(outputs, cycles, accept_cycles)`` (cycle ``t`` ends with rising edge ``t``).
        """
        olay = out_layout(params["Tm"], params["Td"])
        beats = packed
        outputs, accepted = [], []
        idx = 0
        cycle = 0
        timeout = 20 * (len(beats) + 50)
        while len(outputs) < n_out:
            # Drive at the falling edge, look at the settled handshakes, then let the edge pass.
            valid = int(idx < len(packed) and rng.random() < p_valid)
            ready = int(rng.random() < p_ready)
            dut.i__valid.value = valid
            dut.i__payload.value = packed[idx] if idx < len(packed) else 0
            dut.o__ready.value = ready
            await ReadOnly()
            cycle += 1  # cycle `cycle` ends with rising edge `cycle`
            if valid and int(dut.i__ready.value):
                accepted.append(cycle)
                idx += 1
            if ready and int(dut.o__valid.value):
                outputs.append(unpack(olay, int(dut.o__payload.value)))
            await FallingEdge(dut.clk)
            assert cycle < timeout, f"timeout: {len(outputs)} of {n_out} outputs"
        return outputs, cycle, accepted

    @cocotb.test()
    async def random_beats_with_backpressure(dut):
        """Random beats and accumulation lengths, random valid/ready on both streams."""
        params = tb_params()
        rng = random.Random(params.get("seed", 1))
        beats = random_beats(
            rng, params["Tn"], params["Tm"], params["B"], params["Td"],
            params.get("random_beats", 40),
        )
        want = reference_beats(beats, params["Tn"], params["Tm"], params["B"], params["Td"])
        await _start(dut)
        got, _, _ = await _drive(dut, params, _pack_beats(params, beats), rng, 0.7, 0.6, len(want))
        for n, (g, w) in enumerate(zip(got, want, strict=True)):
            assert g == w, f"output beat {n} differs"

    @cocotb.test()
    async def conv_tile(dut):
        """A whole block-circulant conv tile (input tiles x kernel offsets) vs conv3d_slots_int."""
        from fcircnn.models.spectral import conv3d_slots_int

        params = tb_params()
        Tn, Tm, B, Td = params["Tn"], params["Tm"], params["B"], params["Td"]
        rng = random.Random(params.get("seed", 1))
        nrng = np.random.default_rng(params.get("seed", 1))
        x_re, x_im, w_re, w_im = random_conv(
            nrng, params.get("n_in", Tn), Tm, B, params["shape"], params["kernel"]
        )
        stride, padding = params.get("stride", 1), params.get("padding", 1)
        want_re, want_im = conv3d_slots_int(x_re, x_im, w_re, w_im, stride, padding)
        beats, groups = conv_beats(x_re, x_im, w_re, w_im, Tn, Td, stride, padding)
        await _start(dut)
        got, _, _ = await _drive(
            dut, params, _pack_beats(params, beats), rng, 0.8, 0.7, len(groups)
        )
        got_re, got_im = conv_results(got, groups, Tm // 2, want_re.shape[1:])
        assert np.array_equal(got_re, want_re), "real parts differ from conv3d_slots_int"
        assert np.array_equal(got_im, want_im), "imaginary parts differ from conv3d_slots_int"

    @cocotb.test()
    async def initiation_interval_one(dut):
        """Fed continuously with an always-ready output, the array takes a beat every cycle."""
        params = tb_params()
        rng = random.Random(params.get("seed", 1) + 1)
        n = params.get("ii_beats", 64)
        beats = random_beats(rng, params["Tn"], params["Tm"], params["B"], params["Td"], n)
        n_out = sum(b["last"] for b in beats)
        await _start(dut)
        _, cycles, accepted = await _drive(
            dut, params, _pack_beats(params, beats), rng, 1.0, 1.0, n_out
        )
        assert accepted == list(range(1, n + 1)), "input not accepted every cycle"
        latency = params["latency"]
        assert cycles == n + latency, f"{cycles} cycles for {n} beats (latency {latency})"

    @cocotb.test(skip=os.environ.get("FCIRCNN_BENCH_OUT") is None)
    async def throughput(dut):
        """Benchmark (enabled by ``FCIRCNN_BENCH_OUT``): continuous beats, cycles per second.

        Writes ``{"cycles", "seconds", "beats", "outputs"}`` as JSON to ``$FCIRCNN_BENCH_OUT``.
        """
        params = tb_params()
        rng = random.Random(params.get("seed", 1))
        n = params.get("bench_beats", 2000)
        pool = random_beats(rng, params["Tn"], params["Tm"], params["B"], params["Td"], 16)
        beats = [dict(pool[i % 16], first=int(i % 27 == 0), last=int(i % 27 == 26))
                 for i in range(n)]
        beats[-1]["last"] = 1
        n_out = sum(b["last"] for b in beats)
        packed = _pack_beats(params, beats)
        await _start(dut)
        start = time.perf_counter()
        outputs, cycles, _ = await _drive(dut, params, packed, rng, 1.0, 1.0, n_out)
        seconds = time.perf_counter() - start
        with open(os.environ["FCIRCNN_BENCH_OUT"], "w") as f:
            json.dump({"cycles": cycles, "seconds": seconds, "beats": n,
                       "outputs": len(outputs)}, f)
