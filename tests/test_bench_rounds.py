"""The median's interval that process-against-process benchmarks print (``profiler.bench.rounds``)."""

from __future__ import annotations

import random

import pytest

from profiler.bench.rounds import median_interval

# The H200's six resnet50 rounds under pinprof profile (2026-12-05, step `process`, tests/data/h200_resnet_process).
H200 = [1.0075, 1.0381, 1.1770, 1.0735, 0.9620, 0.9561]


def test_six_rounds_give_their_extremes_with_the_binomials_coverage() -> None:
    low, high, coverage = median_interval(H200)  # type: ignore[misc]
    assert (low, high) == (0.9561, 1.1770)
    assert coverage == pytest.approx(1 - 2 / 64)  # P(no value below the median) = P(none above) = 1/64


def test_more_rounds_narrow_it_and_too_few_give_none() -> None:
    xs = [float(i) for i in range(10)]
    assert median_interval(xs) == (1.0, 8.0, pytest.approx(1 - 2 * 11 / 1024))  # k = 2: P(X < 2) = 11/1024
    assert median_interval(xs, level=0.99) == (0.0, 9.0, pytest.approx(1 - 2 / 1024))
    assert median_interval([1.0, 2.0, 3.0, 4.0]) is None  # at best 1 - 2/16 = 87.5% < 90%
    assert median_interval([]) is None
    with pytest.raises(ValueError, match="level=1.5"):
        median_interval(xs, level=1.5)


def test_it_holds_the_median_as_often_as_it_says() -> None:
    rng = random.Random(0)
    hits = trials = 0
    for _ in range(4000):
        xs = [rng.lognormvariate(0.0, 0.3) for _ in range(8)]  # true median 1.0
        got = median_interval(xs)
        assert got is not None
        low, high, coverage = got
        assert coverage == pytest.approx(1 - 2 * 9 / 256)  # n = 8: k = 2, P(X < 2) = 9/256
        hits += low <= 1.0 <= high
        trials += 1
    assert abs(hits / trials - (1 - 2 * 9 / 256)) < 0.02
