"""``pinprof profile -- python train.py ARGS``: a user's program run in this process, profiled as it is.

The program runs as ``python script.py`` or ``python -m module`` would run it: its own ``sys.argv``,
the same ``sys.path[0]`` (the script's folder, or the current folder for ``-m``), and a ``__main__``
with the globals Python gives it (an absolute ``__file__``, a source loader, ``__builtins__`` the
module); its standard output is its own (pinprof's lines go to standard error). Meanwhile the
automatic hooks (``profiler.capture.auto_hooks``) record its batches.
The report folder is written when the program ends, however it ends: a normal end or ``sys.exit``,
an exception (printed as Python would, then exit status 1), Ctrl-C (130) or SIGTERM (143); the
last three leave ``"partial": true`` in meta.json. Under torchrun every rank writes
``<out>/rank<k>/`` and rank 0 merges them into ``<out>/`` once all have.
"""

from __future__ import annotations

import builtins
import importlib.machinery
import io
import os
import re
import runpy
import sys
import threading
import traceback
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from profiler.capture import auto_hooks, stall
from profiler.capture.auto_session import AutoSession, TrialDone
from profiler.capture.clocks import choice as clocks
from profiler.capture.devices import rank_info
from profiler.capture.knobs import Knobs
from profiler.capture.knobs import apply as apply_knobs
from profiler.drivers import interpreter
from profiler.drivers.calibrate import split_profiled
from profiler.drivers.interpreter import split_options
from profiler.drivers.saving import claim_out, report_folder
from profiler.drivers.session_report import write_session_report
from profiler.errors import UsageError
from profiler.report import disk, files, meta
from profiler.report.claim import release
from profiler.report.journal import Journal
from profiler.report.journal_process import JournalProcess
from profiler.report.signals import Terminated, install_sigterm, restore_sigterm, write_held
from profiler.settings import current


@dataclass(frozen=True)
class Target:
    """What to run: a script path or a module name, the ``sys.argv`` it sees, and Python's options
    given before it (``profiler.drivers.interpreter``)."""

    kind: str  # "path" or "module"
    name: str
    argv: list[str]
    options: tuple[str, ...] = ()

    def program(self) -> list[str]:
        """The command that runs it as given, for a process of its own (``pinprof tune``'s runs)."""
        return ["python", *self.options, *(["-m"] if self.kind == "module" else []), *self.argv]


# What names an interpreter: python, python3, python3.12 (a path to one too), not a script named python_x.py.
_INTERPRETER = re.compile(r"^python(\d+(\.\d+)*)?$")


def is_interpreter(arg: str) -> bool:
    return bool(_INTERPRETER.match(Path(arg).name)) and not arg.endswith(".py")


def parse_target(command: Sequence[str]) -> Target:
    """``[python] script.py ARGS`` or ``[python] -m module ARGS`` (after ``--``)."""
    cmd = list(command[1:] if command[:1] == ["--"] else command)
    options: list[str] = []
    if cmd and is_interpreter(cmd[0]):
        options, cmd = split_options(cmd[1:])
    if not cmd:
        raise UsageError("give the program after --, e.g. pinprof profile -- python train.py --epochs 1")
    if cmd[0] == "-m":
        if len(cmd) < 2:
            raise UsageError("-m needs a module name, e.g. pinprof profile -- python -m mypackage.train")
        return Target("module", cmd[1], cmd[1:], tuple(options))
    if cmd[0].startswith("-"):
        raise UsageError(f"{cmd[0]!r}: give python's options after python (python -u train.py), then the script")
    if not Path(cmd[0]).is_file() and not Path(cmd[0], "__main__.py").is_file():
        raise UsageError(f"{cmd[0]!r} is not a file; give the training script to run, e.g. train.py")
    return Target("path", cmd[0], cmd, tuple(options))


def _run_source(path: str) -> None:
    """A Python source file as ``python path`` runs it: in a ``__main__`` module of its own."""
    path = os.path.abspath(path)
    with io.open_code(path) as fh:
        code = compile(fh.read(), path, "exec", dont_inherit=True)
    main = types.ModuleType("__main__")
    main.__dict__.update(
        __file__=path,
        __builtins__=builtins,
        __loader__=importlib.machinery.SourceFileLoader("__main__", path),
        __package__=None,
        __spec__=None,
        __cached__=None,
    )
    saved = sys.modules.get("__main__")
    sys.modules["__main__"] = main  # pickling and spawned workers find the script's classes here
    try:
        exec(code, main.__dict__)
    finally:
        if saved is not None:
            sys.modules["__main__"] = saved


