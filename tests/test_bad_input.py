"""Bad input through every command (issue 14): a corpus by class, run in-process through
:func:`fcircnn.cli.main` (and one case of each class again as a real ``python -m fcircnn.cli``
process: the exit status and stderr a shell sees), and property-based malformed YAML and
arrays run in-process.

Every case must end with exit code 2 and one ``error:`` message naming the file or flag and
the problem, never a traceback, within a bounded time. The corpus is
:mod:`tests.bad_input_corpus`; its size and result are recorded in ``bench/README.md``.
"""

from __future__ import annotations

import io
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fcircnn.cli import main

sys.path.insert(0, str(Path(__file__).parent))
from bad_input_corpus import CASES, TINY, write_files

#: Longest a refusal may take, in seconds (the slowest case takes about 0.5 s here).
TIME_LIMIT = 10.0


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("corpus")
    write_files(folder)
    return folder


def test_corpus_covers_every_command_and_class():
    commands = {c.argv[0] for c in CASES if c.argv}
    assert {"check", "golden", "compile", "generate", "estimate", "sim", "sweep"} <= commands
    classes = {c.id.split("-")[0] for c in CASES}
    assert classes == {"yaml", "weights", "input", "size", "agree", "flags", "range"}
    assert len(CASES) >= 170
    assert len({c.id for c in CASES}) == len(CASES)


def _refused_cleanly(case, code: int, err: str, took: float, corpus: Path) -> None:
    assert code == 2, f"exit {code}\n{err}"
    assert "Traceback" not in err and "internal error" not in err, err
    assert err.startswith(("error: ", "usage: ")), err
    for fragment in case.fragments:
        assert fragment in err, f"{fragment!r} not in\n{err}"
    assert took < TIME_LIMIT, f"took {took:.1f} s"
    assert not (corpus / "out").exists() or not any((corpus / "out").rglob("*.*")), \
        "a refused command wrote output"


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_refused_cleanly(case, corpus, capsys):
    argv = [a.replace("{d}", str(corpus)) for a in case.argv]
    start = time.perf_counter()
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's usage errors
        code = exc.code
    took = time.perf_counter() - start
    _refused_cleanly(case, code, capsys.readouterr().err, took, corpus)


#: The first case of each class, also run as its own process.
PROCESS_CASES = list({c.id.split("-")[0]: c for c in reversed(CASES)}.values())


@pytest.mark.parametrize("case", PROCESS_CASES, ids=[c.id for c in PROCESS_CASES])
def test_a_real_process_refuses_bad_input_the_same_way(case, corpus):
    argv = [a.replace("{d}", str(corpus)) for a in case.argv]
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "fcircnn.cli", *argv], capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)
    _refused_cleanly(case, proc.returncode, proc.stderr, time.perf_counter() - start, corpus)


# --------------------------------------------------------------------------------------------
# Property-based: malformed YAML and arrays never give anything but exit 0 or 2.


def _examples(n: int):
    """Hypothesis settings: ``n`` examples, derandomized (the same examples on every run)."""
    return settings(max_examples=n, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


def _run_in_process(argv: list[str], capsys) -> tuple[int, str]:
    code = main(argv)
    err = capsys.readouterr().err
    return code, err


def _clean(code: int, err: str, file: str) -> None:
    assert code in (0, 2), err
    if code == 2:
        assert err.startswith("error: ") and file in err, err
        assert "internal error" not in err


_yaml_scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70),
                          st.floats(allow_nan=True), st.text(max_size=20))
_yaml_values = st.recursive(_yaml_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=20)


@_examples(60)
@given(data=st.dictionaries(st.sampled_from(["name", "input", "classes", "block_size", "layers",
                                             "cores", "network", "device", "clock_mhz", "x"]),
                            _yaml_values, max_size=6))
def test_random_documents(data, tmp_path, capsys):
    path = tmp_path / "random.yaml"
    path.write_text(yaml.safe_dump(data))
    for command in ("check", "golden"):
        _clean(*_run_in_process([command, str(path), *(["-q"] if command == "golden" else [])],
                                capsys), "random.yaml")


@_examples(80)
@given(cut=st.integers(0, len(TINY)), junk=st.binary(max_size=12),
       where=st.integers(0, len(TINY)))
def test_mutated_network_file(cut, junk, where, tmp_path, capsys):
    raw = TINY.encode()[:cut] + junk + TINY.encode()[where:]
    path = tmp_path / "mutated.yaml"
    path.write_bytes(raw)
    _clean(*_run_in_process(["check", str(path)], capsys), "mutated.yaml")


_dtypes = st.sampled_from([np.float64, np.float32, np.int8, np.int64, np.uint16, np.complex64,
                           np.bool_, np.float16])


@_examples(40)
@given(dtype=_dtypes, shape=st.lists(st.integers(0, 5), max_size=5),
       fill=st.sampled_from([0.0, 1.0, -1e300, np.nan, np.inf, 3e4, 1e7]))
def test_random_input_arrays(dtype, shape, fill, tmp_path, capsys):
    net = tmp_path / "tiny.yaml"
    net.write_text(TINY)
    with np.errstate(all="ignore"):
        array = np.full(shape, fill).astype(dtype)
    buf = io.BytesIO()
    np.save(buf, array)
    (tmp_path / "x.npy").write_bytes(buf.getvalue())
    code, err = _run_in_process(["golden", str(net), "-q", "--mode", "int", "--input",
                                 str(tmp_path / "x.npy")], capsys)
    _clean(code, err, "x.npy")
    assert code == 2  # no random shape is (3, 4, 8, 8)


# --------------------------------------------------------------------------------------------
# The guard of last resort


def test_internal_error_is_one_line_and_a_file(monkeypatch, capsys, tmp_path):
    import fcircnn.cli as cli

    def boom(args):
        raise ZeroDivisionError("simulated bug")

    monkeypatch.setattr(cli.check, "cmd_check", boom)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", None)
    code = main(["check", "c3d"])
    err = capsys.readouterr().err
    assert code == 1
    assert err.count("\n") == 1 and "internal error, this is a bug" in err
    assert "ZeroDivisionError: simulated bug" in err and "Traceback" not in err
    crash = next(tmp_path.glob("fcircnn-crash-*.txt"))
    assert "Traceback" in crash.read_text() and str(crash) in err


def test_debug_prints_the_traceback(monkeypatch, capsys):
    import fcircnn.cli as cli

    monkeypatch.setattr(cli.check, "cmd_check", lambda args: 1 / 0)
    assert main(["--debug", "check", "c3d"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and "ZeroDivisionError" in err
