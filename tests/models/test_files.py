"""models/files.py: array files checked at load, results written whole or not at all."""

from __future__ import annotations

import os
import re
import stat
import struct
import tracemalloc
import warnings
import zipfile

import numpy as np
import pytest

from fcircnn.models.files import (
    ArrayFileError,
    OutputFileError,
    atomic_write,
    check_array,
    check_output_dir,
    check_output_file,
    read_npy,
    read_npz,
)


def test_read_npz_and_npy_round_trip(tmp_path):
    a = np.arange(6.0).reshape(2, 3)
    np.savez(tmp_path / "w.npz", a=a, b=a.astype(np.int8))
    got = read_npz(tmp_path / "w.npz")
    assert set(got) == {"a", "b"} and np.array_equal(got["a"], a)
    np.save(tmp_path / "x.npy", a)
    assert np.array_equal(read_npy(tmp_path / "x.npy"), a)


@pytest.mark.parametrize("make, message", [
    (lambda p: None, "file not found"),
    (lambda p: p.write_bytes(b""), "empty file"),
    (lambda p: p.write_bytes(b"hello world"), "not a zip file"),
    (lambda p: np.save(p.with_suffix(".npy"), np.zeros(3)) or os.replace(p.with_suffix(".npy"),
                                                                         p), "a single .npy"),
    (lambda p: p.mkdir(), "is a folder"),
])
def test_read_npz_refusals(tmp_path, make, message):
    path = tmp_path / "w.npz"
    make(path)
    with pytest.raises(ArrayFileError, match=message) as exc:
        read_npz(path)
    assert str(path) in str(exc.value)


def test_read_npz_truncated_and_pickled(tmp_path):
    np.savez(tmp_path / "ok.npz", a=np.zeros(1000))
    raw = (tmp_path / "ok.npz").read_bytes()
    (tmp_path / "cut.npz").write_bytes(raw[: len(raw) - 40])
    with pytest.raises(ArrayFileError, match="truncated or damaged"):
        read_npz(tmp_path / "cut.npz")
    with zipfile.ZipFile(tmp_path / "obj.npz", "w") as z, z.open("a.npy", "w") as f:
        np.lib.format.write_array(f, np.array([{}], dtype=object), allow_pickle=True)
    with pytest.raises(ArrayFileError, match="unpickling"):
        read_npz(tmp_path / "obj.npz")


def test_read_npy_refusals(tmp_path):
    np.savez(tmp_path / "a.npz", a=np.zeros(2))
    with pytest.raises(ArrayFileError, match=r"an \.npz archive, not an \.npy"):
        read_npy(tmp_path / "a.npz")
    np.save(tmp_path / "o.npy", np.array([object()]), allow_pickle=True)
    with pytest.raises(ArrayFileError, match="unpickling"):
        read_npy(tmp_path / "o.npy")


@pytest.mark.parametrize("array, message", [
    (np.zeros((2, 3), complex), "complex array"),
    (np.zeros((2, 3), bool), "bool array; expected real numbers"),
    (np.array([["a"] * 3] * 2), "<U1 array; expected real numbers"),
    (np.zeros((3, 2)), r"shape \(3, 2\), expected \(2, 3\)"),
    (np.array([[0, 1, np.nan], [0, np.inf, 0]]), r"2 value\(s\) not finite .* index \(0, 2\)"),
    (np.array([[0, 1, 2], [0, -1e9, 0]]), r"\|value\| up to 1e\+09 at index \(1, 1\)"),
])
def test_check_array_refusals(array, message):
    with pytest.raises(ArrayFileError, match=f"f.npz: 'w': {message}"):
        check_array(array, "f.npz: 'w'", (2, 3), max_abs=1e6)


def test_check_array_gives_float64():
    got = check_array(np.ones((2, 3), np.int8), "w", (2, 3), max_abs=1.0)
    assert got.dtype == np.float64 and got.sum() == 6


