"""A core's geometry, its legality rules and the buffers' limits, stated once.

:class:`CoreGeometry` is derived and validated once from a core's tiles and the block size:
the slot groups its walkers step through, its PE lanes, the weight beats of a tile, the input
box of an output tile. :func:`channel_tile_problems` is the rule ``Tn``/``Tm`` obey, which the
configuration schema checks (``fcircnn check`` refuses exactly what the engine cannot build),
and the ``MAX_*`` constants are the hardware's absolute limits. :class:`EngineGeometry` is what
one core's buffers are sized for, :func:`engine_geometry` derives it from the layers an
accelerator places on the core, :func:`pool_fuses` says which pools run in the drain and
:func:`pool_carry` sizes the memories that carry overlapping pool windows across tiles.

The functions take the configuration's objects by duck typing (``tn``, ``tm``, ... of a core;
``kind``, ``kernel``, ... of a resolved layer): this module sits below the configuration and
imports nothing of the project.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ACC_BITS",
    "BEAT_BYTES",
    "BLOCK_SIZES",
    "CARRIED_WINDOW",
    "CHANNEL_RULES",
    "DSP_MUL_BITS",
    "GAUSS_PRODUCT_MAX",
    "INT8_MAX",
    "LUTRAM_MAX_DEPTH",
    "MAX_ADDRESS_WIDTH",
    "MAX_CHANNEL_TILE",
    "MAX_KERNEL",
    "MAX_MAP_SIZE",
    "MAX_POOL_MAP",
    "MAX_POOL_WINDOW",
    "MAX_TAPS",
    "MAX_TILE",
    "MIN_ADDRESS_WIDTH",
    "PACKED_CHAIN_MAX",
    "PACKED_SHIFT",
    "PAGE_BITS",
    "PAGE_BYTES",
    "SLOTS_PER_BEAT",
    "SLOT_GROUP_CHANNELS",
    "CoreGeometry",
    "EngineGeometry",
    "InputBufferGeometry",
    "PoolCarry",
    "balanced_span",
    "box_span",
    "cbn_dsp_per_lane",
    "channel_rule_problem",
    "channel_tile_problems",
    "core_lanes",
    "engine_geometry",
    "input_buffer_geometry",
    "lane_rows",
    "lanes_take_rows",
    "pe_chains",
    "pool_carries",
    "pool_carry",
    "pool_fuses",
    "row_groups",
    "row_lane",
    "spreads",
    "weight_image_beats",
]

#: The AXI address widths an accelerator may have (``address_width``, bits).
MIN_ADDRESS_WIDTH = 32
MAX_ADDRESS_WIDTH = 64
#: AXI4's 4 KiB boundary, which no burst crosses: the DMAs split bursts at it, the compiler
#: aligns images and regions to it, and the memory windows count in pages of it.
PAGE_BITS = 12
PAGE_BYTES = 1 << PAGE_BITS
#: Legal circulant block sizes ``B`` (even powers of two).
BLOCK_SIZES: tuple[int, ...] = (4, 8, 16)
#: Largest magnitude of an int8 slot part (``-128`` never occurs).
INT8_MAX = 127
#: Channels of one slot group: the 8 complex slots of a 128-bit beat (NC/8DHW8).
SLOT_GROUP_CHANNELS = 16
#: Slots in one 128-bit beat (one slot group: 8 complex int8 slots) and its bytes.
SLOTS_PER_BEAT = SLOT_GROUP_CHANNELS // 2
BEAT_BYTES = 2 * SLOTS_PER_BEAT
#: Width of the signed accumulators of the PE array, the partial sums and the post chain's
#: input (the numeric contract's int32 accumulation).
ACC_BITS = 32
#: Width of the signed operand a DSP48E2 multiplier takes on its wide port (27 x 18): a CBN
#: multiply whose accumulators fit it takes one DSP48E2 per part
#: (:attr:`EngineGeometry.acc_bits`).
DSP_MUL_BITS = 27
#: Bits of the low field of a packed DSP48E2 product: the PE array's multiplies take two INT9
#: operands on the 27-bit port as ``(hi << PACKED_SHIFT) + lo`` and give two products at once.
PACKED_SHIFT = 18
#: Largest magnitude of one Gauss product of the PE array: an INT9 pre-add of two int8 parts
#: (``|a +- b| <= 2 * INT8_MAX``) times an int8 part, or an int8 part times a weight pre-add
#: ``c + d`` (docs/contract.md; slot 0's plain products are smaller).
GAUSS_PRODUCT_MAX = 2 * INT8_MAX * INT8_MAX
#: Most Gauss products one cascade of packed DSP48E2s may sum: the low field's sum must stay
#: inside its signed ``PACKED_SHIFT`` bits (4 x 32,258 = 129,032 < 2**17), which is what lets
#: the two sums be split from the 48-bit P exactly.
PACKED_CHAIN_MAX = (2 ** (PACKED_SHIFT - 1) - 1) // GAUSS_PRODUCT_MAX


def pe_chains(products: int) -> tuple[int, ...]:
    """The DSP48E2 cascades one PE's ``products = Tn/B`` complex products per beat are summed
    on, as their lengths: as few as :data:`PACKED_CHAIN_MAX` allows, as even as can be (the
    longer first), e.g. 8 -> (4, 4), 6 -> (3, 3), 5 -> (3, 2), 2 -> (2,)."""
    if not isinstance(products, int) or isinstance(products, bool) or products < 1:
        raise ValueError(f"products must be a positive integer, not {products!r}")
    chains = -(-products // PACKED_CHAIN_MAX)
    base, longer = divmod(products, chains)
    return (base + 1,) * longer + (base,) * (chains - longer)


def cbn_dsp_per_lane(acc_bits: int = ACC_BITS, residual: bool = True) -> int:
    """DSP48E2 per lane of the post chain's CBN stage built for ``acc_bits``-bit accumulators:
    per part (re, im) one for ``acc*mult`` when the accumulators fit the DSP48E2's
    :data:`DSP_MUL_BITS`-bit port (two otherwise: a 26-bit and a 6-bit partial product) and,
    with ``residual``, one for ``res*res_mult``."""
    return 2 * ((1 if acc_bits <= DSP_MUL_BITS else 2) + (1 if residual else 0))


#: Kernel and conv stride per axis: the input buffer's absolute limit.
MAX_KERNEL = 64
#: Kernel taps (``Kd*Kr*Kc``) of a weight tile: the weight buffer's absolute limit.
MAX_TAPS = 4096
#: Pool window and stride per axis: CMaxPool's limit.
MAX_POOL_WINDOW = 3
#: Largest map CMaxPool is built for, per axis.
MAX_POOL_MAP = 1024
#: Map size per axis: the descriptor's 16-bit fields.
MAX_MAP_SIZE = 65535
#: ``Tn`` and ``Tm``: the PE array and the buffers are built for at most 1024 channels a tile.
MAX_CHANNEL_TILE = 1024
#: ``Td``, ``Tr``, ``Tc``: the descriptor's 8-bit tile fields.
MAX_TILE = 255
#: Deepest memory the designs leave to LUT RAM (RAM256X1S, four LUTs a bit); deeper ones are
#: marked ``ram_style = "block"`` and mapped to block RAM (:mod:`fcircnn.gen.synth`, "Deep
#: memories"), as the estimator counts them.
LUTRAM_MAX_DEPTH = 256


#: The channel-tile divisibility rules, by name: the tile, its divisor for block size ``B``
#: and the divisor's name, and what the rule keeps whole. Each hardware component checks those
#: its datapath needs (:func:`channel_rule_problem`, ``fcircnn.hw.common.check_channel_rule``);
#: a core's tiles meet them all (:func:`channel_tile_problems`).
CHANNEL_RULES = {
    "input_blocks": ("Tn", lambda B: B, "B", "whole input blocks"),
    "input_slot_groups": ("Tn", lambda B: SLOT_GROUP_CHANNELS, "16",
                          "whole input slot groups, above 16"),
    "output_blocks": ("Tm", lambda B: B, "B", "whole output blocks"),
    "output_block_pairs": ("Tm", lambda B: 2 * B, "2B", "output blocks in DSP pairs"),
    "output_slot_groups": ("Tm", lambda B: SLOT_GROUP_CHANNELS, "16",
                           "whole output slot groups"),
    "output_half_groups": ("Tm", lambda B: SLOT_GROUP_CHANNELS // 2, "8",
                           "whole halves of output slot groups"),
    "output_slots": ("Tm", lambda B: 2, "2", "whole complex slots"),
}


def channel_rule_problem(rule: str, value: int, B: int = 8) -> str | None:
    """Why channel tile ``value`` breaks :data:`CHANNEL_RULES` ``rule`` at block size ``B``
    (``None``: it keeps it). ``input_slot_groups`` binds only above 16 channels."""
    tile, divisor, name, why = CHANNEL_RULES[rule]
    d = divisor(B)
    if value % d == 0 or (rule == "input_slot_groups" and value <= SLOT_GROUP_CHANNELS):
        return None
    label = str(d) if name.isdigit() else f"{name} ({d})"
    return f"{tile} must be a multiple of {label}: {why}, not {value}"


def channel_tile_problems(tn: int, tm: int, B: int) -> list[tuple[str, str]]:
    """Why channel tiles ``Tn``, ``Tm`` cannot be built for block size ``B``, as
    ``(field, message)`` pairs (empty: they can).

    ``Tn`` a multiple of ``B`` (whole input blocks) and, above 16, of 16 (whole 8-slot input
    groups); ``Tm`` a multiple of 16 (whole output slot groups) and of ``2*B`` (output blocks
    are computed in DSP pairs). Together these give whole block pairs per 128-bit weight beat.
    """
    problems = []
    if channel_rule_problem("input_blocks", tn, B):
        problems.append(("tn", f"Tn must be a multiple of B ({B}), not {tn}"))
    elif channel_rule_problem("input_slot_groups", tn, B):
        problems.append(("tn", ("Tn must be a multiple of 16 above 16 (whole input slot "
                               f"groups), not {tn}")))
    if (channel_rule_problem("output_slot_groups", tm, B)
            or channel_rule_problem("output_block_pairs", tm, B)):
        step = math.lcm(SLOT_GROUP_CHANNELS, 2 * B)
        problems.append(("tm", (f"Tm must be a multiple of {step} (whole output slot groups of "
                               f"16 channels, output blocks in DSP pairs of 2*B), not {tm}")))
    return problems


def weight_image_beats(Tn: int, Tm: int, B: int, taps: int) -> int:
    """128-bit beats of one ``(Tm, Tn)`` weight tile of ``taps`` kernel taps: every block pair
    ``(Tm/B) * (Tn/B)`` holds ``B/2`` slots per tap."""
    return taps * (Tm // B) * (Tn // B) * (B // 2) // SLOTS_PER_BEAT


def box_span(tile: int, stride: int, kernel: int) -> int:
    """Input voxels per axis that an output tile of ``tile`` voxels reads: ``(tile - 1) *
    stride + kernel`` (padding included)."""
    return (tile - 1) * stride + kernel


def spreads(tn: int, B: int) -> bool:
    """Whether a core of channel tile ``tn`` at block size ``B`` can read a ``spread`` input
    compact (:data:`~fcircnn.arch.descriptor.FLAG_SPREAD`): an n-tile's ``tn/B`` blocks, one
    real channel each, fit the slots of one slot group, and the n-tile is at least one slot
    group (``tn >= 16``: no group holds several n-tiles)."""
    return tn >= SLOT_GROUP_CHANNELS and tn // B <= SLOTS_PER_BEAT


def lanes_take_rows(lanes: int) -> bool:
    """Whether a core of ``lanes`` depth lanes can run row lanes
    (:data:`~fcircnn.arch.descriptor.FLAG_ROWLANES`): ``lanes`` a power of two above 1 (the
    row groups, ``lanes`` over a power-of-two tile depth, are then powers of two too)."""
    return lanes > 1 and lanes & (lanes - 1) == 0


def row_groups(lanes: int, depth: int, rows: int) -> int:
    """The row groups ``R`` a conv tile of ``depth`` output depths and ``rows`` rows runs in
    on a core of ``lanes`` depth lanes (:data:`~fcircnn.arch.descriptor.FLAG_ROWLANES`):
    ``lanes / depth`` where the core :func:`lanes_take_rows`, ``depth`` is a power of two
    below ``lanes`` and the tile has more than one row, else 1 (the lanes are the tile's
    depths). ResNet-18's stage 3 (2 x 7 x 7) on 4 lanes: 2; stage 4 (1 x 4 x 4): 4."""
    if (not lanes_take_rows(lanes) or depth < 1 or depth & (depth - 1) or depth >= lanes
            or rows <= 1):
        return 1
    return lanes // depth


