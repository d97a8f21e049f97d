"""Multi-file outputs written whole or not at all.

A command that writes several files into a folder (``compile``, ``generate``, ``deploy``,
``sweep``) fills a temporary sibling of the folder (:func:`staged_folder`) and moves the files
into place only when everything was written: an error on the way (bad weights, a full disk, a
target that is a folder) leaves the output folder as it was, and no empty folder behind.
:func:`target_conflict` names, before any work, a target path a file cannot be moved to.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

__all__ = ["OutputConflict", "staged_folder", "target_conflict"]


class OutputConflict(OSError):
    """A file of an output cannot be put where it belongs (a folder is in the way, or a file
    stands where a folder is needed); the message names the path."""


def target_conflict(out: str | os.PathLike[str], files: Iterable[str]) -> str | None:
    """Why one of ``files`` (paths relative to the folder ``out``) cannot be written, or
    ``None``: the first target that is a folder, or an ancestor inside ``out`` that is a
    file."""
    out = Path(out)
    for rel in files:
        target = out / rel
        if target.is_dir():
            return f"{target} is a folder, where the file {rel} goes"
        for parent in Path(rel).parents:
            if parent != Path(".") and (out / parent).exists() and not (out / parent).is_dir():
                return f"{out / parent} is a file, where the folder {parent} goes"
    return None


def _existing_ancestor(path: Path) -> Path:
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _files_under(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if not p.is_dir())


def _commit(tmp: Path, out: Path) -> None:
    """Move the contents of ``tmp`` into ``out``: one rename when ``out`` is new, else file by
    file (every target checked first)."""
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.rename(tmp, out)
            return
        except OSError:
            if not out.is_dir():
                raise
            # another writer (a parallel run saving the same image) made it meanwhile: move
            # the files one by one, each replaced whole
    files = _files_under(tmp)
    if why := target_conflict(out, files):
        raise OutputConflict(why)
    for rel in files:
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        os.replace(tmp / rel, out / rel)


@contextlib.contextmanager
def staged_folder(out: str | os.PathLike[str]) -> Iterator[Path]:
    """A temporary folder to write the files of the folder ``out`` into; on a normal exit they
    are moved into ``out`` (created if missing; files of the same names replaced, others left
    alone), on an exception the temporary folder is removed and ``out`` is untouched.

    The temporary folder lies beside ``out`` (or in its nearest existing ancestor), on the
    same file system, so the moves are renames. New folders get the permissions of the
    process's umask.

    Raises
    ------
    OutputConflict
        A file cannot be moved into place (:func:`target_conflict`); nothing was moved.
    OSError
        The temporary folder cannot be created, or a move fails.
    """
    out = Path(out)
    home = out.parent if out.parent.is_dir() else _existing_ancestor(out.parent)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name or 'out'}.", suffix=".tmp", dir=home))
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o777 & ~umask)
        yield tmp
        _commit(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