def run_target(target: Target) -> None:
    """Run ``target`` in this process as ``python`` would: its argv, its folder (or the current one) first
    on sys.path, as ``__main__``."""
    saved_argv, saved_path = sys.argv, list(sys.path)
    sys.argv = list(target.argv)
    try:
        if target.kind == "path":
            sys.path.insert(0, str(Path(target.name).resolve().parent))  # as python puts the script's folder first
            if Path(target.name).is_file() and not target.name.endswith((".zip", ".pyz", ".pyc")):
                _run_source(target.name)
            else:  # a folder or a zip archive with a __main__.py: runpy runs it as python does
                runpy.run_path(target.name, run_name="__main__")
        else:
            sys.path.insert(0, os.getcwd())  # as python -m puts the current folder first
            runpy.run_module(target.name, init_globals={"__builtins__": builtins}, run_name="__main__", alter_sys=True)
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


def _keep_on_exit(session: AutoSession) -> tuple[object, object]:
    """``os._exit`` skips every ``finally`` and ``atexit``: while the program runs, it first appends the
    batches completed so far to the journal (in this process only; forked workers inherit the patch
    and call it too)."""
    original, pid = os._exit, os.getpid()

    def _exit(code: int) -> None:
        if os.getpid() == pid:
            try:
                session.close_in_flight()  # the batch in progress is one the program iterated
                session.stop_writer()  # then: it waits for the journal's process (AutoSession.close)
                session.flush()
            except BaseException:
                pass
        original(code)

    os._exit = _exit  # type: ignore[assignment]
    return original, _exit


def _watch_stalls(session: AutoSession, launch_times: bool) -> stall.StallWatch | None:
    """Watch the loop on this thread (the program's) for a stall (``profiler.capture.stall``), unless
    ``PINPROF_STALL_S=0``. ``launch_times``: CUPTI records kernels' launch times in this run."""
    after = current().stall_s
    if not after:
        return None
    journal = session.journal
    watch = stall.StallWatch(
        lambda: session.batches,
        session.in_loop,
        threading.get_native_id(),
        after,
        stall.advice(journal.path if journal is not None else None, launch_times),
    )
    watch.start()
    return watch


def run_profiled(target: Target, session: AutoSession) -> tuple[int, str | None, str | None]:
    """Run ``target`` with the hooks on; (exit status, what interrupted it, its error text)."""
    previous = install_sigterm()
    original_exit, ours = _keep_on_exit(session)
    # CUPTI's records, if asked for, before any CUDA work of the script
    if session.cuda:
        clocks.start(session.device)
    watch = _watch_stalls(session, launch_times=clocks.launch_times())
    auto_hooks.start(session)
    try:
        run_target(target)
        return 0, None, None
    except SystemExit as err:
        code = _exit_code(err)
        return code, (None if code == 0 else "SystemExit"), None
    except TrialDone:  # pinprof tune's trial has its batches: a stop, not an interruption
        return 0, None, None
    except KeyboardInterrupt:
        return 130, "KeyboardInterrupt", None
    except Terminated:
        return 143, "SIGTERM", None
    except BaseException as err:  # the program's own error: shown as python shows it
        return 1, type(err).__name__, _shown(err)
    finally:
        if watch is not None:
            watch.stop()
        auto_hooks.stop()
        restore_sigterm(previous)
        if os._exit is ours:
            os._exit = original_exit  # type: ignore[assignment]


def _shown(err: BaseException) -> str:
    """Print the program's error as python does, with signals held; returns its text for meta.json.

    A DataLoader worker's death can surface first as a reset connection, with torch's SIGCHLD
    handler raising a few ms later at whatever bytecode runs: inside the traceback's printing, its
    error left ``run_profiled`` and no report was written. What a handler raises meanwhile is
    printed after it, once."""
    late: list[BaseException] = []
    write_held(lambda: print(as_python_prints(err), end="", file=sys.stderr), replay=False, late=late.append)
    for line in dict.fromkeys(f"{type(e).__name__}: {e}" for e in late):
        print(f"pinprof: then, while the error was shown: {line}", file=sys.stderr)
    return str(err)[:500]


