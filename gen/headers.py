"""Host-side register map: a C header and a standalone Python module, from the tables.

Both files are rendered from the same list of constants (:func:`constants`), which is built
from the tables of the hardware and the compiler, never restated by hand:

* register offsets and bit fields: :data:`fcircnn.arch.registers.REGISTERS` and
  :data:`~fcircnn.arch.registers.FIELDS` (``FCIRCNN_REG_<NAME>``, ``FCIRCNN_<REG>_<FIELD>_SHIFT``
  and ``_MASK``, the mask in place), the default ``ID``/``VERSION`` values and the size of the
  ``s_axi_control`` window;
* the layer descriptor: ``_FIELDS`` of :mod:`fcircnn.arch.descriptor`
  (``FCIRCNN_DESC_<FIELD>_OFFSET``, ``_SIZE`` = bytes of one element, ``_COUNT`` = elements;
  ``FCIRCNN_FLAG_*``, ``FCIRCNN_OP_*``);
* the post-parameter record of :mod:`fcircnn.gen.pack` and the cycles entry of
  :mod:`fcircnn.gen.plan` (their docstrings are the reference; the tables
  :data:`POST_RECORD_FIELDS` and :data:`CYCLES_ENTRY_FIELDS` below transcribe them once, and
  the tests check them against the compiler's encoder and sizes).

The C header (:func:`c_header`, ``fcircnn_regs.h``) also declares ``fcircnn_desc_t``,
``fcircnn_post_t`` and ``fcircnn_cycles_t`` with C11 static assertions on every offset; it uses
only ``<stdint.h>`` and ``<stddef.h>``. The Python module (:func:`python_module`,
``fcircnn_regs.py``) imports nothing, so it can be copied next to a PYNQ notebook; it adds the
dictionaries ``REGISTERS``, ``FIELDS`` and ``DESCRIPTOR_FIELDS`` and the ``struct`` formats of
the descriptor and the cycles entry.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import NamedTuple

from fcircnn.arch import descriptor
from fcircnn.arch.registers import CONTROL_ADDR_WIDTH, FIELDS, IDENT, REGISTERS, VERSION
from fcircnn.gen import TOOL_VERSION
from fcircnn.gen.plan import CYCLE_BYTES, POST_RECORD_BYTES

__all__ = [
    "CYCLES_ENTRY_FIELDS",
    "POST_RECORD_FIELDS",
    "Constant",
    "RecordField",
    "c_header",
    "constants",
    "descriptor_fields",
    "python_module",
]


class RecordField(NamedTuple):
    """One field of a little-endian record in DDR.

    ``count`` elements of ``size`` bytes each at byte ``offset``; ``signed`` elements are two's
    complement. Names starting with ``_`` are reserved bytes (0).
    """

    name: str
    offset: int
    size: int
    count: int
    signed: bool
    description: str


#: The 32-byte post-parameter record (``fcircnn.gen.pack`` docstring), one per output slot.
POST_RECORD_FIELDS: tuple[RecordField, ...] = (
    RecordField("mult", 0x00, 2, 2, True, "multiplier re, im (int16)"),
    RecordField("res_mult", 0x04, 2, 2, True, "residual multiplier re, im (int16; 0 without "
                                              "residual)"),
    RecordField("bias", 0x08, 6, 2, True, "bias re, im (int48, two's complement)"),
    RecordField("shift", 0x14, 1, 2, False, "rounding shift re, im (0..47)"),
    RecordField("_reserved", 0x16, 1, 10, False, "reserved, 0"),
)

#: The 16-byte cycles entry written by the engine at a descriptor's ``cycles_addr``.
CYCLES_ENTRY_FIELDS: tuple[RecordField, ...] = (
    RecordField("cycles", 0x00, 8, 1, False, "cycles of the layer"),
    RecordField("pe_busy", 0x08, 4, 1, False, "cycles with the PE array busy"),
    RecordField("dma_stall", 0x0C, 4, 1, False, "cycles stalled on the DMA"),
)

_CODE_BYTES = {"B": 1, "H": 2, "I": 4, "Q": 8}


def descriptor_fields() -> tuple[RecordField, ...]:
    """The layer descriptor (``fcircnn.arch.descriptor._FIELDS``) as :class:`RecordField`\\ s,
    reserved bytes included."""
    out, offset = [], 0
    for name, code, count in descriptor._FIELDS:
        if count == 0:  # padding such as "7x"
            size = struct.calcsize("<" + code)
            out.append(RecordField(name, offset, 1, size, False, "reserved, 0"))
        else:
            size = _CODE_BYTES[code]
            out.append(RecordField(name, offset, size, count, False, ""))
        offset += out[-1].size * out[-1].count
    assert offset == descriptor.DESCRIPTOR_BYTES
    return tuple(out)


def _check_record(fields: Sequence[RecordField], total: int, what: str) -> None:
    offset = 0
    for f in fields:
        if f.offset != offset:
            raise AssertionError(f"{what}.{f.name} at {f.offset:#x}, expected {offset:#x}")
        offset += f.size * f.count
    if offset != total:
        raise AssertionError(f"{what} fields cover {offset} bytes, the record is {total}")


_check_record(POST_RECORD_FIELDS, POST_RECORD_BYTES, "post record")
_check_record(CYCLES_ENTRY_FIELDS, CYCLE_BYTES, "cycles entry")


class Constant(NamedTuple):
    """One constant of the generated files: name without the ``FCIRCNN_`` prefix (the C
    header adds it), value, one-line comment and the section it belongs to."""

    name: str
    value: int
    comment: str
    section: str


def _record_constants(prefix: str, fields: Sequence[RecordField], section: str
                      ) -> list[Constant]:
    out = []
    for f in fields:
        if f.name.startswith("_"):
            continue
        key = f"{prefix}_{f.name.upper()}"
        out.append(Constant(f"{key}_OFFSET", f.offset, f.description or f.name, section))
        out.append(Constant(f"{key}_SIZE", f.size, "bytes of one element", section))
        out.append(Constant(f"{key}_COUNT", f.count, "elements", section))
    return out


def constants() -> tuple[Constant, ...]:
    """Every constant of the generated files, in file order (module docstring)."""
    window = 1 << CONTROL_ADDR_WIDTH
    out = [Constant("CONTROL_BYTES", window, "bytes of the s_axi_control window", "registers")]
    out += [Constant(f"REG_{r.name}", r.offset, f"{r.access}: {r.description}", "registers")
            for r in REGISTERS]
    out += [Constant("ID_DEFAULT", IDENT, "default ID register value", "registers"),
            Constant("VERSION_DEFAULT", VERSION, "default VERSION (major << 16 | minor)",
                     "registers")]
    for f in FIELDS:
        key = f"{f.register}_{f.name.upper()}"
        out.append(Constant(f"{key}_SHIFT", f.bit, f"{f.access}: {f.description}", "fields"))
        out.append(Constant(f"{key}_MASK", ((1 << f.width) - 1) << f.bit, "mask in place",
                            "fields"))
    out.append(Constant("DESC_BYTES", descriptor.DESCRIPTOR_BYTES,
                        "bytes of one layer descriptor", "descriptor"))
    out.append(Constant("DESC_ALIGN", 16, "descriptor and address alignment (bytes)",
                        "descriptor"))
    out += _record_constants("DESC", descriptor_fields(), "descriptor")
    for prefix, section in (("FLAG_", "flags"), ("OP_", "ops")):
        names = [n for n in descriptor.__all__ if n.startswith(prefix)]
        for name in sorted(names, key=lambda n: getattr(descriptor, n)):
            out.append(Constant(name, getattr(descriptor, name), f"descriptor {section[:-1]}",
                                section))
    out.append(Constant("POST_BYTES", POST_RECORD_BYTES, "bytes of one post-parameter record",
                        "post"))
    out += _record_constants("POST", POST_RECORD_FIELDS, "post")
    out.append(Constant("CYCLES_BYTES", CYCLE_BYTES, "bytes of one cycles entry", "cycles"))
    out += _record_constants("CYCLES", CYCLES_ENTRY_FIELDS, "cycles")
    return tuple(out)


_SECTIONS = {
    "registers": "Registers of s_axi_control (byte offsets; 32-bit, word aligned)",
    "fields": "Bit fields",
    "descriptor": "Layer descriptor (little-endian, in DDR, linked from DESC_PTR)",
    "flags": "Descriptor flags (field flags)",
    "ops": "Descriptor operations (field op)",
    "post": "Post-parameter record (one per output slot, little-endian)",
    "cycles": "Cycles entry (written by the engine at cycles_addr, little-endian)",
}


def _hex(value: int) -> str:
    return f"{value:#x}" if value > 9 else str(value)


def _banner(comment: str, title: str, banner: Sequence[str]) -> list[str]:
    lines = [f"{comment} {title}", *(f"{comment} {line}" for line in banner)]
    if not banner:
        lines.append(f"{comment} Generated by fcircnn {TOOL_VERSION}; do not edit, regenerate.")
    return lines


def _c_type(f: RecordField) -> tuple[str, str]:
    """``(type, suffix)`` of a struct member for ``f``."""
    if f.size in (1, 2, 4, 8):
        base = f"{'int' if f.signed else 'uint'}{8 * f.size}_t"
        return base, f"[{f.count}]" if f.count > 1 else ""
    # Odd sizes (int48): raw little-endian bytes.
    return "uint8_t", f"[{f.count}][{f.size}]"


def _c_struct(tag: str, prefix: str, fields: Sequence[RecordField], total: str) -> list[str]:
    lines = [f"typedef struct {tag} {{"]
    for f in fields:
        ctype, suffix = _c_type(f)
        note = f"  /* {f.description} */" if f.description else ""
        lines.append(f"    {ctype} {f.name}{suffix};{note}")
    lines.append(f"}} {tag};")
    lines.append("#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L")
    lines.append(f'_Static_assert(sizeof({tag}) == {total}, "{tag} size");')
    for f in fields:
        if not f.name.startswith("_"):
            lines.append(f"_Static_assert(offsetof({tag}, {f.name}) == "
                         f"FCIRCNN_{prefix}_{f.name.upper()}_OFFSET, \"{tag}.{f.name}\");")
    lines.append("#endif")
    return lines


def c_header(banner: Sequence[str] = ()) -> str:
    """Text of ``fcircnn_regs.h`` (module docstring).

    Parameters
    ----------
    banner : sequence of str
        Comment lines put at the top (tool version, config fingerprint).
    """
    lines = ["/*", *_banner(" *", "fcircnn_regs.h: register map and DDR record layouts of the "
                                  "fcircnn accelerator.", banner), " */",
             "#ifndef FCIRCNN_REGS_H", "#define FCIRCNN_REGS_H", "",
             "#include <stddef.h>", "#include <stdint.h>", ""]
    consts = constants()
    width = max(len(c.name) for c in consts) + len("FCIRCNN_") + 1
    section = None
    for c in consts:
        if c.section != section:
            section = c.section
            lines += ["", f"/* {_SECTIONS[section]} */"]
        lines.append(f"#define {'FCIRCNN_' + c.name:<{width}} {_hex(c.value)}u  "
                     f"/* {c.comment} */")
    lines.append("")
    lines += _c_struct("fcircnn_desc_t", "DESC", descriptor_fields(), "FCIRCNN_DESC_BYTES")
    lines.append("")
    lines += _c_struct("fcircnn_post_t", "POST", POST_RECORD_FIELDS, "FCIRCNN_POST_BYTES")
    lines.append("")
    lines += _c_struct("fcircnn_cycles_t", "CYCLES", CYCLES_ENTRY_FIELDS,
                       "FCIRCNN_CYCLES_BYTES")
    lines += ["", "#endif /* FCIRCNN_REGS_H */", ""]
    return "\n".join(lines)


def python_module(banner: Sequence[str] = ()) -> str:
    """Text of ``fcircnn_regs.py``, a module without imports (module docstring).

    Parameters
    ----------
    banner : sequence of str
        Lines put in the module docstring (tool version, config fingerprint).
    """
    lines = ['"""fcircnn_regs: register map and DDR record layouts of the fcircnn accelerator.',
             ""]
    lines += [line[2:] if line.startswith("# ") else line for line in _banner("#", "", banner)
              ][1:]
    lines += ['"""', ""]
    consts = constants()
    section = None
    for c in consts:
        if c.section != section:
            section = c.section
            lines += ["", f"# {_SECTIONS[section]}"]
        lines.append(f"{c.name} = {_hex(c.value)}  # {c.comment}")
    lines += ["", "", "#: Register byte offsets by name.", "REGISTERS = {"]
    lines += [f"    {r.name!r}: {_hex(r.offset)}," for r in REGISTERS]
    lines += ["}", "", "#: Bit fields: ``(register, field)`` -> ``(lowest bit, width)``.",
              "FIELDS = {"]
    lines += [f"    ({f.register!r}, {f.name!r}): ({f.bit}, {f.width})," for f in FIELDS]
    lines += ["}", "",
              "#: Descriptor fields: name -> ``(byte offset, bytes per element, elements)``.",
              "DESCRIPTOR_FIELDS = {"]
    lines += [f"    {f.name!r}: ({_hex(f.offset)}, {f.size}, {f.count}),"
              for f in descriptor_fields() if not f.name.startswith("_")]
    cycles_format = "<" + "".join({8: "Q", 4: "I"}[f.size] for f in CYCLES_ENTRY_FIELDS)
    lines += ["}", "",
              "#: ``struct`` format of a descriptor, fields in byte order (vectors flattened).",
              f"DESCRIPTOR_FORMAT = {descriptor._FORMAT!r}",
              "#: ``struct`` format of a cycles entry: cycles, PE-busy, DMA-stall.",
              f"CYCLES_FORMAT = {cycles_format!r}", ""]
    return "\n".join(lines)
