"""Does ``pinprof profile``'s hooking change the copies it times? torch.profiler's CUPTI records of the
same loop, with pinprof's hooks on (events as pinprof's clock, so CUPTI stays torch.profiler's) and off,
rounds alternated.

``tests/test_gpu_cupti.py`` compares pinprof's ``h2d_gpu_ms`` with torch.profiler's in alternated rounds;
for a dict batch whose image is a non-dense view, pinprof's median read about 1% under torch.profiler's
in three runs on H100s. If the same 1% shows here, with torch.profiler's records on both sides, the
copies themselves ran faster under the hooks, and pinprof's clock is not what differs. The loop and
its batches are that test's own (``user_loop``, ``batches_of``).

Run on a GPU: ``PINPROF_BACKEND=events python scripts/hook_perturb.py [--rounds 16]``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch

from profiler.bench.cupti import trace_events
from profiler.capture import auto_hooks
from profiler.capture.auto_session import AutoSession

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from test_gpu_cupti import DEV, batches_of, loader_of, user_loop


def per_batch(events: list[dict[str, Any]], sizes: set[int], copies: int, skip: int) -> np.ndarray:
    mem = [
        float(e.get("dur", 0)) / 1e3
        for e in sorted(events, key=lambda e: float(e["ts"]))
        if e.get("cat") == "gpu_memcpy"
        and "HtoD" in e.get("name", "")
        and int(e.get("args", {}).get("bytes", 0)) in sizes
    ]
    if len(mem) % copies:
        sys.exit(f"hook_perturb.py: {len(mem)} copies is not a whole number of batches of {copies}")
    return np.array(mem).reshape(-1, copies).sum(axis=1)[skip:]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=16, help="rounds a side per case (default 16)")
    ap.add_argument(
        "--cases", default="view-0,pageable-1048576,pinned-1048576", help="cases of tests/test_gpu_cupti.py"
    )
    args = ap.parse_args()
    if os.environ.get("PINPROF_BACKEND") != "events":
        sys.exit("hook_perturb.py: run with PINPROF_BACKEND=events, so torch.profiler holds CUPTI on both sides")
    w = torch.randn(1024, 1024, device=DEV) / 32
    one = lambda i: 1  # noqa: E731  # one matmul a step, as the test's agreement case
    print(
        f"torch.profiler's h2d ms per batch, hooks off against on, {args.rounds} alternated rounds of 46 batches a side"
    )
    for case in args.cases.split(","):
        batches = batches_of(case, 48)
        sizes = {v.numel() * v.element_size() for v in batches[0].values()}
        user_loop(loader_of(batches[:3]), case, w, one)  # warm
        sides: dict[str, list[np.ndarray]] = {"off": [], "on": []}
        for r in range(args.rounds):
            for side in ("off", "on") if r % 2 else ("on", "off"):  # neither side always first
                session = None
                if side == "on":
                    session = AutoSession(DEV, run="perturb")
                    auto_hooks.start(session)
                try:
                    ev, _ = trace_events(lambda: user_loop(loader_of(batches), case, w, one), cpu=False, cuda=True)  # noqa: B023
                finally:
                    if session is not None:
                        auto_hooks.stop()
                        session.close()
                sides[side].append(per_batch(ev, sizes, len(sizes), 2))
        off, on = np.concatenate(sides["off"]), np.concatenate(sides["on"])
        med = (np.median(on) - np.median(off)) / np.median(off)
        p90 = (np.quantile(on, 0.9) - np.quantile(off, 0.9)) / np.quantile(off, 0.9)
        print(
            f"  {case:15s} off median {np.median(off):.4f} p90 {np.quantile(off, 0.9):.4f} | on median {np.median(on):.4f} "
            f"p90 {np.quantile(on, 0.9):.4f} | on less off: median {med:+.4f}, p90 {p90:+.4f}"
        )


if __name__ == "__main__":
    main()
