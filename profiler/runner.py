"""``pinprof run``: profile the scenario matrix and write a report folder.

The report folder holds timeline.csv (one row per batch), summary.csv (one row per scenario),
summary.md, meta.json and, when their modules run, diagnosis.md and plots. The timeline is rewritten
atomically after every scenario, and on Ctrl-C or SIGTERM the batches measured so far are written out
and meta.json says ``"partial": true``.
"""
from __future__ import annotations

import itertools
import os
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from torch.utils.data import DataLoader

from . import datasets, distributed, meta, report_io, summary, timeline
from .clock import now_ms
from .modes import MODES, SPECS, Mode
from .interrupt import Terminated, install_sigterm, restore_sigterm, write_held
from .devices import rank_info, resolve_device
from .recorder import TransferProfiler
from .workload import GpuWork, busy_cpu


class RunFailed(RuntimeError):
    """The loop raised; the partial report was written before this was raised."""


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
    warmup: int = 5
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
    for mode, bs, nw, pf, cpu, gpu in itertools.product(opts.modes, opts.batch_sizes, opts.num_workers,
                                                        opts.prefetch_factors, opts.cpu_work_ms, opts.compute_ms):
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
    """Create the report folder; refuse to overwrite a non-empty one unless ``force``."""
    if out is None:
        stamp = pd.Timestamp.now().strftime("%Y%m%d-%H%M%S")
        out = Path("reports") / f"run-{stamp}"
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())) and not force:
        raise FileExistsError(f"--out {str(out)!r} already exists and is not empty; choose another folder "
                              "or pass --force to overwrite it")
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".pinprof-write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as err:
        raise PermissionError(f"--out {str(out)!r} is not writable ({err.strerror})") from err
    return out


def _progress(total: int | None, desc: str, enabled: bool) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, disable=not enabled, leave=False, unit="batch", dynamic_ncols=True)


def run_scenario(sc: Scenario, dataset: Any, device: torch.device, opts: RunOptions, run: str,
                 origin: float, gpu_work: GpuWork, register: Callable[[TransferProfiler], None]) -> pd.DataFrame:
    """Run one scenario's loop under a profiler and return its timeline."""
    spec = SPECS[sc.mode]
    cuda = device.type == "cuda"
    loader = DataLoader(dataset, batch_size=sc.batch_size, shuffle=False, num_workers=sc.num_workers,
                        pin_memory=spec.pin_memory and cuda, drop_last=True,
                        prefetch_factor=sc.prefetch_factor if sc.num_workers > 0 else None,
                        persistent_workers=False)
    prof = TransferProfiler(sc.mode, device, nvtx=opts.nvtx, run=run, scenario=sc.name, warmup=opts.warmup,
                            origin_ms=origin)
    register(prof)
    per_epoch = len(loader)
    limit = None if opts.epochs else (opts.batches or per_epoch) + opts.warmup
    total = per_epoch * opts.epochs if opts.epochs else limit
    enabled = sys.stdout.isatty() if opts.progress is None else opts.progress
    bar = _progress(total, sc.name, enabled)
    try:
        for _ in range(opts.epochs or 1):
            for batch in prof.batches(loader, limit=limit):
                x, _y = prof.to_device(batch)
                with prof.cpu_work():
                    busy_cpu(sc.cpu_work_ms)
                if sc.compute_ms > 0 and cuda:
                    with prof.compute():
                        loss = gpu_work(x)
                    loss.item()  # a training loop reads its loss: the one sync per step, as users have
                bar.update(1)
                if enabled and bar.n % 10 == 0:
                    bar.set_postfix({k: f"{v:.2f}ms" for k, v in prof.live_medians().items() if v == v}, refresh=False)
    finally:
        bar.close()
        prof.close()
    return prof.timeline()


