"""Diagnosis rules on real H200 timelines (tests/data) and on synthetic edge cases."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from profiler.analysis.compare import compare_modes
from profiler.analysis.diagnose import diagnose
from profiler.analysis.findings import Verdict
from profiler.cli import main
from profiler.report.files import read_timeline

DATA = Path(__file__).parent / "data"


def verdicts(tl: pd.DataFrame, cal: pd.DataFrame | None = None) -> dict[str, list[Verdict]]:
    return {d.scenario: [f.verdict for f in d.findings] for d in diagnose(tl, cal)}


def test_naive_benchmark_is_loader_bound_and_pinning_only_adds_pin_cost() -> None:
    tl = read_timeline(DATA / "h200_naive")
    v = verdicts(tl)
    assert v["pageable/bs64/w0"][0] == Verdict.LOADER_BOUND
    assert v["pinned/bs64/w0"][0] == Verdict.LOADER_BOUND
    (line,) = compare_modes(tl)
    assert line.startswith("pinned/bs64/w0 vs pageable/bs64/w0: batch +")  # pinning made the batch slower
    pin = float(line.split("pin +")[1].split(",")[0])
    assert pin > 0


def test_better_benchmark_is_cpu_bound_and_the_transfer_too_small_to_see() -> None:
    v = verdicts(read_timeline(DATA / "h200_better"))
    for scen in ("pageable/bs1024/w6", "pinned_nb/bs1024/w6"):
        assert v[scen][0] == Verdict.CPU_WORK_BOUND
        assert Verdict.TOO_SMALL in v[scen]
    assert Verdict.HIDDEN_STAGING in v["pageable/bs1024/w6"]


def test_default_run_verdicts_on_the_h200() -> None:
    tl = read_timeline(DATA / "h200_default")
    v = verdicts(tl)
    assert Verdict.HIDDEN_STAGING in v["pageable/bs1024/w4"]
    assert Verdict.NON_BLOCKING_PAGEABLE in v["pageable_nb/bs1024/w4"]
    assert v["pinned/bs64/w4"][0] == Verdict.HOST_BLOCKED
    assert v["pinned_nb/bs64/w4"] == [Verdict.TOO_SMALL]  # copy hidden behind CPU work
    # 4 workers cannot build 1024-image batches as fast as the loop uses them: every fourth waits ~90 ms
    assert v["pinned_nb/bs1024/w4"][0] == Verdict.LOADER_BOUND


def synthetic(n: int = 10, **medians: float) -> pd.DataFrame:
    """A pinned_nb-like timeline with the given per-batch phase times (ms), constant over batches."""
    base = read_timeline(DATA / "h200_default")
    row = base[base.scenario == "pinned_nb/bs1024/w4"].iloc[[-1]]
    tl = pd.concat([row] * n, ignore_index=True)
    tl["batch"] = range(n)
    tl["warmup"] = False
    for phase, ms in medians.items():
        tl[f"{phase}_ms"] = ms
    return tl


def test_pin_thread_bound_when_pinning_outlasts_the_loop() -> None:
    tl = synthetic(fetch=6.0, pin=9.0, batch=8.0, cpu_work=1.0, compute=0.5, wait=0.0, h2d=0.2)
    d = diagnose(tl)[0]
    assert d.verdict == Verdict.PIN_THREAD_BOUND
    assert any("staged" in c.what for c in d.findings[0].changes)
    assert "Pinning inside the workers is no remedy" in d.findings[0].evidence


def test_compute_bound_says_the_pipeline_is_fine() -> None:
    d = diagnose(synthetic(fetch=0.1, pin=1.0, batch=10.0, cpu_work=0.5, compute=9.0, wait=0.0, h2d=0.2))[0]
    assert d.verdict == Verdict.COMPUTE_BOUND and "input pipeline does not set the pace" in d.findings[0].evidence
    assert d.headline.text.startswith("not input bound") and "GPU compute sets the pace" in d.headline.text


def test_too_small_under_one_percent() -> None:
    d = diagnose(
        synthetic(fetch=0.1, pin=1.0, batch=100.0, cpu_work=30.0, compute=30.0, wait=0.5, h2d=0.6, gpu_idle=0.6)
    )[0]
    assert [f.verdict for f in d.findings] == [Verdict.TOO_SMALL]
    assert "0.50%" in d.findings[0].evidence


def test_exposed_transfer_on_a_blocking_pinned_copy() -> None:
    tl = synthetic(fetch=0.1, pin=1.0, batch=4.0, cpu_work=1.0, compute=1.0, wait=1.0, h2d=1.0, overlap=0.0)
    tl["mode"], tl["non_blocking"] = "pinned", False
    d = diagnose(tl)[0]
    assert d.verdict == Verdict.HOST_BLOCKED
    assert d.findings[0].changes[0].gain_ms == pytest.approx(1.0)


def test_cpu_only_run_says_no_gpu_phases(tmp_path: Path) -> None:
    tl = synthetic(fetch=1.0, pin=np.nan, batch=3.0, cpu_work=1.0, compute=np.nan, wait=np.nan, h2d=np.nan)
    tl["device"] = "cpu"
    d = diagnose(tl)[0]
    (no_gpu,) = [f for f in d.findings if f.verdict == Verdict.NO_GPU]
    assert no_gpu.evidence.startswith("no GPU phases measured; loader/pin figures are")
    assert Verdict.NO_COPY not in [f.verdict for f in d.findings]


def test_a_gpu_run_that_copied_nothing_is_not_told_to_use_a_gpu() -> None:
    """A recorded H200 scenario with its copies taken out, as a loop whose batches are made on the GPU
    records them: no copy to the GPU, said with the device, and not "run on a CUDA machine"."""
    tl = synthetic(fetch=0.2, batch=3.0, cpu_work=0.5, compute=2.0)
    for col in [
        c for c in tl.columns if c.startswith(("h2d", "dma", "wait", "overlap", "gpu_idle", "layout", "stage"))
    ]:
        tl[col] = np.nan
    tl["bytes"], tl["copies"] = 0, 0
    assert str(tl.device.iloc[0]).startswith("cuda")
    d = diagnose(tl)[0]
    found = {f.verdict: f for f in d.findings}
    assert Verdict.NO_GPU not in found and Verdict.TOO_SMALL not in found
    ev = found[Verdict.NO_COPY].evidence
    assert ev.startswith(f"the run was on {tl.device.iloc[0]}, and no tensor of a batch was copied to it")
    assert "CUDA machine" not in ev and "compute 2.000 ms" in ev
    assert Verdict.NO_COPY.label == "no copy to the GPU"


def test_too_few_batches_gives_no_verdict() -> None:
    assert diagnose(synthetic(n=2))[0].verdict == Verdict.NO_DATA


def test_cli_prints_and_writes_only_when_asked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import shutil

    folder = tmp_path / "rep"
    shutil.copytree(DATA / "h200_naive", folder)
    assert main(["diagnose", str(folder)]) == 0
    assert "loader bound" in capsys.readouterr().out and not (folder / "diagnosis.md").exists()
    assert main(["diagnose", str(folder), "--write"]) == 0
    assert "loader bound" in (folder / "diagnosis.md").read_text()
    summary = {r["scenario"]: r for r in json.loads((folder / "summary.json").read_text())}
    assert summary["pageable/bs64/w0"]["verdict"] == "loader_bound" and "<svg" in (folder / "report.html").read_text()
    capsys.readouterr()
    assert main(["diagnose", str(folder / "timeline.csv"), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [d["verdict"] for d in data] == ["loader_bound", "loader_bound"]


@pytest.mark.parametrize("content", ["", "a,b\n1,2\n", "mode,batch,bytes\n"])
def test_cli_bad_inputs_are_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str) -> None:
    path = tmp_path / "t.csv"
    path.write_text(content)
    assert main(["diagnose", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("pinprof diagnose: error:") and "Traceback" not in err


def two_ranks(**changes_rank1: float) -> pd.DataFrame:
    """The recorded pinned_nb scenario as two ranks; rank 1's phases scaled by the given factors."""
    base = read_timeline(DATA / "h200_default")
    one = base[base.scenario == "pinned_nb/bs1024/w4"].copy()
    other = one.copy()
    for col, factor in changes_rank1.items():
        other[col] = other[col] * factor
    return pd.concat([one.assign(rank=0, world_size=2), other.assign(rank=1, world_size=2)], ignore_index=True)


