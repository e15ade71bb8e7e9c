"""The hidden copies of an unmodified script under ``pinprof profile``, on the GPU. Run: pytest -m gpu.

``tests/scripts/dict_batches.py`` (dict batches of three leaves, a small conv net) in three set-ups: its
image a non-dense view pinned by the loader (the layout copy and the driver's staging hidden in the
copy), dense and pageable (the staging alone), dense and pinned (the control, and the change pinprof
suggests for the first). Each runs under ``pinprof profile`` with either clock; the reference is the
same script, bare, under torch.profiler (``scripts/copy_anatomy.py``: per batch, the copy operators'
host spans, the layout copies inside them, the memcpy records and their memory kind, pinprof off).

Per set-up:
- per batch, ``layout_ms + hidden_stage_ms + dma_ms`` accounts for the copy calls' host time and their
  DMA's tail past the last call (``profiler.timeline.split.accounted_ms``: the host clock's calls, the
  GPU clock's copy end) within ``ACCOUNTED_BOUND`` in at least ``ACCOUNTED_SHARE`` of the steady
  batches (the README's bounds for each clock, "A copy's three parts");
- ``dma_ms`` against torch.profiler's memcpy records (medians: the runs are separate processes): the
  control's, the DMA proper of a pinned copy, within 3% (CUPTI) or ``EVENTS_DMA_BOUND`` (events: the
  copy's bytes at the link's calibrated pinned rate, README "A copy's three parts"); with CUPTI, the
  pageable set-ups' records the same copies (bytes per batch) and, on both sides, longer than the
  pinned copy's by half at least (a pageable record spans the driver's staged pieces). Their lengths
  are printed, not bounded: the staging inside them moves with the process, 5-28% between identical
  ones (``reports/README.md``, "The hidden copies"); CUPTI's rows read the records themselves;
- the view's layout copy: in every batch, and with CUPTI its share of the copy as torch.profiler's
  (within 0.05). The two processes' layout copies themselves are not compared: the same gather moved
  by up to a third between identical processes, reference and pinprof alike (``reports/README.md``,
  "The hidden copies");
- the control's ``layout_ms`` and ``hidden_stage_ms`` 0 or empty.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from profiler.timeline import split

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[1]

SETUPS = {
    "view-pinned": ["--layout", "view"],
    "dense-pageable": ["--layout", "dense", "--no-pin"],
    "dense-pinned": ["--layout", "dense"],
}
STEPS, SKIP = 60, 5
# The events' split is a model (a pageable copy's DMA at the calibrated pinned rate), and an event pair
# around a copy times its dispatch too (a pinned 9.6 MiB copy read 0.195 ms by its events, 0.182 ms by
# its record, on an H100): the bound on its DMA this test holds it to.
ACCOUNTED_BOUND = 0.05
# The events read the calls on the host clock and the copy on the GPU's: a batch whose call the host
# preempted, or whose copy queued behind the step's compute, reads apart (on an H100, 2 to 4 of 55 such
# batches by 5-24% in a pageable run). CUPTI's records share the host's clock, yet a call the host holds
# up outside any of the three parts reads apart too: on an H100 (2026-12-07, four runs of the view, 220
# batches) two batches read 15% and 18% under; the one whose row came back held copy calls 2 ms longer
# than the run's others (h2d_call_ms 3.16 against a median of 1.16) with its layout copy, staging and
# DMA as usual: the host's time, not a copy's.
ACCOUNTED_SHARE = {"cupti": 0.95, "events": 0.90}
EVENTS_DMA_BOUND = 0.10
# The rows' gpu_clock under each PINPROF_BACKEND: CUPTI's memcpy records time the copies by default
# (the step's CUDA events), kernel records being off
ROW_CLOCK = {"cupti": "cupti/events", "events": "events"}


def _env(clock: str) -> dict[str, str]:
    return {
        **os.environ,
        "PINPROF_BACKEND": clock,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, pd.DataFrame]:
    """Per set-up, torch.profiler's per-batch sums over the steady batches of the bare script
    (``copy_anatomy.batches``' columns: dma_ms, accounted_ms, layout_ms, kinds, ...)."""
    out = {}
    folder = tmp_path_factory.mktemp("reference")
    for name, args in SETUPS.items():
        csv = folder / f"{name}.csv"
        script = [str(ROOT / "tests" / "scripts" / "dict_batches.py"), *args, "--steps", str(STEPS)]
        cmd = [sys.executable, str(ROOT / "scripts" / "copy_anatomy.py"), "--csv", str(csv), "--", *script]
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=180, cwd=ROOT, env=_env("events"))
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        df = pd.read_csv(csv)
        out[name] = df[df.batch >= SKIP]
        assert len(out[name]) >= 40 and (out[name].copies == 3).all(), df.to_string()
    return out


def profiled(tmp_path: Path, setup: str, clock: str, steps: int = STEPS) -> tuple[pd.DataFrame, dict, str]:
    """``pinprof profile`` of dict_batches.py in ``setup`` with ``clock``: its steady rows, meta.json, and
    what it and the script printed."""
    out = tmp_path / f"{setup}-{clock}"
    env = _env(clock)
    cmd = [
        sys.executable,
        "-m",
        "profiler",
        "profile",
        "--out",
        str(out),
        "--no-plots",
        "--",
        sys.executable,
        str(ROOT / "tests" / "scripts" / "dict_batches.py"),
        *SETUPS[setup],
        "--steps",
        str(steps),
    ]
    run = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=180, cwd=ROOT)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    tl = pd.read_csv(out / "timeline.csv")
    meta = json.loads((out / "meta.json").read_text())
    # the reference's steady batches: from batch SKIP on
    return (
        tl[~tl.warmup.astype(bool) & (tl.batch >= SKIP)],
        meta,
        run.stdout + run.stderr + (out / "diagnosis.md").read_text(),
    )


