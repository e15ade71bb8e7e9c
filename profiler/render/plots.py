"""PNG pictures of a report: per-batch Gantt, per-scenario stacked medians, bandwidth versus size.

matplotlib is imported here, where it is used, with the non-interactive Agg backend. A picture is
drawn into memory and written through ``profiler.atomic`` (never through a planted link). Each holds
at most ``MAX_SCENARIOS`` scenarios, the first ones, and says how many it left out: 1,000 scenarios
took 252 s and made a 182-megapixel PNG that Pillow refuses to open. Names are cut to
``MAX_LABEL`` characters in the pictures.
"""

from __future__ import annotations

import io
import math
from pathlib import Path

import numpy as np
import pandas as pd

from profiler.atomic import check_target, read_bounded, write_bytes_atomic
from profiler.errors import MissingDependencyError, ReportError, UsageError
from profiler.render.lanes import LANES, intervals, with_labels
from profiler.render.palette import COLORS
from profiler.units import format_size

LABELS = {
    "fetch": "fetch (wait on loader)",
    "pin": "pin (pin thread; inside fetch when num_workers=0)",
    "stage": "stage (explicit memcpy)",
    "layout": "layout (made contiguous on the host)",
    "h2d": "h2d (copy on GPU)",
    "hidden_stage": "hidden staging (driver)",
    "dma": "DMA",
    "cpu_work": "CPU work",
    "compute": "GPU compute",
    "wait": "wait for copy (exposed)",
    "other": "other",
}


def _plt():  # type: ignore[no-untyped-def]
    try:
        import matplotlib
    except ImportError as err:
        raise MissingDependencyError("plots need matplotlib: pip install matplotlib") from err
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


MAX_SCENARIOS = 12
MAX_LABEL = 60
MAX_BANDWIDTH_BYTES = 16 << 20


def _short(name: object) -> str:
    text = str(name)
    return text if len(text) <= MAX_LABEL else text[: MAX_LABEL - 3] + "..."


def _measured(tl: pd.DataFrame) -> tuple[pd.DataFrame, list[str], int]:
    """(the steady-state rows of the first ``MAX_SCENARIOS`` scenarios, their names, how many more there
    were); refuses a timeline whose every row is warm-up."""
    rows = tl[~tl.warmup.astype(bool)]
    if rows.empty:
        raise UsageError(f"all {len(tl)} rows are warm-up: no measured batch to draw (lower --skip, or run longer)")
    names = list(dict.fromkeys(rows.scenario))
    kept = names[:MAX_SCENARIOS]
    return rows[rows.scenario.isin(kept)], kept, len(names) - len(kept)


def _save(fig: object, path: Path, tight: bool = False) -> Path:
    """``tight``: the canvas grows to hold what lies outside the axes (a legend below them), so that
    nothing is cut at an edge."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight" if tight else None)  # type: ignore[attr-defined]
    _plt().close(fig)
    write_bytes_atomic(path, buf.getvalue())
    return path


def _label(phase: str, tl: pd.DataFrame) -> str:
    """The legend's name of a phase; compute on a CPU device is the host clock's, not the GPU's."""
    if phase == "compute" and not tl.device.astype(str).str.startswith("cuda").any():
        return "compute (host clock, no GPU)"
    return LABELS[phase]


