"""Host register map (:mod:`fcircnn.gen.headers`): the C header compiles and agrees with the
tables, the Python module imports on its own and agrees with the tables and the encoders."""

import ast
import re
import shutil
import struct
import subprocess
import sys

import numpy as np
import pytest

from fcircnn.arch import descriptor
from fcircnn.gen import headers
from fcircnn.gen.pack import pack_post_table
from fcircnn.gen.plan import CYCLE_BYTES, POST_RECORD_BYTES, plan_network
from fcircnn.hw.regfile import FIELDS, IDENT, REGISTERS, VERSION
from fcircnn.models.config import builtin_path, load_accelerator
from fcircnn.models.quant import PostParams

CHECKS = """
#include <assert.h>
#include "fcircnn_regs.h"

_Static_assert(FCIRCNN_REG_CTRL == 0x00, "CTRL");
_Static_assert(FCIRCNN_REG_DESC_PTR_LO == 0x20, "DESC_PTR_LO");
_Static_assert(FCIRCNN_REG_VERSION == 0x44, "VERSION");
_Static_assert(FCIRCNN_CTRL_DONE_MASK == 0x4u, "CTRL.done");
_Static_assert(FCIRCNN_IER_ERROR_SHIFT == 1, "IER.error");
_Static_assert(FCIRCNN_CONTROL_BYTES == 4096, "window");
_Static_assert(FCIRCNN_DESC_LAYER_OFFSET == 0 && FCIRCNN_DESC_LAYER_SIZE == 2, "layer");
_Static_assert(FCIRCNN_DESC_IN_SHAPE_OFFSET == 0x08 && FCIRCNN_DESC_IN_SHAPE_COUNT == 3, "in");
_Static_assert(FCIRCNN_DESC_IN_BASE_OFFSET == 0x38, "in_base");
_Static_assert(offsetof(fcircnn_desc_t, next_desc) == 0x68, "next_desc");
_Static_assert(sizeof(fcircnn_desc_t) == FCIRCNN_DESC_BYTES, "descriptor size");
_Static_assert(FCIRCNN_FLAG_LAST == 0x10, "FLAG_LAST");
_Static_assert(FCIRCNN_OP_GAP == 1, "OP_GAP");
_Static_assert(FCIRCNN_POST_BYTES == 32 && sizeof(fcircnn_post_t) == 32, "post");
_Static_assert(FCIRCNN_POST_SHIFT_OFFSET == 0x14, "post shift");
_Static_assert(offsetof(fcircnn_post_t, bias) == 8, "post bias");
_Static_assert(FCIRCNN_CYCLES_BYTES == 16 && sizeof(fcircnn_cycles_t) == 16, "cycles");
_Static_assert(FCIRCNN_CYCLES_PE_BUSY_OFFSET == 8, "pe_busy");
_Static_assert(offsetof(fcircnn_cycles_t, dma_stall) == 12, "dma_stall");

int main(void) { uint32_t ctrl = FCIRCNN_CTRL_START_MASK; return (int)(ctrl - 1u); }
"""


