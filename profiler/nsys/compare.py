"""pinprof's CUDA-event figures next to CUPTI's, batch by batch."""

from __future__ import annotations

import numpy as np
import pandas as pd

# How far a batch's NVTX range may differ from pinprof's own batch time and still be the same batch.
# The range nests inside pinprof's clock reads, a few microseconds each side (0.07 ms at most in the
# CPU tests, tests/test_nsys_cpu.py); a lost range edge moves it by a whole batch.
RANGE_SLACK_MS = 1.0
RANGE_SLACK = 0.02


def compare(ours: pd.DataFrame, cupti: pd.DataFrame) -> pd.DataFrame:
    """pinprof's CUDA-event h2d_ms next to CUPTI's figure of the same meaning, per (scenario, batch).

    The reference depends on the source memory. From pinned memory, pinprof's events bracket the DMA
    alone: CUPTI's memcpy records (first start to last end). From pageable memory they bracket the
    driver's staging and the DMA, and the staging starts with the runtime call: CUPTI's span from
    the call's start to the last record's end (``h2d_span_ms``; the memcpy records alone miss the
    staging before the first DMA: medians of 0.13 and 0.27 ms of 12 MiB batches taking 1.6 and
    2.6 ms in two H200 captures).

    A batch is ``matched`` when the capture holds its copies and its range: CUPTI has memcpy records
    in it, and its ``batch <n>`` range lasts what pinprof measured (within ``RANGE_SLACK_MS`` plus
    ``RANGE_SLACK``). Nsight Systems 2023.4 under CUDA 13 loses records: in an H200 capture of
    ``pinprof profile`` on a resnet50 script it kept no CUDA activity for batches 1-8 and lost the
    NVTX edges between batches 9 and 10, so its "batch 9" lasted 148 ms (pinprof: 63.5 ms) and held
    batch 10's copy. Unmatched rows stay in the table, out of the summary lines.

    Columns: scenario, mode, batch, bytes, src_memory, h2d_ms_pinprof, h2d_ms_cupti (ms), reference
    (``memcpy`` or ``call+memcpy``), rel_diff (pinprof / CUPTI - 1), h2d_call_ms (pinprof, host),
    api_ms (CUPTI runtime call, host), h2d_memcpy_ms (CUPTI memcpy records alone), memcpy_count
    (CUPTI records in the batch's range), batch_ms_pinprof, batch_ms_nsys (ms), matched (bool).
    """
    left = ours[["scenario", "mode", "batch", "bytes", "src_memory", "h2d_ms", "h2d_call_ms", "batch_ms"]]
    cols = ["scenario", "batch", "h2d_ms", "api_ms", "batch_ms"]
    cols += [c for c in ("h2d_span_ms", "memcpy_count") if c in cupti]
    right = cupti[cols].rename(columns={"h2d_ms": "h2d_memcpy_ms", "batch_ms": "batch_ms_nsys"})
    joined = left.merge(right, on=["scenario", "batch"], how="inner").rename(
        columns={"h2d_ms": "h2d_ms_pinprof", "batch_ms": "batch_ms_pinprof"}
    )
    pageable = (joined.src_memory == "pageable").to_numpy()
    span = joined["h2d_span_ms"] if "h2d_span_ms" in joined else pd.Series(np.nan, index=joined.index)
    joined["h2d_ms_cupti"] = np.where(pageable, span, joined.h2d_memcpy_ms)
    joined["reference"] = np.where(pageable, "call+memcpy", "memcpy")
    joined["rel_diff"] = joined.h2d_ms_pinprof / joined.h2d_ms_cupti - 1.0
    slack = RANGE_SLACK_MS + RANGE_SLACK * joined.batch_ms_pinprof
    same_range = (joined.batch_ms_nsys - joined.batch_ms_pinprof).abs() <= slack
    joined["matched"] = (same_range & joined.h2d_ms_cupti.notna()).to_numpy()
    return joined.drop(columns=["h2d_span_ms"], errors="ignore")
