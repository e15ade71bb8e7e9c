"""The recorder's per-batch raw fields, kept compact so that long runs stay small in memory."""

from __future__ import annotations

import threading
from array import array
from collections import deque
from operator import itemgetter
from typing import Any

import numpy as np

from profiler.timeline.schema import ALL_ON_HOST, COPIES_ON_HOST, RAW_GPU, RAW_HOST, RAW_PIN

NAN = float("nan")

NUMERIC = (
    "batch",
    "epoch",
    "bytes",
    "copies",
    "warmup",
    "copy_sync",
    *RAW_HOST,
    *RAW_PIN,
)  # stored as float64 (exact below 2**53)
HOST_FIELDS = (*NUMERIC, "src_memory")
TEMPLATE: dict[str, Any] = {
    **{k: NAN for k in RAW_HOST},
    **{k: NAN for k in RAW_PIN},
    "epoch": 0,
    "bytes": -1,
    "copies": 0,
    "warmup": False,
    "copy_sync": False,
    "src_memory": "",
}
_numeric_row = itemgetter(*NUMERIC)


def note_memory(rec: dict[str, Any], kind: str, out: Any) -> Any:
    """``src_memory`` of a batch: its ``to_device`` call's kind, or ``mixed`` when its calls read
    different kinds; returns ``out`` (the call's result) for the caller's convenience."""
    prev = rec["src_memory"]
    rec["src_memory"] = kind if not prev or prev == kind else "mixed"
    return out


_H, _G = len(NUMERIC), len(RAW_GPU)
_GPU_NAN = (NAN,) * _G
_GS, _GE, _CS, _CE, _GSUM, _CSUM, _ON_HOST, _CK, _SSUM = (RAW_GPU.index(k) for k in RAW_GPU)


# Rows kept as their records until written into the arrays: past this many, ``append`` writes them
# itself. A record is a dict of about 60 fields (about 3 KB with its floats), so this bounds them to a
# few MB.
FOLD_AT = 1024


