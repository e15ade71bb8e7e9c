"""Kernels placed by markers instead of launch times (``profiler.capture.clocks.cupti.marker``), on a CPU: the
H200 recordings made with launch times, rewritten as markers would have made them
(``cupti_replay.with_markers``: launch times cleared, a marker kernel or copy numbered after every
kernel launched by each edge), replayed through ``Records``; and the matching rules on made-up records."""

from __future__ import annotations

import functools
from collections import deque
from pathlib import Path

import numpy as np
import pytest

from profiler.bench import cupti_replay
from profiler.capture.clocks.cupti import layout
from profiler.capture.clocks.cupti.batches import Call, Pending, Stats
from profiler.capture.clocks.cupti.records import Records
from profiler.capture.store import TEMPLATE, Store

DATA = Path(__file__).parent / "data"
FIELDS = ("h2d_gs", "h2d_ge", "h2d_gsum", "comp_gs", "comp_ge", "comp_gsum", "comp_kernels")


def _edges(meta: dict, starts: bool = True) -> list[int]:
    """Every window's end and every batch's end, and every window's start (without ``starts``, only
    the first: pinprof marks the first ``next()``, before any window)."""
    out = [min(s for b in meta["batches"] for s, _ in b["windows"])]
    for b in meta["batches"]:
        out.append(b["end_ns"])
        for s, e in b["windows"]:
            out.append(e)
            if starts:
                out.append(s)
    return out


def _rows(name: str, starts: bool = True, kind: str = "kernel") -> tuple[dict, dict, Stats, Stats, list[int]]:
    """The recording ``name`` replayed as recorded and as markers (of ``kind``) at its edges would have
    made it: both stores' columns, both replays' counts, the rows every buffer covers."""
    buffers, meta = cupti_replay.load(DATA / name / "recording.npz")
    store, stats, batches, last = cupti_replay.replay_live(buffers, meta)
    marked_buffers, marked_meta = cupti_replay.with_markers(buffers, meta, _edges(meta, starts), kind)
    mstore, mstats, _, _ = cupti_replay.replay_live(marked_buffers, marked_meta)
    covered = [b["row"] for b in batches if b["windows"] and b["windows"][-1][1] < min(last)]
    return store.columns(), mstore.columns(), stats, mstats, covered


def _same(a: np.ndarray, b: np.ndarray, field: str) -> None:
    """Equal; busy times to rounding (late kernels are added in another order)."""
    if field == "comp_kernels":
        np.testing.assert_array_equal(a, b, err_msg=field)
    else:
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=0, err_msg=field)


@pytest.mark.parametrize("kind", ["kernel", "copy"])
@pytest.mark.parametrize("name", ["h200_thread_queues", "h200_cupti"])
def test_markers_at_every_edge_give_the_rows_launch_times_gave(name: str, kind: str) -> None:
    """Markers (empty kernels, or tiny copies) at every window edge: each row's kernels, compute and
    copies as with launch times, on the short step (backward from autograd's own thread, in buffers of
    its own that come late) and on the three recorded loops. A marker kernel is no step's kernel."""
    exact, marked, stats, mstats, covered = _rows(name, kind=kind)
    assert len(covered) > 20
    assert mstats.markers > 100 and mstats.markers_lost == 0
    # (the short step's recording keeps its first four buffers: the rows after them miss their copies)
    assert mstats.unmatched_calls == stats.unmatched_calls
    for f in FIELDS:
        _same(marked[f][covered], exact[f][covered], f)
    assert (marked["comp_kernels"][covered] > 0).all() and (marked["h2d_gsum"][covered] > 0).all()


@pytest.mark.parametrize("name", ["h200_thread_queues", "h200_cupti"])
def test_markers_at_window_ends_only_give_the_same_rows(name: str) -> None:
    """Only the edges pinprof marks (a row's end: the ``next()``, the optimizer step, a ``compute()``
    exit), each window's start taken back to the marker or copy call before it: on the short step no
    kernel is launched between that marker and the start (the loader's ``next()``), and in the library
    loops the batch's copies come just before its ``compute()`` (``phases.Compute`` marks no entry
    there), so every row reads the same, and the copy calls were taken as edges."""
    exact, marked, _, mstats, covered = _rows(name, starts=False)
    assert mstats.markers > 50 and len(covered) > 20
    assert mstats.copy_edges >= len(covered)
    for f in FIELDS:
        _same(marked[f][covered], exact[f][covered], f)


