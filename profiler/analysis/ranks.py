"""Findings across the ranks of a distributed run: one slow loader, a shared host link."""

from __future__ import annotations

import numpy as np
import pandas as pd

from profiler.analysis.rates import pinned_rate_GBps
from profiler.analysis.rules.base import TOO_SMALL_SHARE

# One rank's loader wait this many times the other ranks' median makes every rank wait for it at the
# next collective.
IMBALANCE_FACTOR = 1.5
# Pinned copies slower than this share of the single-rank calibration mean the ranks' copies compete
# for host memory bandwidth or a shared PCIe switch.
CONTENTION_SHARE = 0.8


def diagnose_ranks(tl: pd.DataFrame, calibration: pd.DataFrame | None = None) -> list[str]:
    """Findings across the ranks of a distributed run (empty for a single process)."""
    if "world_size" not in tl or tl.world_size.max() < 2:
        return []  # a single process: nothing copied, nothing to say
    rows = tl[~tl.warmup]
    out = []
    for scen, g in rows.groupby("scenario", sort=False):
        per_rank = g.groupby("rank")
        fetch = per_rank.fetch_ms.median()
        batch = per_rank.batch_ms.median()
        if len(fetch) > 1:
            slow = fetch.idxmax()
            others = fetch.drop(slow).median()
            if (
                fetch[slow] > IMBALANCE_FACTOR * max(others, 1e-9)
                and fetch[slow] - others > TOO_SMALL_SHARE * batch.median()
            ):
                out.append(
                    f"{scen}: rank imbalance - rank {slow} waits {fetch[slow]:.3f} ms per batch on its loader, "
                    f"the other ranks {others:.3f} ms; every rank waits for it at the next collective. "
                    f"Change: more workers or a cheaper shard for rank {slow} (saves about "
                    f"{fetch[slow] - others:.3f} ms/batch on all ranks)."
                )
        pinned = g[(g.src_memory == "pinned") & g.h2d_ms.notna() & (g.h2d_ms > 0)]
        if len(pinned):
            nbytes = float(pinned.bytes.median())
            single = pinned_rate_GBps(tl.iloc[0:0], nbytes, calibration)
            rates = (pinned.bytes / pinned.h2d_ms / 1e6).groupby(pinned["rank"]).median()
            if not np.isnan(single) and rates.min() < CONTENTION_SHARE * single:
                out.append(
                    f"{scen}: host-link contention - pinned H2D runs at {rates.min():.1f}-{rates.max():.1f} GB/s "
                    f"per rank against {single:.1f} GB/s for one rank alone (calibration): the ranks' copies "
                    "share host memory bandwidth or a PCIe switch. Change: overlap the copies with compute "
                    "(pinned_nb), or stagger them across ranks."
                )
    return out
