"""The bottleneck rules: each looks at one scenario's medians (a ``Case``) and may give a ``Finding``.

``RULES`` lists them in the order they run; ``findings`` runs them all. A rule is a small function:
its name says what it detects, its body when it fires, and the ``Finding`` it returns the evidence and
the remedies.

Each finding carries a verdict, the evidence in numbers, and changes with their expected gain in ms
per batch, estimated from the measured phases (never from assumed speeds, except the pinned
bandwidth, which is measured too: from the run's own pinned copies, or a calibration).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from profiler.analysis.findings import Change, Finding, Verdict

# --- thresholds, each with its reason ----------------------------------------------------------
# The loop waits on the loader for at least half of each batch: nothing downstream can matter more.
LOADER_SHARE = 0.5
# User CPU work or GPU compute is at least half the batch: that, not the input pipeline, sets the pace.
WORK_SHARE = 0.5
# A pageable copy this many times slower than a pinned one of the same size is mostly the driver's
# hidden staging (1.51 ms against 0.25 ms for 12.5 MiB on the H200, a factor 5.9: reports/h200-bandwidth/).
HIDDEN_STAGING_FACTOR = 2.0
# The loop waits for at least half of the copy: the transfer is exposed, not overlapped.
EXPOSED_SHARE = 0.5
# The bar for "too small to matter": the exposed transfer is under 1% of the batch time.
TOO_SMALL_SHARE = 0.01
# Epoch-time benchmarks differ by several percent from run to run (the naive benchmark's pinned-minus-
# pageable batch time was -13.8% in one H200 run and +14.4% in another: DESIGN.md, "Noise"). A saving
# below this share of the batch is invisible to them, although pinprof measures it per batch.
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


def _flag(cfg: pd.Series, key: str) -> bool:
    return bool(cfg.get(key)) if pd.notna(cfg.get(key)) else False


@dataclass
class Case:
    """One scenario's medians (ms, ``bytes``, ``pinned_GBps``) and settings, as the rules read them."""

    m: dict[str, float]
    cfg: pd.Series
    cores: int | None = None
    found: list[Finding] = field(default_factory=list)  # what the rules before this one gave

    def __post_init__(self) -> None:
        m = self.m
        self.batch, self.fetch = m["batch"], float(np.nan_to_num(m["fetch"]))
        self.gpu = not np.isnan(m["h2d"])
        self.pin_memory = _flag(self.cfg, "pin_memory")
        self.workers = int(self.cfg["num_workers"]) if pd.notna(self.cfg.get("num_workers")) else None
        self.consumer = self.batch - self.fetch  # the loop's own time per batch, loader wait excluded
        self.mode = str(self.cfg["mode"])
        self.wait, self.h2d, self.rate = float(np.nan_to_num(m["wait"])), m["h2d"], m["pinned_GBps"]
        rate = self.rate
        self.predicted = m["bytes"] / rate / 1e6 if rate and not np.isnan(rate) else float("nan")
        self.pageable = self.mode in ("pageable", "pageable_nb") or (
            not np.isnan(m["h2d_call"]) and self.mode == "auto"
        )


Rule = Callable[[Case], "Finding | None"]


def no_gpu(c: Case) -> Finding | None:
    if c.gpu:
        return None
    m = c.m
    return Finding(
        Verdict.NO_GPU,
        f"no GPU phases measured; loader/pin figures are: fetch {_fmt(m['fetch'])}, "
        f"pin {_fmt(m['pin'])}, stage {_fmt(m['stage'])}, CPU work {_fmt(m['cpu_work'])} "
        f"per {_fmt(c.batch)} batch. Run on a CUDA machine for the transfer verdicts.",
    )


def pin_thread_bound(c: Case) -> Finding | None:
    pin = c.m["pin"]
    if not (c.pin_memory and not np.isnan(pin) and c.workers and pin > c.consumer):
        return None
    return Finding(
        Verdict.PIN_THREAD_BOUND,
        f"the single pin thread needs {_fmt(pin)} per batch but the loop consumes one every "
        f"{_fmt(c.consumer)}: batches wait for pinning (fetch {_fmt(c.m['fetch'])}).",
        [
            Change(
                "use the staged mode (chunked copy into reused pinned buffers on the main thread)", pin - c.consumer
            ),
            Change("use larger batches: the pin thread's per-batch overhead is then paid less often", 0.0),
            Change(
                "note: pinning inside worker processes is no remedy; memory pinned in a worker is "
                "not usable by the training process",
                0.0,
            ),
        ],
    )


