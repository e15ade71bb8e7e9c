"""Row attribution on a table of loops, each run in this process under the hooks on a fake clock
(``tests/fake_time.py``): time moves only when a step sleeps, by exactly its batch's k = b % 4 + 1
units, so each row's ``compute_ms`` is exactly k units when the row holds its own batch's step, and a
whole unit or more off when it holds a neighbour's. Nothing here times anything: the machine's load
cannot move a figure. ``tests/test_in_flight.py`` keeps one subprocess test of ``pinprof profile`` per
framework, with the real clock.

The loops are the scripts the subprocess tests run (``tests/scripts/``): hand-written loops that fetch
as they go (``plain``) or one batch ahead (``fetch-ahead``, a device prefetcher), Accelerate's
prepared loader, timm's ``PrefetchLoader``, Hugging Face's Trainer, Lightning's ``fit``; evaluation
(the forward under ``no_grad``), gradient accumulation, steps a GradScaler skips, two backwards a
batch, two optimizers a batch (a GAN), an update written by hand, a window of batches fetched before
any is trained, zipped loaders.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from fake_time import profiled_fake

SCRIPTS = Path(__file__).parent / "scripts"
UNIT = 40.0  # ms of fake time a unit of k
BATCH_BYTES = 4 * (32 * 4 + 8)  # ahead_loops.py: 4 samples of 32 float32 features and an int64 k
OWN = [1.0, 2.0, 3.0, 4.0, 1.0, 2.0, 3.0, 4.0]  # k of batches 0-7: each row's step, in units

# (script, its arguments, the framework it needs, each row's compute in units, what the session saw of
# the loader: meta.json's ``loaders`` entry, its keys given)
AHEAD = "ahead_loops.py"
PLAIN = {"pattern": "plain", "row_boundary": "next()"}
AT_STEP = {"row_boundary": "optimizer step"}
Case = tuple[str, tuple[str, ...], str | None, list[float], dict[str, Any]]
TABLE: list[Case] = [
    (AHEAD, ("--loop", "plain"), None, OWN, PLAIN),
    (AHEAD, ("--loop", "fetch-ahead"), None, OWN, {"pattern": "fetch-ahead", **AT_STEP}),
    (AHEAD, ("--loop", "prefetcher"), None, OWN, {"pattern": "device-prefetch", **AT_STEP}),
    (AHEAD, ("--loop", "accelerate"), "accelerate", OWN, {"pattern": "fetch-ahead", **AT_STEP}),
    (AHEAD, ("--loop", "accelerate", "--non-blocking"), "accelerate", OWN, {"pattern": "fetch-ahead"}),
    (AHEAD, ("--loop", "timm"), "timm", OWN, {"pattern": "device-prefetch", **AT_STEP}),
    # evaluation (the forward alone, under no_grad): rows end at the next(); over a framework loader
    # that fetches ahead, the last row runs on to the script's end, where one unit of work follows
    (AHEAD, ("--loop", "plain", "--eval"), None, OWN, PLAIN),
    (AHEAD, ("--loop", "accelerate", "--eval"), "accelerate", [*OWN[:7], 5.0], {"row_boundary": "next()"}),
    (AHEAD, ("--loop", "timm", "--eval"), "timm", [*OWN[:7], 5.0], {"row_boundary": "next()"}),
    # an optimizer step every second batch over a framework loader: half the rows end at the step
    *[
        (AHEAD, ("--loop", fw, "--accumulate", "2"), fw, OWN, {"rows_closed_at": {"next()": 4, "optimizer step": 4}})
        for fw in ("accelerate", "timm")
    ],
    (AHEAD, ("--loop", "plain", "--by-hand"), None, OWN, PLAIN),  # the weights updated by hand, no optimizer
    (AHEAD, ("--loop", "plain", "--by-hand", "--no-copy"), None, OWN, PLAIN),  # and the model on the host
    *[
        (AHEAD, ("--loop", loop, *steps), None, OWN, {"pattern": pattern})
        for loop, pattern in (("plain", "plain"), ("fetch-ahead", "fetch-ahead"), ("prefetcher", "device-prefetch"))
        for steps in (
            ("--accumulate", "2"),
            ("--skip", "2,3,6"),  # the steps a GradScaler skips
            ("--accumulate", "2", "--clip"),  # clip_grad_norm_'s scalar .to() is not the batch's copy
            ("--backwards", "2"),  # two losses, or a batch in chunks
            ("--optimizers", "2"),  # a GAN's two players, half the batch's k each
            ("--optimizers", "2", "--same-optimizer"),
        )
    ],
    *[(AHEAD, ("--loop", fw, "--backwards", "2"), fw, OWN, {}) for fw in ("accelerate", "timm")],
    (AHEAD, ("--loop", "window", "--accumulate", "2"), None, OWN, {}),
    ("lightning_fit.py", ("--steps", "8"), "lightning", OWN, PLAIN),
    # a dataset of no length: Lightning fetches batch n+1 before it copies batch n, and the batch
    # fetched ahead of the last step is never trained on: no row, counted
    (
        "lightning_fit.py",
        ("--steps", "8", "--iterable"),
        "lightning",
        OWN,
        {"pattern": "fetch-ahead", **AT_STEP, "fetched_unused": 1},
    ),
    ("lightning_fit.py", ("--steps", "8", "--accumulate", "2"), "lightning", OWN + OWN, {"pattern": "plain"}),
    ("lightning_fit.py", ("--steps", "8", "--gan"), "lightning", OWN, {"pattern": "plain"}),
    ("lightning_fit.py", ("--steps", "8", "--gan", "--iterable"), "lightning", OWN, {"pattern": "fetch-ahead"}),
    # the Trainer fetches a window of gradient_accumulation_steps batches before it trains on any
    *[("hf_trainer.py", ("--accumulate", a), "transformers", OWN, {}) for a in ("1", "2", "4")],
]


def run(script: str, args: tuple[str, ...], needs: str | None) -> tuple[pd.DataFrame, dict[str, Any]]:
    if needs is not None:
        pytest.importorskip(needs)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return profiled_fake(SCRIPTS / script, *args, "--unit-ms", str(UNIT))


@pytest.mark.parametrize(("script", "args", "needs", "units", "seen"), TABLE, ids=[" ".join(t[1]) for t in TABLE])
def test_each_row_holds_its_own_batchs_step(
    script: str, args: tuple[str, ...], needs: str | None, units: list[float], seen: dict[str, Any]
) -> None:
    tl, loaders = run(script, args, needs)
    assert list(tl.compute_ms / UNIT) == pytest.approx(units, abs=1e-3), list(tl.compute_ms / UNIT)
    assert (tl.compute_ms <= tl.batch_ms + 1e-6).all()
    (loader,) = loaders.values()
    assert {key: loader[key] for key in seen} == seen, loader
    assert set(tl.loop) == {loader["pattern"]}  # the timeline says what the session saw
    if script == AHEAD:
        assert (tl.copies == (0 if "--no-copy" in args else 2)).all()
        assert (tl.bytes == (0 if "--no-copy" in args else BATCH_BYTES)).all()
    # a row starts where the one before ended
    assert tl.batch_start_ms.iloc[1:].to_numpy() == pytest.approx(tl.batch_end_ms.iloc[:-1].to_numpy(), abs=1e-3)


def test_zipped_loaders_each_get_the_step_their_batches_share() -> None:
    tl, loaders = run(AHEAD, ("--loop", "zipped"), None)
    assert tl.scenario.nunique() == 2 and len(loaders) == 2
    for _, rows in tl.groupby("scenario"):
        assert list(rows.compute_ms / UNIT) == pytest.approx(OWN, abs=1e-3)


def test_a_batch_passed_over_before_its_copy_ends_at_its_next() -> None:
    """A plain loop that drops a bad batch before copying it: its row ends at the next() after it,
    and the next batch keeps its own step (not read as a loop fetching ahead)."""
    tl, loaders = run(AHEAD, ("--loop", "plain", "--pass-over", "3"), None)
    assert len(tl) == 8 and tl.copies.iloc[3] == 0 and float(tl.compute_ms.iloc[3]) == pytest.approx(0, abs=1e-3)
    assert [float(tl.compute_ms.iloc[b]) / UNIT for b in (0, 1, 2, 4, 5, 6, 7)] == pytest.approx(
        [OWN[b] for b in (0, 1, 2, 4, 5, 6, 7)], abs=1e-3
    )
    assert next(iter(loaders.values()))["pattern"] == "plain"


def test_a_window_fetched_before_its_training_holds_its_rows_from_the_first_backward_on() -> None:
    """Four batches fetched, then each trained, then a step (a hand-written loop is not known to fetch
    windows): the first window, fetched before any backward was seen, closes at its next()s; from the
    first backward on each row holds its own step."""
    tl, _ = run(AHEAD, ("--loop", "window", "--accumulate", "4"), None)
    assert list(tl.compute_ms.iloc[2:] / UNIT) == pytest.approx(OWN[2:], abs=1e-3)
    assert int(tl.copies.sum()) == 16 and (tl.compute_ms >= 0).all()


def test_lightnings_sanity_check_batches_get_rows_of_their_own_and_leave_the_training_rows_alone() -> None:
    pytest.importorskip("lightning")
    """Lightning's default sanity check runs two validation batches and leaves its loader without a
    StopIteration: its second batch is still in flight at the first optimizer step. The training rows
    are their own batches', and the loop is read as plain."""
    tl, loaders = run("lightning_fit.py", ("--steps", "8", "--val"), None)
    assert len(tl[tl.scenario == "TensorDataset/bs16/w0"]) == 2  # the sanity check's two batches
    train = tl[tl.scenario == "TensorDataset/bs8/w0"]
    assert list(train.batch) == list(range(8))
    assert list(train.compute_ms / UNIT) == pytest.approx(OWN, abs=1e-3)
    assert loaders["TensorDataset/bs8/w0"]["pattern"] == "plain"
