"""What each batch's host-to-device copies cost a script, as torch.profiler (CUPTI) sees it, pinprof off:
the independent reference for ``layout_ms``, ``hidden_stage_ms`` and ``dma_ms``
(``tests/test_gpu_hidden_copies.py`` checks pinprof's rows of the same script against it).

    python scripts/copy_anatomy.py [--csv FILE] -- SCRIPT [ARGS...]

Runs SCRIPT unmodified, in this process, under torch.profiler with host operators and CUDA records, so
the loop keeps its own shape (its DataLoader workers, its compute beside the copies). A batch is what
the script does between two of the DataLoader's ``__next__`` ranges. A copy is the outermost host
operator (``aten::to``, ``aten::copy_``) around a ``cudaMemcpyAsync`` whose memcpy record goes host to
device. Per batch it sums over the copies (ms):

- ``op_ms``: the copy operators' host spans;
- ``layout_ms``: torch's layout copies inside them (``aten::clone``);
- ``dma_ms``: their memcpy records' own time;
- ``tail_ms``: each copy's last record's end past its operator's return;
- ``accounted_ms``: ``op_ms + tail_ms``, what pinprof's ``layout_ms + hidden_stage_ms + dma_ms`` counts;
- ``kinds``: the records' source memory (``pageable``, ``pinned``), ``copies``, ``bytes``.

Prints the medians over the batches after ``--skip``; ``--csv``: the per-batch rows.
"""

from __future__ import annotations

import argparse
import runpy
import sys
from bisect import bisect_right
from pathlib import Path
from typing import Any

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from profiler.bench.cupti import src_memory_of, trace_events

NEXT = "DataLoaderIter.__next__"  # torch's record_function name ends so for every DataLoader iterator
COPY_OPS = ("aten::to", "aten::copy_", "aten::_to_copy", "aten::contiguous")


def _ends(ev: dict[str, Any]) -> float:
    return float(ev["ts"]) + float(ev.get("dur", 0.0))


def batches(events: list[dict[str, Any]]) -> pd.DataFrame:
    """Per batch, the copies' sums (the columns the module's docstring lists) from a Chrome trace's
    complete events."""
    # the host's ranges (torch.profiler copies them onto the GPU's timeline as "gpu_user_annotation")
    loads = [ev for ev in events if str(ev.get("name", "")).endswith(NEXT) and ev.get("cat") != "gpu_user_annotation"]
    nexts = sorted(_ends(ev) for ev in loads)
    starts = sorted(float(ev["ts"]) for ev in loads)
    records = {
        ev["args"]["correlation"]: ev
        for ev in events
        if ev.get("cat") == "gpu_memcpy" and "HtoD" in str(ev.get("name", "")) and "correlation" in ev.get("args", {})
    }
    calls = [
        ev
        for ev in events
        if ev.get("cat") == "cuda_runtime"
        and "Memcpy" in str(ev.get("name", ""))
        and ev.get("args", {}).get("correlation") in records
    ]
    ops = [ev for ev in events if ev.get("cat") == "cpu_op"]
    by_tid: dict[Any, list[dict[str, Any]]] = {}
    for ev in ops:
        by_tid.setdefault(ev.get("tid"), []).append(ev)
    copies: dict[int, dict[str, Any]] = {}  # id of the outermost copy operator -> its sums
    for call in calls:
        t = float(call["ts"])
        around = [
            ev
            for ev in by_tid.get(call.get("tid"), [])
            if ev["name"] in COPY_OPS and float(ev["ts"]) <= t and _ends(ev) >= _ends(call)
        ]
        if not around:
            continue
        op = min(around, key=lambda ev: float(ev["ts"]))  # the outermost: the earliest start
        rec = records[call["args"]["correlation"]]
        got = copies.setdefault(id(op), {"op": op, "records": []})
        got["records"].append(rec)
    rows = []
    for got in copies.values():
        op, recs = got["op"], got["records"]
        s, e = float(op["ts"]), _ends(op)
        clones = [
            ev
            for ev in by_tid.get(op.get("tid"), [])
            if ev["name"] == "aten::clone" and s <= float(ev["ts"]) and _ends(ev) <= e
        ]
        end = max(_ends(r) for r in recs)
        i = bisect_right(nexts, s) - 1  # the batch: the last __next__ that returned before the copy
        if i < 0 or (i + 1 < len(starts) and s > starts[i + 1]):
            continue  # a copy before the first batch, or inside a __next__ (a loader's own prefetch)
        rows.append(
            {
                "batch": i,
                "op_ms": (e - s) / 1e3,
                "layout_ms": sum(float(ev["dur"]) for ev in clones) / 1e3,
                "dma_ms": sum(float(r["dur"]) for r in recs) / 1e3,
                "tail_ms": max(end - e, 0.0) / 1e3,
                "bytes": sum(int(r.get("args", {}).get("bytes", 0)) for r in recs),
                "kind": ",".join(sorted({src_memory_of(r["name"]) for r in recs})),
            }
        )
    if not rows:
        return pd.DataFrame(
            columns=["batch", "copies", "op_ms", "layout_ms", "dma_ms", "tail_ms", "accounted_ms", "bytes", "kinds"]
        )
    df = pd.DataFrame(rows)
    out = df.groupby("batch").agg(
        copies=("op_ms", "size"),
        op_ms=("op_ms", "sum"),
        layout_ms=("layout_ms", "sum"),
        dma_ms=("dma_ms", "sum"),
        tail_ms=("tail_ms", "sum"),
        bytes=("bytes", "sum"),
        kinds=("kind", lambda k: ",".join(sorted(set(",".join(k).split(","))))),
    )
    out.insert(4, "accounted_ms", out.op_ms + out.tail_ms)
    return out.reset_index()


def run_script(argv: list[str]) -> pd.DataFrame:
    """``argv`` (a Python script and its arguments) run in this process under torch.profiler: its
    per-batch copies (``batches``)."""
    if not argv or not argv[0].endswith(".py"):
        raise SystemExit(f"copy_anatomy: give a Python script after '--' (got {argv!r})")
    saved = sys.argv
    sys.argv = list(argv)
    try:
        events, _ = trace_events(lambda: runpy.run_path(argv[0], run_name="__main__"), cpu=True, cuda=True)
    finally:
        sys.argv = saved
    return batches(events)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--csv", type=Path, help="write the per-batch rows here")
    p.add_argument("--skip", type=int, default=5, help="first batches left out of the medians (default 5)")
    p.add_argument("script", nargs=argparse.REMAINDER, help="-- SCRIPT [ARGS...]")
    args = p.parse_args()
    argv = args.script[1:] if args.script[:1] == ["--"] else args.script
    df = run_script(argv)
    if args.csv:
        args.csv.parent.mkdir(parents=True, exist_ok=True)
        df.to_csv(args.csv, index=False)
    steady = df[df.batch >= args.skip]
    cols = ["copies", "op_ms", "layout_ms", "dma_ms", "tail_ms", "accounted_ms"]
    med = " ".join(f"{c} {steady[c].median():.4f}" for c in cols)
    kinds = sorted(set(steady.kinds))
    print(f"copy_anatomy {' '.join(argv)}: {len(steady)} batches, medians (ms) {med}; kinds {kinds}", flush=True)


if __name__ == "__main__":
    main()