def _split_line(setup: str, clock: str, tl: pd.DataFrame, ref: pd.DataFrame) -> str:
    cols = ("layout_ms", "hidden_stage_ms", "dma_ms", "h2d_call_ms", "batch_ms")
    ours = ", ".join(f"{c} {tl[c].median():.4f}" for c in cols)
    theirs = (
        f"dma {ref.dma_ms.median():.4f}, accounted {ref.accounted_ms.median():.4f}, layout {ref.layout_ms.median():.4f}"
    )
    return f"{setup} ({clock}): pinprof {ours}, src_memory {tl.src_memory.value_counts().to_dict()}; torch.profiler {theirs}, kinds {set(ref.kinds)}"


@pytest.mark.parametrize("clock", ["cupti", "events"])
@pytest.mark.parametrize("setup", list(SETUPS))
def test_the_copy_splits_into_layout_staging_and_dma_as_cupti_sees_it(
    tmp_path: Path, reference: dict[str, pd.DataFrame], setup: str, clock: str
) -> None:
    tl, _, _ = profiled(tmp_path, setup, clock)
    ref = reference[setup]
    print(_split_line(setup, clock, tl, ref))
    assert len(tl) >= 40 and (tl.gpu_clock == ROW_CLOCK[clock]).mean() > 0.9
    dma = tl.dma_ms.median()
    pinned_ref = reference["dense-pinned"].dma_ms.median()
    print(f"   dma_ms / torch.profiler's records: {dma / ref.dma_ms.median():.4f}")
    if setup == "dense-pinned":  # the control: nothing hidden, the DMA proper on both sides
        assert dma == pytest.approx(pinned_ref, rel=0.03 if clock == "cupti" else EVENTS_DMA_BOUND)
        assert tl.layout_ms.fillna(0).max() == 0 and tl.hidden_stage_ms.fillna(0).max() == 0
        assert set(tl.src_memory) == {"pinned"}
        return
    if clock == "cupti":
        assert (tl.bytes == ref.bytes.iloc[0]).all() and (ref.bytes == ref.bytes.iloc[0]).all()
        assert dma > 1.5 * pinned_ref and ref.dma_ms.median() > 1.5 * pinned_ref
    else:  # the model's DMA: the same bytes at the pinned rate
        assert dma == pytest.approx(pinned_ref, rel=EVENTS_DMA_BOUND)
    parts = tl.layout_ms.fillna(0) + tl.hidden_stage_ms.fillna(0) + tl.dma_ms
    accounted = split.accounted_ms(tl)
    assert accounted.notna().all()  # a pageable copy blocks its caller
    off = (parts / accounted - 1).abs()
    print(f"   parts / accounted per batch: median {(parts / accounted).median():.4f}, max off {off.max():.4f}")
    assert (off <= ACCOUNTED_BOUND).mean() >= ACCOUNTED_SHARE[clock]
    assert (tl.hidden_stage_ms > 0).mean() > 0.9
    if clock == "cupti":  # CUPTI's memory kind: the image's copy reads pageable memory
        assert set(tl.src_memory) <= {"pageable", "mixed"}
    if setup == "view-pinned":
        assert (tl.layout_ms > 0).all()
        # torch.profiler sees torch's own layout copy where it is dispatched as an operator (aten::clone)
        if clock == "cupti" and ref.layout_ms.median() > 0:
            share = (tl.layout_ms / parts).median()
            assert share == pytest.approx((ref.layout_ms / ref.accounted_ms).median(), abs=0.05)


@pytest.mark.parametrize("clock", ["cupti", "events"])
def test_the_view_is_told_its_layout_copy_and_leaf_and_the_change_shortens_the_batch(
    tmp_path: Path, clock: str
) -> None:
    view, meta, said = profiled(tmp_path, "view-pinned", clock)
    leaves = meta["loaders"]
    (scenario,) = leaves
    named = [x["path"] for x in leaves[scenario]["layout_leaves"]]
    # the image view has gaps; the transposed boxes are dense (a permutation), copied as they are
    assert named == ["batch['image']"]
    assert leaves[scenario]["layout_leaves"][0]["pinned"] is True
    verdict = next(line for line in said.splitlines() if line.startswith("**Verdict**"))
    name = verdict.removeprefix("**Verdict**: ").split(" - ")[0]
    assert name in ("layout copy", "pinned memory bypassed"), verdict
    assert "batch['image']" in said and ".contiguous()" in said
    dense, _, _ = profiled(tmp_path, "dense-pinned", clock)
    print(
        f"{clock}: view batch mean {view.batch_ms.mean():.3f} ms (layout {view.layout_ms.mean():.3f}, staging "
        f"{view.hidden_stage_ms.mean():.3f}); dense batch mean {dense.batch_ms.mean():.3f} ms "
        f"(layout {dense.layout_ms.fillna(0).mean():.3f}); {verdict}"
    )
    assert dense.layout_ms.fillna(0).max() == 0 and set(dense.src_memory) == {"pinned"}
    assert dense.batch_ms.mean() < view.batch_ms.mean()
    assert np.isfinite(view.layout_ms).all() and (view.layout_ms > 0).all()
