"""What each mode changed against ``pageable`` with the same loader settings, phase by phase."""

from __future__ import annotations

import numpy as np
import pandas as pd

SCENARIO_KEYS = ["batch_size", "num_workers", "prefetch_factor", "device"]


def compare_modes(tl: pd.DataFrame) -> list[str]:
    """What each mode changed against ``pageable`` with the same loader settings, phase by phase."""
    rows = tl[~tl.warmup]
    lines = []
    med = (
        rows.groupby(["scenario", "mode", *SCENARIO_KEYS], dropna=False, sort=False)[
            ["batch_ms", "fetch_ms", "pin_ms", "stage_ms", "h2d_ms", "wait_ms"]
        ]
        .median()
        .reset_index()
    )
    for _key, g in med.groupby(SCENARIO_KEYS, dropna=False, sort=False):
        base = g[g["mode"] == "pageable"]
        if base.empty or len(g) < 2:
            continue
        b = base.iloc[0]
        for _, r in g[g["mode"] != "pageable"].iterrows():
            delta = r.batch_ms - b.batch_ms
            parts = [
                f"{p} {_signed(r[f'{p}_ms'] - (0.0 if np.isnan(b[f'{p}_ms']) else b[f'{p}_ms']))}"
                for p in ("fetch", "pin", "stage", "h2d", "wait")
                if not np.isnan(r[f"{p}_ms"])
            ]
            lines.append(
                f"{r.scenario} vs {b.scenario}: batch {_signed(delta)} ms ({delta / b.batch_ms:+.1%}); "
                + ", ".join(parts)
            )
    return lines


def _signed(x: float) -> str:
    return "n/a" if np.isnan(x) else f"{x:+.3f}"
