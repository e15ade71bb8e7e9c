"""The bottleneck rules: each looks at one scenario's medians and may give a ``Finding``.

Each finding carries a verdict, the evidence in numbers, and changes with their expected gain in ms
per batch, estimated from the measured phases (never from assumed speeds, except the pinned
bandwidth, which is measured too: from the run's own pinned copies, or a calibration).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from profiler.analysis.findings import Change, Finding, Verdict

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


def _fmt(ms: float) -> str:
    return "n/a" if np.isnan(ms) else f"{ms:.3f} ms"


def findings(m: dict[str, float], cfg: pd.Series, n: int, cores: int | None = None) -> list[Finding]:
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
