"""``pinprof profile -- python train.py ARGS``: a user's program run in this process, profiled as it is.

The program runs through ``runpy`` (as ``python script.py`` or ``python -m module`` would run it, with
its own ``sys.argv``) while the automatic hooks (``profiler.capture.auto_hooks``) record its batches.
The report folder is written when the program ends, however it ends: a normal end or ``sys.exit``,
an exception (printed as Python would, then exit status 1), Ctrl-C (130) or SIGTERM (143); the
last three leave ``"partial": true`` in meta.json. Under torchrun every rank writes
``<out>/rank<k>/`` and rank 0 merges them into ``<out>/`` once all have.
"""

from __future__ import annotations

import runpy
import sys
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from profiler.capture import auto_hooks
from profiler.capture.auto_report import write_session_report
from profiler.capture.auto_session import AutoSession
from profiler.capture.devices import rank_info
from profiler.capture.saving import claim_out, report_folder
from profiler.errors import UsageError
from profiler.report import files, meta
from profiler.report.claim import release
from profiler.report.journal import Journal
from profiler.report.signals import Terminated, install_sigterm, restore_sigterm


@dataclass(frozen=True)
class Target:
    """What to run: a script path or a module name, and the ``sys.argv`` it sees."""

    kind: str  # "path" or "module"
    name: str
    argv: list[str]


def parse_target(command: Sequence[str]) -> Target:
    """``[python] script.py ARGS`` or ``[python] -m module ARGS`` (after ``--``)."""
    cmd = list(command[1:] if command[:1] == ["--"] else command)
    if cmd and Path(cmd[0]).name.startswith("python"):
        cmd = cmd[1:]
    if not cmd:
        raise UsageError("give the program after --, e.g. pinprof profile -- python train.py --epochs 1")
    if cmd[0] == "-m":
        if len(cmd) < 2:
            raise UsageError("-m needs a module name, e.g. pinprof profile -- python -m mypackage.train")
        return Target("module", cmd[1], cmd[1:])
    if cmd[0].startswith("-"):
        raise UsageError(f"python option {cmd[0]!r} is not supported here; give the script (or -m module) first")
    if not Path(cmd[0]).is_file():
        raise UsageError(f"{cmd[0]!r} is not a file; give the training script to run, e.g. train.py")
    return Target("path", cmd[0], cmd)


def _run(target: Target) -> None:
    saved_argv, saved_path = sys.argv, list(sys.path)
    sys.argv = list(target.argv)
    try:
        if target.kind == "path":
            sys.path.insert(0, str(Path(target.name).resolve().parent))  # as python puts the script's folder first
            runpy.run_path(target.name, run_name="__main__")
        else:
            runpy.run_module(target.name, run_name="__main__", alter_sys=True)
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path


def _exit_code(err: SystemExit) -> int:
    code = err.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)  # sys.exit("message"), as python prints it
    return 1


def run_profiled(target: Target, session: AutoSession) -> tuple[int, str | None, str | None]:
    """Run ``target`` with the hooks on; (exit status, what interrupted it, its error text)."""
    previous = install_sigterm()
    auto_hooks.start(session)
    try:
        _run(target)
        return 0, None, None
    except SystemExit as err:
        code = _exit_code(err)
        return code, (None if code == 0 else "SystemExit"), None
    except KeyboardInterrupt:
        return 130, "KeyboardInterrupt", None
    except Terminated:
        return 143, "SIGTERM", None
    except BaseException as err:  # the program's own error: shown as python shows it
        traceback.print_exc()
        return 1, type(err).__name__, str(err)[:500]
    finally:
        auto_hooks.stop()
        restore_sigterm(previous)


def default_out(target: Target) -> Path:
    stamp = pd.Timestamp.now().strftime("%Y%m%d-%H%M%S")
    return Path("reports") / f"profile-{Path(target.name).stem.replace('.', '-')}-{stamp}"


def profile(
    command: Sequence[str],
    out: Path | None,
    *,
    skip: int = 0,
    batches: int | None = None,
    device: str | None = None,
    nvtx: bool = True,
    plots: bool = True,
    echo: Callable[[str], None] = print,
) -> int:
    """Profile ``command`` (see the module docstring); returns the program's exit status."""
    target = parse_target(command)
    ranks = rank_info()
    if ranks["world_size"] > 1 and out is None:
        raise UsageError("under torchrun, give --out DIR: every rank writes its part into it")
    out = out or default_out(target)
    lock = claim_out(out)  # refused now, before the program runs, if out already holds a report
    try:
        folder = report_folder(out)
        folder.mkdir(parents=True, exist_ok=True)
        # partial until the end rewrites it: a program killed (SIGKILL, OOM) leaves a report that says so
        started = meta.collect({}, ["pinprof", "profile", "--", *target.argv], **ranks)
        files.write_json({**started, "partial": True, "status": "running"}, folder / files.META)
        session = AutoSession(
            device,
            skip=skip,
            limit=batches,
            nvtx=nvtx,
            run=out.name,
            journal=Journal(folder / files.TIMELINE),
        )
        code, why, error = run_profiled(target, session)
        write_session_report(
            session,
            out,
            ["pinprof", "profile", "--", *target.argv],
            interrupted_by=why,
            error=error,
            exit_status=code,
            plots=plots,
            echo=echo,
        )
    finally:
        release(lock)
    return code