def loader_bound(c: Case) -> Finding | None:
    if c.fetch < LOADER_SHARE * c.batch:
        return None
    fetch, workers, cores = c.fetch, c.workers, c.cores
    if cores is not None and workers is not None and workers >= cores:
        changes = [
            Change(
                f"make __getitem__/the transforms cheaper: num_workers ({workers}) already uses all "
                f"{cores} CPU cores, so more workers cannot help",
                fetch,
            )
        ]
    else:
        changes = [
            Change(f"raise num_workers (now {workers}) so batches are ready when the loop asks", fetch),
            Change("raise prefetch_factor, or make __getitem__/the transforms cheaper", fetch),
        ]
    pin = c.m["pin"]
    if c.pin_memory and not np.isnan(pin) and workers == 0:
        changes.append(
            Change(
                f"set pin_memory=False: with no workers the pin ({_fmt(pin)}) runs inside next() on the main thread",
                pin,
            )
        )
    return Finding(
        Verdict.LOADER_BOUND,
        f"the loop waits {_fmt(c.m['fetch'])} of each {_fmt(c.batch)} batch "
        f"({fetch / c.batch:.0%}) on the DataLoader; pinning or copy tricks cannot help.",
        changes,
    )


def cpu_work_bound(c: Case) -> Finding | None:
    cpu = float(np.nan_to_num(c.m["cpu_work"]))
    if cpu < WORK_SHARE * c.batch:
        return None
    return Finding(
        Verdict.CPU_WORK_BOUND,
        f"CPU work takes {_fmt(c.m['cpu_work'])} of each {_fmt(c.batch)} batch "
        f"({cpu / c.batch:.0%}); the input pipeline and the copy are not the bottleneck.",
        [Change("make the CPU work cheaper, or move it to the DataLoader workers", cpu)],
    )


def compute_bound(c: Case) -> Finding | None:
    comp = float(np.nan_to_num(c.m["compute"]))
    if comp < WORK_SHARE * c.batch:
        return None
    return Finding(
        Verdict.COMPUTE_BOUND,
        # Without CUDA, compute() is timed by the host clock: it is the loop's own work, not the GPU's.
        f"{'GPU compute' if c.gpu else 'compute (host clock, no GPU)'} takes {_fmt(c.m['compute'])} of each "
        f"{_fmt(c.batch)} batch "
        f"({comp / c.batch:.0%}): the input pipeline is fine.",
        [],
    )


def hidden_staging(c: Case) -> Finding | None:
    h2d, predicted = c.h2d, c.predicted
    if not (c.gpu and c.pageable and not np.isnan(predicted) and h2d > HIDDEN_STAGING_FACTOR * predicted):
        return None
    return Finding(
        Verdict.HIDDEN_STAGING,
        f"the pageable copy of {c.m['bytes'] / 2**20:.2f} MiB takes {_fmt(h2d)} where the pinned "
        f"bandwidth ({c.rate:.1f} GB/s) predicts {_fmt(predicted)}: {h2d / predicted:.1f}x, the "
        "driver's hidden CPU-to-CPU staging.",
        # overlapped behind CPU work the whole wait can go; at worst the staging goes
        [
            Change(
                "set pin_memory=True and copy with non_blocking=True on a side stream (mode pinned_nb)",
                max(c.wait, h2d - predicted),
            ),
            Change(
                "or stage explicitly (mode staged) when pinning in the loader is too slow", max(0.0, h2d - predicted)
            ),
        ],
    )


