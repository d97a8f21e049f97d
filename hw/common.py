"""Helpers shared by the hardware components: parameter checks and the stall pipeline."""

from __future__ import annotations

import contextlib
import re
import warnings
from collections.abc import Iterator

from amaranth.hdl import Const, Module, Mux, Signal, UnusedElaboratable, Value

from fcircnn.arch.geometry import BLOCK_SIZES, MAX_CHANNEL_TILE, MAX_TILE, channel_rule_problem

__all__ = [
    "TILE_LIMITS",
    "check_block_lanes",
    "check_block_size",
    "check_channel_rule",
    "check_positive",
    "check_tiles",
    "first_of",
    "mul_const",
    "mul_small",
    "never_elaborated",
    "rejecting",
    "stall_pipeline",
]

#: The largest value of each tile parameter a component takes: the channel tiles the PE array
#: and the buffers are built for, and the output tiles the descriptor's 8-bit fields carry.
TILE_LIMITS = {"Tn": MAX_CHANNEL_TILE, "Tm": MAX_CHANNEL_TILE, "Td": MAX_TILE, "Tr": MAX_TILE,
               "Tc": MAX_TILE}


def first_of(options, otherwise):
    """The value of the first ``(condition, value)`` option whose condition holds, else
    ``otherwise`` (a chain of ``Mux``; ``otherwise`` itself without options)."""
    for cond, value in reversed(options):
        otherwise = Mux(cond, value, otherwise)
    return otherwise


@contextlib.contextmanager
def rejecting(component) -> Iterator[None]:
    """Wrap a constructor's parameter checks.

    When a check raises ``TypeError`` or ``ValueError`` the exception propagates unchanged,
    and Amaranth's "created but never used" warning (:class:`~amaranth.hdl.UnusedElaboratable`,
    emitted when the half-built component is collected) is filtered out for this object alone:
    a ``warnings`` filter on its message, which names the object.
    """
    try:
        yield
    except (TypeError, ValueError):
        never_elaborated(component)
        raise


def never_elaborated(*components) -> None:
    """Say that ``components`` are not meant to be elaborated (half-built, or built only to
    be inspected): Amaranth's "created but never used" warning
    (:class:`~amaranth.hdl.UnusedElaboratable`) is filtered out for these objects alone, by
    a ``warnings`` filter on its message, which names the object."""
    for component in components:
        warnings.filterwarnings("ignore", category=UnusedElaboratable,
                                message=re.escape(f"{component!r} created but never used"))


def check_positive(name: str, value, maximum: int | None = None) -> None:
    """Raise ``TypeError``/``ValueError`` unless ``value`` is an integer in ``1..maximum``."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an integer, not {value!r}")
    if value < 1 or (maximum is not None and value > maximum):
        upper = f"..{maximum}" if maximum is not None else " or more"
        raise ValueError(f"{name} must be in 1{upper}, not {value}")


def check_tiles(**tiles) -> None:
    """Raise ``TypeError``/``ValueError`` unless every tile parameter given (``Tn``, ``Tm``,
    ``Td``, ``Tr``, ``Tc``) is an integer in ``1..``:data:`TILE_LIMITS` of its name."""
    for name, value in tiles.items():
        check_positive(name, value, TILE_LIMITS[name])


def check_channel_rule(rule: str, value: int, B: int = 8) -> None:
    """Raise ``ValueError`` unless channel tile ``value`` keeps
    :data:`~fcircnn.arch.geometry.CHANNEL_RULES` ``rule`` at block size ``B``."""
    if problem := channel_rule_problem(rule, value, B):
        raise ValueError(problem)


def check_block_size(B) -> None:
    """Raise ``ValueError`` unless ``B`` is a legal block size (4, 8 or 16)."""
    if B not in BLOCK_SIZES:
        raise ValueError(f"B must be one of {', '.join(map(str, BLOCK_SIZES))}, not {B}")


def check_block_lanes(lanes: int, B: int) -> None:
    """Raise ``ValueError`` unless ``B`` is legal and a beat of ``lanes`` slots holds whole
    blocks of ``B/2`` slots (the post-units that mix the slots of a block)."""
    check_block_size(B)
    if lanes % (B // 2):
        raise ValueError(f"lanes must be a multiple of B/2 = {B // 2} (whole blocks in a beat), "
                         f"not {lanes}")


def stall_pipeline(m: Module, i, o, latency: int) -> Value:
    """Handshake of a ``latency``-stage pipeline that stalls as a whole.

    Drives ``i.ready`` and ``o.valid`` of the two streams and returns the stage enable
    ``~o.valid | o.ready``: every pipeline register must update only while it is high. A beat
    accepted from ``i`` appears on ``o`` ``latency`` enabled cycles later; a stalled output
    holds every stage, so nothing is lost or duplicated, and the initiation interval is 1.
    """
    enable = Signal()
    m.d.comb += [enable.eq(~o.valid | o.ready), i.ready.eq(enable)]
    if latency == 1:
        valid = Signal()
        m.d.comb += o.valid.eq(valid)
        with m.If(enable):
            m.d.sync += valid.eq(i.valid)
    else:
        valid = Signal(latency)
        m.d.comb += o.valid.eq(valid[-1])
        with m.If(enable):
            m.d.sync += valid.eq((valid << 1) | i.valid)
    return enable


def mul_const(x, k: int) -> Value:
    """``x * k`` for a constant ``k >= 0`` without a DSP48E2: a power of two (or 0) as
    Amaranth's ``k * x`` (Yosys reduces it to a shift), any other ``k`` as shifts and adds,
    one per set bit (a ``$mul`` by such a constant Yosys would map to a DSP48E2)."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise ValueError(f"k must be a non-negative integer, not {k!r}")
    x = Value.cast(x)
    if k & (k - 1) == 0:
        return k * x
    result = None
    for bit in range(k.bit_length()):
        if k >> bit & 1:
            result = x << bit if result is None else result + (x << bit)
    return result


def mul_small(x, s, max_s: int) -> Value:
    """``x * s`` for a run-time ``s`` in ``1..max_s`` (a small stride) as a mux of constant
    multiples of ``x``: shifts and adds, no multiplier (Yosys would build a run-time multiply
    from LUTs, or take a DSP for it)."""
    result = Const(0)
    for k in range(1, max_s + 1):
        result = Mux(s == k, x * k, result)
    return result
