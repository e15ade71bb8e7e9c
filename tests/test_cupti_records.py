"""CUPTI's activity records, parsed and attributed to batches on a CPU: a recording made on the H200
(``tests/data/h200_cupti``, ``scripts/record_cupti.py``) replayed through the same code, and the
matching rules on made-up records where a rule is easier to see."""

from __future__ import annotations

import functools
import struct
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from profiler.bench import cupti_replay
from profiler.bench.cupti_replay import kernel_record as _kernel
from profiler.bench.cupti_replay import memcpy_record as _memcpy
from profiler.capture.clocks.cupti import attribute, layout
from profiler.capture.clocks.cupti.batches import Call, Pending, Stats
from profiler.capture.clocks.cupti.clock import CuptiClock
from profiler.capture.clocks.cupti.records import Records
from profiler.capture.store import TEMPLATE, Store
from profiler.timeline.schema import ALL_ON_HOST, COPIES_ON_HOST

DATA = Path(__file__).parent / "data" / "h200_cupti"
KERNEL, MEMCPY = layout.KIND_CONCURRENT_KERNEL, layout.KIND_MEMCPY


def replay(kernels: bool = True) -> tuple[dict[str, pd.DataFrame], Stats]:
    """The recording through ``Records``, as the recorder ran it: every batch handed over, every
    buffer moved onto the host clock by the pair CUPTI's clock had then, then the end (forced).
    ``kernels`` False: as with the kernel records off (``PINPROF_KERNELS=0``): the buffers' kernel
    records dropped, the batches handed over with no step window (CUDA events time the step)."""
    buffers, meta = cupti_replay.load(DATA / "recording.npz")
    sizes = {int(k): v for k, v in meta["sizes"].items()}
    stats = Stats()
    records = Records(stats)
    stores: dict[str, Store] = {}
    for b in meta["batches"]:
        cupti_replay.hand_over(records, stores.setdefault(b["loop"], Store()), b, steps=kernels)
    for raw, clock in zip(buffers, meta["clocks"]):
        p, c, rate = clock["host_ns"], clock["cupti"], clock["rate"]
        parsed = layout.parse(raw, dict(sizes))
        if not kernels:
            parsed[KERNEL] = layout.empty(KERNEL)
        records.take(parsed, functools.partial(cupti_replay.to_host, p=p, c=c, rate=rate))
        records.process(force=False)
    records.process(force=True)
    out = {}
    for loop, store in stores.items():
        cols = store.columns()
        out[loop] = pd.DataFrame(
            {
                "h2d_gpu_ms": cols["h2d_gsum"],
                "h2d_ms": cols["h2d_ge"] - cols["h2d_gs"],
                "compute_ms": cols["comp_gsum"],
                "src_memory": cols["src_memory"],
                "on_host": cols["on_host"],
                "hidden_stage_ms": cols["stage_gsum"],
            }
        )
        assert store.first_waiting() is None
    return out, stats


def test_the_recorded_buffers_parse_into_plausible_records() -> None:
    buffers, meta = cupti_replay.load(DATA / "recording.npz")
    sizes = {int(k): v for k, v in meta["sizes"].items()}
    assert sizes == {KERNEL: 216, MEMCPY: 96}  # CUDA 13's Kernel10 and Memcpy6
    parsed = [layout.parse(raw, dict(sizes)) for raw in buffers]
    ker = layout.concat([p[KERNEL] for p in parsed], KERNEL)
    mem = layout.concat([p[MEMCPY] for p in parsed], MEMCPY)
    assert len(ker["start"]) > 500 and len(mem["start"]) >= 24 * 4
    assert (ker["start"] <= ker["end"]).all() and (ker["queued"] > 0).all()
    assert (ker["queued"] <= ker["start"]).all()  # launched before it ran
    assert (mem["start"] <= mem["end"]).all() and set(mem["src_kind"]) <= {1, 2}
    # the recorded loops' copies: 1 MiB images and 8-byte labels, 256 KiB pageable batches, 256 KiB token ids
    assert {1 << 20, 8, 256 << 10, 512} <= set(mem["bytes"].tolist())
    # a buffer read with its record sizes unknown and no way to learn them is refused, not misread
    with pytest.raises(layout.LayoutError, match="size is not known"):
        layout.parse(buffers[0], {})


