"""Name the bottleneck of each scenario, with the evidence in numbers and the change that pays most.

Input: a timeline (pinprof's or an nsys import). Each scenario's measured batches (warm-up left out)
are reduced to medians, then every rule below looks at them. A rule that fires gives a ``Finding``:
a verdict, the evidence, and changes ranked by the expected gain in ms per batch, estimated from the
measured phases (never from assumed speeds, except the pinned bandwidth, which is measured too: from
the run's own pinned copies, or a calibration).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

import numpy as np
import pandas as pd

# --- thresholds, each with its reason ----------------------------------------------------------
# The loop waits on the loader for at least half of each batch: nothing downstream can matter more.
LOADER_SHARE = 0.5
# User CPU work or GPU compute is at least half the batch: that, not the input pipeline, sets the pace.
WORK_SHARE = 0.5
# A pageable copy this many times slower than a pinned one of the same size is mostly the driver's
# hidden staging (FACTS.md: 0.90 ms against 0.24 ms for 12.5 MiB on the H200, a factor 3.7).
HIDDEN_STAGING_FACTOR = 2.0
# The loop waits for at least half of the copy: the transfer is exposed, not overlapped.
EXPOSED_SHARE = 0.5
# The bar for "too small to matter": the exposed transfer is under 1% of the batch time.
TOO_SMALL_SHARE = 0.01
# Epoch-time benchmarks differ by several percent from run to run (FACTS.md: 7.12 s against 7.41 s
# with only pin_memory changed, bigger than any possible transfer saving there). A saving below
# this share of the batch is invisible to them, although pinprof measures it per batch.
EPOCH_NOISE_SHARE = 0.05
# Below this many measured batches the medians are not trusted for a verdict.
MIN_BATCHES = 3
# Several ranks: one rank's loader wait this many times the other ranks' median makes every rank
# wait for it at the next collective.
IMBALANCE_FACTOR = 1.5
# Several ranks: pinned copies slower than this share of the single-rank calibration mean the ranks'
# copies compete for host memory bandwidth or a shared PCIe switch.
CONTENTION_SHARE = 0.8


class Verdict(str, Enum):
    NO_DATA = "no_data"
    NO_GPU = "no_gpu"
    LOADER_BOUND = "loader_bound"
    PIN_THREAD_BOUND = "pin_thread_bound"
    HIDDEN_STAGING = "hidden_staging"
    EXPOSED_TRANSFER = "exposed_transfer"
    NON_BLOCKING_PAGEABLE = "non_blocking_on_pageable"
    CPU_WORK_BOUND = "cpu_work_bound"
    COMPUTE_BOUND = "compute_bound"
    TOO_SMALL = "transfer_too_small"


@dataclass
class Change:
    what: str
    gain_ms: float  # expected saving per batch, from measured phases


@dataclass
class Finding:
    verdict: Verdict
    evidence: str
    changes: list[Change] = field(default_factory=list)

    @property
    def gain_ms(self) -> float:
        return max((c.gain_ms for c in self.changes), default=0.0)


@dataclass
class Diagnosis:
    scenario: str
    mode: str
    batches: int
    medians: dict[str, float]
    findings: list[Finding]

    @property
    def verdict(self) -> Verdict:
        return self.findings[0].verdict if self.findings else Verdict.NO_DATA


def _med(g: pd.DataFrame, col: str) -> float:
    return float(g[col].median()) if col in g and g[col].notna().any() else float("nan")


# Pinned copies within this factor of a batch's size stand in for its pinned bandwidth: the rate
# climbs steeply below about 4 MiB (FACTS.md: 5.5 GB/s at 64 KiB, 37 at 768 KiB, 54 at 12.5 MiB).
SIZE_MATCH_FACTOR = 2.0


def pinned_rate_GBps(tl: pd.DataFrame, nbytes: float, calibration: pd.DataFrame | None = None) -> float:
    """Pinned H2D bandwidth for copies of ``nbytes``: measured in this run if it has pinned copies of a
    similar size, else interpolated in a calibration (columns bytes, pinned_GBps), else NaN."""
    pinned = tl[(tl.src_memory == "pinned") & tl.h2d_ms.notna() & (tl.h2d_ms > 0) & ~tl.warmup]
    near = pinned[(pinned.bytes >= nbytes / SIZE_MATCH_FACTOR) & (pinned.bytes <= nbytes * SIZE_MATCH_FACTOR)]
    if len(near):
        return float((near.bytes / near.h2d_ms / 1e6).median())
    if calibration is not None and len(calibration):
        cal = calibration.sort_values("bytes")
        return float(np.interp(np.log(nbytes), np.log(cal.bytes.to_numpy(float)), cal.pinned_GBps.to_numpy(float)))
    return float("nan")


def diagnose(tl: pd.DataFrame, calibration: pd.DataFrame | None = None, cores: int | None = None) -> list[Diagnosis]:
    """One ``Diagnosis`` per scenario, findings ordered by expected gain (largest first).

    ``cores``: CPU cores of the machine that was measured (meta.json's cpu_count), so that the
    advice never asks for more loader workers than there are cores.
    """
    out = []
    for scen, g in tl[~tl.warmup].groupby("scenario", sort=False, dropna=False):
        m = {c: _med(g, f"{c}_ms") for c in ("fetch", "pin", "stage", "h2d", "h2d_call", "cpu_work", "compute",
                                              "wait", "overlap", "batch")}
        m["bytes"] = float(g.bytes.median())
        m["pinned_GBps"] = pinned_rate_GBps(tl, m["bytes"], calibration)
        cfg = g.iloc[0]
        findings = _findings(m, cfg, len(g), cores)
        findings.sort(key=lambda f: (-f.gain_ms, list(Verdict).index(f.verdict)))
        out.append(Diagnosis(str(scen), str(cfg["mode"]), len(g), m, findings))
    return out


def _fmt(ms: float) -> str:
    return "n/a" if np.isnan(ms) else f"{ms:.3f} ms"


def _findings(m: dict[str, float], cfg: pd.Series, n: int, cores: int | None = None) -> list[Finding]:
    if n < MIN_BATCHES:
        return [Finding(Verdict.NO_DATA, f"only {n} measured batch(es); run more (--batches) for a verdict")]
    f: list[Finding] = []
    batch = m["batch"]
    fetch = np.nan_to_num(m["fetch"])
    gpu = not np.isnan(m["h2d"])
    pin_memory = bool(cfg.get("pin_memory")) if pd.notna(cfg.get("pin_memory")) else False
    workers = int(cfg["num_workers"]) if pd.notna(cfg.get("num_workers")) else None
    consumer = batch - fetch  # the loop's own time per batch, loader wait excluded
    if not gpu:
        f.append(Finding(Verdict.NO_GPU, f"no GPU phases measured; loader/pin figures are: fetch {_fmt(m['fetch'])}, "
                         f"pin {_fmt(m['pin'])}, stage {_fmt(m['stage'])}, CPU work {_fmt(m['cpu_work'])} "
                         f"per {_fmt(batch)} batch. Run on a CUDA machine for the transfer verdicts."))
    if pin_memory and not np.isnan(m["pin"]) and workers and m["pin"] > consumer:
        f.append(Finding(Verdict.PIN_THREAD_BOUND,
                         f"the single pin thread needs {_fmt(m['pin'])} per batch but the loop consumes one every "
                         f"{_fmt(consumer)}: batches wait for pinning (fetch {_fmt(m['fetch'])}).",
                         [Change("use the staged mode (chunked copy into reused pinned buffers on the main thread)",
                                 m["pin"] - consumer),
                          Change("use larger batches: the pin thread's per-batch overhead is then paid less often",
                                 0.0),
                          Change("note: pinning inside worker processes is no remedy; memory pinned in a worker is "
                                 "not usable by the training process", 0.0)]))
    if fetch >= LOADER_SHARE * batch:
        if cores is not None and workers is not None and workers >= cores:
            changes = [Change(f"make __getitem__/the transforms cheaper: num_workers ({workers}) already uses all "
                              f"{cores} CPU cores, so more workers cannot help", fetch)]
        else:
            changes = [Change(f"raise num_workers (now {workers}) so batches are ready when the loop asks", fetch),
                       Change("raise prefetch_factor, or make __getitem__/the transforms cheaper", fetch)]
        if pin_memory and not np.isnan(m["pin"]) and workers == 0:
            changes.append(Change(f"set pin_memory=False: with no workers the pin ({_fmt(m['pin'])}) runs inside "
                                  "next() on the main thread", m["pin"]))
        f.append(Finding(Verdict.LOADER_BOUND, f"the loop waits {_fmt(m['fetch'])} of each {_fmt(batch)} batch "
                         f"({fetch / batch:.0%}) on the DataLoader; pinning or copy tricks cannot help.", changes))
    cpu = np.nan_to_num(m["cpu_work"])
    if cpu >= WORK_SHARE * batch:
        f.append(Finding(Verdict.CPU_WORK_BOUND, f"CPU work takes {_fmt(m['cpu_work'])} of each {_fmt(batch)} batch "
                         f"({cpu / batch:.0%}); the input pipeline and the copy are not the bottleneck.",
                         [Change("make the CPU work cheaper, or move it to the DataLoader workers", cpu)]))
    comp = np.nan_to_num(m["compute"])
    if comp >= WORK_SHARE * batch:
        f.append(Finding(Verdict.COMPUTE_BOUND, f"GPU compute takes {_fmt(m['compute'])} of each {_fmt(batch)} batch "
                         f"({comp / batch:.0%}): the input pipeline is fine.", []))
    if gpu:
        f.extend(_transfer_findings(m, cfg, batch))
    return f


def _transfer_findings(m: dict[str, float], cfg: pd.Series, batch: float) -> list[Finding]:
    f: list[Finding] = []
    mode, nb = str(cfg["mode"]), bool(cfg.get("non_blocking")) if pd.notna(cfg.get("non_blocking")) else False
    wait, h2d, rate = np.nan_to_num(m["wait"]), m["h2d"], m["pinned_GBps"]
    predicted = m["bytes"] / rate / 1e6 if rate and not np.isnan(rate) else float("nan")
    pageable = mode in ("pageable", "pageable_nb") or (not np.isnan(m["h2d_call"]) and mode == "auto")
    if pageable and not np.isnan(predicted) and h2d > HIDDEN_STAGING_FACTOR * predicted:
        f.append(Finding(Verdict.HIDDEN_STAGING,
                         f"the pageable copy of {m['bytes'] / 2**20:.2f} MiB takes {_fmt(h2d)} where the pinned "
                         f"bandwidth ({rate:.1f} GB/s) predicts {_fmt(predicted)}: {h2d / predicted:.1f}x, the "
                         "driver's hidden CPU-to-CPU staging.",
                         # overlapped behind CPU work the whole wait can go; at worst the staging goes
                         [Change("set pin_memory=True and copy with non_blocking=True on a side stream "
                                 "(mode pinned_nb)", max(wait, h2d - predicted)),
                          Change("or stage explicitly (mode staged) when pinning in the loader is too slow",
                                 max(0.0, h2d - predicted))]))
    if mode == "pageable_nb" or (nb and pageable):
        f.append(Finding(Verdict.NON_BLOCKING_PAGEABLE,
                         f"non_blocking=True on a pageable batch has no effect: the loop still waits {_fmt(wait)} "
                         f"for a {_fmt(h2d)} copy. The driver must copy pageable memory into its own pinned "
                         "buffer before the DMA, and does so inside the call.",
                         [Change("pin the batch (pin_memory=True) so non_blocking can overlap", wait)]))
    if not pageable and not np.isnan(h2d) and h2d > 0 and wait >= EXPOSED_SHARE * h2d \
            and wait >= TOO_SMALL_SHARE * batch:
        f.append(Finding(Verdict.EXPOSED_TRANSFER,
                         f"the loop is blocked {_fmt(wait)} for a {_fmt(h2d)} copy; only {_fmt(m['overlap'])} of "
                         "it overlaps other work.",
                         [Change("copy with non_blocking=True on a side stream and do CPU work (or queue GPU "
                                 "work) before using the batch (mode pinned_nb)", wait)]))
    share = wait / batch if batch else float("nan")
    saving = max([wait] + [c.gain_ms for x in f for c in x.changes])
    if share < TOO_SMALL_SHARE:
        f.append(Finding(Verdict.TOO_SMALL, f"the exposed transfer is {_fmt(wait)}, {share:.2%} of the "
                         f"{_fmt(batch)} batch: too small to matter.", []))
    elif saving < EPOCH_NOISE_SHARE * batch:
        f.append(Finding(Verdict.TOO_SMALL,
                         f"the best transfer change saves about {_fmt(saving)} per batch, {saving / batch:.1%} of "
                         f"the {_fmt(batch)} batch: below the ~{EPOCH_NOISE_SHARE:.0%} run-to-run noise of "
                         "epoch timing, so a benchmark that times epochs cannot see it; pinprof measures it per "
                         "batch.", []))
    return f


def render_text(diags: list[Diagnosis], comparisons: list[str] | None = None,
                ranks: list[str] | None = None) -> str:
    """The report a person reads: verdict, evidence, ranked changes, then the mode comparison."""
    lines = []
    for d in diags:
        lines.append(f"## {d.scenario}  ({d.batches} batches)")
        if not d.findings:
            lines.append("- no bottleneck rule fired: the phases are balanced.")
        for i, fd in enumerate(d.findings):
            lines.append(f"{'**Verdict**' if i == 0 else '- also'}: {fd.verdict.value.replace('_', ' ')} - {fd.evidence}")
            for c in sorted(fd.changes, key=lambda c: -c.gain_ms):
                gain = f" (saves about {c.gain_ms:.3f} ms/batch)" if c.gain_ms > 0 else ""
                lines.append(f"    - change: {c.what}{gain}")
        lines.append("")
    if ranks:
        lines.append("## Across ranks")
        lines.extend(f"- {r}" for r in ranks)
        lines.append("")
    if comparisons:
        lines.append("## Against pageable, same loader settings (medians, ms per batch)")
        lines.extend(f"- {c}" for c in comparisons)
        lines.append("")
    return "\n".join(lines)


def to_json(diags: list[Diagnosis]) -> list[dict[str, Any]]:
    out = []
    for d in diags:
        out.append({"scenario": d.scenario, "mode": d.mode, "batches": d.batches, "verdict": d.verdict.value,
                    "medians_ms": {k: (None if np.isnan(v) else v) for k, v in d.medians.items()},
                    "findings": [{**asdict(fd), "verdict": fd.verdict.value} for fd in d.findings]})
    return out


def diagnose_ranks(tl: pd.DataFrame, calibration: pd.DataFrame | None = None) -> list[str]:
    """Findings across the ranks of a distributed run (empty for a single process)."""
    rows = tl[~tl.warmup]
    if "world_size" not in rows or rows.world_size.max() < 2:
        return []
    out = []
    for scen, g in rows.groupby("scenario", sort=False):
        per_rank = g.groupby("rank")
        fetch = per_rank.fetch_ms.median()
        batch = per_rank.batch_ms.median()
        if len(fetch) > 1:
            slow = fetch.idxmax()
            others = fetch.drop(slow).median()
            if fetch[slow] > IMBALANCE_FACTOR * max(others, 1e-9) and fetch[slow] - others > TOO_SMALL_SHARE * batch.median():
                out.append(f"{scen}: rank imbalance - rank {slow} waits {fetch[slow]:.3f} ms per batch on its loader, "
                           f"the other ranks {others:.3f} ms; every rank waits for it at the next collective. "
                           f"Change: more workers or a cheaper shard for rank {slow} (saves about "
                           f"{fetch[slow] - others:.3f} ms/batch on all ranks).")
        pinned = g[(g.src_memory == "pinned") & g.h2d_ms.notna() & (g.h2d_ms > 0)]
        if len(pinned):
            nbytes = float(pinned.bytes.median())
            single = pinned_rate_GBps(tl.iloc[0:0], nbytes, calibration)
            rates = (pinned.bytes / pinned.h2d_ms / 1e6).groupby(pinned["rank"]).median()
            if not np.isnan(single) and rates.min() < CONTENTION_SHARE * single:
                out.append(f"{scen}: host-link contention - pinned H2D runs at {rates.min():.1f}-{rates.max():.1f} GB/s "
                           f"per rank against {single:.1f} GB/s for one rank alone (calibration): the ranks' copies "
                           "share host memory bandwidth or a PCIe switch. Change: overlap the copies with compute "
                           "(pinned_nb), or stagger them across ranks.")
    return out


SCENARIO_KEYS = ["batch_size", "num_workers", "prefetch_factor", "device"]


def compare_modes(tl: pd.DataFrame) -> list[str]:
    """What each mode changed against ``pageable`` with the same loader settings, phase by phase."""
    rows = tl[~tl.warmup]
    lines = []
    med = rows.groupby(["scenario", "mode"] + SCENARIO_KEYS, dropna=False, sort=False)[
        ["batch_ms", "fetch_ms", "pin_ms", "stage_ms", "h2d_ms", "wait_ms"]].median().reset_index()
    for key, g in med.groupby(SCENARIO_KEYS, dropna=False, sort=False):
        base = g[g["mode"] == "pageable"]
        if base.empty or len(g) < 2:
            continue
        b = base.iloc[0]
        for _, r in g[g["mode"] != "pageable"].iterrows():
            delta = r.batch_ms - b.batch_ms
            parts = [f"{p} {_signed(r[f'{p}_ms'] - (0.0 if np.isnan(b[f'{p}_ms']) else b[f'{p}_ms']))}"
                     for p in ("fetch", "pin", "stage", "h2d", "wait") if not np.isnan(r[f"{p}_ms"])]
            lines.append(f"{r.scenario} vs {b.scenario}: batch {_signed(delta)} ms ({delta / b.batch_ms:+.1%}); "
                         + ", ".join(parts))
    return lines


def _signed(x: float) -> str:
    return "n/a" if np.isnan(x) else f"{x:+.3f}"
