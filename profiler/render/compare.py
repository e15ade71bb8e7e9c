"""An nsys comparison table (``profiler.nsys.compare``) as the lines ``pinprof nsys*`` print."""

from __future__ import annotations

import pandas as pd


def compare_lines(table: pd.DataFrame) -> list[str]:
    """One line per (scenario, source memory): medians and the relative difference to CUPTI."""
    if table.empty:
        return ["no batch matched between the two tables (scenario and batch must agree)"]
    big = table[table.bytes >= 1 << 20]
    lines = []
    for (scen, mem), g in table.groupby(["scenario", "src_memory"], sort=False):
        gb = big[(big.scenario == scen) & (big.src_memory == mem)]
        rel = gb.rel_diff.abs() if len(gb) else g.rel_diff.abs()
        ref = g.reference.iloc[0] if "reference" in g else "memcpy"
        lines.append(
            f"{scen} [{mem}]: {len(g)} batches, pinprof h2d {g.h2d_ms_pinprof.median():.4f} ms, CUPTI ({ref}) "
            f"{g.h2d_ms_cupti.median():.4f} ms, |rel diff| median {rel.median():.2%} p90 {rel.quantile(0.9):.2%}"
        )
    return lines
