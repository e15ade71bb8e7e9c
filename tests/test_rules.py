"""Each diagnosis rule, the headline and the noise-aware comparison on recorded timelines (tests/data).

The H200 recordings: ``h200_default`` / ``h200_naive`` / ``h200_better`` (the matrix and the two quoted
benchmarks), ``h200_gpu_bound`` (20 ms of GPU compute per step, pinned_nb and prefetch, 36.75 and 73.5
MiB batches), ``h200_pin_bound`` (55 MiB batches, 12 workers, 1 ms of compute); ``cpu_default`` is a
run on a CPU machine. How each was made: tests/data/README.md.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from profiler.analysis.compare import compare_modes
from profiler.analysis.diagnose import diagnose
from profiler.analysis.findings import Diagnosis, InputBound, Verdict
from profiler.analysis.rules import RULES
from profiler.bench import cupti_replay
from profiler.report.files import read_calibration, read_meta, read_timeline
from profiler.timeline.idle import gpu_idle

DATA = Path(__file__).parent / "data"
RECORDED = (
    "h200_default",
    "h200_naive",
    "h200_better",
    "h200_gpu_bound",
    "h200_pin_bound",
    "cpu_default",
    "h200_profile_resnet",
)


def diagnosed(folder: str) -> dict[str, Diagnosis]:
    path = DATA / folder
    cal = read_calibration(path)
    cores = read_meta(path / "meta.json").get("cpu_count")
    return {d.scenario: d for d in diagnose(read_timeline(path), cal, cores)}


def verdicts(d: Diagnosis) -> list[Verdict]:
    return [f.verdict for f in d.findings]


# (folder, scenario) where each rule must fire, and whether it must be the top finding there.
FIRES = {
    Verdict.NO_GPU: ("cpu_default", "pageable/bs64/w2", False),
    Verdict.LOADER_BOUND: ("h200_default", "pinned_nb/bs1024/w4", True),
    Verdict.PIN_THREAD_BOUND: ("h200_pin_bound", "pinned_nb/bs96/w12", True),
    Verdict.HIDDEN_STAGING: ("h200_default", "pageable/bs1024/w4", False),
    Verdict.NON_BLOCKING_PAGEABLE: ("h200_default", "pageable_nb/bs1024/w4", False),
    Verdict.HOST_BLOCKED: ("h200_default", "pinned/bs64/w4", True),
    Verdict.GPU_IDLE: ("h200_gpu_bound", "pinned_nb/bs128/w12", True),
    Verdict.CPU_WORK_BOUND: ("h200_better", "pinned_nb/bs1024/w6", True),
    Verdict.COMPUTE_BOUND: ("h200_gpu_bound", "prefetch/bs64/w12", True),
    Verdict.TOO_SMALL: ("h200_default", "pinned_nb/bs64/w4", True),
    Verdict.GC_PAUSES: ("cpu_gc_pauses", "Annotated/bs32/w0", False),
    Verdict.HOST_BOUND: ("h200_short_step", "Images/bs128/w12", True),
    Verdict.BETWEEN_STEPS: ("h200_resnet_process", "Images/bs256/w12", True),
}


@pytest.mark.parametrize("verdict", list(FIRES), ids=lambda v: v.value)
def test_each_rule_fires_on_its_recorded_case(verdict: Verdict) -> None:
    folder, scenario, top = FIRES[verdict]
    d = diagnosed(folder)[scenario]
    assert verdict in verdicts(d), (scenario, verdicts(d))
    if top:
        assert d.verdict == verdict, (scenario, verdicts(d))


def test_every_rule_is_an_object_with_its_conditions_in_words_and_a_recorded_case() -> None:
    # layout: test_layout_copy_on_a_recorded_row_made_non_dense; no copy: a recorded H200 scenario with its
    # copies taken out (test_diagnose.test_a_gpu_run_that_copied_nothing_is_not_told_to_use_a_gpu); pinned
    # memory bypassed: test_dense, on a recorded loop given a non-dense leaf
    covered = set(FIRES) | {Verdict.LAYOUT_COPY, Verdict.NO_COPY, Verdict.PINNED_BYPASSED}
    for rule in RULES:
        assert rule.verdict in covered and rule.when and callable(rule.fires) and callable(rule.evidence)


def test_gpu_idle_kind_quotes_the_copy_that_nothing_ran_under() -> None:
    d = diagnosed("h200_gpu_bound")["pinned_nb/bs128/w12"]
    finding = d.findings[0]
    assert "issued after the previous step has finished" in finding.evidence
    (change,) = finding.changes
    assert change.sets == {"mode": "prefetch"}
    assert change.gain_ms == pytest.approx(d.means["wait"], rel=0.05)


def test_host_blocked_kind_is_a_blocking_copy_not_a_gpu_idle_one() -> None:
    d = diagnosed("h200_default")["pinned/bs64/w4"]
    assert Verdict.GPU_IDLE not in verdicts(d)
    assert "the host is blocked" in d.findings[0].evidence
    assert {c.sets["mode"] for c in d.findings[0].changes} == {"pinned_nb", "prefetch"}


def test_pin_bound_names_its_cause_and_the_loader_advice_is_withheld() -> None:
    d = diagnosed("h200_pin_bound")["pinned_nb/bs96/w12"]
    assert Verdict.LOADER_BOUND not in verdicts(d)  # more workers cannot help a pin-bound loop
    ev = d.findings[0].evidence
    assert "the copy itself" in ev and "GB/s on one core" in ev and "first to touch" in ev
    assert d.findings[0].changes[0].sets == {"mode": "staged"}
    # the loader wait comes in bursts: the median batch waits almost nothing, the mean is the pace
    tl = read_timeline(DATA / "h200_pin_bound")
    fetch = tl[~tl.warmup].fetch_ms
    assert fetch.median() < 0.1 * fetch.mean() and d.means["fetch"] == pytest.approx(fetch.mean())


def test_headline_classes_on_recorded_loops() -> None:
    assert diagnosed("h200_naive")["pageable/bs64/w0"].headline.bound == InputBound.HIGHLY
    assert diagnosed("h200_pin_bound")["pinned_nb/bs96/w12"].headline.bound == InputBound.HIGHLY
    bound = diagnosed("h200_gpu_bound")
    assert bound["pinned_nb/bs128/w12"].headline.bound == InputBound.MODERATELY
    for scen in ("prefetch/bs64/w12", "prefetch/bs128/w12", "pinned_nb/bs64/w12"):
        h = bound[scen].headline
        assert h.bound in (InputBound.NOT, InputBound.NOT_SETTLED) and "GPU compute sets the pace" in h.text, (
            scen,
            h.text,
        )
        assert h.input_share < 0.05 and h.share_lo <= h.input_share <= h.share_hi
        if h.bound == InputBound.NOT_SETTLED:  # its batches' interval reaches past the 5% boundary
            assert h.share_hi >= 0.05 and h.text.startswith("not settled: not or moderately input bound")
            assert "95% interval" in h.text
        else:
            assert h.share_hi < 0.05
    assert diagnosed("h200_default")["pinned_nb/bs1024/w4"].headline.bound == InputBound.HIGHLY
    better = diagnosed("h200_better")["pinned_nb/bs1024/w6"].headline
    # 4.6% of the batch, its batches' interval 0.9-8.3%: a class it cannot settle, said with the pace
    assert better.bound == InputBound.NOT_SETTLED and "CPU work sets the pace" in better.text
    assert better.share_lo < 0.05 < better.share_hi and "95% interval 0.9%-8.3%" in better.text


def test_an_unmodified_resnet_script_is_told_that_its_copy_idles_the_gpu() -> None:
    """``pinprof profile`` of scripts/resnet_train.py on the H200: a 2.9 ms copy issued after each
    step's loss.item(), with nothing for the GPU to run under it."""
    d = diagnosed("h200_profile_resnet")["Images/bs256/w12"]
    assert d.verdict == Verdict.GPU_IDLE, verdicts(d)
    assert d.headline.bound == InputBound.NOT and "GPU compute sets the pace" in d.headline.text
    assert any(c.sets.get("mode") == "prefetch" for f in d.findings for c in f.changes)
    tl = read_timeline(DATA / "h200_profile_resnet")
    med = tl[~tl.warmup][["wait_ms", "gpu_idle_ms", "h2d_ms"]].median()
    assert med.wait_ms >= 0.8 * med.h2d_ms and med.gpu_idle_ms >= 0.9 * med.h2d_ms


