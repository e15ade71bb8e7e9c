"""A recording of CUPTI's buffers (``scripts/record_cupti.py``, ``scripts/record_script.py``; kept small
under ``tests/data/h200_*/recording.npz``) replayed through the recorder's ``Records`` on any machine:
the parsing and attribution the recorder's thread runs, on real H200 records, with no GPU.

A recording holds the raw activity buffers end to end (``buffer_bytes``, ``buffer_lengths``) and a
JSON ``meta``: each kind's record size (``sizes``), the clock pair each buffer was put on the host
clock with (``clocks``: ``host_ns``, ``cupti``, ``rate``) and every batch as the loop handed it over
(``batches``: ``loop``, ``row``, ``calls``, ``windows``, ``end_ns``).
"""

from __future__ import annotations

import functools
import itertools
import json
import struct
from pathlib import Path
from typing import Any

import numpy as np

from profiler.capture.cupti import layout
from profiler.capture.cupti.recorder import Pending, Records, Stats
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


def kernel_record(start: int, end: int, queued: int, corr: int) -> bytes:
    """A made-up kernel record as CUPTI lays it out (``layout.FIELDS``): on the device from ``start``
    to ``end``, its launch queued at ``queued`` (ns), correlation id ``corr``, stream 7."""
    b = bytearray(SIZES[layout.KIND_CONCURRENT_KERNEL])
    struct.pack_into("<I", b, 0, layout.KIND_CONCURRENT_KERNEL)
    struct.pack_into("<QQ", b, 16, start, end)
    struct.pack_into("<I", b, 48, 7)
    struct.pack_into("<I", b, 92, corr)
    struct.pack_into("<Q", b, 120, queued)
    return bytes(b)


def memcpy_record(start: int, end: int, nbytes: int, src: int, corr: int, copy_kind: int = 1) -> bytes:
    """A made-up copy record: ``nbytes`` from memory kind ``src`` (``layout.MEMORY_KINDS``), a
    host-to-device copy unless ``copy_kind`` says otherwise, stream 7."""
    b = bytearray(SIZES[layout.KIND_MEMCPY])
    struct.pack_into("<IBBB", b, 0, layout.KIND_MEMCPY, copy_kind, src, 3)
    struct.pack_into("<QQQ", b, 8, nbytes, start, end)
    struct.pack_into("<II", b, 40, 7, corr)
    return bytes(b)


def hand_over(records: Records, store: Store, b: dict[str, Any]) -> None:
    """Recorded batch ``b`` handed to ``records`` as the loop hands it over, its row in ``store``."""
    while len(store) <= b["row"]:
        row = dict(TEMPLATE)
        row["batch"] = len(store)
        store.append(row)
    store.wait_for_gpu(b["row"])
    calls = [(s, e, tuple(tuple(x) for x in exp)) for s, e, exp in b["calls"]]
    records.incoming.append(Pending(store, b["row"], calls, [tuple(w) for w in b["windows"]], b["end_ns"]))


def replay_live(buffers: list[bytes], meta: dict[str, Any]) -> tuple[Store, Stats, list[dict[str, Any]], list[int]]:
    """A recording of one loop (``load``) through ``Records`` in the order the recorder met it: each batch
    handed over once it ended, before the first buffer taken after that; every buffer attributed as it
    came. Returns the rows, the recorder's counts, the recorded batches, and each buffer's last launch
    (host ns; rows whose step ended before the earliest have every record of the recording)."""
    sizes = {int(k): v for k, v in meta["sizes"].items()}
    stats = Stats()
    records = Records(stats)
    store = Store()
    batches = meta["batches"]
    given = 0
    taken: list[int] = []
    for raw, clock in zip(buffers, meta["clocks"]):
        while given < len(batches) and batches[given]["end_ns"] < clock["host_ns"]:
            hand_over(records, store, batches[given])
            given += 1
        p, c, rate = clock["host_ns"], clock["cupti"], clock["rate"]
        parsed = layout.parse(raw, dict(sizes))
        queued = parsed[layout.KIND_CONCURRENT_KERNEL]["queued"]
        if len(queued):
            taken.append(p + round((int(queued.max()) - c) / rate))
        records.take(parsed, functools.partial(to_host, p=p, c=c, rate=rate))
        records.process(force=False)
    while given < len(batches):
        hand_over(records, store, batches[given])
        given += 1
    records.process(force=True)
    return store, stats, batches, taken