def run_matrix(opts: RunOptions, argv: list[str] | None = None, echo: Callable[[str], None] = print) -> tuple[Path, str | None]:
    """Run every scenario, write the report folder; returns (folder, what interrupted it or None).

    As one rank of a job (``profiler.distributed``) it writes ``<out>/rank<k>/`` and rank 0 merges.
    """
    job = distributed.in_job()
    if job:
        rank_device = distributed.init(opts.device)
        opts.device = str(rank_device) if rank_device is not None else opts.device
        top = prepare_out(opts.out, opts.force) if rank_info()["rank"] == 0 else None
        top = Path(str(distributed.agree(str(top))))
        out = distributed.rank_folder(top)
        out.mkdir(parents=True, exist_ok=True)
        run_name = top.name
    else:
        out = prepare_out(opts.out, opts.force)
        run_name = out.name
    device = resolve_device(opts.device)
    if device.type != "cuda":
        echo("pinprof: no CUDA device: GPU phases (h2d, compute) are skipped and pinning is off; "
             "loader, staging and CPU-work phases are measured")
    dataset = datasets.build(opts.dataset, opts.data_root, size=opts.dataset_size, image_size=opts.image_size,
                             download=opts.download)
    scs = scenarios(opts)
    origin = now_ms()  # every scenario's intervals count from here; merge aligns ranks by it
    info = meta.collect(device, argv, run=run_name, options={k: (str(v) if isinstance(v, Path) else v)
                                                               for k, v in asdict(opts).items()},
                        scenarios=[s.name for s in scs], dataset_len=len(dataset),  # type: ignore[arg-type]
                        origin_monotonic_ms=origin, **rank_info())
    frames: list[pd.DataFrame] = []
    per_epoch: dict[str, int] = {}
    current: list[TransferProfiler] = []
    interrupted = False
    previous = install_sigterm()
    try:
        gpu_work = GpuWork(device, max(opts.compute_ms))
        for sc in scs:
            distributed.barrier()  # under a job, every rank starts the scenario (and its copies) together
            echo(f"pinprof: {sc.name}")
            gpu_work.ms = sc.compute_ms
            frames.append(run_scenario(sc, dataset, device, opts, run_name, origin, gpu_work,
                                       lambda p: current.__setitem__(slice(None), [p])))
            current.clear()
            per_epoch[sc.name] = len(dataset) // sc.batch_size  # type: ignore[arg-type]
            report_io.write_csv(timeline.concat(frames), out / report_io.TIMELINE)
    except (KeyboardInterrupt, Terminated) as err:
        interrupted = True
        info["interrupted_by"] = "SIGTERM" if isinstance(err, Terminated) else "SIGINT"
        write_held(lambda: _keep_current(frames, current), replay=False)  # a second Ctrl-C waits
    except Exception as err:  # a loader that raises, a worker that dies: keep what was measured
        # Everything from here to the files on disk runs with signals held: once a worker has died,
        # torch's SIGCHLD handler raises again as the others exit (seen inside timeline() under load).
        late: list[BaseException] = []
        write_held(lambda: _write_failed(err, out, frames, current, info, per_epoch, echo), replay=False,
                   late=late.append)
        then = "".join(f"; then {type(e).__name__}: {e}" for e in late)  # e.g. which worker died
        raise RunFailed(f"{type(err).__name__}: {err}{then} (partial report written to {out})") from err
    finally:
        restore_sigterm(previous)
    info["partial"] = interrupted or len(frames) < len(scs)
    tl = timeline.concat(frames)
    if opts.calibrate and device.type == "cuda" and len(tl) and not interrupted:
        tl = calibrate_and_split(tl, device, out, info, echo)
    # After Ctrl-C/SIGTERM the report is what is left to save: a second signal waits until it is written.
    if interrupted:
        write_held(lambda: write_report(out, tl, info, per_epoch, echo, plots=opts.plots), replay=False)
    else:
        write_report(out, tl, info, per_epoch, echo, plots=opts.plots)
    if job:
        distributed.barrier()
        if rank_info()["rank"] == 0:
            merged = out.parent
            from .merge import write_merged

            write_merged(merged)  # its meta.json: rank 0's, plus ranks, clock_aligned, partial of any rank
            write_report(merged, report_io.read_timeline(merged), report_io.read_json(merged / report_io.META),
                         per_epoch, echo, plots=opts.plots)
            out = merged
    return out, info.get("interrupted_by")


def _keep_current(frames: list[pd.DataFrame], current: list[TransferProfiler]) -> None:
    """The interrupted scenario's completed batches join the finished scenarios' frames."""
    if current:
        frames.append(current[0].timeline())
        current.clear()  # kept once, even if this runs again


def _write_failed(err: Exception, out: Path, frames: list[pd.DataFrame], current: list[TransferProfiler],
                  info: dict[str, Any], per_epoch: dict[str, int], echo: Callable[[str], None]) -> None:
    """The partial report of a run that an exception stopped (no plots: the run is failing)."""
    info["interrupted_by"], info["error"] = type(err).__name__, str(err)[:500]
    info["partial"] = True
    _keep_current(frames, current)
    write_report(out, timeline.concat(frames), info, per_epoch, echo, plots=False)


def calibrate_and_split(tl: pd.DataFrame, device: torch.device, out: Path, info: dict[str, Any],
                        echo: Callable[[str], None]) -> pd.DataFrame:
    """Measure (or reuse) pinned/pageable bandwidth at the run's batch sizes, split pageable copies."""
    from . import bandwidth, split

    sizes = sorted({int(b) for b in tl.groupby("scenario").bytes.median() if b > 0})
    echo(f"pinprof: calibrating pinned bandwidth at {len(sizes)} size(s) (cached; --no-calibrate skips)")
    cal = bandwidth.calibration(sizes, device)
    report_io.write_csv(cal, out / report_io.CALIBRATION)
    info["calibration"] = cal.to_dict(orient="list")
    return split.apply(tl, cal)


def write_report(out: Path, tl: pd.DataFrame, info: dict[str, Any], per_epoch: dict[str, int],
                 echo: Callable[[str], None], plots: bool = True) -> None:
    """Write timeline, summary and metadata (atomically), then the optional analyses."""
    report_io.write_csv(tl, out / report_io.TIMELINE)
    summ = summary.summarize(tl, per_epoch)
    report_io.write_csv(summ, out / report_io.SUMMARY)
    report_io.write_json(info, out / report_io.META)
    md = summary.to_markdown(summ) if len(summ) else "No batch was measured.\n"
    partial = " (PARTIAL: interrupted)" if info.get("partial") else ""
    report_io.write_text_atomic(out / "summary.md", f"# pinprof run {out.name}{partial}\n\n{md}")
    echo(md)
    if len(tl):
        from .diagnose import compare_modes, diagnose, diagnose_ranks, render_text

        cal = report_io.read_calibration(out)
        text = render_text(diagnose(tl, cal, info.get("cpu_count")), compare_modes(tl), diagnose_ranks(tl, cal))
        report_io.write_text_atomic(out / "diagnosis.md", f"# pinprof diagnosis: {out.name}{partial}\n\n{text}")
        if plots:
            from . import plots as plotting

            plotting.write_all(tl, out)
    echo(f"pinprof: report written to {out}/{partial} (diagnosis: pinprof diagnose {out})")