def test_atomic_write_leaves_old_file_when_interrupted(tmp_path):
    path = tmp_path / "out.bin"
    path.write_bytes(b"old")

    def half(f):
        f.write(b"new data, half of it")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        atomic_write(path, half)
    assert path.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.bin"]  # no temporary left behind
    atomic_write(path, lambda f: f.write(b"new"))
    assert path.read_bytes() == b"new"
    assert oct(path.stat().st_mode & 0o777) == oct(0o666 & ~_umask())


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_atomic_write_writes_exactly_the_name_given(tmp_path):
    # numpy.savez(name) appends .npz; through atomic_write the file is the one named.
    atomic_write(tmp_path / "weights", lambda f: np.savez(f, a=np.zeros(1)))
    assert [p.name for p in tmp_path.iterdir()] == ["weights"]


def test_output_checks(tmp_path):
    (tmp_path / "file").write_text("x")
    assert check_output_file(tmp_path / "o.npz") is None
    assert "does not exist" in check_output_file(tmp_path / "no" / "o.npz")
    assert "is not a folder" in check_output_file(tmp_path / "file" / "o.npz")
    assert "is a folder" in check_output_file(tmp_path)
    assert check_output_dir(tmp_path / "new" / "deeper") is None
    assert "exists and is not a folder" in check_output_dir(tmp_path / "file")
    assert "is not a folder" in check_output_dir(tmp_path / "file" / "sub")


def _npy_bytes(header: str, data: bytes = b"", version: int = 1) -> bytes:
    """An .npy file of ``header`` (a dict literal) and ``data``, as numpy lays it out."""
    text = header.encode("latin1")
    size = struct.pack("<H" if version == 1 else "<I", len(text))
    return b"\x93NUMPY" + bytes([version, 0]) + size + text + data


#: An .npy of 64 bytes whose header claims 64 TB (numpy would try to allocate them).
_LYING = _npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000000, 8), }\n",
                    bytes(64))
_LIE = ("the header claims shape (1000000000000, 8) of float64 (64000000000000 bytes) but 64 "
        "bytes of data follow it")


def test_read_npy_refuses_a_header_claiming_more_data_than_the_file_holds(tmp_path):
    path = tmp_path / "lie.npy"
    path.write_bytes(_LYING)
    with pytest.raises(ArrayFileError, match=re.escape(f"{path}: {_LIE}")):
        read_npy(path)


def test_read_npy_refuses_bytes_after_the_data(tmp_path):
    np.save(tmp_path / "x.npy", np.zeros(4))
    path = tmp_path / "x.npy"
    path.write_bytes(path.read_bytes() + b"junk")
    with pytest.raises(ArrayFileError, match=re.escape(
            f"{path}: 4 bytes after the data of shape (4,) of float64 (32 bytes")):
        read_npy(path)


def test_read_npz_refuses_an_entry_whose_header_lies(tmp_path):
    path = tmp_path / "w.npz"
    np.savez(path, good=np.zeros(3))
    with zipfile.ZipFile(path, "a") as z:
        z.writestr("c1.generators.npy", _LYING)
    with pytest.raises(ArrayFileError, match=re.escape(
            f"{path}: entry 'c1.generators.npy': {_LIE}")):
        read_npz(path)


def test_read_npz_refuses_an_entry_that_is_not_an_array(tmp_path):
    path = tmp_path / "w.npz"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("notes.txt", b"hello")
    with pytest.raises(ArrayFileError, match=re.escape(
            f"{path}: entry 'notes.txt': not a NumPy array")):
        read_npz(path)


