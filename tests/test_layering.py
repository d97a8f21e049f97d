"""The import layering of the package (docs/architecture.md section 7, issue 15).

Bottom to top: the architecture's contract (``fcircnn.arch``) and the golden model with the
configuration (``fcircnn.models``); the hardware (``fcircnn.hw``); the generator, compiler and
estimators (``fcircnn.gen``); the host driver (``fcircnn.runtime.driver``); the testbenches and
simulator runner (``fcircnn.sim``); the CLI and its reports (every other ``fcircnn.*`` module).
The board runtime (``fcircnn.runtime``) spans layers module by module: its image format sits
under the compiler that writes it (2.5), its driver at 4, ``predict`` and ``board`` (which
compile clips, and simulate them off the board) with the CLI.
The PyTorch front end (``fcircnn.torch``) sits on the golden model alone, and nothing else
imports it, so that no command needs PyTorch.
A module imports only from its own layer or below, and no two modules import each other, even
through others (imports under ``if TYPE_CHECKING:`` are for annotations and do not count as a
cycle). The test reads the sources with :mod:`ast`, so it sees imports inside functions too.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Package folder -> import name (pyproject.toml's package-dir).
FOLDERS = {"arch": "fcircnn.arch", "models": "fcircnn.models", "hw": "fcircnn.hw",
           "gen": "fcircnn.gen", "sim": "fcircnn.sim", "fcircnn": "fcircnn",
           "fcircnn/runtime": "fcircnn.runtime",
           "fcircnn/cli": "fcircnn.cli", "fcircnn/torch": "fcircnn.torch",
           "constraints": "fcircnn.constraints"}
#: Rank of each layer; a module may import modules of its rank or lower.
#: ``fcircnn.torch`` (1.5) may import the golden model and the architecture's contract, nothing
#: above; that nothing imports it is checked on its own.
RANKS = {"fcircnn": 0, "fcircnn.arch": 0, "fcircnn.constraints": 0, "fcircnn.models": 1,
         "fcircnn.torch": 1.5, "fcircnn.hw": 2, "fcircnn.runtime.image": 2.5, "fcircnn.gen": 3,
         "fcircnn.runtime.driver": 4, "fcircnn.sim": 5, "cli": 6}


def _modules() -> dict[str, Path]:
    found = {}
    for folder, package in FOLDERS.items():
        for path in sorted((ROOT / folder).glob("*.py")):
            name = package if path.stem == "__init__" else f"{package}.{path.stem}"
            found[name] = path
    return found


def _layer(module: str) -> str:
    if module == "fcircnn" or module in RANKS:
        return module
    parts = module.split(".")
    package = ".".join(parts[:2])
    if package in RANKS:
        return package
    return "cli"  # fcircnn.cli, .report, .describe, .simulate, ...


def _under_type_checking(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            ids |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return ids


def _imports(name: str, path: Path, known: set[str]) -> list[tuple[str, bool]]:
    """``(module, at_run_time)`` for every import of ``fcircnn`` code in ``path``."""
    tree = ast.parse(path.read_text())
    typing_only = _under_type_checking(tree)
    package = name if path.stem == "__init__" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                       for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                out.append((target, id(node) not in typing_only))
    return out


def _graph() -> dict[str, list[tuple[str, bool]]]:
    modules = _modules()
    return {name: _imports(name, path, set(modules)) for name, path in modules.items()}


#: The package's facade: ``fcircnn.predict`` is the runtime's, imported on first use by the
#: package's ``__getattr__`` (never when ``fcircnn`` itself is imported:
#: :func:`test_importing_the_package_imports_no_layer_above_it`).
FACADE = {("fcircnn", "fcircnn.runtime.predict")}


def test_no_module_imports_a_higher_layer():
    upward = []
    for name, imports in _graph().items():
        for target, _ in imports:
            if (name, target) in FACADE:
                continue
            if RANKS[_layer(target)] > RANKS[_layer(name)]:
                upward.append(f"{name} ({_layer(name)}) imports {target} ({_layer(target)})")
    assert not upward, "lower layers import higher ones:\n" + "\n".join(sorted(set(upward)))


def test_the_hardware_imports_only_the_architecture_s_contract():
    """hw is built from arch alone (and Amaranth): every constant and rule it checks against is
    stated in arch, which the golden model and the compiler import as well."""
    graph = _graph()
    outside = sorted(f"{name} imports {target}" for name, imports in graph.items()
                     if _layer(name) == "fcircnn.hw"
                     for target, _ in imports if _layer(target) not in ("fcircnn.hw",
                                                                          "fcircnn.arch"))
    assert not outside, "hw imports beyond arch:\n" + "\n".join(outside)
    assert any(t.startswith("fcircnn.arch") for t, _ in graph["fcircnn.hw.common"])


#: A tile parameter checked against a limit of its own: every component checks its tiles with
#: ``hw.common.check_tiles``, whose limits are ``arch.geometry``'s (the descriptor's fields and
#: the channel tiles the datapath is built for).
_TILE_CHECK = r"check_positive\(\"T[nmdrc]\"[^)]*\)|check_positive\(name, value, \d+\)"


def test_every_tile_limit_is_the_architecture_s():
    import re

    from fcircnn.arch.geometry import MAX_CHANNEL_TILE, MAX_TILE
    from fcircnn.hw.common import TILE_LIMITS

    restated = [f"hw/{path.name}: {m.group(0)}" for path in sorted((ROOT / "hw").glob("*.py"))
                for m in re.finditer(_TILE_CHECK, path.read_text())]
    assert not restated, "check these with check_tiles:\n" + "\n".join(restated)
    assert TILE_LIMITS == {"Tn": MAX_CHANNEL_TILE, "Tm": MAX_CHANNEL_TILE, "Td": MAX_TILE,
                           "Tr": MAX_TILE, "Tc": MAX_TILE}
    assert sum("check_tiles(" in p.read_text() for p in (ROOT / "hw").glob("*.py")) >= 7


def test_every_channel_tile_rule_is_the_architecture_s():
    """No hardware module tests Tn or Tm for divisibility itself: each names its rule of
    ``arch.geometry.CHANNEL_RULES`` (``hw.common.check_channel_rule``)."""
    import re

    from fcircnn.arch.geometry import CHANNEL_RULES

    own = [f"hw/{path.name}: {m.group(0)}" for path in sorted((ROOT / "hw").glob("*.py"))
           for m in re.finditer(r"\b(Tn|Tm|tn|tm)\b *% *\w", path.read_text())]
    assert not own, "check these with check_channel_rule:\n" + "\n".join(own)
    used = {rule for path in (ROOT / "hw").glob("*.py")
            for rule in re.findall(r'check_channel_rule\("(\w+)"', path.read_text())}
    assert used <= set(CHANNEL_RULES) and len(used) >= 6


def test_nothing_outside_the_torch_front_end_imports_it():
    graph = _graph()
    assert any(name.startswith("fcircnn.torch.") for name in graph)  # the checker reads it
    users = sorted(f"{name} imports {target}" for name, imports in graph.items()
                   if _layer(name) != "fcircnn.torch"
                   for target, _ in imports if _layer(target) == "fcircnn.torch")
    assert not users, "only fcircnn.torch may import fcircnn.torch:\n" + "\n".join(users)


def test_no_import_cycles():
    edges = defaultdict(set)
    for name, imports in _graph().items():
        edges[name] |= {t for t, runtime in imports if runtime}
    cycles, state, stack = [], {}, []

    def visit(node: str) -> None:
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(edges[node]):
            if state.get(nxt) == "open":
                cycles.append(" -> ".join([*stack[stack.index(nxt):], nxt]))
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = "done"

    for node in sorted(edges):
        if node not in state:
            visit(node)
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_the_checker_sees_what_it_must():
    # Guard against a checker that finds nothing: known edges of the package are found.
    graph = _graph()
    assert ("fcircnn.models.config", True) in graph["fcircnn.cli"] or any(
        t.startswith("fcircnn.models") for t, _ in graph["fcircnn.cli"])
    assert any(t == "fcircnn.hw.accelerator" for t, _ in graph["fcircnn.gen.generate"])
    assert _layer("fcircnn.report") == "cli"
    assert _layer("fcircnn.runtime.driver") == "fcircnn.runtime.driver"
    assert _layer("fcircnn.runtime.predict") == "cli"


#: Longest function allowed in the hardware (docs/architecture.md section 7: an ``elaborate``
#: past about 150 lines is several components).
MAX_HW_FUNCTION_LINES = 160


def test_hardware_functions_are_short_enough_to_read_at_once():
    root = Path(__file__).resolve().parent.parent / "hw"
    long = []
    for path in sorted(root.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_HW_FUNCTION_LINES:
                    long.append(f"hw/{path.name}:{node.lineno} {node.name}: {lines} lines")
    assert not long, "split these into components:\n" + "\n".join(long)
    assert any(root.glob("engine_*.py"))  # the checker reads the hardware


def test_importing_the_package_imports_no_layer_above_it(tmp_path):
    """The facade's import runs on first use of ``fcircnn.predict`` only: ``import fcircnn``
    (which the board's Python and every layer do) loads nothing of the layers above."""
    code = ("import sys, fcircnn; loaded = [m for m in sys.modules if m.startswith('fcircnn.')]; "
            "print(loaded); assert not loaded, loaded; "
            "from fcircnn.runtime.predict import predict; assert fcircnn.predict is predict")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=tmp_path)
