"""What a diagnosis is made of: verdicts, findings, the changes they advise, one diagnosis per scenario."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class Verdict(str, Enum):
    NO_DATA = "no_data"
    NO_GPU = "no_gpu"
    LOADER_BOUND = "loader_bound"
    PIN_THREAD_BOUND = "pin_thread_bound"
    HIDDEN_STAGING = "hidden_staging"
    LAYOUT_COPY = "layout_copy"
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
