"""Command line interface: ``fcircnn <command> ...``.

Bad input (configuration, weights, input files, flags) ends with one clear message on stderr
and exit code 2, never a traceback, and before any output is written where it can be checked
up front; a folder of outputs is written whole or not at all. A closed stdout (``| head``)
ends the command quietly with exit code 141.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from fcircnn import __version__

from . import (
    calibrate,
    check,
    compile,
    deploy,
    estimate,
    generate,
    golden,
    importing,
    project,
    run,
    sim,
    sweep,
)
from .common import _EXTRA_OF, EXIT_BAD_INPUT, Unavailable, UserError

__all__ = ["COMMANDS", "EXIT_BAD_INPUT", "EXIT_BROKEN_PIPE", "Unavailable", "UserError",
           "build_parser", "main"]

#: The command modules, in the order ``fcircnn --help`` lists them: each has ``add(sub)``,
#: which adds its parser with its handler.
COMMANDS = (golden, check, compile, generate, estimate, sim, project, importing, calibrate,
            run, deploy, sweep)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fcircnn",
        description="Generator of FPGA accelerators for block-circulant 3D CNNs computed in "
                    "the frequency domain.",
    )
    parser.add_argument("--version", action="version", version=f"fcircnn {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help="print the full traceback of an internal error")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.add(sub)
    return parser


def _internal_error(exc: BaseException, debug: bool) -> int:
    """Report an exception nobody expected: one line saying it is a bug and where the full
    traceback went (``--debug`` prints it instead); exit code 1."""
    import tempfile
    import traceback

    text = "".join(traceback.format_exception(exc))
    if debug:
        sys.stderr.write(text)
        where = "is above"
    else:
        try:
            fd, path = tempfile.mkstemp(prefix="fcircnn-crash-", suffix=".txt")
            with os.fdopen(fd, "w") as f:
                f.write(f"fcircnn {__version__}, argv {sys.argv!r}\n{text}")
            where = f"is in {path} (rerun with --debug to print it)"
        except OSError:
            where = "was not saved (cannot write a temporary file; rerun with --debug)"
    first = (str(exc).splitlines() or [""])[0][:200]
    print(f"fcircnn: internal error, this is a bug: {type(exc).__name__}: {first}; the full "
          f"traceback {where}", file=sys.stderr)
    return 1


#: Exit code when the reader of stdout goes away (``fcircnn check c3d | head -1``): 128 +
#: SIGPIPE, what a command the signal ends reports; nothing is printed.
EXIT_BROKEN_PIPE = 141


def _stdout_closed() -> int:
    """Quietly end a command whose stdout was closed: stdout then points at the null device,
    so the interpreter's last flush does not fail again (the recipe of the Python docs, signal
    module, "Note on SIGPIPE"); :data:`EXIT_BROKEN_PIPE`."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return EXIT_BROKEN_PIPE


def main(argv: Sequence[str] | None = None) -> int:
    from fcircnn.models.config import ConfigError
    from fcircnn.models.files import OutputFileError

    args = build_parser().parse_args(argv)
    try:
        code = args.func(args)
        sys.stdout.flush()  # a closed stdout shows here, not in the interpreter's exit
        return code
    except BrokenPipeError:
        return _stdout_closed()
    except (ConfigError, UserError, OutputFileError) as exc:
        # OutputFileError: a result file that could not be written after the up-front checks
        # (a full disk, a folder changed meanwhile); the message names the file
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Unavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except ModuleNotFoundError as exc:  # an optional extra a code path needed after all
        top = (exc.name or "").split(".")[0]
        if top not in _EXTRA_OF:
            return _internal_error(exc, args.debug)
        extra = _EXTRA_OF[top]
        print(f"error: this needs the [{extra}] extra ({top} is not installed): pip install "
              f"'fcircnn[{extra}]'", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        return _internal_error(exc, args.debug)
