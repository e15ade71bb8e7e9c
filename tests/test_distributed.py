"""Per-rank recording under torchrun with gloo on CPU, merged into one report by rank 0."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from profiler.report.files import read_timeline

HERE = Path(__file__).parent
DATA = HERE / "data"


def test_torchrun_two_ranks_merge_into_one_aligned_report(tmp_path: Path) -> None:
    # TMPDIR: torchrun's agent leaves a torchelastic_* folder there; the test's own holds it
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "OMP_NUM_THREADS": "1", "TMPDIR": str(tmp_path)}
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node",
            "2",
            "--master_port",
            "29517",
            str(HERE / "dist_loop.py"),
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    assert {p.name for p in tmp_path.glob("rank*")} == {"rank0", "rank1"}
    tl = read_timeline(tmp_path)
    assert len(tl) == 20 and set(tl["rank"]) == {0, 1} and set(tl.world_size) == {2}
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert meta["ranks"] == [0, 1] and meta["clock_aligned"] is True
    # both loops started after one barrier: on the merged clock their first batches start together
    first = tl[tl.batch == 0].set_index("rank").batch_start_ms
    assert abs(first[0] - first[1]) < 200.0
    # rank 1 did twice the CPU work per batch; the merged table keeps each rank's own figures
    cpu = tl.groupby("rank").cpu_work_ms.median()
    assert cpu[1] > 1.5 * cpu[0]
    summary = (tmp_path / "summary.csv").read_text()
    assert "rank" in summary.splitlines()[0]


def test_pinprof_run_nproc_2_on_cpu_merges_the_ranks(tmp_path: Path) -> None:
    out = tmp_path / "rep"
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "profiler",
            "run",
            "--nproc",
            "2",
            "--device",
            "cpu",
            "--modes",
            "pageable,staged",
            "--batches",
            "6",
            "--skip",
            "1",
            "--batch-size",
            "16",
            "--num-workers",
            "0",
            "--dataset-size",
            "1024",
            "--out",
            str(out),
            "--no-plots",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1", "TMPDIR": str(tmp_path)},
    )
    assert res.returncode == 0, res.stderr[-2000:]
    tl = read_timeline(out)
    assert len(tl) == 2 * 2 * 7 and set(tl["rank"]) == {0, 1} and set(tl.run) == {"rep"}
    assert {p.name for p in out.iterdir()} >= {"rank0", "rank1", "timeline.csv", "summary.csv", "diagnosis.md"}
    summary = __import__("pandas").read_csv(out / "summary.csv")
    assert sorted(zip(summary["rank"], summary.scenario)) == [
        (0, "pageable/bs16/w0"),
        (0, "staged/bs16/w0"),
        (1, "pageable/bs16/w0"),
        (1, "staged/bs16/w0"),
    ]
    meta = json.loads((out / "meta.json").read_text())
    assert meta["ranks"] == [0, 1] and meta["clock_aligned"] is True and meta["partial"] is False
    # the ranks started each scenario together (a barrier): first batches within a fraction of a second
    starts = tl[tl.batch == 0].groupby(["scenario", "rank"]).batch_start_ms.first().unstack()
    assert (starts[1] - starts[0]).abs().max() < 500.0


def _rank_folder(folder: Path, rank: int, rows: int, running: bool) -> None:
    """A rank's folder from a recorded report: its first ``rows`` batches, and the meta.json of a
    finished report or of one still running (as ``pinprof profile`` writes at a rank's start)."""
    from profiler.report.files import write_csv

    folder.mkdir(parents=True)
    tl = read_timeline(DATA / "h200_default")
    write_csv(tl.head(rows).assign(rank=rank, world_size=2), folder / "timeline.csv")
    meta = json.loads((DATA / "h200_default" / "meta.json").read_text())
    meta.update(rank=rank, world_size=2, partial=running)
    if running:
        meta["status"] = "running"
    (folder / "meta.json").write_text(json.dumps(meta))


def test_rank_0_merges_a_rank_still_running_after_its_wait_as_partial_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rank that has not written its final report when rank 0's wait ends (hung, or saving a large
    checkpoint) is merged with the rows it appended, the merge marked partial, and the line names it."""
    from profiler.drivers import session_report

    _rank_folder(tmp_path / "rank0", 0, 8, running=False)
    _rank_folder(tmp_path / "rank1", 1, 3, running=True)
    monkeypatch.setattr(session_report, "MERGE_WAIT_S", 0.5)
    said: list[str] = []
    session_report._merge(tmp_path, 2, said.append)
    tl = read_timeline(tmp_path)
    assert (tl["rank"] == 0).sum() == 8 and (tl["rank"] == 1).sum() == 3
    assert json.loads((tmp_path / "meta.json").read_text())["partial"] is True
    assert "rank(s) [1] had not written their report" in said[0] and f"pinprof merge {tmp_path}" in said[0]


def test_rank_0_waits_for_a_rank_that_ends_after_it(tmp_path: Path) -> None:
    """Rank 1's running meta.json is no finished report: rank 0 merges its final rows, written later."""
    import threading

    from profiler.drivers import session_report

    _rank_folder(tmp_path / "rank0", 0, 8, running=False)
    _rank_folder(tmp_path / "rank1", 1, 0, running=True)

    def finish() -> None:
        shutil.rmtree(tmp_path / "rank1")
        _rank_folder(tmp_path / "rank1", 1, 8, running=False)

    later = threading.Timer(1.0, finish)  # as rank 1's report, written after rank 0's
    later.start()
    said: list[str] = []
    session_report._merge(tmp_path, 2, said.append)
    later.join()
    tl = read_timeline(tmp_path)
    assert (tl["rank"] == 1).sum() == 8 and said == [f"pinprof: 2 ranks merged into {tmp_path}/"]
