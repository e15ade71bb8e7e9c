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
                "verdict": d.verdict_value,
                "verdict_could_be": [v.value for v in d.could_be],
                "means_ms": {k: (None if np.isnan(v) else v) for k, v in d.means.items()},
                "medians_ms": {k: (None if np.isnan(v) else v) for k, v in d.medians.items()},
                "findings": [{**asdict(fd), "verdict": fd.verdict.value} for fd in d.findings],
            }
        )
    return out


KEY_PHASES = ("fetch", "pin", "h2d", "wait", "cpu_work", "compute", "batch", "pinprof")


def summary_json(analysis: Analysis, partial: bool = False) -> list[dict[str, Any]]:
    """summary.json: a list of records, one per scenario, each flat (numbers and short texts), so that
    ``pandas.read_json`` reads it as a table of one row a scenario and a tracker logs a record in one
    call (``wandb.log(rec)``; ``mlflow.log_metrics`` takes its numbers).

    Each record: ``scenario``; ``partial`` (the run did not finish); ``class`` (the headline's:
    highly_input_bound / moderately_input_bound / not_input_bound / not_settled, where the share's
    interval spans two / unknown), ``input_share`` (fraction of the mean batch waiting for input) and
    ``input_share_lo``/``_hi`` (its 95% interval), ``headline``, ``verdict`` and ``change`` (the top
    finding and its best change; ``verdict`` ``not_settled`` where the run's uncertainty leaves it open,
    and then ``verdict_could_be`` names the verdicts it spans, ``loader_bound or compute_bound``), ``saving_ms`` (that change's expected saving, ms a batch),
    ``batches`` (steady batches), ``warmup_batches`` (start-up batches left out), ``<phase>_ms_mean``
    and ``<phase>_ms_median`` (ms) for fetch, pin, h2d, wait, cpu_work, compute, batch and pinprof (its
    own time on the loop's thread) (null when not measured, so every record has the same keys)."""
    out: list[dict[str, Any]] = []
    left = {f.scenario: f.total for f in analysis.found}
    for d in analysis.diags:
        top = d.findings[0] if d.findings else None
        change = max(top.changes, key=lambda c: c.gain_ms) if top and top.changes else None
        rec: dict[str, Any] = {"scenario": d.scenario, "partial": partial, "class": d.headline.bound.value}
        rec["input_share"] = _num(d.headline.input_share)
        for end in ("lo", "hi"):  # the share's 95% interval over the steady batches
            rec[f"input_share_{end}"] = _num(getattr(d.headline, f"share_{end}"))
        rec["headline"] = d.headline.text
        rec["verdict"] = d.verdict_value
        rec["verdict_could_be"] = " or ".join(v.value for v in d.could_be)
        rec["change"] = change.what if change else ""
        rec["saving_ms"] = round(float(change.gain_ms), 6) if change else 0.0
        rec["batches"] = d.batches
        rec["warmup_batches"] = left.get(d.scenario, 0)
        for p in KEY_PHASES:
            for stat, values in (("mean", d.means), ("median", d.medians)):
                rec[f"{p}_ms_{stat}"] = _num(values.get(p, float("nan")))
        out.append(rec)
    return out


def _num(v: float) -> float | None:
    """A figure rounded to 6 places, or None (JSON's null) where it was not measured."""
    v = float(v)
    return None if np.isnan(v) else round(v, 6)
