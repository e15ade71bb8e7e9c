"""``scripts/copy_anatomy.py``'s per-batch sums, the GPU tests' reference for the copy split, on a
hand-made trace of two batches: which copies are a batch's, what its layout copy and records add up to."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

from copy_anatomy import batches

MAIN, PIN = 1, 2
NEXT = "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"


def ev(name: str, cat: str, ts: float, dur: float, tid: int = MAIN, **args: object) -> dict:
    return {"ph": "X", "name": name, "cat": cat, "ts": ts, "dur": dur, "tid": tid, "args": args}


def trace() -> list[dict]:
    """Batch 0: a pageable image copy with a layout copy (clone) inside its ``aten::to`` and a record
    ending 30 us past it, and a pinned label copy. Batch 1: one pinned copy. Around them: the pin
    thread's own ``aten::copy_`` overlapping batch 0's copy, a device-to-host copy, a ``.float()`` on the
    GPU (an ``aten::to`` with no memcpy), and the GPU's copies of the ``__next__`` ranges."""
    return [
        ev(NEXT, "user_annotation", 0, 100),
        ev(NEXT, "gpu_user_annotation", 150, 100),  # on the GPU's timeline: not an edge
        ev("aten::to", "cpu_op", 200, 1000),
        ev("aten::clone", "cpu_op", 210, 700),
        ev("cudaMemcpyAsync", "cuda_runtime", 950, 200, correlation=7),
        ev("Memcpy HtoD (Pageable -> Device)", "gpu_memcpy", 1000, 230, bytes=9000, correlation=7),
        ev("aten::copy_", "cpu_op", 100, 5000, tid=PIN),  # the pin thread's copy into pinned memory
        ev("aten::to", "cpu_op", 1300, 50),
        ev("cudaMemcpyAsync", "cuda_runtime", 1310, 20, correlation=8),
        ev("Memcpy HtoD (Pinned -> Device)", "gpu_memcpy", 1320, 5, bytes=64, correlation=8),
        ev("aten::to", "cpu_op", 1400, 30),  # x.float() on the GPU: no memcpy
        ev("aten::item", "cpu_op", 1500, 40),
        ev("cudaMemcpyAsync", "cuda_runtime", 1510, 20, correlation=9),
        ev("Memcpy DtoH (Device -> Pageable)", "gpu_memcpy", 1520, 2, bytes=4, correlation=9),
        ev(NEXT, "user_annotation", 2000, 100),
        ev("aten::to", "cpu_op", 2200, 100),
        ev("cudaMemcpyAsync", "cuda_runtime", 2210, 50, correlation=10),
        ev("Memcpy HtoD (Pinned -> Device)", "gpu_memcpy", 2220, 60, bytes=9000, correlation=10),
    ]


def test_each_batch_sums_its_own_host_to_device_copies() -> None:
    got = batches(trace()).set_index("batch")
    assert list(got.index) == [0, 1]
    first, second = got.loc[0], got.loc[1]
    assert first.copies == 2 and first.bytes == 9064 and first.kinds == "pageable,pinned"
    assert first.op_ms == pytest.approx((1000 + 50) / 1e3)
    assert first.layout_ms == pytest.approx(0.7)
    assert first.dma_ms == pytest.approx((230 + 5) / 1e3)
    assert first.tail_ms == pytest.approx(30 / 1e3)  # the image's record ends at 1230, its op at 1200
    assert first.accounted_ms == pytest.approx(first.op_ms + first.tail_ms)
    assert (second.copies, second.kinds, second.layout_ms, second.tail_ms) == (1, "pinned", 0.0, 0.0)
    assert second.dma_ms == pytest.approx(0.06)


def test_a_trace_with_no_copies_gives_no_rows() -> None:
    assert batches([ev(NEXT, "user_annotation", 0, 10)]).empty
