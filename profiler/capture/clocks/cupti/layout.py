"""CUPTI activity records as bytes, parsed into numpy columns.

CUPTI fills buffers we hand it with records packed one after another, each a C struct that starts
with its kind (``CUpti_ActivityKind``, a uint32). pinprof enables two kinds and reads a few fields of
each, at offsets that have not moved since CUDA 11 (``CUpti_ActivityKernel4..10``,
``CUpti_ActivityMemcpy5..6``; checked against cupti-python 13.0's ``activity_kernel10_dtype`` and
``activity_memcpy6_dtype``). A record's size depends on the CUPTI version, so it is learned from the
buffer itself (``cuptiActivityGetNextRecord``: the distance to the next record) the first time a kind
is met, and then reused.

A buffer is walked run by run: a run is a stretch of records of one kind, its first ``SHORT`` records
looked at one by one and the rest of a long one through strided numpy views. Each field is then
gathered from every record of its kind in one numpy read. Columns (numpy arrays, one entry per
record, times in ns on CUPTI's clock):

KERNEL (``CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL``)
    start, end (int64: the kernel on the device), queued (int64: when the launch was queued, on the
    host, so the host time of the launch; 0 when CUPTI could not take it), stream (int64),
    correlation (int64), block_x (int64: threads a block, along x; a marker kernel's sequence)
MEMCPY (``CUPTI_ACTIVITY_KIND_MEMCPY``, host-to-device copies only)
    start, end (int64: the copy on the device), bytes (int64), src_kind (int64: CUPTI's
    ``CUpti_ActivityMemoryKind``: 1 pageable, 2 pinned, 3 device, 5 managed), stream, correlation
"""

from __future__ import annotations

import sys
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
        ("block_x", "<u4", 64),
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
    KIND_CONCURRENT_KERNEL: ("start", "end", "queued", "stream", "correlation", "block_x"),
    KIND_MEMCPY: ("start", "end", "bytes", "src_kind", "stream", "correlation"),
}
# (name, width in bytes, byte offset) of each field ``parse`` reads: the columns, and a copy's kind.
_READS: Final = {
    kind: tuple(
        (name, np.dtype(fmt).itemsize, pos) for name, fmt, pos in fields if name in COLUMNS[kind] or name == "copy_kind"
    )
    for kind, fields in FIELDS.items()
}
# CUPTI_TIMESTAMP_UNKNOWN is 0; a queued time is kept only when known.


class LayoutError(RuntimeError):
    """A buffer pinprof cannot read: a kind it did not enable, or a record size it cannot place."""


def empty(kind: int) -> dict[str, np.ndarray]:
    return {c: np.empty(0, dtype=np.int64) for c in COLUMNS[kind]}


# The size of the record at a byte offset, asked of CUPTI when a kind's size is not known yet.
SizeOf = Callable[[int], int]

# Records of a run looked at one by one before the strided numpy probe takes over: a loop's kernels
# and copies alternate in short runs (three copies, a few kernels), where a numpy call per run costs
# more than the run's records read here (scripts/bench_cupti_parse.py).
SHORT = 8
_LITTLE = sys.byteorder == "little"  # CUPTI's records are the host's; the word view below is native