def test_prefetch_brings_the_gpu_idle_transfer_to_zero_on_the_h200() -> None:
    tl = read_timeline(DATA / "h200_gpu_bound")
    med = tl[~tl.warmup].groupby("scenario")[["gpu_idle_ms", "wait_ms", "h2d_ms"]].median()
    for bs in (64, 128):
        before, after = med.loc[f"pinned_nb/bs{bs}/w12"], med.loc[f"prefetch/bs{bs}/w12"]
        assert before.gpu_idle_ms >= 0.9 * before.h2d_ms
        assert after.gpu_idle_ms <= 0.01 * before.gpu_idle_ms and after.wait_ms <= 0.01 * before.wait_ms


@pytest.mark.parametrize("folder", RECORDED)
def test_no_remedy_is_one_already_in_place(folder: str) -> None:
    tl = read_timeline(DATA / folder)
    for scen, d in diagnosed(folder).items():
        cfg = tl[tl.scenario == scen].iloc[0]
        now = {"mode": d.mode, "pin_memory": bool(cfg.pin_memory), "non_blocking": bool(cfg.non_blocking)}
        for f in d.findings:
            for c in f.changes:
                assert not c.sets or any(now.get(k) != v for k, v in c.sets.items()), (scen, f.verdict, c.what)
                assert f"(mode {d.mode})" not in c.what, (scen, c.what)


