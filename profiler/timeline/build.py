"""Raw per-batch records (``profiler.capture.store``) -> the typed timeline DataFrame.

The columns and their units are listed in ``profiler.timeline.schema``. Host fields are ms on the
``now_ms`` clock; GPU fields are ms since the first anchor event, put on the host clock by a
``ClockMap``, or host ms already where the row's ``on_host`` says so (the clock that gave them, as
CUPTI's records, read them so); with neither (a CPU device) compute is host-timed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from profiler.timeline.clockmap import ClockMap
from profiler.timeline.idle import gpu_idle
from profiler.timeline.pauses import within
from profiler.timeline.schema import (
    ALL_ON_HOST,
    CLOCK_NAMES,
    CONFIG,
    COPIES_ON_HOST,
    RAW_HOST,
    RAW_PIN,
    SCHEMA,
    conform,
    empty_timeline,
)


class RawRows(NamedTuple):
    """A range of the recorder's rows as ``build_timeline`` takes them, with ``before`` rows ahead of
    the range (one, so that its first row's ``gpu_idle_ms`` sees its predecessor's compute): plain
    data, which a process of its own can build and write (``profiler.report.journal_process``)."""

    raw: Mapping[str, Sequence[Any]]
    t0_ms: float
    clock: ClockMap | None
    static: Mapping[str, Any]
    pauses: tuple[np.ndarray, np.ndarray] | None
    before: int


def build_rows(rows: RawRows) -> pd.DataFrame:
    """The timeline of ``rows``' range (the rows ahead of it left out)."""
    frame = build_timeline(rows.raw, rows.t0_ms, rows.clock, rows.static, rows.pauses)
    return frame.iloc[rows.before :].reset_index(drop=True) if rows.before else frame


