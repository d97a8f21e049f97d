"""PE array: ``Td x Tm/2`` complex int32 accumulators fed by packed complex multiplier pairs."""

from amaranth.hdl import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from fcircnn.arch.geometry import BLOCK_SIZES, pe_chains

from .common import check_block_size, check_channel_rule, check_tiles, rejecting
from .complex_mul_pair import (
    ACT_WIDTH,
    WEIGHT_TERMS,
    ComplexMultiplierPair,
    complex_layout,
    pair_latency,
)
from .pe import ACC_WIDTH, PE, tree_levels

__all__ = ["BLOCK_SIZES", "PEArray", "array_latency", "in_layout", "out_layout"]

#: Block sizes the datapath supports.


def in_layout(Tn: int, Tm: int, B: int, Td: int = 1) -> data.StructLayout:
    """Payload of one input beat of :class:`PEArray`.

    Fields
    ------
    act : ``[Td][Tn/2]`` complex int8
        Activation slots of ``Td`` voxels; slot ``s = q*(B/2) + k`` (input block ``q``, bin ``k``).
    w : ``[Tm/B][Tn/B][B/2]`` :data:`~fcircnn.hw.complex_mul_pair.WEIGHT_TERMS`
        Weight terms ``c``, ``c+d``, ``d`` of weight slot ``(p, q, k)``, shared by all voxels.
    first : 1 bit
        This beat starts a new accumulation (clears the accumulators).
    last : 1 bit
        This beat ends the accumulation; the array emits the sums after it.
    """
    return data.StructLayout(
        {
            "act": data.ArrayLayout(data.ArrayLayout(complex_layout(ACT_WIDTH), Tn // 2), Td),
            "w": data.ArrayLayout(
                data.ArrayLayout(data.ArrayLayout(WEIGHT_TERMS, B // 2), Tn // B), Tm // B
            ),
            "first": 1,
            "last": 1,
        }
    )


def out_layout(Tm: int, Td: int = 1, acc_width: int = ACC_WIDTH) -> data.ArrayLayout:
    """Payload of one output beat: ``[Td][Tm/2]`` complex accumulators, slot ``p*(B/2) + k``."""
    return data.ArrayLayout(data.ArrayLayout(complex_layout(acc_width), Tm // 2), Td)


def array_latency(Tn: int, B: int) -> int:
    """Enabled cycles of :class:`PEArray` from accepting a ``last`` beat to ``o.valid`` (output
    ready): its pairs on the longest of the ``Tn/B`` products' cascades
    (:func:`~fcircnn.arch.geometry.pe_chains`,
    :func:`~fcircnn.hw.complex_mul_pair.pair_latency`), the PEs' adder tree over the
    cascades and their accumulator."""
    chains = pe_chains(Tn // B)
    return pair_latency(chains[0]) + tree_levels(len(chains)) + 1


def _check_int(name: str, value) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an integer, not {value!r}")


class PEArray(wiring.Component):
    """Block-circulant convolution datapath: ``Td`` voxels x ``Tm/2`` output slots per beat.

    Per input beat, for every voxel ``v``, output block ``p < Tm/B`` and bin slot ``k < B/2``::

        acc[v][p*(B/2) + k] (+)= sum_{q < Tn/B} w[p][q][k] (*) act[v][q*(B/2) + k]

    where ``(*)`` is the complex product for ``k >= 1`` and the component-wise product
    ``(re*re) + i(im*im)`` for ``k == 0`` (docs/contract.md section 4); the slot-0 lanes are
    fixed in the structure. A beat with ``first`` restarts the accumulators; after a beat with
    ``last`` has passed through, the array emits all accumulators as one output beat. A test
    bench (or the control unit) walks input-channel tiles x kernel offsets, one beat each, to
    compute a convolution; the result equals :func:`fcircnn.models.spectral.conv3d_slots_int`.

    Structure: ``P = Td * (Tm/(2B)) * (Tn/B) * (B/2) = Td*Tm*Tn/(4B)`` activation-slot x
    weight-slot-pair products, 3 DSP48E2 each, except that slot 0's have no ``b(c+d)`` multiply:
    :attr:`dsp_count` ``= 3P - P/(B/2)``, e.g. 176 instead of 192 for the C3D core. The ``Tn/B``
    input blocks ``q`` of one voxel ``v``, output block pair ``r`` and slot ``k`` are summed in
    the DSP48E2s' cascades, a few at a time (:func:`~fcircnn.arch.geometry.pe_chains`: 8 input
    blocks on two cascades of 4): one
    :class:`~fcircnn.hw.complex_mul_pair.ComplexMultiplierPair` per cascade multiplies its
    activation slots ``(v, q, k)`` by the weight slots of output blocks ``2r`` and ``2r + 1``
    and feeds one sum to each of the two :class:`~fcircnn.hw.pe.PE` ``(v, 2r, k)`` and
    ``(v, 2r+1, k)``; each PE adds its cascades' sums in an adder tree and accumulates.

    Contract
    --------
    * Ranges: activation and weight slot parts in ``[-127, 127]``, weight terms
      ``c``, ``c+d``, ``d`` precomputed by the compiler; accumulators are exact int32 (the
      compiler proves ``|acc| < 2**31``), wrapping beyond ``acc_width``.
    * Initiation interval 1: ``i.ready`` is high whenever the output is empty or being taken
      (``i.ready = ~o.valid | o.ready``, combinational from ``o.ready``), so a continuously fed
      array with a ready output accepts a beat every cycle, ``first``/``last`` boundaries
      included.
    * Latency: :attr:`latency` (:func:`array_latency`: ``c + 5 + ceil(log2(cascades))`` for
      cascades of up to ``c`` products) cycles from accepting the ``last`` beat to ``o.valid``,
      when the output is ready.
    * Back-pressure: the whole pipeline stalls while ``o.valid & ~o.ready``; ``o.payload`` is held
      (the accumulators are the output register). ``o.valid`` never depends on ``o.ready``.

    Parameters
    ----------
    Tn : int
        Input channels per tile (unrolled), a multiple of ``B``.
    Tm : int
        Output channels per tile (unrolled), a multiple of ``2B`` (pairs of output blocks).
    B : int
        Block size, one of 4, 8, 16.
    Td : int
        Voxels computed in parallel (unrolled ``Td`` loop), >= 1; default 1.
    acc_width : int
        Accumulator width, >= 32.

    Ports
    -----
    i : In(stream.Signature(in_layout(Tn, Tm, B, Td)))
    o : Out(stream.Signature(out_layout(Tm, Td, acc_width)))
    """

    def __init__(self, Tn: int, Tm: int, B: int = 8, Td: int = 1, *, acc_width: int = ACC_WIDTH):
        with rejecting(self):
            self._validate(Tn, Tm, B, Td, acc_width)
        self.Tn, self.Tm, self.B, self.Td = Tn, Tm, B, Td
        self.acc_width = acc_width
        #: Activation-slot x weight-slot-pair products per beat (3 DSP48E2 each, 2 on slot 0).
        self.pairs = Td * Tm * Tn // (4 * B)
        #: Products on slot-0 lanes (``k == 0``), which have no ``b(c+d)`` multiply.
        self.slot0_pairs = self.pairs // (B // 2)
        #: DSP48E2 instances: 3 per product, 2 per slot-0 product.
        self.dsp_count = 3 * self.pairs - self.slot0_pairs
        #: The cascades each PE's ``Tn/B`` products are summed on, as their lengths.
        self.chains = pe_chains(Tn // B)
        #: Cycles from accepting the ``last`` beat to ``o.valid`` (output ready).
        self.latency = array_latency(Tn, B)
        super().__init__(
            {
                "i": In(stream.Signature(in_layout(Tn, Tm, B, Td))),
                "o": Out(stream.Signature(out_layout(Tm, Td, acc_width))),
            }
        )

    @staticmethod
    def _validate(Tn, Tm, B, Td, acc_width):
        for name, value in (("Tn", Tn), ("Tm", Tm), ("B", B), ("Td", Td), ("acc_width", acc_width)):
            _check_int(name, value)
        check_block_size(B)
        check_tiles(Tn=Tn, Tm=Tm)
        check_channel_rule("input_blocks", Tn, B)
        check_channel_rule("output_block_pairs", Tm, B)
        if Td < 1:
            raise ValueError(f"Td must be a positive integer, not {Td}")
        if acc_width < ACC_WIDTH:
            raise ValueError(
                f"acc_width must be at least {ACC_WIDTH} (the contract's int32 accumulator), "
                f"not {acc_width}"
            )

    @classmethod
    def from_core(cls, core, block_size: int, **kwargs) -> "PEArray":
        """PE array of one core of an accelerator file.

        Parameters
        ----------
        core : fcircnn.models.config.CoreConfig
            ``load_accelerator(path).cores[i]``; ``tn``, ``tm`` give ``Tn``, ``Tm``; ``Td`` is
            ``core.td`` if ``"td"`` is in ``core.unroll``, else 1.
        block_size : int
            ``B``, the accelerator's ``block_size``.
        **kwargs
            Passed to the constructor (``acc_width``).
        """
        td = core.td if "td" in core.unroll else 1
        return cls(core.tn, core.tm, block_size, td, **kwargs)

    def elaborate(self, platform):
        m = Module()
        Tm, B, Td = self.Tm, self.B, self.Td
        half = B // 2

        ce = Signal()
        m.d.comb += [
            ce.eq(~self.o.valid | self.o.ready),
            self.i.ready.eq(ce),
        ]

        # Control travels beside the pairs (their latency in registers), then into the PEs.
        longest = self.chains[0]
        valid, first, last = self.i.valid, self.i.payload.first, self.i.payload.last
        for stage in range(pair_latency(longest)):
            ctl = [Signal(name=f"{nm}_s{stage}") for nm in ("valid", "first", "last")]
            with m.If(ce):
                m.d.sync += [ctl[0].eq(valid), ctl[1].eq(first), ctl[2].eq(last)]
            valid, first, last = ctl

        act, w = self.i.payload.act, self.i.payload.w
        pes = {}
        for v in range(Td):
            for p in range(Tm // B):
                for k in range(half):
                    pe = PE(len(self.chains), acc_width=self.acc_width)
                    m.submodules[f"pe_v{v}_p{p}_k{k}"] = pe
                    m.d.comb += [
                        pe.ce.eq(ce),
                        pe.valid.eq(valid),
                        pe.first.eq(first),
                        pe.last.eq(last),
                        self.o.payload[v][p * half + k].eq(pe.acc),
                    ]
                    pes[v, p, k] = pe
            for r in range(Tm // (2 * B)):
                for k in range(half):
                    q0 = 0
                    for c, length in enumerate(self.chains):
                        # a shorter cascade waits to end with the longest
                        pair = ComplexMultiplierPair(length, slot0=k == 0,
                                                     delay=longest - length)
                        m.submodules[f"pair_v{v}_r{r}_k{k}_c{c}"] = pair
                        m.d.comb += pair.ce.eq(ce)
                        for i, q in enumerate(range(q0, q0 + length)):
                            m.d.comb += [
                                pair.act[i].eq(act[v][q * half + k]),
                                pair.w[i][0].eq(w[2 * r][q][k]),
                                pair.w[i][1].eq(w[2 * r + 1][q][k]),
                            ]
                        m.d.comb += [
                            pes[v, 2 * r, k].prod[c].eq(pair.prod[0]),
                            pes[v, 2 * r + 1, k].prod[c].eq(pair.prod[1]),
                        ]
                        q0 += length
        m.d.comb += self.o.valid.eq(pes[0, 0, 0].done)
        return m
