"""The board-side modules run on Python 3.10 (PYNQ 3.x images ship it).

The suite itself runs on 3.11 or newer, so this test reads the board's modules instead of
running them there: the host driver, the image format and ``predict`` with everything in
the package they import at module level (the closure a board run loads) must parse as
Python 3.10 (``ast.parse(feature_version=(3, 10))``) and must not use a standard-library name
that 3.10 lacks.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: Package name -> source folder (pyproject.toml's package-dir).
PACKAGES = {"fcircnn": "fcircnn", "fcircnn.arch": "arch", "fcircnn.hw": "hw",
            "fcircnn.gen": "gen", "fcircnn.sim": "sim", "fcircnn.models": "models"}
#: What a board run imports first.
BOARD_ENTRY = ("fcircnn.runtime.driver", "fcircnn.runtime.image", "fcircnn.runtime.predict",
               "fcircnn.runtime.board")
#: Standard-library names added after 3.10 (module, name or ``None`` for the module).
NEWER = {("tomllib", None), ("typing", "Self"), ("typing", "LiteralString"),
         ("typing", "Never"), ("typing", "assert_never"), ("typing", "reveal_type"),
         ("typing", "Required"), ("typing", "NotRequired"), ("typing", "override"),
         ("enum", "StrEnum"), ("datetime", "UTC"), ("asyncio", "TaskGroup"),
         ("asyncio", "timeout"), ("contextlib", "chdir"), ("hashlib", "file_digest"),
         ("itertools", "batched"), ("math", "exp2"), ("math", "cbrt"),
         ("operator", "call"), ("wsgiref", "types")}
BUILTINS_NEWER = {"ExceptionGroup", "BaseExceptionGroup"}


def source(module: str) -> Path | None:
    """The file of a first-party ``module`` (``None`` for a third-party one)."""
    for package in sorted(PACKAGES, key=len, reverse=True):
        if module == package or module.startswith(package + "."):
            rest = module[len(package):].lstrip(".").split(".") if module != package else []
            base = ROOT / PACKAGES[package]
            path = base.joinpath(*rest)
            if path.with_suffix(".py").is_file():
                return path.with_suffix(".py")
            if (path / "__init__.py").is_file():
                return path / "__init__.py"
    return None


def module_imports(tree: ast.Module, module: str) -> set[str]:
    """Modules ``module`` imports, at module level or inside its functions."""
    found = set()
    package = module if source(module).name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                name = f"{base}.{node.module}" if node.module else base
            else:
                name = node.module
            found.add(name)
            found |= {f"{name}.{alias.name}" for alias in node.names
                      if source(f"{name}.{alias.name}") is not None}
    return found


#: Imported only by the simulation target of ``predict`` (``on="sim"``), never on a board.
SIM_ONLY = ("fcircnn.sim", "fcircnn.hw", "fcircnn.simulate")


def board_closure() -> dict[str, Path]:
    """First-party modules a board run can import, by file."""
    todo, seen = list(BOARD_ENTRY), {}
    while todo:
        module = todo.pop()
        path = source(module)
        if path is None or module in seen or module.startswith(SIM_ONLY):
            continue
        seen[module] = path
        parts = module.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]  # parent packages
        todo += module_imports(ast.parse(path.read_text()), module)
    return seen


def test_the_board_closure_is_what_a_board_run_needs():
    closure = board_closure()
    assert set(BOARD_ENTRY) <= set(closure)
    # The board needs the golden contract (predict checks every layer against it), not the
    # CLI, the estimator or the Vivado flow.
    assert {"fcircnn.models.network", "fcircnn.models.quant"} <= set(closure)
    assert not {"fcircnn.cli", "fcircnn.gen.estimate", "fcircnn.gen.vivado"} & set(closure)


@pytest.mark.parametrize("module", sorted(board_closure()))
def test_a_board_module_is_python_3_10(module):
    path = board_closure()[module]
    text = path.read_text()
    try:
        tree = ast.parse(text, filename=str(path), feature_version=(3, 10))
    except SyntaxError as exc:
        pytest.fail(f"{path}:{exc.lineno}: not Python 3.10 syntax: {exc.msg}")
    used = set()
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                used.add((alias.name, None))
                aliases[alias.asname or alias.name] = alias.name
        elif isinstance(node, ast.ImportFrom) and not node.level:
            used |= {(node.module, alias.name) for alias in node.names}
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            used.add((aliases.get(node.value.id, node.value.id), node.attr))
        elif isinstance(node, ast.Name) and node.id in BUILTINS_NEWER:
            used.add(("builtins", node.id))
    # asyncio.wait_for raises asyncio.TimeoutError, the builtin only from 3.11 on.
    if ("asyncio", "wait_for") in used:
        for node in ast.walk(tree):
            if isinstance(node, ast.ExceptHandler) and isinstance(node.type, ast.Name):
                assert node.type.id != "TimeoutError", (
                    f"{path}:{node.lineno}: catch asyncio.TimeoutError (Python 3.10)")
    newer = sorted(f"{m}.{n}" if n else m for m, n in used & NEWER)
    newer += sorted(n for m, n in used if m == "builtins")
    assert not newer, f"{path}: not in Python 3.10: {', '.join(newer)}"


def test_run_py_says_which_layers_it_could_not_check(capsys):
    """An image laid out by liveness: the layers whose maps were reused are named as not
    checked, the clip is still bit-exact where it was checked."""
    from types import SimpleNamespace

    import numpy as np

    from fcircnn.runtime.board import _report
    from fcircnn.runtime.driver import LayerResult

    layers = [LayerResult("c1", 100, 90, 0, 1, 1, True, 0, None, checked=False),
              LayerResult("fc", 50, 40, 0, 1, 1, True, 0, None)]
    clip = SimpleNamespace(scores=np.array([0.2, 0.8]), mismatched=(), cycles=150,
                           layers=layers)
    doc = _report(SimpleNamespace(clips=[clip]), 200.0, 1)
    out = capsys.readouterr().out
    assert "bit-exact (1 layers not checked: their maps were reused)" in out
    assert "not checked (map reused)" in out.splitlines()[1] and "ok" in out.splitlines()[2]
    assert doc[0]["layers"][0]["checked"] is False
