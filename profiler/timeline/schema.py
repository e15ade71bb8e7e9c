"""The per-batch timeline's columns, units and dtypes (``build`` makes one from raw records).

Columns (one row per (run, scenario, batch); times are milliseconds from the run's start, durations
milliseconds; an empty cell (NaN) means "not measured", never 0):

identity
    run (str), scenario (str: mode and loader settings), mode (str), batch (int, 0-based),
    epoch (int, 0-based: which pass over the loader, a new iterator or a pass started again; 0 in files from elsewhere),
    warmup (bool: start-up batches, excluded from the figures: ``profiler.analysis.warmup``), rank, local_rank, world_size (int; 0, 0, 1 outside
    torch.distributed)
data
    bytes (int: all tensors of every ``to_device`` call of the batch), copies (Int64: number of
    ``to_device`` calls), src_memory (str: what the DMA reads from, ``pageable`` / ``pinned`` /
    ``device`` / ``mixed``, as CUPTI's srcKind would say: a non-dense pinned tensor is first made
    contiguous in pageable memory, so its DMA reads ``pageable``; with ``gpu_clock`` ``cupti``, it is
    CUPTI's srcKind), gpu_clock (str: what timed the GPU columns: ``cupti`` (CUPTI's activity records,
    copies and kernels), ``cupti/events`` (CUPTI's memcpy records the copy columns, CUDA events the
    compute columns: ``pinprof profile``'s default), ``events`` (CUDA events), ``none`` without a GPU)
durations, ms
    fetch_ms      main thread blocked in ``next(loader)``
    pin_ms        the DataLoader pin step for this batch (pin thread, or main thread without workers)
    pin_cpu_ms    CPU time of the thread that ran the pin step, during it: ``pin_ms`` minus this is the
                  time that thread waited (for the GIL, or for a core)
    pin_alloc_ms  time torch's pinned-memory allocator spent in cudaHostAlloc/cudaHostRegister during
                  the pin step (``torch.cuda.host_memory_stats()``'s ``host_alloc_time``; process-wide)
    stage_ms      main thread's explicit staging into pinned memory (``staged`` mode)
    layout_ms     host time making non-dense sources (slices, ``expand()``, gaps) contiguous before
                  their copy: the copy torch's ``copy_`` would make inside the call; not DMA, not staging
    h2d_ms        GPU time of the batch's copies: the first copy's start to the last copy's end (CUPTI's
                  memcpy records, or CUDA events on the copy's stream)
    h2d_gpu_ms    the batch's copies' GPU times summed (equals ``h2d_ms`` for one copy)
    h2d_call_ms   host time spent inside the copy calls, summed (blocks for pageable sources or
                  blocking copies)
    dma_ms, hidden_stage_ms
                  the batch's copies split into the DMA proper and the driver's hidden staging of
                  pageable sources (summed over the batch's copies). With CUPTI: the memcpy records'
                  own time, and each pageable call's span to its last DMA less that DMA (0 for
                  pinned copies); with the events: a pageable or mixed batch's by the calibrated
                  pinned rate, a pinned batch's copy time as its DMA (``profiler.timeline.split``);
                  empty where neither ran. With ``layout_ms``, they account for the copy calls'
                  host time and the DMA's tail past them
    cpu_work_ms   user CPU work meant to overlap the copy (sum if entered several times)
    compute_ms    user GPU work: with CUPTI's kernel records (``gpu_clock`` ``cupti``), the busy time of
                  the kernels the step launched (the union of their intervals on the device); with
                  events (``events``, ``cupti/events``), the span between the compute stream's events;
                  the host clock on a CPU device
    wait_ms       exposed transfer: for copies that block the host, the copy calls; for asynchronous
                  copies, the time from when the consumer asked for the data (``compute()`` entry, or the
                  batch's end) until the copy finished, 0 if it was already done
    overlap_ms    part of ``h2d`` that ran while ``cpu_work`` ran (interval intersection)
    gpu_idle_ms   part of ``h2d`` that ran after the previous batch's compute had ended: the GPU had
                  none of the loop's work under the copy (the copy was issued after the previous step
                  finished); 0 when the copy ran under that compute (mode ``prefetch``); empty for the
                  first batch and without GPU compute
    batch_ms      from this batch's fetch start to the next batch's fetch start
    pinprof_ms    pinprof's own time on the loop's thread for this batch, the calls it wraps left out:
                  ``pinprof profile``'s hooks (the ``next()`` that fetched it, closing the previous
                  row included, its copies and pins, and the optimizer step hooks while it was the
                  current batch, closing the rows they end); ``TransferProfiler.batches`` bookkeeping between
                  batches and ``to_device``'s own work beside its copy calls. Empty where not measured
                  (the prefetch loop). Not in it: a full garbage collection that ran inside the hooks
                  (``gc_ms`` has it; one told by being no longer than the hooks' time in the batch);
                  pinprof's threads, which run beside the loop (their CPU time is meta.json's
                  ``pinprof_threads_ms``: ``profiler.capture.own_threads``), and
                  the call into each hook, its first tests and its return, which no clock inside it
                  sees (about 1.6 us a call on a 2-core development machine:
                  ``scripts/bench_cpu_recorder.py --per-call``); a call pinprof does not record reads
                  no clock
    gc_ms         part of the batch during which the process ran a full garbage collection (Python's
                  generation 2), on any thread: each holds the GIL, so the loop's thread waited for
                  it (``profiler.capture.gc_pauses``); 0 when none ran, empty where not watched
    gc_fetch_ms   full collections inside the batch's ``next()``, so also in ``fetch_ms``: a loader with
                  no workers runs the dataset in the loop's process, and its allocations set them off
                  (where the batch is fetched ahead, that ``next()`` lies before the batch's interval)
intervals, ms from the run's start
    <phase>_start_ms, <phase>_end_ms for fetch, pin, stage, layout, h2d, cpu_work, compute, wait,
    overlap, batch (a phase entered several times: first start, last end)
configuration
    device (str), batch_size (Int64), num_workers (Int64), pin_memory (boolean), non_blocking (boolean),
    prefetch_factor (Int64; empty with no workers), loop (str: ``plain``, ``fetch-ahead`` or
    ``device-prefetch``, what ``pinprof profile`` saw the loop do; ``profiler.capture.in_flight``),
    framework (str: the package whose code fetched the batches, ``accelerate``, ``timm``,
    ``lightning``; empty for a loop of the script's own), gc_frozen (Int64: objects ``gc.freeze()`` had
    put out of the garbage collector's reach when the loop began; 0 without it)
pin step counts (Int64; empty when the batch was not pinned while pinprof watched)
    pin_faults    minor page faults of the pinning thread during the pin step: the first touch of the
                  worker's shared memory, which the pin copy is the first to read (up to 64 KiB a
                  fault: Linux maps file-backed pages around the faulting one)
    pin_allocs    blocks torch's pinned allocator created during the pin step (``num_host_alloc``)
GPU counts (Int64)
    kernels       the kernels of the batch's step as CUPTI recorded them (those ``compute_ms`` sums):
                  each launch also paid CUPTI's record in the driver, which ``pinprof_ms`` does not
                  hold; empty where events timed the step (``events``, ``cupti/events``), whose
                  ``compute_ms`` is an event span

In mode ``prefetch`` a batch's fetch and copy run during the previous batch's step (that is the
mode), so its ``fetch_*`` and ``h2d_*`` intervals lie before its ``batch_start_ms``; its batch
interval is the step that consumes it.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import numpy as np
import pandas as pd

PHASES: tuple[str, ...] = ("fetch", "pin", "stage", "layout", "h2d", "cpu_work", "compute", "wait", "overlap", "batch")
DURATIONS: tuple[str, ...] = (
    "fetch_ms",
    "pin_ms",
    "pin_cpu_ms",
    "pin_alloc_ms",
    "stage_ms",
    "layout_ms",
    "h2d_ms",
    "h2d_gpu_ms",
    "h2d_call_ms",
    "dma_ms",
    "hidden_stage_ms",
    "cpu_work_ms",
    "compute_ms",
    "wait_ms",
    "overlap_ms",
    "gpu_idle_ms",
    "batch_ms",
    "pinprof_ms",
    "gc_ms",
    "gc_fetch_ms",
)
INTERVALS: tuple[str, ...] = tuple(f"{p}_{edge}_ms" for p in PHASES for edge in ("start", "end"))
IDENTITY: dict[str, str] = {
    "run": "str",
    "scenario": "str",
    "mode": "str",
    "batch": "int64",
    "epoch": "int64",
    "warmup": "bool",
    "rank": "int64",
    "local_rank": "int64",
    "world_size": "int64",
    "bytes": "int64",
    "copies": "Int64",
    "src_memory": "str",
    "gpu_clock": "str",
}
CONFIG: dict[str, str] = {
    "device": "str",
    "batch_size": "Int64",
    "num_workers": "Int64",
    "pin_memory": "boolean",
    "non_blocking": "boolean",
    "prefetch_factor": "Int64",
    "loop": "str",
    "framework": "str",
    "gc_frozen": "Int64",
}
COUNTS: dict[str, str] = {"pin_faults": "Int64", "pin_allocs": "Int64", "kernels": "Int64"}
# What a missing identity column means in a file from elsewhere (an nsys import, an older version).
DEFAULTS: dict[str, Any] = {
    "epoch": 0,
    "warmup": False,
    "rank": 0,
    "local_rank": 0,
    "world_size": 1,
    "gpu_clock": "unknown",
}
SCHEMA: dict[str, str] = {**IDENTITY, **{c: "float64" for c in DURATIONS + INTERVALS}, **CONFIG, **COUNTS}
COLUMNS: tuple[str, ...] = tuple(SCHEMA)

# Raw per-batch fields the recorder fills: host times in ms on the now_ms clock (``*_sum``: summed
# durations of a phase entered several times). GPU times: ms elapsed since the first anchor event (CUDA
# events), or host ms already where ``on_host`` says so (the clock that gave them read them so).
# ``h2d_gsum`` the copies' GPU durations summed, ``comp_gsum`` the step's kernels' busy time and
# ``comp_kernels`` their number, ``stage_gsum`` the driver's staging of the batch's pageable copies
# (``profiler.capture.clocks.cupti.batches.staging_ns``) (CUPTI only; NaN when absent).
RAW_HOST = (
    "batch_s",
    "batch_e",
    "fetch_s",
    "fetch_e",
    "pin_s",
    "pin_e",
    "stage_s",
    "stage_e",
    "stage_sum",
    "layout_s",
    "layout_e",
    "layout_sum",
    "call_s",
    "call_e",
    "call_sum",
    "cpu_s",
    "cpu_e",
    "cpu_sum",
    "comp_s",
    "comp_e",
    "comp_sum",
    "request",
    "own_sum",
)
RAW_GPU = (
    "h2d_gs",
    "h2d_ge",
    "comp_gs",
    "comp_ge",
    "h2d_gsum",
    "comp_gsum",
    "on_host",
    "comp_kernels",
    "stage_gsum",
)
# Raw pin-step measures (``profiler.capture.pin_hook``): ms of thread CPU time, page faults, pinned
# allocations and ms in them; NaN when the batch was not pinned while the hook was installed.
RAW_PIN = ("pin_cpu", "pin_faults", "pin_allocs", "pin_alloc")
# The ``loop`` column's words, and the frameworks whose loaders always fetch batch n+1 before they hand
# out batch n, with the loop each makes: Accelerate's prepared loader copies n, fetches n+1, then yields
# n; timm's PrefetchLoader fetches and copies n+1, then yields n (``profiler.capture.in_flight``).
PLAIN, FETCH_AHEAD, DEVICE_PREFETCH = "plain", "fetch-ahead", "device-prefetch"
FETCHES_AHEAD = {"accelerate": FETCH_AHEAD, "timm": DEVICE_PREFETCH}
# Raw ``on_host``: which of a row's raw GPU fields are host ms already (NaN: none, each is ms since the
# first anchor). The timeline converts by it and names the row's clock from it (``CLOCK_NAMES``), so no
# module outside ``profiler.capture.clocks`` asks which clock ran.
ALL_ON_HOST = 1.0  # copies and step, and ``comp_gsum`` the step's kernels' busy time (CUPTI's records)
COPIES_ON_HOST = 2.0  # the copies' fields; the step's are an event span (CUPTI's memcpy records, CUDA events)
# The timeline's ``gpu_clock`` of a row by its raw ``on_host``; a row with none host ms reads ``events``
# on a GPU (a ``ClockMap`` puts them on the host clock) and ``none`` off one.
CLOCK_NAMES = {ALL_ON_HOST: "cupti", COPIES_ON_HOST: "cupti/events"}
# The ``gpu_clock`` of rows whose ``compute_ms`` is the step's kernels' busy time (their step fields were
# host ms with it), not a span between events that holds the GPU's waits for the host's launches.
BUSY_TIME = CLOCK_NAMES[ALL_ON_HOST]


def empty_timeline() -> pd.DataFrame:
    """A timeline with no rows and every column typed."""
    return pd.DataFrame({c: pd.Series(dtype=t) for c, t in SCHEMA.items()})


def conform(frame: pd.DataFrame, copy: bool = True, only: Collection[str] | None = None) -> pd.DataFrame:
    """Columns in schema order and dtype; missing columns added empty (older or foreign files).
    ``copy=False``: the columns already of their dtype are shared with ``frame``, not copied (a frame
    just read, which nothing else holds: a second copy of 1,000,000 rows is 0.5 GB). ``only``: the
    schema's columns kept (a partial read), the others neither added nor kept."""
    schema = SCHEMA if only is None else {c: t for c, t in SCHEMA.items() if c in only}
    for col, dtype in schema.items():
        if col not in frame:
            fill: Any = DEFAULTS.get(col, np.nan if dtype == "float64" else pd.NA)
            frame[col] = pd.Series(fill, index=frame.index)
    frame = frame[list(schema) + [c for c in frame.columns if c not in SCHEMA]]
    # Only the columns not of their dtype yet: a cast of each of 65 columns cost the journal's thread
    # (which holds Python's lock while the loop may wait) most of an append's 50 ms on the CPU machine.
    have = dict(zip(frame.columns, map(str, frame.dtypes)))  # one read of the dtypes, not a Series a column
    wrong = {c: t for c, t in schema.items() if have[c] != t}
    if wrong:
        return frame.astype(wrong)  # copy-on-write: the columns not cast are shared until written
    return frame.copy() if copy else frame


def concat(frames: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """Stack timelines of several scenarios, keeping the schema's dtypes."""
    frames = [f for f in frames if len(f)]
    if not frames:
        return empty_timeline()
    return conform(pd.concat(frames, ignore_index=True))