def lane_rows(rows: int, groups: int) -> int:
    """Rows of a tile of ``rows`` rows that each of its ``groups`` row groups computes
    (:data:`~fcircnn.arch.descriptor.FLAG_ROWLANES`): ``ceil(rows / groups)``; group ``u``
    takes rows ``u * lane_rows ..`` (the last group the rest)."""
    return -(-rows // groups)


def row_lane(lanes: int, groups: int, v: int) -> tuple[int, int]:
    """``(depth, row group)`` of depth lane ``v`` of ``lanes`` with ``groups`` row groups
    (:data:`~fcircnn.arch.descriptor.FLAG_ROWLANES`): the tile's ``lanes / groups`` depths
    vary fastest, ``(v mod (lanes / groups), v div (lanes / groups))``."""
    depth = lanes // groups
    return v % depth, v // depth


def core_lanes(core: Any) -> int:
    """PE-array lanes (output depths computed in parallel) of ``core``: ``td`` if the core
    unrolls the ``td`` loop, else 1 (the compute walker then steps through the tile's depth)."""
    return core.td if "td" in core.unroll else 1


def balanced_span(n: int, t: int) -> int:
    """The tile of a map axis of ``n`` voxels on tiles of up to ``t``, evened out: as many
    tiles as ``t`` needs (``ceil(n / t)``), each ``ceil(n / tiles)`` (the last takes the rest,
    at most one voxel per tile fewer)."""
    return -(-n // -(-n // t))


@dataclass(frozen=True)
class CoreGeometry:
    """The geometry of one core, derived and validated once.

    Parameters
    ----------
    tn, tm : int
        Channel tiles (also the parallelism on those axes), 1..:data:`MAX_CHANNEL_TILE`,
        obeying :func:`channel_tile_problems`.
    td, tr, tc : int
        Output tile, 1..:data:`MAX_TILE`.
    B : int
        Block size (4, 8 or 16).
    lanes : int
        PE lanes: ``td`` (the depth loop unrolled) or 1.

    Raises
    ------
    ValueError
        Naming the parameter and the rule it breaks.
    """

    tn: int
    tm: int
    td: int
    tr: int
    tc: int
    B: int
    lanes: int = 1

    def __post_init__(self) -> None:
        for name, limit in (("tn", MAX_CHANNEL_TILE), ("tm", MAX_CHANNEL_TILE),
                            ("td", MAX_TILE), ("tr", MAX_TILE), ("tc", MAX_TILE)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= limit:
                raise ValueError(f"{name} must be an integer in 1..{limit}, not {value!r}")
        if self.B not in BLOCK_SIZES:
            raise ValueError(f"B must be an even power of two: "
                             f"{', '.join(map(str, BLOCK_SIZES))}, not {self.B!r}")
        problems = channel_tile_problems(self.tn, self.tm, self.B)
        if problems:
            raise ValueError("; ".join(message for _, message in problems))
        if self.lanes not in (1, self.td):
            raise ValueError(f"lanes must be 1 or Td ({self.td}), not {self.lanes!r}")

    @classmethod
    def of(cls, core: Any, B: int) -> CoreGeometry:
        """The geometry of a configured core (``tn``, ``tm``, ``td``, ``tr``, ``tc``,
        ``unroll``)."""
        return cls(core.tn, core.tm, core.td, core.tr, core.tc, B, core_lanes(core))

    @property
    def tile(self) -> tuple[int, int, int]:
        """The output tile ``(Td, Tr, Tc)``."""
        return (self.td, self.tr, self.tc)

    @property
    def in_groups(self) -> int:
        """Input slot groups of an n-tile: ``max(1, Tn/16)`` (a ``Tn`` below 16 fills part
        of one group)."""
        return max(1, self.tn // SLOT_GROUP_CHANNELS)

    @property
    def out_groups(self) -> int:
        """Output slot groups of an m-tile: ``Tm/16``."""
        return self.tm // SLOT_GROUP_CHANNELS

    @property
    def subs(self) -> int:
        """n-tiles per input slot group: ``16/Tn`` below 16, else 1."""
        return SLOT_GROUP_CHANNELS // self.tn if self.tn < SLOT_GROUP_CHANNELS else 1

    def weight_tile_beats(self, taps: int) -> int:
        """:func:`weight_image_beats` of this core's ``(Tm, Tn)`` tile."""
        return weight_image_beats(self.tn, self.tm, self.B, taps)

    def layer_tile(self, conv_shape: tuple[int, int, int], *,
                   balanced: bool = False) -> tuple[int, int, int]:
        """A layer's output tile: the core's, clipped to the layer's conv map; ``balanced``:
        with its rows and columns evened out over the tiles the map needs
        (:func:`balanced_span`: a 28-wide map on 8-wide tiles in four tiles of 7, not three of
        8 and one of 4), the depth as without."""
        tile = tuple(min(t, n) for t, n in zip(self.tile, conv_shape, strict=True))
        if not balanced:
            return tile
        return (tile[0], *(balanced_span(n, t) for n, t in zip(conv_shape[1:], tile[1:],
                                                                 strict=True)))

    def input_box(self, tile: tuple[int, int, int], stride: tuple[int, int, int],
                  kernel: tuple[int, int, int]) -> tuple[int, int, int]:
        """The input box of an output ``tile`` per axis (:func:`box_span`)."""
        return tuple(box_span(t, s, k) for t, s, k in zip(tile, stride, kernel, strict=True))


@dataclass(frozen=True)
class EngineGeometry:
    """What one core's buffers are sized for (:func:`engine_geometry`).

    ``kernel``/``stride``: the largest kernel (fc and gap: their whole input map) and conv
    stride per axis among the core's layers; ``taps``: the largest kernel volume;
    ``pool_size``: the largest map a pool pass pools (``(1, 1, 1)`` if none); ``residual``:
    whether a layer with a residual input runs on the core; ``fused_pool``: whether a layer
    pools in the drain (:func:`pool_fuses`), which sizes CMaxPool for the core's output tile
    with its ``Tm/16`` slot groups interleaved; ``carry_map``: the largest conv map ``(H, W)``
    of a layer whose fused pool carries windows across tiles (:func:`pool_carries`; ``(0,
    0)`` if none), which sizes CMaxPool's carry memories (:func:`pool_carry`); ``row_lanes``:
    whether a layer runs with its tile rows in the depth lanes
    (:data:`~fcircnn.arch.descriptor.FLAG_ROWLANES`), which builds the input buffer's per-lane
    row offsets and the drain's lane-to-row map; ``lane0`` and ``rfft``: whether a layer's post
    chain takes lane 0 of its accumulators' inverse transform
    (:data:`~fcircnn.arch.descriptor.FLAG_LANE0`) or the rfft of its time lanes
    (:data:`~fcircnn.arch.descriptor.FLAG_RFFT`), which builds those post-chain stages;
    ``spread``: whether a layer reads a ``spread`` input compact
    (:data:`~fcircnn.arch.descriptor.FLAG_SPREAD`), which builds the input buffer's spreading
    read;
    ``acc_bits``: the width of the signed accumulators the post chain's CBN multiplies, from
    the largest accumulator bound of the core's layers (``accumulator_bound``, a structural
    bound over int8 operands, so it holds for every weight set): at most
    :data:`DSP_MUL_BITS`, one DSP48E2 per part and lane instead of two.
    """

    kernel: tuple[int, int, int]
    stride: tuple[int, int, int]
    taps: int
    pool_size: tuple[int, int, int]
    residual: bool
    fused_pool: bool = False
    carry_map: tuple[int, int] = (0, 0)
    row_lanes: bool = False
    lane0: bool = False
    rfft: bool = False
    acc_bits: int = ACC_BITS
    spread: bool = False

    def __post_init__(self) -> None:
        if (not isinstance(self.acc_bits, int) or isinstance(self.acc_bits, bool)
                or not 2 <= self.acc_bits <= ACC_BITS):
            raise ValueError(f"acc_bits must be an integer in 2..{ACC_BITS}, "
                             f"not {self.acc_bits!r}")

    @classmethod
    def covering(cls, *geometries: EngineGeometry) -> EngineGeometry:
        """The smallest geometry that runs every layer each of ``geometries`` runs (the
        per-axis and per-field maximum), e.g. to build one core for several networks."""
        if not geometries or not all(isinstance(g, EngineGeometry) for g in geometries):
            raise TypeError("covering() needs one or more EngineGeometry")

        def top(field):
            return tuple(max(axis) for axis in zip(*(getattr(g, field) for g in geometries),
                                                   strict=True))

        return cls(top("kernel"), top("stride"), max(g.taps for g in geometries),
                   top("pool_size"), any(g.residual for g in geometries),
                   any(g.fused_pool for g in geometries), top("carry_map"),
                   any(g.row_lanes for g in geometries), any(g.lane0 for g in geometries),
                   any(g.rfft for g in geometries), max(g.acc_bits for g in geometries),
                   any(g.spread for g in geometries))


@dataclass(frozen=True)
class InputBufferGeometry:
    """The input buffer a core's engine builds (:func:`input_buffer_geometry`).

    ``lanes`` read lanes (the PE lanes); lane ``v`` holds ``kernel[0]`` planes of
    ``height x width`` words per slot group (``kernel``/``stride`` as the buffer's
    constructor takes them). ``depth``: words of one half of one bank.
    """

    lanes: int
    kernel: tuple[int, int, int]
    stride: tuple[int, int, int]
    height: int
    width: int

    @property
    def depth(self) -> int:
        return self.kernel[0] * self.height * self.width


def input_buffer_geometry(core: CoreGeometry, geometry: EngineGeometry) -> InputBufferGeometry:
    """The input buffer of a core built for ``geometry``.

    With ``lanes = Td`` bank ``(v, g)`` holds lane ``v``'s ``Kd`` planes; with one lane its
    bank per group holds all ``(Td-1)*sd + Kd`` planes of the tile, output depth ``v`` reading
    planes ``v*sd + kd``. A plane is the input box of a ``Tr x Tc`` tile (:func:`box_span`).
    """
    (kd, kr, kc), (sd, sr, sc) = geometry.kernel, geometry.stride
    planes = kd if core.lanes == core.td else box_span(core.td, sd, kd)
    return InputBufferGeometry(core.lanes, (planes, kr, kc), geometry.stride,
                               box_span(core.tr, sr, kr), box_span(core.tc, sc, kc))


#: Per-axis ``(window, stride, padding)`` of a pool fused into the drain whose windows overlap by
#: one voxel: each tile's first window takes its lowest voxel from the tile before it (carried
#: in CMaxPool, :func:`pool_carry`). ResNet's 3x3x3 stride-2 pool.
CARRIED_WINDOW = (3, 2, 1)
#: Per-axis ``(window, stride, padding)`` of a fused pool whose windows stay inside a tile.
_TILE_WINDOWS = ((1, 1, 0), (2, 2, 0))


def pool_fuses(layer: Any, core: Any) -> bool:
    """Whether ``layer``'s pool runs in the drain of ``core`` (no pool pass).

    The drain pools every output tile as its own map, so the tiles must cut the map at window
    boundaries: on every axis either window = stride, 1 or 2, without padding (no window
    crosses a tile), or on every axis stride 2 with window 2 (no padding) or window 3 and
    padding 1 (:data:`CARRIED_WINDOW`: a *carried* pool, :func:`pool_carries`, whose window
    at a tile's low edge takes its first voxel from the previous tile's last). On each axis of
    stride 2 the map size and the tile (``min(tile, size)``) must be even. The layer must be a
    conv without a residual input (the residual box shares the output walk). C3D's
    pool1-pool4 and ResNet's 3x3x3 stride-2 pool (with even tiles) qualify; C3D's pool5 (its
    padding without an overlap) runs as a pool pass.
    """
    pool = layer.pool
    if pool is None or layer.kind != "conv" or layer.residual is not None:
        return False
    axes = _pool_axes(pool)
    allowed = ((2, 2, 0), CARRIED_WINDOW) if CARRIED_WINDOW in axes else _TILE_WINDOWS
    tile = (core.td, core.tr, core.tc)
    for axis, n, t in zip(axes, layer.conv_shape, tile, strict=True):
        if axis not in allowed:
            return False
        if axis[1] == 2 and (n % 2 or min(t, n) % 2):
            return False
    return True


def pool_carries(layer: Any, core: Any) -> bool:
    """Whether ``layer``'s pool is fused into the drain of ``core`` (:func:`pool_fuses`) with
    windows that overlap across tiles (an axis of :data:`CARRIED_WINDOW`)."""
    return pool_fuses(layer, core) and CARRIED_WINDOW in _pool_axes(layer.pool)


def _pool_axes(pool: Any) -> list[tuple[int, int, int]]:
    """Per axis, the ``(window, stride, padding)`` of ``pool``."""
    return list(zip(pool.window, pool.stride, pool.padding, strict=True))


@dataclass(frozen=True)
class PoolCarry:
    """CMaxPool's carry memories on a core with a carried pool (:func:`pool_carry`).

    A carried pool halves every axis. Its axis stages (``w``, then ``h``, then ``d``) each keep
    the last position of a tile's sweeps, the line of slot words its next tile along that axis
    takes as the position before its first. The tiles are walked ``td > th > tw``, so the ``w``
    stage's next tile is the next one (one region: the tile's ``Td x Tr`` rows of ``G`` words),
    the ``h`` stage's is a row of tiles later (a region per tile column: ``Td`` lines of ``Tc/2
    x G`` words) and the ``d`` stage's a plane of tiles later (a region per tile of the plane:
    ``Tr/2 x Tc/2 x G`` words); ``G = Tm/16``.

    Attributes
    ----------
    region : tuple of three int
        Words of one tile's region per axis ``(d, h, w)``.
    columns : int
        Tile columns of the largest carried map: ``ceil(W / Tc)``.
    depth : tuple of three int
        Words of each axis' memory: the region times the regions (``d``: ``ceil(H / Tr) x
        columns``; ``h``: ``columns``; ``w``: 1).
    """

    region: tuple[int, int, int]
    columns: int
    depth: tuple[int, int, int]

    def base(self, axis: int, th, tw, mul=operator.mul):
        """The first word of tile ``(th, tw)``'s region in the memory of ``axis``; ``mul(x,
        k)`` multiplies by a constant (on Amaranth values: shifts and adds, no DSP)."""
        regions = (mul(th, self.columns) + tw, tw, 0)
        return mul(regions[axis], self.region[axis])


def pool_carry(core: Any, geometry: EngineGeometry) -> PoolCarry | None:
    """The carry memories of ``core`` built for ``geometry`` (``None`` without a carried
    pool)."""
    h, w = geometry.carry_map
    if not h:
        return None
    groups = core.tm // SLOT_GROUP_CHANNELS
    region = ((core.tr // 2) * (core.tc // 2) * groups, core.td * (core.tc // 2) * groups,
              core.td * core.tr * groups)
    columns = -(-w // core.tc)
    regions = (-(-h // core.tr) * columns, columns, 1)
    return PoolCarry(region, columns, tuple(r * n for r, n in zip(region, regions, strict=True)))


def engine_geometry(accelerator: Any, core: Any) -> EngineGeometry:
    """The buffer geometry ``core`` needs for the layers ``accelerator`` assigns to it, as
    the engine runs them (a folded first layer: ``accelerator.engine_layer``; the domain
    steps run in no pass of their own, an rfft in its input's: ``accelerator.rfft_of``)."""
    kernel, stride, pool, taps, residual = [1, 1, 1], [1, 1, 1], [1, 1, 1], 1, False
    fused, carry_map, row_lanes, lane0, rfft = False, (0, 0), False, False, False
    acc_bound, spread = 1, False
    for original in accelerator.network.resolved:
        if original.transform or accelerator.core_for(original).name != core.name:
            continue
        acc_bound = max(acc_bound, original.accumulator_bound)
        lane0 |= original.takes_lane0
        rfft |= accelerator.rfft_of(original) is not None
        spread |= accelerator.spreads_input(original)
        layer = accelerator.engine_layer(original)
        kernel = [max(a, b) for a, b in zip(kernel, layer.kernel, strict=True)]
        if layer.kind == "conv":
            stride = [max(a, b) for a, b in zip(stride, layer.stride, strict=True)]
        taps = max(taps, layer.kernel_volume)
        if pool_fuses(layer, core):
            fused = True
            if pool_carries(layer, core):
                carry_map = tuple(max(a, b) for a, b in zip(carry_map, layer.conv_shape[1:],
                                                            strict=True))
        elif layer.pool is not None:
            pool = [max(a, b) for a, b in zip(pool, layer.conv_shape, strict=True)]
        residual |= layer.residual is not None
        row_lanes |= accelerator.row_groups(original) > 1
    return EngineGeometry(tuple(kernel), tuple(stride), taps, tuple(pool), residual, fused,
                          carry_map, row_lanes, lane0, rfft,
                          min(ACC_BITS, acc_bound.bit_length() + 1), spread)
