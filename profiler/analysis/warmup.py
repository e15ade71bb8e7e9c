"""Warm-up found, not guessed: the start-up batches of each loader and epoch, left out of the figures.

A loop's first batches pay for things a steady batch never does: worker processes starting, the
first pins growing the pinned allocator, cuDNN autotuning, the CUDA context; and, without
``persistent_workers``, each epoch starts its workers again. Such a batch inflates a mean (on the
CPU machine a 352 ms first fetch against a 5.5 ms median turned a verdict), so ``settle`` flags them
``warmup`` before any figure is taken.

The rule, per (scenario, rank): the steady level of each phase in ``PHASES`` is its median over the
batches that do not open an epoch, and its spread 1.4826 x their median absolute deviation. A batch
is slow when some phase exceeds ``median + max(SPREADS x spread, RELATIVE x median, FLOOR_MS)``.
Walking each epoch from its first batch, slow batches are start-up until the first batch that is
not, and at most a quarter of the epoch's batches (at least one) are taken, so a loop that is slow
throughout is never called warm-up. A loop whose batches all look alike loses none.

An explicit ``--skip N`` (meta.json ``warmup_policy``: ``skip``) replaces the rule: its flags are
kept as they are. A report from before the rule (no ``warmup_policy``) keeps the flags it was
recorded with, and the rule adds to them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from profiler.analysis.compare import spread_ms

PHASES = ("batch", "fetch", "pin", "h2d", "compute")
SPREADS = 6.0
RELATIVE = 1.0  # twice the steady median at least
FLOOR_MS = 0.05
MIN_ROWS = 4  # fewer batches than this: no steady level to compare with
# meta.json's warmup_policy: ``auto`` (the rule alone, from scratch), ``skip`` (--skip N: the flags as
# recorded), ``recorded`` (a report from before the rule: its flags kept, and the rule's added).
AUTO, SKIP, RECORDED = "auto", "skip", "recorded"


@dataclass
class Found:
    """What ``settle`` left out of one scenario: ``startup`` batches of its first epoch, ``restarts``
    batches opening later epochs (and how many later epochs there were), the slowest phase of those
    batches and its worst value against its steady median (ms)."""

    scenario: str
    startup: int = 0
    restarts: int = 0
    later_epochs: int = 0
    skipped: int = 0  # flagged when recorded (--skip, or an older pinprof's --warmup)
    worst: dict[str, tuple[float, float]] = field(default_factory=dict)  # phase -> (worst ms, steady median ms)

    @property
    def total(self) -> int:
        return self.startup + self.restarts + self.skipped

    def text(self, workers: int | None = None) -> str:
        """One sentence: how many batches were left out and why."""
        if self.skipped and not (self.startup or self.restarts):
            return f"{self.scenario}: {self.skipped} batches left out as warm-up when recorded (--skip)"
        if not self.total:
            return f"{self.scenario}: no start-up batch found; every batch is measured"
        parts = [f"{self.skipped} batches flagged warm-up when recorded"] if self.skipped else []
        if self.startup:
            parts.append(f"{self.startup} start-up batch{'es' * (self.startup > 1)} of the first epoch")
        if self.restarts:
            parts.append(
                f"{self.restarts} batch{'es' * (self.restarts > 1)} opening {self.later_epochs} later epoch"
                f"{'s' * (self.later_epochs > 1)}"
            )
        why = ", ".join(
            f"{p} up to {w:.3f} ms against a steady median of {m:.3f} ms" for p, (w, m) in self.worst.items()
        )
        restart = ""
        if self.restarts and workers and "fetch" in self.worst:
            restart = "; the loader's workers start again each epoch (persistent_workers=True keeps them)"
        return f"{self.scenario}: left out {' and '.join(parts)} ({why}){restart}"


def _levels(frame: pd.DataFrame, steady: np.ndarray) -> dict[str, tuple[float, float]]:
    """Per phase: (median, threshold) over the ``steady`` rows; phases never measured are absent."""
    out = {}
    for p in PHASES:
        col = f"{p}_ms"
        if col not in frame:
            continue
        x = frame[col].to_numpy(float)[steady]
        x = x[~np.isnan(x)]
        if len(x) < MIN_ROWS:
            continue
        med = float(np.median(x))
        out[p] = (med, med + max(SPREADS * spread_ms(x), RELATIVE * med, FLOOR_MS))
    return out


def _group_keys(tl: pd.DataFrame) -> list[str]:
    return [k for k in ("run", "scenario", "rank") if k in tl]


def _detect(
    frame: pd.DataFrame, opens: np.ndarray, flags: np.ndarray
) -> tuple[np.ndarray, dict[str, tuple[float, float]]]:
    """One pass of the rule over one group's rows (in batch order): the new flags, and the levels."""
    levels = _levels(frame, ~opens & ~flags)
    out = flags.copy()
    if not levels:
        return out, levels
    values = {p: frame[f"{p}_ms"].to_numpy(float) for p in levels}
    starts = np.flatnonzero(opens)
    for a, b in zip(starts, np.r_[starts[1:], len(frame)]):
        for i in range(a, min(b, a + max(1, (b - a) // 4))):
            if not any(values[p][i] > levels[p][1] for p in levels):
                break
            out[i] = True
    return out, levels


def settle(tl: pd.DataFrame, policy: str = AUTO) -> tuple[pd.DataFrame, list[Found]]:
    """``tl`` with ``warmup`` set by the rule (module docstring) unless ``policy`` is ``skip``, and
    what was left out, one ``Found`` per scenario. The column is set in ``tl`` itself (the frame
    returned is ``tl``): pass a copy to keep the flags it had.

    The rule runs to a fixed point (the steady levels taken without the batches it left out, until
    it leaves out no more), so that settling a timeline it already settled changes nothing: a report
    read back gives the figures it was written with."""
    if tl.empty:
        return tl, []
    full = tl
    # Only the columns the rule reads: a 1,000,000-row timeline has 60 more, 400 MB of them.
    tl = tl[
        [c for c in ("run", "scenario", "rank", "batch", "epoch", "warmup", *(f"{p}_ms" for p in PHASES)) if c in tl]
    ]
    recorded = tl["warmup"].to_numpy(bool) if "warmup" in tl else np.zeros(len(tl), bool)
    # auto: the rule from scratch, so that a timeline written with the rule's flags reads the same again
    flags = np.zeros(len(tl), bool) if policy == AUTO else recorded.copy()
    epochs = tl["epoch"].to_numpy(np.int64) if "epoch" in tl else np.zeros(len(tl), np.int64)
    batch = tl["batch"].to_numpy(np.int64)
    found: dict[str, Found] = {}
    keys = _group_keys(tl)
    for key, idx in tl.groupby(keys, sort=False, dropna=False).indices.items():
        scen = str(key[keys.index("scenario")] if isinstance(key, tuple) else key)
        f = found.setdefault(scen, Found(scen))
        rows = idx[np.argsort(batch[idx], kind="stable")]
        if policy == SKIP:
            f.skipped += int(flags[rows].sum())
            continue
        ep = epochs[rows]
        opens = np.r_[True, ep[1:] != ep[:-1]]  # the first batch of each epoch
        frame = tl.iloc[rows]
        mine = flags[rows]
        for _ in range(8):
            new, levels = _detect(frame, opens, mine)
            if np.array_equal(new, mine):
                break
            mine = new
        flags[rows] = mine
        epoch_no = np.cumsum(opens) - 1
        f.later_epochs += int(opens.sum()) - 1
        new = mine & ~(recorded[rows] if policy == RECORDED else False)
        f.skipped += int((mine & ~new).sum())
        f.startup += int((new & (epoch_no == 0)).sum())
        f.restarts += int((new & (epoch_no > 0)).sum())
        for p, (med, _limit) in levels.items():
            v = frame[f"{p}_ms"].to_numpy(float)[new]
            v = v[~np.isnan(v)]
            if len(v) and v.max() > _limit:
                f.worst[p] = (max(float(v.max()), f.worst.get(p, (0.0, med))[0]), med)
    if "warmup" not in full or not np.array_equal(flags, full["warmup"].to_numpy(bool)):
        # In place: a copy of a 1,000,000-row timeline with all its columns took 800 MB more.
        full["warmup"] = flags
    return full, list(found.values())
