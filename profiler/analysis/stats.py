"""One home for the statistics pinprof's judgements read: Student's t quantile, and the interval of a
ratio of two per-batch series from the means of blocks of consecutive batches (the batch-means
method: a loader's batches are not independent, so the spread of single batches understates the
uncertainty of a mean as often as it overstates it)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

Z95 = 1.959964

# Student's t distribution, 97.5th percentile, by degrees of freedom (as in any statistics table);
# between two entries it is interpolated linearly in 1/df, and beyond the last it tends to Z95.
T975 = (
    (1, 12.706),
    (2, 4.303),
    (3, 3.182),
    (4, 2.776),
    (5, 2.571),
    (6, 2.447),
    (7, 2.365),
    (8, 2.306),
    (9, 2.262),
    (10, 2.228),
    (12, 2.179),
    (15, 2.131),
    (20, 2.086),
    (30, 2.042),
    (60, 2.000),
    (120, 1.980),
)


def t975(df: float) -> float:
    """Student's t 97.5th percentile at ``df`` degrees of freedom (at least 1; inf or NaN: Z95)."""
    if not np.isfinite(df):
        return Z95
    df = max(df, 1.0)
    inv = [1 / d for d, _ in T975] + [0.0]
    val = [t for _, t in T975] + [Z95]
    # np.interp needs increasing x: 1/df falls as df grows
    return float(np.interp(1 / df, inv[::-1], val[::-1]))


# Blocks of consecutive batches a ratio's interval is read from, and the fewest batches a block holds.
BLOCKS, MIN_BLOCK = 10, 5


def ratio_interval(num: np.ndarray, den: np.ndarray) -> tuple[float, float]:
    """The 95% interval of ``sum(num) / sum(den)`` (a share of the batch time: its wait over its
    length), from ``BLOCKS`` blocks of consecutive batches (fewer where the batches are few, none
    under three blocks: NaN, NaN)."""
    n = min(len(num), len(den))
    k = min(BLOCKS, n // MIN_BLOCK)
    if k < 3:
        return float("nan"), float("nan")
    edges = np.linspace(0, n, k + 1).astype(int)
    sums_num = np.add.reduceat(np.asarray(num[:n], dtype=float), edges[:-1])
    sums_den = np.add.reduceat(np.asarray(den[:n], dtype=float), edges[:-1])
    if not (sums_den > 0).all():
        return float("nan"), float("nan")
    ratios = sums_num / sums_den
    center = float(np.sum(sums_num) / np.sum(sums_den))
    half = t975(k - 1) * float(np.std(ratios, ddof=1)) / np.sqrt(k)
    return center - half, center + half


def welch(parts: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """The error of a sum of independent errors ``(error, dof)``, and Student's t quantile for it at
    Welch-Satterthwaite's degrees of freedom, (sum v)^2 / sum(v^2 / dof), v = error^2. Parts that are
    NaN (unknown) or 0 are left out (a part of no error adds nothing to either sum); none left: (0, Z95)."""
    known = [(e * e, d) for e, d in parts if np.isfinite(e) and e > 0]
    var = sum(v for v, _ in known)
    if var <= 0:
        return 0.0, Z95
    dof = var**2 / sum(v * v / d for v, d in known) if all(np.isfinite(d) and d > 0 for _, d in known) else np.inf
    return float(np.sqrt(var)), t975(dof)


def difference_interval(before: np.ndarray, after: np.ndarray) -> float:
    """The half-width of the 95% interval of ``mean(after) - mean(before)``, each a handful of
    independent runs' figures (Welch's interval: the two sides' variances need not be equal). This is
    the between-run noise: what a change must beat to be told from the machine's drift between runs.
    NaN under two runs a side."""
    b, a = np.asarray(before, dtype=float), np.asarray(after, dtype=float)
    if len(b) < 2 or len(a) < 2:
        return float("nan")
    error, t = welch([(float(np.std(x, ddof=1)) / np.sqrt(len(x)), len(x) - 1.0) for x in (b, a)])
    return t * error
