"""``pinprof tune``: the trials' judgement on recorded runs, the knobs in a process, the prefetcher on a
CPU, and a whole tune of a script whose loader waits (``tests/scripts/sleepy_loader.py``)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from profiler.analysis.diagnose import diagnose
from profiler.analysis.stats import t975
from profiler.analysis.tune import (
    Run,
    _rel_se,
    by_prediction,
    judge,
    noise,
    predicted_saving,
    steady_steps,
    winner,
)
from profiler.capture.knobs import Knobs, apply
from profiler.capture.trial import window
from profiler.drivers.tune import candidates, only_unknown
from profiler.errors import UsageError
from profiler.report.files import read_timeline

HERE = Path(__file__).parent
RECORDED = HERE / "data" / "cpu_tune"


def _recorded() -> list[Run]:
    runs = []
    for order, folder in enumerate(sorted(p for p in RECORDED.iterdir() if p.is_dir())):
        changes = {} if folder.name.endswith("baseline") else {"num_workers": 2}
        runs.append(Run(folder.name[3:], changes, order, steady_steps(read_timeline(folder))))
    return runs


def test_recorded_runs_judge_more_workers_faster_and_say_by_how_much() -> None:
    runs = _recorded()
    assert [r.name for r in runs] == ["baseline", "num_workers=2", "baseline"]
    table = judge(runs)
    best = winner(table)
    assert best is not None and best.trial == "num_workers=2" and best.verdict == "faster"
    assert 1 < best.speedup_lo < best.speedup < best.speedup_hi
    base = [np.mean(r.steps_ms) for r in runs if r.baseline]
    assert best.ref_ms == pytest.approx(np.mean(base))  # the mean of the runs before and after
    assert best.saving_ms == pytest.approx(best.ref_ms - np.mean(runs[1].steps_ms))
    # what the H200-free run wrote is what the judgement gives now
    written = pd.read_csv(RECORDED / "tune.csv")
    assert written.speedup.iloc[1] == pytest.approx(best.speedup)


def _run(name: str, order: int, mean: float, sd: float, n: int = 30, seed: int = 0) -> Run:
    rng = np.random.default_rng(seed + order)
    changes = {} if name == "baseline" else {"num_workers": order}
    return Run(name, changes, order, rng.normal(mean, sd, n))


def test_noise_estimated_from_few_baselines_takes_students_quantile() -> None:
    """The naive benchmark's tune on the H200 (tests/data/h200_tune_naive): five baselines 2.47-3.01
    ms, 10% apart from run to run. With the normal quantile it judged 16 workers 1.333x (1.019-1.743),
    and applied by hand they ran 0.901x. The noise is estimated from five values (4 degrees of
    freedom): with Student's quantile at the sum's degrees of freedom no trial is a winner."""
    folder = HERE / "data" / "h200_tune_naive"
    runs = []
    for order, f in enumerate(sorted(p for p in folder.iterdir() if p.is_dir())):
        name = f.name[3:]
        runs.append(Run(name, {} if name == "baseline" else {"trial": name}, order, steady_steps(read_timeline(f))))
    written = pd.read_csv(folder / "tune.csv", keep_default_na=False)
    assert written.verdict.iloc[3] == "faster" and float(written.speedup_lo.iloc[3]) > 1  # as it was judged
    table = judge(runs)
    assert table.speedup.iloc[3] == pytest.approx(float(written.speedup.iloc[3]))
    assert table.speedup_lo.iloc[3] < 1 < table.speedup_hi.iloc[3]
    assert winner(table) is None
    assert t975(4) == pytest.approx(2.776) and t975(float("inf")) == pytest.approx(1.959964)
    assert 2.0 < t975(50) < 2.042  # between the table's 30 and 60


def test_the_changes_the_diagnosis_predicts_a_saving_for_run_first() -> None:
    """resnet50 under pinprof profile on the H200 (tests/data/h200_profile_resnet): its diagnosis names
    the prefetcher (the copy leaves the GPU idle), the last of the five trials its settings give; a
    budget of two trials must keep it. Trials with no prediction keep their order."""
    tl = read_timeline(HERE / "data" / "h200_profile_resnet")
    main = tl.scenario.value_counts().index[0]
    plan = candidates(tl[tl.scenario == main].iloc[0], 16)
    assert [n for n, _ in plan][-1] == "prefetcher"
    diags = diagnose(tl)
    ordered = by_prediction(plan, diags)
    assert [n for n, _ in ordered] == ["prefetcher", *[n for n, _ in plan[:-1]]]
    assert predicted_saving(diags, ordered[0][1]) > 1.0  # ms a batch
    fake: list[tuple[str, dict[str, Any]]] = [
        ("a", {"prefetch_factor": 4}),
        ("b", {"num_workers": 2}),
        ("c", {"prefetcher": True}),
    ]
    assert [n for n, _ in by_prediction(fake, [])] == ["a", "b", "c"]  # no diagnosis: as they came


def test_only_takes_a_knob_or_one_trial_by_its_name() -> None:
    """On the H200 the resnet50 case's pin_memory=False never ran: ``--only pin_memory`` keeps the
    prefetcher too (it sets pin_memory), which its predicted saving puts first. A trial's name keeps
    that trial alone."""
    tl = read_timeline(HERE / "data" / "h200_profile_resnet")
    cfg = tl[tl.scenario == tl.scenario.value_counts().index[0]].iloc[0]
    assert [n for n, _ in candidates(cfg, 16, ["pin_memory"])] == ["pin_memory=False", "prefetcher"]
    assert [n for n, _ in candidates(cfg, 16, ["pin_memory=False"])] == ["pin_memory=False"]
    assert [n for n, _ in candidates(cfg, 16, ["num_workers=16", "prefetcher"])] == ["num_workers=16", "prefetcher"]
    entries = ["workers", "pin_memory=False", "num_workers=16", "pin_memory+non_blocking", "prefetcher", "gpu=1"]
    assert only_unknown(entries) == ["gpu=1", "workers"]


def test_an_interval_that_holds_one_is_no_measurable_difference() -> None:
    runs = [_run("baseline", 0, 10, 0.5), _run("same", 1, 10, 0.5), _run("baseline", 2, 10, 0.5)]
    table = judge(runs)
    assert table.verdict.iloc[1] == "no measurable difference"
    assert table.speedup_lo.iloc[1] < 1 < table.speedup_hi.iloc[1]
    assert winner(table) is None


def test_run_to_run_noise_widens_the_interval() -> None:
    """Baselines 20% apart from run to run: a 10% faster trial is not measurably faster, though its
    own batches alone would say so."""
    quiet = [_run("baseline", 0, 10, 0.1), _run("t", 1, 9, 0.1), _run("baseline", 2, 10, 0.1)]
    noisy = [_run("baseline", 0, 9, 0.1), _run("t", 1, 9, 0.1), _run("baseline", 2, 11.5, 0.1)]
    assert judge(quiet).verdict.iloc[1] == "faster"
    assert noise(noisy) > 0.15
    assert judge(noisy).verdict.iloc[1] == "no measurable difference"


def test_a_runs_own_error_follows_its_batches_order() -> None:
    """Batches alternating 2 and 16 ms (2 workers) hold a mean that barely moves: the interval is
    narrow, where the batches taken as independent would hold 1.0. Twenty fast then twenty slow
    batches (a loader that stalls for a while): the error is wider than the batches alone say."""
    rng = np.random.default_rng(0)
    alternating = np.tile([2.0, 16.0], 20) + rng.normal(0, 0.1, 40)
    stalls = np.r_[np.full(20, 8.0), np.full(20, 10.0)] + rng.normal(0, 0.1, 40)
    iid = {
        k: float(np.std(x, ddof=1) / np.sqrt(len(x)) / np.mean(x)) for k, x in (("alt", alternating), ("stall", stalls))
    }
    assert _rel_se(alternating)[0] < 0.1 * iid["alt"]
    assert _rel_se(stalls)[0] > 2 * iid["stall"]
    base = [Run("baseline", {}, o, rng.normal(10.0, 0.05, 40)) for o in (0, 2)]
    table = judge([base[0], Run("w2", {"num_workers": 2}, 1, alternating), base[1]])
    assert table.verdict.iloc[1] == "faster", table  # 10 ms against a mean of 9 ms
    assert _rel_se(np.array([1.0, 2.0, 3.0]))[0] == pytest.approx(np.std([1, 2, 3], ddof=1) / np.sqrt(3) / 2)


def test_a_slower_trial_and_a_failed_one() -> None:
    runs = [_run("baseline", 0, 10, 0.2), _run("slow", 1, 13, 0.2), _run("baseline", 2, 10, 0.2)]
    runs.append(Run("broken", {"pin_memory": True}, 3, np.empty(0), "exit status 1: RuntimeError: boom"))
    table = judge(runs)
    assert table.verdict.iloc[1] == "slower" and table.speedup_hi.iloc[1] < 1
    assert table.verdict.iloc[3] == "failed: exit status 1: RuntimeError: boom"


def test_knobs_reach_every_dataloader_the_script_builds() -> None:
    data = TensorDataset(torch.arange(8.0))
    undo = apply(Knobs(num_workers=0, pin_memory=False, prefetch_factor=4, persistent_workers=True), "cpu")
    try:
        loader = DataLoader(data, batch_size=2, num_workers=0, prefetch_factor=None)
        assert loader.num_workers == 0 and loader.prefetch_factor is None  # refused without workers: left out
    finally:
        undo()
    undo = apply(Knobs(num_workers=1, prefetch_factor=4), "cpu")
    try:
        loader = DataLoader(data, 2)  # positional batch_size, as scripts write it
        assert loader.num_workers == 1 and loader.prefetch_factor == 4 and loader.batch_size == 2
    finally:
        undo()
    assert DataLoader(data).num_workers == 0  # undone


def test_knobs_from_the_environment_name_a_bad_value() -> None:
    assert Knobs.from_json('{"num_workers": 4}') == Knobs(num_workers=4)
    with pytest.raises(UsageError, match="not a JSON object"):
        Knobs.from_json("{num_workers: 4")
    with pytest.raises(UsageError, match="expected a JSON object of"):
        Knobs.from_json('{"workers": 4}')


@dataclasses.dataclass
class Sample:
    image: torch.Tensor
    meta: dict
    name: str


def test_the_prefetcher_hands_out_every_batch_with_its_structure() -> None:
    from profiler import prefetch

    batches: list[dict[str, Any]] = [
        {"x": torch.full((2, 3), float(i)), "pair": (torch.arange(3) + i, [torch.ones(1) * i]), "id": i}
        for i in range(5)
    ]
    got = list(prefetch(batches, "cpu"))
    assert len(got) == 5
    for i, b in enumerate(got):
        assert b["id"] == i and torch.equal(b["x"], batches[i]["x"])
        assert torch.equal(b["pair"][0], torch.arange(3) + i) and isinstance(b["pair"][1], list)
    sample = Sample(torch.rand(2, 2)[:, :1], {"k": torch.tensor(3)}, "a")  # a non-dense view, a dataclass
    (out,) = list(prefetch([sample], "cpu"))
    assert isinstance(out, Sample) and out.name == "a" and torch.equal(out.image, sample.image)


def test_the_prefetchers_loader_error_reaches_the_loop_at_its_batch() -> None:
    from profiler import prefetch

    def loader():
        yield from (torch.tensor(i) for i in range(3))
        raise ValueError("batch 3 is corrupt")

    seen = []
    with pytest.raises(ValueError, match="batch 3 is corrupt"):
        for b in prefetch(loader(), "cpu"):
            seen.append(int(b))
    assert seen == [0, 1, 2]


def test_tune_of_a_loop_whose_loader_waits_picks_more_workers(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "profiler", "tune", "--out", str(tmp_path / "t"), "--steps", "40", "--skip", "3"]
    cmd += ["--", "python", str(HERE / "scripts" / "sleepy_loader.py")]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=HERE.parent)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "winner: num_workers=2," in run.stderr and "in code: DataLoader(..., num_workers=2)" in run.stderr
    table = pd.read_csv(tmp_path / "t" / "tune.csv")
    assert list(table.trial) == ["baseline", "num_workers=2", "baseline"]
    # faster: the 95% interval's low end is above 1. Its width holds the two baselines' difference
    # (one degree of freedom), which a busy 2-core CI machine can make wide (speedup_lo 1.115 once,
    # where 1.3 was asserted): the size of the gain is held on the point estimate, near 2 (sleeps of
    # 16 ms a batch shared by two workers).
    assert table.verdict.iloc[1] == "faster" and table.speedup.iloc[1] > 1.5
    assert (tmp_path / "t" / "tune.md").read_text().count("num_workers=2") >= 2
    assert table.predicted_ms.notna().iloc[1]  # the diagnosis' prediction beside the measured saving


def test_a_trial_named_in_only_runs_as_named_and_a_bad_one_is_refused_before_any_run(tmp_path: Path) -> None:
    """``--only num_workers=7`` on a script whose rules give num_workers=2 (the 2-core machine): that
    trial runs, as named, between two baselines (it was skipped after a baseline). ``num_workers=x``
    is refused in one line before the baseline runs."""
    cmd = [sys.executable, "-m", "profiler", "tune", "--out", str(tmp_path / "t"), "--steps", "10", "--skip", "2"]
    script = ["--", "python", str(HERE / "scripts" / "sleepy_loader.py"), "--one-loader"]
    run = subprocess.run([*cmd, "--only", "num_workers=7", *script], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    table = pd.read_csv(tmp_path / "t" / "tune.csv")
    assert list(table.trial) == ["baseline", "num_workers=7", "baseline"]
    bad = [*cmd[:5], str(tmp_path / "u"), *cmd[6:], "--only", "num_workers=x", *script]
    refused = subprocess.run(bad, capture_output=True, text=True, timeout=60)
    errors = [ln for ln in refused.stderr.splitlines() if ln.strip()]
    assert refused.returncode == 2 and len(errors) == 1 and "num_workers=x" in errors[0], refused.stderr
    assert not (tmp_path / "u").exists()  # nothing ran


def test_a_trials_warm_up_holds_the_batches_its_workers_queued(tmp_path: Path) -> None:
    """A tune trial with 2 workers and prefetch_factor 3: the 6 batches they could queue before the
    loop ran are warm-up beside --skip's 2. Its loader has 100 batches an epoch, at most 10 times the
    10 steps asked: the trial measures that whole epoch's worth, one epoch's start among them (batch
    100 for no workers, 106 for two). Without workers no warm-up is added. The trial without workers
    steps a ``torch.optim`` optimizer, the other updates by hand (each row closed a ``next()`` late):
    the same count either way."""
    counts = {}
    for workers in (0, 2):
        knobs = Knobs(num_workers=workers, prefetch_factor=3 if workers else None).to_json()
        env = {**os.environ, "PINPROF_TUNE": knobs, "PINPROF_TUNE_STOP": "12"}
        out = tmp_path / f"w{workers}"
        cmd = [sys.executable, "-m", "profiler", "profile", "--out", str(out), "--skip", "2", "--no-plots"]
        cmd += ["--device", "cpu", "--", "python", str(HERE / "scripts" / "sleepy_loader.py"), "--one-loader"]
        cmd += [] if workers else ["--optimizer"]
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=HERE.parent, env=env)
        assert run.returncode == 0, run.stderr[-3000:]
        tl = read_timeline(out)
        assert set(tl.num_workers) == {workers}
        counts[workers] = (len(tl), int(tl.warmup.sum()), len(steady_steps(tl)))
        assert set(tl.epoch[~tl.warmup.astype(bool)]) == {0, 1}  # an epoch's start is measured
    assert counts == {0: (102, 2, 100), 2: (108, 8, 100)}


@pytest.mark.parametrize("update", ["optimizer", "by hand", "none"])
def test_a_trial_stops_after_its_batches_whatever_closes_its_rows(update: str) -> None:
    """A trial asked for 6 batches records 6 rows, whether an optimizer step closes each row, or the
    next ``next()`` does, one ``next()`` late (an update written by hand, or an evaluation loop with
    no backward). Counted by closed rows alone, the last two read 7."""
    from profiler.capture import auto_hooks
    from profiler.capture.auto_session import AutoSession, TrialDone

    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    session = AutoSession("cpu", nvtx=False, skip=0, stop_after=6)
    fetched = 0
    auto_hooks.start(session)
    try:
        # an epoch of 1000 batches: more than a trial measures whole (trial.window)
        for (x,) in DataLoader(TensorDataset(torch.rand(2000, 3)), batch_size=2):
            fetched += 1
            y = x.to("cpu")
            if update == "none":
                with torch.no_grad():
                    model(y)
                continue
            model(y).sum().backward()
            if update == "optimizer":
                opt.step()
                opt.zero_grad()
            else:
                with torch.no_grad():
                    for w in model.parameters():
                        w.sub_(0.1 * w.grad)  # type: ignore[operator]
                        w.grad = None
    except TrialDone:
        pass
    finally:
        auto_hooks.stop()
    assert auto_hooks.failure is None
    assert len(session.close()) == 6 and fetched == 6


def test_a_trial_measures_whole_epochs_where_they_are_short() -> None:
    assert window(30, None) == 30  # no length (an iterable dataset): the steps asked
    assert window(30, 128) == 128  # one epoch holds the 30 steps
    assert window(30, 16) == 32  # two epochs of 16
    assert window(30, 300) == 300 and window(30, 301) == 30  # up to EPOCH_SPAN times the steps


def test_tune_names_a_bad_knob(tmp_path: Path) -> None:
    cmd = [
        sys.executable,
        "-m",
        "profiler",
        "tune",
        "--only",
        "workers",
        "--",
        "python",
        str(HERE / "scripts" / "sleepy_loader.py"),
    ]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert run.returncode == 2
    assert "--only workers: unknown workers; choose from num_workers,pin_memory" in run.stderr


def test_ctrl_c_keeps_the_runs_finished(tmp_path: Path) -> None:
    """SIGINT once the first run is written: tune stops the run in progress and writes the table of
    the runs finished (exit 130)."""
    import signal
    import time

    from conftest import sigint_as_at_a_terminal

    out = tmp_path / "t"
    cmd = [sys.executable, "-m", "profiler", "tune", "--out", str(out), "--steps", "15", "--skip", "3"]
    cmd += ["--", "python", str(HERE / "scripts" / "sleepy_loader.py")]
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=HERE.parent,
        preexec_fn=sigint_as_at_a_terminal,
    )
    deadline = time.monotonic() + 120
    while not (out / "trials" / "01-num_workers=2").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert proc.poll() is None, proc.communicate()[1][-2000:]
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    table = pd.read_csv(out / "tune.csv")
    assert list(table.trial) == ["baseline"]  # the run finished before the signal
    assert "interrupted after 1 runs" in (out / "tune.md").read_text()


def test_an_interval_spanning_orders_of_magnitude_is_not_printed_as_a_speedup() -> None:
    """A trial equal to the baseline on a busy machine read "speedup 1.585 (0.001-3262.530) saves
    109.808 ms": such an interval says nothing, and the line says so instead of a figure."""
    from profiler.render.tune import tune_lines

    runs = _recorded()
    table = judge(runs)
    row = table.index[table.trial == "num_workers=2"][0]
    table.loc[row, ["speedup", "speedup_lo", "speedup_hi", "saving_ms"]] = [1.585, 0.001, 3262.53, 109.808]
    line = next(ln for ln in tune_lines(table, noise(runs)) if "num_workers=2" in ln and "ms/step" in ln)
    assert "not measured: the runs varied too much" in line and "1.585" not in line and "109.808" not in line
