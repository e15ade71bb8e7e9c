"""What every rule reads (``Case``: one scenario's medians and settings) and what a rule is (``Rule``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from profiler.analysis.findings import Change, Finding, Verdict

# The loop waits for at least half of the copy: the transfer is exposed, not overlapped.
EXPOSED_SHARE = 0.5
# The bar for "too small to matter": under 1% of the batch time.
TOO_SMALL_SHARE = 0.01


def fmt(ms: float) -> str:
    return "n/a" if np.isnan(ms) else f"{ms:.3f} ms"


def spent(m: dict[str, float], key: str) -> float:
    """Milliseconds a phase took per batch, 0 when it was not measured (the loop has no such phase)."""
    return float(np.nan_to_num(m[key]))


def _flag(cfg: pd.Series, key: str) -> bool | None:
    value = cfg.get(key)
    return None if value is None or pd.isna(value) else bool(value)


def case_text(cfg: pd.Series, key: str) -> str:
    """A text setting of the scenario, \"\" where it is missing."""
    value = cfg.get(key)
    return "" if value is None or pd.isna(value) or value in ("nan", "<NA>") else str(value)


def _share(v: Any) -> float | None:
    """A share from meta.json (0 to 1), or None where it is missing or not a number."""
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 1.5 else None


def _int(cfg: pd.Series, key: str) -> int | None:
    value = cfg.get(key)
    return None if value is None or pd.isna(value) else int(value)


@dataclass
class Case:
    """One scenario's means (``m``: ms, ``bytes``, ``pinned_GBps``, ``pin_faults``, ``pin_allocs``,
    ``gc_batches``: batches a full garbage collection fell in, ``gc_longest``: ms, ``busy_share``: the
    share of its batches whose ``compute_ms`` is the kernels' busy time, ``launch_gap`` and ``after_step``: ms,
    ``profiler.analysis.diagnose``) and settings, as the rules read them; ``found``: the findings of
    the rules that ran before."""

    m: dict[str, float]
    cfg: pd.Series
    cores: int | None = None
    found: list[Finding] = field(default_factory=list)
    # meta.json's ``loaders`` entry of this scenario: ``workers_waiting`` and ``workers_busy``, the
    # shares of its workers' time spent waiting (neither on a core nor queued for one) and computing
    # (``profiler.capture.workers``), where they were read
    loader: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        m, cfg = self.m, self.cfg
        self.batch, self.fetch = m["batch"], spent(m, "fetch")
        self.cpu, self.comp, self.layout = spent(m, "cpu_work"), spent(m, "compute"), spent(m, "layout")
        self.gc = spent(m, "gc") if "gc" in m else 0.0
        self.gc_fetch = spent(m, "gc_fetch") if "gc_fetch" in m else 0.0  # part of fetch too
        self.gc_frozen = _int(cfg, "gc_frozen") or 0
        self.gpu = not np.isnan(m["h2d"])  # a copy was timed on the GPU
        self.on_gpu = case_text(cfg, "device").startswith("cuda")  # the run's device is a GPU
        self.mode = str(cfg["mode"])
        self.pin_memory = bool(_flag(cfg, "pin_memory"))
        self.non_blocking = bool(_flag(cfg, "non_blocking"))
        self.workers = _int(cfg, "num_workers")
        self.workers_waiting = _share(self.loader.get("workers_waiting"))
        self.workers_busy = _share(self.loader.get("workers_busy"))
        self.prefetch_factor = _int(cfg, "prefetch_factor")
        self.loop, self.framework = case_text(cfg, "loop"), case_text(cfg, "framework")
        self.consumer = self.batch - self.fetch  # the loop's own time per batch, loader wait excluded
        self.wait, self.h2d, self.rate = spent(m, "wait"), m["h2d"], m["pinned_GBps"]
        rate = self.rate
        self.predicted = m["bytes"] / rate / 1e6 if rate and not np.isnan(rate) else float("nan")
        self.pageable = self.mode in ("pageable", "pageable_nb") or (
            not np.isnan(m["h2d_call"]) and self.mode == "auto"
        )
        # The copy returns before its DMA ends (pinned source, non_blocking): its exposure is the GPU's.
        self.asynchronous = self.gpu and not self.pageable and (self.non_blocking or self.mode in ASYNC_MODES)
        self.exposed = self._exposed()
        self.launch_gap = self._launch_gap()
        self.after_step = self._busy_mean("after_step")

    def _exposed(self) -> float:
        """Exposed transfer per batch (ms): the main thread's own work on the batch before its copy
        (explicit staging, layout copies), plus a blocking copy's wait or, for an asynchronous one,
        the part of its wait during which the GPU had none of the loop's work (``gpu_idle_ms``): a
        copy that runs under the previous step's compute delays nothing."""
        m = self.m
        host = spent(m, "stage") + self.layout
        idle = m.get("gpu_idle", float("nan"))
        if not self.gpu:
            self.copy_exposed = 0.0
        elif not np.isnan(idle) and (self.asynchronous or self.comp >= self.consumer - self.wait):
            # A blocking copy on the step's stream first waits for the step before to finish. Where
            # the GPU's compute fills the rest of the batch, that part of the host's wait is compute
            # showing through, not transfer (a blocking copy of 8.5 KiB under Accelerate held the
            # host 7.57 ms on the H200, with the GPU idle for 0.109 ms of it); where the host's own
            # work does, the host's blocked time is what the loop loses.
            self.copy_exposed = min(self.wait, idle)
        else:
            self.copy_exposed = self.wait
        # Copies queued faster than the GPU runs them (no sync in the loop) wait longer than a batch
        # lasts; the loop cannot be exposed for more than its own time.
        self.copy_exposed = min(self.copy_exposed, max(self.consumer, 0.0))
        return host + self.copy_exposed

    def _launch_gap(self) -> float:
        """Per batch (ms), the time inside the span of the step's kernels on the GPU that none of them
        ran (``m["launch_gap"]``): the GPU waiting for the host to launch the next one. Only where
        CUPTI timed the batches (``compute_ms`` is then the kernels' busy time, where an event span
        holds these gaps too); NaN with the events."""
        return self._busy_mean("launch_gap")

    @property
    def event_span(self) -> bool:
        """Whether ``comp`` is a span between CUDA events on a GPU (the step's kernel records off, or
        the events clock): it then holds the GPU's waits for the host's launches, which only the
        kernel records tell apart (``pinprof profile --kernels``)."""
        return self.gpu and self.m.get("busy_share", 0.0) < BUSY_SHARE

    def _busy_mean(self, key: str) -> float:
        """``m[key]`` where CUPTI timed (nearly) every batch, NaN elsewhere: the GPU's idle times need
        its busy times, which the events do not give."""
        m = self.m
        if self.event_span:
            return float("nan")
        return float(m.get(key, float("nan")))

    def in_place(self, change: Change) -> bool:
        """Whether every setting ``change`` puts in place is already this scenario's."""
        if not change.sets:
            return False
        now = {
            "mode": self.mode,
            "pin_memory": self.pin_memory,
            "non_blocking": self.non_blocking,
            "num_workers": self.workers,
            "prefetch_factor": self.prefetch_factor,
        }
        return all(now.get(key) == value for key, value in change.sets.items())


