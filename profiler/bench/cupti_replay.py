"""A recording of CUPTI's buffers (``scripts/record_cupti.py``, ``scripts/record_script.py``; kept small
under ``tests/data/h200_*/recording.npz``) replayed through the recorder's ``Records`` on any machine:
the parsing and attribution the recorder's thread runs, on real H200 records, with no GPU.

A recording holds the raw activity buffers end to end (``buffer_bytes``, ``buffer_lengths``) and a
JSON ``meta``: each kind's record size (``sizes``), the clock pair each buffer was put on the host
clock with (``clocks``: ``host_ns``, ``cupti``, ``rate``) and every batch as the loop handed it over
(``batches``: ``loop``, ``row``, ``calls``, ``windows``, ``end_ns``); where markers placed the kernels
(``profiler.capture.clocks.cupti.marker``), their stream's CUPTI id (``marker_stream``) and each marker as
issued (``markers``: host ns, bytes).
"""

from __future__ import annotations

import functools
import itertools
import json
import struct
from pathlib import Path
from typing import Any

import numpy as np

from profiler.bench import corr_order
from profiler.capture.clocks.cupti import layout
from profiler.capture.clocks.cupti.batches import Pending, Stats
from profiler.capture.clocks.cupti.marker import SIZES as MARKER_SIZES
from profiler.capture.clocks.cupti.records import LAG_NS, Records
from profiler.capture.store import TEMPLATE, Store


def load(path: Path) -> tuple[list[bytes], dict[str, Any]]:
    """(the recording's buffers in the order CUPTI handed them back, its ``meta``)."""
    rec = np.load(path)
    meta = json.loads(str(rec["meta"]))
    raw = rec["buffer_bytes"].tobytes()
    bounds = np.concatenate(([0], np.cumsum(rec["buffer_lengths"])))
    return [raw[a:b] for a, b in itertools.pairwise(bounds)], meta


def to_host(v: np.ndarray, p: int, c: int, rate: float) -> np.ndarray:
    """CUPTI's times onto the host clock by the pair (host ``p``, CUPTI ``c``) and ``rate`` a buffer had."""
    return p + np.round((v - c) / rate).astype(np.int64)