def test_the_recording_replays_to_the_rows_the_h200_wrote() -> None:
    got, stats = replay()
    expected = pd.read_csv(DATA / "expected.csv")
    assert stats.unmatched_calls == 0
    for loop, scenario in (("pinned_nb", "pinned_nb"), ("pageable", "pageable"), ("auto", "Tokens/bs64/w2")):
        exp = expected[expected.scenario == scenario].reset_index(drop=True)
        mine = got[loop]
        assert len(mine) == len(exp) == 24
        assert (mine.on_host == ALL_ON_HOST).all()
        np.testing.assert_allclose(mine.h2d_gpu_ms, exp.h2d_gpu_ms, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(mine.h2d_ms, exp.h2d_ms, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(mine.compute_ms, exp.compute_ms, rtol=1e-9, atol=1e-9)
        assert list(mine.src_memory) == list(exp.src_memory)


def test_without_kernel_records_the_copies_replay_the_same_and_the_step_is_left_to_the_events() -> None:
    """The same recording with its kernel records taken out, as ``pinprof profile`` records by
    default: each copy call still finds its memcpy record by size, order and time alone (no kernel
    launch brackets it), so every row's copy columns are the ones the H200 wrote; the compute fields
    stay empty for the events to fill, and the row says its copies' fields alone are host ms (``COPIES_ON_HOST``)."""
    got, stats = replay(kernels=False)
    expected = pd.read_csv(DATA / "expected.csv")
    assert stats.unmatched_calls == 0 and stats.kernels == 0
    for loop, scenario in (("pinned_nb", "pinned_nb"), ("pageable", "pageable"), ("auto", "Tokens/bs64/w2")):
        exp = expected[expected.scenario == scenario].reset_index(drop=True)
        mine = got[loop]
        assert len(mine) == len(exp) == 24
        assert (mine.on_host == COPIES_ON_HOST).all()
        np.testing.assert_allclose(mine.h2d_gpu_ms, exp.h2d_gpu_ms, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(mine.h2d_ms, exp.h2d_ms, rtol=1e-9, atol=1e-9)
        assert mine.compute_ms.isna().all()
        assert list(mine.src_memory) == list(exp.src_memory)


@pytest.mark.parametrize("scenario", ["pinned_nb", "pageable", "Tokens/bs64/w2"])
def test_each_row_holds_its_own_steps_kernels(scenario: str) -> None:
    """Each recorded step ran k units of work (k from its batch, 1 to 4, out of step with the batch
    number): every row's compute_ms sits on its own k's line, far closer than one unit."""
    tl = pd.read_csv(DATA / "expected.csv")
    tl = tl[(tl.scenario == scenario) & (tl.batch >= 1)]  # batch 0 pays the first launches (cuBLAS set-up)
    a, b = np.polyfit(tl.k, tl.compute_ms, 1)
    resid = tl.compute_ms - (a * tl.k + b)
    assert a > 0.01  # ms per unit: a 256 x 1024 x 1024 fp32 matmul and its tanh
    assert np.abs(resid).max() < 0.25 * a, (a, resid.abs().max())


def test_two_loaders_sharing_each_step_both_get_its_kernels_on_h200_records() -> None:
    """Two loaders zipped (``for x, y in zip(a, b)``): each batch of each loader is in flight through
    the same step, so both rows hold it, as the host clock and the events time it. The recorded
    ``pinprof profile`` loop's batches, each handed over a second time as another loader's batch with
    the same step windows and no copies: both loaders' rows read the recorded step's kernels. Before,
    a kernel went to one window only (on the H100, 2026-12-05, the second loader's rows of
    ``ahead_loops.py --loop zipped`` read no compute at all)."""
    buffers, meta = cupti_replay.load(DATA / "recording.npz")
    sizes = {int(k): v for k, v in meta["sizes"].items()}
    records = Records(Stats())
    first, second = Store(), Store()
    for b in meta["batches"]:
        if b["loop"] != "auto":
            continue
        cupti_replay.hand_over(records, first, b)
        cupti_replay.hand_over(records, second, {**b, "calls": []})
    for raw, clock in zip(buffers, meta["clocks"]):
        p, c, rate = clock["host_ns"], clock["cupti"], clock["rate"]
        records.take(layout.parse(raw, dict(sizes)), functools.partial(cupti_replay.to_host, p=p, c=c, rate=rate))
        records.process(force=False)
    records.process(force=True)
    a, b = first.columns(), second.columns()
    expected = pd.read_csv(DATA / "expected.csv")
    own = expected[expected.scenario == "Tokens/bs64/w2"].compute_ms.to_numpy()
    np.testing.assert_allclose(a["comp_gsum"], own, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(b["comp_gsum"], own, rtol=1e-9, atol=1e-9)
    assert np.isnan(b["h2d_gsum"]).all()  # the second loader copied nothing


def test_copies_bytes_and_memory_kind_of_the_recorded_rows() -> None:
    tl = pd.read_csv(DATA / "expected.csv")
    kinds = tl.groupby("scenario").src_memory.unique().map(list).to_dict()
    assert kinds == {"Tokens/bs64/w2": ["pinned"], "pageable": ["pageable"], "pinned_nb": ["pinned"]}
    assert set(tl[tl.scenario == "Tokens/bs64/w2"].bytes) == {64 * 512 * 8 + 64 * 8}
    assert (tl[tl.scenario == "Tokens/bs64/w2"].copies == 2).all()
    assert (tl.h2d_gpu_ms <= tl.h2d_ms + 1e-9).all() and (tl.h2d_gpu_ms > 0).all()


def test_the_drivers_staging_of_the_recorded_pageable_copies_and_none_of_the_pinned() -> None:
    got, _ = replay()
    _, meta = cupti_replay.load(DATA / "recording.npz")
    pageable, pinned = got["pageable"], pd.concat([got["pinned_nb"], got["auto"]])
    assert (pinned.hidden_stage_ms == 0).all()  # measured: a pinned copy has no staging, not "unknown"
    assert (pageable.hidden_stage_ms > 0).all()
    # staging and DMA make up the span from the call's start to the later of its return and its DMA's
    # end: at least the call (one 256 KiB copy a batch), and more only by a DMA that ends past the
    # return (none here: the call returned after its DMA, 48 us against the DMA's 7 us)
    spans = {b["row"]: b["calls"][0][:2] for b in meta["batches"] if b["loop"] == "pageable"}
    for row, (s, e) in spans.items():
        staged, dma = pageable.hidden_stage_ms[row], pageable.h2d_gpu_ms[row]
        assert staged + dma == pytest.approx((e - s) / 1e6, abs=1e-6)
    # on the H200 most of a 256 KiB pageable copy is the driver's staging, not the DMA
    assert (pageable.hidden_stage_ms > pageable.h2d_gpu_ms).mean() > 0.5


# -- the rules on made-up records -------------------------------------------------------------------
def test_runs_of_records_are_found_and_sizes_learned_once() -> None:
    buf = _memcpy(1, 2, 8, 2, 1) + _kernel(3, 4, 2, 2) * 40 + _memcpy(5, 6, 8, 2, 3, copy_kind=2) + _kernel(7, 8, 6, 4)
    asked: list[int] = []

    def size_at(off: int) -> int:
        asked.append(off)
        return 216 if struct.unpack_from("<I", buf, off)[0] == KERNEL else 96

    sizes: dict[int, int] = {}
    assert layout.runs(buf, sizes, size_at) == [
        (MEMCPY, 0, 1),
        (KERNEL, 96, 40),
        (MEMCPY, 96 + 40 * 216, 1),
        (KERNEL, 192 + 40 * 216, 1),
    ]
    assert asked == [0, 96]  # each kind's size asked once
    parsed = layout.parse(buf, sizes)
    assert len(parsed[KERNEL]["start"]) == 41
    assert parsed[MEMCPY]["bytes"].tolist() == [8]  # the device-to-host copy is dropped
    with pytest.raises(layout.LayoutError, match="kind 5"):
        layout.parse(struct.pack("<I", 5) + bytes(92), {})
    with pytest.raises(layout.LayoutError, match="expected a multiple of 8"):
        layout.parse(_kernel(1, 2, 1, 1), {}, lambda off: 100)


_STRUCT = {1: "<B", 4: "<I", 8: "<Q"}  # unsigned little-endian fields by width, as struct reads them


def _one_by_one(buf: bytes, sizes: dict[int, int]) -> dict[int, dict[str, list[int]]]:
    """Each record of ``buf`` read with ``struct`` at its fields' offsets, in order: what ``parse`` must
    give, however it walks the runs and gathers the fields."""
    out: dict[int, dict[str, list[int]]] = {k: {c: [] for c in layout.COLUMNS[k]} for k in layout.FIELDS}
    off = 0
    while off < len(buf):
        kind = struct.unpack_from("<I", buf, off)[0]
        got = {
            name: struct.unpack_from(_STRUCT[np.dtype(fmt).itemsize], buf, off + pos)[0]
            for name, fmt, pos in layout.FIELDS[kind]
        }
        if kind != MEMCPY or got["copy_kind"] == layout.COPY_HTOD:
            for c in layout.COLUMNS[kind]:
                out[kind][c].append(got[c])
        off += sizes[kind]
    return out


@pytest.mark.parametrize("seed", range(6))
def test_parsed_columns_are_each_records_fields_for_runs_of_every_length(seed: int) -> None:
    """Runs of 1 to 40 records of each kind, alternating (short runs are walked one record at a time,
    long ones by strided views past ``SHORT``), some copies not host-to-device: every column equals
    the fields read record by record."""
    rng = np.random.default_rng(seed)
    parts: list[bytes] = []
    corr = 1
    for r in range(int(rng.integers(1, 30))):
        for _ in range(int(rng.integers(1, 41)) if rng.random() < 0.3 else int(rng.integers(1, layout.SHORT + 2))):
            t = int(rng.integers(0, 2**62))
            if r % 2:
                parts.append(_kernel(t, t + int(rng.integers(1, 10**6)), int(rng.integers(0, 2**62)), corr))
            else:
                copy_kind = 1 if rng.random() < 0.8 else 2
                parts.append(
                    _memcpy(t, t + 5, int(rng.integers(1, 2**40)), int(rng.choice([1, 2, 5])), corr, copy_kind)
                )
            corr += 1
    buf = b"".join(parts)
    sizes = {KERNEL: 216, MEMCPY: 96}
    parsed = layout.parse(buf, dict(sizes))
    want = _one_by_one(buf, sizes)
    for kind in layout.FIELDS:
        for c in layout.COLUMNS[kind]:
            assert parsed[kind][c].dtype == np.int64
            assert parsed[kind][c].tolist() == want[kind][c], (kind, c)
    assert sum(len(parsed[k]["start"]) for k in layout.FIELDS) > 0


def test_a_foreign_copy_of_the_same_size_is_passed_over() -> None:
    """A copy made by another thread just before the loop's call, with the same size, and still running
    on the device when the call began: the kernels around it in correlation order show it was issued
    before the call, so the call gets its own record."""
    corr = np.array([10, 20])
    start = np.array([1_200_000, 1_300_000])  # both ran on the device after the call began (1.1 ms)
    nbytes = np.array([4096, 4096])
    ker_corr = np.array([9, 11, 19, 21])
    ker_queued = np.array([900_000, 950_000, 1_150_000, 1_250_000])  # launches around each copy
    lo, hi = attribute.issue_bounds(corr, ker_corr, ker_queued)
    assert lo.tolist() == [900_000, 1_150_000] and hi.tolist() == [950_000, 1_250_000]
    got = attribute.match_copies([(1_100_000, 1_200_000, ((4096,),))], nbytes, start, lo, hi, slack_ns=10_000)
    assert got == [[1]]
    # with no kernels to bracket them, the first record of the size that started after the call wins
    lo, hi = attribute.issue_bounds(corr, np.array([], dtype=np.int64), np.array([], dtype=np.int64))
    assert attribute.match_copies([(1_100_000, 1_200_000, ((4096,),))], nbytes, start, lo, hi) == [[0]]


def test_a_call_matches_either_size_of_a_converting_copy_and_never_goes_back() -> None:
    np.arange(4)
    nbytes = np.array([100, 400, 100, 50])
    start = np.array([10, 20, 30, 40]) * 1000
    lo, hi = np.full(4, -np.inf), np.full(4, np.inf)
    calls = [(0, 25_000, ((400, 100),)), (25_000, 60_000, ((100,), (7,)))]
    assert attribute.match_copies(calls, nbytes, start, lo, hi, slack_ns=0) == [[0], [2, -1]]


def test_kernels_go_to_the_window_they_were_launched_in_and_busy_time_is_a_union() -> None:
    queued = np.array([5, 15, 25, 0, 40])
    assert attribute.assign_kernels(queued, np.array([0, 20]), np.array([10, 30])).tolist() == [0, -1, 1, -1, -1]
    group = np.array([0, 0, 0, 2, 2, 1])
    start = np.array([0, 5, 20, 100, 100, 50])
    end = np.array([10, 8, 30, 110, 105, 60])
    first, last, busy = attribute.per_group(group, start, end, 4)
    assert first.tolist()[:3] == [0, 50, 100] and last.tolist()[:3] == [30, 60, 110]
    assert busy.tolist()[:3] == [20, 10, 10] and np.isnan(busy[3])


def test_the_clock_rate_is_measured_when_another_client_set_its_own() -> None:
    """Kineto's clock (the CPU's cycle counter, 2.1 ticks a ns on the H200) stays registered after
    torch.profiler ends: durations are divided by the measured rate, not read as ns."""
    import time

    t0 = time.perf_counter_ns()

    def ticks() -> int:
        return round((time.perf_counter_ns() - t0) * 2.1) + 10**12

    clock = CuptiClock(ticks)
    time.sleep(0.03)
    clock.update()
    assert clock.measured and abs(clock.rate - 2.1) < 1e-3
    now = ticks()
    host = clock.to_host(np.array([now, now + 2_100_000]))
    assert abs(int(host[1] - host[0]) - 1_000_000) < 2_000  # 2.1 M ticks are 1 ms
    assert abs(int(host[0]) - time.perf_counter_ns()) < 5_000_000
    same = CuptiClock(time.perf_counter_ns)  # CUPTI's own clock: one tick a ns, the rate exactly 1
    time.sleep(0.03)
    same.update()
    assert same.rate == 1.0


def test_event_rows_and_cupti_rows_land_on_one_host_timeline() -> None:
    """A run that handed CUPTI to torch.profiler for a while has both kinds of row: events' times are
    mapped by the anchors' clock (elapsed ms since the first anchor), CUPTI's are host ms already."""
    from profiler.timeline.build import build_timeline
    from profiler.timeline.clockmap import ClockMap

    rows = []
    for n, clock in enumerate((float("nan"), 1.0, float("nan"))):
        rec = dict(TEMPLATE)
        rec.update(batch=n, bytes=100, copies=1, src_memory="pinned", batch_s=1000.0 + 10 * n, batch_e=1010.0 + 10 * n)
        rec.update(fetch_s=1000.0 + 10 * n, fetch_e=1001.0 + 10 * n, call_s=1001.0 + 10 * n, call_e=1001.5 + 10 * n)
        rec.update(call_sum=0.5, request=1001.5 + 10 * n)
        rows.append((rec, clock))
    store = Store()
    for rec, _ in rows:
        store.append(rec)
    # row 0, events: copy 2..3 ms and compute 3..7 ms after the first anchor; the anchor at host 1000 ms
    for field, value in zip(("h2d_gs", "h2d_ge", "comp_gs", "comp_ge", "h2d_gsum"), (2.0, 3.0, 3.0, 7.0, 1.0)):
        store.set_gpu(0, ["h2d_gs", "h2d_ge", "comp_gs", "comp_ge", "h2d_gsum"].index(field), value)
    # row 1, CUPTI: host ms, and the kernels' busy time 2.5 ms within a 4 ms span
    store.set_cupti(1, h2d=(1012.0, 1012.5, 0.5), src="pageable", comp=(1013.0, 1017.0, 2.5, 3))
    raw = store.columns()
    tl = build_timeline(raw, 1000.0, ClockMap(1000.0, 1.0), {"run": "r", "scenario": "s", "mode": "pinned"})
    assert list(tl.gpu_clock) == ["events", "cupti", "events"]
    assert tl.h2d_start_ms.tolist()[:2] == [2.0, 12.0] and tl.h2d_ms.tolist()[:2] == [1.0, 0.5]
    assert tl.compute_ms.tolist()[:2] == [4.0, 2.5]  # events: the span; CUPTI: the busy time
    # the step's kernels counted on CUPTI's row only; an events row has no count (empty, not 0)
    assert tl.kernels.dtype == "Int64" and tl.kernels.isna().tolist() == [True, False, True] and tl.kernels[1] == 3
    assert tl.src_memory.tolist() == ["pinned", "pageable", "pinned"]
    assert tl.h2d_ms.isna().tolist() == [False, False, True]
    # on a CPU device (no clock, no CUPTI row) nothing is GPU-timed
    cpu = build_timeline(store.columns(0, 1), 1000.0, None, {"run": "r", "scenario": "s", "mode": "pinned"})
    assert cpu.h2d_ms.isna().all() and list(cpu.gpu_clock) == ["none"]


def test_a_batch_with_no_copy_and_an_events_step_is_written_without_waiting_for_a_record() -> None:
    """With the kernel records off, a batch that made no copy (data made on the GPU) waits for no record:
    written at once, in order, and the batch after it with a copy call waits for its record as before."""
    records = Records(Stats())
    store = cupti_replay.waiting_rows(3)
    records.incoming.append(Pending(store, 0, [], None, 1_000))
    records.incoming.append(Pending(store, 1, [], None, 2_000))
    records.incoming.append(Pending(store, 2, [(2_500, 3_000, ((64,),))], None, 3_000))
    records.process(force=False)
    assert store.first_waiting() == 2  # rows 0 and 1 written, row 2 still waits for its copy's record
    cols = store.columns()
    assert list(cols["on_host"][:2]) == [COPIES_ON_HOST, COPIES_ON_HOST] and np.isnan(cols["comp_gs"][:2]).all()
    # a batch whose step CUPTI's kernels time waits for the records after its end, copy or none
    records.incoming.append(Pending(store, 3, [], [(3_100, 3_900)], 4_000))
    records.process(force=False)
    assert store.first_waiting() == 2 and len(records._pending) == 2


def test_a_row_of_cupti_copies_and_an_events_step_reads_each_on_its_clock() -> None:
    """The default clock's row: CUPTI's memcpy records give its copies in host ms, and its step's events
    (set first, as they may complete before the records come) are mapped by the anchors' clock; the
    records leave the step's fields alone. Its DMA is the records' own time, as on a CUPTI row."""
    from profiler.timeline.build import build_timeline
    from profiler.timeline.clockmap import ClockMap

    rec = dict(TEMPLATE)
    rec.update(batch=0, bytes=100, copies=1, src_memory="pinned", batch_s=1000.0, batch_e=1010.0)
    rec.update(fetch_s=1000.0, fetch_e=1001.0, call_s=1001.0, call_e=1001.5, call_sum=0.5, request=1001.5)
    store = Store()
    store.append(rec)
    fields = ["h2d_gs", "h2d_ge", "comp_gs", "comp_ge", "h2d_gsum"]
    store.set_gpu(0, fields.index("comp_gs"), 3.0)  # 3..7 ms after the anchor at host 1000 ms
    store.set_gpu(0, fields.index("comp_ge"), 7.0)
    store.set_cupti(0, h2d=(1002.0, 1002.5, 0.5, 0.0), src="pinned", comp=None)
    tl = build_timeline(store.columns(), 1000.0, ClockMap(1000.0, 1.0), {"run": "r", "scenario": "s", "mode": "pinned"})
    assert list(tl.gpu_clock) == ["cupti/events"]
    assert tl.h2d_start_ms[0] == 2.0 and tl.h2d_ms[0] == 0.5 and tl.dma_ms[0] == 0.5 and tl.hidden_stage_ms[0] == 0.0
    assert tl.compute_start_ms[0] == 3.0 and tl.compute_ms[0] == 4.0  # the events' span
    assert tl.kernels.isna().all()  # no kernel records: no count, not 0


def test_records_delivered_after_their_batch_was_written_are_added_to_it() -> None:
    """Two queues of buffers, as CUPTI 12.3+ keeps them, one a launching thread
    (``CuptiRecorder._queues``): the main thread's buffer carries records past batch 0 and it is
    written; the autograd thread's buffer, delivered after, holds batch 0's backward kernel and a copy
    record of batch 0's that the main thread's buffer lacked. Both are added to the written row."""
    ms = 1_000_000
    stats = Stats()
    records = Records(stats)
    store = Store()
    for i in range(2):
        row = dict(TEMPLATE)
        row["batch"] = i
        store.append(row)
        store.wait_for_gpu(i)
        calls: list[Call] = [(i * 100 * ms, i * 100 * ms + ms // 2, ((4096,),))]
        records.incoming.append(
            Pending(store, i, calls, [(i * 100 * ms + ms, i * 100 * ms + 90 * ms)], i * 100 * ms + 90 * ms)
        )
    sizes = {KERNEL: 216, MEMCPY: 96}

    def to_host(v: np.ndarray) -> np.ndarray:
        return v

    # the main thread's forward kernels and batch 1's copy; batch 1's second kernel (160 ms) carries
    # the frontier past batch 0's end plus LAG_NS, so batch 0 is written with no copy and 1 ms of kernels
    main = (
        _kernel(2 * ms, 3 * ms, 2 * ms, 2)
        + _memcpy(100 * ms + 100_000, 100 * ms + 200_000, 4096, 2, 5)
        + _kernel(101 * ms, 102 * ms, 101 * ms, 6)
        + _kernel(160 * ms, 161 * ms, 160 * ms, 8)
    )
    records.take(layout.parse(main, dict(sizes)), to_host)
    records.process(force=False)
    cols = store.columns()
    assert cols["comp_gsum"][0] == pytest.approx(1.0) and np.isnan(cols["h2d_gsum"][0])
    assert cols["comp_kernels"][0] == 1
    assert stats.unmatched_calls == 1
    # the other queue: batch 0's copy and backward kernel (late: added), batch 1's backward (in time)
    other = (
        _memcpy(100_000, 300_000, 4096, 2, 1)
        + _kernel(4 * ms, 6 * ms, 3 * ms, 3)
        + _kernel(103 * ms, 105 * ms, 102 * ms, 7)
    )
    records.take(layout.parse(other, dict(sizes)), to_host)
    records.process(force=True)
    cols = store.columns()
    assert cols["comp_gsum"].tolist() == pytest.approx([3.0, 4.0])
    assert cols["comp_kernels"].tolist() == [2, 3]  # the late backward kernel counted in batch 0's row
    assert cols["comp_gs"][0] == pytest.approx(2.0) and cols["comp_ge"][0] == pytest.approx(6.0)
    assert cols["h2d_gsum"].tolist() == pytest.approx([0.2, 0.1])
    assert cols["src_memory"][0] == "pinned"
    assert stats.late_added == 2 and stats.late == 0 and stats.unmatched_calls == 0
    # 40 s on, batch 2 is written and the first two drop out of what is kept (HISTORY_NS): a kernel of
    # batch 0's time that comes now can no longer be added, and is counted lost
    row = dict(TEMPLATE)
    row["batch"] = 2
    store.append(row)
    store.wait_for_gpu(2)
    t = 40_000 * ms
    records.incoming.append(Pending(store, 2, [], [(t + ms, t + 90 * ms)], t + 90 * ms))
    records.take(layout.parse(_kernel(t + 2 * ms, t + 3 * ms, t + 2 * ms, 9), dict(sizes)), to_host)
    records.process(force=True)
    assert stats.late == 0
    records.take(layout.parse(_kernel(50 * ms, 51 * ms, 50 * ms, 4), dict(sizes)), to_host)
    assert stats.late == 1 and store.columns()["comp_gsum"][0] == pytest.approx(3.0)


def test_a_training_steps_backward_from_its_own_queue_is_added_to_the_rows_on_h200_records() -> None:
    """``tests/data/h200_thread_queues``: the H200 short step's first four CUPTI buffers, kept a queue
    a launching thread (CUPTI's default): the autograd thread's backward kernels come back in buffers
    of their own, after the main thread's have carried the rows past them. Replayed in the order the
    recorder met them, every row holds its forward and its backward (1.25-1.3 ms of kernels; without
    the late records a row read the forward's 0.58 ms) and every copy call its record."""
    store, stats, batches, last = cupti_replay.replay_live(
        *cupti_replay.load(DATA.parent / "h200_thread_queues" / "recording.npz")
    )
    assert stats.late_added > 5_000 and stats.late == 0
    cols = store.columns()
    covered = [b["row"] for b in batches if b["windows"] and b["windows"][-1][1] < min(last)]
    assert len(covered) > 50
    comp = cols["comp_gsum"][covered]
    assert (comp > 1.2).all() and (comp < 1.35).all(), (comp.min(), comp.max())
    assert not np.isnan(cols["h2d_gsum"][covered]).any()  # (the rows after them lack buffers cut off)
    # Each row's kernel count against a plain count of the recording's launches inside that batch's
    # step windows, on the host clock, buffer by buffer: the main thread's and autograd's alike.
    launches, _ = cupti_replay.kernel_launches(*cupti_replay.load(DATA.parent / "h200_thread_queues" / "recording.npz"))
    by_row = {b["row"]: b["windows"] for b in batches}
    counted = [sum(int(((launches >= a) & (launches <= e)).sum()) for a, e in by_row[r]) for r in covered]
    assert cols["comp_kernels"][covered].tolist() == counted
    print(
        f"{len(covered)} rows: compute_ms {comp.min():.4f}-{comp.max():.4f}, kernels {min(counted)}-{max(counted)}, "
        f"{stats.late_added} late records added"
    )


def test_a_late_kernel_of_an_old_batch_is_still_added_among_many_kept() -> None:
    """Late kernels are looked for only among the written batches that can hold them (those ending
    after the earliest launch): one launched in an old batch's window, with thousands kept after it,
    is added to that batch as one launched in the newest batch's is to the newest; one launched between
    two steps is no batch's, and not counted lost."""
    ms, n = 1_000_000, 3000
    stats, store = Stats(), Store()
    records = Records(stats)
    for b in range(n):
        row = dict(TEMPLATE)
        row["batch"] = b
        store.append(row)
        store.wait_for_gpu(b)
        t = b * 7 * ms
        records.incoming.append(Pending(store, b, [], [(t, t + 6 * ms)], t + 6 * ms))
    sizes = {KERNEL: 216, MEMCPY: 96}
    records.take(layout.parse(_kernel(n * 7 * ms + 100 * ms, n * 7 * ms + 101 * ms, 0, 1), dict(sizes)), lambda v: v)
    records.process(force=False)  # every batch written, with no kernel of its own
    old, new = 100, n - 1
    late = _kernel(old * 7 * ms + 2 * ms, old * 7 * ms + 3 * ms, old * 7 * ms + ms, 5) + _kernel(
        new * 7 * ms + 2 * ms, new * 7 * ms + 4 * ms, new * 7 * ms + ms, 6
    )
    gap = 200 * 7 * ms + 6 * ms + ms // 2  # between two steps' windows: no batch's, and not lost
    late += _kernel(gap + 10_000, gap + 20_000, gap, 7)
    records.take(layout.parse(late, dict(sizes)), lambda v: v)
    comp = store.columns()["comp_gsum"]
    assert stats.late_added == 2 and stats.late == 0  # lost: only a launch before the oldest batch kept
    assert comp[old] == pytest.approx(1.0) and comp[new] == pytest.approx(2.0)
    assert np.nansum(comp) == pytest.approx(3.0)  # no other row took either
