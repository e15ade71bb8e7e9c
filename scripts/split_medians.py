"""A profiled run's copy split at a glance: medians over its steady batches of the columns that split
a batch's copies (ms) and their sum, its memory kind and clock, and the leaves meta.json names.

    python scripts/split_medians.py REPORT_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd

COLUMNS = ("batch_ms", "h2d_call_ms", "layout_ms", "hidden_stage_ms", "dma_ms", "h2d_gpu_ms", "h2d_ms", "wait_ms")


def main() -> None:
    folder = Path(sys.argv[1])
    tl = pd.read_csv(folder / "timeline.csv")
    steady = tl[~tl.warmup.astype(bool)]
    med = {c: round(float(steady[c].median()), 4) for c in COLUMNS if c in steady}
    # the split's parts summed per batch: what the copy calls' host time and their DMA's tail come to
    parts = steady[["layout_ms", "hidden_stage_ms", "dma_ms"]].fillna(0).sum(axis=1)
    med["layout+hidden_stage+dma"] = round(float(parts.median()), 4)
    kinds = steady.src_memory.value_counts().to_dict()
    clocks = steady.gpu_clock.value_counts().to_dict()
    print(f"   {len(steady)} steady batches, src_memory {kinds}, gpu_clock {clocks}")
    print("   medians (ms): " + ", ".join(f"{k} {v}" for k, v in med.items()))
    meta = json.loads((folder / "meta.json").read_text())
    for scen, seen in (meta.get("loaders") or {}).items():
        for leaf in seen.get("layout_leaves", []):
            print(f"   {scen}: layout leaf {leaf}")


if __name__ == "__main__":
    main()
