"""Loading configuration files: YAML in, validated and bound configuration objects out.

:func:`load_network`, :func:`load_accelerator` and :func:`load_config` read a file once as a
bounded plain YAML document (:mod:`.yaml_doc`), validate it against the schema (:mod:`.schema`)
and, for an accelerator, load its network (a path relative to the accelerator file, or the
network itself as a mapping) and place every layer on a core. Every problem is reported in one
:class:`~.errors.ConfigError` naming the file and the key path.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from .errors import ConfigError, Problem, allowed_keys, describe_value, show, validate_model
from .schema import INLINE_NETWORK, AcceleratorConfig, NetworkConfig
from .yaml_doc import DocumentError, read_document

__all__ = ["bind_accelerator", "builtin_path", "config_path", "is_accelerator_data",
           "load_accelerator", "load_config", "load_network"]


def _read_yaml(path: Path, file: str, top_keys: Sequence[str]) -> dict[str, Any]:
    """Read a YAML mapping (:func:`~fcircnn.models.yaml_doc.read_document`) or raise
    ConfigError."""
    try:
        data = read_document(path)
    except FileNotFoundError:
        raise ConfigError(file, [Problem("", "file not found")]) from None
    except IsADirectoryError:
        raise ConfigError(file, [Problem("", "is a folder, not a YAML file")]) from None
    except OSError as exc:
        raise ConfigError(file, [Problem("", f"cannot read: {exc.strerror or exc}")]) from None
    except DocumentError as exc:
        raise ConfigError(file, [Problem(exc.where, exc.message)]) from None
    if not isinstance(data, dict):
        raise ConfigError(file, [Problem("", f"top level must be a mapping with keys "
                                             f"{', '.join(top_keys)}; found "
                                             f"{describe_value(data)}")])
    return data


def load_network(path: str | os.PathLike[str]) -> NetworkConfig:
    """Load and validate a network file.

    Parameters
    ----------
    path : str or os.PathLike
        The YAML file.

    Returns
    -------
    NetworkConfig
        Validated, with :attr:`NetworkConfig.resolved` holding every layer's shapes.

    Raises
    ------
    ConfigError
        Listing every problem found (missing file, YAML syntax, schema, references, shapes).
    """
    file = os.fspath(path)
    data = _read_yaml(Path(file), file, allowed_keys(NetworkConfig))
    if is_accelerator_data(data):
        raise ConfigError(file, [Problem("", "an accelerator file, not a network file (it has "
                                             "a 'cores' or 'network' key); give the network "
                                             "file its 'network' key names")])
    return _network_from(data, file)


def _network_from(data: dict[str, Any], file: str) -> NetworkConfig:
    net: NetworkConfig = validate_model(NetworkConfig, data, file)
    net._path = Path(file)
    return net


def load_accelerator(path: str | os.PathLike[str]) -> AcceleratorConfig:
    """Load and validate an accelerator file and the network file it names.

    Parameters
    ----------
    path : str or os.PathLike
        The YAML file; its ``network:`` path is relative to this file's directory.

    Returns
    -------
    AcceleratorConfig
        Validated and bound to its network (:attr:`AcceleratorConfig.network`); every layer
        of the network is runnable by at least one core.

    Raises
    ------
    ConfigError
        For the accelerator file, or for the network file when that one is invalid.
    """
    file = os.fspath(path)
    return _accelerator_from(_read_yaml(Path(file), file, allowed_keys(AcceleratorConfig)),
                             file)


def is_accelerator_data(data: Mapping[str, Any]) -> bool:
    """Whether a configuration document is an accelerator file (it has ``cores`` or
    ``network``) rather than a network file."""
    return "cores" in data or "network" in data


def load_config(path: str | os.PathLike[str]) -> NetworkConfig | AcceleratorConfig:
    """Load a network or an accelerator file, told apart by :func:`is_accelerator_data`
    (the file is read once).

    Raises
    ------
    ConfigError
        As :func:`load_network` or :func:`load_accelerator`.
    """
    file = os.fspath(path)
    data = _read_yaml(Path(file), file, sorted({*allowed_keys(NetworkConfig),
                                                *allowed_keys(AcceleratorConfig)}))
    if is_accelerator_data(data):
        return _accelerator_from(data, file)
    return _network_from(data, file)


def _accelerator_from(data: dict[str, Any], file: str) -> AcceleratorConfig:
    inline = data.get("network")
    if isinstance(inline, Mapping):  # the network written into the accelerator file
        try:
            network = _network_from(dict(inline), file)
        except ConfigError as exc:
            raise ConfigError(file, [replace(p, key=f"network.{p.key}" if p.key else "network")
                                     for p in exc.problems]) from None
        data = {**data, "network": INLINE_NETWORK}
    acc: AcceleratorConfig = validate_model(AcceleratorConfig, data, file)
    if not isinstance(inline, Mapping):
        net_file = os.path.join(os.path.dirname(file), acc.network_file)
        kind = ("not a valid file name (a NUL character)" if "\0" in net_file else
                "not found" if not os.path.exists(net_file) else
                "a folder" if os.path.isdir(net_file) else
                None if os.path.isfile(net_file) else "not a regular file")
        if kind is not None:
            raise ConfigError(file, [Problem("network", f"network file {show(net_file)}: {kind} "
                                                        "(paths are relative to this file)")])
        network = load_network(net_file)
    problems = acc.bind(network, Path(file))
    if problems:
        raise ConfigError(file, problems)
    return acc


def bind_accelerator(data: dict[str, Any], network: NetworkConfig, *,
                     file: str = "<in memory>") -> AcceleratorConfig:
    """Validate YAML-shaped accelerator ``data`` and bind it to ``network``.

    The in-memory counterpart of :func:`load_accelerator` for generated configurations (the
    design-space sweep): ``data["network"]`` is kept as the file reference but ``network`` is
    used as is.

    Raises
    ------
    ConfigError
        Reported against ``file``, as :func:`load_accelerator` would.
    """
    acc: AcceleratorConfig = validate_model(AcceleratorConfig, data, file)
    problems = acc.bind(network, None)
    if problems:
        raise ConfigError(file, problems)
    return acc


def builtin_path(name: str) -> Path:
    """Return the path of a configuration shipped in ``fcircnn.models``.

    Parameters
    ----------
    name : str
        ``"c3d"``, ``"c3d.yaml"``, ``"c3d_zcu102"``, ...

    Raises
    ------
    ConfigError
        If there is no such file (the message lists the available names).
    """
    here = Path(__file__).resolve().parent
    stem = name[:-5] if name.endswith(".yaml") else name
    candidate = here / f"{stem}.yaml"
    if "/" not in stem and "\\" not in stem and candidate.is_file():
        return candidate
    available = sorted(p.stem for p in here.glob("*.yaml"))
    raise ConfigError(name, [Problem("", f"no built-in configuration of that name; available: "
                                         f"{', '.join(available)}")])


def config_path(name: str | os.PathLike[str]) -> Path:
    """The file a configuration argument names (every command's, ``fcircnn.torch.build``'s).

    An existing path, or anything that looks like one (a ``.yaml``/``.yml`` suffix, a folder
    part), is taken as given (a missing file is then reported by the loader, with its name);
    anything else is a built-in name (:func:`builtin_path`).

    Raises
    ------
    ConfigError
        For a name that is neither a path nor a built-in configuration.
    """
    path = Path(name)
    if path.exists() or path.suffix in (".yaml", ".yml") or len(path.parts) > 1:
        return path
    return builtin_path(os.fspath(name))