def build_timeline(
    raw: Mapping[str, Sequence[Any]],
    t0_ms: float,
    clock: ClockMap | None,
    static: Mapping[str, Any],
    pauses: tuple[np.ndarray, np.ndarray] | None = None,
) -> pd.DataFrame:
    """Turn the recorder's raw columns into the timeline (see the module docstring for columns).

    ``pauses``: the process's full garbage collections, (starts, ends) in host ms on the ``now_ms``
    clock (``profiler.capture.gc_pauses``); None leaves ``gc_ms`` empty (not watched)."""
    n = len(raw["batch"])
    if n == 0:
        return empty_timeline()
    f = {k: np.asarray(raw[k], dtype=float) - t0_ms for k in RAW_HOST if not k.endswith("_sum")}
    summed = {k: np.asarray(raw[k], dtype=float) for k in RAW_HOST if k.endswith("_sum")}
    out: dict[str, Any] = {}
    _interval(out, "fetch", f["fetch_s"], f["fetch_e"])
    _interval(out, "pin", f["pin_s"], f["pin_e"])
    pin = {k: np.asarray(raw[k], dtype=float) for k in RAW_PIN}
    out["pin_cpu_ms"], out["pin_alloc_ms"] = pin["pin_cpu"], pin["pin_alloc"]
    _interval(out, "stage", f["stage_s"], f["stage_e"], summed["stage_sum"])
    _interval(out, "layout", f["layout_s"], f["layout_e"], summed["layout_sum"])
    on_host = np.asarray(raw["on_host"], dtype=float)
    step_host = on_host == ALL_ON_HOST  # the step's fields host ms, comp_gsum its kernels' busy time
    copies_host = step_host | (on_host == COPIES_ON_HOST)  # the copies' fields host ms
    on_gpu = clock is not None or bool(copies_host.any())
    if on_gpu:
        scale = clock.scale if clock is not None else 1.0

        def gpu_ms(key: str, host: np.ndarray) -> np.ndarray:
            # host ms already where ``host``; the others are put on the host clock by the anchors
            v = np.asarray(raw[key], dtype=float)
            mapped = clock.host_ms(v) if clock is not None else np.full(n, np.nan)
            return np.where(host, v, mapped) - t0_ms

        h2d_s, h2d_e = gpu_ms("h2d_gs", copies_host), gpu_ms("h2d_ge", copies_host)
        comp_s, comp_e = gpu_ms("comp_gs", step_host), gpu_ms("comp_ge", step_host)
        gsum = np.asarray(raw["h2d_gsum"], dtype=float)
        h2d_gpu = np.where(copies_host, gsum, gsum * scale)  # a duration: scaled, not shifted
        busy = np.asarray(raw["comp_gsum"], dtype=float)
        comp_ms = np.where(step_host & ~np.isnan(busy), busy, comp_e - comp_s)
    else:
        h2d_s = h2d_e = h2d_gpu = np.full(n, np.nan)
        comp_s, comp_e = f["comp_s"], f["comp_e"]
        comp_ms = summed["comp_sum"]
    sync = np.asarray(raw["copy_sync"], dtype=bool)
    _interval(out, "h2d", h2d_s, h2d_e)
    out["h2d_gpu_ms"] = h2d_gpu
    out["h2d_call_ms"] = np.where(np.isnan(f["call_s"]), np.nan, summed["call_sum"])
    if on_gpu:
        # Copies read on the host clock are records of the DMA itself (CUPTI's memcpy records): the DMA is
        # their own time, the staging what the recorder read around them (``cupti.batches.staging_ns``);
        # copies timed by events stay empty until a calibration splits them (``profiler.timeline.split``).
        out["dma_ms"] = np.where(copies_host, gsum, np.nan)
        stage = raw.get("stage_gsum")
        out["hidden_stage_ms"] = (
            np.where(copies_host, np.asarray(stage, dtype=float), np.nan) if stage is not None else np.full(n, np.nan)
        )
    else:
        out["dma_ms"] = out["hidden_stage_ms"] = np.full(n, np.nan)
    _interval(out, "cpu_work", f["cpu_s"], f["cpu_e"], summed["cpu_sum"])
    _interval(out, "compute", comp_s, comp_e, comp_ms)
    _wait(out, f, summed["call_sum"], sync, h2d_e)
    ov_s, ov_e = np.fmax(h2d_s, f["cpu_s"]), np.fmin(h2d_e, f["cpu_e"])
    has = ~np.isnan(h2d_s) & ~np.isnan(f["cpu_s"])
    overlap = np.where(has, np.clip(ov_e - ov_s, 0.0, None), np.nan)
    positive = has & (overlap > 0)
    out["overlap_start_ms"], out["overlap_end_ms"] = np.where(positive, ov_s, np.nan), np.where(positive, ov_e, np.nan)
    out["overlap_ms"] = overlap
    out["gpu_idle_ms"] = gpu_idle(h2d_s, h2d_e, comp_e) if on_gpu else np.full(n, np.nan)
    _interval(out, "batch", f["batch_s"], f["batch_e"])
    out["pinprof_ms"] = summed["own_sum"]
    if pauses is None:
        out["gc_ms"] = out["gc_fetch_ms"] = np.full(n, np.nan)
    else:  # on the pauses' clock: the raw bounds, not the timeline's ms from t0
        raw_ms = {k: np.asarray(raw[k], dtype=float) for k in ("batch_s", "batch_e", "fetch_s", "fetch_e")}
        out["gc_ms"] = within(raw_ms["batch_s"], raw_ms["batch_e"], pauses)
        # fetch_s may lie before batch_s (a batch fetched ahead): its next() is its own all the same
        out["gc_fetch_ms"] = np.nan_to_num(within(raw_ms["fetch_s"], raw_ms["fetch_e"], pauses))
        # A full collection that ran inside pinprof's hooks is in their timers, and in gc_ms, its own
        # phase (rules.pace.GC_PAUSES): taken out of pinprof_ms, where it read pinprof's cost 16 times
        # too high (one 255 ms collection in 76 batches of resnet50 on the H200: mean 3.671 ms a batch,
        # median 0.21). Told by size: pinprof's own time otherwise is a fraction of a millisecond, so
        # it holds the collection and little else only if the collection ran inside it; one in the
        # user's code, or beside a long time of pinprof's own, is left where it is (never hidden).
        own, gc_in = out["pinprof_ms"], out["gc_ms"]
        inside = (gc_in > 0) & (own >= gc_in) & (own - gc_in < 0.5 * gc_in)
        out["pinprof_ms"] = np.where(inside, own - gc_in, own)
    columns = {
        **{k: static.get(k) for k in ("run", "scenario", "mode")},
        "batch": raw["batch"],
        "epoch": raw["epoch"] if "epoch" in raw else np.zeros(n, dtype=np.int64),
        "warmup": raw["warmup"],
        **{k: static.get(k, d) for k, d in (("rank", 0), ("local_rank", 0), ("world_size", 1))},
        "bytes": raw["bytes"],
        "copies": raw["copies"],
        "src_memory": raw["src_memory"],
        "gpu_clock": _clock_names(on_host, "events" if clock is not None else "none"),
        **out,
        **{k: static.get(k) for k in CONFIG},
        "pin_faults": pin["pin_faults"],  # float with NaN: _typed makes them Int64
        "pin_allocs": pin["pin_allocs"],
        # CUPTI's rows only: an events row's field stays NaN (empty)
        "kernels": np.asarray(raw["comp_kernels"], dtype=float),
    }
    return conform(pd.DataFrame(_typed(columns, n), index=pd.RangeIndex(n)))


