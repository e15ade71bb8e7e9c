"""The split of a copy into its layout copy, the driver's staging and the DMA, and the findings on it, on
``pinprof profile`` runs recorded on an H100 (``tests/data/h100_hidden``: ``tests/scripts/dict_batches.py``
with its image a non-dense view the loader pins, dense and pageable, dense and pinned; CUPTI's clock,
and the events' for the view).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from profiler.analysis.diagnose import diagnose
from profiler.analysis.findings import Verdict
from profiler.report.files import read_timeline
from profiler.timeline import split

DATA = Path(__file__).parent / "data" / "h100_hidden"


def recorded(name: str) -> tuple[pd.DataFrame, dict]:
    folder = DATA / name
    return read_timeline(folder), json.loads((folder / "meta.json").read_text())


def steady(tl: pd.DataFrame) -> pd.DataFrame:
    return tl[~tl.warmup.astype(bool)]


def findings(name: str) -> list:
    tl, meta = recorded(name)
    return diagnose(tl, loaders=meta["loaders"])[0].findings


def test_cuptis_rows_of_the_view_hold_a_layout_copy_the_staging_and_the_dma() -> None:
    tl = steady(recorded("view-cupti")[0])
    assert len(tl) >= 40 and set(tl.gpu_clock) == {"cupti"}
    assert (tl.layout_ms > 0).all() and (tl.hidden_stage_ms > 0).all() and (tl.dma_ms > 0).all()
    assert set(tl.src_memory) == {"mixed"}  # the image from pageable memory, its label and boxes pinned
    # the layout copy is most of the copy's host time: a 9.6 MiB gather on the loop's thread
    assert (tl.layout_ms > tl.h2d_call_ms).all()
    # the staging and DMA of a call span at least the call itself (cupti.batches.staging_ns): the image's
    # call alone is most of the batch's call time
    assert ((tl.hidden_stage_ms + tl.dma_ms) > 0.5 * tl.h2d_call_ms).all()


def test_the_control_and_the_pageable_copy_split_as_their_memory_says() -> None:
    dense = steady(recorded("dense-cupti")[0])
    assert set(dense.src_memory) == {"pinned"}
    assert dense.layout_ms.fillna(0).max() == 0 and dense.hidden_stage_ms.fillna(0).max() == 0
    assert (dense.dma_ms > 0).all()
    pageable = steady(recorded("pageable-cupti")[0])
    assert set(pageable.src_memory) == {"mixed", "pageable"} & set(pageable.src_memory)
    assert pageable.layout_ms.fillna(0).max() == 0 and (pageable.hidden_stage_ms > 0).all()
    # the same bytes: the pageable record spans the driver's pieces, longer than the pinned DMA
    assert (pageable.bytes == dense.bytes.iloc[0]).all()
    assert pageable.dma_ms.median() > dense.dma_ms.median()


def test_the_views_verdict_names_the_layout_copy_its_leaf_and_the_code_not_the_loader() -> None:
    found = findings("view-cupti")
    verdicts = [f.verdict for f in found]
    assert verdicts[0] in (Verdict.PINNED_BYPASSED, Verdict.LAYOUT_COPY), verdicts
    assert Verdict.LOADER_BOUND not in verdicts[:1]
    (layout,) = [f for f in found if f.verdict == Verdict.LAYOUT_COPY]
    assert "batch['image'] (uint8 [64, 224, 224, 3], strides [200704, 896, 4, 1])" in layout.evidence
    assert "collate_fn" in layout.changes[0].what and ".contiguous()" in layout.changes[0].what
    tl = steady(recorded("view-cupti")[0])
    # its saving is the layout copy and the staging, as measured, not more
    assert 0 < layout.changes[0].gain_ms <= (tl.layout_ms + tl.hidden_stage_ms).mean() * 1.001
    (bypassed,) = [f for f in found if f.verdict == Verdict.PINNED_BYPASSED]
    assert "batch['image']" in bypassed.evidence


def test_the_dense_runs_are_told_nothing_of_a_layout_copy() -> None:
    for name in ("dense-cupti", "pageable-cupti"):
        verdicts = [f.verdict for f in findings(name)]
        assert Verdict.LAYOUT_COPY not in verdicts and Verdict.PINNED_BYPASSED not in verdicts, (name, verdicts)
    assert Verdict.HIDDEN_STAGING not in [f.verdict for f in findings("dense-cupti")]


def test_the_events_split_of_the_view_replays_from_its_calibration() -> None:
    """The events' rows as the hooks wrote them (no split), split again with the pinned rate the run
    calibrated (meta.json): the recorded columns, and the layout copy not counted as staging."""
    tl, meta = recorded("view-events")
    cal = pd.DataFrame(meta["calibration"])
    raw = tl.assign(dma_ms=float("nan"), hidden_stage_ms=float("nan"))
    got = split.apply(raw, cal)
    rows = got.src_memory.isin(["pageable", "mixed"])
    assert rows.mean() > 0.9
    assert got.dma_ms[rows].tolist() == pytest.approx(tl.dma_ms[rows].tolist())
    assert got.hidden_stage_ms[rows].tolist() == pytest.approx(tl.hidden_stage_ms[rows].tolist())
    s = steady(got)
    assert (s.h2d_gpu_ms - s.layout_ms - s.dma_ms - s.hidden_stage_ms).abs().max() < 1e-6


@pytest.mark.parametrize("name", ["view-cupti", "pageable-cupti", "view-events"])
def test_the_parts_account_for_the_calls_and_the_dmas_tail_batch_by_batch(name: str) -> None:
    tl = steady(recorded(name)[0])
    parts = tl.layout_ms.fillna(0) + tl.hidden_stage_ms.fillna(0) + tl.dma_ms
    accounted = split.accounted_ms(tl)
    assert accounted.notna().all()
    assert ((parts / accounted - 1).abs() <= 0.05).mean() >= 0.95


def test_accounted_takes_the_tail_past_the_last_call_and_leaves_asynchronous_rows_out() -> None:
    tl = pd.DataFrame(
        {
            "layout_ms": [2.0, float("nan"), float("nan")],
            "h2d_call_ms": [1.0, 1.5, 0.02],
            "wait_ms": [1.0, 1.5, 0.3],  # the third row's copy ran behind the host: its wait is not its calls
            "wait_end_ms": [10.0, 20.0, 30.0],
            "h2d_end_ms": [10.25, 19.9, 30.2],  # a tail of 0.25 ms; a DMA done before the call returned
        }
    )
    got = split.accounted_ms(tl)
    assert got.iloc[0] == pytest.approx(3.25) and got.iloc[1] == pytest.approx(1.5)
    assert np.isnan(got.iloc[2])