_PACKAGE = str(Path(__file__).resolve().parents[1]) + os.sep
_RUNNERS = {runpy.__file__}  # runpy where it is not frozen: the runner pinprof runs a module with


def _not_ours(te: traceback.TracebackException, seen: set[int]) -> None:
    """``te`` and the exceptions chained to it without pinprof's frames (its runner, its hooks)."""
    if id(te) in seen:
        return
    seen.add(id(te))
    kept = [f for f in te.stack if not (f.filename.startswith(_PACKAGE) or f.filename in _RUNNERS)]
    te.stack = traceback.StackSummary.from_list(kept)
    for other in (te.__cause__, te.__context__, *(getattr(te, "exceptions", None) or [])):  # groups: 3.11
        if other is not None:
            _not_ours(other, seen)


def as_python_prints(err: BaseException) -> str:
    """``err``'s traceback as ``python script.py`` prints it: pinprof's own frames (the runner that
    ran the script, the hooks a ``.to()`` went through) left out, every other line as Python writes it."""
    te = traceback.TracebackException.from_exception(err)
    _not_ours(te, set())
    return "".join(te.format())


def default_out(target: Target) -> Path:
    stamp = pd.Timestamp.now().strftime("%Y%m%d-%H%M%S")
    return Path("reports") / f"profile-{Path(target.name).stem.replace('.', '-')}-{stamp}"


def profile(
    command: Sequence[str],
    out: Path | None,
    *,
    skip: int | None = None,
    batches: int | None = None,
    device: str | None = None,
    nvtx: bool = True,
    plots: bool = True,
    echo: Callable[[str], None] | None = None,
) -> int:
    """Profile ``command`` (see the module docstring); returns the program's exit status."""
    echo = echo or _to_stderr  # the program's standard output stays its own
    target = parse_target(command)
    interpreter.apply(target.options, command)  # python -u, -X, -W: this interpreter started again with them
    ranks = rank_info()
    if ranks["world_size"] > 1 and out is None:
        raise UsageError("under torchrun, give --out DIR: every rank writes its part into it")
    # resolved now: a script that changes directory must not move the report under its new one
    out = Path(out or default_out(target)).absolute()
    lock = claim_out(out)  # refused now, before the program runs, if out already holds a report
    try:
        folder = report_folder(out)
        folder.mkdir(parents=True, exist_ok=True)
        # partial until the end rewrites it: a program killed (SIGKILL, OOM) leaves a report that says so
        started = meta.collect({}, ["pinprof", "profile", "--", *target.argv], **ranks)
        files.write_json(
            {**started, "partial": True, "status": "running"}, folder / files.META, reserve=disk.META_RESERVE
        )
        trial = current()  # set by pinprof tune for a trial (profiler.capture.knobs)
        knobs = Knobs.from_json(trial.tune)
        session = AutoSession(
            device,
            skip=skip,
            limit=batches,
            nvtx=nvtx,
            run=out.name,
            journal=(journal := Journal(folder / files.TIMELINE)),
            appender=JournalProcess(journal),
            stop_after=trial.tune_stop or None,
            force_non_blocking=bool(knobs.non_blocking),
        )
        undo = apply_knobs(knobs, session.device)
        try:
            code, why, error = run_profiled(target, session)
        finally:
            undo()
        try:
            write_session_report(
                session,
                out,
                ["pinprof", "profile", "--", *target.argv],
                interrupted_by=why,
                error=error,
                exit_status=code,
                plots=plots,
                echo=echo,
                split=lambda tl, info: split_profiled(tl, session.device, info, echo),
            )
        except OSError as err:  # a full disk: what the journal kept stays, the program's status is returned
            kept_in = session.journal
            kept = (
                f"{kept_in.path} keeps the {kept_in.rows} batches appended before, of {session.batches} measured"
                if kept_in is not None and kept_in.path.is_file() and not kept_in.path.is_symlink()
                else f"no timeline was kept of the {session.batches} batches measured"
            )
            echo(
                f"pinprof: the report could not be written into {folder}/ ({err.strerror or err}"
                f"{': ' + str(err.filename) if err.filename else ''}); {kept}"
            )
    finally:
        release(lock)
    return code


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr)
