"""The per-batch store (``profiler.capture.store``): the loop's thread queues a record; its fields are
written into the arrays by whoever reads them next, in row order, the same rows as if written at once."""

from __future__ import annotations

import threading

import numpy as np

from profiler.capture import store as store_module
from profiler.capture.store import TEMPLATE, Store
from profiler.timeline.schema import RAW_GPU


def _rec(batch: int, kind: str = "pinned") -> dict[str, object]:
    rec = dict(TEMPLATE)
    rec.update(batch=batch, bytes=100 + batch, copies=1, src_memory=kind, fetch_s=float(batch), fetch_e=batch + 0.5)
    return rec


def test_rows_are_queued_then_written_in_order_when_read() -> None:
    s = Store()
    rows = [s.append(_rec(b, "pinned" if b % 2 else "pageable")) for b in range(5)]
    assert rows == [0, 1, 2, 3, 4]
    assert len(s._kinds) == 0 and len(s._queued) == 5  # nothing written on the loop's thread yet
    cols = s.columns()
    assert cols["batch"].tolist() == [0, 1, 2, 3, 4] and cols["bytes"].tolist() == [100, 101, 102, 103, 104]
    assert cols["src_memory"] == ["pageable", "pinned", "pageable", "pinned", "pageable"]
    assert len(s) == 5 and not s._queued


def test_the_queue_is_bounded() -> None:
    s = Store()
    for b in range(store_module.FOLD_AT - 1):
        s.append(_rec(b))
    assert len(s._queued) == store_module.FOLD_AT - 1
    s.append(_rec(store_module.FOLD_AT - 1))  # the FOLD_AT-th: append writes them all itself
    assert not s._queued and len(s._kinds) == store_module.FOLD_AT


def test_gpu_fields_of_a_queued_row_land_on_that_row() -> None:
    s = Store()
    for b in range(3):
        s.append(_rec(b))
    s.set_gpu(1, RAW_GPU.index("h2d_gsum"), 2.5)
    s.set_cupti(2, h2d=(1.0, 2.0, 0.75), src="pageable", comp=(3.0, 4.0, 0.5, 2))
    cols = s.columns()
    assert np.isnan(cols["h2d_gsum"][0]) and cols["h2d_gsum"][1:].tolist() == [2.5, 0.75]
    assert cols["comp_gsum"][2] == 0.5 and cols["src_memory"] == ["pinned", "pinned", "pageable"]
    assert np.isnan(cols["comp_kernels"][:2]).all() and cols["comp_kernels"][2] == 2
    s.add_cupti(2, h2d=None, src=None, comp=(3.5, 5.0, 0.25, 3))  # late kernels: counted in
    cols = s.columns()
    assert cols["comp_kernels"][2] == 5 and cols["comp_gsum"][2] == 0.75 and cols["comp_ge"][2] == 5.0


def test_a_count_skipped_by_a_signal_leaves_later_rows_aligned() -> None:
    """A signal between the queueing and the count (the script caught it and went on) left the last
    record numbered as the next would be: the next record gets the number after it, written or not."""
    s = Store()
    s.append(_rec(0))
    s._queued.append((1, _rec(1)))  # queued, the count not moved on: as a signal at that point leaves it
    assert s.append(_rec(2)) == 2
    s.columns()  # written
    s._queued.append((3, _rec(3)))
    s._fold()
    assert s.append(_rec(4)) == 4
    assert s.columns()["batch"].tolist() == [0, 1, 2, 3, 4]


def test_a_fold_cut_short_writes_no_row_twice() -> None:
    """A signal between a row's write and its leaving the queue: the next fold passes it over."""
    s = Store()
    for b in range(3):
        s.append(_rec(b))
    s._fold()
    s._queued.appendleft((2, _rec(2)))  # row 2 written, and still queued
    s.append(_rec(3))
    assert s.columns()["batch"].tolist() == [0, 1, 2, 3]


def test_rows_read_on_another_thread_while_the_loop_appends_stay_whole_and_in_order() -> None:
    s = Store()
    n, stop, seen = 20_000, threading.Event(), []

    def reader() -> None:
        while not stop.is_set():
            seen.append(len(s.columns()["batch"]))

    t = threading.Thread(target=reader)
    t.start()
    try:
        rows = [s.append(_rec(b)) for b in range(n)]
    finally:
        stop.set()
        t.join()
    cols = s.columns()
    assert rows == list(range(n)) and cols["batch"].tolist() == list(range(n))
    assert cols["bytes"].tolist() == [100 + b for b in range(n)]
    assert len(seen) > 1 and seen == sorted(seen)  # the reader saw the rows grow, never shrink