def gantt(tl: pd.DataFrame, path: Path, first: int = 6) -> Path:
    """The first ``first`` steady batches of each scenario, one panel each, on one x scale (ms from
    each panel's first batch), clipped to those batches: a pin that ran seconds ahead during the
    start-up would otherwise take the width. Lanes with nothing in any panel (the GPU's on a CPU) are
    left out."""
    plt = _plt()
    measured, scen, more = _measured(tl)
    rows = with_labels(measured)
    rows = rows[rows.groupby("scenario", sort=False).cumcount() < first]
    iv = intervals(rows)
    lanes = [lane for lane in LANES if (iv.lane == lane).any()] or list(LANES)
    t0 = rows.groupby("scenario", sort=False).batch_start_ms.min()
    span = float((rows.groupby("scenario", sort=False).batch_end_ms.max() - t0).max())
    height = 1.2 + (0.35 * len(lanes) + 0.55) * len(scen)
    fig, axes = plt.subplots(len(scen), 1, figsize=(12, height), squeeze=False, sharex=True)
    used: set[str] = set()
    for ax, name in zip(axes[:, 0], scen):
        part = iv[iv.scenario == name]
        start = (part.start_ms - t0[name]).clip(lower=0.0)
        end = (part.end_ms - t0[name]).clip(upper=span)
        for r, s, e in zip(part.itertuples(), start, end):
            if e <= s:
                continue
            ax.barh(lanes.index(r.lane), e - s, left=s, height=0.7, color=COLORS[r.phase], edgecolor="none")
            used.add(r.phase)
        for b in rows[rows.scenario == name].batch_start_ms:
            ax.axvline(b - t0[name], color="#999999", lw=0.6, ls=":")
        if span > 0 and math.isfinite(span):  # none: batches with no start or end, or of no length
            ax.set_xlim(0, span)
        ax.set_yticks(range(len(lanes)), lanes, fontsize=8)
        ax.invert_yaxis()
        ax.set_title(_short(name), fontsize=9, loc="left")
        ax.tick_params(axis="x", labelsize=8)
    axes[-1, 0].set_xlabel(
        f"ms from each panel's first steady batch ({first} batches, one scale); dotted lines: batch starts"
        + (f"; {more} more scenario(s) not drawn" if more else "")
    )
    handles = [plt.Rectangle((0, 0), 1, 1, color=COLORS[p]) for p in COLORS if p in used]
    if handles:  # none where no phase had a length to draw
        fig.legend(
            handles,
            [_label(p, rows) for p in COLORS if p in used],
            loc="upper center",
            ncol=min(5, len(handles)),
            fontsize=8,
            frameon=False,
        )
    else:
        fig.suptitle("no phase of these batches has a start and an end to draw", fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.45 / height))
    return _save(fig, path)


MAIN_STACK = ("fetch", "stage", "layout", "wait", "cpu_work")


def stacked(tl: pd.DataFrame, path: Path) -> Path:
    """Median main-thread time per batch by phase, one bar per scenario; h2d, pin and compute marked."""
    plt = _plt()
    measured, _, more = _measured(tl)
    rows = with_labels(measured)
    med = rows.groupby("scenario", sort=False)[
        [f"{p}_ms" for p in (*MAIN_STACK, "batch", "h2d", "pin", "compute")]
    ].median()
    med = med.fillna(0.0)
    # "other" is measured per batch (its time minus its main-thread phases), then its median taken: a
    # median of batch times minus the sum of the phases' medians is no batch's time at all.
    per_batch = rows.batch_ms - rows[[f"{p}_ms" for p in MAIN_STACK]].fillna(0.0).sum(axis=1)
    other_b = per_batch.clip(lower=0)
    # Where the GPU's step is timed on the host's clock, the part of that time during which the step
    # ran is named: mostly the main thread waiting for it (loss.item(), a synchronize).
    gpu = rows.device.astype(str).str.startswith("cuda").to_numpy()
    under = np.where(gpu, np.fmin(other_b.to_numpy(float), rows.compute_ms.fillna(0.0).to_numpy(float)), 0.0)
    waiting = (
        pd.Series(under, index=rows.index).groupby(rows.scenario, sort=False).median().reindex(med.index).fillna(0.0)
    )
    other = (other_b - under).groupby(rows.scenario, sort=False).median().reindex(med.index).fillna(0.0).clip(lower=0)
    fig, ax = plt.subplots(figsize=(11, 1.2 + 0.5 * len(med)))
    y = np.arange(len(med))
    left = np.zeros(len(med))
    for p in MAIN_STACK:
        ax.barh(y, med[f"{p}_ms"], left=left, color=COLORS[p], label=LABELS[p], height=0.6)
        left += med[f"{p}_ms"].to_numpy()
    if (waiting > 0).any():
        ax.barh(
            y,
            waiting,
            left=left,
            color="#6b6b6b",
            label="main thread while GPU compute runs (waiting on it, e.g. loss.item())",
            height=0.6,
        )
        left += waiting.to_numpy()
    ax.barh(
        y, other, left=left, color=COLORS["other"], label="other main-thread time (the script's own code)", height=0.6
    )
    for p, marker in (("h2d", "|"), ("pin", "x"), ("compute", "^")):
        vals = med[f"{p}_ms"]
        ax.scatter(
            vals.where(vals > 0),
            y,
            marker=marker,
            color=COLORS[p],
            s=60,
            zorder=3,
            label=f"{_label(p, rows)} (median, not stacked)",
        )
    ax.set_yticks(y, [_short(n) for n in med.index], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("median time per batch (ms)" + (f"; {more} more scenario(s) not drawn" if more else ""))
    ax.set_title("Where each batch's time goes (main thread stacked; markers: other threads/streams)", fontsize=10)
    ax.legend(
        fontsize=7,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.6 / (1.2 + 0.5 * len(med)) - 0.08),
        ncol=3,
        frameon=False,
    )
    fig.set_figheight(2.4 + 0.5 * len(med))
    return _save(fig, path, tight=True)


