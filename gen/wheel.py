"""A wheel of the installed fcircnn, for a board that installs it offline.

A deployment folder carries the package it runs (``run.py`` imports :mod:`fcircnn.runtime.board`):
``pip install --no-deps fcircnn-<version>-py3-none-any.whl`` on the board, with no network
and no copy of the source. The wheel holds what this installation imports, file for file:

* run from a checkout (an editable install): the packages and package data that
  ``pyproject.toml``'s ``[tool.setuptools]`` table maps, read from the checkout (the one
  statement of the layout);
* an install from a wheel or an sdist: the files its ``RECORD`` lists under ``fcircnn/``.

Its metadata is the installation's own (``METADATA``, ``entry_points.txt``), so its core
dependencies are those the board must have (numpy, pyyaml, pydantic, tqdm); the extras are
not installed by ``--no-deps``.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import zipfile
from pathlib import Path

__all__ = ["WheelError", "core_requirements", "core_wheel", "wheel_name"]

#: The wheel's tag: pure Python, any interpreter and platform.
_PURELIB_TAG = "py3-none-any"


class WheelError(RuntimeError):
    """This installation's files cannot be found (neither a RECORD nor a checkout)."""


def core_requirements() -> list[str]:
    """The installed fcircnn's core dependencies (``Requires-Dist`` without an extra)."""
    requires = importlib.metadata.distribution("fcircnn").requires or []
    return [r for r in requires if "extra ==" not in r]


def wheel_name(version: str) -> str:
    """The file name of the wheel of fcircnn ``version``."""
    return f"fcircnn-{version}-{_PURELIB_TAG}.whl"


def core_wheel(folder: str | Path) -> Path:
    """Write the wheel of the installed fcircnn into ``folder`` (:func:`wheel_name`); its
    path.

    Raises
    ------
    WheelError
        If the installation's files cannot be found.
    OSError
        If the wheel cannot be written.
    """
    dist = importlib.metadata.distribution("fcircnn")
    files = _checkout_files() or _installed_files(dist)
    if not files:
        raise WheelError("cannot find the files of the installed fcircnn (no RECORD entries "
                         "and no pyproject.toml beside the package)")
    version = dist.version
    info = f"fcircnn-{version}.dist-info"
    meta = {f"{info}/METADATA": dist.read_text("METADATA") or dist.read_text("PKG-INFO") or "",
            f"{info}/WHEEL": ("Wheel-Version: 1.0\nGenerator: fcircnn.gen.wheel\n"
                              f"Root-Is-Purelib: true\nTag: {_PURELIB_TAG}\n"),
            f"{info}/entry_points.txt": dist.read_text("entry_points.txt") or ""}
    path = Path(folder) / wheel_name(version)
    record = []
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as whl:
        for arcname in sorted(files):  # sorted: the same bytes every time
            _add(whl, arcname, files[arcname].read_bytes(), record)
        for arcname, text in meta.items():
            _add(whl, arcname, text.encode(), record)
        record.append(f"{info}/RECORD,,")
        _add(whl, f"{info}/RECORD", ("\n".join(record) + "\n").encode(), [])
    return path


def _add(whl: zipfile.ZipFile, arcname: str, data: bytes, record: list[str]) -> None:
    entry = zipfile.ZipInfo(arcname, date_time=(1980, 1, 1, 0, 0, 0))
    entry.external_attr = 0o644 << 16
    entry.compress_type = zipfile.ZIP_DEFLATED
    whl.writestr(entry, data)
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    record.append(f"{arcname},sha256={digest},{len(data)}")


def _keep(rel: str) -> bool:
    return "__pycache__" not in rel and not rel.endswith((".pyc", ".pyo"))


def _installed_files(dist) -> dict[str, Path]:
    """``fcircnn/...`` files of a regular install, by their RECORD."""
    out = {}
    for f in dist.files or ():
        rel = str(f).replace("\\", "/")
        if rel.startswith("fcircnn/") and _keep(rel):
            path = Path(dist.locate_file(f))
            if path.is_file():
                out[rel] = path
    return out


def _checkout_files() -> dict[str, Path]:
    """The files an editable install maps, from its checkout's ``pyproject.toml``."""
    import fcircnn

    root = Path(fcircnn.__file__).resolve().parents[1]
    pyproject = root / "pyproject.toml"
    if not pyproject.is_file():
        return {}
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: no TOML reader in the standard library
        raise WheelError("an editable install's wheel needs Python 3.11 or newer (tomllib) "
                         "to read pyproject.toml") from None
    table = tomllib.loads(pyproject.read_text())["tool"]["setuptools"]
    dirs = table.get("package-dir", {})
    data = table.get("package-data", {})
    out = {}
    for package in table.get("packages", ()):
        src = root / dirs.get(package, package.replace(".", "/"))
        dest = package.replace(".", "/")
        patterns = ["*.py", *data.get(package, ())]
        for pattern in patterns:
            for path in src.glob(pattern):
                if path.is_file() and _keep(path.name):
                    out[f"{dest}/{path.name}"] = path
    return out
