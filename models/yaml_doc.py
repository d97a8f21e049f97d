"""Reading a configuration file's YAML as a plain, bounded document.

Configuration files are small hand-written documents. Before anything is built from a file,
:func:`read_document` checks that it is one: at most :data:`MAX_FILE_BYTES` of UTF-8 text,
nesting at most :data:`MAX_DEPTH` deep, at most :data:`MAX_NODES` values once every alias is
expanded (a "billion laughs" document of a few hundred bytes expands to 10^9), and no alias
that refers to the collection it sits in (``layers: &a [*a]``). The check walks PyYAML's event
stream iteratively, so it takes time proportional to the file's length whatever the document
would expand to, and it never recurses. Only then is the document constructed, with the safe
loader and duplicate mapping keys rejected.
"""

from __future__ import annotations

import os
import re
import sys
import typing
from pathlib import Path
from typing import Any

import yaml

from .files import special_file_kind

__all__ = ["MAX_DEPTH", "MAX_FILE_BYTES", "MAX_NODES", "DocumentError", "read_document"]

#: Largest configuration file read, in bytes (the shipped files are below 4 KiB).
MAX_FILE_BYTES = 1 << 20
#: Deepest nesting of mappings and lists (the schema needs 4: ``cores[0].max_kernel[0]``).
MAX_DEPTH = 32
#: Most values (scalars, mappings, lists) in the document with every alias expanded.
MAX_NODES = 100_000


class DocumentError(ValueError):
    """The file is not a plain YAML document within the limits.

    Attributes
    ----------
    where : str
        ``"line L, column C"`` of the problem, or empty for the whole file.
    message : str
        What is wrong, naming the limit.
    """

    def __init__(self, where: str, message: str) -> None:
        self.where, self.message = where, message
        super().__init__(f"{where}: {message}" if where else message)


class _UniqueKeyLoader(yaml.SafeLoader):
    """Safe loader that rejects duplicate mapping keys, and reports a scalar it cannot
    construct (an integer beyond Python's digit limit, a date that does not exist) at its line.
    """

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep=deep)
        except DocumentError:
            raise
        except (ValueError, OverflowError) as exc:
            raise _unconstructible(node, exc) from None


def _unconstructible(node: yaml.Node, exc: Exception) -> DocumentError:
    """The error for a scalar ``node`` whose constructor raised ``exc``."""
    value = str(node.value)
    shown = repr(value) if len(value) <= 40 else f"{value[:20]!r}...{value[-8:]!r}"
    if node.tag == "tag:yaml.org,2002:int":
        digits = sum(c.isdigit() for c in value)
        return DocumentError(_at(node.start_mark),
                             f"the number {shown} is too long ({digits} digits; Python reads "
                             f"at most {sys.get_int_max_str_digits()}); no setting takes a "
                             "number this large")
    kind = node.tag.rsplit(":", 1)[-1]
    return DocumentError(_at(node.start_mark), f"cannot read the {kind} {shown}: {exc}")


def _construct_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode,
                       deep: bool = False) -> dict[Any, Any]:
    # Only keys written in this mapping count; ``<<: *anchor`` merges may be overridden. One
    # ``<<`` a mapping: a second is a duplicate key (loaders disagree on which one wins).
    seen: dict[Any, yaml.Node] = {}
    merge: yaml.Node | None = None
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            if merge is not None:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark,
                    f"duplicate merge key '<<' (first at line {merge.start_mark.line + 1}; "
                    "merge several mappings with one: <<: [*a, *b])", key_node.start_mark)
            merge = key_node
            continue
        key = loader.construct_object(key_node, deep=deep)
        if isinstance(key, typing.Hashable):
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark,
                    f"duplicate key {key!r} (first at line {seen[key].start_mark.line + 1})",
                    key_node.start_mark)
            seen[key] = key_node
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)

