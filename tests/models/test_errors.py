"""Error reporting (:mod:`fcircnn.models.errors`): problems, values and labels as shown."""

from __future__ import annotations

import pytest

from fcircnn.models.config import (
    ConfigError,
    Problem,
)
from fcircnn.models.errors import describe_value, label, show


def test_problem_format() -> None:
    err = ConfigError("a.yaml", [Problem("x.y", "bad"), Problem("", "whole file")])
    assert str(err) == "a.yaml: x.y: bad\na.yaml: whole file"
    assert err.file == "a.yaml" and len(err.problems) == 2


@pytest.mark.parametrize(("value", "shown"), [
    (10 ** 29, "1" + "0" * 29), (-(10 ** 30) + 1, "-" + "9" * 30), (10 ** 30, "a 31-digit integer"),
    (-(10 ** 3999), "a 4,000-digit integer"), (1 << 20000, "a 6,021-digit integer"),
    (0, "0"), (True, "true")], ids=lambda v: v if isinstance(v, str) else "")
def test_show_names_a_huge_integer_by_its_digits(value: int, shown: str) -> None:
    # Python's str() refuses integers beyond 4,300 digits; a clipped number would mislead.
    assert show(value) == shown
    assert describe_value(value) == (shown if shown.startswith("a ") else
                                     f"a boolean ({shown})" if shown == "true" else
                                     f"the integer {shown}")


def test_label_escapes_what_a_terminal_would_run() -> None:
    assert label("conv1") == "conv1"
    assert label("c\x1b[31m2") == "'c\\x1b[31m2'"
    assert label("x" * 100) == show("x" * 100) and len(label("x" * 100)) == 80
