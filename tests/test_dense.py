"""The hidden copies of a batch's copy, on a CPU: which tensors ``.to(device)`` makes contiguous
first (``profiler.capture.dense``), the leaf such a tensor is named by, the driver's staging read
around CUPTI's records (``cupti.batches.staging_ns``), the events' split by the calibrated rate
(``timeline.split``), and the findings that name the leaf."""

from __future__ import annotations

from collections import namedtuple
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from profiler.analysis.diagnose import diagnose
from profiler.analysis.findings import Verdict
from profiler.capture.clocks.cupti.batches import staging_ns
from profiler.capture.dense import Leaves, leaf_path, needs_layout, needs_layout_into
from profiler.report.files import read_timeline
from profiler.timeline import split

DATA = Path(__file__).parent / "data"


def test_only_a_tensor_with_gaps_or_repeats_is_made_contiguous_inside_the_copy() -> None:
    rgba = torch.zeros(4, 8, 8, 4, dtype=torch.uint8)
    assert needs_layout(rgba[..., :3])  # the alpha channel sliced off: gaps
    assert needs_layout(torch.zeros(1, 5).expand(4, 5))  # a stride of 0: repeats
    assert needs_layout(torch.zeros(6, 8)[::2])  # every other row
    # dense, whatever the order of its strides: copied as it is (torch's result keeps the strides)
    assert not needs_layout(rgba)
    assert not needs_layout(torch.zeros(64, 10).t())
    assert not needs_layout(torch.zeros(2, 3, 8, 8).to(memory_format=torch.channels_last))
    # a non-dense channels-last view: torch lays the result out channels-last, so it is left to torch
    assert not needs_layout(torch.zeros(2, 4, 8, 8).to(memory_format=torch.channels_last)[:, :3])
    # into a given tensor: the source is made contiguous where the destination is and the dtypes agree
    dst = torch.empty(4, 8, 8, 3, dtype=torch.uint8)
    assert needs_layout_into(dst, rgba[..., :3])
    assert not needs_layout_into(dst.permute(0, 3, 1, 2), rgba[..., :3].permute(0, 3, 1, 2))
    assert not needs_layout_into(dst.float(), rgba[..., :3])


def test_the_layout_copy_the_hooks_make_is_the_same_tensor_torch_copies() -> None:
    view = torch.arange(4 * 8 * 8 * 4, dtype=torch.int32).reshape(4, 8, 8, 4)[..., :3]
    made = view.contiguous()
    assert made.is_contiguous() and torch.equal(made, view)
    assert torch.empty_like(view, device="meta").stride() == made.stride()  # torch's own result layout


def test_a_leaf_is_named_by_its_key_path_or_as_a_view_of_one() -> None:
    Pair = namedtuple("Pair", "image label")
    image = torch.zeros(2, 4, 4, 4)
    boxes = torch.zeros(2, 4, 8).transpose(1, 2)
    view, label = image[..., :3], torch.zeros(2)
    batch = {"image": view, "meta": {"boxes": boxes}, "pairs": [Pair(image, label)]}
    assert leaf_path(batch, view) == "batch['image']"
    assert leaf_path(batch, boxes) == "batch['meta']['boxes']"
    assert leaf_path(batch, label) == "batch['pairs'][0].label"
    # a view made in the loop, of a leaf: named by the leaf it reads (its storage)
    assert leaf_path(batch, boxes[:, :2]) == "batch['meta']['boxes'] (a view of it)"
    assert leaf_path((image, 3), image) == "batch[0]"
    assert leaf_path(batch, torch.zeros(3)) == ""


