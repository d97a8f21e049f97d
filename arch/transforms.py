"""The integer transforms between the time domain and the slots, stated once.

A dense (time-domain) layer's output reaches the frequency domain through the post chain's
rfft stage, and a dense layer that reads an irfft's output takes lane 0 of the inverse
transform of its accumulators (``docs/golden.md``, "Time-domain layers"). Both are fixed
integer arithmetic on one block of ``B`` lanes (``B/2`` slots), which the golden model and the
hardware take from here.

rfft
    Slot ``k`` of a block of int8 time lanes ``t[0..B-1]`` (lane ``n`` is part ``n % 2`` of
    slot ``n // 2``) is ``v[part][k] = sum_n t[n] * RFFT_TWIDDLES[B][part][k][n]``: slot 0's
    real part is bin 0, its imaginary part bin ``B/2``, slot ``k >= 1`` bin ``k`` (cos and
    -sin). The twiddles are ``round(2**RFFT_FRACTION_BITS * cos)`` and the same of ``-sin``,
    so ``|v| <= B * 127 * 2**14``, which is below ``2**25`` for ``B <= 16``: a 26-bit signed
    value, one DSP48E2 port wide. The post chain then requantizes ``v`` per part and slot
    position with a multiplier and a rounding shift.
irfft, lane 0
    Lane 0 of the inverse transform of a block's slots ``Y`` is ``(Y0.re + Y0.im + 2 *
    sum_{k>=1} Yk.re) / B``: the stage sums ``u = Y0.re + Y0.im + 2 * sum_{k>=1} Yk.re``
    exactly and the ``1/B`` goes into the multiplier that follows. The weights of this sum
    are :func:`irfft_lane0_weights`.

Nothing here imports the rest of the project.
"""

from __future__ import annotations

import math

__all__ = ["RFFT_BITS", "RFFT_FRACTION_BITS", "RFFT_SLOTS", "irfft_lane0_weights",
           "rfft_twiddles"]

#: Fraction bits of the rfft's twiddle factors.
RFFT_FRACTION_BITS = 14
#: Width of the signed rfft sum ``v`` before requantization, for every legal ``B`` (<= 16):
#: ``16 * 127 * 2**14 < 2**25``.
RFFT_BITS = 26
#: Slots of the largest block (``B = 16``): the requantization's multipliers per part
#: (``LayerDescriptor.rfft_mult``, the post chain's rfft stage).
RFFT_SLOTS = 8


def rfft_twiddles(B: int) -> tuple[tuple[tuple[int, ...], ...], ...]:
    """The integer twiddles ``T[part][k][n]`` of the rfft of one block of ``B`` lanes.

    ``T[0][k][n] = round(2**14 * cos(2*pi*k*n/B))`` and ``T[1][k][n] = round(-2**14 *
    sin(2*pi*k*n/B))`` for ``1 <= k < B/2``; slot 0 packs the two real bins, ``T[0][0][n] =
    2**14`` (bin 0) and ``T[1][0][n] = (-1)**n * 2**14`` (bin ``B/2``).

    Raises
    ------
    ValueError
        If ``B`` is not an even power of two of at least 4.
    """
    if not (isinstance(B, int) and B >= 4 and B & (B - 1) == 0):
        raise ValueError(f"B must be a power of two of at least 4, not {B!r}")
    one = 1 << RFFT_FRACTION_BITS

    def twiddle(value: float) -> int:
        # cos and sin of multiples of 2*pi/B: round half away from zero, and exact zeros
        return int(math.copysign(math.floor(abs(value) * one + 0.5), value))

    re = [[one] * B] + [[twiddle(math.cos(2 * math.pi * k * n / B)) for n in range(B)]
                        for k in range(1, B // 2)]
    im = [[one if n % 2 == 0 else -one for n in range(B)]] + [
        [twiddle(-math.sin(2 * math.pi * k * n / B)) for n in range(B)]
        for k in range(1, B // 2)]
    return tuple(tuple(row) for row in re), tuple(tuple(row) for row in im)


def irfft_lane0_weights(B: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``(re, im)`` weights of each slot ``k`` of a block in lane 0 of its inverse transform,
    times ``B``: slot 0's two parts once (bins 0 and ``B/2``), each other slot's real part twice
    (its bin and the conjugate one), no other imaginary part."""
    if not (isinstance(B, int) and B >= 4 and B & (B - 1) == 0):
        raise ValueError(f"B must be a power of two of at least 4, not {B!r}")
    return (1,) + (2,) * (B // 2 - 1), (1,) + (0,) * (B // 2 - 1)
