"""The markers matched to their records: correlation ids and host times, both rising, as numpy views.

Appended a buffer at a time and dropped from the front as batches age out, so a plain array would be
copied whole at every buffer, a cost that grows with the history kept (30 s of batches). Here an
append copies only what it adds, into room doubled when it runs out. With this and ``Done``'s tuples
(``recorder``), a loop of 30 us batches with two markers each cost the recorder's thread 9.8-10.0 us a
batch in its last buffers, against 32.1-33.9 with a table rebuilt at each append, and 14.2-14.6 against 18.4-20.5
over all (``scripts/bench_marker_table.py``, two runs each, the 2-core machine).
"""

from __future__ import annotations

import numpy as np


class MarkerTable:
    """``corr`` and ``host`` (int64 views, oldest first); ``add`` at the end, ``merge`` among the
    newest, ``drop`` from the front."""

    def __init__(self) -> None:
        self._c = np.empty(1024, dtype=np.int64)
        self._h = np.empty(1024, dtype=np.int64)
        self._a = self._b = 0  # the live part is [_a, _b)

    def __len__(self) -> int:
        return self._b - self._a

    @property
    def corr(self) -> np.ndarray:
        return self._c[self._a : self._b]

    @property
    def host(self) -> np.ndarray:
        return self._h[self._a : self._b]

    def add(self, corr: np.ndarray, host: np.ndarray) -> None:
        k = len(corr)
        if self._b + k > len(self._c):
            live = self._b - self._a
            room = max(2 * (live + k), 1024)
            c, h = np.empty(room, dtype=np.int64), np.empty(room, dtype=np.int64)
            c[:live], h[:live] = self.corr, self.host
            self._c, self._h, self._a, self._b = c, h, 0, live
        self._c[self._b : self._b + k] = corr
        self._h[self._b : self._b + k] = host
        self._b += k

    def drop(self, n: int) -> None:
        """Forget the oldest ``n``."""
        self._a = min(self._a + max(n, 0), self._b)

    def merge(self, corr: np.ndarray, host: np.ndarray) -> None:
        """Entries placed among the table's by ``corr``; the caller keeps ``host`` rising with it. Only
        the entries from the lowest new ``corr`` on are moved: new ones fall among the newest."""
        if not len(corr):
            return
        i = int(np.searchsorted(self.corr, corr.min()))
        c = np.concatenate([self.corr[i:], corr])
        h = np.concatenate([self.host[i:], host])
        order = np.argsort(c, kind="stable")
        self._b = self._a + i
        self.add(c[order], h[order])
