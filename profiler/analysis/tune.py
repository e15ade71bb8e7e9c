"""``pinprof tune``'s judgement: which trial changed the step time, by how much, and how sure.

Each trial is one process of the user's script (``profiler.cli.tune``), with one configuration; its
figure is the mean ``batch_ms`` of its steady batches (the loader with the most rows; warm-up rows
left out): an epoch's time is the sum of its batches, and with workers batches come in bursts (a
run of 2 workers on the 2-core machine alternated 2 and 16 ms), where a median of a few dozen
batches jumps between the two. The baseline (the script as it is) runs between the trials, so:

- each trial is compared with the mean of the baseline runs just before and after it (a drift of
  the machine weighs on both sides alike);
- the run-to-run noise of this machine is the spread of the baseline runs' means (relative
  standard deviation): a process's own mean can sit that far off whatever it runs;
- a run's own mean is uncertain by its batches' spread (its standard error, from the means of blocks
  of consecutive batches: ``_rel_se``).

The speedup (reference / trial) gets a 95% interval from the three, as independent relative errors;
an interval that holds 1.0 is "no measurable difference". Each error is itself estimated from a few
values (the run-to-run noise from the baseline runs: 5 of them give 4 degrees of freedom), so the
interval takes Student's t quantile at the degrees of freedom of the sum (Welch-Satterthwaite), not
the normal one: on the H200 a 2.5 ms loop whose baselines sat 10% apart from run to run had a trial
judged 1.33x (1.02-1.74) with the normal quantile; applied by hand it ran 0.90x. With fewer than two
baseline runs the run-to-run noise is unknown and the interval holds only the in-run part (said in
``noise``).

Columns of ``judge``'s table (one row per run, in the order run): ``trial`` (name), ``changes``
(the settings it changed, ``k=v`` joined by ``, ``; empty for the baseline), ``order``, ``batches``
(steady batches measured), ``step_ms`` (mean ``batch_ms``, ms), ``ref_ms`` (the baseline reference,
ms), ``speedup`` (ref / step), ``speedup_lo`` and ``speedup_hi`` (its 95% interval), ``saving_ms``
(ref - step, ms a batch), ``predicted_ms`` (what the baseline's diagnosis predicted the change saves,
ms a batch; empty where it predicted nothing), ``verdict`` (``faster``, ``slower``, ``no measurable
difference``, ``baseline``, or ``failed: <why>``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from profiler.analysis.findings import Diagnosis
from profiler.analysis.stats import welch

BASELINE = "baseline"


@dataclass
class Run:
    """One process of the script: its name, what it changed, its steady batches' ``batch_ms``."""

    name: str
    changes: dict[str, Any]
    order: int
    steps_ms: np.ndarray = field(default_factory=lambda: np.empty(0))
    error: str = ""

    @property
    def baseline(self) -> bool:
        return not self.changes


def steady_steps(tl: pd.DataFrame) -> np.ndarray:
    """``batch_ms`` of the steady batches of the loader with the most rows (the training loop)."""
    if tl.empty:
        return np.empty(0)
    main = tl.scenario.value_counts().index[0]
    rows = tl[(tl.scenario == main) & ~tl.warmup.astype(bool)]
    return rows.batch_ms.dropna().to_numpy(dtype=float)


# Fewest blocks the standard error of a run's mean is taken from (``_rel_se``); below, batches alone.
MIN_BLOCKS = 4


def _rel_se(x: np.ndarray) -> tuple[float, float]:
    """The relative standard error of ``x``'s mean (NaN for fewer than two values), from the means of
    blocks of consecutive batches (the batch-means method): a loader's batches are not independent.
    With 2 workers on the 2-core machine they alternated 2 and 16 ms, a spread of +/-7 ms whose mean
    over any two batches barely moves; a loader that stalls for several batches in a row spreads less
    batch to batch than its mean does. Blocks of sqrt(n) batches (6 of 40) take in both; with fewer
    than ``MIN_BLOCKS`` blocks, the batches' own spread. With its degrees of freedom: the number of
    blocks, or of batches, less one."""
    n = len(x)
    if n < 2:
        return float("nan"), float("nan")
    size = max(2, int(np.sqrt(n)))
    k = n // size
    if k < MIN_BLOCKS:
        return float(np.std(x, ddof=1) / np.sqrt(n) / np.mean(x)), float(n - 1)
    # the last k blocks: a remainder left over is the run's first batches, the nearest to its warm-up
    blocks = np.asarray(x[n - k * size :], dtype=float).reshape(k, size).mean(axis=1)
    return float(np.std(blocks, ddof=1) / np.sqrt(k) / np.mean(x)), float(k - 1)


def noise(runs: Sequence[Run]) -> float:
    """Run-to-run noise: the relative standard deviation of the baseline runs' means (NaN with
    fewer than two)."""
    meds = np.array([np.mean(r.steps_ms) for r in runs if r.baseline and len(r.steps_ms)])
    return float(np.std(meds, ddof=1) / np.mean(meds)) if len(meds) >= 2 else float("nan")


def changes_text(changes: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(changes.items()))


