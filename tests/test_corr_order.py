"""Correlation ids against launch times (``profiler.bench.corr_order``, ``scripts/corr_windows.py``):
made-up kernels where the two orders disagree, and the recorded H200 buffers, where they agree."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from profiler.bench import corr_order, cupti_replay

DATA = Path(__file__).parent / "data"


def test_a_kernel_launched_before_a_lower_numbered_one_is_out_of_order_by_the_gap() -> None:
    queued = np.array([10, 20, 15, 30, 29, 40])
    corr = np.arange(6)
    assert corr_order.out_of_order(queued, corr).tolist() == [0, 0, 5, 0, 1, 0]
    assert corr_order.out_of_order(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)).tolist() == []


def test_a_marker_bounds_what_was_launched_before_it_and_counts_disagree_only_across_an_inversion() -> None:
    # launches at 10, 20, 30 (ids 1, 2, 3) on one thread; id 4 launched at 25 on another
    queued, corr = np.array([10, 20, 30, 25]), np.array([1, 2, 3, 4])
    assert corr_order.markers(queued, corr, np.array([5.0, 20.0, 26.0, 31.0])).tolist() == [-0.5, 2.5, 4.5, 4.5]
    # a window of 0-22: by launch time ids 1 and 2; by markers the same
    assert corr_order.counts(queued, corr, [(0, 22)]) == (2, 2)
    # a window of 22-27 holds id 4's launch (25); its markers bound ids 3 and 4 (3 came at 30, after it,
    # but is numbered before 4): launch time says 1, correlation says 2
    assert corr_order.counts(queued, corr, [(22, 27)]) == (1, 2)


def test_on_the_h200_recordings_correlation_order_is_launch_order() -> None:
    """The recorded H200 short step (``h200_thread_queues``: backward launched from autograd's thread)
    and the CUPTI recording of ``h200_cupti``: no kernel launched before a lower-numbered one, so every
    row's kernels are the same by correlation id as by launch time."""
    for name in ("h200_thread_queues", "h200_cupti"):
        buffers, meta = cupti_replay.load(DATA / name / "recording.npz")
        queued, corr = cupti_replay.kernel_launches(buffers, meta)
        assert len(queued) > 700
        assert not corr_order.out_of_order(queued, corr).any()
        # rows whose steps ended before the recording's last launch (h200_thread_queues keeps the
        # first four buffers only)
        rows = [b for b in meta["batches"] if b["windows"] and b["windows"][-1][1] < queued.max()]
        assert len(rows) > 50
        for b in rows:
            by_launch, by_corr = corr_order.counts(queued, corr, [tuple(w) for w in b["windows"]])
            assert by_launch == by_corr and by_launch > 0, (name, b["row"], by_launch, by_corr)
