"""A diagnosis as JSON (``pinprof diagnose --json``)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import numpy as np

from profiler.analysis.findings import Diagnosis
from profiler.analysis.reading import Analysis


def diagnosis_json(diags: list[Diagnosis]) -> list[dict[str, Any]]:
    """One object per scenario: scenario, mode, batches, headline (class: highly_input_bound /
    moderately_input_bound / not_input_bound / unknown; input_share: fraction of the batch time;
    text), verdict (the top finding's), means_ms (the means over the steady batches that the rules
    read; bytes, GB/s and page counts under their own names), medians_ms (the typical batch's phases),
    findings (verdict, evidence, changes: what, gain_ms, sets)."""
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
                "means_ms": {k: (None if np.isnan(v) else v) for k, v in d.means.items()},
                "medians_ms": {k: (None if np.isnan(v) else v) for k, v in d.medians.items()},
                "findings": [{**asdict(fd), "verdict": fd.verdict.value} for fd in d.findings],
            }
        )
    return out


KEY_PHASES = ("fetch", "pin", "h2d", "wait", "cpu_work", "compute", "batch", "pinprof")


def summary_json(analysis: Analysis, partial: bool = False) -> dict[str, Any]:
    """summary.json: one flat object, ``<scenario>/<name>`` keys to numbers or short texts, so that a
    tracker logs it in one call (``wandb.log(d)``; ``mlflow.log_metrics`` takes its numbers).

    Per scenario: ``class`` (the headline's: highly_input_bound / moderately_input_bound /
    not_input_bound / not_settled, where the share's interval spans two / unknown), ``input_share``
    (fraction of the mean batch waiting for input) and ``input_share_lo``/``_hi`` (its 95% interval),
    ``headline``, ``verdict`` and ``change`` (the top finding and its best change), ``saving_ms``
    (that change's expected saving, ms a batch), ``batches`` (steady batches), ``warmup_batches``
    (start-up batches left out), ``<phase>_ms_mean`` and ``<phase>_ms_median`` (ms) for fetch, pin,
    h2d, wait, cpu_work, compute, batch and pinprof (its own time on the loop's thread) (absent when
    not measured). ``partial``: the run did not
    finish."""
    out: dict[str, Any] = {"partial": partial}
    left = {f.scenario: f.total for f in analysis.found}
    for d in analysis.diags:
        k = f"{d.scenario}/"
        top = d.findings[0] if d.findings else None
        change = max(top.changes, key=lambda c: c.gain_ms) if top and top.changes else None
        out[k + "class"] = d.headline.bound.value
        out[k + "input_share"] = None if np.isnan(d.headline.input_share) else round(float(d.headline.input_share), 6)
        for end in ("lo", "hi"):  # the share's 95% interval over the steady batches
            v = float(getattr(d.headline, f"share_{end}"))
            out[k + f"input_share_{end}"] = None if np.isnan(v) else round(v, 6)
        out[k + "headline"] = d.headline.text
        out[k + "verdict"] = d.verdict.value
        out[k + "change"] = change.what if change else ""
        out[k + "saving_ms"] = round(float(change.gain_ms), 6) if change else 0.0
        out[k + "batches"] = d.batches
        out[k + "warmup_batches"] = left.get(d.scenario, 0)
        for p in KEY_PHASES:
            for stat, values in (("mean", d.means), ("median", d.medians)):
                v = values.get(p, float("nan"))
                if not np.isnan(v):
                    out[f"{k}{p}_ms_{stat}"] = round(float(v), 6)
    return out