@pytest.fixture(scope="module")
def regs_module(tmp_path_factory):
    """The generated Python module, imported from a file."""
    import importlib.util

    folder = tmp_path_factory.mktemp("python")
    path = folder / "fcircnn_regs.py"
    path.write_text(headers.python_module(["test banner"]))
    spec = importlib.util.spec_from_file_location("fcircnn_regs_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _c_defines(text):
    return {m[1]: int(m[2], 0) for m in re.finditer(
        r"^#define FCIRCNN_(\w+)\s+(0x[0-9a-f]+|\d+)u\b", text, re.MULTILINE)}


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")
@pytest.mark.parametrize("std", ["c11", "c99"])
def test_c_header_compiles(tmp_path, std):
    (tmp_path / "fcircnn_regs.h").write_text(headers.c_header(["config sha256 0123"]))
    checks = CHECKS if std == "c11" else "#include \"fcircnn_regs.h\"\nint main(void) {}\n"
    (tmp_path / "check.c").write_text(checks)
    proc = subprocess.run(["gcc", f"-std={std}", "-Wall", "-Wextra", "-Werror", "-pedantic",
                           "-fsyntax-only", "-I", str(tmp_path), str(tmp_path / "check.c")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")
def test_c_header_static_asserts_catch_a_wrong_offset(tmp_path):
    (tmp_path / "fcircnn_regs.h").write_text(headers.c_header())
    (tmp_path / "bad.c").write_text('#include "fcircnn_regs.h"\n'
                                    '_Static_assert(FCIRCNN_REG_GIE == 0x08, "wrong");\n')
    proc = subprocess.run(["gcc", "-std=c11", "-fsyntax-only", "-I", str(tmp_path),
                           str(tmp_path / "bad.c")], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "wrong" in proc.stderr


def test_c_header_has_guard_and_every_constant(regs_module):
    text = headers.c_header()
    assert text.startswith("/*") and "#ifndef FCIRCNN_REGS_H\n#define FCIRCNN_REGS_H" in text
    assert text.rstrip().endswith("#endif /* FCIRCNN_REGS_H */")
    assert "#include <stdint.h>" in text
    defines = _c_defines(text)
    assert defines == {c.name: c.value for c in headers.constants()}
    # The Python module has the same constants with the same values.
    assert {name: getattr(regs_module, name) for name in defines} == defines


def test_tables_to_constants(regs_module):
    m = regs_module
    for reg in REGISTERS:
        assert getattr(m, f"REG_{reg.name}") == reg.offset
        assert m.REGISTERS[reg.name] == reg.offset
    for f in FIELDS:
        key = f"{f.register}_{f.name.upper()}"
        assert getattr(m, f"{key}_SHIFT") == f.bit
        assert getattr(m, f"{key}_MASK") == ((1 << f.width) - 1) << f.bit
        assert m.FIELDS[(f.register, f.name)] == (f.bit, f.width)
    assert (m.ID_DEFAULT, m.VERSION_DEFAULT) == (IDENT, VERSION)
    assert m.DESC_BYTES == descriptor.DESCRIPTOR_BYTES
    assert m.DESCRIPTOR_FORMAT == descriptor._FORMAT
    assert struct.calcsize(m.DESCRIPTOR_FORMAT) == m.DESC_BYTES
    for name in descriptor.__all__:
        if name.startswith(("FLAG_", "OP_")):
            assert getattr(m, name) == getattr(descriptor, name)
    named = [name for name, _, count in descriptor._FIELDS if count]
    assert list(m.DESCRIPTOR_FIELDS) == named
    assert (m.POST_BYTES, m.CYCLES_BYTES) == (POST_RECORD_BYTES, CYCLE_BYTES)
    assert struct.calcsize(m.CYCLES_FORMAT) == CYCLE_BYTES


def test_descriptor_offsets_read_packed_descriptors(regs_module):
    """Every field read at its generated offset from ``LayerDescriptor.pack()`` bytes equals
    the descriptor's value (the compiler's real descriptors of C3D)."""
    m = regs_module
    plan = plan_network(load_accelerator(builtin_path("c3d_zcu102")))
    for desc in plan.descriptors:
        raw = desc.pack()
        for name, (offset, size, count) in m.DESCRIPTOR_FIELDS.items():
            values = tuple(int.from_bytes(raw[offset + i * size:offset + (i + 1) * size],
                                          "little") for i in range(count))
            expected = getattr(desc, name)
            assert values == (expected if count > 1 else (expected,)), name


def test_post_offsets_read_the_compiler_records(regs_module):
    m = regs_module
    post = PostParams(mult=np.array([[-3, 1000], [7, -32768]]),
                      bias=np.array([[-(1 << 47), 5], [123456789012, -1]]),
                      shift=np.array([[0, 47], [13, 1]]),
                      res_mult=np.array([[32767, -2], [0, 9]]))
    raw = pack_post_table(post)
    for s in range(2):
        rec = raw[s * m.POST_BYTES:(s + 1) * m.POST_BYTES]

        def read(field, c, rec=rec):
            offset = getattr(m, f"POST_{field}_OFFSET") + c * getattr(m, f"POST_{field}_SIZE")
            size = getattr(m, f"POST_{field}_SIZE")
            return int.from_bytes(rec[offset:offset + size], "little", signed=field != "SHIFT")

        for c in range(2):
            assert read("MULT", c) == post.mult[c, s]
            assert read("RES_MULT", c) == post.res_mult[c, s]
            assert read("BIAS", c) == post.bias[c, s]
            assert read("SHIFT", c) == post.shift[c, s]


def test_python_module_is_standalone(tmp_path):
    text = headers.python_module()
    tree = ast.parse(text)
    assert not [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    (tmp_path / "fcircnn_regs.py").write_text(text)
    # -S -I: no site-packages (so no fcircnn, no numpy), no user paths.
    code = (f"import sys; sys.path.insert(0, {str(tmp_path)!r}); "
            "import fcircnn_regs as r; print(r.REG_DESC_PTR_LO, r.DESC_BYTES)")
    proc = subprocess.run([sys.executable, "-S", "-I", "-c", code],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["32", str(descriptor.DESCRIPTOR_BYTES)]


def test_outputs_are_deterministic():
    assert headers.c_header(["x"]) == headers.c_header(["x"])
    assert headers.python_module(["x"]) == headers.python_module(["x"])


def test_cycles_entry_matches_the_host_decoder(regs_module):
    image = pytest.importorskip("fcircnn.runtime.image")
    assert regs_module.CYCLES_FORMAT == image._CYCLES.format
    assert regs_module.CYCLES_BYTES == image.CYCLES_ENTRY_BYTES
    assert [f.name for f in headers.CYCLES_ENTRY_FIELDS] == ["cycles", "pe_busy", "dma_stall"]
