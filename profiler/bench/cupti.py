"""Independent figures from CUPTI, through torch.profiler (Kineto): the cross-check for our events.

``capture`` runs a callable under torch.profiler and returns the memcpy records and the runtime API
calls that issued them, from the exported Chrome trace (which keeps nanosecond precision; the
FunctionEvent API rounds to microseconds).

Columns of the returned frame:
    kind (str: ``memcpy`` for GPU copy records, ``runtime`` for CUDA runtime calls)
    name (str: e.g. ``Memcpy HtoD (Pinned -> Device)`` or ``cudaMemcpyAsync``)
    src_memory (str: ``pageable`` / ``pinned`` / ``device`` for H2D memcpys, empty otherwise)
    bytes (float: memcpy records only), start_us, dur_us (float, microseconds), correlation (int)
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from typing import Any

import pandas as pd

from profiler.capture.clocks import choice as clocks

KINDS = {"Pageable -> Device": "pageable", "Pinned -> Device": "pinned", "Device -> Device": "device"}


def src_memory_of(name: str) -> str:
    for key, kind in KINDS.items():
        if key in name:
            return kind
    return ""


def trace_events(fn: Callable[[], Any], *, cpu: bool, cuda: bool) -> tuple[list[dict[str, Any]], bool]:
    """Run ``fn`` under torch.profiler (host operators if ``cpu``, CUPTI's GPU records if ``cuda``) and
    return (the complete events of its Chrome trace, ``ph`` "X", which keeps nanosecond precision;
    whether a pinprof recorder that torch.profiler took CUPTI from records again: a bench's next
    block, a test's next round)."""
    from torch.profiler import ProfilerActivity, profile

    activities = [a for a, on in ((ProfilerActivity.CPU, cpu), (ProfilerActivity.CUDA, cuda)) if on]
    with profile(activities=activities) as prof:
        fn()
    took_back = clocks.take_back()
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path, encoding="utf-8") as fh:
            trace = json.load(fh)
    finally:
        os.unlink(path)
    return [ev for ev in trace.get("traceEvents", []) if ev.get("ph") == "X"], took_back


def capture(fn: Callable[[], Any], host_ops: bool = True) -> pd.DataFrame:
    """Run ``fn`` under torch.profiler and return its memcpys and runtime calls.

    host_ops: also record torch's host-side operators (``ProfilerActivity.CPU``). Turn it off when
        host timing matters: recording every torch operator slows the host path between pinprof's
        events and the runtime call being checked.
    """
    events, _ = trace_events(fn, cpu=host_ops, cuda=True)
    rows = []
    for ev in events:
        cat, name = ev.get("cat", ""), ev.get("name", "")
        args = ev.get("args", {})
        if cat == "gpu_memcpy":
            kind = "memcpy"
        elif cat == "cuda_runtime" and "Memcpy" in name:
            kind = "runtime"
        else:
            continue
        rows.append(
            {
                "kind": kind,
                "name": name,
                "src_memory": src_memory_of(name) if kind == "memcpy" else "",
                "bytes": float(args.get("bytes", float("nan"))),
                "start_us": float(ev["ts"]),
                "dur_us": float(ev.get("dur", 0.0)),
                "correlation": int(args.get("correlation", -1)),
            }
        )
    frame = pd.DataFrame(rows, columns=["kind", "name", "src_memory", "bytes", "start_us", "dur_us", "correlation"])
    return frame.sort_values("start_us", ignore_index=True)