def test_leaves_are_summed_per_scenario_largest_first_and_bounded() -> None:
    leaves = Leaves()
    image = torch.zeros(64, 8, 8, 4, dtype=torch.uint8)[..., :3]
    boxes = torch.zeros(64, 4, 8).transpose(1, 2)
    for _ in range(3):
        leaves.note("s", "batch['image']", image, True, 2.0)
        leaves.note("s", "batch['meta']['boxes']", boxes, True, 0.1)
    (first, second) = leaves.summary()["s"]
    assert first["path"] == "batch['image']" and first["copies"] == 3 and first["layout_ms"] == pytest.approx(6.0)
    assert first["shape"] == [64, 8, 8, 3] and first["strides"] == [256, 32, 4, 1] and first["dtype"] == "uint8"
    assert first["bytes"] == 64 * 8 * 8 * 3 and first["pinned"] is True
    assert second["path"] == "batch['meta']['boxes']"
    for k in range(Leaves.MAX + 5):  # a new view every batch: the summary stays bounded
        leaves.note("t", f"batch[{k}]", torch.zeros(k + 1, 2)[:, :1], False, 0.01)
    assert len(leaves.summary()["t"]) == Leaves.MAX


def _mem(rows: list[tuple[int, int, int]]) -> dict[str, list[int]]:
    """(start, end, memory kind) of each record, as the recorder's lists."""
    return {"start": [r[0] for r in rows], "end": [r[1] for r in rows], "src_kind": [r[2] for r in rows]}


@pytest.mark.parametrize(
    ("call", "records", "staged"),
    [
        # pageable: staged piece by piece inside the call, its DMA 40 us past the call's return
        ((1_000, 9_000), [(3_000, 9_040, 1)], (9_040 - 1_000) - (9_040 - 3_000)),
        # pageable, the call returning after its DMA (a blocking copy that synchronised)
        ((1_000, 12_000), [(3_000, 9_000, 1)], (12_000 - 1_000) - (9_000 - 3_000)),
        # pinned: no staging, however long the call waited
        ((1_000, 12_000), [(3_000, 9_000, 2)], 0),
        # a pageable copy the device ran as two records: both DMAs come off
        ((0, 10_000), [(2_000, 5_000, 1), (6_000, 10_500, 1)], 10_500 - 3_000 - 4_500),  # span less both DMAs
    ],
)
def test_the_drivers_staging_is_the_calls_span_to_its_last_dma_less_the_dma(
    call: tuple[int, int], records: list[tuple[int, int, int]], staged: int
) -> None:
    mem = _mem(records)
    assert staging_ns(call[0], call[1], list(range(len(records))), mem) == staged


def _events_rows() -> pd.DataFrame:
    """Four batches timed by events: pageable with a layout copy, mixed, pinned, and one CUPTI split."""
    return pd.DataFrame(
        {
            "src_memory": ["pageable", "mixed", "pinned", "pageable"],
            "gpu_clock": ["events", "events", "events", "cupti"],
            "bytes": [8 << 20, 8 << 20, 8 << 20, 8 << 20],
            "h2d_ms": [3.0, 2.5, 0.2, 2.4],
            "h2d_gpu_ms": [3.0, 2.5, 0.2, 2.4],
            "layout_ms": [1.0, np.nan, np.nan, np.nan],
            "dma_ms": [np.nan, np.nan, np.nan, 0.9],
            "hidden_stage_ms": [np.nan, np.nan, np.nan, 1.5],
        }
    )


def test_the_events_split_takes_the_layout_copy_off_and_leaves_cuptis_rows_alone() -> None:
    cal = pd.DataFrame({"bytes": [1 << 20, 64 << 20], "pinned_GBps": [40.0, 40.0]})
    got = split.pinned_as_measured(split.apply(_events_rows(), cal))
    dma = (8 << 20) / 40e9 * 1e3
    assert got.dma_ms.tolist()[:2] == pytest.approx([dma, dma])
    assert got.hidden_stage_ms[0] == pytest.approx(3.0 - 1.0 - dma)  # the layout copy is not staging
    assert got.hidden_stage_ms[1] == pytest.approx(2.5 - dma)
    assert (got.dma_ms[2], got.hidden_stage_ms[2]) == (0.2, 0.0)  # pinned: the events time the DMA itself
    assert (got.dma_ms[3], got.hidden_stage_ms[3]) == (0.9, 1.5)  # measured by CUPTI: kept


