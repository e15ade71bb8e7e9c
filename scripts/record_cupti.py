#!/usr/bin/env python3
"""Record what the CUPTI backend sees of three small loops, for the CPU tests (``tests/data/h200_cupti``).

On the GPU machine (``GPU_CHECK_STEPS=record-cupti bash scripts/gpu_check.sh``). Three loops, each a
profiler of its own, with a step whose GPU work depends on its batch (``k`` matrix products, ``k``
read from the batch's first label), so the CPU test can check that each row holds its own step:

- ``pinned_nb``: the library (``TransferProfiler``), dict batches of a 1 MiB pinned image and labels;
- ``pageable``: the library, 256 KiB pageable batches, blocking;
- ``auto``: ``pinprof profile``'s hooks (``AutoSession``) on a DataLoader with pinned workers and
  blocking ``.to()`` of dict batches of 0.5 MiB of token ids, as Accelerate's prepared loader copies.

Writes ``OUT/recording.npz`` (the raw activity buffers, the record sizes and clock offset CUPTI gave,
every batch as the loop handed it over: its copy calls, step windows and end) and
``OUT/expected.csv`` (the rows the GPU machine attributed, per loop, with each batch's ``k``).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from torch.utils.data import DataLoader, Dataset

from profiler import TransferProfiler
from profiler.capture import auto_hooks
from profiler.capture.auto_session import AutoSession
from profiler.capture.clocks import choice as backend
from profiler.capture.clocks.cupti.recorder import CuptiRecorder
from profiler.settings import current

MiB = 1 << 20


def step(x: torch.Tensor, k: int, w: torch.Tensor) -> torch.Tensor:
    y = x
    for _ in range(k):
        y = torch.tanh(y @ w)
    return y.sum()


def ks(n: int) -> list[int]:
    return [1 + (i * 7) % 4 for i in range(n)]  # 1..4, not in step with the batch number


class Tokens(Dataset):
    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        g = torch.Generator().manual_seed(i)
        return {"input_ids": torch.randint(0, 30000, (512,), generator=g), "k": torch.tensor(ks(self.n)[i // 64])}


def save_tap(rec: CuptiRecorder, stores: dict[int, str], out: Path) -> str:
    """``out/recording.npz``: the raw buffers the recorder's tap kept, the record sizes and clock pair
    of each, and every batch as the loop handed it over (``stores``: a store's id to its loop's name)."""
    tap, rec.tap = rec.tap or [], None
    buffers = [t for t in tap if t[0] == "buffer"]
    batches = [
        {"loop": stores.get(id(t[1]), "?"), "row": t[2], "calls": t[3], "windows": t[4], "end_ns": t[5]}
        for t in tap
        if t[0] == "batch"
    ]
    out.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(
        out / "recording.npz",
        buffer_bytes=np.frombuffer(b"".join(t[1] for t in buffers), dtype=np.uint8),
        buffer_lengths=np.array([len(t[1]) for t in buffers], dtype=np.int64),
        meta=np.array(
            json.dumps(
                {
                    "sizes": {str(k): v for k, v in rec.sizes.items()},
                    "clocks": [{"host_ns": t[2][0], "cupti": t[2][1], "rate": t[3]} for t in buffers],
                    "batches": batches,
                    # markers (profiler.capture.clocks.cupti.marker): their stream's CUPTI id, and each one's
                    # host ns and bytes in the order issued; none where launch times placed the kernels
                    "marker_stream": next((t[1] for t in tap if t[0] == "marker_stream"), None),
                    "markers": [[t[1], t[2]] for t in tap if t[0] == "marker"],
                    "gpu_clock": backend.describe(),
                    "device": torch.cuda.get_device_name(),
                    "torch": torch.__version__,
                }
            )
        ),
    )
    return f"{len(buffers)} buffers, {sum(len(t[1]) for t in buffers)} bytes, {len(batches)} batches"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp")), help="folder (default $OUT)")
    ap.add_argument("--batches", type=int, default=24, help="batches per loop (default 24)")
    args = ap.parse_args()
    dev = torch.device("cuda")
    os.environ["PINPROF_BACKEND"] = "cupti"  # asked for by name: it fails below rather than fall back
    current.cache_clear()
    rec = backend.recorder(dev)
    assert rec is not None and rec.active, backend.describe()
    rec.tap = []
    stores: dict[int, str] = {}
    n = args.batches
    w = torch.randn(1024, 1024, device=dev) / 32
    frames = []

    g = torch.Generator().manual_seed(0)
    pinned = [
        {"image": torch.randn(256, 1024, generator=g).pin_memory(), "k": torch.tensor([k]).pin_memory()} for k in ks(n)
    ]
    prof = TransferProfiler("pinned_nb", dev, scenario="pinned_nb")
    stores[id(prof._store)] = "pinned_nb"
    for batch in prof.batches(pinned):
        b = prof.to_device(batch)
        with prof.compute():
            step(b["image"], int(batch["k"]), w)
    frames.append(prof.timeline().assign(k=ks(n)))

    pageable = [torch.randn(256, 256, generator=g) for _ in range(n)]
    prof = TransferProfiler("pageable", dev, scenario="pageable")
    stores[id(prof._store)] = "pageable"
    for i, batch in enumerate(prof.batches(pageable)):
        x = prof.to_device(batch)
        with prof.compute():
            step(x @ torch.ones(256, 1024, device=dev), ks(n)[i], w)
    frames.append(prof.timeline().assign(k=ks(n)))

    loader = DataLoader(Tokens(64 * n), batch_size=64, num_workers=2, pin_memory=True)
    session = AutoSession(dev, run="record")
    auto_hooks.start(session)
    try:
        for batch in loader:
            b = {key: v.to(dev) for key, v in batch.items()}  # Accelerate's blocking copies
            step(b["input_ids"][:, :256].float() @ torch.ones(256, 1024, device=dev) / 1e4, int(b["k"][0]), w)
            torch.cuda.synchronize()
    finally:
        auto_hooks.stop()
    for p in session.profs.values():
        stores[id(p._store)] = "auto"
    frames.append(session.close().assign(k=ks(n)))

    saved = save_tap(rec, stores, args.out)
    cols = [
        "scenario",
        "batch",
        "k",
        "bytes",
        "copies",
        "src_memory",
        "gpu_clock",
        "h2d_ms",
        "h2d_gpu_ms",
        "compute_ms",
        "compute_start_ms",
        "compute_end_ms",
        "batch_start_ms",
        "batch_end_ms",
    ]
    out = pd.concat(frames, ignore_index=True)[cols]
    out.to_csv(args.out / "expected.csv", index=False)
    print(out.groupby(["scenario", "k"])[["h2d_gpu_ms", "compute_ms"]].median())
    print(f"{saved}; {backend.describe()}")


if __name__ == "__main__":
    main()