def test_a_prefetch_loop_still_idle_is_told_to_send_fewer_bytes_not_to_prefetch() -> None:
    tl = read_timeline(DATA / "h200_gpu_bound")
    tl = tl[tl.scenario == "prefetch/bs128/w12"].copy()
    tl["gpu_idle_ms"], tl["wait_ms"] = tl.h2d_ms, tl.h2d_ms  # as if the copy outlasted the step
    d = diagnose(tl)[0]
    idle = next(f for f in d.findings if f.verdict == Verdict.GPU_IDLE)
    assert [c.sets for c in idle.changes] == [{}] and "send fewer bytes" in idle.changes[0].what


def pin_case(**cols: float) -> Diagnosis:
    tl = read_timeline(DATA / "h200_pin_bound")
    for col, value in cols.items():
        tl[col] = value
    return diagnose(tl)[0]


def test_pin_thread_waiting_for_the_gil_gets_the_gil_remedies() -> None:
    d = pin_case(pin_cpu_ms=2.0)  # of a 17 ms pin: the thread ran 2 ms and waited the rest
    f = d.findings[0]
    assert f.verdict == Verdict.PIN_THREAD_BOUND and "waited" in f.evidence and "GIL" in f.evidence
    whats = " | ".join(c.what for c in f.changes)
    assert "prefetch_factor (now 2)" in whats and "fewer, larger batches" in whats
    assert "send fewer bytes" not in whats


def test_pin_thread_allocating_pinned_memory_gets_the_reserve_setting() -> None:
    d = pin_case(pin_alloc_ms=8.0, pin_allocs=1)
    f = d.findings[0]
    assert "page-locked allocation" in f.evidence
    (reserve,) = [c for c in f.changes if "pinned_reserve_segment_size_mb" in c.what]
    # 12 workers x prefetch 2 + 2 batches of 55.1 MiB alive at once
    assert "pinned_reserve_segment_size_mb:1434 " in reserve.what
    assert reserve.gain_ms == pytest.approx(8.0)


def test_layout_copy_on_a_recorded_row_made_non_dense() -> None:
    tl = read_timeline(DATA / "h200_default")
    tl = tl[tl.scenario == "pinned_nb/bs1024/w4"].copy()
    tl["layout_ms"] = 0.05 * tl.batch_ms.mean()
    d = diagnose(tl)[0]
    (f,) = [f for f in d.findings if f.verdict == Verdict.LAYOUT_COPY]
    # no leaf named (a matrix run): the change says where to make the tensors dense all the same
    assert "dense in the DataLoader workers" in f.changes[0].what and "collate_fn" in f.changes[0].what


def test_modes_are_not_compared_on_a_cpu_run() -> None:
    """With no GPU the modes copy nothing to a device and pin nothing: their differences are the
    loader's noise (a CPU run read 1.8x between modes that do the same thing), so one line says why
    they are not compared."""
    (line,) = compare_modes(read_timeline(DATA / "cpu_default"))
    assert line.startswith("modes not compared on the CPU") and "do the same work" in line


def test_a_real_difference_on_the_h200_is_beyond_the_noise() -> None:
    lines = compare_modes(read_timeline(DATA / "h200_gpu_bound"))
    (bs128,) = [x for x in lines if x.startswith("prefetch/bs128/w12 vs pinned_nb/bs128/w12")]
    assert "beyond the batch-to-batch noise" in bs128


