"""Split a pageable copy's ``h2d_ms`` into the DMA proper and the driver's hidden staging.

Model. A copy from pageable memory is one ``cudaMemcpyAsync``; inside it the driver copies the bytes
through its own small pinned buffers and DMAs each piece. No event can sit between the two, so:

    dma_ms          = bytes / (pinned H2D bandwidth at that size, calibrated on this machine)
    hidden_stage_ms = h2d_gpu_ms - dma_ms   (clipped at 0; h2d_ms in files without h2d_gpu_ms)

With CUPTI's records the split is measured, not modelled: the timeline's ``dma_ms`` is the memcpy
records' own time and ``hidden_stage_ms`` the staging read around them
(``profiler.capture.clocks.cupti.batches.staging_ns``); ``apply`` leaves those rows as they are.

Assumptions: the DMA of pageable data runs at the pinned rate (the same engine over the same link);
everything else in ``h2d_ms`` is the CPU-side staging, including the pipeline bubbles between the
driver's pieces, which are staging's cost too. The CUPTI counterpart is the span from the start of
the pageable ``cudaMemcpyAsync`` call (the staging runs on the calling thread, from the call's
start) to the end of its memcpy record (the last DMA), minus CUPTI's own record of a pinned copy of
the same size. Not the API call's duration alone: the call returns once the last piece is staged,
before that piece's DMA ends (on the H200 the span exceeded the call by a near-constant ~70 us
from 1 to 64 MiB). ``tests/test_gpu_split.py`` checks the two agree batch by batch.
Only rows with ``src_memory`` ``pageable`` or ``mixed`` (a batch with one pageable leaf or more: its
pinned leaves' DMA is modelled at the same rate), a measured ``h2d_ms`` and no split yet are filled;
others stay empty. A layout copy timed inside the copy's events (``layout_ms``: ``pinprof profile``'s
hooks make it between them) is not staging, and is taken off.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from profiler.timeline.calibration import pinned_rate_GBps


def pinned_ms(nbytes: np.ndarray, calibration: pd.DataFrame) -> np.ndarray:
    """DMA time (ms) for ``nbytes`` at the calibrated pinned rate."""
    return nbytes / pinned_rate_GBps(calibration, nbytes) / 1e6


def apply(tl: pd.DataFrame, calibration: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``tl`` with ``dma_ms`` and ``hidden_stage_ms`` filled for pageable copies."""
    out = tl.copy()
    rows = out.src_memory.isin(["pageable", "mixed"]) & out.h2d_ms.notna() & (out.bytes > 0) & out.dma_ms.isna()
    if not rows.any() or calibration.empty:
        return out
    dma = pinned_ms(out.loc[rows, "bytes"].to_numpy(), calibration)
    out.loc[rows, "dma_ms"] = dma
    # The copies' own GPU time: with several copies per batch, h2d_ms also spans the gaps between them.
    gpu = out.h2d_gpu_ms.where(out.h2d_gpu_ms.notna(), out.h2d_ms)
    layout = out.layout_ms.fillna(0.0) if "layout_ms" in out else 0.0
    out.loc[rows, "hidden_stage_ms"] = np.clip((gpu - layout)[rows].to_numpy() - dma, 0.0, None)
    return out


def unsplit(tl: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``tl`` with copies whose GPU time was measured but not their DMA apart (``dma_ms``
    empty: CUDA events time a copy call as one span): the ones a calibration splits. Rows whose clock
    recorded the DMA itself (CUPTI's memcpy records) are split as measured."""
    return tl[(tl.bytes > 0) & tl.h2d_gpu_ms.notna() & tl.dma_ms.isna()]


def pinned_as_measured(tl: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``tl`` whose pinned batches with no DMA apart (``unsplit``: timed by the events) read their
    copies' GPU time as the DMA (an asynchronous copy from pinned memory is the DMA alone, between its
    events) and no staging."""
    out = tl.copy()
    rows = (out.src_memory == "pinned") & out.h2d_gpu_ms.notna() & out.dma_ms.isna()
    out.loc[rows, "dma_ms"] = out.loc[rows, "h2d_gpu_ms"]
    out.loc[rows, "hidden_stage_ms"] = 0.0
    return out


def accounted_ms(tl: pd.DataFrame) -> pd.Series:
    """Per row, what the split's parts (``layout_ms + hidden_stage_ms + dma_ms``) account for, read from
    other instruments: the copy calls' host time (``layout_ms + h2d_call_ms``, the host clock) and the
    DMA's tail past the last call's return (``h2d_end_ms - wait_end_ms``, the GPU clock; 0 when the DMA
    ended first). Defined for rows whose copies block the host (``wait_ms`` equal to ``h2d_call_ms``:
    ``wait_end_ms`` is then the last call's return, as for every batch with a pageable copy); NaN for
    the others, whose DMA runs behind the host and has no tail to take."""
    blocking = np.isclose(tl.wait_ms, tl.h2d_call_ms, rtol=0.0, atol=1e-6) & tl.h2d_call_ms.notna()
    tail = (tl.h2d_end_ms - tl.wait_end_ms).clip(lower=0.0)
    host = tl.layout_ms.fillna(0.0) + tl.h2d_call_ms
    return (host + tail).where(blocking)