def _without_marker(buffers: list[bytes], sizes: dict[int, int], nbytes: int) -> tuple[list[bytes], int]:
    """``buffers`` less the first marker record of ``nbytes`` bytes; how many were cut (0 or 1)."""
    out, cut = [], 0
    for raw in buffers:
        kept, pos = bytearray(), 0
        while pos < len(raw):
            kind = int.from_bytes(raw[pos : pos + 4], "little")
            rec = raw[pos : pos + sizes[kind]]
            pos += sizes[kind]
            marker = kind == layout.KIND_MEMCPY and int.from_bytes(rec[40:44], "little") == cupti_replay.MARKER_STREAM
            if not cut and marker and int.from_bytes(rec[8:16], "little") == nbytes:
                cut = 1
                continue
            kept += rec
        out.append(bytes(kept))
    return out, cut


def test_a_dropped_marker_record_loses_that_marker_only() -> None:
    """CUPTI drops a marker's record: the sizes (1, 2, 3, ... in turn) show which, the markers after
    it keep their own host times, and only the rows that edge bounded can differ."""
    buffers, meta = cupti_replay.load(DATA / "h200_thread_queues" / "recording.npz")
    marked_buffers, marked_meta = cupti_replay.with_markers(buffers, meta, _edges(meta), "copy")
    sizes = {int(k): v for k, v in marked_meta["sizes"].items()}
    _, _, batches, last = cupti_replay.replay_live(buffers, meta)  # (a marker replay has no launch times)
    full, _, _, _ = cupti_replay.replay_live(marked_buffers, marked_meta)
    fifth = marked_meta["markers"][40]
    cut_buffers, cut = _without_marker(marked_buffers, sizes, fifth[1])
    assert cut == 1
    store, stats, _, _ = cupti_replay.replay_live(cut_buffers, marked_meta)
    assert stats.markers_lost == 1 and stats.markers == len(marked_meta["markers"]) - 1 - _undelivered(
        marked_meta, last
    )
    covered = [b["row"] for b in batches if b["windows"] and b["windows"][-1][1] < min(last)]
    touched = [b["row"] for b in batches if any(fifth[0] in (s, e) for s, e in b["windows"]) or b["end_ns"] == fifth[0]]
    assert touched
    rest = [r for r in covered if r not in touched and r - 1 not in touched and r + 1 not in touched]
    a, b = full.columns(), store.columns()
    assert len(rest) > 40
    np.testing.assert_array_equal(a["comp_kernels"][rest], b["comp_kernels"][rest])


def _undelivered(meta: dict, last: list[int]) -> int:
    """Markers of the recording issued after its last buffer was handed back."""
    end = meta["clocks"][-1]["host_ns"]
    return sum(1 for h, _ in meta["markers"] if h >= end)


def _records(corr: list[int], hosts: list[int]) -> Records:
    r = Records(Stats())
    r.marked, r.marker_stream = True, 5
    r.issued = deque((h, 1 + i) for i, h in enumerate(hosts))
    r._take_markers(np.array(corr, dtype=np.int64), np.arange(1, len(corr) + 1, dtype=np.int64))
    return r


def test_a_kernel_is_placed_just_after_the_marker_numbered_before_it() -> None:
    r = _records([10, 20, 30], [1000, 2000, 3000])
    got = r._launches(np.array([5, 11, 19, 25, 31], dtype=np.int64))
    # before the first marker: unknown; after the last: unknown until a marker after it comes
    assert got.tolist() == [0, 1001, 1001, 2001, 0]
    # edges onto the marker at or before them; before the first, left as they are
    assert r.snap(np.array([500, 1000, 1999, 2000, 3500], dtype=np.int64)).tolist() == [500, 1000, 1000, 2000, 3000]


def test_a_batch_waits_for_the_marker_that_ends_it() -> None:
    r = _records([10], [1000])
    r.issued.append((2000, 2))  # issued, its record not delivered yet
    assert r._marked_by(900) and r._marked_by(1000)
    assert not r._marked_by(1500) and not r._marked_by(2000)
    assert r._marked_by(2500)  # no marker issued at or after it: nothing to wait for
    r.marked = False
    assert r._marked_by(1500)