ASYNC_MODES = ("pinned_nb", "staged", "prefetch")
# Most of a scenario's batches with the kernels' busy time (CUPTI's kernel records): a run that
# torch.profiler took over for a few batches still reads it.
BUSY_SHARE = 0.9


@dataclass(frozen=True)
class Rule:
    """One bottleneck rule: its verdict, when it fires (in words and as a test), the evidence it
    gives and the remedies it advises; remedies already in place are dropped."""

    verdict: Verdict
    when: str
    fires: Callable[[Case], bool]
    evidence: Callable[[Case], str]
    remedies: Callable[[Case], list[Change]] = field(default=lambda c: [])

    def __call__(self, case: Case) -> Finding | None:
        if not self.fires(case):
            return None
        changes = [ch for ch in self.remedies(case) if not case.in_place(ch)]
        return Finding(self.verdict, self.evidence(case), changes)


def fired(case: Case, *verdicts: Verdict) -> bool:
    """Whether an earlier rule gave one of ``verdicts``."""
    return any(f.verdict in verdicts for f in case.found)


def pct(part: float, whole: float, digits: int = 0) -> str:
    """``part`` as a share of ``whole``, never above 100%: with means a phase is part of the batch it
    lies in, and one timed on another clock (the GPU's) that reads longer is still all of it."""
    if not whole or np.isnan(whole) or np.isnan(part):
        return "n/a"
    return f"{min(part / whole, 1.0):.{digits}%}"


def share(ms: float, case: Case) -> str:
    return pct(ms, case.batch)


# A GPU phase's mean this much longer than the batch's is said to be longer, not "100%" of it.
LONGER = 1.005


def compute_of_batch(case: Case) -> str:
    """``X ms of the mean Y ms batch (Z%)``, the compute's part of the batch; where the GPU's compute
    reads longer than the batch, it says so and why, instead of a share capped at 100% beside a larger
    figure. A step's kernels can run on after its row has ended (the host asks for the next batch
    while the GPU still works: a Lightning training loop on an H100, tests/data/h100_rows, 8.745 ms of
    kernels a step in 7.567 ms rows, whose validation rows ran in between), so over a run's rows the
    kernels' sum can exceed the rows' own."""
    ms, batch = case.comp, case.batch
    if case.gpu and ms > LONGER * batch:
        return (
            f"{fmt(ms)} a batch, more than the mean {fmt(batch)} batch: the GPU is busy all of it, "
            "its kernels running on past the batch's end"
        )
    return f"{fmt(ms)} of the mean {fmt(batch)} batch ({pct(ms, batch)})"


Settings = dict[str, Any]
