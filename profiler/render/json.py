"""A diagnosis as JSON (``pinprof diagnose --json``)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import numpy as np

from profiler.analysis.findings import Diagnosis


def diagnosis_json(diags: list[Diagnosis]) -> list[dict[str, Any]]:
    """One object per scenario: scenario, mode, batches, headline (class: highly_input_bound /
    moderately_input_bound / not_input_bound / unknown; input_share: fraction of the batch time;
    text), verdict (the top finding's), medians_ms (the medians the rules read; bytes, GB/s and page
    counts under their own names), findings (verdict, evidence, changes: what, gain_ms, sets)."""
    out = []
    for d in diags:
        out.append(
            {
                "scenario": d.scenario,
                "mode": d.mode,
                "batches": d.batches,
                "headline": {
                    "class": d.headline.bound.value,
                    "input_share": None if np.isnan(d.headline.input_share) else d.headline.input_share,
                    "text": d.headline.text,
                },
                "verdict": d.verdict.value,
                "medians_ms": {k: (None if np.isnan(v) else v) for k, v in d.medians.items()},
                "findings": [{**asdict(fd), "verdict": fd.verdict.value} for fd in d.findings],
            }
        )
    return out
