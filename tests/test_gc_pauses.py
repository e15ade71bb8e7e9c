"""Python's full garbage collections as the timeline's ``gc_ms``, and the finding they give.

The pauses are real collections (``gc.collect()``, or the ones a growing cache of Python objects sets
off in ``tests/scripts/caching_dataset.py``), timed by the collector's own callbacks; each test says
what it checks them against.
"""

from __future__ import annotations

import gc
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch

from profiler import TransferProfiler
from profiler.analysis.before_after import compare
from profiler.analysis.diagnose import diagnose
from profiler.analysis.findings import Verdict
from profiler.capture import gc_pauses
from profiler.report.files import read_meta, read_timeline
from profiler.timeline.pauses import within

HERE = Path(__file__).parent


def test_within_counts_the_part_of_each_pause_inside_each_interval() -> None:
    pauses = (np.array([10.0, 30.0]), np.array([14.0, 40.0]))  # 4 ms and 10 ms
    start = np.array([0.0, 12.0, 15.0, 35.0, 0.0, np.nan, 41.0])
    end = np.array([9.0, 31.0, 29.0, 50.0, 50.0, 5.0, 45.0])
    got = within(start, end, pauses)
    # none; 2 of the first and 1 of the second; none between them; 5 of the second; both whole; NaN; none
    np.testing.assert_allclose(got, [0.0, 3.0, 0.0, 5.0, 14.0, np.nan, 0.0])
    assert np.isnan(within(np.array([np.nan]), np.array([1.0]), (np.array([]), np.array([]))))[0]
    np.testing.assert_allclose(within(np.array([0.0]), np.array([1.0]), (np.array([]), np.array([]))), [0.0])


def test_a_collection_inside_a_batch_is_that_batchs_gc_ms_and_no_other() -> None:
    """A ``gc.collect()`` in batch 4, timed around the call: that row's ``gc_ms`` is the call's time
    (the callbacks' clock sits inside the call), the other rows' 0."""
    prof = TransferProfiler("pageable", torch.device("cpu"))
    took = 0.0
    for i, b in enumerate(prof.batches([torch.randn(4, 4) for _ in range(8)])):
        prof.to_device(b)
        if i == 4:
            t0 = time.perf_counter()
            gc.collect()
            took = (time.perf_counter() - t0) * 1e3
        time.sleep(0.002)
    tl = prof.timeline()
    print(f"gc.collect() took {took:.2f} ms by a clock around it; gc_ms {tl.gc_ms.round(3).tolist()}")
    assert gc_pauses.watching()
    assert tl.gc_ms.iloc[4] <= took and tl.gc_ms.iloc[4] >= 0.9 * took
    assert (tl.gc_ms.drop(index=4) == 0).all()
    assert (tl.gc_ms <= tl.batch_ms).all()


def test_a_file_without_the_column_reads_as_not_watched(tmp_path: Path) -> None:
    tl = read_timeline(HERE / "data" / "cpu_default")  # recorded before gc_ms existed
    assert tl.gc_ms.isna().all()
    assert all(f.verdict != Verdict.GC_PAUSES for d in diagnose(tl) for f in d.findings)


def _profile(tmp_path: Path, name: str, *args: str) -> tuple[pd.DataFrame, dict[str, Any]]:
    out = tmp_path / name
    cmd = [sys.executable, "-m", "profiler", "profile", "--out", str(out), "--no-plots", "--"]
    cmd += ["python", str(HERE / "scripts" / "caching_dataset.py"), *args]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=HERE.parent)
    assert run.returncode == 0, run.stderr[-3000:]
    return read_timeline(out / "timeline.csv"), read_meta(out / "meta.json")


def test_the_finding_on_a_growing_cache_and_the_fix_it_advises(tmp_path: Path) -> None:
    """``pinprof profile`` of a loop whose dataset keeps a Python memo: its full collections are
    found and the finding advises ``gc.freeze()``; the same loop with the freeze spends less of its
    time in them, by the same clock."""
    (plain, meta), (frozen, _) = _profile(tmp_path, "plain"), _profile(tmp_path, "frozen", "--freeze")
    found = {f.verdict: f for f in diagnose(plain)[0].findings}
    assert Verdict.GC_PAUSES in found, [str(v) for v in found]
    finding = found[Verdict.GC_PAUSES]
    assert "gc.freeze()" in finding.changes[0].what
    pauses = plain.gc_ms[plain.gc_ms > 0]
    assert len(pauses) >= 3  # the memo grows by a quarter several times over the run
    # meta.json counts every full collection of the process, the ones outside the rows too
    assert meta["gc"]["watched"] and meta["gc"]["not_kept"] == 0 and meta["gc"]["full_collections"] >= len(pauses)
    share = {k: t.gc_ms.sum() / t.batch_ms.sum() for k, t in (("plain", plain), ("frozen", frozen))}
    print(f"full collections: {pauses.round(1).tolist()} ms; share of the loop {share}")
    assert finding.changes[0].gain_ms == pytest.approx(plain[~plain.warmup].gc_ms.mean())
    assert share["frozen"] < 0.6 * share["plain"]
    # pinprof compare of the two runs says what the freeze saved, beside the phases
    gc = next(c for c in compare(plain, frozen)[0] if c.phase == "gc")
    assert gc.measurable and gc.delta_ms < 0, gc.text()
    assert gc.text().startswith(f"full garbage collections: {-gc.delta_ms:.3f} ms faster per batch")
    # the freeze is seen where the loop began, and never advised again
    assert (plain.gc_frozen == 0).all() and (frozen.gc_frozen > 10_000).all()
    again = [f for d in diagnose(frozen) for f in d.findings if f.verdict == Verdict.GC_PAUSES]
    assert all("gc.freeze()" not in ch.what for f in again for ch in f.changes)
    assert all("gc.freeze() was in place" in f.evidence for f in again)


def test_the_rule_on_its_recorded_case() -> None:
    """``tests/data/cpu_gc_pauses``: six full collections of 136-240 ms in 160 batches of about 13 ms,
    all inside ``next()``: the dataset's memo set them off."""
    tl = read_timeline(HERE / "data" / "cpu_gc_pauses")
    d = diagnose(tl)[0]
    finding = next(f for f in d.findings if f.verdict == Verdict.GC_PAUSES)
    assert "in 6 batch(es)" in finding.evidence and "240.018 ms" in finding.evidence
    assert "6.585 ms of it inside next(loader)" in finding.evidence
    loader = next(f for f in d.findings if f.verdict == Verdict.LOADER_BOUND)
    assert "(of which 6.585 ms full garbage collections" in loader.evidence
    assert (tl.gc_fetch_ms <= tl.fetch_ms).all() and (tl.gc_ms <= tl.batch_ms).all()