def _waiting_batch(
    issued: list[tuple[int, int]], calls: list[Call], windows: list[tuple[int, int]], end_ns: int
) -> tuple[Records, Store, Stats]:
    """``Records`` placing kernels by copy markers on stream 3, ``issued`` (host ns, size) noted, and
    one batch of a fresh store waiting for its records: its copy calls, step windows and end."""
    stats = Stats()
    r = Records(stats)
    r.marked, r.marker_stream = True, 3
    r.issued = deque(issued)
    store = Store()
    row = dict(TEMPLATE)
    row["batch"] = 0
    store.append(row)
    store.wait_for_gpu(0)
    r.incoming.append(Pending(store, 0, calls, windows, end_ns))
    return r, store, stats


def test_kernels_delivered_before_their_markers_are_placed_when_the_batch_is_attributed() -> None:
    """Autograd's thread hands its buffer back first: its kernels (ids 21, 22) come before the main
    thread's buffer with the markers around them (ids 20, 30). The batch waits for its end marker,
    then holds both kernels; a kernel of the next step (id 31) stays for the next batch."""
    k = cupti_replay.kernel_record
    r, store, stats = _waiting_batch([(1_000_000, 1), (2_000_000, 2)], [], [(1_000_000, 2_000_000)], 2_000_000)
    sizes = dict(cupti_replay.SIZES)
    ident = functools.partial(cupti_replay.to_host, p=0, c=0, rate=1.0)
    grad = k(1_100_000, 1_200_000, 0, 21) + k(1_200_000, 1_400_000, 0, 22) + k(3_100_000, 3_200_000, 0, 31)
    grad += k(60_000_000, 60_000_100, 0, 41)  # carries the frontier past the batch's end
    r.take(layout.parse(grad, dict(sizes)), ident)
    r.process(force=False)
    assert store.first_waiting() == 0  # its end marker not matched yet: it waits
    marker = cupti_replay.memcpy_record
    main = marker(1_000_500, 1_000_600, 1, 2, 20, stream=3)
    end = marker(2_000_500, 2_000_600, 2, 2, 30, stream=3)
    r.take(layout.parse(main + end, dict(sizes)), ident)
    r.process(force=False)
    cols = store.columns()
    assert store.first_waiting() is None
    assert cols["comp_kernels"][0] == 2
    assert cols["comp_gsum"][0] == pytest.approx(0.3)
    assert stats.markers == 2 and stats.copies == 0  # markers are no batch's copies


def test_an_h100_recording_with_copy_markers_gives_every_step_its_kernels() -> None:
    """``tests/data/h100_markers``: the short step under ``pinprof profile`` on an H100, kernels placed
    by copy markers (no launch times), its first four buffers. Every marker record is matched to its
    host time, every copy call to its record, and every row after the first holds the step's 107
    kernels, forward and backward (backward's from autograd's own buffers), within 3% of one time."""
    buffers, meta = cupti_replay.load(DATA / "h100_markers" / "recording.npz")
    assert meta["marker_stream"] is not None and meta["gpu_clock"]["kernels_placed_by"] == "markers"
    store, stats, batches, last = cupti_replay.replay_live(buffers, meta)
    assert stats.markers > 250 and stats.markers_lost == 0
    cols = store.columns()
    covered = [b["row"] for b in batches if b["windows"] and b["windows"][-1][1] < min(last)]
    assert len(covered) > 60 and covered[0] == 0
    assert not np.isnan(cols["h2d_gsum"][covered]).any()
    steps = covered[1:]  # the first step also sets up what the later ones reuse
    assert set(cols["comp_kernels"][steps].tolist()) == {107}
    comp = cols["comp_gsum"][steps]
    assert comp.max() < 1.03 * np.median(comp) and comp.min() > 0.97 * np.median(comp), (comp.min(), comp.max())
    # cut off with its buffers, a later row misses autograd's: fewer kernels, never more
    later = [b["row"] for b in batches if b["row"] not in covered]
    assert later and cols["comp_kernels"][later].max() <= 107