def test_a_calibration_splits_the_rows_with_a_copys_gpu_time_and_no_dma_apart() -> None:
    # by the columns, not by the clock's name: the events' three rows, not CUPTI's, nor a row whose
    # copy the GPU clock never timed or one with no copy
    rows = pd.concat([_events_rows(), _events_rows().iloc[:2]], ignore_index=True)
    rows.loc[4, "h2d_gpu_ms"] = np.nan
    rows.loc[5, "bytes"] = 0
    assert split.unsplit(rows).index.tolist() == [0, 1, 2]


def _view_case(pinned: bool, pin_memory: bool) -> list:
    """A recorded pinned_nb loop (its GPU idle for its copies) made into one whose batch image is a non-dense view: each batch pays
    a layout copy and the driver's staging of it, and meta.json names the leaf."""
    tl = read_timeline(DATA / "h200_gpu_bound")
    tl = tl[tl.scenario == "pinned_nb/bs128/w12"].copy()
    batch = tl.batch_ms.mean()
    tl["layout_ms"], tl["hidden_stage_ms"], tl["dma_ms"] = 0.2 * batch, 0.15 * batch, 0.05 * batch
    tl["src_memory"], tl["pin_memory"] = "pageable", pin_memory
    leaf = {
        "path": "batch['image']",
        "shape": [64, 224, 224, 3],
        "strides": [200704, 896, 4, 1],
        "dtype": "uint8",
        "pinned": pinned,
        "copies": len(tl),
        "bytes": 64 * 224 * 224 * 3,
        "layout_ms": 1.0,
    }
    loaders = {"pinned_nb/bs128/w12": {"layout_leaves": [leaf]}}
    return diagnose(tl, loaders=loaders)[0].findings


def test_a_pinned_view_copied_from_pageable_memory_is_named_with_its_leaf_and_the_code_to_change() -> None:
    found = _view_case(pinned=True, pin_memory=True)
    verdicts = [f.verdict for f in found]
    assert verdicts[0] in (Verdict.PINNED_BYPASSED, Verdict.LAYOUT_COPY)
    assert Verdict.LAYOUT_COPY in verdicts and Verdict.PINNED_BYPASSED in verdicts
    # the staging is the bypassed pin's, not advice to pin: neither finding that says "pin it" fires
    assert Verdict.NON_BLOCKING_PAGEABLE not in verdicts and Verdict.HIDDEN_STAGING not in verdicts
    (bypassed,) = [f for f in found if f.verdict == Verdict.PINNED_BYPASSED]
    assert "batch['image'] (uint8 [64, 224, 224, 3], strides [200704, 896, 4, 1])" in bypassed.evidence
    assert "batch['image'] = batch['image'].contiguous()" in bypassed.changes[0].what
    (layout,) = [f for f in found if f.verdict == Verdict.LAYOUT_COPY]
    assert "batch['image']" in layout.evidence and "collate_fn" in layout.changes[0].what
    # its saving: the layout copy and the staging that a pinned dense tensor would not need
    assert layout.changes[0].gain_ms == pytest.approx(bypassed.changes[0].gain_ms)


def test_a_pageable_view_is_told_its_layout_copy_not_that_pinning_was_bypassed() -> None:
    found = _view_case(pinned=False, pin_memory=False)
    verdicts = [f.verdict for f in found]
    assert Verdict.LAYOUT_COPY in verdicts and Verdict.PINNED_BYPASSED not in verdicts
    (layout,) = [f for f in found if f.verdict == Verdict.LAYOUT_COPY]
    (bypassed_gain,) = [f.changes[0].gain_ms for f in _view_case(True, True) if f.verdict == Verdict.LAYOUT_COPY]
    assert layout.changes[0].gain_ms < bypassed_gain  # unpinned, the staging stays after the change
