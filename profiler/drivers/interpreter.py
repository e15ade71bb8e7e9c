"""Python's own options given before the script (``pinprof profile -- python -u -W error train.py``).

pinprof runs the script in its own interpreter, so an option meant for the script's interpreter must
be that interpreter's: pinprof starts itself again with them (``os.execv``), once, as ``python -u
-m profiler profile ...`` would run. The options that change how code runs are taken: ``-u`` (no
buffering), ``-B``, ``-O``/``-OO``, ``-b``/``-bb``, ``-d``, ``-q``, ``-s``, ``-v``, ``-X opt`` and
``-W arg``. Those that change what runs or where imports come from (``-c``, ``-i``, ``-I``, ``-E``,
``-S``, ``-P``) are refused in one line: pinprof itself must still import as it does.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from profiler.errors import UsageError

FLAGS = set("uBObdqsv")
WITH_VALUE = ("-X", "-W")
APPLIED = "PINPROF_PYTHON_OPTIONS"  # set in the interpreter started again with them


def split_options(cmd: Sequence[str]) -> tuple[list[str], list[str]]:
    """(Python's options at the start of ``cmd``, the rest: ``-m module ...`` or ``script ...``)."""
    options: list[str] = []
    rest = list(cmd)
    while rest and rest[0].startswith("-") and rest[0] not in ("-", "-m"):
        arg = rest.pop(0)
        if arg[:2] in WITH_VALUE:
            if len(arg) > 2:
                options.append(arg)
            elif rest:
                options += [arg, rest.pop(0)]
            else:
                raise UsageError(f"python option {arg} needs a value, e.g. {arg} dev or {arg} error")
        elif len(arg) > 1 and set(arg[1:]) <= FLAGS:
            options.append(arg)
        else:
            raise UsageError(
                f"python option {arg!r} is not supported here (pinprof runs the script in its own interpreter); "
                f"these are: {' '.join('-' + f for f in sorted(FLAGS))} -X OPT -W ARG"
            )
    return options, rest


def apply(options: Sequence[str], command: Sequence[str]) -> None:
    """Start this pinprof again with ``options`` given to its interpreter, unless they already were;
    ``command``: the program as the user gave it (its end of ``sys.orig_argv``)."""
    if not options or os.environ.get(APPLIED) == " ".join(options):
        return
    orig = list(getattr(sys, "orig_argv", []))
    if not command or orig[-len(command) :] != list(command):
        raise UsageError(
            f"python options {' '.join(options)} take effect only when pinprof is run from the command line; "
            "set them for this interpreter instead"
        )
    os.environ[APPLIED] = " ".join(options)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, [sys.executable, *options, *orig[1:]])
