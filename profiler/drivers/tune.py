"""``pinprof tune -- python train.py``: the script run as it is and with each fix, one process a run,
and what each fix measurably buys (``profiler.analysis.tune``).

Every run is ``pinprof profile --skip SKIP`` of the unmodified script, stopped once ``SKIP +
STEPS`` batches are recorded (``PINPROF_TUNE_STOP``), plus the batches its loader's workers can queue
(``num_workers x prefetch_factor``, warm-up too), and measuring whole epochs where they are short
(``profiler.capture.trial``), with one configuration applied through the hooks
(``PINPROF_TUNE``, ``profiler.capture.knobs``): nothing is written into the user's code. The order is
baseline, trial 1, baseline, trial 2, ..., baseline, so that each trial sits between two baseline runs
and the baselines measure this machine's run-to-run noise. The trials come from the first baseline's
settings (``candidates``), those its diagnosis predicts a saving for first (``by_prediction``), so
that a budget leaves out the others; when several are measurably faster, one more run puts them together. A
budget (seconds) bounds the number of runs, from the first run's duration; what it leaves out is said.

Each run's report folder stays under ``OUT/trials/``; ``OUT/tune.csv`` and ``OUT/tune.md`` hold the
table. Ctrl-C stops the run in progress (its process gets the signal too) and writes the table of the
runs finished; a run that fails is reported with its error and the others go on.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from profiler.analysis.diagnose import diagnose
from profiler.analysis.findings import Diagnosis
from profiler.analysis.tune import (
    BASELINE,
    Run,
    by_prediction,
    changes_text,
    judge,
    noise,
    predicted_saving,
    steady_steps,
)
from profiler.capture.knobs import Knobs
from profiler.drivers.script import parse_target
from profiler.drivers.trial_process import STDERR, make_folder, run_trial
from profiler.errors import PinprofError, UsageError
from profiler.names import clean
from profiler.render.tune import tune_lines
from profiler.report.files import META, read_meta, read_timeline
from profiler.report.tune import TUNE_CSV, write_tune

KNOBS = ("num_workers", "pin_memory", "prefetch_factor", "non_blocking", "prefetcher")


class TuneFailed(PinprofError):
    """The script as it is did not run to its measured batches: nothing to compare with."""

    exit_code = 1


def suggested(diags: Sequence[Diagnosis], scenario: str) -> list[int]:
    """The worker counts the diagnosis of ``scenario`` names (past the cores, where its workers
    waited): trials of their own, so that tune measures what profile advises."""
    out = []
    for d in diags:
        if d.scenario == scenario:
            for f in d.findings:
                out += [int(c.sets["num_workers"]) for c in f.changes if isinstance(c.sets.get("num_workers"), int)]
    return out


def candidates(
    cfg: pd.Series, cores: int, only: Sequence[str] | None = None, workers_suggested: Sequence[int] = ()
) -> list[tuple[str, dict[str, Any]]]:
    """The trials for a script whose main loader has settings ``cfg`` (a timeline row), on a machine
    of ``cores`` CPU cores: (name, changes), each change one fix a user would try; past the cores
    only the worker counts its diagnosis names (``workers_suggested``: its workers waited)."""
    cuda = str(cfg.get("device", "")).startswith("cuda")
    workers = 0 if pd.isna(cfg.get("num_workers")) else int(cfg["num_workers"])
    pinned = bool(cfg.get("pin_memory")) if not pd.isna(cfg.get("pin_memory")) else False
    mode = str(cfg.get("mode", ""))
    out: list[tuple[str, dict[str, Any]]] = []
    for w in sorted({min(cores, max(2, 2 * workers)), cores, *workers_suggested}):
        if w != workers and w > 0:
            out.append((f"num_workers={w}", {"num_workers": w}))
    if workers > 0:
        pf = cfg.get("prefetch_factor")
        if pd.isna(pf) or int(pf) < 4:
            out.append(("prefetch_factor=4", {"prefetch_factor": 4}))
    if cuda:
        if pinned:
            out.append(("pin_memory=False", {"pin_memory": False}))
            if mode == "pinned":
                out.append(("non_blocking=True", {"non_blocking": True}))
        else:
            out.append(("pin_memory+non_blocking", {"pin_memory": True, "non_blocking": True}))
        out.append(("prefetcher", {"prefetcher": True, "pin_memory": True}))
    if only is not None:  # a knob keeps every trial that changes it; a trial's own name keeps that one
        out = [(n, c) for n, c in out if n in only or set(c) & set(only)]
    return out


def only_unknown(only: Sequence[str]) -> list[str]:
    """The entries of ``--only`` that are neither a knob nor a trial's name as ``tune.md`` writes it
    (``pin_memory=False``, ``num_workers=16``, ``pin_memory+non_blocking``: knobs, each with a value),
    checked before any run."""

    def trial_name(entry: str) -> bool:
        try:
            trial_changes(entry)
        except ValueError:
            return False
        return True

    return sorted(e for e in set(only) if e not in KNOBS and not trial_name(e))


# Each knob's values in a trial's name: a whole number (its least), or true/false.
_VALUES: dict[str, int | None] = {
    "num_workers": 0,
    "prefetch_factor": 1,
    "pin_memory": None,
    "non_blocking": None,
    "prefetcher": None,
}


def trial_changes(name: str) -> dict[str, Any]:
    """The settings a trial's name gives (``num_workers=4+pin_memory=False``; a knob alone is true:
    ``pin_memory+non_blocking``); ValueError for a name that gives none."""
    changes: dict[str, Any] = {}
    for part in name.split("+"):
        knob, _, value = part.partition("=")
        if knob not in _VALUES:
            raise ValueError(f"unknown knob {knob!r}")
        least = _VALUES[knob]
        if least is None:
            if value not in ("", "True", "False", "true", "false"):
                raise ValueError(f"{knob} is true or false")
            changes[knob] = value.lower() != "false"
        elif not value.isdigit() or int(value) < least:
            raise ValueError(f"{knob} is a whole number of at least {least}")
        else:
            changes[knob] = int(value)
    return changes


def tune(
    command: Sequence[str],
    out: Path | None,
    *,
    steps: int = 30,
    warmup: int = 5,
    budget_s: float = 900.0,
    only: Sequence[str] | None = None,
    device: str | None = None,
    echo: Callable[[str], None] | None = None,
) -> int:
    """Run the trials (module docstring); returns 0, or 130 when interrupted."""
    say = echo or (lambda line: print(line, file=sys.stderr))
    target = parse_target(command)
    if only is not None:
        bad = only_unknown(only)
        if bad:
            raise UsageError(
                f"--only {','.join(only)}: unknown {', '.join(bad)}; choose from {','.join(KNOBS)}, or give a "
                "trial's name as tune.md writes it (pin_memory=False, num_workers=16)"
            )
    out = out or Path("reports") / f"tune-{Path(target.name).stem.replace('.', '-')}-{time.strftime('%Y%m%d-%H%M%S')}"
    out = Path(out).absolute()  # the script may change directory: the runs' folders stay where asked
    if (out / TUNE_CSV).exists():
        raise UsageError(
            f"out={str(out)!r} already holds a tune ({out / TUNE_CSV}): choose another folder, or delete it"
        )
    if os.path.lexists(out / "trials"):
        raise UsageError(
            f"out={str(out)!r} already holds {out / 'trials'} (a tune stopped before its table, or something "
            "else): choose another folder, or delete it"
        )
    out.mkdir(parents=True, exist_ok=True)
    trials = make_folder(out / "trials")
    runs: list[Run] = []
    planned = [1]  # runs planned so far, for the progress line
    started = time.monotonic()
    durations: list[float] = []

    def one(name: str, changes: dict[str, Any]) -> Run:
        order = len(runs)
        folder = make_folder(trials / f"{order:02d}-{clean(name)}")
        env = {**os.environ, "PINPROF_TUNE": Knobs(**changes).to_json(), "PINPROF_TUNE_STOP": str(warmup + steps)}
        cmd = [sys.executable, "-m", "profiler", "profile", "--out", str(folder), "--skip", str(warmup), "--no-plots"]
        cmd += ["--device", device] if device else []
        # Every run is bounded: the first by the budget, the others by 4 times the longest so far.
        limit = max(120.0, 4 * max(durations)) if durations else budget_s
        t0 = time.monotonic()
        error = ""
        status, last = run_trial([*cmd, "--", *target.program()], env, folder, limit, say)
        if status is None:
            error = (
                f"took more than {limit:.0f} s (4 times the longest run so far)"
                if durations
                else f"took more than the whole budget (--budget-s {budget_s:g}) before its steps were measured"
            )
        elif status != 0:
            error = f"exit status {status}: {last or 'no output'} (its output: {folder / STDERR})"
        durations.append(time.monotonic() - t0)
        tl = read_timeline(folder) if (folder / "timeline.csv").is_file() else pd.DataFrame()
        run = Run(name, changes, order, steady_steps(tl), error)
        if not error and len(run.steps_ms) < steps:
            run.error = f"{len(run.steps_ms)} steady batches of the {steps} asked (the script ended first)"
        runs.append(run)
        left = (planned[0] - len(runs)) * (sum(durations) / len(durations))
        figure = f"{pd.Series(run.steps_ms).mean():.3f} ms/step" if len(run.steps_ms) else run.error
        say(
            f"pinprof tune: [{len(runs)}/{planned[0]}] {name}: {figure} (run {durations[-1]:.0f} s; about {left:.0f} s left)"
        )
        return run

    notes: list[str] = []
    code = 0
    base_tl: pd.DataFrame | None = None  # the first baseline's timeline: its settings and its diagnosis
    diags: list[Diagnosis] = []  # the first baseline's diagnosis: the trials' order, their predicted savings
    try:
        base = one(BASELINE, {})
        if base.error:
            raise TuneFailed(f"the script as it is: {base.error}; see {out / 'trials'}")
        first = out / "trials" / f"00-{BASELINE}"
        tl = base_tl = read_timeline(first)
        main = tl.scenario.value_counts().index[0]
        cfg = tl[tl.scenario == main].iloc[0]
        info = read_meta(first / META)  # the machine's cores, how busy the loader's workers were
        loaders = info.get("loaders")
        diags = diagnose(base_tl, None, info.get("cpu_count"), loaders if isinstance(loaders, dict) else None)
        plan = by_prediction(candidates(cfg, os.cpu_count() or 1, only, suggested(diags, main)), diags)
        if only is not None:  # a trial named in --only is tried as named, whether or not the rules give it
            plan += [(e, trial_changes(e)) for e in only if e not in KNOBS and e not in {n for n, _ in plan}]
        fits = max(int((budget_s - durations[0]) // max(durations[0], 1e-3)) // 2, 0)
        if len(plan) > fits:
            notes.append(
                f"left out for the budget ({budget_s:.0f} s, {durations[0]:.0f} s a run): "
                + ", ".join(n for n, _ in plan[fits:])
            )
            plan = plan[:fits]
        planned[0] = 1 + 2 * len(plan)
        for name, changes in plan:
            one(name, changes)
            one(BASELINE, {})
        table = judge(runs)
        faster = table[table.verdict == "faster"].sort_values("speedup", ascending=False)
        together: dict[str, Any] = {}
        for trial in faster.trial:
            changes = next(r.changes for r in runs if r.name == trial)
            if not set(changes) & set(together):
                together.update(changes)
        if len(faster) >= 2 and len(together) > max(
            len(next(r.changes for r in runs if r.name == t)) for t in faster.trial
        ):
            if time.monotonic() - started + 2 * durations[0] <= budget_s:
                planned[0] += 2
                one("together: " + changes_text(together), together)
                one(BASELINE, {})
            else:
                notes.append("the faster changes together were not tried: the budget is spent")
    except KeyboardInterrupt:
        notes.append(f"interrupted after {len(runs)} runs: the table holds the runs finished")
        code = 130
    predicted = {r.name: predicted_saving(diags, r.changes) for r in runs if not r.baseline}
    table = judge(runs, predicted)
    write_tune(out, table, noise(runs), " ".join(target.program()), notes)
    for line in [*tune_lines(table, noise(runs)), *notes]:
        say(line)
    say(f"pinprof tune: {out / TUNE_CSV} and {out / 'tune.md'}; each run's report under {out / 'trials'}/")
    return code