def test_a_constant_difference_with_no_spread_is_beyond_it() -> None:
    tl = read_timeline(DATA / "cpu_default")
    tl = tl[tl["mode"].isin(["pageable", "pinned_nb"])].copy()
    tl["device"] = "cuda:0"  # the arithmetic of a GPU run's comparison, on recorded rows
    tl.loc[tl["mode"] == "pageable", "batch_ms"] = 10.0
    tl.loc[tl["mode"] == "pinned_nb", "batch_ms"] = 10.1
    (line,) = compare_modes(tl)
    assert "beyond the batch-to-batch noise (+/-0.000 ms)" in line


def test_gpu_idle_is_the_copy_after_the_previous_compute_end() -> None:
    h2d_s = np.array([0.0, 10.0, 20.0, 30.0])
    h2d_e = h2d_s + 2.0
    comp_e = np.array([5.0, 21.0, np.nan, 40.0])  # batch 2's copy runs under batch 1's compute to 21
    got = gpu_idle(h2d_s, h2d_e, comp_e)
    assert np.isnan(got[0]) and got[1] == 2.0 and got[2] == 1.0 and np.isnan(got[3])
    assert gpu_idle(h2d_s, h2d_e, np.array([15.0, 40.0, 40.0, 40.0]))[1:].tolist() == [0.0, 0.0, 0.0]


def test_json_gives_the_headline(tmp_path: Path) -> None:
    from profiler.render.json import diagnosis_json

    out = diagnosis_json(list(diagnosed("h200_gpu_bound").values()))
    heads = {d["scenario"]: d["headline"] for d in out}
    assert heads["prefetch/bs64/w12"]["class"] == "not_input_bound"
    assert 0 <= heads["prefetch/bs64/w12"]["input_share"] < 0.05
    assert pd.notna(heads["pinned_nb/bs128/w12"]["input_share"])


def test_a_short_step_is_told_the_host_sets_its_pace_and_how_to_cut_its_launches() -> None:
    """``h200_short_step``: a four-layer CNN on 96x96 images, 7.1 ms a batch, its kernels busy 1.3 ms
    of it (CUPTI's records): the host's launches set the pace, not the GC pause nor the copy."""
    d = diagnosed("h200_short_step")["Images/bs128/w12"]
    assert "the host's launches set the pace" in d.headline.text and d.headline.bound == InputBound.NOT
    top = d.findings[0]
    assert top.verdict == Verdict.HOST_BOUND and "waited between them" in top.evidence
    tl = read_timeline(DATA / "h200_short_step")
    steady = tl[~tl.warmup]
    gap = (steady.compute_end_ms - steady.compute_start_ms - steady.compute_ms).clip(lower=0).mean()
    assert gap > 0.5 * d.means["batch"]
    assert [c.gain_ms for c in top.changes] == pytest.approx([gap, gap, 0.0])
    assert "reduce-overhead" in top.changes[0].what and "torch.compile" in top.changes[1].what


def test_the_host_rule_gives_the_time_a_launch_from_the_rows_kernel_count() -> None:
    """The same short step's kernels a row, as CUPTI's records of it give them (its recorded buffers,
    ``tests/data/h200_thread_queues``, replayed: 108 a step), set on ``h200_short_step``'s rows, which
    predate the column: the evidence says how many launches the span held, and one every span / count.
    Without the count (an older file, the events) it says neither."""
    store, _, batches, last = cupti_replay.replay_live(
        *cupti_replay.load(DATA / "h200_thread_queues" / "recording.npz")
    )
    covered = [b["row"] for b in batches if b["windows"] and b["windows"][-1][1] < min(last)]
    count = int(np.median(store.columns()["comp_kernels"][covered]))
    tl = read_timeline(DATA / "h200_short_step")
    assert tl.kernels.isna().all()
    (plain,) = diagnose(tl, None, 16)
    assert plain.findings[0].verdict == Verdict.HOST_BOUND and "launch every" not in plain.findings[0].evidence
    (d,) = diagnose(tl.assign(kernels=pd.array([count] * len(tl), dtype="Int64")), None, 16)
    top = d.findings[0]
    steady = tl[~tl.warmup]
    span = (steady.compute_end_ms - steady.compute_start_ms).clip(lower=steady.compute_ms).mean()
    assert top.verdict == Verdict.HOST_BOUND and f"({count} kernels: one launch every" in top.evidence
    said = float(top.evidence.split("one launch every ")[1].split(" us")[0])
    assert said == pytest.approx(1e3 * span / count, abs=0.06), (said, span, count)


