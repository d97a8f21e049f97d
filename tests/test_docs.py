"""The reference pages in docs/ cover what they document: every key of the configuration
schema (docs/network-file.md, docs/accelerator-file.md), every limit constant with its value,
every command and every long option of the command line (docs/commands.md); and the YAML
examples of the reference pages pass ``fcircnn check``."""

from __future__ import annotations

import argparse
import re
import typing
from pathlib import Path

import pytest
from pydantic import BaseModel

from fcircnn.cli import build_parser, main
from fcircnn.models import schema

DOCS = Path(__file__).resolve().parent.parent / "docs"
SCHEMA_PAGES = {"network-file.md": schema.NetworkConfig,
                "accelerator-file.md": schema.AcceleratorConfig}


def _page(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


def _models_in(annotation: object) -> list[type[BaseModel]]:
    """The BaseModel subclasses an annotation names, at any depth (unions, tuples,
    ``Annotated``)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found = []
    for arg in typing.get_args(annotation):
        found += _models_in(arg)
    return found


def _reachable(root: type[BaseModel]) -> list[type[BaseModel]]:
    """``root`` and every model its fields reach, in the order found."""
    seen: list[type[BaseModel]] = []
    todo = [root]
    while todo:
        model = todo.pop(0)
        if model in seen:
            continue
        seen.append(model)
        for field in model.model_fields.values():
            todo += _models_in(field.annotation)
    return seen


def _yaml_keys(model: type[BaseModel]) -> list[str]:
    """The keys a YAML file writes for ``model``'s fields (the alias where there is one)."""
    return [field.alias or name for name, field in model.model_fields.items()]


def test_the_walk_reaches_every_layer_type_and_nested_model():
    network = _reachable(schema.NetworkConfig)
    accelerator = _reachable(schema.AcceleratorConfig)
    assert {schema.InputShape, schema.ConvLayer, schema.FcLayer, schema.GapLayer,
            schema.RfftLayer, schema.IrfftLayer, schema.PoolConfig} <= set(network)
    assert {schema.DeviceConfig, schema.Resources, schema.CoreConfig} <= set(accelerator)
    assert "network" in _yaml_keys(schema.AcceleratorConfig)  # the alias of network_file


@pytest.mark.parametrize("page", sorted(SCHEMA_PAGES))
def test_every_schema_key_is_documented(page):
    text = _page(page)
    missing = sorted({f"{model.__name__}.{key}" for model in _reachable(SCHEMA_PAGES[page])
                      for key in _yaml_keys(model) if f"`{key}`" not in text})
    assert not missing, (f"docs/{page} does not mention these keys of the schema "
                         f"(fcircnn.models.schema) as `key`: {', '.join(missing)}")


def _numbers(line: str) -> set[int]:
    """The integers written in ``line`` (``65536`` or ``65,536``)."""
    return {int(n.replace(",", "")) for n in re.findall(r"\d+(?:,\d{3})*", line)}


def test_every_limit_constant_is_documented_with_its_value():
    limits = {name: getattr(schema, name) for name in schema.__all__ if name.startswith("MAX_")}
    assert limits, "fcircnn.models.schema exports no MAX_* constant"
    lines = [(page, line) for page in SCHEMA_PAGES for line in _page(page).splitlines()]
    problems = []
    for name, value in sorted(limits.items()):
        found = [(page, line) for page, line in lines if re.search(rf"\b{name}\b", line)]
        if not found:
            problems.append(f"{name} (= {value}) is in neither page")
        elif not any(value in _numbers(line) for _, line in found):
            pages = sorted({page for page, _ in found})
            problems.append(f"{name} is in {', '.join(pages)} but not on a line with its value "
                            f"{value}")
        # a row of a limits table, "| `MAX_X` | value | ...", states the value itself
        problems += [f"docs/{page}: the row of {name} says {cell.strip()!r}, not {value}"
                     for page, line in found
                     if (row := re.match(rf"\|\s*`{name}`\s*\|([^|]*)\|", line))
                     and value not in _numbers(cell := row[1])]
    assert not problems, "limits of fcircnn.models.schema: " + "; ".join(problems)


def _examples() -> dict[str, str]:
    """The YAML examples of the schema pages: every ```yaml block whose first line is
    ``# file: NAME``."""
    files = {}
    for page in SCHEMA_PAGES:
        for block in re.findall(r"```yaml\n(.*?)```", _page(page), flags=re.S):
            head = re.match(r"# file: (\S+)\n", block)
            if head:
                assert head[1] not in files, f"two examples are called {head[1]}"
                files[head[1]] = block
    return files


def test_the_reference_pages_have_examples():
    assert {"tiny.yaml", "example.yaml", "tiny_acc.yaml", "example_acc.yaml"} <= set(_examples())


@pytest.mark.parametrize("name", sorted(_examples()))
def test_every_yaml_example_passes_check(name, tmp_path, capsys):
    for file, text in _examples().items():  # an accelerator reads its network beside it
        (tmp_path / file).write_text(text, encoding="utf-8")
    code = main(["check", str(tmp_path / name)])
    err = capsys.readouterr().err
    assert code == 0, f"the example {name} of the docs fails fcircnn check:\n{err}"


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def _long_options(parser: argparse.ArgumentParser) -> list[str]:
    return [option for action in parser._actions for option in action.option_strings
            if option.startswith("--") and option != "--help"]


def _sections(text: str) -> dict[str, str]:
    """``## fcircnn NAME`` sections of ``text`` by name, each up to the next ``## ``."""
    parts = re.split(r"^## ", text, flags=re.M)
    return {m[1]: part for part in parts if (m := re.match(r"fcircnn (\S+)\s*\n", part))}


def _mentions(text: str, option: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", text) is not None


def test_every_command_and_long_option_is_documented():
    text = _page("commands.md")
    sections = _sections(text)
    commands = _subcommands()
    assert commands, "fcircnn.cli.build_parser has no subcommands"
    missing_sections = [name for name in commands if name not in sections]
    missing_options = {name: [o for o in _long_options(sub) if not _mentions(sections[name], o)]
                       for name, sub in commands.items() if name in sections}
    missing_options = {name: opts for name, opts in missing_options.items() if opts}
    missing_global = [o for o in _long_options(build_parser()) if not _mentions(text, o)]
    problems = []
    if missing_sections:
        problems.append("no '## fcircnn <name>' section for " + ", ".join(missing_sections))
    problems += [f"section 'fcircnn {name}' does not mention {', '.join(opts)}"
                 for name, opts in missing_options.items()]
    if missing_global:
        problems.append("the global options " + ", ".join(missing_global) + " are not mentioned")
    assert not problems, "docs/commands.md: " + "; ".join(problems)


def test_commands_md_documents_no_command_that_does_not_exist():
    extra = sorted(set(_sections(_page("commands.md"))) - set(_subcommands()))
    assert not extra, f"docs/commands.md has sections for commands fcircnn lacks: {extra}"


def _readme_tour() -> list[list[str]]:
    """The commands of the README's "A short tour", each as its arguments after ``fcircnn``
    (continuation lines joined, comments dropped)."""
    text = (DOCS.parent / "README.md").read_text(encoding="utf-8")
    block = re.search(r"## A short tour\n.*?```sh\n(.*?)```", text, flags=re.S)
    assert block, "README.md has no short tour"
    lines = [line for line in block[1].replace("\\\n", " ").splitlines()
             if line.strip() and not line.lstrip().startswith("#")]
    return [line.split()[1:] for line in lines]


def _tutorial_commands() -> list[list[str]]:
    """The ``$ fcircnn ...`` commands of docs/tutorial.md."""
    return [line[len("$ fcircnn "):].split()
            for line in _page("tutorial.md").splitlines() if line.startswith("$ fcircnn ")]


def test_the_readme_tour_and_the_tutorial_run_as_written(capsys):
    """Every command of the tour and the tutorial is one the CLI takes as written; the tour's
    first two run here, on built-ins, and print what the tour says they do."""
    tour, tutorial = _readme_tour(), _tutorial_commands()
    assert len(tour) == 6 and {argv[0] for argv in tutorial} >= {"check", "estimate", "sweep",
                                                                 "calibrate", "run", "deploy"}
    assert any("--on" in argv and "sim" in argv for argv in tutorial)  # the tutorial's RTL step
    parser = build_parser()
    for argv in tour + tutorial:
        parser.parse_args(argv)  # a flag the CLI lost would exit 2 here
    assert main([*tour[0], "-q"]) == 0 and "conv1a" in capsys.readouterr().out
    assert main([*tour[1], "-q"]) == 0 and "5774.4 GOP/s" in capsys.readouterr().out