@pytest.mark.parametrize("raw, reason", [
    (_npy_bytes("{'descr': __import__"[:20]), "EOF in multi-line statement"),  # TokenError
    (_npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (-1, 8), }\n"),
     "negative dimension"),
    (_npy_bytes("{'descr': 'zz', 'fortran_order': False, 'shape': (1,), }\n"),
     "descr is not a valid dtype descriptor"),
    (b"\x93NUMPY\x09\x00" + bytes(8), "unknown .npy format version 9.0"),
    (b"\x93NUMPY", "EOF: reading magic string"),
])
def test_read_npy_malformed_headers(tmp_path, raw, reason):
    path = tmp_path / "x.npy"
    path.write_bytes(raw)
    with pytest.raises(ArrayFileError, match=re.escape(
            f"{path}: not a valid .npy header ({reason}")):
        read_npy(path)


@pytest.mark.parametrize("read", [read_npy, read_npz])
def test_readers_refuse_a_fifo_unopened(tmp_path, read):
    path = tmp_path / "x.npy"
    os.mkfifo(path)
    with pytest.raises(ArrayFileError, match=re.escape(
            f"{path}: a FIFO (named pipe), not a regular file")):
        read(path)


def test_output_check_refuses_what_is_not_a_regular_file(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert check_output_file(fifo) == (f"{fifo} is a FIFO (named pipe), not a regular file; "
                                       "give a file name")
    assert "is a character device, not a regular file" in check_output_file("/dev/null")
    os.symlink(fifo, tmp_path / "to_fifo")
    assert "is a FIFO (named pipe)" in check_output_file(tmp_path / "to_fifo")
    (tmp_path / "file").write_text("x")
    os.symlink(tmp_path / "file", tmp_path / "to_file")
    assert check_output_file(tmp_path / "to_file") is None


@pytest.mark.skipif(not os.path.isfile("/proc/version"), reason="needs Linux /proc")
def test_output_check_tries_the_folder():
    assert check_output_file("/proc/version").startswith("cannot create a file in folder /proc")


def test_atomic_write_never_replaces_a_fifo(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(OutputFileError, match=re.escape(
            f"{fifo}: a FIFO (named pipe), not a regular file; not replaced")):
        atomic_write(fifo, lambda f: f.write(b"x"))
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo"]


def test_atomic_write_fails_cleanly_without_its_temporary_file(tmp_path):
    path = tmp_path / "gone" / "out.npz"
    with pytest.raises(OutputFileError, match=re.escape(
            f"{path}: cannot create a temporary file in folder {tmp_path / 'gone'}")) as exc:
        atomic_write(path, lambda f: f.write(b"x"))
    assert isinstance(exc.value, OSError)  # callers catching OSError around writes catch it


def test_atomic_write_through_a_link_keeps_the_link(tmp_path):
    (tmp_path / "real").write_bytes(b"old")
    os.symlink("real", tmp_path / "link")
    atomic_write(tmp_path / "link", lambda f: f.write(b"new"))
    assert os.readlink(tmp_path / "link") == "real"
    assert (tmp_path / "real").read_bytes() == b"new"


def test_read_npz_refuses_an_entry_written_twice(tmp_path):
    path = tmp_path / "w.npz"
    np.savez(path, a=np.zeros(3))
    with warnings.catch_warnings():  # zipfile warns of the duplicate name it writes
        warnings.simplefilter("ignore")
        with zipfile.ZipFile(path, "a") as z, z.open("a.npy", "w") as f:
            np.lib.format.write_array(f, np.full(3, 9999.0))
    with pytest.raises(ArrayFileError, match=r"entry 'a.npy' appears more than once"):
        read_npz(path)


def test_read_npz_unpacks_only_the_entries_asked_for(tmp_path):
    # A 1.5 MB archive of 1.6 GB of zeros under a name the caller refuses took 1.6 GB of
    # memory before the refusal; entries are now read when asked for.
    path = tmp_path / "w.npz"
    np.savez_compressed(path, good=np.ones(4), junk=np.zeros(64 << 20, dtype=np.uint8))
    tracemalloc.start()
    try:
        arrays = read_npz(path)
        assert set(arrays) == {"good", "junk"} and arrays["good"].sum() == 4
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, peak
