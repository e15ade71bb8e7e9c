"""``profiler.bench.cupti``, the torch.profiler cross-check, on the CPU: the trace it reads back is the
run's own (host operators here; the GPU tests read CUPTI's copies and kernels through it)."""

from __future__ import annotations

import torch

from profiler.bench.cupti import capture, trace_events


def test_the_events_of_the_run_come_back_with_their_durations() -> None:
    a = torch.randn(256, 256)
    events, took_back = trace_events(lambda: [a @ a for _ in range(3)], cpu=True, cuda=False)
    mm = [ev for ev in events if ev["name"] == "aten::mm"]
    assert len(mm) == 3 and all(float(ev["dur"]) > 0 for ev in mm)
    assert all(ev["ph"] == "X" for ev in events)
    assert not took_back  # no pinprof recorder was handed over: nothing to take back


def test_a_run_with_no_copy_gives_no_copy_row() -> None:
    a = torch.randn(64, 64)
    frame = capture(lambda: a @ a, host_ops=True)
    assert list(frame.columns) == ["kind", "name", "src_memory", "bytes", "start_us", "dur_us", "correlation"]
    assert frame.empty