def _typed(columns: Mapping[str, Any], n: int) -> dict[str, Any]:
    """Each column as an array of its schema dtype (a constant repeated ``n`` times). Built typed, the
    frame needs no cast afterwards: ``astype`` of its 11 columns of other dtypes took most of a journal
    append's build, with Python's lock held while the loop waits (``scripts/bench_append.py`` on the
    2-core machine, with ``conform``'s one read of the dtypes: 10 rows built in 7.4 ms against 17.1)."""
    out: dict[str, Any] = {}
    for col, values in columns.items():
        dtype = SCHEMA.get(col, "float64")
        if dtype == "float64":
            out[col] = values  # float arrays already, or a constant pandas spreads
            continue
        if values is None or np.isscalar(values):  # not np.ndim: it would copy a raw list into an array
            values = [values] * n
        out[col] = np.asarray(values, dtype=dtype) if dtype in ("int64", "bool") else pd.array(values, dtype=dtype)
    return out


def _wait(
    out: dict[str, Any], f: dict[str, np.ndarray], call_sum: np.ndarray, sync: np.ndarray, h2d_e: np.ndarray
) -> None:
    """``wait``: a blocking copy's time inside its calls (summed over the batch's copies); an
    asynchronous one's from when the consumer asked for the data until the copy ended."""
    request = np.where(np.isnan(f["request"]), f["batch_e"], f["request"])
    wait_s = np.where(sync, f["call_s"], request)
    wait_e = np.where(sync, f["call_e"], np.fmax(request, h2d_e))
    no_copy = np.isnan(f["call_s"])
    wait_ms = np.where(sync, call_sum, wait_e - wait_s)
    _interval(out, "wait", np.where(no_copy, np.nan, wait_s), np.where(no_copy, np.nan, wait_e), wait_ms)


def _interval(
    out: dict[str, Any], phase: str, start: np.ndarray, end: np.ndarray, duration: np.ndarray | None = None
) -> None:
    out[f"{phase}_start_ms"], out[f"{phase}_end_ms"] = start, end
    out[f"{phase}_ms"] = end - start if duration is None else np.where(np.isnan(start), np.nan, duration)


def _clock_names(on_host: np.ndarray, otherwise: str) -> np.ndarray:
    """Each row's ``gpu_clock`` from its raw ``on_host`` (``CLOCK_NAMES``), ``otherwise`` where none of
    its fields are host ms."""
    names = np.full(len(on_host), otherwise, dtype=object)
    for code, name in CLOCK_NAMES.items():
        names[on_host == code] = name
    return names
