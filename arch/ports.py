"""Which AXI4 manager port carries which transfer: the accelerator's memory ports, stated once.

The accelerator has ``axi_ports`` 128-bit AXI4 manager ports (``m_axi``, ``m_axi1``,
``m_axi2``, ``m_axi3``: :data:`MANAGERS`), each its own DMA engine (read and write) on its own
PS high-performance port (HP0..HP3 on the ZCU102), all seeing the same DDR. Port 0 carries
every transfer of a one-port design. A second port gives the weight tiles a read engine and a
loader of their own (:class:`~fcircnn.hw.engine_loader.EngineLoader` with
``reads=WEIGHT_READS``), so a weight tile no longer waits for the input box, residual box and
post records of its pass, nor they for it (issue 16, lever 1). Descriptors, post records, input
and residual boxes, stores and cycle entries stay on port 0. A pool pass moves one slot group
per port at once (:attr:`PortMap.pool_lanes`): every port has a write engine too, for its pool-
pass lane.

A layer whose weight tiles bound it (the fully connected layers: one weight tile per pass and
next to no input) leaves port 0 idle while port 1 streams weights. The compiler can then mark
it :data:`~fcircnn.arch.descriptor.FLAG_WSPLIT`: each weight tile is read in two halves, the
first on port 1 by the weight loader, the second on port 0 by the input loader after its input
box, both landing in the same half of the weight buffer at once (disjoint banks: the image of
a split tile is laid out half-major, :func:`weight_halves`). That doubles the weight bandwidth
of such a layer. It needs a weight port and an even number of beats per kernel tap
(:meth:`PortMap.splits_weights`).

A layer whose input boxes bound it (a first layer folded to few channels and many voxels:
C3D conv1a, ResNet-18 conv1) leaves port 1 mostly idle instead. The compiler can mark it
:data:`~fcircnn.arch.descriptor.FLAG_ISPLIT`: each input box is read in two halves of its slot
groups (:func:`input_halves`), the lower on port 0 by the input loader, the upper on port 1 by
the weight loader before its weight tile, both landing in the input buffer at once (disjoint
banks: the buffer's banks are per lane and slot group). It needs a weight port and an even
number of input slot groups per n-tile (:meth:`PortMap.splits_inputs`), every n-tile of the
layer loading all of them (:func:`~fcircnn.arch.walk.splits_inputs`).

On four ports a split weight tile leaves ports 0 and 2 idle while ports 1 and 3 stream its
halves. The compiler can then add :data:`~fcircnn.arch.descriptor.FLAG_WQUARTER`: each weight
tile is read in four quarters of every tap's beats (:func:`weight_quarters`), one per port:
the first on port 1 (the weight loader), the second on port 0 (the input loader, after its
input box), the third on port 3 (the second half's loader: the third quarter starts where the
second half does) and the fourth on port 2 (its loader, after the upper half of the input
box if the descriptor splits input boxes too), all four landing in the weight buffer at once
(disjoint banks; the image of such a tile is laid out quarter-major). It needs four ports
and a number of beats per kernel tap divisible by four (:meth:`PortMap.quarters_weights`).

On four ports a split input box still leaves ports 1 and 3 with little to read in the layers
its boxes bound (the stride-2 convs and the first layer: one weight tile a pass, or none).
The compiler can then add :data:`~fcircnn.arch.descriptor.FLAG_IQUARTER`: each input box is
read in four quarters of its slot groups (:func:`input_quarters`), one per port: the first on
port 0 (the input loader), the second on port 1 (the weight loader, before its weight tile:
``input_quarter1``), the third on port 2 (its loader's ``input_half``, which starts there) and
the fourth on port 3 (``input_quarter3``, after the tile's residual box and before the pass's
weight half), into the input buffer's four load streams (disjoint banks). It needs four ports
and a multiple of four input slot groups per n-tile (:meth:`PortMap.quarters_inputs`), every
n-tile loading all of them (:func:`~fcircnn.arch.walk.quarters_inputs`).

On four ports the residual boxes of a core with residual layers move from the input loader to
port 3's (:attr:`PortMap.residual`): a residual box is the size of the tile's output, and on
port 0 it shares the port with the tile's input box, which bounds ResNet-18's stage-1 convs
with a residual, while port 3 carries at most the second weight halves, one per pass. Port 3's
loader then walks every descriptor with ``FLAG_RESIDUAL`` (and, as before, every one with
``FLAG_WSPLIT``), reading each tile's residual box before its passes' weight halves.

This module imports nothing of the project.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ALL_READS", "AXI_PORTS", "DMA_QUEUE", "INPUT_HALF_READS", "INPUT_QUARTER_KINDS",
           "INPUT_READS", "LOADER_READS", "MANAGERS", "PORT_ROLES", "READ_KINDS",
           "RESIDUAL_READS", "SPLIT_INPUT_READS", "SPLIT_WEIGHT_READS", "WEIGHT_HALF_READS",
           "WEIGHT_PART_KINDS", "WEIGHT_QUARTER_READS", "WEIGHT_READS",
           "PortMap", "input_halves", "input_quarters", "weight_halves", "weight_quarters"]

#: The numbers of AXI4 manager ports an accelerator can have.
AXI_PORTS: tuple[int, ...] = (1, 2, 3, 4)
#: The depths of the read engines' command queues (``dma_queue``): the commands a loader keeps
#: in flight on its read engine (:class:`fcircnn.hw.axi_dma_read.AxiDmaRead` ``commands``).
DMA_QUEUE: range = range(1, 9)
#: The top level's AXI4 manager interfaces (port-name prefixes), by port: ``m_axi`` (every
#: transfer but those of the other ports), ``m_axi1`` (the weight tiles), ``m_axi2`` (the upper
#: halves of split input boxes, or the fourth quarters of weight tiles read in quarters),
#: ``m_axi3`` (the second halves of split weight tiles, the residual boxes of a residual core,
#: the fourth quarters of input boxes read in quarters); port ``k`` is also lane ``k`` of a
#: pool pass.
MANAGERS: tuple[str, ...] = ("m_axi", "m_axi1", "m_axi2", "m_axi3")
#: What each port's loader reads, by port (in a few words, for reports).
PORT_ROLES: tuple[str, ...] = ("records, input and residual boxes", "weight tiles",
                               "upper halves of split input boxes",
                               "second halves of split weight tiles")

#: The kinds of read a conv layer's loader issues, in the order of one pass: the m-tile's post
#: records, the tile's residual box, the pass's input box (its lower slot groups if the
#: descriptor splits input boxes, its first quarter if it reads them in quarters), the upper
#: slot groups of a split input box (its third quarter), the second and the fourth quarter of
#: an input box read in quarters, the pass's weight tile (its first half if the descriptor
#: splits weight tiles, its first quarter if it reads them in quarters), the second half (third
#: quarter) of a split weight tile, the second and the fourth quarter of a weight tile read in
#: quarters.
READ_KINDS: tuple[str, ...] = ("params", "residual", "input", "input_half", "input_quarter1",
                               "input_quarter3", "weights", "weight_half", "weight_quarter1",
                               "weight_quarter3")
#: The read kinds of the second and the fourth quarter of an input box read in quarters (on
#: the weight loader and on port 3's).
INPUT_QUARTER_KINDS: frozenset[str] = frozenset({"input_quarter1", "input_quarter3"})
#: Every read kind of a one-port loader (which never splits a box or tile).
ALL_READS: frozenset[str] = frozenset(READ_KINDS) - INPUT_QUARTER_KINDS - {
    "input_half", "weight_half", "weight_quarter1", "weight_quarter3"}
#: The reads of the weight loader of a two-port design.
WEIGHT_READS: frozenset[str] = frozenset({"weights"})
#: The same, on a core whose input boxes can be split: also their upper slot groups.
SPLIT_WEIGHT_READS: frozenset[str] = WEIGHT_READS | {"input_half"}
#: The reads of the input loader of a two-port design.
INPUT_READS: frozenset[str] = ALL_READS - WEIGHT_READS
#: The same, on a core whose weight tiles can be split: also the second halves.
SPLIT_INPUT_READS: frozenset[str] = INPUT_READS | {"weight_half"}
#: The reads of port 2's loader: the upper halves of split input boxes.
INPUT_HALF_READS: frozenset[str] = frozenset({"input_half"})
#: The reads of port 3's loader: the second halves of split weight tiles.
WEIGHT_HALF_READS: frozenset[str] = frozenset({"weight_half"})
#: The read kind port 3's loader takes over from the input loader on a core with residual
#: layers (:attr:`PortMap.residual`): the residual boxes.
RESIDUAL_READS: frozenset[str] = frozenset({"residual"})
#: The reads port 2's loader adds where the core reads weight tiles in quarters.
WEIGHT_QUARTER_READS: frozenset[str] = frozenset({"weight_quarter3"})
#: The read kinds of a weight tile read in 1, 2 or 4 parts, in image order (the parts of
#: :func:`weight_halves` and :func:`weight_quarters`, each a contiguous run of the image).
WEIGHT_PART_KINDS: dict[int, tuple[str, ...]] = {
    1: ("weights",), 2: ("weights", "weight_half"),
    4: ("weights", "weight_quarter1", "weight_half", "weight_quarter3")}
#: The read kinds a loader can issue: all of them, one side of the two-port split, or one
#: half on a port of its own; on four ports with quarters also the input loader with the
#: second quarters and port 2's loader with the fourth (beside or without input halves); on
#: four ports with residual layers the input loader without the residual boxes and port 3's
#: loader with them (beside or without weight halves); on four ports with input quarters the
#: weight loader with the second quarters and port 3's loader with the fourth (beside any of
#: its other kinds).
LOADER_READS: tuple[frozenset[str], ...] = (
    ALL_READS, INPUT_READS, SPLIT_INPUT_READS, WEIGHT_READS, SPLIT_WEIGHT_READS,
    INPUT_HALF_READS, WEIGHT_HALF_READS, INPUT_READS | {"weight_quarter1"},
    WEIGHT_QUARTER_READS, INPUT_HALF_READS | WEIGHT_QUARTER_READS,
    INPUT_READS - RESIDUAL_READS, INPUT_READS - RESIDUAL_READS | {"weight_quarter1"},
    RESIDUAL_READS, WEIGHT_HALF_READS | RESIDUAL_READS,
    WEIGHT_READS | {"input_quarter1"}, frozenset({"input_quarter3"}),
    WEIGHT_HALF_READS | {"input_quarter3"}, RESIDUAL_READS | {"input_quarter3"},
    WEIGHT_HALF_READS | RESIDUAL_READS | {"input_quarter3"})


def input_halves(groups: int) -> tuple[range, range]:
    """The input slot groups of an n-tile that the two halves of a split input box carry:
    the lower ``groups / 2`` (port 0), then the rest (port 1).

    Raises
    ------
    ValueError
        If ``groups`` is not a positive even number.
    """
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 2 or groups % 2:
        raise ValueError(f"an input box splits only with an even number of slot groups, "
                         f"not {groups!r}")
    half = groups // 2
    return range(half), range(half, groups)


def input_quarters(groups: int) -> tuple[range, range, range, range]:
    """The input slot groups of an n-tile that the four quarters of a ``FLAG_IQUARTER`` input
    box carry, in slot-group order: quarter ``k`` holds groups ``[k*G/4, (k+1)*G/4)``; the
    first two are the lower half of :func:`input_halves`, the last two the upper.

    Raises
    ------
    ValueError
        If ``groups`` is not a positive multiple of four.
    """
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 4 or groups % 4:
        raise ValueError(f"an input box reads in quarters only with a multiple of four slot "
                         f"groups, not {groups!r}")
    q = groups // 4
    return tuple(range(k * q, (k + 1) * q) for k in range(4))


def weight_halves(beats_per_tap: int) -> tuple[range, range]:
    """The beats of each kernel tap that the two halves of a split weight tile carry: the
    first ``beats_per_tap / 2`` of every tap, then the rest. The image of a split tile holds
    the first half of every tap, then the second half of every tap (each half contiguous).

    Raises
    ------
    ValueError
        If ``beats_per_tap`` is not a positive even number.
    """
    if isinstance(beats_per_tap, bool) or not isinstance(beats_per_tap, int) or (
            beats_per_tap < 2 or beats_per_tap % 2):
        raise ValueError(f"a weight tile splits only with an even number of beats per tap, "
                         f"not {beats_per_tap!r}")
    half = beats_per_tap // 2
    return range(half), range(half, beats_per_tap)


def weight_quarters(beats_per_tap: int) -> tuple[range, range, range, range]:
    """The beats of each kernel tap that the four quarters of a ``FLAG_WQUARTER`` weight tile
    carry, in image order: quarter ``k`` holds beats ``[k*b/4, (k+1)*b/4)`` of every tap
    (``b = beats_per_tap``). The image of such a tile holds the first quarter of every tap,
    then the second, the third and the fourth (each contiguous); the first two quarters are the
    first half of :func:`weight_halves`, the last two the second.

    Raises
    ------
    ValueError
        If ``beats_per_tap`` is not a positive multiple of four.
    """
    if isinstance(beats_per_tap, bool) or not isinstance(beats_per_tap, int) or (
            beats_per_tap < 4 or beats_per_tap % 4):
        raise ValueError(f"a weight tile reads in quarters only with a multiple of four beats "
                         f"per tap, not {beats_per_tap!r}")
    q = beats_per_tap // 4
    return tuple(range(k * q, (k + 1) * q) for k in range(4))


@dataclass(frozen=True)
class PortMap:
    """The port (0-based) of each kind of transfer of an accelerator with ``axi_ports`` ports.

    Attributes
    ----------
    axi_ports : int
    weights : int
        The port of the conv and fc weight tiles.
    input_half : int
        The port of the upper halves of split input boxes: 2 with three or more ports, else 1
        (the weight loader's, before its weight tile).
    weight_half : int
        The port of the second halves of split weight tiles: 3 with four ports, else 0 (the
        input loader's, after its input box).
    """

    axi_ports: int

    def __post_init__(self) -> None:
        if type(self.axi_ports) is not int or self.axi_ports not in AXI_PORTS:
            raise ValueError(f"axi_ports must be one of {', '.join(map(str, AXI_PORTS))}, not "
                             f"{self.axi_ports!r}")

    @property
    def weights(self) -> int:
        return 1 if self.axi_ports >= 2 else 0

    @property
    def input_half(self) -> int:
        return 2 if self.axi_ports >= 3 else 1

    @property
    def weight_half(self) -> int:
        return 3 if self.axi_ports >= 4 else 0

    @property
    def residual(self) -> int:
        """The port of the residual boxes: the second weight halves' (:attr:`weight_half`):
        3 with four ports (port 3's loader), else 0 (the input loader's). A residual box is as
        large as the tile's output and read once per tile: on port 0 it competes with the
        tile's input box (ResNet-18's stage-1 second convs: 1,792 residual and 1,920 input
        beats a tile on port 0 against 2,646 PE beats), on port 3 it has a port that sits
        idle there."""
        return self.weight_half

    @property
    def managers(self) -> tuple[str, ...]:
        """The AXI4 manager interfaces of the top level (:data:`MANAGERS`), port ``k`` on the
        PS's ``HPk FPD``."""
        return MANAGERS[: self.axi_ports]

    @property
    def pool_lanes(self) -> int:
        """Slot groups a pool pass moves at once: one per port, each on its port's read and
        write engines (:class:`~fcircnn.hw.engine_pool.EnginePoolPass`). A pool pass reads a
        whole map per group at one beat per cycle through a CMaxPool; every further port (idle
        during the pass) adds a group (ResNet-18's conv1 pool: 0.2 M cycles on one port)."""
        return self.axi_ports

    @property
    def weight_loader(self) -> bool:
        """Whether the weight tiles have a loader (and read engine) of their own."""
        return self.weights != 0

    def splits_weights(self, beats_per_tap: int) -> bool:
        """Whether a core whose weight tiles have ``beats_per_tap`` beats per kernel tap can
        read them in halves over both ports (:data:`~fcircnn.arch.descriptor.FLAG_WSPLIT`):
        with a weight port and an even count (:func:`weight_halves`)."""
        return self.weight_loader and beats_per_tap >= 2 and beats_per_tap % 2 == 0

    def quarters_weights(self, beats_per_tap: int) -> bool:
        """Whether a core whose weight tiles have ``beats_per_tap`` beats per kernel tap can
        read them in quarters over four ports (:data:`~fcircnn.arch.descriptor.FLAG_WQUARTER`):
        with four ports and a multiple of four (:func:`weight_quarters`)."""
        return self.axi_ports == 4 and beats_per_tap >= 4 and beats_per_tap % 4 == 0

    def splits_inputs(self, in_groups: int) -> bool:
        """Whether a core with ``in_groups`` input slot groups per n-tile can read its input
        boxes in halves over both ports (:data:`~fcircnn.arch.descriptor.FLAG_ISPLIT`): with a
        weight port and an even count (:func:`input_halves`)."""
        return self.weight_loader and in_groups >= 2 and in_groups % 2 == 0

    def quarters_inputs(self, in_groups: int) -> bool:
        """Whether a core with ``in_groups`` input slot groups per n-tile can read its input
        boxes in quarters over four ports (:data:`~fcircnn.arch.descriptor.FLAG_IQUARTER`):
        with four ports and a multiple of four (:func:`input_quarters`)."""
        return self.axi_ports == 4 and in_groups >= 4 and in_groups % 4 == 0

    def loader_reads(self, beats_per_tap: int = 1, in_groups: int = 1, *,
                     residual: bool = False) -> tuple[frozenset[str], ...]:
        """The read kinds of each port's loader of a layer engine, by port (an empty set: the
        port has no loader). One port: one loader issuing every read. With a weight port: an
        input loader (port 0) and a weight loader (port 1); where the core
        :meth:`splits_weights`, the second halves of split weight tiles on port 3 with four
        ports, else on the input loader; where it :meth:`splits_inputs`, the upper halves of
        split input boxes on port 2 with three or more ports, else on the weight loader; where
        it :meth:`quarters_weights`, the second quarters on the input loader and the fourth on
        port 2's (the read kinds ``weight_quarter1``, ``weight_quarter3``; the first quarter is
        the weight loader's ``weights``, the third port 3's ``weight_half``); where it
        :meth:`quarters_inputs`, the second input quarters on the weight loader and the fourth
        on port 3's (``input_quarter1``, ``input_quarter3``; the first is the input loader's
        ``input``, the third port 2's ``input_half``); where the core runs ``residual``
        layers, the residual boxes on port :attr:`residual`'s loader."""
        if not self.weight_loader:
            return (ALL_READS,)
        loaders = [set(INPUT_READS), set(WEIGHT_READS)] + [set() for _ in range(2, self.axi_ports)]
        if self.splits_weights(beats_per_tap):
            loaders[self.weight_half].add("weight_half")
        if self.splits_inputs(in_groups):
            loaders[self.input_half].add("input_half")
        if self.quarters_weights(beats_per_tap):
            loaders[0].add("weight_quarter1")
            loaders[2].add("weight_quarter3")
        if self.quarters_inputs(in_groups):
            loaders[1].add("input_quarter1")
            loaders[3].add("input_quarter3")
        if residual and self.residual:
            loaders[0] -= RESIDUAL_READS
            loaders[self.residual] |= RESIDUAL_READS
        return tuple(frozenset(r) for r in loaders)
