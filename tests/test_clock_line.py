"""Which clock timed the GPU, said in the report (``profiler.analysis.clock``), on reports recorded on
the H200: the rows check with CUPTI (``tests/data/h200_rows``) and a tune trial with CUDA events
(``tests/data/h200_tune_naive``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd

from profiler.analysis.clock import clock_line
from profiler.report import files
from profiler.report.folder import write_report

DATA = Path(__file__).parent / "data"
CUPTI_RUN = DATA / "h200_rows" / "accelerate"
EVENTS_RUN = DATA / "h200_tune_naive" / "00-baseline"
LATE = "pinprof's GPU clock was first asked for after this process's CUDA work had begun"


def _run(folder: Path) -> tuple[pd.DataFrame, dict[str, object]]:
    return files.read_timeline(folder / files.TIMELINE), json.loads((folder / files.META).read_text("utf-8"))


def test_a_cupti_run_says_cupti_and_an_events_run_says_events() -> None:
    tl, info = _run(CUPTI_RUN)
    assert set(tl.gpu_clock) == {"cupti"}
    assert clock_line(tl, info) == "GPU clock: CUPTI's activity records, every batch."
    tl, info = _run(EVENTS_RUN)
    assert set(tl.gpu_clock) == {"events"}
    assert clock_line(tl, info) == "GPU clock: CUDA events, every batch."


def test_the_events_say_why_not_cupti_and_a_handover_counts_both() -> None:
    tl, info = _run(EVENTS_RUN)
    info["gpu_clock"] = {"backend": "events", "why": LATE + "."}
    assert clock_line(tl, info) == f"GPU clock: CUDA events, every batch; not CUPTI: {LATE}."
    # torch.profiler ran over the middle batches: CUPTI handed them to the events
    tl, info = _run(CUPTI_RUN)
    tl.loc[tl.index[4:10], "gpu_clock"] = "events"
    info["gpu_clock"] = {"backend": "cupti+events", "why": "torch.profiler ran"}
    n = len(tl)
    assert clock_line(tl, info) == (
        f"GPU clock: CUPTI's activity records for {n - 6} batches, CUDA events for 6 (torch.profiler ran)."
    )


def test_records_that_came_after_their_batches_are_named() -> None:
    tl, info = _run(CUPTI_RUN)
    assert isinstance(info["gpu_clock"], dict)
    info["gpu_clock"] = {**info["gpu_clock"], "late_records": 32_618}
    assert clock_line(tl, info) == (
        "GPU clock: CUPTI's activity records, every batch. 32,618 of CUPTI's records came more than 30 s after "
        "the batches of their time were written: those batches' GPU columns (compute_ms) miss them."
    )
    info["gpu_clock"] = {**info["gpu_clock"], "late_records": 0}
    assert clock_line(tl, info) == "GPU clock: CUPTI's activity records, every batch."


def test_a_cpu_run_has_no_clock_line() -> None:
    tl, info = _run(DATA / "cpu_compare" / "w0")
    assert set(tl.gpu_clock) <= {"none"}
    assert clock_line(tl, info) is None


def test_the_report_files_carry_the_line(tmp_path: Path) -> None:
    shutil.copytree(EVENTS_RUN, tmp_path / "run")
    tl, info = _run(tmp_path / "run")
    info["gpu_clock"] = {"backend": "events", "why": "a CUDA tool is attached (Nsight Systems)"}
    said: list[str] = []
    write_report(tmp_path / "run", tl, info, {}, said.append, plots=False)
    line = "GPU clock: CUDA events, every batch; not CUPTI: a CUDA tool is attached (Nsight Systems)."
    for name in ("summary.md", "diagnosis.md", "report.html"):
        assert line in (tmp_path / "run" / name).read_text("utf-8"), name
    assert any(line in s.replace("\n", " ").replace("    ", "") for s in said)
