"""``pinprof tune``'s table as text: the terminal's lines and ``tune.md`` (``profiler.analysis.tune``)."""

from __future__ import annotations

import math

import pandas as pd

from profiler.analysis.tune import in_code, winner
from profiler.render.markdown import md


def _ms(v: float) -> str:
    return "" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.3f}"


# An interval wider than this ratio of its ends says nothing of the trial: the runs varied too much
# (a trial equal to the baseline read "1.585 (0.001-3262.530)" on a busy 2-core machine).
MAX_SPAN = 10.0


def _speedup(row: pd.Series) -> str:
    if row.verdict == "baseline" or pd.isna(row.speedup):
        return ""
    lo, hi = row.speedup_lo, row.speedup_hi
    if not (lo > 0 and hi / lo <= MAX_SPAN):
        return "not measured: the runs varied too much"
    return f"{row.speedup:.3f} ({lo:.3f}-{hi:.3f})"


def _saves(row: pd.Series) -> str:
    """``saves X ms``, unless the speedup was not measured (``_speedup``)."""
    if _speedup(row).startswith("not measured"):
        return "saves ? ms"
    return f"saves {_ms(row.saving_ms) or '-'} ms"


def tune_lines(table: pd.DataFrame, run_noise: float) -> list[str]:
    """The table, one line a run, then the noise and the winner with its change in code."""
    lines = []
    for _, r in table.iterrows():
        what = r.changes or "(as the script is)"
        lines.append(
            f"{r.order:>2} {r.trial:<28} {_ms(r.step_ms):>9} ms/step  speedup {_speedup(r) or '-':<22} "
            f"{_saves(r)} (predicted {_ms(r.predicted_ms) or '-'} ms)  {r.verdict}  [{what}]"
        )
    lines.append(
        "run-to-run noise (baseline runs' means): "
        + ("unknown, fewer than two baseline runs" if math.isnan(run_noise) else f"{run_noise:.1%}")
    )
    best = winner(table)
    if best is None:
        lines.append("winner: none: no change was measurably faster than the script as it is")
    else:
        changes = dict(part.split("=", 1) for part in best.changes.split(", "))
        lines.append(
            f"winner: {best.trial}, {best.speedup:.3f}x ({best.speedup_lo:.3f}-{best.speedup_hi:.3f}), "
            f"{best.saving_ms:.3f} ms a step; in code: {in_code(changes)}"
        )
    return lines


def tune_markdown(table: pd.DataFrame, run_noise: float, command: str, notes: list[str]) -> str:
    """``tune.md``: the command, the table, the winner, and what was left out."""
    out = [f"# pinprof tune: `{md(command)}`", ""]
    out.append(
        "| # | trial | changes | batches | ms/step | speedup (95% interval) | saving ms | predicted ms | verdict |"
    )
    out.append("|---|---|---|---|---|---|---|---|---|")
    for _, r in table.iterrows():
        out.append(
            f"| {r.order} | {md(r.trial, cell=True)} | {md(r.changes, cell=True)} | {r.batches} | {_ms(r.step_ms)} | "
            f"{_speedup(r)} | {_ms(r.saving_ms)} | {_ms(r.predicted_ms)} | {md(r.verdict, cell=True)} |"
        )
    out.append("")
    out += [f"- {md(line)}" for line in tune_lines(table, run_noise)[-2:]]
    out += [f"- {md(n)}" for n in notes]
    return "\n".join(out) + "\n"
