"""``pinprof run``: profile the scenario matrix (``profiler.drivers.options``) and write a report folder.

The timeline is rewritten atomically after every scenario; on Ctrl-C or SIGTERM the batches measured
so far are written out and meta.json says ``"partial": true``; when the loop raises, the partial
report is written and ``RunFailed`` raised.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Sized
from dataclasses import asdict
from pathlib import Path
from typing import Any, cast

import pandas as pd
import torch
from torch.utils.data import DataLoader

from profiler.atomic import overwrite_json
from profiler.capture import own_threads
from profiler.capture.clock import now_ms
from profiler.capture.devices import rank_info, resolve_device
from profiler.capture.environment import describe
from profiler.capture.profiler import TransferProfiler
from profiler.capture.rows import FlushClock, Flusher, JournalWriter
from profiler.drivers import datasets, distributed, limits
from profiler.drivers.calibrate import calibrate_and_split
from profiler.drivers.keeping import Progress, appending, keep_current, merge_job, write_failed
from profiler.drivers.options import RunOptions, Scenario, prepare_out, scenarios
from profiler.drivers.workload import GpuWork, busy_cpu
from profiler.errors import RunFailed, WriteFailed
from profiler.modes import SPECS
from profiler.report import disk, meta
from profiler.report import files as report_io
from profiler.report.claim import LOCK, release
from profiler.report.folder import write_report
from profiler.report.journal import Journal
from profiler.report.journal_process import JournalProcess
from profiler.report.signals import Terminated, install_sigterm, restore_sigterm, write_held
from profiler.timeline import schema as timeline

__all__ = ["RunOptions", "calibrate_and_split", "run_matrix", "run_scenario", "scenarios"]

# Batches run beyond --batches when no --skip is given: start-up (workers, first pins, autotuning)
# takes a few, which the rule of profiler.analysis.warmup leaves out of the figures.
START_ROOM = 5


def _progress(total: int | None, desc: str, enabled: bool) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, disable=not enabled, leave=False, unit="batch", dynamic_ncols=True)


def run_scenario(
    sc: Scenario,
    dataset: Any,
    device: torch.device,
    opts: RunOptions,
    run: str,
    origin: float,
    gpu_work: GpuWork,
    register: Callable[[TransferProfiler], None],
    journal: Journal | None = None,
    progress: Progress | None = None,
) -> pd.DataFrame:
    """Run one scenario's loop under a profiler and return its timeline; with a ``journal``, its
    completed batches are appended to it every ``PINPROF_FLUSH_S`` seconds as the loop goes, and the
    CPU time of the process that appends them is added to ``progress``'s."""
    spec = SPECS[sc.mode]
    cuda = device.type == "cuda"
    loader = DataLoader(
        dataset,
        batch_size=sc.batch_size,
        shuffle=False,
        num_workers=sc.num_workers,
        pin_memory=spec.pin_memory and cuda,
        drop_last=True,
        prefetch_factor=sc.prefetch_factor if sc.num_workers > 0 else None,
        persistent_workers=False,
    )
    prof = TransferProfiler(
        sc.mode, device, nvtx=opts.nvtx, run=run, scenario=sc.name, warmup=opts.skip or 0, origin_ms=origin
    )
    register(prof)
    # Appends run on a thread of their own: the loop makes no append (it waits only for Python's lock
    # while one is formatted: ``rows.FLUSH_SHARE``'s note), and a kill -9 loses at most the last interval. A disk that
    # refuses an append stops the run from the loop's thread, as before (``appending``).
    writer = flusher = appender = None
    if journal is not None:
        # The rows are built and written by a process of their own (``JournalProcess``): built here,
        # they held Python's lock from the loop measured. Where none starts, the writer's thread appends.
        # It starts at the first append: a scenario shorter than the flush interval needs none.
        appender = JournalProcess(journal, say=False)
        flusher = Flusher(prof, journal, FlushClock.from_settings(), appender)
        writer = JournalWriter(flusher.flush, flusher.clock.every_ms / 1e3, say=False)
        writer.start()
    per_epoch = len(loader)
    # Room for the start-up batches: --skip's, or START_ROOM for the rule to find them in.
    room = START_ROOM if opts.skip is None else opts.skip
    limit = None if opts.epochs else (opts.batches or per_epoch) + room
    total = per_epoch * opts.epochs if opts.epochs else limit
    enabled = sys.stdout.isatty() if opts.progress is None else opts.progress
    bar = _progress(total, sc.name, enabled)
    # --batches beyond one epoch: the loader restarts until the count is reached (it used to stop at one).
    rounds = opts.epochs or -(-(limit or 0) // max(per_epoch, 1))
    done = 0  # not bar.n: a disabled tqdm does not count
    try:
        for _ in range(rounds):
            left = None if limit is None else limit - done
            for x, _y in prof.device_batches(loader, limit=left):  # prefetch: one batch ahead
                with prof.cpu_work():
                    busy_cpu(sc.cpu_work_ms)
                if sc.compute_ms > 0 and cuda:
                    with prof.compute():
                        loss = gpu_work(x)
                    loss.item()  # a training loop reads its loss: the one sync per step, as users have
                bar.update(1)
                done += 1
                if writer is not None and writer.error is not None:
                    before = sum(len(f) for f in progress.frames) if progress is not None else 0
                    appending(writer.raise_error, journal, measured=before + done)
                if enabled and bar.n % 10 == 0:
                    bar.set_postfix({k: f"{v:.2f}ms" for k, v in prof.live_medians().items() if v == v}, refresh=False)
    finally:
        if writer is not None and flusher is not None:
            writer.stop()  # after its append in progress: the end of the run writes the rest
            try:
                flusher.close()  # its process has written all it was handed before the scenario's rows replace it
            except OSError as err:
                writer.error = writer.error or err
            if progress is not None and appender is not None and appender.cpu_ms is not None:
                progress.journal_process_ms += appender.cpu_ms
                progress.journal_process_start_ms += appender.start_ms or 0.0
        bar.close()
        prof.close()
    if writer is not None and writer.error is not None:
        appending(writer.raise_error, journal)
    return prof.timeline()


def _open_out(opts: RunOptions) -> tuple[Path, str, bool]:
    """(this process's report folder, the run's name, whether it is one rank of a job)."""
    job = distributed.in_job()
    if not job:
        out = opts.out = prepare_out(opts.out, opts.force)  # the folder chosen, for the release at the end
        return out, out.name, False
    rank_device = distributed.init(opts.device)
    opts.device = str(rank_device) if rank_device is not None else opts.device
    top = prepare_out(opts.out, opts.force) if rank_info()["rank"] == 0 else None
    top = opts.out = Path(str(distributed.agree(str(top))))
    out = distributed.rank_folder(top)
    out.mkdir(parents=True, exist_ok=True)
    return out, top.name, True


def _run_scenarios(
    scs: list[Scenario],
    dataset: Any,
    device: torch.device,
    opts: RunOptions,
    run: str,
    origin: float,
    out: Path,
    done: Progress,
    echo: Callable[[str], None],
) -> None:
    journal = Journal(out / report_io.TIMELINE)
    appending(journal.start, journal)
    gpu_work = GpuWork(device, max(opts.compute_ms))
    for sc in scs:
        distributed.barrier()  # under a job, every rank starts the scenario (and its copies) together
        echo(f"pinprof: {sc.name}")
        gpu_work.ms = sc.compute_ms
        done.frames.append(
            run_scenario(
                sc,
                dataset,
                device,
                opts,
                run,
                origin,
                gpu_work,
                lambda p: done.current.__setitem__(slice(None), [p]),
                journal,
                done,
            )
        )
        done.current.clear()
        done.per_epoch[sc.name] = len(dataset) // sc.batch_size
        # The journal's rows of this scenario give way to its finished timeline (drift-corrected).
        appending(functools.partial(_replace_or_keep, journal, timeline.concat(done.frames)), journal)


def _replace_or_keep(journal: Journal, frame: pd.DataFrame) -> None:
    """``journal`` rewritten as ``frame``; on a disk too full for the rewrite's temporary copy, the
    journal keeps its rows and ``frame``'s others are appended: the run goes on while they fit."""
    try:
        journal.replace(frame)
    except OSError as err:
        if not disk.is_full(err) or journal.keep(frame) > 0:
            raise


def run_matrix(
    opts: RunOptions, argv: list[str] | None = None, echo: Callable[[str], None] = print
) -> tuple[Path, str | None]:
    """Run every scenario, write the report folder; returns (folder, what interrupted it or None).

    As one rank of a job (``profiler.drivers.distributed``) it writes ``<out>/rank<k>/`` and rank 0 merges.
    The folder is claimed while the run lasts (``profiler.report.claim``).
    """
    limits.check(opts)  # before the folder is made: a refused run leaves nothing behind
    try:
        return _run_matrix(opts, argv, echo)
    finally:
        if opts.out is not None:
            release(Path(opts.out) / LOCK)


def _run_matrix(
    opts: RunOptions, argv: list[str] | None = None, echo: Callable[[str], None] = print
) -> tuple[Path, str | None]:
    """Run every scenario, write the report folder; returns (folder, what interrupted it or None).

    As one rank of a job (``profiler.drivers.distributed``) it writes ``<out>/rank<k>/`` and rank 0 merges.
    """
    # The data and the device first: a run refused for either leaves no folder behind.
    dataset = datasets.build(
        opts.dataset, opts.data_root, size=opts.dataset_size, image_size=opts.image_size, download=opts.download
    )
    # A rank's device is known once the job is joined (_open_out sets opts.device).
    device = None if distributed.in_job() else resolve_device(opts.device)
    out, run_name, job = _open_out(opts)
    device = device or resolve_device(opts.device)
    if device.type != "cuda":
        echo(
            "pinprof: no CUDA device: GPU phases (h2d, compute) are skipped and pinning is off; "
            "loader, staging and CPU-work phases are measured, and the modes, which here do the same work, "
            "are not compared with each other"
        )
    scs = scenarios(opts)
    origin = now_ms()  # every scenario's intervals count from here; merge aligns ranks by it
    info = meta.collect(
        describe(device),
        argv,
        run=run_name,
        scenarios=[s.name for s in scs],
        options={k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(opts).items()},
        dataset_len=len(cast(Sized, dataset)),  # every dataset build() makes has a length
        origin_monotonic_ms=origin,
        warmup_policy="auto" if opts.skip is None else "skip",
        **rank_info(),
    )
    done = Progress()
    own_threads.reset()  # meta.json's pinprof_threads_ms: this run's threads' CPU time
    interrupted = False
    # partial until the end rewrites it: a run killed (SIGKILL, OOM) leaves a report that says so
    appending(
        lambda: report_io.write_json(
            {**info, "partial": True, "status": "running"}, out / report_io.META, reserve=disk.META_RESERVE
        ),
        None,
    )
    previous = install_sigterm()
    try:
        _run_scenarios(scs, dataset, device, opts, run_name, origin, out, done, echo)
    except WriteFailed:
        # the disk refuses: the journal is the report, and meta.json, rewritten in the room it
        # reserved, says it is partial (it said running)
        try:
            overwrite_json(
                {**info, "partial": True, "status": "disk_full", "interrupted_by": "a full disk"}, out / report_io.META
            )
        except OSError:
            pass  # it still says running: partial all the same
        raise
    except (KeyboardInterrupt, Terminated) as err:
        interrupted = True
        info["interrupted_by"] = "SIGTERM" if isinstance(err, Terminated) else "SIGINT"
        write_held(lambda: keep_current(done), replay=False)  # a second Ctrl-C waits
    except Exception as err:  # a loader that raises, a worker that dies: keep what was measured
        # Everything from here to the files on disk runs with signals held: once a worker has died,
        # torch's SIGCHLD handler raises again as the others exit (seen inside timeline() under load).
        late: list[BaseException] = []
        failed = err  # bound for the lambda: the except clause unbinds err when it ends
        write_held(lambda: write_failed(failed, out, done, info, echo), replay=False, late=late.append)
        then = "".join(f"; then {type(e).__name__}: {e}" for e in late)  # e.g. which worker died
        raise RunFailed(f"{type(err).__name__}: {err}{then} (partial report written to {out})") from err
    finally:
        restore_sigterm(previous)
    _finish(out, opts, device, info, done, interrupted, len(done.frames) < len(scs), echo)
    if job:
        out = merge_job(out, opts, done, echo)
    return out, info.get("interrupted_by")


def _finish(
    out: Path,
    opts: RunOptions,
    device: torch.device,
    info: dict[str, Any],
    done: Progress,
    interrupted: bool,
    unfinished: bool,
    echo: Callable[[str], None],
) -> None:
    info["partial"] = interrupted or unfinished
    info.update(done.own_costs())  # after the last scenario's journal has stopped
    tl = timeline.concat(done.frames)
    if opts.calibrate and device.type == "cuda" and len(tl) and not interrupted:
        tl = calibrate_and_split(tl, device, out, info, echo)
    # After Ctrl-C/SIGTERM the report is what is left to save: a second signal waits until it is written.
    if interrupted:
        write_held(lambda: write_report(out, tl, info, done.per_epoch, echo, plots=opts.plots), replay=False)
    else:
        write_report(out, tl, info, done.per_epoch, echo, plots=opts.plots)
