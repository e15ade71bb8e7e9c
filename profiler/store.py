"""The recorder's per-batch raw fields, kept compact so that long runs stay small in memory."""
from __future__ import annotations

from array import array
from operator import itemgetter
from typing import Any

from .timeline import RAW_GPU, RAW_HOST

NAN = float("nan")

HOST_FIELDS = ("batch", "bytes", "warmup", "copy_sync", "src_memory") + RAW_HOST
TEMPLATE: dict[str, Any] = {**{k: NAN for k in RAW_HOST}, "bytes": -1, "warmup": False, "copy_sync": False,
                             "src_memory": ""}
_host_row = itemgetter(*HOST_FIELDS)
_FLUSH = 1024


class Store:
    """Per-batch raw fields in compact columns: about 200 bytes a batch (scripts/bench_memory.py).

    Rows arrive as tuples (one C-level itemgetter per batch) and are moved into typed arrays every
    ``_FLUSH`` batches; GPU fields are filled in place when their events complete.
    """

    def __init__(self) -> None:
        self.host: dict[str, Any] = {k: array("d") for k in RAW_HOST}
        self.host.update({"batch": array("q"), "bytes": array("q"), "warmup": array("b"),
                          "copy_sync": array("b"), "src_memory": []})
        self.gpu: dict[str, array[float]] = {k: array("d") for k in RAW_GPU}
        self._rows: list[tuple[Any, ...]] = []

    def append(self, rec: dict[str, Any]) -> int:
        self._rows.append(_host_row(rec))
        if len(self._rows) >= _FLUSH:
            self._flush()
        for col in self.gpu.values():
            col.append(NAN)
        return len(self.gpu["h2d_gs"]) - 1

    def _flush(self) -> None:
        if not self._rows:
            return
        # Idempotent: a flush cut short by a signal is completed by the next one, never duplicated;
        # each column takes only the rows it does not hold yet.
        base = min(len(c) for c in self.host.values())
        for key, values in zip(HOST_FIELDS, zip(*self._rows)):
            col = self.host[key]
            col.extend(values[len(col) - base:])
        self._rows.clear()

    def columns(self) -> dict[str, Any]:
        """Every column cut to the rows all of them hold.

        A signal (Ctrl-C, SIGTERM) runs its handler between any two bytecodes, so it can interrupt
        ``append`` or ``_flush`` half way; the torn last row is dropped rather than failing the report.
        """
        self._flush()
        cols: dict[str, Any] = {**self.host, **self.gpu}
        n = min(len(c) for c in cols.values())
        out = {k: c[:n] for k, c in cols.items()}
        out["warmup"] = [bool(v) for v in out["warmup"]]
        out["copy_sync"] = [bool(v) for v in out["copy_sync"]]
        return out