def test_the_host_rule_needs_cuptis_busy_time_and_a_gpu_that_is_not_busy() -> None:
    # The same batches timed by events: compute_ms would be a span that holds the launch gaps.
    tl = read_timeline(DATA / "h200_short_step")
    tl["gpu_clock"] = "events"
    (d,) = diagnose(tl, None, 16)
    assert Verdict.HOST_BOUND not in verdicts(d) and "launches set the pace" not in d.headline.text
    # CUPTI-timed loops whose GPU work sets the pace (the rows check's Accelerate and timm loops)
    for loop in ("accelerate", "timm"):
        (d,) = diagnose(read_timeline(DATA / "h200_rows" / loop), None, 16)
        assert set(read_timeline(DATA / "h200_rows" / loop).gpu_clock) == {"cupti"}
        assert Verdict.HOST_BOUND not in verdicts(d) and "GPU compute sets the pace" in d.headline.text, loop


def test_a_launch_bound_step_timed_by_events_is_said_to_be_an_event_span() -> None:
    """``h200_short_step`` as ``pinprof profile``'s default would record it: its copies CUPTI's, its
    step a span of CUDA events (the kernels' first start to last end, launch gaps in it). The headline
    cannot tell the gaps from the kernels' work, so it says GPU compute sets the pace as a span and how
    to tell them apart, never that the host's launches set it; with CUPTI's kernel records it does."""
    from profiler.analysis.headline import SPAN

    tl = read_timeline(DATA / "h200_short_step")
    (d,) = diagnose(tl, None, 16)
    assert "launches set the pace" in d.headline.text and SPAN not in d.headline.text
    tl["gpu_clock"] = "cupti/events"
    tl["compute_ms"] = tl.compute_end_ms - tl.compute_start_ms
    tl["kernels"] = pd.NA
    (d,) = diagnose(tl, None, 16)
    h = d.headline.text
    assert "GPU compute sets the pace" in h and h.endswith(SPAN) and "launches set the pace" not in h, h
    assert Verdict.HOST_BOUND not in verdicts(d)


def _idle_after_steps(tl: pd.DataFrame) -> pd.Series:
    """Per steady row, from the timeline's own columns: the step's last kernel to the row's end or to the
    next row's first copy or kernel, less its garbage collection (what BETWEEN_STEPS reads)."""
    steady = tl[~tl.warmup].reset_index(drop=True)
    nxt = steady.h2d_start_ms.combine(steady.compute_start_ms, min).shift(-1)
    end = steady.batch_end_ms.where(nxt.isna() | (steady.batch_end_ms <= nxt), nxt)
    return ((end - steady.compute_end_ms).clip(lower=0) - steady.gc_ms.fillna(0)).clip(lower=0)


def test_resnet50_is_told_the_gpu_waits_for_the_host_between_steps_and_how_much() -> None:
    """``h200_resnet_process``: resnet50 under ``pinprof profile`` on the H200, kernels busy 53.3 ms of a
    76.3 ms mean batch. The headline said only "GPU compute sets the pace" (70%); after each step's last
    kernel the GPU then had nothing to run for about 10 ms while the host got to the next batch."""
    d = diagnosed("h200_resnet_process")["Images/bs256/w12"]
    tl = read_timeline(DATA / "h200_resnet_process")
    assert set(tl[~tl.warmup].gpu_clock) == {"cupti"}
    after = _idle_after_steps(tl).mean()
    assert 8.0 < after < 12.0  # what the recording holds: about 10 ms of a 76 ms batch
    top = d.findings[0]
    assert top.verdict == Verdict.BETWEEN_STEPS and f"{after:.3f} ms of the mean" in top.evidence
    assert "loss.item()" in top.changes[0].what and top.changes[0].gain_ms == pytest.approx(after)
    # the GC pause (255 ms in one batch) stays the GC rule's, not counted again as a wait
    assert Verdict.GC_PAUSES in verdicts(d) and after < d.means["batch"] - d.means["compute"] - d.means["gc"]
    steady = tl[~tl.warmup]
    gap = (steady.compute_end_ms - steady.compute_start_ms - steady.compute_ms).clip(lower=0).mean()
    h = d.headline.text
    assert "GPU compute sets the pace" in h and f"for {gap + after:.3f} ms of it" in h, h
    assert f"{gap:.3f} ms between the step's kernels, {after:.3f} ms after its last one" in h