#: Plain scalars read as numbers: YAML 1.1's forms without its sexagesimal (``1:30`` is 90)
#: and leading-zero octal (``010`` is 8) integers and floats, which turn a typo into a silently
#: different value; such a scalar stays a string, which the schema refuses by its key.
_INT = re.compile(r"^[-+]?(?:0|[1-9][0-9_]*|0x[0-9a-fA-F_]+|0b[01_]+)$")
_FLOAT = re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?
                    |\.[0-9_]+(?:[eE][-+][0-9]+)?
                    |[-+]?\.(?:inf|Inf|INF)
                    |\.(?:nan|NaN|NAN))$""", re.X)
_UniqueKeyLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers
            if tag not in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
_UniqueKeyLoader.add_implicit_resolver("tag:yaml.org,2002:int", _INT, list("-+0123456789"))
_UniqueKeyLoader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT,
                                       list("-+0123456789."))


def _at(mark: yaml.Mark | None) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""


def _check_events(text: str) -> None:
    """Walk the event stream: depth, expanded size and self-referring aliases (iterative)."""
    # Per open collection: [expanded size so far, anchor or None].
    stack: list[list[Any]] = []
    sizes: dict[str, int] = {}  # anchor -> expanded size of its (closed) node
    total = 0

    def add(size: int, anchor: str | None, mark: yaml.Mark) -> None:
        nonlocal total
        if anchor is not None:
            sizes[anchor] = size
        if stack:
            stack[-1][0] += size
        else:
            total += size
        if total + sum(s for s, _ in stack) > MAX_NODES:
            raise DocumentError(_at(mark), f"the document expands to more than {MAX_NODES} "
                                           "values (aliases are counted as expanded); a "
                                           "configuration file is far smaller")

    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.CollectionStartEvent):
            if len(stack) >= MAX_DEPTH:
                raise DocumentError(_at(event.start_mark),
                                    f"nested more than {MAX_DEPTH} levels deep")
            stack.append([1, event.anchor])
        elif isinstance(event, yaml.CollectionEndEvent):
            size, anchor = stack.pop()
            add(size, anchor, event.start_mark)
        elif isinstance(event, yaml.ScalarEvent):
            add(1, event.anchor, event.start_mark)
        elif isinstance(event, yaml.AliasEvent):
            if event.anchor not in sizes:
                if any(anchor == event.anchor for _, anchor in stack):
                    raise DocumentError(_at(event.start_mark),
                                        f"alias *{event.anchor} refers to the list or mapping "
                                        "it is part of (a recursive document)")
                raise DocumentError(_at(event.start_mark),
                                    f"alias *{event.anchor} has no anchor before it")
            add(sizes[event.anchor], None, event.start_mark)


def _syntax_error(exc: yaml.YAMLError) -> DocumentError:
    if not isinstance(exc, yaml.MarkedYAMLError):
        return DocumentError("", f"YAML error: {exc}")
    mark = exc.problem_mark or exc.context_mark
    context = exc.context or ""
    if context and exc.context_mark is not None and exc.context_mark is not mark:
        context += f" ({_at(exc.context_mark)})"
    what = ": ".join(s for s in (context, exc.problem) if s)
    return DocumentError(_at(mark), f"YAML syntax error: {what}")


def _open_regular(path: str | Path) -> typing.BinaryIO:
    """``path`` opened for reading if it is a regular file (links followed) or a folder (the
    open then raises :class:`IsADirectoryError`); anything else is refused unopened."""
    kind = special_file_kind(os.stat(path).st_mode)
    if kind:
        raise DocumentError("", f"{kind}, not a regular file; a configuration file must be a "
                                "file")
    return open(path, "rb")


def read_document(path: str | Path) -> Any:
    """Read the YAML document in ``path`` (UTF-8, within the limits of this module).

    Returns
    -------
    object
        The constructed document (dicts, lists, scalars).

    Raises
    ------
    FileNotFoundError, IsADirectoryError, PermissionError, OSError
        When the file cannot be read.
    DocumentError
        The file is not a regular file (a FIFO, a device: refused before it is opened, as
        reading it could block forever), too large, not UTF-8 text, not YAML, deeper or larger
        than the limits, has a recursive alias, a duplicate mapping key or a value that cannot
        be constructed (an integer of more digits than Python converts).
    """
    with _open_regular(path) as f:
        raw = f.read(MAX_FILE_BYTES + 1)
    if len(raw) > MAX_FILE_BYTES:
        raise DocumentError("", f"larger than {MAX_FILE_BYTES // 1024} KiB; a configuration "
                                "file is a few KiB of YAML")
    if raw[:2] in (b"\xff\xfe", b"\xfe\xff"):
        raise DocumentError("", "UTF-16 text; configuration files must be UTF-8")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DocumentError("", f"not UTF-8 text (byte {exc.start}: {exc.reason}); is it a "
                                "YAML file?") from None
    if "\x00" in text:
        raise DocumentError("", "contains NUL bytes: a binary file, not YAML text")
    try:
        _check_events(text)
        return yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise _syntax_error(exc) from None
