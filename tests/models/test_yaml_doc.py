"""models/yaml_doc.py: configuration files read as bounded plain YAML documents."""

from __future__ import annotations

import os
import re
import threading
import time

import pytest

from fcircnn.models.yaml_doc import MAX_DEPTH, MAX_NODES, DocumentError, read_document


def _read(tmp_path, text: str | bytes):
    path = tmp_path / "doc.yaml"
    (path.write_bytes if isinstance(text, bytes) else path.write_text)(text)
    return read_document(path)


def test_plain_document_with_anchors_and_merge(tmp_path):
    doc = _read(tmp_path, "base: &b {k: 3, s: 1}\nlayer: {<<: *b, s: 2}\nlist: [*b, *b]\n")
    assert doc["layer"] == {"k": 3, "s": 2}
    assert doc["list"] == [{"k": 3, "s": 1}] * 2


def test_numbers_without_yaml_1_1_base_60_and_octal(tmp_path):
    # base 60 (1:30 would be 90) and leading-zero octal (010 would be 8) stay text, for the
    # schema to refuse by key; every other YAML 1.1 number reads as before
    doc = _read(tmp_path, "a: [1:30, 010, 190:20:30.15, 0, -5, +3, 1_000, 0x1F, 0b101, 1.5, "
                          "2.0e+2, 1., .5, -.inf, 2e2]\n")
    assert doc["a"] == ["1:30", "010", "190:20:30.15", 0, -5, 3, 1000, 31, 5, 1.5, 200.0, 1.0,
                        0.5, float("-inf"), "2e2"]
    assert _read(tmp_path, "a: .nan\n")["a"] != _read(tmp_path, "a: .nan\n")["a"]


@pytest.mark.parametrize("text, message", [
    ("a: &x [1, *x]\n", "refers to the list or mapping it is part of"),
    ("a: &x {b: {c: *x}}\n", "refers to the list or mapping it is part of"),
    ("a: *nothing\n", "alias *nothing has no anchor before it"),
    ("a: " + "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), f"nested more than {MAX_DEPTH}"),
    ("a: {b: 1, b: 2}\n", "duplicate key 'b'"),
    ("a: !!python/name:os.system ''\n", "YAML syntax error"),
])
def test_refused_documents(tmp_path, text, message):
    with pytest.raises(DocumentError, match=message.replace("*", r"\*").replace("[", r"\[")):
        _read(tmp_path, text)


def test_depth_limit_is_exact(tmp_path):
    ok = "a: " + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1)  # the mapping is one level
    assert _read(tmp_path, ok) is not None


def test_alias_bomb_is_refused_quickly(tmp_path):
    lines = ["a: &a [" + ", ".join(["x"] * 10) + "]"]
    for prev, name in zip("abcdefghi", "bcdefghij", strict=True):
        lines.append(f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 10) + "]")
    start = time.perf_counter()
    with pytest.raises(DocumentError, match=f"more than {MAX_NODES} values") as exc:
        _read(tmp_path, "\n".join(lines) + "\n")
    assert time.perf_counter() - start < 1.0
    assert exc.value.where.startswith("line ")


def test_node_limit_counts_expanded_aliases(tmp_path):
    per = MAX_NODES // 4
    text = "a: &a [" + ", ".join(["1"] * per) + "]\nb: [*a, *a, *a, *a, *a]\n"
    with pytest.raises(DocumentError, match="more than"):
        _read(tmp_path, text)
    assert _read(tmp_path, "a: &a [" + ", ".join(["1"] * per) + "]\nb: [*a, *a]\n")


@pytest.mark.parametrize("raw, message", [
    ("name: x\n".encode("utf-16"), "UTF-16"),
    (b"\xc3\x28 bad", "not UTF-8 text"),
    (b"a: 1\x00", "NUL bytes"),
    (b"#" * (1 << 20) + b"\n", "larger than 1024 KiB"),
])
def test_not_text(tmp_path, raw, message):
    with pytest.raises(DocumentError, match=message):
        _read(tmp_path, raw)


def test_missing_file_is_an_os_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_document(tmp_path / "nope.yaml")


def test_a_fifo_is_refused_unopened(tmp_path):
    fifo = tmp_path / "net.yaml"
    os.mkfifo(fifo)

    def feed():  # if read_document opened the FIFO, it would read "a: 1" instead of failing
        with open(fifo, "w") as f:
            f.write("a: 1\n")

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    try:
        with pytest.raises(DocumentError, match=re.escape(
                "a FIFO (named pipe), not a regular file")) as exc:
            read_document(fifo)
        assert exc.value.where == ""
    finally:
        reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # releases the writer
        writer.join(5)
        os.close(reader)


def test_a_device_is_refused(tmp_path):
    with pytest.raises(DocumentError, match="a character device, not a regular file"):
        read_document("/dev/zero")


def test_an_integer_beyond_pythons_digit_limit_names_its_line(tmp_path):
    text = "name: x\ninput: {channels: " + "9" * 5000 + ", depth: 4}\n"
    with pytest.raises(DocumentError, match=r"the number '9+'\.\.\.'9+' is too long \(5000 "
                                            r"digits; Python reads at most \d+\)") as exc:
        _read(tmp_path, text)
    assert exc.value.where == "line 2, column 19"


def test_a_date_that_does_not_exist_names_its_line(tmp_path):
    with pytest.raises(DocumentError, match=re.escape(
            "line 2, column 7: cannot read the timestamp '2001-13-45': month must be in")):
        _read(tmp_path, "a: 1\nname: 2001-13-45\n")


def test_a_second_merge_key_is_a_duplicate(tmp_path):
    with pytest.raises(DocumentError, match=r"duplicate merge key '<<' \(first at line 2"):
        _read(tmp_path, "a: &a {k: 3}\nb: {<<: *a,\n    <<: {k: 5}}\n")
    # one merge of several mappings: the first to name a key wins (YAML 1.1)
    assert _read(tmp_path, "a: &a {k: 3}\nb: {<<: [*a, {k: 5, x: 1}]}\n")["b"] == {"k": 3, "x": 1}