def test_the_gpu_waiting_between_steps_is_not_said_of_loops_that_queue_ahead_or_of_the_events() -> None:
    # CUPTI-timed loops whose next copy or step was queued before the step ended: the rows check's
    # Accelerate and timm loops (timm's kernels' span is longer than its batch: steps overlap).
    for loop in ("accelerate", "timm"):
        (d,) = diagnose(read_timeline(DATA / "h200_rows" / loop), None, 16)
        assert Verdict.BETWEEN_STEPS not in verdicts(d) and "waits for the host" not in d.headline.text, loop
    # the resnet50 recording timed by events: no busy time, so no wait is told
    tl = read_timeline(DATA / "h200_resnet_process")
    tl["gpu_clock"] = "events"
    (d,) = diagnose(tl, None, 16)
    assert Verdict.BETWEEN_STEPS not in verdicts(d) and "waits for the host" not in d.headline.text
    # a copy of the next batch queued before the step's end bounds the wait: with each row's copy moved
    # to 1 ms after the previous step's last kernel, at most 1 ms a batch is left
    tl = read_timeline(DATA / "h200_resnet_process")
    tl["h2d_start_ms"] = tl.compute_end_ms.shift(1) + 1.0
    assert _idle_after_steps(tl).iloc[:-1].max() <= 1.0 + 1e-9
    (d,) = diagnose(tl, None, 16)
    assert Verdict.BETWEEN_STEPS not in verdicts(d)


@pytest.mark.parametrize("loop", ["lightning-val", "zipped"])
def test_gpu_compute_longer_than_the_batch_is_said_so_not_as_100_percent(loop: str) -> None:
    """``h100_rows``: the rows check's Lightning loop with a validation loader, and two loaders zipped, on
    an H100. A step's kernels run on after its row ends, so over the steady rows the kernels' mean is
    longer than the rows'; the headline said "8.745 ms of the mean 7.567 ms batch (100%)"."""
    for scen, d in diagnosed(f"h100_rows/{loop}").items():
        comp, batch = d.means["compute"], d.means["batch"]
        if comp < 0.5 * batch:
            continue  # lightning-val's validation loader: no matmuls in its step
        assert comp > 1.01 * batch, (scen, comp, batch)  # what the recording holds
        said = f"GPU compute sets the pace: {comp:.3f} ms a batch, more than the mean {batch:.3f} ms batch"
        assert said in d.headline.text and "(100%)" not in d.headline.text, d.headline.text
        verdict = next(f for f in d.findings if f.verdict == Verdict.COMPUTE_BOUND)
        assert f"takes {comp:.3f} ms a batch, more than the mean {batch:.3f} ms batch" in verdict.evidence


def test_a_saving_too_small_to_matter_does_not_lead_a_loop_its_gpu_compute_paces() -> None:
    """``h100_rows/lightning-val``'s training loader: Lightning copies its pageable batches with
    non_blocking=True, and the loop waits 0.056 ms a 7.567 ms batch for them. That finding stays, with
    its change and saving, after the verdict that GPU compute sets the pace."""
    d = diagnosed("h100_rows/lightning-val")["TensorDataset/bs64/w0"]
    order = [f.verdict for f in d.findings]
    assert order[0] == Verdict.COMPUTE_BOUND, order
    nb = next(f for f in d.findings if f.verdict == Verdict.NON_BLOCKING_PAGEABLE)
    assert 0 < nb.gain_ms < 0.01 * d.means["batch"] and "pin_memory=True" in nb.changes[0].what
    # A saving of 1% of the batch or more still leads a loop its GPU compute paces: resnet50's 9.99 ms
    # of GPU idle between steps in a 76.3 ms batch (70% of it kernels) comes before "compute bound".
    resnet = diagnosed("h200_resnet_process")["Images/bs256/w12"]
    assert resnet.findings[0].verdict == Verdict.BETWEEN_STEPS
    assert resnet.findings[0].gain_ms >= 0.01 * resnet.means["batch"] and Verdict.COMPUTE_BOUND in verdicts(resnet)
