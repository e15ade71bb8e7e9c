"""What a benchmark's rounds can say: a distribution-free interval for the median of per-round ratios.

A process-against-process benchmark (``scripts/bench_process_overhead.py``) gives one ratio a round,
and the rounds spread far more than the 1% a target asks about (resnet50 on the H200: 0.956-1.177 over
six rounds, 2026-12-05). The median alone hides that. The interval here is the median's from order
statistics: with n rounds, the k-th smallest and k-th largest ratios hold the true median with
probability 1 - 2 P(Binomial(n, 1/2) < k), whatever the ratios' distribution, the rounds being
independent. Fewer than five rounds can give no 90% interval at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import comb


def median_interval(values: Sequence[float], level: float = 0.9) -> tuple[float, float, float] | None:
    """(low, high, coverage): the narrowest pair of order statistics whose coverage of the median is at
    least ``level`` (``coverage`` the exact probability), or None when even the smallest and largest
    values cover it less often (too few values)."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"level={level!r}: give a probability between 0 and 1, such as 0.9")
    xs = sorted(values)
    n = len(xs)
    if n == 0:
        return None
    below = 0.0  # P(Binomial(n, 1/2) < k): the chance that fewer than k values lie under the median
    best = None
    for k in range(1, n // 2 + 1):
        below += comb(n, k - 1) / 2**n
        coverage = 1.0 - 2.0 * below
        if coverage < level:
            break
        best = (xs[k - 1], xs[n - k], coverage)
    return best
