"""``pinprof tune``'s files: ``tune.csv`` (``profiler.analysis.tune.judge``'s table) and ``tune.md``."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from profiler.atomic import write_csv, write_text_atomic
from profiler.render.tune import tune_markdown

TUNE_CSV, TUNE_MD = "tune.csv", "tune.md"


def write_tune(out: Path, table: pd.DataFrame, run_noise: float, command: str, notes: list[str]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    write_csv(table, out / TUNE_CSV)
    write_text_atomic(out / TUNE_MD, tune_markdown(table, run_noise, command, notes))