def runs(buf: bytes, sizes: dict[int, int], size_at: SizeOf | None) -> list[tuple[int, int, int]]:
    """(kind, byte offset, count) of each run of records of one kind in ``buf``.

    ``sizes`` holds the record size of each kind met so far and is filled in from ``size_at`` the first
    time a kind is met (a kind of unknown size with no ``size_at`` raises ``LayoutError``)."""
    n = len(buf)
    if n % 4:
        raise LayoutError(f"an activity buffer of {n} bytes is not a whole number of 32-bit words")
    words = np.frombuffer(buf, dtype="<u4")
    # Word reads one at a time go through a memoryview: a numpy scalar read costs several times more.
    word = memoryview(buf).cast("I") if _LITTLE else words
    out: list[tuple[int, int, int]] = []
    off = 0
    while off < n:
        kind = int(word[off >> 2])
        size = sizes.get(kind)
        if size is None:
            size = _learn(kind, off, sizes, size_at)
        room = (n - off) // size  # records of this size that fit in the rest of the buffer
        if room == 0:
            raise LayoutError(f"activity record of kind {kind} at byte {off} runs past the buffer's end ({n} bytes)")
        step, first = size >> 2, off >> 2
        count, short = 1, min(room, SHORT)
        while count < short and word[first + count * step] == kind:
            count += 1
        if count == SHORT < room:  # a long run: the rest looked at in growing strides
            count = SHORT + _run_length(words, first + SHORT * step, step, room - SHORT, kind)
        out.append((kind, off, count))
        off += count * size
    return out


def _learn(kind: int, off: int, sizes: dict[int, int], size_at: SizeOf | None) -> int:
    """The size of ``kind``'s records, asked of ``size_at`` at byte ``off`` and kept in ``sizes``."""
    if kind not in FIELDS:
        raise LayoutError(f"activity record of kind {kind} at byte {off}: pinprof enabled only kinds {sorted(FIELDS)}")
    if size_at is None:
        raise LayoutError(f"activity record of kind {kind}: its size is not known")
    size = size_at(off)
    if size < MIN_SIZE[kind] or size % 8:
        raise LayoutError(
            f"activity record of kind {kind} measured {size} bytes; expected a multiple of 8, at least {MIN_SIZE[kind]}"
        )
    sizes[kind] = size
    return size


def _run_length(words: np.ndarray, first: int, step: int, room: int, kind: int) -> int:
    """How many of the ``room`` records from word ``first`` on, ``step`` words apart, are of ``kind``
    before another kind: looked at in windows of 64 records, then 512, ... (the H200 short step's
    kernel runs, about 50 records between its copies, take one)."""
    probe = 64
    while True:
        look = min(probe, room)
        other = np.flatnonzero(words[first : first + look * step : step] != kind)
        if other.size:
            return int(other[0])
        if look == room:
            return room
        probe *= 8


def parse(buf: bytes, sizes: dict[int, int], size_at: SizeOf | None = None) -> dict[int, dict[str, np.ndarray]]:
    """Every record of ``buf`` as columns (see the module docstring), by kind; copies other than
    host-to-device are dropped here.

    Each field is gathered from every record of its kind in one read, at the records' byte offsets (a
    structured view per run, then joined, took numpy's slow path for structured dtypes once a run)."""
    found = runs(buf, sizes, size_at)
    n = len(buf)
    views = {
        1: np.frombuffer(buf, dtype="u1"),
        4: np.frombuffer(buf, dtype="<u4"),
        8: np.frombuffer(buf, dtype="<u8", count=n // 8),
    }
    out: dict[int, dict[str, np.ndarray]] = {}
    for kind in FIELDS:
        mine = [(off, count) for k, off, count in found if k == kind]
        if not mine:
            out[kind] = empty(kind)
            continue
        at = _offsets(mine, sizes[kind])
        cols = {name: views[width][(at + pos) // width] for name, width, pos in _READS[kind]}
        keep = cols["copy_kind"] == COPY_HTOD if kind == KIND_MEMCPY else None
        out[kind] = {c: (cols[c] if keep is None else cols[c][keep]).astype(np.int64) for c in COLUMNS[kind]}
    return out


def _offsets(found: list[tuple[int, int]], size: int) -> np.ndarray:
    """The byte offset of every record of runs ``found`` ((offset, count) each) of ``size``-byte records."""
    if len(found) == 1:
        off, count = found[0]
        return off + size * np.arange(count, dtype=np.int64)
    starts, counts = np.array(found, dtype=np.int64).T
    index = np.arange(int(counts.sum()), dtype=np.int64)
    first = np.cumsum(counts) - counts  # each run's first record, among all of this kind
    return np.repeat(starts - size * first, counts) + size * index


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