def judge(runs: Sequence[Run], predicted: Mapping[str, float] | None = None) -> pd.DataFrame:
    """The table of the module docstring; ``predicted``: ms a batch the diagnosis predicted, by trial name."""
    predicted = predicted or {}
    run_sd = noise(runs)
    base = sorted((r for r in runs if r.baseline and len(r.steps_ms)), key=lambda r: r.order)
    rows = []
    for r in sorted(runs, key=lambda r: r.order):
        row: dict[str, Any] = {
            "trial": r.name,
            "changes": changes_text(r.changes),
            "order": r.order,
            "batches": len(r.steps_ms),
            "predicted_ms": predicted.get(r.name, np.nan),
        }
        if r.error or not len(r.steps_ms):
            rows.append({**row, "verdict": f"failed: {r.error or 'no steady batch recorded'}"})
            continue
        step = float(np.mean(r.steps_ms))
        if r.baseline:
            rows.append({**row, "step_ms": step, "ref_ms": step, "speedup": 1.0, "saving_ms": 0.0, "verdict": BASELINE})
            continue
        before = [b for b in base if b.order < r.order][-1:]
        after = [b for b in base if b.order > r.order][:1]
        near = before + after or base
        if not near:
            rows.append({**row, "step_ms": step, "verdict": "failed: no baseline run to compare with"})
            continue
        ref = float(np.mean([np.mean(b.steps_ms) for b in near]))
        # the trial's own error; each neighbour's, as the mean of len(near) means; the run-to-run
        # noise, estimated from all the baseline runs
        parts = [_rel_se(r.steps_ms)]
        parts += [(se / len(near), d) for se, d in (_rel_se(b.steps_ms) for b in near)]
        if not np.isnan(run_sd):
            parts.append((run_sd * np.sqrt(1 + 1 / len(near)), float(len(base) - 1)))
        rel, t = welch(parts)
        speedup = ref / step
        lo, hi = speedup * np.exp(-t * rel), speedup * np.exp(t * rel)
        verdict = "faster" if lo > 1 else "slower" if hi < 1 else "no measurable difference"
        rows.append(
            {
                **row,
                "step_ms": step,
                "ref_ms": ref,
                "speedup": speedup,
                "speedup_lo": lo,
                "speedup_hi": hi,
                "saving_ms": ref - step,
                "verdict": verdict,
            }
        )
    cols = [
        "trial",
        "changes",
        "order",
        "batches",
        "step_ms",
        "ref_ms",
        "speedup",
        "speedup_lo",
        "speedup_hi",
        "saving_ms",
        "predicted_ms",
        "verdict",
    ]
    return pd.DataFrame(rows).reindex(columns=cols)


def winner(table: pd.DataFrame) -> pd.Series | None:
    """The fastest trial whose interval lies above 1.0, or None."""
    faster = table[table.verdict == "faster"]
    return None if faster.empty else faster.loc[faster.speedup.idxmax()]


def predicted_saving(diags: Sequence[Diagnosis], changes: Mapping[str, Any]) -> float:
    """What the baseline's diagnosis said a change of these settings saves, ms a batch (the largest of
    the remedies that make it; NaN where none does)."""
    gains = []
    for d in diags:
        for f in d.findings:
            for c in f.changes:
                if _makes(c.what, c.sets, changes):
                    gains.append(c.gain_ms)
    return max(gains) if gains else float("nan")


def by_prediction(
    plan: Sequence[tuple[str, dict[str, Any]]], diags: Sequence[Diagnosis]
) -> list[tuple[str, dict[str, Any]]]:
    """The trials in the order a budget should keep them: those the diagnosis predicts a saving for,
    the largest first, then the others as they came. On the H200 a budget that held two trials of
    four left out the prefetcher, the one change the resnet50 loop's diagnosis named (2.61 ms a
    batch, ``tests/data/h200_profile_resnet``), to try more workers and a deeper queue first."""
    gains = [predicted_saving(diags, changes) for _, changes in plan]
    order = sorted(range(len(plan)), key=lambda i: (np.isnan(gains[i]), -np.nan_to_num(gains[i]), i))
    return [plan[i] for i in order]


def _makes(what: str, sets: Mapping[str, Any], changes: Mapping[str, Any]) -> bool:
    for key, value in changes.items():
        if key == "num_workers" and ("num_workers" in sets or "raise num_workers" in what):
            return True
        if key == "pin_memory" and sets.get("pin_memory") == value:
            return True
        if key == "non_blocking" and (sets.get("non_blocking") is True or sets.get("mode") == "pinned_nb"):
            return True
        if key == "prefetcher" and (sets.get("mode") == "prefetch" or what.startswith("prefetch")):
            return True
        if key == "prefetch_factor" and "prefetch_factor" in what:
            return True
    return False


def in_code(changes: Mapping[str, Any]) -> str:
    """The change to make in the script, in code."""
    loader = {
        k: v for k, v in changes.items() if k in ("num_workers", "pin_memory", "prefetch_factor", "persistent_workers")
    }
    parts = []
    if loader:
        parts.append("DataLoader(..., " + ", ".join(f"{k}={v}" for k, v in sorted(loader.items())) + ")")
    if changes.get("non_blocking"):
        parts.append(".to(device, non_blocking=True) on the pinned batch")
    if changes.get("prefetcher"):
        parts.append("for batch in profiler.prefetch(loader, device): (instead of: for batch in loader:)")
    return "; ".join(parts)
