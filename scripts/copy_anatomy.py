"""What one host-to-device copy of each leaf costs, as torch.profiler (CUPTI) sees it, pinprof off:
the host operator's span, the layout copy inside it (``aten::contiguous``/``aten::clone``), the
``cudaMemcpyAsync`` call, and the memcpy record (its memory kind and time), per leaf of
``tests/scripts/dict_batches.py``'s batches, in its three set-ups. The independent reference for
``layout_ms``, ``hidden_stage_ms`` and ``dma_ms`` (``tests/test_gpu_hidden_copies.py`` checks the
same on pinprof's side).

    python scripts/copy_anatomy.py [--batches 30] [--out DIR]

Prints, per set-up and leaf, medians over the batches (ms): op (the ``.to()`` call on the host),
layout, api (``cudaMemcpyAsync``), dma (the memcpy record), tail (the record's end after the op
returned), and the record's memory kind. ``--out``: also the per-copy rows as CSV.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "scripts"))

from dict_batches import Rgba, collate

from profiler.bench.cupti import src_memory_of, trace_events

SETUPS = {"view-pinned": ("view", True), "dense-pageable": ("dense", False), "dense-pinned": ("dense", True)}
LEAVES = ("image", "label", "boxes")


def copies(layout: str, pin: bool, batches: int, dev: torch.device) -> pd.DataFrame:
    loader = torch.utils.data.DataLoader(
        Rgba(batches * 64, 224), batch_size=64, num_workers=2, collate_fn=collate(layout == "dense"), pin_memory=pin
    )
    got = list(loader)
    for b in got[:3]:  # warm: the allocator's blocks and the link
        for t in (b["image"], b["label"], b["meta"]["boxes"]):
            t.to(dev, non_blocking=True)
    torch.cuda.synchronize()

    def run() -> None:
        for b in got:
            for name, t in zip(LEAVES, (b["image"], b["label"], b["meta"]["boxes"])):
                with torch.profiler.record_function(f"leaf:{name}"):
                    t.to(dev, non_blocking=True)
            torch.cuda.synchronize()

    events, _ = trace_events(run, cpu=True, cuda=True)
    # the host's ranges (the GPU's copies of them, "gpu_user_annotation", left out)
    marks = sorted(
        (ev for ev in events if str(ev.get("name", "")).startswith("leaf:") and ev.get("cat") == "user_annotation"),
        key=lambda e: e["ts"],
    )
    rows = []
    for i, m in enumerate(marks):
        s, e = float(m["ts"]), float(m["ts"]) + float(m["dur"])

        def inside(pred: str, s: float = s, e: float = e) -> list[dict]:
            return [ev for ev in events if pred in str(ev.get("name", "")) and s <= float(ev["ts"]) <= e]

        lay = sum(float(ev["dur"]) for ev in inside("aten::clone") if ev.get("cat") == "cpu_op")
        api = inside("cudaMemcpyAsync")
        corr = {ev.get("args", {}).get("correlation") for ev in api}
        mem = [
            ev
            for ev in events
            if ev.get("cat") == "gpu_memcpy" and ev.get("args", {}).get("correlation") in corr and "HtoD" in ev["name"]
        ]
        end = max((float(ev["ts"]) + float(ev["dur"]) for ev in mem), default=float("nan"))
        rows.append(
            {
                "batch": i // len(LEAVES),
                "leaf": m["name"][5:],
                "op_ms": (e - s) / 1e3,
                "layout_ms": lay / 1e3,
                "api_ms": sum(float(ev["dur"]) for ev in api) / 1e3,
                "dma_ms": sum(float(ev["dur"]) for ev in mem) / 1e3,
                "tail_ms": max(end - e, 0.0) / 1e3,
                "kind": ",".join(sorted({src_memory_of(ev["name"]) for ev in mem})),
            }
        )
    return pd.DataFrame(rows)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--batches", type=int, default=30)
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    dev = torch.device("cuda")
    frames = []
    for name, (layout, pin) in SETUPS.items():
        df = copies(layout, pin, args.batches, dev)
        df.insert(0, "setup", name)
        frames.append(df)
        med = (
            df[df.batch >= 2]
            .groupby("leaf", sort=False)
            .agg(
                op_ms=("op_ms", "median"),
                layout_ms=("layout_ms", "median"),
                api_ms=("api_ms", "median"),
                dma_ms=("dma_ms", "median"),
                tail_ms=("tail_ms", "median"),
                kind=("kind", "first"),
            )
        )
        print(f"== {name}\n{med.round(4).to_string()}", flush=True)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        pd.concat(frames).to_csv(args.out / "copy_anatomy.csv", index=False)


if __name__ == "__main__":
    main()
