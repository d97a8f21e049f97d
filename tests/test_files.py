"""models/files.py: array files checked at load, results written whole or not at all."""

from __future__ import annotations

import os
import zipfile

import numpy as np
import pytest

from fcircnn.models.files import (
    ArrayFileError,
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
