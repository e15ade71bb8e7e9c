"""A diagnosis as JSON (``pinprof diagnose --json``)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import numpy as np

from profiler.analysis.findings import Diagnosis


def diagnosis_json(diags: list[Diagnosis]) -> list[dict[str, Any]]:
    out = []
    for d in diags:
        out.append(
            {
                "scenario": d.scenario,
                "mode": d.mode,
                "batches": d.batches,
                "verdict": d.verdict.value,
                "medians_ms": {k: (None if np.isnan(v) else v) for k, v in d.medians.items()},
                "findings": [{**asdict(fd), "verdict": fd.verdict.value} for fd in d.findings],
            }
        )
    return out