def test_rank_imbalance_names_the_slow_rank() -> None:
    from profiler.analysis.ranks import diagnose_ranks

    assert diagnose_ranks(two_ranks()) == []  # identical ranks: nothing to say
    (line,) = diagnose_ranks(two_ranks(fetch_ms=6.0, batch_ms=1.5))
    assert "rank imbalance - rank 1" in line


def test_host_link_contention_against_the_single_rank_calibration() -> None:
    from profiler.analysis.ranks import diagnose_ranks

    cal = pd.read_csv(DATA / "h200_default" / "calibration.csv")
    assert diagnose_ranks(two_ranks(), cal) == []  # both ranks at the calibrated rate
    lines = diagnose_ranks(two_ranks(h2d_ms=2.0), cal)  # rank 1 copies at half the rate
    assert any("host-link contention" in x for x in lines)


def test_loader_advice_never_asks_for_more_workers_than_cores() -> None:
    tl = synthetic(fetch=6.0, pin=1.0, batch=8.0, cpu_work=1.0, compute=0.5, wait=0.0, h2d=0.2)  # 4 workers
    many = diagnose(tl, cores=16)[0].findings[0]
    few = diagnose(tl, cores=2)[0].findings[0]
    assert many.verdict == few.verdict == Verdict.LOADER_BOUND
    assert "raise num_workers (now 4)" in many.changes[0].what
    assert "already uses all 2 CPU cores" in few.changes[0].what and len(few.changes) == 1


def test_a_layout_copy_on_the_main_thread_is_named_with_its_remedy() -> None:
    d = diagnose(synthetic(fetch=0.1, pin=1.0, batch=10.0, cpu_work=2.0, compute=2.0, wait=0.0, h2d=0.3, layout=3.0))[0]
    assert d.verdict == Verdict.LAYOUT_COPY
    assert "3.000 ms" in d.findings[0].evidence and "contiguous" in d.findings[0].evidence
    (change,) = d.findings[0].changes
    assert "DataLoader workers" in change.what and change.gain_ms == pytest.approx(3.0)
    quiet = diagnose(
        synthetic(fetch=0.1, pin=1.0, batch=10.0, cpu_work=2.0, compute=2.0, wait=0.0, h2d=0.3, layout=0.05)
    )
    assert Verdict.LAYOUT_COPY not in [f.verdict for f in quiet[0].findings]  # 0.5% of the batch: not a finding


def test_on_a_cpu_run_what_sets_the_pace_is_the_verdict_and_no_gpu_comes_after() -> None:
    """A CPU-only run whose host-timed compute is the batch: compute bound first, then no GPU."""
    tl = synthetic(fetch=0.5, pin=np.nan, batch=100.0, cpu_work=np.nan, compute=99.0, wait=np.nan, h2d=np.nan)
    tl["device"] = "cpu"
    d = diagnose(tl)[0]
    assert [f.verdict for f in d.findings] == [Verdict.COMPUTE_BOUND, Verdict.NO_GPU]
    assert d.verdict == Verdict.COMPUTE_BOUND
