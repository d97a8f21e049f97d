"""Processing element: a pipelined complex adder tree into an int32 complex accumulator."""

from amaranth.hdl import Module, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from fcircnn.arch.geometry import ACC_BITS

from .common import rejecting
from .complex_mul_pair import PRODUCT_WIDTH, complex_layout

__all__ = ["ACC_WIDTH", "PE", "tree_levels"]

#: Accumulator width of the numeric contract (exact int32 accumulation).
ACC_WIDTH = ACC_BITS


def tree_levels(n: int) -> int:
    """Number of registered levels of an ``n``-input adder tree (``ceil(log2 n)``)."""
    return max(0, (n - 1).bit_length())


def _check_positive_int(name: str, value) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an integer, not {value!r}")
    if value < 1:
        raise ValueError(f"{name} must be a positive integer, not {value}")


class PE(wiring.Component):
    """Sum of ``n`` complex products per beat, accumulated over the beats of one output.

    One PE computes one output slot ``k`` of one output block ``p`` (at one voxel): per beat it
    takes the ``n = Tn/B`` complex products ``Wf[p, q, k] * Xf[q, k]`` of the ``Tn/B`` input
    blocks ``q`` of the tile, adds them in a registered complex adder tree and accumulates.

    Composition with the multipliers: the products come from :class:`ComplexMultiplierPair`
    instances, each of which serves **two** PEs (output blocks ``2r`` and ``2r + 1``, same slot
    ``k`` and voxel) that read the same activation slot; the PE itself holds no multiplier. See
    :class:`fcircnn.hw.pe_array.PEArray`.

    Contract
    --------
    * ``prod`` parts are signed 18-bit; sums are exact up to ``acc_width`` bits (wrap-around
      beyond it; the compiler proves ``|acc| < 2**31`` for the default 32).
    * ``valid``, ``first``, ``last`` travel with ``prod``. A valid beat with ``first`` clears the
      accumulator (it starts from that beat's sum); other valid beats add to it.
    * Latency: ``tree_levels(n) + 1`` enabled cycles from a beat's ``prod`` to its effect on
      ``acc``. After the ``last`` beat's sum is accumulated, ``done`` is high and ``acc`` holds the
      finished sum until the next enabled cycle. Initiation interval 1.
    * ``ce`` low holds every register (``acc`` and ``done`` included), which is how a stalled
      output holds its data.

    Parameters
    ----------
    n : int
        Number of products per beat (``Tn/B``), >= 1.
    acc_width : int
        Accumulator width, >= 32 (the contract's int32 accumulator).

    Ports
    -----
    prod : In(ArrayLayout(complex_layout(18), n))
    valid, first, last, ce : In(1)
    acc : Out(complex_layout(acc_width))
    done : Out(1)
    """

    def __init__(self, n: int, *, acc_width: int = ACC_WIDTH):
        with rejecting(self):
            _check_positive_int("n", n)
            _check_positive_int("acc_width", acc_width)
            if acc_width < ACC_WIDTH:
                raise ValueError(
                    f"acc_width must be at least {ACC_WIDTH} (the contract's int32 accumulator), "
                    f"not {acc_width}"
                )
        self.n = n
        self.acc_width = acc_width
        self.latency = tree_levels(n) + 1
        super().__init__(
            {
                "prod": In(data.ArrayLayout(complex_layout(PRODUCT_WIDTH), n)),
                "valid": In(1),
                "first": In(1),
                "last": In(1),
                "ce": In(1),
                "acc": Out(complex_layout(acc_width)),
                "done": Out(1),
            }
        )

    def elaborate(self, platform):
        m = Module()

        # Registered complex adder tree; an odd element passes to the next level in a register.
        level = [(p.re, p.im) for p in self.prod]
        valid, first, last = self.valid, self.first, self.last
        width = PRODUCT_WIDTH
        depth = 0
        while len(level) > 1:
            width += 1
            nxt = []
            for i in range(0, len(level), 2):
                re = Signal(signed(width), name=f"sum{depth}_{i // 2}_re")
                im = Signal(signed(width), name=f"sum{depth}_{i // 2}_im")
                if i + 1 < len(level):
                    (re0, im0), (re1, im1) = level[i], level[i + 1]
                    with m.If(self.ce):
                        m.d.sync += [re.eq(re0 + re1), im.eq(im0 + im1)]
                else:
                    with m.If(self.ce):
                        m.d.sync += [re.eq(level[i][0]), im.eq(level[i][1])]
                nxt.append((re, im))
            ctl = [Signal(name=f"{nm}{depth}") for nm in ("valid", "first", "last")]
            with m.If(self.ce):
                m.d.sync += [ctl[0].eq(valid), ctl[1].eq(first), ctl[2].eq(last)]
            valid, first, last = ctl
            level = nxt
            depth += 1
        sum_re, sum_im = level[0]

        # Accumulator: `first` restarts it, `done` marks the finished sum of a `last` beat.
        with m.If(self.ce):
            m.d.sync += self.done.eq(valid & last)
            with m.If(valid):
                with m.If(first):
                    m.d.sync += [self.acc.re.eq(sum_re), self.acc.im.eq(sum_im)]
                with m.Else():
                    m.d.sync += [
                        self.acc.re.eq(self.acc.re + sum_re),
                        self.acc.im.eq(self.acc.im + sum_im),
                    ]
        return m
