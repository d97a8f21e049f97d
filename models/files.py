"""Array files in, result files out: every array checked once at load, every file written whole.

:func:`read_npz` and :func:`read_npy` read NumPy files the user names (weights, input clips)
without ever unpickling, and turn every way a file can be wrong (missing, empty, truncated, the
other format, not NumPy at all) into one :class:`ArrayFileError` naming the file.
:func:`check_array` then checks one array's kind, shape, finiteness and magnitude against what
the reader expects, naming the file and the array. :func:`atomic_write` writes a result through
a temporary file in the same folder and renames it into place, so an interrupted run leaves the
old file or the new one, never half of one.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

import numpy as np

__all__ = [
    "ArrayFileError",
    "atomic_write",
    "check_array",
    "check_output_dir",
    "check_output_file",
    "read_npy",
    "read_npz",
]

#: Largest array file read, in bytes (C3D's full weights at float64 are about 0.1 GiB).
MAX_ARRAY_FILE_BYTES = 8 << 30


class ArrayFileError(ValueError):
    """An array file that cannot be used; the message names the file and what was expected."""


def _open_checked(path: str | os.PathLike[str], what: str) -> Path:
    path = Path(path)
    if not path.exists():
        raise ArrayFileError(f"{path}: file not found")
    if path.is_dir():
        raise ArrayFileError(f"{path}: is a folder, not {what}")
    size = path.stat().st_size
    if size == 0:
        raise ArrayFileError(f"{path}: empty file, not {what}")
    if size > MAX_ARRAY_FILE_BYTES:
        raise ArrayFileError(f"{path}: {size / 2**30:.1f} GiB, more than the "
                             f"{MAX_ARRAY_FILE_BYTES >> 30} GiB an array file may have")
    return path


def _magic(path: Path) -> bytes:
    with open(path, "rb") as f:
        return f.read(6)


def read_npz(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """Every array of an ``.npz`` archive, by name (no pickled objects).

    Raises
    ------
    ArrayFileError
        The file is missing, empty, an ``.npy`` file, not a zip archive, truncated, or holds
        an entry that is not a NumPy array or needs unpickling.
    """
    what = "an .npz archive of arrays"
    path = _open_checked(path, what)
    head = _magic(path)
    if head.startswith(b"\x93NUMPY"):
        raise ArrayFileError(f"{path}: a single .npy array, not {what} (numpy.savez writes "
                             "one)")
    if not head.startswith(b"PK"):
        raise ArrayFileError(f"{path}: not {what} (not a zip file)")
    try:
        with np.load(path, allow_pickle=False) as data:
            return {name: data[name] for name in data.files}
    except (zipfile.BadZipFile, EOFError, OSError) as exc:
        raise ArrayFileError(f"{path}: truncated or damaged .npz archive ({exc})") from None
    except ValueError as exc:  # an object array (needs pickle) or a bad header
        raise ArrayFileError(f"{path}: an entry cannot be read without unpickling or is not "
                             f"a NumPy array ({exc})") from None


def read_npy(path: str | os.PathLike[str]) -> np.ndarray:
    """The array of an ``.npy`` file (no pickled objects).

    Raises
    ------
    ArrayFileError
        The file is missing, empty, an ``.npz`` archive, not an ``.npy`` file or truncated.
    """
    what = "an .npy array (numpy.save)"
    path = _open_checked(path, what)
    head = _magic(path)
    if head.startswith(b"PK"):
        raise ArrayFileError(f"{path}: an .npz archive, not {what}")
    if not head.startswith(b"\x93NUMPY"):
        raise ArrayFileError(f"{path}: not {what}")
    try:
        return np.load(path, allow_pickle=False)
    except (EOFError, OSError) as exc:
        raise ArrayFileError(f"{path}: truncated or damaged .npy file ({exc})") from None
    except ValueError as exc:
        raise ArrayFileError(f"{path}: cannot be read without unpickling or has a bad header "
                             f"({exc})") from None


def check_array(array: np.ndarray, where: str, shape: tuple[int, ...], *,
                max_abs: float) -> np.ndarray:
    """``array`` as float64 after checking it is real, of ``shape``, finite and
    ``|x| <= max_abs``.

    Parameters
    ----------
    where : str
        The file and array name for messages, e.g. ``"w.npz: 'c1.generators'"``.

    Raises
    ------
    ArrayFileError
        Naming ``where``, the problem and what was expected.
    """
    kind = array.dtype.kind
    if kind == "c":
        raise ArrayFileError(f"{where}: complex array ({array.dtype}); expected real numbers "
                             f"(float or integer) of shape {shape}")
    if kind not in "fiu":
        raise ArrayFileError(f"{where}: {array.dtype} array; expected real numbers (float or "
                             f"integer) of shape {shape}")
    if array.shape != shape:
        raise ArrayFileError(f"{where}: shape {array.shape}, expected {shape}")
    values = array.astype(np.float64)
    bad = ~np.isfinite(values)
    if bad.any():
        first = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ArrayFileError(f"{where}: {int(bad.sum())} value(s) not finite (NaN or inf), "
                             f"the first at index {first}: {values[first]}")
    peak = float(np.abs(values).max(initial=0.0))
    if peak > max_abs:
        first = tuple(int(i) for i in np.argwhere(np.abs(values) == peak)[0])
        raise ArrayFileError(f"{where}: |value| up to {peak:.3g} at index {first}, beyond the "
                             f"{max_abs:g} this array may hold (a scaling or unit error?)")
    return values


def check_output_file(path: str | os.PathLike[str]) -> str | None:
    """Why ``path`` cannot be written as a file, or ``None`` (checked before work starts)."""
    path = Path(path)
    if path.is_dir():
        return f"{path} is a folder; give a file name"
    parent = path.parent
    if parent.exists() and not parent.is_dir():
        return f"{parent} is not a folder"
    if not parent.is_dir():
        return f"folder {parent} does not exist"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"folder {parent} is not writable"
    if path.exists() and not os.access(path, os.W_OK):
        return f"{path} exists and is not writable"
    return None


def check_output_dir(path: str | os.PathLike[str]) -> str | None:
    """Why the folder ``path`` cannot be created or written into, or ``None``."""
    path = Path(path)
    if path.exists():
        if not path.is_dir():
            return f"{path} exists and is not a folder"
        if not os.access(path, os.W_OK | os.X_OK):
            return f"folder {path} is not writable"
        return None
    ancestor = path.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        return f"{ancestor} is not a folder, cannot create {path} in it"
    if not os.access(ancestor, os.W_OK | os.X_OK):
        return f"folder {ancestor} is not writable, cannot create {path}"
    return None


@contextlib.contextmanager
def _temporary_beside(path: Path, mode: str) -> Iterator[IO]:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent or ".")
    try:
        with os.fdopen(fd, mode) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def atomic_write(path: str | os.PathLike[str], write: Callable[[IO], object], *,
                 binary: bool = True) -> Path:
    """Write ``path`` whole or not at all: ``write(f)`` fills a temporary file in the same
    folder, which then replaces ``path``. Returns ``path``.

    The file gets the permissions a new file of the process would get (the umask's).
    """
    path = Path(path)
    umask = os.umask(0)
    os.umask(umask)
    with _temporary_beside(path, "wb" if binary else "w") as f:
        write(f)
        os.fchmod(f.fileno(), 0o666 & ~umask)
    return path
