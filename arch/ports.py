"""Which AXI4 manager port carries which transfer: the accelerator's memory ports, stated once.

The accelerator has ``axi_ports`` 128-bit AXI4 manager ports (``m_axi`` and, with two,
``m_axi1``), each its own DMA engine on its own PS high-performance port (HP0, HP1 on the
ZCU102), all seeing the same DDR. Port 0 carries every transfer of a one-port design. A second
port gives the weight tiles a read engine and a loader of their own
(:class:`~fcircnn.hw.engine_loader.EngineLoader` with ``reads=WEIGHT_READS``), so a weight tile
no longer waits for the input box, residual box and post records of its pass, nor they for it
(issue 16, lever 1). Descriptors, post records, input and residual boxes, pool passes, stores
and cycle entries stay on port 0.

This module imports nothing of the project.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ALL_READS", "AXI_PORTS", "INPUT_READS", "LOADER_READS", "MANAGERS", "READ_KINDS",
           "WEIGHT_READS", "PortMap"]

#: The numbers of AXI4 manager ports an accelerator can have.
AXI_PORTS: tuple[int, ...] = (1, 2)
#: The top level's AXI4 manager interfaces (port-name prefixes), by port: ``m_axi`` (every
#: transfer but the weight tiles of a two-port design) and the read-only ``m_axi1``.
MANAGERS: tuple[str, ...] = ("m_axi", "m_axi1")

#: The kinds of read a conv layer's loader issues, in the order of one pass: the m-tile's post
#: records, the tile's residual box, the pass's input box, the pass's weight tile.
READ_KINDS: tuple[str, ...] = ("params", "residual", "input", "weights")
#: Every read kind (a one-port loader).
ALL_READS: frozenset[str] = frozenset(READ_KINDS)
#: The reads of the weight loader of a two-port design.
WEIGHT_READS: frozenset[str] = frozenset({"weights"})
#: The reads of the input loader of a two-port design.
INPUT_READS: frozenset[str] = ALL_READS - WEIGHT_READS
#: The read kinds a loader can issue: all of them, or one half of the two-port split.
LOADER_READS: tuple[frozenset[str], ...] = (ALL_READS, INPUT_READS, WEIGHT_READS)


@dataclass(frozen=True)
class PortMap:
    """The port (0-based) of each kind of transfer of an accelerator with ``axi_ports`` ports.

    Attributes
    ----------
    axi_ports : int
    weights : int
        The port of the conv and fc weight tiles.
    """

    axi_ports: int

    def __post_init__(self) -> None:
        if self.axi_ports not in AXI_PORTS:
            raise ValueError(f"axi_ports must be one of {', '.join(map(str, AXI_PORTS))}, not "
                             f"{self.axi_ports!r}")

    @property
    def weights(self) -> int:
        return 1 if self.axi_ports >= 2 else 0

    @property
    def managers(self) -> tuple[str, ...]:
        """The AXI4 manager interfaces of the top level (:data:`MANAGERS`), port ``k`` on the
        PS's ``HPk FPD``."""
        return MANAGERS[: self.axi_ports]

    @property
    def weight_loader(self) -> bool:
        """Whether the weight tiles have a loader (and read engine) of their own."""
        return self.weights != 0

    def loader_reads(self) -> tuple[frozenset[str], ...]:
        """The read kinds of each loader of a layer engine, by port: one loader issuing every
        read, or with a weight port an input loader (port 0) and a weight loader (port 1)."""
        return (INPUT_READS, WEIGHT_READS) if self.weight_loader else (ALL_READS,)
