"""What each mode changed against ``pageable`` (and ``prefetch`` against ``pinned_nb``) with the same
loader settings, phase by phase, and whether the batch-time difference stands out of the noise.

The noise is the run's own: the batch-to-batch spread of each scenario's batch time, as a robust
standard deviation (1.4826 x the median absolute deviation, which equals the standard deviation for
normal data and ignores the odd slow batch). A difference of medians within the larger of the two
spreads is reported as no measurable difference, not as a finding.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

SCENARIO_KEYS = ["batch_size", "num_workers", "prefetch_factor", "device"]
PHASES = ("fetch", "pin", "stage", "h2d", "wait")
BASES = {"pageable": None, "pinned_nb": "prefetch"}  # base mode -> the only mode compared with it (None: all)
MAD_TO_SIGMA = 1.4826


def spread_ms(values: pd.Series | np.ndarray) -> float:
    """Robust batch-to-batch standard deviation of one phase's times (ms), NaN left out: 1.4826 x the
    median absolute deviation; NaN when there is no value."""
    x = np.asarray(values, dtype=float)
    x = x[~np.isnan(x)]
    return float(MAD_TO_SIGMA * np.median(np.abs(x - np.median(x)))) if len(x) else float("nan")


def compare_modes(tl: pd.DataFrame) -> list[str]:
    """One line per (mode, base) pair with the same loader settings (see the module docstring)."""
    keys = ["scenario", "mode", *SCENARIO_KEYS]
    # the columns it reads, then the measured rows: a filter of every column copied all of a
    # 1,000,000-row timeline (400 MB)
    cols = [c for c in (*keys, *(f"{p}_ms" for p in ("batch", *PHASES))) if c in tl]
    rows = tl[cols][~tl.warmup.to_numpy(bool)]
    grouped = rows.groupby(keys, dropna=False, sort=False)
    med = grouped[[f"{p}_ms" for p in ("batch", *PHASES)]].median()
    med["noise"] = grouped["batch_ms"].agg(spread_ms)
    med = med.reset_index()
    lines: list[str] = []
    cpu = False
    for _key, g in med.groupby(SCENARIO_KEYS, dropna=False, sort=False):
        if not str(g["device"].iloc[0]).startswith("cuda"):
            # No GPU: nothing is copied to a device and nothing pinned, so the modes do the same
            # thing by other names; a difference between them is the loader's or the machine's.
            cpu = True
            continue
        for base_mode, only in BASES.items():
            base = g[g["mode"] == base_mode]
            others = g[g["mode"] != base_mode] if only is None else g[g["mode"] == only]
            if base.empty or others.empty:
                continue
            b = base.iloc[0]
            lines.extend(_line(r, b) for _, r in others.iterrows())
    if cpu and med["mode"].nunique() > 1:
        lines.append(
            "modes not compared on the CPU: with no GPU nothing is copied to a device nor pinned, so pageable, "
            "pinned, staged and prefetch do the same work; compare workers, batch sizes and CPU work there"
        )
    return lines


def _line(r: pd.Series, b: pd.Series) -> str:
    delta = r.batch_ms - b.batch_ms
    noise = max(r.noise, b.noise)
    parts = [
        f"{p} {_signed(r[f'{p}_ms'] - (0.0 if np.isnan(b[f'{p}_ms']) else b[f'{p}_ms']))}"
        for p in PHASES
        if not np.isnan(r[f"{p}_ms"])
    ]
    verdict = (
        f"within the batch-to-batch noise (+/-{noise:.3f} ms): no measurable difference"
        if abs(delta) <= noise
        else f"beyond the batch-to-batch noise (+/-{noise:.3f} ms)"
    )
    return (
        f"{r.scenario} vs {b.scenario}: batch {_signed(delta)} ms ({delta / b.batch_ms:+.1%}), {verdict}; "
        + ", ".join(parts)
    )


def _signed(x: float) -> str:
    return "n/a" if np.isnan(x) else f"{x:+.3f}"
