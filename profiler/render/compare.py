"""An nsys comparison table (``profiler.nsys.compare``) as the lines ``pinprof nsys*`` print."""

from __future__ import annotations

import pandas as pd


def compare_lines(table: pd.DataFrame) -> list[str]:
    """One line per (scenario, source memory): medians and the relative difference to CUPTI."""
    if table.empty:
        return ["no batch matched between the two tables (scenario and batch must agree)"]
    lines = []
    for (scen, mem), every in table.groupby(["scenario", "src_memory"], sort=False):
        g = every[every.matched] if "matched" in every else every
        left_out = _left_out(every)
        if g.empty:
            lines.append(f"{scen} [{mem}]: no batch to compare{left_out}")
            continue
        gb = g[g.bytes >= 1 << 20]
        rel = gb.rel_diff.abs() if len(gb) else g.rel_diff.abs()
        ref = g.reference.iloc[0] if "reference" in g else "memcpy"
        lines.append(
            f"{scen} [{mem}]: {len(g)} batches, pinprof h2d {g.h2d_ms_pinprof.median():.4f} ms, CUPTI ({ref}) "
            f"{g.h2d_ms_cupti.median():.4f} ms, |rel diff| median {rel.median():.2%} p90 {rel.quantile(0.9):.2%}"
            + left_out
        )
    return lines


def _left_out(g: pd.DataFrame) -> str:
    """What of a group the capture could not be compared on, and why (``profiler.nsys.compare``)."""
    if "matched" not in g or g.matched.all():
        return ""
    no_records = int(g.h2d_ms_cupti.isna().sum())
    moved = int((~g.matched).sum()) - no_records
    why = [f"{no_records} without CUPTI memcpy records"] * bool(no_records)
    why += [f"{moved} whose NVTX range in the capture does not last the batch's time (lost range edges)"] * bool(moved)
    return f"; left out: {', '.join(why)}"