class Store:
    """Per-batch raw fields in flat typed arrays: a run grew by 343 bytes a batch (python
    scripts/bench_memory.py, 100,000 batches, the 2-core CPU machine).

    ``append`` is called once a batch, from the loop's thread: it numbers the record and queues it.
    Writing the record's fields into the arrays (``_fold``: one ``array.extend`` of the numeric fields,
    one of NaN GPU fields, one list append of the memory kind) is left to whoever reads the store next:
    the journal's thread, CUPTI's, the events' read every few batches, the timeline at the end, or
    ``append`` itself every ``FOLD_AT`` rows. Beside a real step, the record is out of the caches by the
    time its row closes, and reading its fields there was the costliest part of the loop's thread's
    work on a row (``scripts/hook_parts.py``, part ``_commit``). GPU
    fields are filled in place when their events complete (``set_gpu``) or CUPTI's records are
    attributed (``set_cupti``).
    """

    def __init__(self) -> None:
        self._host = array("d")
        self._gpu = array("d")
        self._kinds: list[str] = []
        self._waiting: deque[int] = deque()  # rows whose CUPTI records are not attributed yet, in order
        self._queued: deque[tuple[int, dict[str, Any]]] = deque()  # (row, record) not yet in the arrays
        self._rows = 0  # rows numbered by append, in the arrays or queued
        # The journal's thread reads the arrays while the loop appends: a numpy view of an array that
        # is growing would make the append fail (an exporting array cannot resize).
        self._lock = threading.Lock()

    def append(self, rec: dict[str, Any]) -> int:
        """Keep one batch's record (``rec`` is not changed after); returns its row number."""
        with self._lock:  # no fold between the number and the queue
            queued, n = self._queued, self._rows
            # A signal (Ctrl-C, SIGTERM, caught by the script) between the queueing and the count below
            # left the last record numbered ``_rows``: the next number follows it, as rows stay aligned.
            if queued and queued[-1][0] >= n:
                n = queued[-1][0] + 1
            elif len(self._kinds) > n:
                n = len(self._kinds)
            queued.append((n, rec))
            self._rows = n + 1
            if len(queued) >= FOLD_AT:
                self._fold_locked()
        return n

    def _fold(self) -> None:
        """Write every queued record into the arrays, in row order."""
        if not self._queued:
            return
        with self._lock:
            self._fold_locked()

    def _fold_locked(self) -> None:
        queued = self._queued
        while queued:
            n, rec = queued[0]
            done = len(self._kinds)
            if n < done:  # written before a signal cut this loop short, between the row and the pop
                queued.popleft()
                continue
            if len(self._host) != done * _H or len(self._gpu) != done * _G:
                self._cut(done)  # a row torn by a signal (Ctrl-C, SIGTERM) and then caught: written again
            self._host.extend(_numeric_row(rec))
            self._gpu.extend(_GPU_NAN)
            self._kinds.append(rec["src_memory"])  # last: a row counts once this is done
            queued.popleft()

    def set_gpu(self, row: int, field: int, value: float) -> None:
        """GPU field ``RAW_GPU[field]`` of ``row``, in ms since the first anchor."""
        if row >= len(self._kinds):
            self._fold()
        self._gpu[row * _G + field] = value

    def wait_for_gpu(self, row: int) -> None:
        """``row``'s GPU fields will come from CUPTI (``profiler.capture.clocks.cupti.recorder``)."""
        self._waiting.append(row)

    def set_cupti(
        self,
        row: int,
        h2d: tuple[float, ...] | None,
        src: str | None,
        comp: tuple[float, float, float, int] | None,
    ) -> None:
        """``row``'s GPU fields from CUPTI's records, host ms: the copies' (first start, last end, summed
        time, and the driver's staging of the pageable ones where it was read), the DMA's source memory
        as CUPTI names it, the step's kernels' (first start, last end, busy time, how many); NaN stays
        for what no record showed. ``comp`` None: CUDA events time the step (``set_gpu``), and the row's
        ``on_host`` says its copies' fields alone are host ms. Called in row order."""
        if row >= len(self._kinds):
            self._fold()
        base = row * _G
        gpu = self._gpu
        if len(gpu) < base + _G:
            return  # a row torn by a signal, dropped since
        if h2d is not None:
            gpu[base + _GS], gpu[base + _GE], gpu[base + _GSUM] = h2d[:3]
            if len(h2d) > 3:
                gpu[base + _SSUM] = h2d[3]
        if comp is None:
            gpu[base + _ON_HOST] = COPIES_ON_HOST
        else:
            gpu[base + _CS], gpu[base + _CE], gpu[base + _CSUM], gpu[base + _CK] = comp
            gpu[base + _ON_HOST] = ALL_ON_HOST
        if src is not None and row < len(self._kinds):
            self._kinds[row] = src
        waiting = self._waiting
        while waiting and waiting[0] <= row:
            waiting.popleft()

    def add_cupti(
        self,
        row: int,
        h2d: tuple[float, float, float] | None,
        src: str | None,
        comp: tuple[float, float, float, int] | None,
    ) -> None:
        """Records that came after ``row`` was written (``set_cupti``), added to it: first starts and
        last ends widened, summed and busy times added (a late record is another thread's, run
        between the others on the stream, not beside them), a second memory kind made ``mixed``.
        The journal keeps the row as first written: only the timeline at the end has what came late."""
        if row >= len(self._kinds):
            self._fold()
        base = row * _G
        gpu = self._gpu
        if len(gpu) < base + _G:
            return
        first_copy = gpu[base + _GSUM] != gpu[base + _GSUM]  # NaN: no copy record was set before
        if comp is not None:
            kernels = gpu[base + _CK]
            gpu[base + _CK] = comp[3] if kernels != kernels else kernels + comp[3]
        for got, (i_s, i_e, i_sum) in ((h2d, (_GS, _GE, _GSUM)), (comp, (_CS, _CE, _CSUM))):
            if got is None:
                continue
            s, e, total = got[:3]
            old_s, old_e, old_sum = gpu[base + i_s], gpu[base + i_e], gpu[base + i_sum]
            gpu[base + i_s] = s if old_s != old_s else min(old_s, s)  # NaN: nothing there yet
            gpu[base + i_e] = e if old_e != old_e else max(old_e, e)
            gpu[base + i_sum] = total if old_sum != old_sum else old_sum + total
        if src is not None and row < len(self._kinds):
            # the kind the host noted stands until CUPTI names one: the first record's kind replaces it
            had = self._kinds[row]
            self._kinds[row] = src if first_copy or had == src else "mixed"

    def first_waiting(self) -> int | None:
        """The first row still waiting for CUPTI's records; None when none is."""
        waiting = self._waiting
        return waiting[0] if waiting else None

    def _cut(self, n: int) -> None:
        del self._host[n * _H :]
        del self._gpu[n * _G :]
        del self._kinds[n:]

    def tail(self, n: int) -> dict[str, np.ndarray]:
        """The numeric host fields of the last ``n`` complete rows (copies: an array that exports its
        buffer cannot grow, so no view outlives this call)."""
        with self._lock:
            self._fold_locked()
            rows = min(len(self._kinds), len(self._host) // _H)
            view = np.frombuffer(self._host, dtype=float, count=rows * _H).reshape(rows, _H)
            host = view[rows - min(n, rows) :].copy()
            del view
        return {k: host[:, j] for j, k in enumerate(NUMERIC)}

    def host_medians(self, n: int) -> dict[str, float]:
        """Median fetch, copy-call and batch times (ms) of the last ``n`` rows; {} before the first."""
        last = self.tail(n)
        if not len(last["batch"]):
            return {}
        spans = {
            "fetch": last["fetch_e"] - last["fetch_s"],
            "copy": last["call_e"] - last["call_s"],
            "batch": last["batch_e"] - last["batch_s"],
        }
        return {k: float(np.nanmedian(v)) if not np.all(np.isnan(v)) else NAN for k, v in spans.items()}

    def __len__(self) -> int:
        """The rows every column holds (a row torn by a signal is not one), queued ones written first."""
        self._fold()
        return self._whole()

    def _whole(self) -> int:
        """The rows written into every array (a row torn by a signal is not one)."""
        return min(len(self._kinds), len(self._host) // _H, len(self._gpu) // _G)

    def columns(self, start: int = 0, stop: int | None = None) -> dict[str, Any]:
        """Every column of rows ``start`` to ``stop`` (default: all), cut to the rows all of them hold.

        A signal runs its handler between any two bytecodes, so it can interrupt ``append`` half way;
        the torn last row is dropped rather than failing the report.
        """
        with self._lock:
            self._fold_locked()
            n = self._whole()
            stop = n if stop is None else min(stop, n)
            start = min(start, stop)
            hview = np.frombuffer(self._host, dtype=float, count=n * _H).reshape(n, _H)
            gview = np.frombuffer(self._gpu, dtype=float, count=n * _G).reshape(n, _G)
            host, gpu = hview[start:stop].copy(), gview[start:stop].copy()
            kinds = self._kinds[start:stop]
            del hview, gview  # no view outlives the lock: the loop's next append may grow the arrays
        out: dict[str, Any] = {k: host[:, j] for j, k in enumerate(NUMERIC)}
        out.update({k: gpu[:, j] for j, k in enumerate(RAW_GPU)})
        out["batch"] = out["batch"].astype(np.int64)
        out["epoch"] = out["epoch"].astype(np.int64)
        out["bytes"] = out["bytes"].astype(np.int64)
        out["copies"] = out["copies"].astype(np.int64)
        out["warmup"] = [bool(v) for v in out["warmup"]]
        out["copy_sync"] = [bool(v) for v in out["copy_sync"]]
        out["src_memory"] = kinds
        return out