def bandwidth(sweep: pd.DataFrame, path: Path, link_GBps: float | None = None) -> Path:
    """GB/s versus transfer size for every measured method (bandwidth.csv)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 4.8))
    for method, g in list(sweep.groupby("method", sort=False))[:MAX_SCENARIOS]:
        g = g.sort_values("bytes")
        ax.plot(g.bytes, g.GBps, marker="o", ms=3, label=_short(method))
    if link_GBps:
        ax.axhline(link_GBps, color="k", ls="--", lw=1, label=f"link limit {link_GBps:.0f} GB/s")
    ax.set_xscale("log", base=2)
    ticks = sweep.bytes.drop_duplicates().sort_values()
    ax.set_xticks(ticks, [format_size(b) for b in ticks], rotation=45, fontsize=7)
    ax.set_xlabel("transfer size")
    ax.set_ylabel("bandwidth (GB/s, 1e9 bytes)")
    ax.set_title("Host-device copy bandwidth by method (median of repeats)", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return _save(fig, path)


def read_sweep(path: Path) -> pd.DataFrame:
    """A ``bandwidth.csv`` (method, bytes, GBps), checked: refused in one line if it is not one."""
    raw = read_bounded(path, MAX_BANDWIDTH_BYTES, "bandwidth sweep CSV")
    try:
        sweep = pd.read_csv(io.BytesIO(raw))
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError) as err:
        raise ReportError(f"{path}: not a bandwidth CSV ({str(err).splitlines()[0][:200]})") from err
    missing = [c for c in ("method", "bytes", "GBps") if c not in sweep]
    if missing:
        raise ReportError(f"{path}: missing column(s) {', '.join(missing)}; not a `pinprof bandwidth` sweep")
    values = sweep[["bytes", "GBps"]].apply(pd.to_numeric, errors="coerce").to_numpy(float)
    if not len(sweep) or not (np.isfinite(values).all() and (values > 0).all() and (values[:, 0] < 2**53).all()):
        raise ReportError(f"{path}: bytes and GBps must be positive finite numbers in every row")
    return sweep.assign(bytes=values[:, 0], GBps=values[:, 1], method=sweep.method.astype(str))


def write_all(tl: pd.DataFrame, out: Path, source: Path | None = None, first: int = 6) -> list[Path]:
    """The report's pictures into ``out``; the bandwidth chart only where the report folder
    (``source``, default ``out``) holds a sweep."""
    source = source or out
    for name in ("gantt.png", "phases.png"):
        check_target(out / name)  # a planted link or FIFO is refused before anything is drawn
    made = [gantt(tl, out / "gantt.png", first=first), stacked(tl, out / "phases.png")]
    sweep = source / "bandwidth.csv"
    if sweep.exists() or sweep.is_symlink():
        made.append(bandwidth(read_sweep(sweep), out / "bandwidth.png"))
    return made
