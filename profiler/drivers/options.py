"""What ``pinprof run`` varies: the options, the scenario matrix they span, and the report folder."""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from profiler.errors import OutputExistsError
from profiler.modes import MODES, Mode
from profiler.report.claim import claim


@dataclass
class RunOptions:
    """Everything ``pinprof run`` varies; lists are axes whose cross product is run."""

    modes: list[Mode] = field(default_factory=lambda: list(MODES))
    batch_sizes: list[int] = field(default_factory=lambda: [64, 1024])
    num_workers: list[int] = field(default_factory=lambda: [min(4, os.cpu_count() or 1)])
    prefetch_factors: list[int] = field(default_factory=lambda: [2])
    cpu_work_ms: list[float] = field(default_factory=lambda: [2.0])
    compute_ms: list[float] = field(default_factory=lambda: [2.0])
    batches: int | None = 40
    epochs: int | None = None
    skip: int | None = None  # None: start-up batches found in the data (profiler.analysis.warmup)
    dataset: str = "synthetic"
    data_root: str | None = None
    download: bool = False
    image_size: int | None = None
    dataset_size: int = 50_000
    device: str | None = None
    out: Path | None = None
    force: bool = False
    nvtx: bool = True
    calibrate: bool = True
    plots: bool = True
    progress: bool | None = None


@dataclass(frozen=True)
class Scenario:
    mode: Mode
    batch_size: int
    num_workers: int
    prefetch_factor: int
    cpu_work_ms: float
    compute_ms: float
    name: str


def scenarios(opts: RunOptions) -> list[Scenario]:
    """The cross product of the axes; names show the mode and every axis that varies."""
    out = []
    for mode, bs, nw, pf, cpu, gpu in itertools.product(
        opts.modes, opts.batch_sizes, opts.num_workers, opts.prefetch_factors, opts.cpu_work_ms, opts.compute_ms
    ):
        parts = [mode, f"bs{bs}", f"w{nw}"]
        if len(opts.prefetch_factors) > 1:
            parts.append(f"pf{pf}")
        if len(opts.cpu_work_ms) > 1:
            parts.append(f"cpu{cpu:g}ms")
        if len(opts.compute_ms) > 1:
            parts.append(f"gpu{gpu:g}ms")
        out.append(Scenario(mode, bs, nw, pf, cpu, gpu, "/".join(parts)))
    return out


def prepare_out(out: Path | None, force: bool) -> Path:
    """Create and claim the report folder (``profiler.report.claim``); refuse a non-empty one unless
    ``force``, and one another live run holds even then."""
    if out is None:
        stamp = pd.Timestamp.now().strftime("%Y%m%d-%H%M%S")
        out = Path("reports") / f"run-{stamp}"
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())) and not force:
        raise OutputExistsError(
            f"--out {str(out)!r} already exists and is not empty; choose another folder or pass --force to overwrite it"
        )
    claim(out, "--out")  # a second run on the same folder is refused from here on (released when the run ends)
    return out
