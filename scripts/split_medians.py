"""A profiled run's copy split at a glance: medians over its steady batches of the columns that split
a batch's copies (ms) and their sum, its memory kind and clock, and the leaves meta.json names. Then,
batch by batch, the parts over what they account for (``split.accounted_ms``: the calls' host time
and the DMA's tail), as ``tests/test_gpu_hidden_copies.py`` reads them, and each batch past its 5%.

    python scripts/split_medians.py REPORT_DIR [--skip N]   (batches before N left out; default 5)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd

from profiler.timeline import split

COLUMNS = ("batch_ms", "h2d_call_ms", "layout_ms", "hidden_stage_ms", "dma_ms", "h2d_gpu_ms", "h2d_ms", "wait_ms")


BOUND = 0.05  # tests/test_gpu_hidden_copies.py's ACCOUNTED_BOUND


def main() -> None:
    folder = Path(sys.argv[1])
    skip = int(sys.argv[sys.argv.index("--skip") + 1]) if "--skip" in sys.argv else 5
    tl = pd.read_csv(folder / "timeline.csv")
    steady = tl[~tl.warmup.astype(bool) & (tl.batch >= skip)]
    med = {c: round(float(steady[c].median()), 4) for c in COLUMNS if c in steady}
    # the split's parts summed per batch: what the copy calls' host time and their DMA's tail come to
    parts = steady[["layout_ms", "hidden_stage_ms", "dma_ms"]].fillna(0).sum(axis=1)
    med["layout+hidden_stage+dma"] = round(float(parts.median()), 4)
    kinds = steady.src_memory.value_counts().to_dict()
    clocks = steady.gpu_clock.value_counts().to_dict()
    print(f"   {len(steady)} steady batches, src_memory {kinds}, gpu_clock {clocks}")
    print("   medians (ms): " + ", ".join(f"{k} {v}" for k, v in med.items()))
    ratio = parts / split.accounted_ms(steady)
    off = (ratio - 1).abs()
    print(
        f"   parts / accounted per batch: median {ratio.median():.4f}, max off {off.max():.4f}, "
        f"{int((off > BOUND).sum())} of {int(ratio.notna().sum())} past {BOUND:.0%}"
    )
    for i in off[off > BOUND].index:
        row = steady.loc[i]
        print(
            f"     batch {int(row.batch)}: parts {parts[i]:.3f} ms over {parts[i] / ratio[i]:.3f}; h2d_call_ms "
            f"{row.h2d_call_ms:.3f} (median {steady.h2d_call_ms.median():.3f}), layout_ms {row.layout_ms:.3f}, "
            f"hidden_stage_ms {row.hidden_stage_ms:.3f}, dma_ms {row.dma_ms:.3f}"
        )
    meta = json.loads((folder / "meta.json").read_text())
    for scen, seen in (meta.get("loaders") or {}).items():
        for leaf in seen.get("layout_leaves", []):
            print(f"   {scen}: layout leaf {leaf}")


if __name__ == "__main__":
    main()
