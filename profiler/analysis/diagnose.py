"""Name the bottleneck of each scenario, with the evidence in numbers and the change that pays most.

Input: a timeline (pinprof's or an nsys import). Each scenario's steady batches (start-up batches
left out: ``profiler.analysis.warmup``) are reduced to one statistic, the **mean** of each phase: a
loop's time is the sum of its batches, so means add up (no phase can take more than 100% of the batch
it is part of, which a median over a mean could) and a saving per batch is what an epoch saves. A
loader delivers in bursts (most batches wait nothing, a few wait long), which only a mean counts. The
headline (``headline``) says whether the loop is input bound, then every rule of
``profiler.analysis.rules`` reads the means, and the findings are ranked by expected saving. The
medians (the typical batch) are kept beside them for the report.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd

from profiler.analysis.clock import busy_time
from profiler.analysis.findings import Diagnosis, Finding, Headline, InputBound, Verdict
from profiler.analysis.headline import headline
from profiler.analysis.rates import pinned_rate_GBps
from profiler.analysis.rules import MIN_BATCHES, Case, run_rules, too_few
from profiler.analysis.rules.base import TOO_SMALL_SHARE, case_text
from profiler.analysis.rules.pace import LOADER_SHARE
from profiler.analysis.stats import ratio_interval
from profiler.timeline.schema import CONFIG

# Medians the rules read: <name>_ms columns, then counts.
TIMES = (
    "fetch",
    "pin",
    "pin_cpu",
    "pin_alloc",
    "stage",
    "layout",
    "h2d",
    "h2d_gpu",
    "h2d_call",
    "hidden_stage",
    "dma",
    "cpu_work",
    "compute",
    "wait",
    "overlap",
    "gpu_idle",
    "batch",
    "pinprof",
    "gc",
    "gc_fetch",
)
COUNTS = ("pin_faults", "pin_allocs", "kernels")  # medians, under their own names
# On the H200 a pin-bound loop had a median fetch of 0.22 ms and a mean of 12 ms
# (tests/data/h200_pin_bound): the median said the loader never made the loop wait.

# Findings that say only what could not be judged (no GPU, no copy): among findings of equal gain they
# come after one that says what sets the pace, which a CPU-only run's verdict line showed as "no gpu"
# under a headline that named the compute.
UNJUDGED = (Verdict.NO_GPU, Verdict.NO_COPY)


def _rank(f: Finding, batch: float) -> tuple[float, bool, bool, int]:
    """Findings by expected saving, largest first. A saving under ``TOO_SMALL_SHARE`` of the batch ranks
    as none, after the findings that say what sets the pace: a Lightning loop on an H100
    (tests/data/h100_rows/lightning-val) led with "non blocking on pageable" for a 0.056 ms wait in a
    7.567 ms batch that its GPU compute filled, beside "transfer too small to matter"."""
    small = 0.0 < f.gain_ms < TOO_SMALL_SHARE * batch
    return (0.0 if small else -f.gain_ms, small, f.verdict in UNJUDGED, list(Verdict).index(f.verdict))


def _stat(g: pd.DataFrame, col: str, how: str = "median") -> float:
    """``how`` ("median" or "mean") of a column over the batches that measured it; NaN if none did."""
    return float(g[col].astype(float).agg(how)) if col in g and g[col].notna().any() else float("nan")


def _share_interval(g: pd.DataFrame, exposed: float) -> tuple[float, float]:
    """The 95% interval of the input share (loader wait and the mean exposed transfer over the batch
    time) over the scenario's steady batches, in their order (``analysis.stats.ratio_interval``)."""
    batch = g["batch_ms"].to_numpy(float, na_value=np.nan) if "batch_ms" in g else np.empty(0)
    fetch = g["fetch_ms"].to_numpy(float, na_value=np.nan) if "fetch_ms" in g else np.zeros(len(batch))
    keep = ~np.isnan(batch)
    if "batch" in g:  # the batches in the order they ran
        keep_order = np.argsort(g["batch"].to_numpy(), kind="stable")
        batch, fetch, keep = batch[keep_order], fetch[keep_order], keep[keep_order]
    wait = np.nan_to_num(fetch[keep]) + (exposed if exposed == exposed else 0.0)
    return ratio_interval(wait, batch[keep])