def layout_copy(c: Case) -> Finding | None:
    layout = float(np.nan_to_num(c.m["layout"]))
    if layout <= 0 or layout < TOO_SMALL_SHARE * c.batch:
        return None
    return Finding(
        Verdict.LAYOUT_COPY,
        f"the main thread spends {_fmt(c.m['layout'])} of each {_fmt(c.batch)} batch making non-dense tensors "
        "(slices, expand(), strided views) contiguous before their copy; torch does the same inside .to(), where "
        "it looks like transfer time. Their DMA then reads that pageable copy, pinned or not.",
        [
            Change(
                "make the tensors contiguous in the DataLoader workers (.contiguous() in __getitem__ or the "
                "collate_fn), so the main thread copies them as they are and pin_memory pins the dense tensor",
                layout,
            )
        ],
    )


def non_blocking_pageable(c: Case) -> Finding | None:
    if not (c.gpu and (c.mode == "pageable_nb" or (_flag(c.cfg, "non_blocking") and c.pageable))):
        return None
    return Finding(
        Verdict.NON_BLOCKING_PAGEABLE,
        f"non_blocking=True on a pageable batch has no effect: the loop still waits {_fmt(c.wait)} "
        f"for a {_fmt(c.h2d)} copy. The driver must copy pageable memory into its own pinned "
        "buffer before the DMA, and does so inside the call.",
        [Change("pin the batch (pin_memory=True) so non_blocking can overlap", c.wait)],
    )


def exposed_transfer(c: Case) -> Finding | None:
    h2d, wait = c.h2d, c.wait
    if not (c.gpu and not c.pageable and h2d > 0 and wait >= EXPOSED_SHARE * h2d and wait >= TOO_SMALL_SHARE * c.batch):
        return None
    return Finding(
        Verdict.EXPOSED_TRANSFER,
        f"the loop is blocked {_fmt(wait)} for a {_fmt(h2d)} copy; only {_fmt(c.m['overlap'])} of it overlaps other work.",
        [
            Change(
                "copy with non_blocking=True on a side stream and do CPU work (or queue GPU "
                "work) before using the batch (mode pinned_nb)",
                wait,
            )
        ],
    )


TRANSFER = (Verdict.HIDDEN_STAGING, Verdict.NON_BLOCKING_PAGEABLE, Verdict.EXPOSED_TRANSFER)


def transfer_too_small(c: Case) -> Finding | None:
    """The transfer verdicts' best saving (or the exposed wait) against the batch: too small to matter,
    or too small for an epoch-timing benchmark to see."""
    if not c.gpu:
        return None
    wait, batch = c.wait, c.batch
    share = wait / batch if batch else float("nan")
    saving = max([wait] + [ch.gain_ms for x in c.found if x.verdict in TRANSFER for ch in x.changes])
    if share < TOO_SMALL_SHARE:
        return Finding(
            Verdict.TOO_SMALL,
            f"the exposed transfer is {_fmt(wait)}, {share:.2%} of the {_fmt(batch)} batch: too small to matter.",
            [],
        )
    if saving < EPOCH_NOISE_SHARE * batch:
        return Finding(
            Verdict.TOO_SMALL,
            f"the best transfer change saves about {_fmt(saving)} per batch, {saving / batch:.1%} of "
            f"the {_fmt(batch)} batch: below the ~{EPOCH_NOISE_SHARE:.0%} run-to-run noise of "
            "epoch timing, so a benchmark that times epochs cannot see it; pinprof measures it per "
            "batch.",
            [],
        )
    return None


RULES: tuple[Rule, ...] = (
    no_gpu,
    pin_thread_bound,
    loader_bound,
    cpu_work_bound,
    compute_bound,
    hidden_staging,
    layout_copy,
    non_blocking_pageable,
    exposed_transfer,
    transfer_too_small,  # last: it weighs the transfer findings before it
)


def findings(m: dict[str, float], cfg: pd.Series, n: int, cores: int | None = None) -> list[Finding]:
    """Every rule's finding for one scenario, in ``RULES`` order (``diagnose`` ranks them)."""
    if n < MIN_BATCHES:
        return [Finding(Verdict.NO_DATA, f"only {n} measured batch(es); run more (--batches) for a verdict")]
    case = Case(m, cfg, cores)
    for rule in RULES:
        found = rule(case)
        if found is not None:
            case.found.append(found)
    return case.found
