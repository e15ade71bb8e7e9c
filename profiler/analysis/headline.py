"""The headline of a scenario's diagnosis: is the loop input bound, and if not, what sets its pace.

Every figure is a mean over the steady batches (``profiler.analysis.diagnose``), and the text says so.
Input share = (loader wait + exposed transfer) / batch time, the share of each batch the loop spends
waiting for its input. The classes and thresholds are TensorBoard's input-pipeline analyzer's (xprof,
``input_pipeline_analyzer.cc``: ``kHighlyInfeedBoundThresholdInPercent = 20``,
``kModeratelyInfeedBoundThresholdInPercent = 5``), with PyTorch's input: the wait in ``next(loader)``
and the part of the copy nothing hid (``Case.exposed``).
"""

from __future__ import annotations

import numpy as np

from profiler.analysis.findings import Headline, InputBound
from profiler.analysis.rules.base import Case, compute_of_batch, fmt, pct
from profiler.analysis.rules.pace import BETWEEN_SHARE, host_bound

HIGHLY_SHARE = 0.20
MODERATELY_SHARE = 0.05
# A phase of at least this share of the batch sets the pace.
PACE_SHARE = 0.5
# The GPU waiting for the host at least this share of the batch is said beside the pace
# (rules.pace's BETWEEN_SHARE, the same for one part of it).
IDLE_SHARE = BETWEEN_SHARE


# Said where the step's GPU time is an event span: a launch-bound step reads as GPU compute there.
SPAN = (
    ", a span of CUDA events that holds any gaps between the step's kernels too (pinprof profile "
    "--kernels tells the kernels' busy time from them)"
)


def _pace(c: Case) -> str:
    """What the batch time is made of when input is not what the loop waits for."""
    comp, cpu = c.comp, c.cpu
    name = "GPU compute" if c.gpu else "compute (host clock, no GPU)"
    if max(comp, cpu) >= PACE_SHARE * c.batch:
        if comp >= cpu:
            return f"{name} sets the pace: {compute_of_batch(c)}{SPAN if c.event_span else ''}{_idle(c)}"
        return f"the user's CPU work sets the pace: {fmt(cpu)} of the mean {fmt(c.batch)} batch ({pct(cpu, c.batch)}){_idle(c)}"
    if host_bound(c):  # CUPTI's busy time: the GPU waited for the host's launches (rules.pace)
        return (
            f"the host's launches set the pace: the GPU waited {fmt(c.launch_gap)} of the mean "
            f"{fmt(c.batch)} batch ({pct(c.launch_gap, c.batch)}) between the step's kernels, which ran {fmt(comp)}"
        )
    # In a loop that synchronizes each step (loss.item()) the phases run one after the other, so what
    # they leave of the batch is code outside them; where they overlap it is negative and not said.
    rest = c.batch - c.fetch - c.exposed - comp - cpu
    own = c.m.get("pinprof", float("nan"))
    ours = f" ({fmt(own)} of it pinprof's own)" if own == own and own >= 0.01 * c.batch else ""
    untimed = f"; {fmt(rest)} is outside the timed phases{ours}" if rest >= 0.1 * c.batch else ""
    return (
        f"no single phase sets the pace: {name} {pct(comp, c.batch)}, CPU work {pct(cpu, c.batch)} of the "
        f"mean {fmt(c.batch)} batch{untimed}"
    )


def _idle(c: Case) -> str:
    """Where CUPTI's busy times show the GPU waiting for the host at least ``IDLE_SHARE`` of the batch
    (between the step's kernels, and after its last one), the clause that says so: "GPU compute sets
    the pace" alone hid a fifth of resnet50's batch on the H200 (tests/data/h200_resnet_process)."""
    gap, after = c.launch_gap, c.after_step
    if not gap + c.comp <= c.batch:
        # The kernels' span is longer than the batch: steps overlap (a loop that copies or launches
        # ahead), so the span's gaps hold other batches' work, not waits (timm's prefetcher in
        # tests/data/h200_rows read 6.3 ms of "gaps" in a 10 ms batch whose kernels ran 8.8 ms).
        gap = float("nan")
    idle = float(np.nansum([gap, after]))
    if idle < IDLE_SHARE * c.batch:  # NaN parts add nothing
        return ""
    parts = []
    if not np.isnan(gap):
        parts.append(f"{fmt(gap)} between the step's kernels")
    if not np.isnan(after):
        parts.append(f"{fmt(after)} after its last one")
    return f"; for {fmt(idle)} of it ({pct(idle, c.batch)}) the GPU waits for the host: {', '.join(parts)}"


def _class(share: float) -> InputBound:
    if share >= HIGHLY_SHARE:
        return InputBound.HIGHLY
    return InputBound.MODERATELY if share >= MODERATELY_SHARE else InputBound.NOT


_WORDS = {InputBound.HIGHLY: "highly", InputBound.MODERATELY: "moderately", InputBound.NOT: "not"}


def headline(c: Case, interval: tuple[float, float] = (float("nan"), float("nan"))) -> Headline:
    """The scenario's class and the sentence that says it (see the module docstring). ``interval``:
    the input share's 95% interval (``analysis.stats.ratio_interval``): where it spans a class
    boundary the class is not settled, and the sentence names the classes it spans, with the interval;
    a run of one script read 4.9% in one run and 9-10% in four, a class apart."""
    if not c.batch or np.isnan(c.batch):
        return Headline(InputBound.UNKNOWN, float("nan"), "no batch time measured")
    share = min((c.fetch + c.exposed) / c.batch, 1.0)
    parts = f"mean loader wait {fmt(c.fetch)}, exposed transfer {fmt(c.exposed)}"
    lo, hi = (min(max(v, 0.0), 1.0) for v in interval)
    if lo == lo and hi == hi and _class(lo) != _class(hi):
        spans = _spanned(lo, hi)
        return Headline(
            InputBound.NOT_SETTLED,
            share,
            f"not settled: {' or '.join(spans)} input bound: {share:.1%} of the mean {fmt(c.batch)} batch waits "
            f"for input, 95% interval {lo:.1%}-{hi:.1%} ({parts}); {_pace(c)}",
            lo,
            hi,
        )
    if share >= HIGHLY_SHARE:
        return Headline(
            InputBound.HIGHLY,
            share,
            f"highly input bound: {share:.0%} of the mean {fmt(c.batch)} batch waits for input ({parts})",
            lo,
            hi,
        )
    if share >= MODERATELY_SHARE:
        return Headline(
            InputBound.MODERATELY,
            share,
            f"moderately input bound: {share:.0%} of the mean {fmt(c.batch)} batch waits for input ({parts}); {_pace(c)}",
            lo,
            hi,
        )
    return Headline(
        InputBound.NOT, share, f"not input bound ({share:.1%} of the mean batch waits for input): {_pace(c)}", lo, hi
    )


def _spanned(lo: float, hi: float) -> list[str]:
    """The classes' words from ``lo``'s to ``hi``'s, lowest first."""
    order = [InputBound.NOT, InputBound.MODERATELY, InputBound.HIGHLY]
    return [_WORDS[b] for b in order[order.index(_class(lo)) : order.index(_class(hi)) + 1]]
