"""Name the bottleneck of each scenario, with the evidence in numbers and the change that pays most.

Input: a timeline (pinprof's or an nsys import). Each scenario's measured batches (warm-up left out)
are reduced to medians, then every rule of ``profiler.analysis.rules`` looks at them.
"""

from __future__ import annotations

import pandas as pd

from profiler.analysis.findings import Diagnosis, Verdict
from profiler.analysis.rates import pinned_rate_GBps
from profiler.analysis.rules import findings as _findings


def _med(g: pd.DataFrame, col: str) -> float:
    return float(g[col].median()) if col in g and g[col].notna().any() else float("nan")


def diagnose(tl: pd.DataFrame, calibration: pd.DataFrame | None = None, cores: int | None = None) -> list[Diagnosis]:
    """One ``Diagnosis`` per scenario, findings ordered by expected gain (largest first).

    ``cores``: CPU cores of the machine that was measured (meta.json's cpu_count), so that the
    advice never asks for more loader workers than there are cores.
    """
    out = []
    for scen, g in tl[~tl.warmup].groupby("scenario", sort=False, dropna=False):
        m = {
            c: _med(g, f"{c}_ms")
            for c in (
                "fetch",
                "pin",
                "stage",
                "layout",
                "h2d",
                "h2d_call",
                "cpu_work",
                "compute",
                "wait",
                "overlap",
                "batch",
            )
        }
        m["bytes"] = float(g.bytes.median())
        m["pinned_GBps"] = pinned_rate_GBps(tl, m["bytes"], calibration)
        cfg = g.iloc[0]
        findings = _findings(m, cfg, len(g), cores)
        findings.sort(key=lambda f: (-f.gain_ms, list(Verdict).index(f.verdict)))
        out.append(Diagnosis(str(scen), str(cfg["mode"]), len(g), m, findings))
    return out