def _groups(tl: pd.DataFrame) -> Iterator[tuple[object, pd.DataFrame]]:
    """(scenario, its measured rows), scenarios in order of appearance; each group's rows taken alone
    (a filter of the whole frame first would copy all of it at once)."""
    measured = np.flatnonzero(~tl.warmup.to_numpy(bool))
    codes, names = pd.factorize(tl.scenario.to_numpy(object)[measured], use_na_sentinel=False)
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(names) + 1))
    for k in range(len(names)):
        yield names[k], tl.take(measured[order[bounds[k] : bounds[k + 1]]])


def _gc(g: pd.DataFrame) -> dict[str, float]:
    """The batches a full garbage collection fell in and the longest such pause (ms); NaN where the
    collections were not watched (an nsys import, an older file)."""
    if "gc_ms" not in g or g.gc_ms.isna().all():
        return {"gc_batches": float("nan"), "gc_longest": float("nan")}
    ms = g.gc_ms.astype(float)
    return {"gc_batches": float((ms > 0).sum()), "gc_longest": float(ms.max())}


def _busy(g: pd.DataFrame) -> dict[str, float]:
    """``busy_share``: the share of the batches whose ``compute_ms`` is the kernels' busy time (CUPTI's
    kernel records; 0 where no column says: an nsys import, an older file, ``clock.busy_time``). Over
    those batches, two means (ms) of the time the GPU had none of the step's work: ``launch_gap``,
    inside the span of a step's kernels (``compute_start_ms`` to ``compute_end_ms``) that none of them
    ran (there ``compute_ms`` is the kernels' busy time; with the events it is a span itself);
    ``after_step``, from a step's last kernel to the batch's end (the next ``next()``) or to the next batch's first copy or kernel if that came sooner
    (``after_step_ms``), less any garbage collection in the batch (``gc_ms``, its own finding)."""
    nan = float("nan")
    busy = busy_time(g)
    if not busy.any():
        return {"busy_share": 0.0, "launch_gap": nan, "after_step": nan}
    gap = after = nan
    if {"compute_start_ms", "compute_end_ms", "compute_ms"} <= set(g.columns):
        c = g[busy]
        span = c.compute_end_ms.astype(float) - c.compute_start_ms.astype(float)
        gaps = (span - c.compute_ms.astype(float)).clip(lower=0.0)
        gap = float(gaps.mean()) if gaps.notna().any() else nan
        if {"batch_end_ms", "h2d_start_ms"} <= set(c.columns):
            tail = after_step_ms(c)
            if "gc_ms" in c:
                tail = np.clip(tail - np.nan_to_num(c.gc_ms.to_numpy(float)), 0.0, None)
            after = float(np.nanmean(tail)) if np.isfinite(tail).any() else nan
    return {"busy_share": float(busy.mean()), "launch_gap": gap, "after_step": after}


def after_step_ms(rows: pd.DataFrame) -> np.ndarray:
    """Per row (ms), one scenario's rows in batch order: from the step's last kernel
    (``compute_end_ms``) until the batch's end (``batch_end_ms``: the next ``next()``), or until the
    next row's first copy or kernel if that began sooner (a copy queued ahead, as a prefetch loop's),
    clipped at 0. With CUPTI's records this is time the GPU had none of the loop's work: in a loop that
    synchronizes each step (``loss.item()``), the host's work between that synchronization and the next
    batch's copy. NaN where the step has no kernel. Ranks of a merged ``torchrun`` run each on their own
    GPU: a row's next is its rank's."""
    if "rank" in rows and rows["rank"].nunique() > 1:
        out = np.full(len(rows), np.nan)
        for _, at in rows.groupby("rank", sort=False).indices.items():
            out[at] = after_step_ms(rows.iloc[at].drop(columns="rank"))
        return out
    first = np.fmin(rows.h2d_start_ms.to_numpy(float), rows.compute_start_ms.to_numpy(float))
    later = np.append(first[1:], np.nan)  # fmin ignores the last row's NaN: its own end bounds it
    end = np.fmin(rows.batch_end_ms.to_numpy(float), later)
    return np.clip(end - rows.compute_end_ms.to_numpy(float), 0.0, None)


