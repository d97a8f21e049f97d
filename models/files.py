"""Array files in, result files out: every array checked once at load, every file written whole.

:func:`read_npz` and :func:`read_npy` read NumPy files the user names (weights, input clips)
without ever unpickling, and turn every way a file can be wrong (missing, not a regular file,
empty, truncated, the other format, not NumPy at all, a header whose shape is not the bytes
that follow it) into one :class:`ArrayFileError` naming the file; no array is allocated before
its header has been checked against the data present. :func:`check_array` then checks one
array's kind, shape, finiteness and magnitude against what the reader expects, naming the file
and the array. :func:`atomic_write` writes a result through a temporary file in the same folder
and renames it into place, so an interrupted run leaves the old file or the new one, never half
of one.

A file read or written is a regular file (:func:`special_file_kind` names what else it may be):
a FIFO would block a reader forever and a device or FIFO replaced by a result is destroyed.
Symbolic links are followed (an output link is kept and the file it names replaced).
"""

from __future__ import annotations

import contextlib
import math
import os
import stat
import tempfile
import tokenize
import zipfile
import zlib
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import IO

import numpy as np

__all__ = [
    "ArrayFileError",
    "OutputFileError",
    "atomic_write",
    "check_array",
    "check_input_file",
    "check_output_dir",
    "check_output_file",
    "read_npy",
    "read_npz",
    "special_file_kind",
]

#: Largest array file read, in bytes (C3D's full weights at float64 are about 0.1 GiB).
MAX_ARRAY_FILE_BYTES = 8 << 30


class ArrayFileError(ValueError):
    """An array file that cannot be used; the message names the file and what was expected."""


class OutputFileError(ArrayFileError, OSError):
    """A result file that cannot be written (:func:`atomic_write`); the message names the file
    and why. An :class:`OSError` too, so that callers catching the operating system's errors
    around writing keep catching it."""


