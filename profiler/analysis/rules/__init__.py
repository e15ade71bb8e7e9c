"""The bottleneck rules: each looks at one scenario's medians (a ``Case``) and may give a ``Finding``.

``RULES`` lists them in the order they run (a rule may read the findings of those before it);
``findings`` runs them all. Each is a ``Rule`` (``base``): its verdict, when it fires in words and as
a test, the evidence in numbers, and remedies with their expected gain in ms per batch, estimated from
the measured phases (never from assumed speeds, except the pinned bandwidth, which is measured too:
from the run's own pinned copies, or a calibration). A remedy already in place is never advised.
"""

from __future__ import annotations

import pandas as pd

from profiler.analysis.findings import Finding, Verdict
from profiler.analysis.rules.base import Case, Rule
from profiler.analysis.rules.pace import (
    BETWEEN_STEPS,
    COMPUTE_BOUND,
    CPU_WORK_BOUND,
    GC_PAUSES,
    HOST_BOUND,
    LOADER_BOUND,
    NO_COPY,
    NO_GPU,
)
from profiler.analysis.rules.pin import PIN_THREAD_BOUND
from profiler.analysis.rules.transfer import (
    GPU_IDLE,
    HIDDEN_STAGING,
    HOST_BLOCKED,
    LAYOUT_COPY,
    NON_BLOCKING_PAGEABLE,
    PINNED_BYPASSED,
    TOO_SMALL,
)

# Below this many measured batches the medians are not trusted for a verdict.
MIN_BATCHES = 3

RULES: tuple[Rule, ...] = (
    NO_GPU,
    NO_COPY,
    PIN_THREAD_BOUND,
    LOADER_BOUND,  # after the pin thread's: more workers cannot help a pin-bound loop
    CPU_WORK_BOUND,
    COMPUTE_BOUND,
    HOST_BOUND,
    BETWEEN_STEPS,
    PINNED_BYPASSED,  # before HIDDEN_STAGING and NON_BLOCKING_PAGEABLE, which it stands for then
    HIDDEN_STAGING,
    LAYOUT_COPY,
    NON_BLOCKING_PAGEABLE,
    HOST_BLOCKED,
    GPU_IDLE,
    TOO_SMALL,  # it weighs the transfer findings before it
    GC_PAUSES,
)

__all__ = ["MIN_BATCHES", "RULES", "Case", "Rule", "findings", "run_rules", "too_few"]


def run_rules(case: Case) -> list[Finding]:
    """Every rule's finding for ``case``, in ``RULES`` order (``diagnose`` ranks them)."""
    for rule in RULES:
        found = rule(case)
        if found is not None:
            case.found.append(found)
    return case.found


def too_few(n: int) -> Finding:
    return Finding(Verdict.NO_DATA, f"only {n} measured batch(es); run more (--batches) for a verdict")


def findings(m: dict[str, float], cfg: pd.Series, n: int, cores: int | None = None) -> list[Finding]:
    """``run_rules`` on one scenario's medians, or the no-data finding below ``MIN_BATCHES`` batches."""
    return [too_few(n)] if n < MIN_BATCHES else run_rules(Case(m, cfg, cores))
