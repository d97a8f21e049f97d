"""AXI4 manager DMA of the accelerator: a read engine and a write engine on one 128-bit port.

The two engines are independent (:class:`~fcircnn.hw.axi_dma_read.AxiDmaRead` owns AR/R,
:class:`~fcircnn.hw.axi_dma_write.AxiDmaWrite` owns AW/W/B) and run concurrently, so the load of
the next tile overlaps the store of the previous one. Transfers are box descriptors
(:func:`~fcircnn.hw.axi_dma_box.box_layout`) built and validated by :mod:`fcircnn.gen.dma_plan`.
"""

from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .axi4 import AXI4Signature
from .axi_dma_box import (
    box_layout,
    check_addr_width,
    check_regions,
    open_window,
    region_windows_layout,
    status_layout,
    window_layout,
)
from .axi_dma_read import AxiDmaRead, check_commands, check_outstanding, read_beat_layout
from .axi_dma_write import AxiDmaWrite, write_beat_layout
from .common import rejecting

__all__ = ["AxiDma"]


class AxiDma(wiring.Component):
    """Read and write DMA sharing one AXI4 manager port (``m_axi``).

    Contract
    --------
    The read side is :class:`~fcircnn.hw.axi_dma_read.AxiDmaRead` (``rd_cmd`` -> ``rd_data``,
    ``rd_status``), the write side :class:`~fcircnn.hw.axi_dma_write.AxiDmaWrite` (``wr_cmd`` and
    ``wr_data`` -> ``wr_status``); see their contracts. In Verilog the AXI signals are
    ``m_axi__araddr`` etc. (cocotbext-axi: ``AxiBus.from_prefix(dut, "m_axi_")``).

    Parameters
    ----------
    addr_width : int
        AXI address width, 32..64 (default 40, the ``address_width`` of the accelerator file).
    read_outstanding, write_outstanding : int
        Bursts in flight per direction, 1..64.
    read_commands : int
        The read engine's command queue, 1..8 (:class:`~fcircnn.hw.axi_dma_read.AxiDmaRead`
        ``commands``).
    read_regions, write_regions : int
        Region windows of the read and of the write engine
        (:class:`~fcircnn.hw.axi_dma_box.BoxWalker` ``regions``), 0 by default.

    Ports
    -----
    rd_cmd, rd_data, rd_status, rd_busy : read engine
    wr_cmd, wr_data, wr_status, wr_busy : write engine
    m_axi : Out(AXI4Signature(addr_width=addr_width))
    rd_window, wr_window : In(window_layout(addr_width))
        The memory windows of the read and of the write engine (every page when unconnected).
    rd_regions, wr_regions : In(region_windows_layout(addr_width, ...))
        Their region windows, only where ``read_regions`` or ``write_regions`` is non-zero.
    """

    def __init__(self, addr_width: int = 40, *, read_outstanding: int = 8,
                 write_outstanding: int = 8, read_commands: int = 1, read_regions: int = 0,
                 write_regions: int = 0):
        with rejecting(self):
            check_addr_width(addr_width)
            check_regions(read_regions)
            check_regions(write_regions)
            check_outstanding("read_outstanding", read_outstanding)
            check_outstanding("write_outstanding", write_outstanding)
            check_commands("read_commands", read_commands)
        self.addr_width = addr_width
        self.read_commands = read_commands
        self.read_outstanding = read_outstanding
        self.write_outstanding = write_outstanding
        self.read_regions, self.write_regions = read_regions, write_regions
        regions = {f"{side}_regions": In(region_windows_layout(addr_width, n),
                                         init=[open_window(addr_width)] * n)
                   for side, n in (("rd", read_regions), ("wr", write_regions)) if n}
        super().__init__(regions | {
            "rd_cmd": In(stream.Signature(box_layout(addr_width))),
            "rd_data": Out(stream.Signature(read_beat_layout())),
            "rd_status": Out(stream.Signature(status_layout(addr_width))),
            "rd_busy": Out(1),
            "wr_cmd": In(stream.Signature(box_layout(addr_width))),
            "wr_data": In(stream.Signature(write_beat_layout())),
            "wr_status": Out(stream.Signature(status_layout(addr_width))),
            "wr_busy": Out(1),
            "m_axi": Out(AXI4Signature(addr_width=addr_width)),
            "rd_window": In(window_layout(addr_width), init=open_window(addr_width)),
            "wr_window": In(window_layout(addr_width), init=open_window(addr_width)),
        })

    @classmethod
    def from_config(cls, accelerator, **kwargs) -> "AxiDma":
        """The DMA of an :class:`~fcircnn.models.config.AcceleratorConfig` (its address width)."""
        return cls(accelerator.address_width, **kwargs)

    def elaborate(self, platform):
        m = Module()
        aw = self.addr_width
        m.submodules.rd = rd = AxiDmaRead(aw, outstanding=self.read_outstanding,
                                          commands=self.read_commands,
                                          regions=self.read_regions)
        m.submodules.wr = wr = AxiDmaWrite(aw, outstanding=self.write_outstanding,
                                           regions=self.write_regions)
        if self.read_regions:
            m.d.comb += rd.regions.eq(self.rd_regions)
        if self.write_regions:
            m.d.comb += wr.regions.eq(self.wr_regions)
        wiring.connect(m, wiring.flipped(self.rd_cmd), rd.cmd)
        wiring.connect(m, rd.o, wiring.flipped(self.rd_data))
        wiring.connect(m, rd.status, wiring.flipped(self.rd_status))
        wiring.connect(m, wiring.flipped(self.wr_cmd), wr.cmd)
        wiring.connect(m, wiring.flipped(self.wr_data), wr.i)
        wiring.connect(m, wr.status, wiring.flipped(self.wr_status))
        m.d.comb += [self.rd_busy.eq(rd.busy), self.wr_busy.eq(wr.busy),
                     rd.window.eq(self.rd_window), wr.window.eq(self.wr_window)]
        for engine, names in ((rd, AXI4Signature.read_names()),
                              (wr, AXI4Signature.write_names())):
            for name in names:
                ours, theirs = getattr(self.m_axi, name), getattr(engine.m_axi, name)
                if self.m_axi.signature.members[name].flow == Out:
                    m.d.comb += ours.eq(theirs)
                else:
                    m.d.comb += theirs.eq(ours)
        return m
