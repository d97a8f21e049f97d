"""AXI4 (full) manager signatures.

Member names follow the AXI4 specification in lower case (``araddr``, ``rvalid``...), so a
component port ``m_axi: Out(AXI4Signature(...))`` becomes ``m_axi__araddr`` in Verilog and
cocotbext-axi finds it with ``AxiBus.from_prefix(dut, "m_axi_")`` (docs/architecture.md section 6).
Directions are the manager's: addresses, write data and the ready of responses are outputs.
"""

from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = [
    "BURST_INCR",
    "RESP_DECERR",
    "RESP_OKAY",
    "RESP_SLVERR",
    "AXI4ReadSignature",
    "AXI4Signature",
    "AXI4WriteSignature",
]

#: ``AxBURST`` value of an incrementing burst.
BURST_INCR = 1
#: ``xRESP`` codes.
RESP_OKAY, RESP_EXOKAY, RESP_SLVERR, RESP_DECERR = 0, 1, 2, 3

_DATA_WIDTHS = (32, 64, 128, 256, 512, 1024)


def _check(addr_width, data_width, id_width):
    for name, value in (("addr_width", addr_width), ("data_width", data_width),
                        ("id_width", id_width)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"{name} must be an integer, not {value!r}")
    if not 12 <= addr_width <= 64:
        raise ValueError(f"addr_width must be in 12..64, not {addr_width}")
    if data_width not in _DATA_WIDTHS:
        raise ValueError(f"data_width must be one of {', '.join(map(str, _DATA_WIDTHS))}, "
                         f"not {data_width}")
    if not 1 <= id_width <= 32:
        raise ValueError(f"id_width must be in 1..32, not {id_width}")


def _address_channel(prefix, addr_width, id_width):
    return {
        f"{prefix}id": Out(id_width),
        f"{prefix}addr": Out(addr_width),
        f"{prefix}len": Out(8),
        f"{prefix}size": Out(3),
        f"{prefix}burst": Out(2),
        f"{prefix}lock": Out(1),
        f"{prefix}cache": Out(4),
        f"{prefix}prot": Out(3),
        f"{prefix}valid": Out(1),
        f"{prefix}ready": In(1),
    }


def _read_members(addr_width, data_width, id_width):
    return {
        **_address_channel("ar", addr_width, id_width),
        "rid": In(id_width),
        "rdata": In(data_width),
        "rresp": In(2),
        "rlast": In(1),
        "rvalid": In(1),
        "rready": Out(1),
    }


def _write_members(addr_width, data_width, id_width):
    return {
        **_address_channel("aw", addr_width, id_width),
        "wdata": Out(data_width),
        "wstrb": Out(data_width // 8),
        "wlast": Out(1),
        "wvalid": Out(1),
        "wready": In(1),
        "bid": In(id_width),
        "bresp": In(2),
        "bvalid": In(1),
        "bready": Out(1),
    }


class AXI4ReadSignature(wiring.Signature):
    """AR and R channels of an AXI4 manager.

    Parameters
    ----------
    addr_width : int
        12..64.
    data_width : int
        32, 64, 128, 256, 512 or 1024.
    id_width : int
        1..32.
    """

    def __init__(self, *, addr_width: int, data_width: int = 128, id_width: int = 1):
        _check(addr_width, data_width, id_width)
        self.addr_width, self.data_width, self.id_width = addr_width, data_width, id_width
        super().__init__(_read_members(addr_width, data_width, id_width))


class AXI4WriteSignature(wiring.Signature):
    """AW, W and B channels of an AXI4 manager (parameters as :class:`AXI4ReadSignature`)."""

    def __init__(self, *, addr_width: int, data_width: int = 128, id_width: int = 1):
        _check(addr_width, data_width, id_width)
        self.addr_width, self.data_width, self.id_width = addr_width, data_width, id_width
        super().__init__(_write_members(addr_width, data_width, id_width))


class AXI4Signature(wiring.Signature):
    """All five channels of an AXI4 manager (parameters as :class:`AXI4ReadSignature`)."""

    def __init__(self, *, addr_width: int, data_width: int = 128, id_width: int = 1):
        _check(addr_width, data_width, id_width)
        self.addr_width, self.data_width, self.id_width = addr_width, data_width, id_width
        super().__init__({**_write_members(addr_width, data_width, id_width),
                          **_read_members(addr_width, data_width, id_width)})

    @staticmethod
    def read_names():
        """Member names of the read channels."""
        return tuple(_read_members(32, 128, 1))

    @staticmethod
    def write_names():
        """Member names of the write channels."""
        return tuple(_write_members(32, 128, 1))