def special_file_kind(mode: int) -> str | None:
    """What a file of ``mode`` (``os.stat(path).st_mode``) is when it is neither a regular file
    nor a folder (``"a FIFO (named pipe)"``, ``"a character device"``, ...), else ``None``.

    Reading such a file may block forever (a FIFO) or never end (``/dev/zero``), and replacing
    it would destroy it: a file read or written by the tool must be a regular file.
    """
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    for test, kind in ((stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return kind
    return "a special file"


def check_input_file(path: str | os.PathLike[str], what: str) -> Path:
    """``path`` after checking it is an existing regular file (symbolic links followed), not
    empty and at most :data:`MAX_ARRAY_FILE_BYTES`; ``what`` names what it should be.

    Raises
    ------
    ArrayFileError
        Naming ``path``: missing, a folder, a FIFO, device or socket (never opened: reading
        one could block forever), empty or too large.
    """
    path = Path(path)
    try:
        mode, size = (st := path.stat()).st_mode, st.st_size
    except (FileNotFoundError, NotADirectoryError):
        raise ArrayFileError(f"{path}: file not found") from None
    except OSError as exc:
        raise ArrayFileError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except ValueError as exc:  # a NUL byte in the name
        raise ArrayFileError(f"{path!r}: not a valid file name ({exc})") from None
    if stat.S_ISDIR(mode):
        raise ArrayFileError(f"{path}: is a folder, not {what}")
    if kind := special_file_kind(mode):
        raise ArrayFileError(f"{path}: {kind}, not a regular file; give {what} as a file")
    if size == 0:
        raise ArrayFileError(f"{path}: empty file, not {what}")
    if size > MAX_ARRAY_FILE_BYTES:
        raise ArrayFileError(f"{path}: {size / 2**30:.1f} GiB, more than the "
                             f"{MAX_ARRAY_FILE_BYTES >> 30} GiB an array file may have")
    return path


def _magic(path: Path) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(6)
    except OSError as exc:
        raise ArrayFileError(f"{path}: cannot read: {exc.strerror or exc}") from None


#: What numpy's ``.npy`` header parser raises on a malformed header (it evaluates the header
#: as a Python literal, retrying through :mod:`tokenize` for headers written by Python 2).
_HEADER_ERRORS = (ValueError, SyntaxError, TypeError, KeyError, OverflowError, RecursionError,
                  tokenize.TokenError, EOFError)


def _npy_header(f: IO[bytes], where: str) -> tuple[tuple[int, ...], np.dtype]:
    """The shape and dtype of the ``.npy`` header at the start of ``f`` (left just after it)."""
    fmt = np.lib.format
    try:
        version = fmt.read_magic(f)
        if version not in ((1, 0), (2, 0), (3, 0)):
            raise ValueError(f"unknown .npy format version {version[0]}.{version[1]}")
        read = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
        shape, _, dtype = read(f)
    except _HEADER_ERRORS as exc:
        raise ArrayFileError(f"{where}: not a valid .npy header ({_first_line(exc)})") from None
    if any(n < 0 for n in shape):
        raise ArrayFileError(f"{where}: not a valid .npy header (negative dimension in shape "
                             f"{shape})")
    if dtype.hasobject:
        raise ArrayFileError(f"{where}: holds Python objects ({dtype}), which cannot be read "
                             "without unpickling")
    return shape, dtype


def _first_line(exc: BaseException) -> str:
    """The first line of ``exc``'s message, clipped (numpy's and torch's run to paragraphs)."""
    text = exc.args[0] if isinstance(exc, tokenize.TokenError) and exc.args else str(exc)
    text = str(text).strip() or type(exc).__name__
    line = text.splitlines()[0]
    return line if len(line) <= 200 else line[:197] + "..."


def _check_data_size(where: str, shape: tuple[int, ...], dtype: np.dtype, present: int) -> None:
    """Refuse a header whose ``shape`` x ``dtype`` is not the ``present`` bytes of data after it
    (a forged header would make numpy allocate what it claims; extra bytes are damage)."""
    claimed = math.prod(shape) * dtype.itemsize
    if claimed > present:
        raise ArrayFileError(f"{where}: the header claims shape {shape} of {dtype} "
                             f"({claimed} bytes) but {present} bytes of data follow it "
                             "(truncated, or a damaged header)")
    if claimed < present:
        raise ArrayFileError(f"{where}: {present - claimed} bytes after the data of shape "
                             f"{shape} of {dtype} ({claimed} bytes; a damaged file?)")


def _check_npz_entries(path: Path) -> None:
    """Check every entry of the zip archive ``path`` is a ``.npy`` array whose header matches
    its size, before numpy allocates what the headers claim."""
    with zipfile.ZipFile(path) as z:
        infos = [i for i in z.infolist() if not i.is_dir()]
        total = sum(i.file_size for i in infos)
        if total > MAX_ARRAY_FILE_BYTES:
            raise ArrayFileError(f"{path}: its entries hold {total / 2**30:.1f} GiB once "
                                 f"uncompressed, more than the {MAX_ARRAY_FILE_BYTES >> 30} "
                                 "GiB an array file may have")
        names = [i.filename for i in infos]
        if twice := sorted({n for n in names if names.count(n) > 1}):
            raise ArrayFileError(f"{path}: entry {twice[0]!r} appears more than once (numpy "
                                 "would read the last; which one is meant?)")
        for info in infos:
            where = f"{path}: entry {info.filename!r}"
            with z.open(info) as f:
                if f.read(6) != b"\x93NUMPY":
                    raise ArrayFileError(f"{where}: not a NumPy array (.npy)")
                f.seek(0)
                shape, dtype = _npy_header(f, where)
                if dtype.hasobject:
                    raise ArrayFileError(f"{where}: an object array, which cannot be read "
                                         "without unpickling")
                _check_data_size(where, shape, dtype, info.file_size - f.tell())


class _NpzArrays(Mapping[str, np.ndarray]):
    """The arrays of a checked ``.npz`` archive by name, each read when first asked for: an
    entry nobody asks for (an unknown name the caller refuses) is never decompressed."""

    def __init__(self, path: Path, names: list[str]) -> None:
        self._path, self._names, self._read = path, names, {}

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self._names:
            raise KeyError(name)
        if name not in self._read:
            try:
                with np.load(self._path, allow_pickle=False) as data:
                    self._read[name] = data[name]
            except (zipfile.BadZipFile, EOFError, OSError, zlib.error, ValueError,
                    NotImplementedError, RuntimeError) as exc:
                raise ArrayFileError(f"{self._path}: entry {name!r}: truncated or damaged "
                                     f"({_first_line(exc)})") from None
        return self._read[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


def read_npz(path: str | os.PathLike[str]) -> Mapping[str, np.ndarray]:
    """Every array of an ``.npz`` archive, by name (no pickled objects), each decompressed
    when first asked for (so an entry the caller refuses by name is never unpacked).

    Raises
    ------
    ArrayFileError
        The file is missing, not a regular file, empty, an ``.npy`` file, not a zip archive,
        truncated, or holds an entry that is not a NumPy array, needs unpickling, or whose
        header's shape does not match the bytes the entry holds.
    """
    what = "an .npz archive of arrays"
    path = check_input_file(path, what)
    head = _magic(path)
    if head.startswith(b"\x93NUMPY"):
        raise ArrayFileError(f"{path}: a single .npy array, not {what} (numpy.savez writes "
                             "one)")
    if not head.startswith(b"PK"):
        raise ArrayFileError(f"{path}: not {what} (not a zip file)")
    try:
        _check_npz_entries(path)
        with np.load(path, allow_pickle=False) as data:
            return _NpzArrays(path, list(data.files))
    except ArrayFileError:
        raise
    except (zipfile.BadZipFile, EOFError, OSError, zlib.error, NotImplementedError,
            RuntimeError) as exc:  # damaged, or compressed or encrypted beyond zipfile
        raise ArrayFileError(f"{path}: truncated or damaged .npz archive ({exc})") from None
    except ValueError as exc:  # an object array (needs pickle) or a bad header
        raise ArrayFileError(f"{path}: an entry cannot be read without unpickling or is not "
                             f"a NumPy array ({exc})") from None


def read_npy(path: str | os.PathLike[str]) -> np.ndarray:
    """The array of an ``.npy`` file (no pickled objects).

    Raises
    ------
    ArrayFileError
        The file is missing, not a regular file, empty, an ``.npz`` archive, not an ``.npy``
        file, has a malformed header, or holds more or fewer bytes than its header's shape.
    """
    what = "an .npy array (numpy.save)"
    path = check_input_file(path, what)
    head = _magic(path)
    if head.startswith(b"PK"):
        raise ArrayFileError(f"{path}: an .npz archive, not {what}")
    if not head.startswith(b"\x93NUMPY"):
        raise ArrayFileError(f"{path}: not {what}")
    with open(path, "rb") as f:
        shape, dtype = _npy_header(f, str(path))
        _check_data_size(str(path), shape, dtype, os.fstat(f.fileno()).st_size - f.tell())
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
    """Why ``path`` cannot be written as a file, or ``None`` (checked before work starts).

    An existing ``path`` must be a regular file, or a symbolic link to one (the file the link
    names is then replaced and the link kept, as :func:`atomic_write` does): a FIFO, a device,
    a socket is refused, never replaced. The folder must take a new file (tried: ``/proc``
    or a read-only file system does not).
    """
    path = Path(path)
    try:
        real = Path(os.path.realpath(path))
        st = _stat_or_none(real)
    except ValueError:  # a NUL byte in the name
        return f"{str(path)!r} is not a valid file name"
    except OSError as exc:
        return f"{path}: {exc.strerror or exc}"
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            return f"{path} is a folder; give a file name"
        if kind := special_file_kind(st.st_mode):
            return f"{path} is {kind}, not a regular file; give a file name"
        if not os.access(real, os.W_OK):
            return f"{path} exists and is not writable"
    return _folder_problem(real.parent)


def _stat_or_none(path: Path) -> os.stat_result | None:
    try:
        return path.stat()
    except (FileNotFoundError, NotADirectoryError):
        return None


def _folder_problem(parent: Path) -> str | None:
    """Why no new file can be created in the folder ``parent``, or ``None``."""
    if parent.exists() and not parent.is_dir():
        return f"{parent} is not a folder"
    if not parent.is_dir():
        return f"folder {parent} does not exist"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"folder {parent} is not writable"
    try:
        fd, probe = tempfile.mkstemp(prefix=".fcircnn-probe.", dir=parent)
    except OSError as exc:
        return f"cannot create a file in folder {parent} ({exc.strerror or exc})"
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(probe)
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
def _temporary_beside(path: Path, mode: str, shown: Path) -> Iterator[IO]:
    """A temporary file beside ``path`` that replaces it on success; errors name ``shown``."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise OutputFileError(f"{shown}: cannot create a temporary file in folder "
                              f"{path.parent} to write it ({exc.strerror or exc})") from None
    try:
        with os.fdopen(fd, mode) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise OutputFileError(f"{shown}: cannot write ({exc.strerror or exc})") from None
        raise


def atomic_write(path: str | os.PathLike[str], write: Callable[[IO], object], *,
                 binary: bool = True) -> Path:
    """Write ``path`` whole or not at all: ``write(f)`` fills a temporary file in the same
    folder, which then replaces ``path``. Returns ``path``.

    The file gets the permissions a new file of the process would get (the umask's). A
    symbolic link is followed: the file it names is replaced, the link kept.

    Raises
    ------
    OutputFileError
        Naming ``path``: it exists and is not a regular file (a folder, a FIFO, a device: never
        replaced), or the temporary file cannot be created, written or renamed into place
        (``path`` is then left as it was).
    """
    path = Path(path)
    target = Path(os.path.realpath(path))
    st = _stat_or_none(target)
    if st is not None and not stat.S_ISREG(st.st_mode):
        kind = special_file_kind(st.st_mode) or "a folder"
        raise OutputFileError(f"{path}: {kind}, not a regular file; not replaced")
    umask = os.umask(0)
    os.umask(umask)
    with _temporary_beside(target, "wb" if binary else "w", path) as f:
        write(f)
        os.fchmod(f.fileno(), 0o666 & ~umask)
    return path
