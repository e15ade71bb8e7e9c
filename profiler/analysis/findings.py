"""What a diagnosis is made of: verdicts, findings, the changes they advise, one diagnosis per scenario."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from profiler.timeline.schema import FETCHES_AHEAD


class Verdict(str, Enum):
    NO_DATA = "no_data"
    NO_GPU = "no_gpu"
    NO_COPY = "no_copy"
    LOADER_BOUND = "loader_bound"
    PIN_THREAD_BOUND = "pin_thread_bound"
    HIDDEN_STAGING = "hidden_staging"
    LAYOUT_COPY = "layout_copy"
    PINNED_BYPASSED = "pinned_memory_bypassed"
    HOST_BLOCKED = "exposed_transfer_host_blocked"
    GPU_IDLE = "exposed_transfer_gpu_idle"
    NON_BLOCKING_PAGEABLE = "non_blocking_on_pageable"
    CPU_WORK_BOUND = "cpu_work_bound"
    COMPUTE_BOUND = "compute_bound"
    HOST_BOUND = "host_launch_bound"
    BETWEEN_STEPS = "gpu_waits_between_steps"
    TOO_SMALL = "transfer_too_small"
    GC_PAUSES = "gc_pauses"

    @property
    def label(self) -> str:
        """How a person reads it: ``exposed transfer (GPU idle)``."""
        return LABELS.get(self, self.value.replace("_", " "))


LABELS = {
    Verdict.NO_COPY: "no copy to the GPU",
    Verdict.HOST_BLOCKED: "exposed transfer (host blocked)",
    Verdict.GPU_IDLE: "exposed transfer (GPU idle)",
    Verdict.GC_PAUSES: "garbage-collection pauses",
    Verdict.HOST_BOUND: "the GPU waits for the host's launches",
    Verdict.BETWEEN_STEPS: "the GPU waits for the host between steps",
}


class InputBound(str, Enum):
    """The headline's class, as TensorBoard's input-pipeline analyzer names them."""

    HIGHLY = "highly_input_bound"
    MODERATELY = "moderately_input_bound"
    NOT = "not_input_bound"
    NOT_SETTLED = "not_settled"  # the share's 95% interval spans a class boundary
    UNKNOWN = "unknown"


@dataclass
class Change:
    """One remedy. ``sets``: the settings it puts in place (``mode``, ``pin_memory``, ``non_blocking``,
    ``num_workers``, ``prefetch_factor``); a change whose settings the scenario already has is never
    advised (``profiler.analysis.rules.base.Case.in_place``)."""

    what: str
    gain_ms: float  # expected saving per batch, from measured phases
    sets: dict[str, Any] = field(default_factory=dict)


@dataclass
class Finding:
    verdict: Verdict
    evidence: str
    changes: list[Change] = field(default_factory=list)

    @property
    def gain_ms(self) -> float:
        return max((c.gain_ms for c in self.changes), default=0.0)


@dataclass
class Headline:
    """What sets the loop's pace. ``input_share``: (loader wait + exposed transfer) / batch time;
    ``share_lo`` and ``share_hi``: its 95% interval over the steady batches (NaN where too few)."""

    bound: InputBound
    input_share: float
    text: str
    share_lo: float = float("nan")
    share_hi: float = float("nan")


def ahead_without_steps(loop: str, framework: str) -> str:
    """The caveat for rows that are not their batch's own: a framework's loader that fetches ahead,
    with no optimizer step to say where a batch's step ends (an evaluation loop), read as a plain loop.
    Before pinprof read ``FETCHES_AHEAD``'s loaders as fetching ahead, such rows ended at the next batch's fetch,
    before their step (``tests/scripts/ahead_loops.py --eval``: Accelerate's rows read compute_ms 0,
    timm's the batch before's); ``pinprof diagnose`` of a folder written then still says so. Such loops
    are now read as fetching ahead, so "" for them, and for any other."""
    if loop not in ("", "plain") or framework not in FETCHES_AHEAD:
        return ""
    return (
        f"the loader ({framework}) fetches each batch before it hands out the one before, and no optimizer "
        "step says where a batch's step ends: each row ends at the next batch's fetch, before its own step, "
        "so a row's compute_ms is not its batch's (it reads 0, or the batch before's)"
    )


@dataclass
class Diagnosis:
    """One scenario's diagnosis. ``means``: what the rules read (ms per batch, means over the steady
    batches; ``bytes``, ``pinned_GBps`` and the pin counts under their own names); ``medians``: the
    typical batch's phases (ms), for the report."""

    scenario: str
    mode: str
    batches: int
    means: dict[str, float]
    findings: list[Finding]
    headline: Headline = field(default_factory=lambda: Headline(InputBound.UNKNOWN, float("nan"), ""))
    medians: dict[str, float] = field(default_factory=dict)
    loop: str = ""  # what pinprof profile saw the loop do: plain, fetch-ahead, device-prefetch
    framework: str = ""  # whose code fetched the batches (accelerate, timm, lightning), if not the script's
    # Where the run's own uncertainty leaves the verdict open: the verdicts it could be, and why
    # (``profiler.analysis.diagnose.unsettled``); empty where the evidence clears it.
    could_be: list[Verdict] = field(default_factory=list)
    open_because: str = ""

    @property
    def settled(self) -> bool:
        return not self.could_be

    @property
    def verdict_label(self) -> str:
        """The verdict as a person reads it: ``loader bound``, or ``not settled: loader bound or compute
        bound (why)``."""
        if self.settled:
            return self.verdict.label
        return f"not settled: {' or '.join(v.label for v in self.could_be)} ({self.open_because})"

    @property
    def verdict_value(self) -> str:
        """The verdict's value in summary.json: the top finding's, or ``not_settled``."""
        return self.verdict.value if self.settled else "not_settled"

    @property
    def loop_line(self) -> str:
        """One sentence on the loop pattern, for a loop that fetches ahead, or rows that are not their
        batch's own ("" otherwise)."""
        caveat = ahead_without_steps(self.loop, self.framework)
        if caveat:
            return caveat
        if self.loop not in ("fetch-ahead", "device-prefetch"):
            return ""
        by = f" ({self.framework})" if self.framework else ""
        what = (
            "fetches each batch before the step of the one before"
            if self.loop == "fetch-ahead"
            else "fetches and copies each batch to the device before the step of the one before"
        )
        return (
            f"the loop{by} {what}: each row is one batch, with the step that used it (a training or an evaluation step)"
        )

    @property
    def own_line(self) -> str:
        """What pinprof itself cost the loop, as every report states it: its own time on the loop's
        thread (``pinprof_ms``, mean over the steady batches) and its share of the batch; where CUPTI
        counted the step's kernels (``kernels``), that each of those launches also paid CUPTI's record in
        the driver, which no clock of pinprof's can tell from the launch (``scripts/bench_launch_cost.py``
        measures it: 1.2-1.3 us a launch on the H200, reports/README.md). "" where not measured."""
        own, batch = self.means.get("pinprof", float("nan")), self.means.get("batch", float("nan"))
        if not (own == own and batch == batch and batch > 0):
            return ""
        line = f"pinprof's own time: {own:.3f} ms a batch on the loop's thread ({100 * own / batch:.1f}%)"
        kernels = self.means.get("kernels", float("nan"))
        if kernels == kernels and kernels > 0:
            line += (
                f"; not in it: CUPTI's record of each of the step's {kernels:.0f} kernel launches, paid in the "
                "driver (PINPROF_BACKEND=events has no such cost)"
            )
        return line

    @property
    def verdict(self) -> Verdict:
        return self.findings[0].verdict if self.findings else Verdict.NO_DATA
