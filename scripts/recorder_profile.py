"""Where the recorder's host time goes, per call: cProfile of ``scripts/bench_overhead.py``'s no-op
loop (``pinned_nb``, resident pinned batches of 1 KiB leaves, run by its own code) on a GPU, one-leaf and three-leaf
batches, the top functions by own time in us per batch.

    python scripts/recorder_profile.py [--batches 3000] [--top 30]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
from typing import Any

import torch
from bench_overhead import profiled_recorder_loop, recorder_batches


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, default=3000, help="batches profiled per case (default 3000)")
    ap.add_argument("--top", type=int, default=30, help="functions listed per case (default 30)")
    args = ap.parse_args()
    dev = torch.device("cuda")
    for leaves in (1, 3):
        loader = recorder_batches(leaves, args.batches)

        def loop(loader: list[Any]) -> None:
            profiled_recorder_loop(loader, dev)[1].timeline()

        loop(loader)  # warm-up
        pr = cProfile.Profile()
        pr.enable()
        loop(loader)
        pr.disable()
        st = pstats.Stats(pr)
        rows = sorted(st.stats.items(), key=lambda kv: -kv[1][2])  # type: ignore[attr-defined]
        total = sum(v[2] for v in st.stats.values()) / args.batches * 1e6  # type: ignore[attr-defined]
        print(f"== {leaves} leaf batch: {total:.1f} us/batch of profiled own time (cProfile's, inflated)")
        for (file, line, name), (_cc, nc, tt, ct, _) in rows[: args.top]:
            print(
                f"{tt / args.batches * 1e6:8.2f} us {ct / args.batches * 1e6:8.2f} cum {nc / args.batches:6.1f}x  {name}  {file.split('site-packages/')[-1].split('/work/main/')[-1]}:{line}"
            )


if __name__ == "__main__":
    main()
