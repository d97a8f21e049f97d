"""Configuration errors: one problem per line, naming the file, the key path and what is allowed.

:class:`ConfigError` carries every :class:`Problem` found in one file. :func:`validate_model`
validates YAML-shaped data against a pydantic model of the schema and translates pydantic's
errors into key paths (``layers[3] (conv2a).kernel``) and messages that name the allowed values;
the helpers :func:`show` and :func:`describe_value` render user values for those messages,
clipped so that a huge value never floods the terminal.
"""

from __future__ import annotations

import difflib
import math
import os
import re
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticCustomError

__all__ = ["ConfigError", "Problem", "Problems", "allowed_keys", "describe_value", "fail",
           "label", "show", "validate_model"]


@dataclass(frozen=True)
class Problem:
    """One problem in a configuration file.

    Attributes
    ----------
    key : str
        Key path of the offending value, e.g. ``"layers[3] (conv2a).kernel"`` or
        ``"cores[0] (main).tm"``; ``"line 3, column 5"`` for YAML syntax errors; empty when the
        problem concerns the whole file (e.g. the file does not exist).
    message : str
        What is wrong, naming the allowed values or range.
    """

    key: str
    message: str

    def format(self, file: str) -> str:
        """Return the one-line form ``"<file>: <key>: <message>"`` (key omitted when empty)."""
        if self.key:
            return f"{file}: {self.key}: {self.message}"
        return f"{file}: {self.message}"


class ConfigError(Exception):
    """One or more problems in one configuration file.

    Parameters
    ----------
    file : str or os.PathLike
        The file the problems are in, as the user named it.
    problems : iterable of Problem
        At least one problem.

    Notes
    -----
    ``str(err)`` has one line per problem: ``"<file>: <key>: <message>"``.
    """

    def __init__(self, file: str | os.PathLike[str], problems: Iterable[Problem]) -> None:
        self.file: str = os.fspath(file)
        self.problems: list[Problem] = list(problems)
        super().__init__(str(self))

    def __str__(self) -> str:
        return "\n".join(p.format(self.file) for p in self.problems)