def kernel_launches(buffers: list[bytes], meta: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """(launch times on the host clock, ns; correlation ids) of a recording's kernels whose launch time
    is known, sorted by correlation id."""
    sizes = {int(k): v for k, v in meta["sizes"].items()}
    queued, corr = [], []
    for raw, c in zip(buffers, meta["clocks"]):
        k = layout.parse(raw, dict(sizes))[layout.KIND_CONCURRENT_KERNEL]
        known = k["queued"] > 0
        queued.append(to_host(k["queued"][known], c["host_ns"], c["cupti"], c["rate"]))
        corr.append(k["correlation"][known].astype(np.int64))
    q, cid = np.concatenate(queued), np.concatenate(corr)
    order = np.argsort(cid, kind="stable")
    return q[order], cid[order]


# The H200's CUPTI 13.0 record sizes (tests/data/h200_thread_queues meta.json), for records made up.
SIZES = {layout.KIND_CONCURRENT_KERNEL: 216, layout.KIND_MEMCPY: 96}


def kernel_record(start: int, end: int, queued: int, corr: int, stream: int = 7, block_x: int = 128) -> bytes:
    """A made-up kernel record as CUPTI lays it out (``layout.FIELDS``): on the device from ``start``
    to ``end``, its launch queued at ``queued`` (ns), correlation id ``corr``, on ``stream``, with
    ``block_x`` threads a block."""
    b = bytearray(SIZES[layout.KIND_CONCURRENT_KERNEL])
    struct.pack_into("<I", b, 0, layout.KIND_CONCURRENT_KERNEL)
    struct.pack_into("<QQ", b, 16, start, end)
    struct.pack_into("<I", b, 48, stream)
    struct.pack_into("<I", b, 64, block_x)
    struct.pack_into("<I", b, 92, corr)
    struct.pack_into("<Q", b, 120, queued)
    return bytes(b)


def memcpy_record(start: int, end: int, nbytes: int, src: int, corr: int, copy_kind: int = 1, stream: int = 7) -> bytes:
    """A made-up copy record: ``nbytes`` from memory kind ``src`` (``layout.MEMORY_KINDS``), a
    host-to-device copy unless ``copy_kind`` says otherwise, on ``stream``."""
    b = bytearray(SIZES[layout.KIND_MEMCPY])
    struct.pack_into("<IBBB", b, 0, layout.KIND_MEMCPY, copy_kind, src, 3)
    struct.pack_into("<QQQ", b, 8, nbytes, start, end)
    struct.pack_into("<II", b, 40, stream, corr)
    return bytes(b)


def waiting_rows(n: int, store: Store | None = None) -> Store:
    """``store`` (a new one if None) grown to ``n`` empty rows, each waiting for CUPTI's records."""
    store = Store() if store is None else store
    while len(store) < n:
        row = dict(TEMPLATE)
        row["batch"] = len(store)
        store.wait_for_gpu(store.append(row))
    return store


def hand_over(records: Records, store: Store, b: dict[str, Any], steps: bool = True) -> None:
    """Recorded batch ``b`` handed to ``records`` as the loop hands it over, its row in ``store``;
    ``steps`` False: as the copies clock hands it (no step windows: CUDA events time its step)."""
    waiting_rows(b["row"] + 1, store)
    calls = [(s, e, tuple(tuple(x) for x in exp)) for s, e, exp in b["calls"]]
    windows = [tuple(w) for w in b["windows"]] if steps else None
    records.incoming.append(Pending(store, b["row"], calls, windows, b["end_ns"]))


def replay_live(buffers: list[bytes], meta: dict[str, Any]) -> tuple[Store, Stats, list[dict[str, Any]], list[int]]:
    """A recording of one loop (``load``) through ``Records`` in the order the recorder met it: each batch
    handed over once it ended, before the first buffer taken after that; every buffer attributed as it
    came. Returns the rows, the recorder's counts, the recorded batches, and each buffer's last launch
    (host ns; rows whose step ended before the earliest have every record of the recording; without
    launch times, the last kernel's start less ``LAG_NS``)."""
    sizes = {int(k): v for k, v in meta["sizes"].items()}
    stats = Stats()
    records = Records(stats)
    store = Store()
    batches = meta["batches"]
    markers = meta.get("markers") or []
    if meta.get("marker_stream") is not None:
        records.marked, records.marker_stream = True, int(meta["marker_stream"])
    given = issued = 0
    taken: list[int] = []
    for raw, clock in zip(buffers, meta["clocks"]):
        while issued < len(markers) and markers[issued][0] < clock["host_ns"]:
            records.issued.append((int(markers[issued][0]), int(markers[issued][1])))
            issued += 1
        while given < len(batches) and batches[given]["end_ns"] < clock["host_ns"]:
            hand_over(records, store, batches[given])
            given += 1
        p, c, rate = clock["host_ns"], clock["cupti"], clock["rate"]
        parsed = layout.parse(raw, dict(sizes))
        ker = parsed[layout.KIND_CONCURRENT_KERNEL]
        if len(ker["queued"]) and ker["queued"].max() > 0:
            taken.append(p + round((int(ker["queued"].max()) - c) / rate))
        elif len(ker["start"]):  # no launch times (markers): the last start, less the lag a launch may have
            taken.append(p + round((int(ker["start"].max()) - c) / rate) - LAG_NS)
        records.take(parsed, functools.partial(to_host, p=p, c=c, rate=rate))
        records.process(force=False)
    records.issued.extend((int(h), int(n)) for h, n in markers[issued:])
    while given < len(batches):
        hand_over(records, store, batches[given])
        given += 1
    records.process(force=True)
    return store, stats, batches, taken


MARKER_STREAM = 99  # the made-up marker stream's CUPTI id (``with_markers``)
_SPREAD = 1024  # ids are multiplied by this, leaving room for markers between two recorded ids


def with_markers(
    buffers: list[bytes], meta: dict[str, Any], edges_ns: list[int], kind: str = "kernel"
) -> tuple[list[bytes], dict[str, Any]]:
    """A recording made with launch times, as markers (``profiler.capture.clocks.cupti.marker``) would have
    made it: kernels' launch times cleared, every correlation id multiplied by ``_SPREAD``, and a marker
    at each host time of ``edges_ns`` (an empty kernel of 1, 2, ... threads, or a copy of 1, 2, ...
    bytes, as ``kind`` says; stream ``MARKER_STREAM``, numbered just after every kernel launched by
    then), in the first buffer handed back after it. Kernels launched at an edge count as before it;
    those of unknown launch time are left where they are."""
    sizes = {int(k): v for k, v in meta["sizes"].items()}
    edges = sorted(set(int(e) for e in edges_ns))
    # the id just above every kernel launched by each edge, plus a half (-0.5 before any)
    above = corr_order.markers(*kernel_launches(buffers, meta), np.array(edges, dtype=float))
    marks: list[tuple[int, int, int]] = []  # host ns, correlation id, bytes
    taken: dict[int, int] = {}
    for n, (t, a) in enumerate(zip(edges, above.tolist())):
        base = round(a - 0.5) * _SPREAD if a > 0 else 0
        k = taken.get(base, 0) + 1  # several edges with no launch between: numbered in turn
        if k >= _SPREAD:
            raise ValueError(f"more than {_SPREAD - 1} edges between two launches at {t}")
        taken[base] = k
        marks.append((t, base + k, 1 + n % MARKER_SIZES))
    out: list[bytes] = []
    m = 0
    clocks = meta["clocks"]
    for raw, clock in zip(buffers, clocks):
        b = bytearray(raw)
        pos = 0
        while pos < len(b):
            rkind = struct.unpack_from("<I", b, pos)[0]
            if rkind == layout.KIND_CONCURRENT_KERNEL:
                struct.pack_into("<I", b, pos + 92, struct.unpack_from("<I", b, pos + 92)[0] * _SPREAD)
                struct.pack_into("<Q", b, pos + 120, 0)
            elif rkind == layout.KIND_MEMCPY:
                struct.pack_into("<I", b, pos + 44, struct.unpack_from("<I", b, pos + 44)[0] * _SPREAD)
            pos += sizes[rkind]
        p, c, rate = clock["host_ns"], clock["cupti"], clock["rate"]
        while m < len(marks) and marks[m][0] < p:
            t, cid, nbytes = marks[m]
            at = c + round((t - p) * rate)  # on this buffer's CUPTI clock
            if kind == "kernel":
                b += kernel_record(at, at + 1000, 0, cid, stream=MARKER_STREAM, block_x=nbytes)
            else:
                b += memcpy_record(at, at + 1000, nbytes, 2, cid, stream=MARKER_STREAM)
            m += 1
        out.append(bytes(b))
    new = dict(meta)
    new["marker_stream"] = MARKER_STREAM
    new["markers"] = [[t, nbytes] for t, _, nbytes in marks]  # those after the last buffer: never delivered
    return out, new