def _library_batch(call_end_ns: int, copy_bytes: int) -> tuple[Store, Stats]:
    """A library batch whose ``compute()`` entry issued no marker (its copy came after the last exit):
    marker 10 at 1 ms; a kernel the loop launched before the copy (id 15: a metric after the last
    step, say); the copy call (1.5 ms to ``call_end_ns``) and its record of ``copy_bytes`` (id 20);
    the step's kernel (id 25) inside the window from 1.8 ms to the exit's marker (id 40, at 3 ms)."""
    k, m = cupti_replay.kernel_record, cupti_replay.memcpy_record
    calls: list[Call] = [(1_500_000, call_end_ns, ((4096,),))]
    r, store, stats = _waiting_batch([(1_000_000, 1), (3_000_000, 2)], calls, [(1_800_000, 3_000_000)], 3_000_000)
    buf = m(1_000_500, 1_000_600, 1, 2, 10, stream=3) + k(1_200_000, 1_300_000, 0, 15)
    buf += m(1_700_000, 1_750_000, copy_bytes, 2, 20) + k(2_000_000, 2_400_000, 0, 25)
    buf += m(3_000_500, 3_000_600, 2, 2, 40, stream=3) + k(60_000_000, 60_000_100, 0, 50)
    r.take(layout.parse(buf, dict(cupti_replay.SIZES)), functools.partial(cupti_replay.to_host, p=0, c=0, rate=1.0))
    r.process(force=False)
    assert store.first_waiting() is None
    return store, stats


def test_a_copy_call_bounds_a_step_whose_entry_has_no_marker() -> None:
    """The copy's record, matched to its call, is an edge of its own (``Records._copy_edges``): the
    kernel launched before the copy stays out of the step, as an entry marker would have kept it."""
    store, stats = _library_batch(1_600_000, 4096)
    cols = store.columns()
    assert cols["comp_kernels"][0] == 1 and cols["comp_gsum"][0] == pytest.approx(0.4)
    assert cols["h2d_gsum"][0] == pytest.approx(0.05)
    assert stats.copy_edges == 1 and stats.markers == 2


def test_a_copy_call_is_no_edge_where_it_is_unmatched_or_would_not_keep_the_markers_in_order() -> None:
    """Its record missing (other bytes), or its call ending after the next marker (a long call on
    another thread): no copy edge, and the window's start falls back to the marker before it, so the
    earlier kernel is counted in the step, as it was before copies were edges."""
    for end, nbytes in ((1_600_000, 999), (3_200_000, 4096)):
        store, stats = _library_batch(end, nbytes)
        assert stats.copy_edges == 0
        assert store.columns()["comp_kernels"][0] == 2, (end, nbytes)


def test_a_compute_block_marks_its_entry_only_where_no_copy_of_the_batch_came_after_the_last_exit() -> None:
    """``phases.Compute``: the exit of every block is marked; the entry only of a batch's first block,
    and only where the batch's copies did not come after the last exit's marker (they are the edge
    then): a prefetched batch, copied before the previous step ended, and a batch with no copy are."""
    from types import SimpleNamespace

    from profiler.capture import phases
    from profiler.capture.clocks.by_cupti import CuptiClock

    ticks = iter(range(10, 10_000, 10))
    marks: list[str] = []
    where = ["?"]

    def edge(device: object) -> float:
        marks.append(where[0])
        return float(next(ticks))

    clock = CuptiClock(SimpleNamespace(mark=edge))  # type: ignore[arg-type]  # the recorder's markers
    nvtx = SimpleNamespace(push=lambda name: None, pop=lambda: None)
    clocks = SimpleNamespace(of=lambda rec: clock)
    prof = SimpleNamespace(cuda=True, device="cuda", nvtx=nvtx, _exit_ms=0.0, _clocks=clocks)

    def batch(calls_end_ms: float | None, blocks: int, name: str) -> None:
        rec = dict(TEMPLATE)
        rec["own_sum"] = 0.0  # as the library's batch record starts
        if calls_end_ms is not None:
            rec["_calls"] = [(0, round(calls_end_ms * 1e6), ((4,),))]
        for b in range(blocks):
            where[0] = f"{name} block {b}"
            with phases.Compute(prof, rec):  # type: ignore[arg-type]
                pass

    batch(5.0, 2, "copied")  # copies after the last exit (none yet): no entry marker
    batch(1.0, 1, "prefetched")  # copied before the previous exit's marker: marked
    batch(None, 1, "no copy")  # nothing to take as an edge: marked
    batch(10_000.0, 1, "copied again")
    assert marks == [
        "copied block 0",  # (the exits)
        "copied block 1",
        "prefetched block 0",
        "prefetched block 0",
        "no copy block 0",
        "no copy block 0",
        "copied again block 0",
    ]