class Problems(ValueError):
    """Carrier for semantic problems raised from a model validator (several at once)."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__("; ".join(f"{p.key}: {p.message}" for p in problems))


def fail(message: str) -> PydanticCustomError:
    return PydanticCustomError("fcircnn", message.replace("{", "{{").replace("}", "}}"))


def show(value: object) -> str:
    """Render a YAML value for messages (YAML spelling for booleans and null).

    Long values are clipped; an integer too long to print whole is named by its digit count
    (``"a 20,000-digit integer"``), never cut into a misleading shorter number.
    """
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return "null"
    if isinstance(value, str):
        return _clip(repr(value))
    if isinstance(value, int):
        digits = _digits(value)
        return repr(value) if digits <= _SHOW_DIGITS else f"a {digits:,}-digit integer"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        head = ", ".join(show(v) for v in value[:_SHOW_ITEMS])
        more = f", ... ({len(value)} entries)" if len(value) > _SHOW_ITEMS else ""
        return _clip(f"[{head}{more}]")
    return _clip(repr(value))


#: Entries of a list, characters of a value and digits of an integer a message shows at most.
_SHOW_ITEMS, _SHOW_CHARS, _SHOW_DIGITS = 6, 80, 30


def _digits(value: int) -> int:
    """Decimal digits of ``value`` (Python refuses ``str`` beyond 4,300 digits)."""
    magnitude = abs(value)
    digits = max(1, int((magnitude.bit_length() - 1) * math.log10(2)))
    while 10 ** digits <= magnitude:
        digits += 1
    return digits


def label(name: str) -> str:
    """A user's name (a layer's, a key's) as a key path shows it: as written when it is
    short and printable, else quoted with its control characters escaped and clipped."""
    return name if name.isprintable() and len(name) <= _SHOW_CHARS // 2 else show(name)


def _clip(text: str) -> str:
    return text if len(text) <= _SHOW_CHARS else text[:_SHOW_CHARS - 3] + "..."


def describe_value(value: object) -> str:
    """Describe a wrongly typed YAML value: ``"the string '3'"``, ``"a boolean (true)"``."""
    if isinstance(value, bool):
        return f"a boolean ({show(value)})"
    if value is None:
        return "null"
    if isinstance(value, str):
        return f"the string {show(value)}"
    if isinstance(value, float):
        if not math.isfinite(value):
            return f"the float {value!r}"
        if value.is_integer():
            return f"the float {value!r} (write {int(value)})"
        return f"a number with a fraction ({value!r})"
    if isinstance(value, int):
        shown = show(value)
        return f"the integer {shown}" if shown[0] in "-0123456789" else shown
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return f"a list ({show(value)})"
    return f"{type(value).__name__} {_clip(repr(value))}"


def _unwrap(tp: Any) -> Any:
    while True:
        origin = typing.get_origin(tp)
        if origin is Annotated:
            tp = typing.get_args(tp)[0]
        elif origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(tp) if a is not type(None)]
            if len(args) == 1:
                tp = args[0]
            else:
                return tp
        else:
            return tp


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def _field_for(model: type[BaseModel], key: str) -> Any:
    for name, info in model.model_fields.items():
        if (info.alias or name) == key:
            return info.annotation
    return None


def allowed_keys(model: type[BaseModel]) -> list[str]:
    return [info.alias or name for name, info in model.model_fields.items()]


def _walk(root: type[BaseModel], raw: Any, loc: Sequence[int | str]) -> tuple[str, Any]:
    """Turn a pydantic ``loc`` into a key path; also return the type reached."""
    tp: Any = root
    key = ""
    for elem in loc:
        tp = _unwrap(tp)
        if isinstance(elem, int):
            args = typing.get_args(tp)
            tp = args[0] if args else None
            raw = raw[elem] if isinstance(raw, list) and 0 <= elem < len(raw) else None
            key += f"[{elem}]"
            if isinstance(raw, dict) and isinstance(raw.get("name"), str):
                key += f" ({label(raw['name'])})"
            continue
        if typing.get_origin(tp) in (typing.Union, types.UnionType):
            members = [m for m in typing.get_args(tp) if _is_model(m)]
            tagged = [m for m in members if elem in typing.get_args(
                _unwrap(m.model_fields["type"].annotation)) if "type" in m.model_fields]
            if tagged:  # discriminator tag inserted by pydantic, not a key of the file
                tp = tagged[0]
                continue
        if _is_model(tp):
            tp = _field_for(tp, elem)
        else:
            tp = None
        raw = raw.get(elem) if isinstance(raw, dict) else None
        key += f".{label(str(elem))}" if key else label(str(elem))
    return key, _unwrap(tp)


def _raw_key(raw: Any, loc: Sequence[int | str], key: Any) -> Any:
    """The key as the file wrote it: pydantic reports YAML's ``true:`` as the integer 1 and
    ``~:`` (null) as the string ``'None'``."""
    for elem in loc:
        if isinstance(raw, dict):
            if elem in raw:
                raw = raw[elem]  # else a discriminator tag pydantic inserted: not in the file
        elif isinstance(raw, list) and isinstance(elem, int) and 0 <= elem < len(raw):
            raw = raw[elem]
        else:
            return key
    if isinstance(raw, dict):
        written = [k for k in raw if not isinstance(k, str) and (k == key or str(k) == key)]
        if written:
            return written[0]
    return key


_TYPE_NAMES = {
    "int_type": "an integer",
    "bool_type": "true or false",
    "string_type": "a string",
    "float_type": "a number",
    "list_type": "a list",
    "tuple_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "literal_error": None,
}


#: Plain scalars YAML 1.1 reads as base-60 or octal numbers (models.yaml_doc leaves them text).
_SEXAGESIMAL = re.compile(r"[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?")
_LEADING_ZERO = re.compile(r"[-+]?0[0-9_]+")


def _yaml_number_hint(value: Any, integer: bool) -> str:
    """A hint for a number YAML 1.1 reads as text (``2e2``, ``1e-3``: an exponent needs a
    dot and a signed exponent there), else ``""``; ``integer``: the key takes an integer."""
    if not isinstance(value, str):
        return ""
    if _SEXAGESIMAL.fullmatch(value):
        return (f" (YAML 1.1 reads {value} as base 60; this loader leaves it text: write the "
                "number itself)")
    if _LEADING_ZERO.fullmatch(value):
        return (f" (YAML 1.1 reads {value} as octal; this loader leaves it text: write it "
                "without the leading zero)")
    if "e" not in value.lower():
        return ""
    try:
        number = float(value)
    except ValueError:
        return ""
    if not math.isfinite(number) or (integer and not number.is_integer()):
        return ""
    if integer:
        return f" (YAML reads {value} as text; write {int(number)})"
    text = repr(number)
    if "e" in text:
        mantissa, exponent = text.split("e")
        text = (f"{mantissa if '.' in mantissa else mantissa + '.0'}e"
                f"{exponent if exponent[0] in '+-' else '+' + exponent}")
    return (f" (YAML reads {value} as text: a number with an exponent needs a dot and a "
            f"signed exponent, e.g. {text})")


def _problems_from(exc: ValidationError, root: type[BaseModel], raw: Any) -> list[Problem]:
    """Translate a pydantic ValidationError into key-path problems."""
    problems: list[Problem] = []
    for err in exc.errors(include_url=False):
        kind, loc, value, ctx = err["type"], err["loc"], err.get("input"), err.get("ctx") or {}
        if kind == "value_error" and isinstance(ctx.get("error"), Problems):
            problems.extend(ctx["error"].problems)
            continue
        if kind in ("union_tag_invalid", "union_tag_not_found"):
            loc = (*loc, "type")
        if kind == "invalid_key":  # a non-string key: loc ends with the key itself
            parent, _ = _walk(root, raw, loc[:-1])
            written = _raw_key(raw, loc[:-1], loc[-1])
            key = f"{parent}.{show(written)}" if parent else show(written)
            problems.append(Problem(key, "keys must be strings, not " + (
                f"a boolean (YAML reads {show(written)} as one: quote the key)"
                if isinstance(written, bool) else describe_value(written))))
            continue
        key, _ = _walk(root, raw, loc)
        if kind == "extra_forbidden":
            _, parent = _walk(root, raw, loc[:-1])
            allowed = allowed_keys(parent) if _is_model(parent) else []
            hint = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
            tip = f" (did you mean {hint[0]!r}?)" if hint else ""
            message = f"unknown key{tip}; allowed keys: {', '.join(allowed)}"
        elif kind == "missing":
            message = "required key missing"
        elif kind == "union_tag_invalid":
            tags = ctx.get("expected_tags", "").replace("'", "")
            message = f"must be one of {tags}, not {show(ctx.get('tag'))}"
        elif kind == "union_tag_not_found":
            message = "required key missing (layer type: conv, fc or gap)"
        elif kind == "literal_error":
            expected = str(ctx.get("expected", "")).replace("'", "")
            message = f"must be one of {expected}, not {show(value)}"
        elif kind in _TYPE_NAMES:
            message = f"must be {_TYPE_NAMES[kind]}, not {describe_value(value)}"
            if kind == "float_type" and isinstance(value, int) and not isinstance(value, bool):
                message = f"must be a number a float can hold, not {describe_value(value)}"
            if kind in ("int_type", "float_type"):
                message += _yaml_number_hint(value, kind == "int_type")
        elif kind == "greater_than_equal":
            message = f"must be >= {ctx['ge']}, not {show(value)}"
        elif kind == "greater_than":
            message = f"must be > {ctx['gt']}, not {show(value)}"
        elif kind == "less_than_equal":
            message = f"must be <= {ctx['le']}, not {show(value)}"
        elif kind == "less_than":
            message = f"must be < {ctx['lt']}, not {show(value)}"
        elif kind == "too_short":
            n = ctx.get("min_length")
            message = (f"must have at least {n} {'entry' if n == 1 else 'entries'}, not "
                       f"{ctx.get('actual_length')}")
        elif kind == "too_long":
            message = (f"must have at most {ctx.get('max_length')} entries, not "
                       f"{ctx.get('actual_length')}")
        else:
            message = err["msg"]
        problems.append(Problem(key, message))
    return problems


def validate_model(model: type[BaseModel], data: dict[str, Any], file: str) -> Any:
    """``model`` validated from ``data``, or :class:`ConfigError` against ``file``."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(file, _problems_from(exc, model, data)) from None
