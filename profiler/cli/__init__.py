"""Command line: ``pinprof VERB ...`` (also ``python -m profiler VERB ...``), one module per verb.

Holds: the verbs (``profile``, ``tune``, ``run``, ``nsys``, ``nsys_import``, ``nsys_compare``, ``diagnose``, ``compare``, ``plot``,
``trace``, ``bandwidth``, ``merge``), each ``add(sub)`` and ``run(args, argv) -> int``
(``profiler.cli.args.Verb``), and ``main``. May import every other subpackage but ``bench``, only inside a
verb's ``run``, so that ``--help`` and the reading verbs start without torch.

Exit codes: 0 done; 2 a bad value (argparse's usage errors, and every ``PinprofError`` that is not a
failed run), with one line naming it; 1 a run whose loop failed (its partial report written);
130 Ctrl-C, 143 SIGTERM. Any other exception is a bug: it is shown with its traceback and a line
asking to report it.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Sequence
from typing import NoReturn

from profiler._version import __version__
from profiler.cli import (
    bandwidth,
    compare,
    diagnose,
    merge,
    nsys,
    nsys_compare,
    nsys_import,
    plot,
    profile,
    run,
    trace,
    tune,
)
from profiler.cli.args import Verb
from profiler.errors import PinprofError

VERBS: tuple[Verb, ...] = (
    profile,
    tune,
    run,
    nsys,
    nsys_import,
    nsys_compare,
    diagnose,
    compare,
    plot,
    trace,
    bandwidth,
    merge,
)  # type: ignore[assignment]
ISSUES = "please report it with the command line and this traceback"


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line that names the bad value and where the flags are
    listed (argparse's default prints the whole usage first, burying the line that matters)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (`{self.prog} --help` lists the flags)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="pinprof", description="Per-batch profiler for the host-to-device path of PyTorch input pipelines."
    )
    parser.add_argument("--version", action="version", version=f"pinprof {__version__}")
    sub = parser.add_subparsers(dest="verb", metavar="VERB", parser_class=OneLineParser)
    sub.required = True
    for verb in VERBS:
        verb.add(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args, argv))
    except PinprofError as err:
        print(f"pinprof {args.verb}: error: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print(f"pinprof {args.verb}: interrupted", file=sys.stderr)
        return 130
    except OSError as err:  # the machine refused a file the user named, or the disk is full: not a bug
        print(f"pinprof {args.verb}: error: {err.strerror or err}: {err.filename or ''}".rstrip(": "), file=sys.stderr)
        return 2
    except Exception:
        traceback.print_exc()
        print(f"pinprof {args.verb}: internal error (a bug in pinprof, not in your input): {ISSUES}", file=sys.stderr)
        return 70  # EX_SOFTWARE
