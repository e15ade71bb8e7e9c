"""Does ``pinprof profile``'s hooking change the copies it times? torch.profiler's CUPTI records of the
same loop, with pinprof's hooks on (events as pinprof's clock, so CUPTI stays torch.profiler's) and off,
rounds alternated.

``tests/test_gpu_cupti.py`` compares pinprof's ``h2d_gpu_ms`` with torch.profiler's in alternated rounds;
for a dict batch whose image is a non-dense view, pinprof's median read about 1% under torch.profiler's
in three runs on H100s. If the same 1% shows here, with torch.profiler's records on both sides, the
copies themselves ran faster under the hooks, and pinprof's clock is not what differs.

Run on a GPU: ``PINPROF_BACKEND=events python scripts/hook_perturb.py [--rounds 16]``.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader

from profiler.bench.cupti import trace_events
from profiler.capture import auto_hooks
from profiler.capture.auto_session import AutoSession

DEV = torch.device("cuda")
MiB = 1 << 20


def batches_of(case: str, n: int) -> list[dict[str, torch.Tensor]]:
    """The test's batches (``tests/test_gpu_cupti.py``): never zeros."""
    g = torch.Generator().manual_seed(1)
    out = []
    for _ in range(n):
        if case == "view":
            img = torch.randint(0, 255, (64, 4, 64, 64), dtype=torch.uint8, generator=g).pin_memory()
            out.append({"image": img[:, :3], "label": torch.randint(0, 9, (64,), generator=g).pin_memory()})
        else:
            t = torch.randint(0, 255, (MiB,), dtype=torch.uint8, generator=g)
            out.append({"data": t if case == "pageable" else t.pin_memory()})
    return out


def user_loop(batches: list[dict[str, torch.Tensor]], case: str, x: torch.Tensor, w: torch.Tensor) -> None:
    side = torch.cuda.Stream()
    for batch in DataLoader(batches, batch_size=None, num_workers=0):  # type: ignore[arg-type]
        if case == "view":
            with torch.cuda.stream(side):
                moved = {k: v.to(DEV, non_blocking=True) for k, v in batch.items()}
            torch.cuda.current_stream().wait_stream(side)
        else:
            moved = {k: v.to(DEV) for k, v in batch.items()}
        del moved
        torch.tanh(x @ w).sum()
        torch.cuda.synchronize()


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
    ap.add_argument("--cases", default="view,pageable,pinned", help="of view, pageable, pinned (1 MiB)")
    args = ap.parse_args()
    if os.environ.get("PINPROF_BACKEND") != "events":
        sys.exit("hook_perturb.py: run with PINPROF_BACKEND=events, so torch.profiler holds CUPTI on both sides")
    x = torch.randn(256, 1024, device=DEV)
    w = torch.randn(1024, 1024, device=DEV) / 32
    print(
        f"torch.profiler's h2d ms per batch, hooks off against on, {args.rounds} alternated rounds of 46 batches a side"
    )
    for case in args.cases.split(","):
        batches = batches_of(case, 48)
        sizes = {v.numel() * v.element_size() for v in batches[0].values()}
        user_loop(batches[:3], case, x, w)  # warm
        sides: dict[str, list[np.ndarray]] = {"off": [], "on": []}
        for r in range(args.rounds):
            for side in ("off", "on") if r % 2 else ("on", "off"):  # neither side always first
                session = None
                if side == "on":
                    session = AutoSession(DEV, run="perturb")
                    auto_hooks.start(session)
                try:
                    ev, _ = trace_events(lambda: user_loop(batches, case, x, w), cpu=False, cuda=True)  # noqa: B023
                finally:
                    if session is not None:
                        auto_hooks.stop()
                        session.close()
                sides[side].append(per_batch(ev, sizes, len(sizes), 2))
        off, on = np.concatenate(sides["off"]), np.concatenate(sides["on"])
        med = (np.median(on) - np.median(off)) / np.median(off)
        p90 = (np.quantile(on, 0.9) - np.quantile(off, 0.9)) / np.quantile(off, 0.9)
        print(
            f"  {case:9s} off median {np.median(off):.4f} p90 {np.quantile(off, 0.9):.4f} | on median {np.median(on):.4f} "
            f"p90 {np.quantile(on, 0.9):.4f} | on less off: median {med:+.4f}, p90 {p90:+.4f}"
        )


if __name__ == "__main__":
    main()
