"""Did a change help? Two readings of the same loop (before and after a change), scenario by scenario
and phase by phase, each difference judged against both runs' batch-to-batch noise.

Scenarios are paired by one rule, said with the result: by name; else, where a change renamed the
scenario (``num_workers`` takes it from ``.../w2`` to ``.../w8``), by its loop: the name's first part
(the dataset's class under ``pinprof profile``, the mode under ``pinprof run``) and the transfer mode,
where exactly one scenario on each side has them. Scenarios left without a pair (a training loader
against a validation one, pageable against pinned_nb) are named, never compared. The figure judged is the mean per steady batch (what an epoch costs, as in the diagnosis); the
median (the typical batch) is shown beside it. The noise of a phase is the larger of the two runs'
robust batch-to-batch spreads (1.4826 x the median absolute deviation), and at least
``FLOOR_SHARE`` of the before batch: a difference within it is "no measurable difference". This is
stricter than a standard error on purpose: two runs of one script differ by more than their batches
say (the machine's state, the files' cache), and a report must not call that drift a gain.

Beside the phases, two columns are compared the same way: ``gc_ms``, the full garbage collections
inside a batch (phase ``gc``), and ``pinprof_ms``, pinprof's own time on the loop's thread (phase
``pinprof``); a file without one (an nsys import, an older pinprof) leaves it out.

With several runs a side (``compare_runs``), each run is reduced to its mean per steady batch, and
the noise is the half-width of the 95% interval of the difference of the two sides' means of runs
(Welch's: ``analysis.stats.difference_interval``), at least ``FLOOR_SHARE`` of the before batch: the
between-run noise, drift of the machine included, which one run a side cannot separate from a change
(pyperf's and ``torch.utils.benchmark``'s rule: judge a change by repeated processes, not by the
samples of one).

``compare`` and ``compare_runs`` return one ``PhaseChange`` per (pair, phase) measured on both sides:
    before, after (str: scenario names), phase (str), before_mean_ms, after_mean_ms,
    before_median_ms, after_median_ms, delta_ms (after mean - before mean; negative is faster),
    noise_ms, ratio (|delta| / noise), measurable (bool), before_batches, after_batches (int: steady
    batches, all runs of a side together), before_runs, after_runs (int: runs a side).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd

from profiler.analysis.compare import spread_ms
from profiler.analysis.stats import difference_interval

PHASES = ("batch", "fetch", "pin", "stage", "layout", "h2d", "wait", "cpu_work", "compute", "gc", "pinprof")
FLOOR_SHARE = 0.01
# What a line calls a column that is no phase of the loop's own: the full garbage collections inside
# the batches (``gc_ms``: a change such as ``gc.freeze()`` shows here), and pinprof's own time on the
# loop's thread (``pinprof_ms``: two runs under different pinprof versions or settings).
LABELS = {"gc": "full garbage collections", "pinprof": "pinprof's own time"}


@dataclass
class PhaseChange:
    before: str
    after: str
    phase: str
    before_mean_ms: float
    after_mean_ms: float
    before_median_ms: float
    after_median_ms: float
    delta_ms: float
    noise_ms: float
    ratio: float
    measurable: bool
    before_batches: int
    after_batches: int
    before_runs: int = 1
    after_runs: int = 1

    def text(self) -> str:
        """``batch: 2.412 ms faster per batch (mean 68.522 -> 66.110 ms, -3.5%; median 62.437 -> 60.001 ms),
        3.8x the noise (+/-0.630 ms)``, or ``no measurable difference``."""
        d = self.delta_ms
        rel = f", {d / self.before_mean_ms:+.1%}" if self.before_mean_ms else ""
        figures = (
            f"mean {self.before_mean_ms:.3f} -> {self.after_mean_ms:.3f} ms{rel}; "
            f"median {self.before_median_ms:.3f} -> {self.after_median_ms:.3f} ms"
        )
        name = LABELS.get(self.phase, self.phase)
        runs = self.before_runs > 1 or self.after_runs > 1
        what = "the runs' noise" if runs else "the noise"
        if not self.measurable:
            return f"{name}: no measurable difference ({figures}; within {what} of +/-{self.noise_ms:.3f} ms)"
        way = "faster" if d < 0 else "slower"
        if not self.noise_ms > 0:
            return f"{name}: {abs(d):.3f} ms {way} per batch ({figures}); the runs show no noise to judge it by"
        return (
            f"{name}: {abs(d):.3f} ms {way} per batch ({figures}), {self.ratio:.1f}x {what} (+/-{self.noise_ms:.3f} ms)"
        )


def _steady(tl: pd.DataFrame) -> dict[str, np.ndarray]:
    """Each scenario's steady rows, as positions in ``tl``: a column is taken for them one at a time,
    never the rows whole (two 1,000,000-row timelines copied so held 0.4 GB more)."""
    pos = np.flatnonzero(~tl["warmup"].to_numpy(bool))
    names = tl["scenario"].to_numpy()[pos]
    groups = pd.Series(pos).groupby(names, sort=False).indices
    return {str(k): pos[v] for k, v in groups.items()}


def _values(tl: pd.DataFrame, col: str, rows: np.ndarray) -> np.ndarray:
    """``col`` at ``rows``, as floats, its empty cells left out."""
    v = tl[col].to_numpy(float, na_value=np.nan)[rows]
    return v[~np.isnan(v)]


def _loops(tl: pd.DataFrame, names: list[str]) -> dict[tuple[str, str], list[str]]:
    """The scenarios ``names`` of ``tl`` by their loop: (the name's first part, the transfer mode)."""
    modes = tl.groupby(tl.scenario.astype(str), sort=False)["mode"].first() if "mode" in tl else pd.Series()
    out: dict[tuple[str, str], list[str]] = {}
    for name in names:
        out.setdefault((name.split("/")[0], str(modes.get(name, ""))), []).append(name)
    return out


def pairs(before: pd.DataFrame, after: pd.DataFrame) -> list[tuple[str, str, bool]]:
    """(before scenario, after scenario, paired by name); the rule is the module docstring's."""
    b, a = list(dict.fromkeys(before.scenario.astype(str))), list(dict.fromkeys(after.scenario.astype(str)))
    out = [(s, s, True) for s in b if s in a]
    loops_b = _loops(before, [s for s in b if s not in a])
    loops_a = _loops(after, [s for s in a if s not in b])
    for key, xs in loops_b.items():
        ys = loops_a.get(key, [])
        if len(xs) == 1 and len(ys) == 1:
            out.append((xs[0], ys[0], False))
    return out


def unpaired(before: pd.DataFrame, after: pd.DataFrame, matched: list[tuple[str, str, bool]]) -> list[str]:
    """One line naming the scenarios of either side that ``matched`` leaves out, or none."""
    paired_b, paired_a = {x for x, _, _ in matched}, {y for _, y, _ in matched}
    left_b = [s for s in dict.fromkeys(before.scenario.astype(str)) if s not in paired_b]
    left_a = [s for s in dict.fromkeys(after.scenario.astype(str)) if s not in paired_a]
    if not left_b and not left_a:
        return []
    sides = [f"before {', '.join(left_b)}"] * bool(left_b) + [f"after {', '.join(left_a)}"] * bool(left_a)
    return [
        f"not compared: {'; '.join(sides)} (no scenario of the same name, or of the same loop and mode alone, "
        "on the other side, or no steady batch)"
    ]


def _judged(
    pair: tuple[str, str],
    p: str,
    means: tuple[float, float],
    medians: tuple[float, float],
    noise: float,
    batches: tuple[int, int],
    runs: tuple[int, int] = (1, 1),
) -> PhaseChange:
    """The change of phase ``p`` from the pair's before scenario to its after, judged against ``noise``."""
    delta = float(means[1] - means[0])
    # no noise at all (every batch the same on both sides): a difference is one, but no multiple
    ratio = abs(delta) / noise if noise > 0 else (float("nan") if delta else 0.0)
    measurable = bool(ratio > 1.0) or (noise == 0 and delta != 0)
    return PhaseChange(
        pair[0],
        pair[1],
        p,
        float(means[0]),
        float(means[1]),
        float(medians[0]),
        float(medians[1]),
        delta,
        noise,
        ratio,
        measurable,
        batches[0],
        batches[1],
        runs[0],
        runs[1],
    )


def compare(before: pd.DataFrame, after: pd.DataFrame) -> tuple[list[PhaseChange], list[tuple[str, str, bool]]]:
    """Every (pair, phase) measured on both sides (module docstring), and the pairs."""
    sb, sa = _steady(before), _steady(after)
    matched = [(x, y, n) for x, y, n in pairs(before, after) if x in sb and y in sa]
    out = []
    for x, y, _ in matched:
        ib, ia = sb[x], sa[y]
        batch = _values(before, "batch_ms", ib)
        floor = FLOOR_SHARE * float(batch.mean()) if len(batch) else 0.0
        for p in PHASES:
            col = f"{p}_ms"
            if col not in before or col not in after:
                continue
            vb, va = _values(before, col, ib), _values(after, col, ia)
            if not len(vb) or not len(va):
                continue
            noise = max(spread_ms(vb), spread_ms(va), floor)
            means, medians = (vb.mean(), va.mean()), (np.median(vb), np.median(va))
            out.append(_judged((x, y), p, means, medians, noise, (len(vb), len(va))))
    return out, matched


def compare_runs(
    befores: list[pd.DataFrame], afters: list[pd.DataFrame]
) -> tuple[list[PhaseChange], list[tuple[str, str, bool]]]:
    """Every (pair, phase) measured in at least two runs on each side, judged by the between-run noise
    (module docstring); one run a side: ``compare``. The pairs are the first runs' (``pairs``); a run
    without the pair's scenario leaves that pair's side a run short."""
    if len(befores) == 1 and len(afters) == 1:
        return compare(befores[0], afters[0])
    steady = [(_steady(t), t) for t in befores], [(_steady(t), t) for t in afters]
    first_b, first_a = steady[0][0][0], steady[1][0][0]
    matched = [(x, y, n) for x, y, n in pairs(befores[0], afters[0]) if x in first_b and y in first_a]
    out = []
    for x, y, _ in matched:
        runs_b = [(t, s[x]) for s, t in steady[0] if x in s]
        runs_a = [(t, s[y]) for s, t in steady[1] if y in s]
        batch = np.concatenate([_values(t, "batch_ms", rows) for t, rows in runs_b])
        floor = FLOOR_SHARE * float(batch.mean()) if len(batch) else 0.0
        for p in PHASES:
            col = f"{p}_ms"
            vb = [_values(t, col, rows) for t, rows in runs_b if col in t]
            va = [_values(t, col, rows) for t, rows in runs_a if col in t]
            vb, va = [v for v in vb if len(v)], [v for v in va if len(v)]
            if len(vb) < 2 or len(va) < 2:
                continue
            mb, ma = np.array([v.mean() for v in vb]), np.array([v.mean() for v in va])
            noise = max(difference_interval(mb, ma), floor)
            medians = (np.median([np.median(v) for v in vb]), np.median([np.median(v) for v in va]))
            batches = (sum(len(v) for v in vb), sum(len(v) for v in va))
            out.append(_judged((x, y), p, (mb.mean(), ma.mean()), medians, noise, batches, (len(vb), len(va))))
    return out, matched


def one_run_a_side() -> str:
    """What a comparison of one run a side cannot tell, said under it."""
    return (
        "one run a side: the noise above is the batches' own spread within each run; drift between runs "
        "(the machine's load and clocks, the file cache) is not separated from the change. Give several "
        "runs a side to judge it by the runs' own spread: pinprof compare before1 before2 before3 -- after1 after2 after3"
    )


def lines(changes: list[PhaseChange], matched: list[tuple[str, str, bool]]) -> list[str]:
    """Per pair: a line for the batch time, then one per phase that changed measurably."""
    out = []
    for x, y, by_name in matched:
        mine = [c for c in changes if c.before == x and c.after == y]
        if not mine:
            continue
        head = x if x == y else f"{x} -> {y}" + ("" if by_name else " (paired by loop and mode: the names differ)")
        batch = next((c for c in mine if c.phase == "batch"), None)
        n = f"{mine[0].before_batches} and {mine[0].after_batches} steady batches"
        if mine[0].before_runs > 1 or mine[0].after_runs > 1:
            n += f" in {mine[0].before_runs} and {mine[0].after_runs} runs"
        out.append(f"{head} ({n}): {batch.text() if batch else 'no batch time on both sides'}")
        out.extend(f"  {c.text()}" for c in mine if c.phase != "batch" and c.measurable)
    return out


def size_notes(before: pd.DataFrame, after: pd.DataFrame, matched: list[tuple[str, str, bool]]) -> list[str]:
    """A line for each pair whose batch sizes differ: a batch of 1,024 items takes longer than one of
    64 by design, so the time per item is what compares."""
    if "batch_size" not in before or "batch_size" not in after:
        return []
    sb, sa = _steady(before), _steady(after)
    out = []
    for x, y, _ in matched:
        nb, na = _values(before, "batch_size", sb[x]), _values(after, "batch_size", sa[y])
        if not len(nb) or not len(na) or int(nb[0]) == int(na[0]):
            continue
        b, a = int(nb[0]), int(na[0])
        per_b = _values(before, "batch_ms", sb[x]).mean() / b
        per_a = _values(after, "batch_ms", sa[y]).mean() / a
        out.append(
            f"{x} -> {y}: the batch size changed ({b} -> {a}), so per-batch times do not compare; "
            f"per item: {per_b:.4f} -> {per_a:.4f} ms ({per_a / per_b - 1:+.1%})"
        )
    return out


def as_json(changes: list[PhaseChange]) -> list[dict[str, Any]]:
    return [asdict(c) for c in changes]