def diagnose(
    tl: pd.DataFrame,
    calibration: pd.DataFrame | None = None,
    cores: int | None = None,
    loaders: dict[str, Any] | None = None,
) -> list[Diagnosis]:
    """One ``Diagnosis`` per scenario, findings ordered by expected gain (largest first).

    ``cores``: CPU cores of the machine that was measured (meta.json's cpu_count); ``loaders``:
    meta.json's ``loaders`` (how busy each loader's workers were), so that the advice asks for more
    loader workers than there are cores only where the workers waited rather than computed.
    """
    out = []
    # The columns a diagnosis reads, before any row is taken: each copy of a 1,000,000-row timeline
    # with all its columns cost 400 MB.
    wanted = ["scenario", "warmup", "mode", "bytes", "src_memory", "device", "run", "batch", "gpu_clock"]
    wanted += [*CONFIG, *(f"{c}_ms" for c in TIMES), *COUNTS, "h2d_ms", "compute_start_ms", "compute_end_ms"]
    wanted += ["h2d_start_ms", "batch_end_ms", "rank"]
    tl = tl[[c for c in dict.fromkeys(wanted) if c in tl]]
    for scen, g in _groups(tl):
        m = {c: _stat(g, f"{c}_ms", "mean") for c in TIMES}
        m.update({c: _stat(g, c) for c in COUNTS})
        m.update(_gc(g))
        m.update(_busy(g))
        medians = {c: _stat(g, f"{c}_ms") for c in TIMES}
        m["bytes"] = float(g.bytes.median())
        m["pinned_GBps"] = pinned_rate_GBps(tl, m["bytes"], calibration)
        cfg = g.iloc[0]
        if len(g) < MIN_BATCHES:
            findings, head = [too_few(len(g))], Headline(InputBound.UNKNOWN, float("nan"), "too few batches")
        else:
            seen = (loaders or {}).get(str(scen))
            case = Case(m, cfg, cores, loader=seen if isinstance(seen, dict) else {})
            findings, head = run_rules(case), headline(case, _share_interval(g, case.exposed))
        findings.sort(key=lambda f: _rank(f, m["batch"]))
        loop, framework = case_text(cfg, "loop"), case_text(cfg, "framework")
        d = Diagnosis(str(scen), str(cfg["mode"]), len(g), m, findings, head, medians, loop, framework)
        if len(g) >= MIN_BATCHES:
            d.could_be, d.open_because = unsettled(findings, m["batch"], _share_interval(g, 0.0))
        out.append(d)
    return out


def unsettled(findings: list[Finding], batch: float, fetch_share: tuple[float, float]) -> tuple[list[Verdict], str]:
    """Whether the run's own uncertainty leaves the verdict open: where the 95% interval of the loader
    wait's share of the batch (``fetch_share``) spans the loader-bound rule's threshold
    (``LOADER_SHARE``), that rule may fire in one run of the script and not in the next; if its finding
    leads (or would lead, by the saving its interval allows), the verdict is not settled between it and
    the finding that leads without it. A script whose share sat near 5% read "loader bound" in some runs
    and "compute bound" in others. Returns (the verdicts it could be, why), or ([], "")."""
    lo, hi = (min(max(v, 0.0), 1.0) for v in fetch_share)  # a share: the t interval can reach past 0
    if not (lo == lo and hi == hi and lo < LOADER_SHARE <= hi and batch > 0):
        return [], ""
    rest = [f for f in findings if f.verdict != Verdict.LOADER_BOUND]
    if len(rest) == len(findings):  # the rule did not fire: would it lead where it had?
        if rest and rest[0].gain_ms > hi * batch:
            return [], ""
    elif findings[0].verdict != Verdict.LOADER_BOUND:
        return [], ""
    if not rest:  # nothing else to be: no verdict to weigh it against
        return [], ""
    other = rest[0].verdict
    why = (
        f"the loader's wait is {lo:.1%}-{hi:.1%} of the batch at 95% over the steady batches, across the "
        f"loader-bound threshold of {LOADER_SHARE:.0%}"
    )
    return [Verdict.LOADER_BOUND, other], why
