"""``profiler.analysis.stats``: the interval of a share from blocks of consecutive batches, and the
headline that says "not settled" where that interval spans a class boundary."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from profiler.analysis.diagnose import diagnose
from profiler.analysis.findings import InputBound
from profiler.analysis.headline import headline
from profiler.analysis.rules.base import Case
from profiler.analysis.stats import ratio_interval
from profiler.report.files import read_timeline

DATA = Path(__file__).parent / "data"


def test_a_constant_share_has_an_interval_of_no_width() -> None:
    lo, hi = ratio_interval(np.full(100, 1.0), np.full(100, 10.0))
    assert lo == hi == 0.1


def test_too_few_batches_give_no_interval() -> None:
    assert all(np.isnan(ratio_interval(np.ones(14), np.ones(14))))


def test_the_interval_holds_the_true_share_about_as_often_as_it_says() -> None:
    """Batches whose wait is autocorrelated (an AR(1) loader): over 400 seeded runs of 200 batches the
    95% interval holds the true share (0.1) in at least 88% of them; the batches' own spread, taken as
    if they were independent, would hold it far less often."""
    held = 0
    for seed in range(400):
        rng = np.random.default_rng(seed)
        noise = np.zeros(200)
        for i in range(1, 200):
            noise[i] = 0.8 * noise[i - 1] + rng.normal(0, 0.6)
        wait = 1.0 + noise
        lo, hi = ratio_interval(wait, np.full(200, 10.0))
        held += lo <= 0.1 <= hi
    assert held >= 0.88 * 400, held


def _case(fetch: float, batch: float) -> Case:
    """A recorded CPU loop's means (every key a Case reads), its loader wait and batch set."""
    (d,) = diagnose(read_timeline(DATA / "cpu_compare" / "w2"))
    m = {**d.means, "batch": batch, "fetch": fetch, "compute": batch - fetch, "cpu_work": 0.0, "wait": 0.0}
    cfg = pd.Series({"mode": "pageable", "device": "cpu", "num_workers": 2, "pin_memory": False})
    return Case(m, cfg, 2)


def test_a_share_whose_interval_spans_the_boundary_is_not_settled() -> None:
    h = headline(_case(0.45, 10.0), (0.03, 0.07))
    assert h.bound == InputBound.NOT_SETTLED and h.share_lo == 0.03 and h.share_hi == 0.07
    assert h.text.startswith("not settled: not or moderately input bound: 4.5% of the mean")
    assert "95% interval 3.0%-7.0%" in h.text
    assert headline(_case(0.45, 10.0), (0.04, 0.049)).bound == InputBound.NOT
    assert headline(_case(0.45, 10.0)).bound == InputBound.NOT  # no interval: the point decides
    assert headline(_case(2.5, 10.0), (0.04, 0.3)).text.startswith("not settled: not or moderately or highly")


def _loop(fetch_ms: np.ndarray) -> pd.DataFrame:
    """A recorded CPU loop's row (every column a diagnosis reads), repeated: 20 ms batches whose
    loader wait is ``fetch_ms``, the rest compute, all steady."""
    row = read_timeline(DATA / "cpu_compare" / "w2").iloc[[0]]
    n = len(fetch_ms)
    tl = pd.concat([row] * n, ignore_index=True)
    return tl.assign(
        warmup=False, batch=np.arange(n), batch_ms=20.0, fetch_ms=fetch_ms, compute_ms=20.0 - fetch_ms, cpu_work_ms=0.0
    )


def test_a_loader_share_whose_interval_spans_the_threshold_leaves_the_verdict_open() -> None:
    """A loader wait of 5% of the batch on average, in bursts (blocks of batches at 0.2 and 1.8 ms):
    its interval spans the loader-bound threshold, so the verdict is "not settled: loader bound or
    compute bound", in every output; a wait of 20% with the same bursts stays "loader bound"."""
    from profiler.analysis.reading import Analysis
    from profiler.render.json import summary_json
    from profiler.render.markdown import diagnosis_text
    from profiler.render.terminal import brief

    bursts = np.tile(np.repeat([0.2, 1.8, 0.4, 1.6, 1.0, 0.3], 10), 2)
    (d,) = diagnose(_loop(bursts * 1.2))
    assert d.headline.share_lo < 0.05 < d.headline.share_hi
    assert not d.settled and [v.value for v in d.could_be] == ["loader_bound", "compute_bound"]
    assert d.verdict_label.startswith("not settled: loader bound or compute bound (the loader's wait is ")
    assert "across the loader-bound threshold of 5%" in d.verdict_label
    a = Analysis(_loop(bursts * 1.2), [], [], [d], [], [])
    assert "verdict: not settled: loader bound or compute bound" in " ".join(brief(a).split())
    assert "change, if loader bound:" in brief(a)
    (rec,) = summary_json(a)
    assert rec["verdict"] == "not_settled" and rec["verdict_could_be"] == "loader_bound or compute_bound"
    assert "**Verdict**: not settled: loader bound or compute bound" in diagnosis_text([d])
    (d,) = diagnose(_loop(bursts))  # 4.4% on average: the rule does not fire, and would lead where it did
    assert d.verdict.value == "compute_bound" and [v.value for v in d.could_be] == ["loader_bound", "compute_bound"]
    (d,) = diagnose(_loop(bursts * 4.0))
    assert d.settled and d.verdict.value == "loader_bound" and d.verdict_label == "loader bound"
