"""CUPTI records to batches: which copy record a copy call made, which kernels a step launched.

numpy only, on times in ns of one host clock (``time.perf_counter_ns``; records already moved onto it):

- **A copy** is one record per tensor copied. Calls and records keep the order they were issued in
  (CUPTI numbers every API call in order: its correlation id), so the calls of the loop are walked in
  order against the records sorted by correlation id; a record is a call's when its bytes are the
  call's and it was issued inside the call. Issue times are bracketed by the kernels around it in
  correlation order, whose launch (``queued``) times are known: a record of another thread or of
  code outside a batch, with the same size, is passed over.
- **A kernel** belongs to the step whose host interval holds its launch time (``queued``): on any
  thread, so backward's kernels, launched from autograd's own thread while the main thread waits in
  ``backward()``, belong to the step that called it. The launch time is CUPTI's
  (``PINPROF_CUPTI_LATENCY=1``) or, by default, the host time of the marker numbered before the
  kernel, plus 1 ns (``Records._launches``), and a copy's bracket is the markers' around it.
- **Per batch**: the copies' first start, last end and summed time; the kernels' first start, last
  end and busy time (the union of their intervals, so kernels that run side by side count once).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

# A call expects one record of any of these sizes (bytes): a tensor's own, or its size in the dtype a
# .to(device, dtype) asked for (torch may convert before or after the copy).
Expect = tuple[int, ...]


def issue_bounds(mem_corr: np.ndarray, ker_corr: np.ndarray, ker_queued: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(earliest, latest) host ns each copy record can have been issued at: after the launch of the
    last kernel numbered before it, before the launch of the first kernel numbered after it
    (-inf / +inf where there is none). ``ker_*`` sorted by correlation, queued 0 (unknown) left out."""
    known = ker_queued > 0
    corr, queued = ker_corr[known], ker_queued[known].astype(float)
    if not len(corr):
        n = len(mem_corr)
        return np.full(n, -np.inf), np.full(n, np.inf)
    # Launches of several threads interleave: the bracket uses the running max before and the running
    # min after, so it never claims a tighter window than the launches show.
    before = np.maximum.accumulate(queued)
    after = np.minimum.accumulate(queued[::-1])[::-1]
    i = np.searchsorted(corr, mem_corr)
    lo = np.where(i > 0, before[np.clip(i - 1, 0, None)], -np.inf)
    hi = np.where(i < len(corr), after[np.clip(i, None, len(corr) - 1)], np.inf)
    return lo, hi


def match_copies(
    calls: Sequence[tuple[int, int, Sequence[Expect]]],
    mem_bytes: np.ndarray,
    mem_start: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    slack_ns: int = 50_000,
) -> list[list[int]]:
    """For each call (host start ns, host end ns, one ``Expect`` per record it should make), the index
    of each matched record (-1: none found), records given in correlation order. A record matches when
    its size is expected, its issue bracket meets the call's interval (``slack_ns`` either side: the
    launch time and the host clock reads are not one instant) and the device did not start it before
    the call. Matching never goes back: a later call's records come after an earlier call's."""
    out: list[list[int]] = []
    j, n = 0, len(mem_bytes)
    # Plain lists: a numpy scalar read in this loop cost about ten times a list's (four per record looked at).
    mem_bytes, mem_start, lo, hi = (np.asarray(a).tolist() for a in (mem_bytes, mem_start, lo, hi))
    for s, e, expects in calls:
        got: list[int] = []
        for exp in expects:
            k = j
            found = -1
            while k < n:
                if (
                    mem_bytes[k] in exp
                    and lo[k] <= e + slack_ns
                    and hi[k] >= s - slack_ns
                    and mem_start[k] >= s - slack_ns
                ):
                    found = k
                    break
                if lo[k] > e + slack_ns:  # issued after this call ended: no later record is its
                    break
                k += 1
            got.append(found)
            if found >= 0:
                j = found + 1
        out.append(got)
    return out


def assign_kernels(queued: np.ndarray, win_start: np.ndarray, win_end: np.ndarray) -> np.ndarray:
    """The window (index) each kernel was launched in, -1 for none; windows sorted and disjoint."""
    if not len(win_start):
        return np.full(len(queued), -1, dtype=np.int64)
    i = np.searchsorted(win_start, queued, side="right") - 1
    inside = (i >= 0) & (queued > 0) & (queued <= win_end[np.clip(i, 0, None)])
    return np.where(inside, i, -1).astype(np.int64)


def kernels_by_owner(
    queued: np.ndarray, win_start: np.ndarray, win_end: np.ndarray, win_row: np.ndarray, win_owner: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(kernel index, row) of each kernel launched inside a window, windows sorted by start. One
    owner's windows (a loader's batches) are disjoint, so a kernel is in at most one of them; two
    owners' windows may overlap (two loaders zipped: each batch's row holds the step they share), and
    a kernel then counts once in each owner's row, as the host clock and the events count it."""
    owners = np.unique(win_owner)
    picks: list[np.ndarray] = []
    rows: list[np.ndarray] = []
    for o in owners.tolist():
        mine = win_owner == o if len(owners) > 1 else slice(None)
        win = assign_kernels(queued, win_start[mine], win_end[mine])
        inside = np.flatnonzero(win >= 0)
        picks.append(inside)
        rows.append(win_row[mine][win[inside]])
    if not picks:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    return np.concatenate(picks), np.concatenate(rows)


def per_group(group: np.ndarray, start: np.ndarray, end: np.ndarray, groups: int) -> tuple[np.ndarray, ...]:
    """(first start, last end, busy time: the union of the intervals) of each group 0..groups-1, ns as
    float; NaN for a group with none. Vectorised: intervals sorted by (group, start), a running max of
    the ends kept from crossing groups by shifting each group past the one before."""
    first = np.full(groups, np.nan)
    last = np.full(groups, np.nan)
    busy = np.full(groups, np.nan)
    keep = group >= 0
    if not keep.any():
        return first, last, busy
    g, s, e = group[keep], start[keep].astype(np.int64), end[keep].astype(np.int64)
    order = np.lexsort((s, g))
    g, s, e = g[order], s[order], e[order]
    base = s.min()
    span = int(e.max() - base) + 1
    heads = np.flatnonzero(np.concatenate(([True], g[1:] != g[:-1])))
    rank = np.cumsum(np.concatenate(([False], g[1:] != g[:-1])))  # 0, 1, ... per group, dense
    shift = rank * span  # group k lies wholly after group k-1: a running max cannot cross
    s2, e2 = (s - base) + shift, (e - base) + shift
    reach = np.maximum.accumulate(e2)
    prev = np.concatenate(([-1], reach[:-1]))
    gained = np.clip(e2 - np.maximum(s2, prev), 0, None)
    ids = g[heads]
    busy[ids] = np.add.reduceat(gained, heads)
    first[ids] = s[heads]
    last[ids] = np.maximum.reduceat(e, heads)
    return first, last, busy
