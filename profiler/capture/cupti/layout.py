"""CUPTI activity records as bytes, parsed into numpy columns.

CUPTI fills buffers we hand it with records packed one after another, each a C struct that starts
with its kind (``CUpti_ActivityKind``, a uint32). pinprof enables two kinds and reads a few fields of
each, at offsets that have not moved since CUDA 11 (``CUpti_ActivityKernel4..10``,
``CUpti_ActivityMemcpy5..6``; checked against cupti-python 13.0's ``activity_kernel10_dtype`` and
``activity_memcpy6_dtype``). A record's size depends on the CUPTI version, so it is learned from the
buffer itself (``cuptiActivityGetNextRecord``: the distance to the next record) the first time a kind
is met, and then reused.

A buffer is read run by run: a run is a stretch of records of one kind, checked with one strided
numpy view, and its fields are read through one structured dtype; nothing is done per record in
Python. Columns (numpy arrays, one entry per record, times in ns on CUPTI's clock):

KERNEL (``CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL``)
    start, end (int64: the kernel on the device), queued (int64: when the launch was queued, on the
    host, so the host time of the launch; 0 when CUPTI could not take it), stream (int64),
    correlation (int64)
MEMCPY (``CUPTI_ACTIVITY_KIND_MEMCPY``, host-to-device copies only)
    start, end (int64: the copy on the device), bytes (int64), src_kind (int64: CUPTI's
    ``CUpti_ActivityMemoryKind``: 1 pageable, 2 pinned, 3 device, 5 managed), stream, correlation
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import numpy as np

KIND_MEMCPY: Final = 1
KIND_CONCURRENT_KERNEL: Final = 10
COPY_HTOD: Final = 1
MEMORY_KINDS: Final = {1: "pageable", 2: "pinned", 3: "device", 5: "managed"}

# (name, numpy format, byte offset) of the fields pinprof reads, by record kind.
FIELDS: Final[dict[int, tuple[tuple[str, str, int], ...]]] = {
    KIND_CONCURRENT_KERNEL: (
        ("kind", "<u4", 0),
        ("start", "<u8", 16),
        ("end", "<u8", 24),
        ("stream", "<u4", 48),
        ("correlation", "<u4", 92),
        ("queued", "<u8", 120),
    ),
    KIND_MEMCPY: (
        ("kind", "<u4", 0),
        ("copy_kind", "u1", 4),
        ("src_kind", "u1", 5),
        ("bytes", "<u8", 8),
        ("start", "<u8", 16),
        ("end", "<u8", 24),
        ("stream", "<u4", 40),
        ("correlation", "<u4", 44),
    ),
}
# The smallest record size each kind can have (its last field read ends there).
MIN_SIZE: Final = {KIND_CONCURRENT_KERNEL: 136, KIND_MEMCPY: 48}
COLUMNS: Final = {
    KIND_CONCURRENT_KERNEL: ("start", "end", "queued", "stream", "correlation"),
    KIND_MEMCPY: ("start", "end", "bytes", "src_kind", "stream", "correlation"),
}
# CUPTI_TIMESTAMP_UNKNOWN is 0; a queued time is kept only when known.


class LayoutError(RuntimeError):
    """A buffer pinprof cannot read: a kind it did not enable, or a record size it cannot place."""


def dtype_of(kind: int, size: int) -> np.dtype:
    names, formats, offsets = zip(*FIELDS[kind])
    return np.dtype({"names": list(names), "formats": list(formats), "offsets": list(offsets), "itemsize": size})


def empty(kind: int) -> dict[str, np.ndarray]:
    return {c: np.empty(0, dtype=np.int64) for c in COLUMNS[kind]}


# The size of the record at a byte offset, asked of CUPTI when a kind's size is not known yet.
SizeOf = Callable[[int], int]


def runs(buf: bytes, sizes: dict[int, int], size_at: SizeOf | None) -> list[tuple[int, int, int]]:
    """(kind, byte offset, count) of each run of records of one kind in ``buf``.

    ``sizes`` holds the record size of each kind met so far and is filled in from ``size_at`` the first
    time a kind is met (a kind of unknown size with no ``size_at`` raises ``LayoutError``)."""
    n = len(buf)
    if n % 4:
        raise LayoutError(f"an activity buffer of {n} bytes is not a whole number of 32-bit words")
    words = np.frombuffer(buf, dtype="<u4")
    out: list[tuple[int, int, int]] = []
    off = 0
    while off < n:
        kind = int(words[off // 4])
        size = sizes.get(kind)
        if size is None:
            if kind not in FIELDS:
                raise LayoutError(
                    f"activity record of kind {kind} at byte {off}: pinprof enabled only kinds {sorted(FIELDS)}"
                )
            if size_at is None:
                raise LayoutError(f"activity record of kind {kind}: its size is not known")
            size = size_at(off)
            if size < MIN_SIZE[kind] or size % 8:
                raise LayoutError(
                    f"activity record of kind {kind} measured {size} bytes; expected a multiple of 8, at least {MIN_SIZE[kind]}"
                )
            sizes[kind] = size
        room = (n - off) // size  # records of this size that fit in the rest of the buffer
        if room == 0:
            raise LayoutError(f"activity record of kind {kind} at byte {off} runs past the buffer's end ({n} bytes)")
        step, first = size // 4, off // 4
        count, probe = room, 16
        while True:  # the run's length, looked at in growing strides (a run of 1 costs one small view)
            look = min(probe, room)
            kinds = words[first : first + look * step : step]
            other = np.flatnonzero(kinds != kind)
            if other.size:
                count = int(other[0])
                break
            if look == room:
                break
            probe *= 8
        out.append((kind, off, count))
        off += count * size
    return out


def parse(buf: bytes, sizes: dict[int, int], size_at: SizeOf | None = None) -> dict[int, dict[str, np.ndarray]]:
    """Every record of ``buf`` as columns (see the module docstring), by kind; copies other than
    host-to-device are dropped here."""
    parts: dict[int, list[np.ndarray]] = {k: [] for k in FIELDS}
    for kind, off, count in runs(buf, sizes, size_at):
        parts[kind].append(np.ndarray((count,), dtype=dtype_of(kind, sizes[kind]), buffer=buf, offset=off))
    out: dict[int, dict[str, np.ndarray]] = {}
    for kind, chunks in parts.items():
        if not chunks:
            out[kind] = empty(kind)
            continue
        rec = np.concatenate(chunks) if len(chunks) > 1 else chunks[0]
        if kind == KIND_MEMCPY:
            rec = rec[rec["copy_kind"] == COPY_HTOD]
        out[kind] = {c: rec[c].astype(np.int64) for c in COLUMNS[kind]}
    return out


def concat(chunks: list[dict[str, np.ndarray]], kind: int) -> dict[str, np.ndarray]:
    """Columns of several parses of one kind, end to end."""
    chunks = [c for c in chunks if len(c["start"])]
    if not chunks:
        return empty(kind)
    if len(chunks) == 1:
        return chunks[0]
    return {c: np.concatenate([ch[c] for ch in chunks]) for c in COLUMNS[kind]}


def take(cols: dict[str, np.ndarray], keep: np.ndarray) -> dict[str, np.ndarray]:
    """The records where ``keep`` (a boolean mask or indices) says."""
    return {c: v[keep] for c, v in cols.items()}
