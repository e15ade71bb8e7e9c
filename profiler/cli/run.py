"""``pinprof run``: profile the scenario matrix and write a report folder."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from profiler.cli.args import (
    DEFAULT_WORKERS,
    MAX_PREFETCH,
    MAX_RANKS,
    MAX_WORKERS,
    Subparsers,
    list_of,
    modes,
    nonneg_int,
    positive_int,
    refuse_locked_out,
)
from profiler.errors import UsageError
from profiler.modes import MODES
from profiler.settings import current


def add(sub: Subparsers) -> None:
    p = sub.add_parser(
        "run",
        help="profile the scenario matrix and write a report folder",
        description="Profile transfer modes x loader settings; several values per axis "
        "(e.g. --batch-size 64,1024) run the cross product.",
    )
    p.add_argument(
        "--modes", type=modes, default=list(MODES), help=f"comma list of {', '.join(MODES)} or all (default: all)"
    )
    p.add_argument(
        "--batch-size",
        type=list_of(int, "--batch-size", 0, False),
        default=[64, 1024],
        help="comma list of batch sizes, one scenario each (default: 64,1024)",
    )
    p.add_argument(
        "--num-workers",
        type=list_of(int, "--num-workers", 0, maximum=MAX_WORKERS),
        default=[DEFAULT_WORKERS],
        help=f"default {DEFAULT_WORKERS}: 4, or the CPU cores if fewer",
    )
    p.add_argument(
        "--prefetch-factor",
        type=list_of(int, "--prefetch-factor", 0, False, maximum=MAX_PREFETCH),
        default=[2],
        help="comma list of the loader's prefetch_factor (default: 2; not used with 0 workers)",
    )
    p.add_argument(
        "--cpu-work-ms",
        type=list_of(float, "--cpu-work-ms", 0),
        default=[2.0],
        help="busy CPU work per batch, meant to overlap the copy, ms (default: 2)",
    )
    p.add_argument(
        "--compute-ms",
        type=list_of(float, "--compute-ms", 0),
        default=[2.0],
        help="GPU work per batch, ms; skipped without CUDA (default: 2)",
    )
    g = p.add_mutually_exclusive_group()
    g.add_argument(
        "--batches", type=positive_int("--batches"), default=40, help="measured batches per scenario (default: 40)"
    )
    g.add_argument(
        "--epochs", type=positive_int("--epochs"), default=None, help="whole epochs instead of --batches (default: off)"
    )
    p.add_argument(
        "--skip",
        type=nonneg_int("--skip"),
        default=None,
        metavar="N",
        help="flag each scenario's first N batches warm-up and run N more (default: run 5 more and find the "
        "start-up batches in the data)",
    )
    p.add_argument(
        "--dataset",
        choices=["synthetic", "cifar10", "imagefolder"],
        default="synthetic",
        help="where the images come from (default: synthetic, CIFAR-10-shaped images made in memory)",
    )
    p.add_argument("--data-root", default=None, help="folder for cifar10 / imagefolder (default: none)")
    p.add_argument("--download", action="store_true", help="let torchvision download CIFAR-10 (default: off)")
    p.add_argument(
        "--image-size",
        type=positive_int("--image-size"),
        default=None,
        help="resize images to N x N (default: the dataset's own size, 32 for synthetic)",
    )
    p.add_argument(
        "--dataset-size",
        type=positive_int("--dataset-size"),
        default=50_000,
        help="items in the synthetic dataset (default: 50000)",
    )
    p.add_argument("--device", default=None, help="default: cuda if available, else cpu")
    p.add_argument("--out", type=Path, default=None, help="report folder (default reports/run-<timestamp>)")
    p.add_argument("--force", action="store_true", help="overwrite a non-empty --out (default: refuse)")
    p.add_argument("--no-nvtx", action="store_true", help="emit no NVTX ranges (default: emit them)")
    p.add_argument(
        "--no-calibrate", action="store_true", help="skip the bandwidth calibration (default: calibrate on a GPU)"
    )
    p.add_argument("--no-plots", action="store_true", help="draw no PNGs (default: draw gantt.png and phases.png)")
    p.add_argument(
        "--nproc",
        type=positive_int("--nproc", MAX_RANKS),
        default=1,
        help="run the matrix in N ranks at once (one GPU each; gloo on CPU), merged into one report (default: 1)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace, argv: Sequence[str]) -> int:
    refuse_locked_out(args.out, max(args.nproc, current().world_size))
    from profiler.drivers.runner import RunOptions, run_matrix

    if args.dataset == "synthetic" and args.data_root:
        raise UsageError("--data-root is only read by --dataset cifar10 or imagefolder")
    if args.nproc > 1:
        return _launch(args.nproc, argv)
    opts = RunOptions(
        modes=args.modes,
        batch_sizes=args.batch_size,
        num_workers=args.num_workers,
        prefetch_factors=args.prefetch_factor,
        cpu_work_ms=args.cpu_work_ms,
        compute_ms=args.compute_ms,
        batches=None if args.epochs else args.batches,
        epochs=args.epochs,
        skip=args.skip,
        dataset=args.dataset,
        data_root=args.data_root,
        download=args.download,
        image_size=args.image_size,
        dataset_size=args.dataset_size,
        device=args.device,
        out=args.out,
        force=args.force,
        nvtx=not args.no_nvtx,
        calibrate=not args.no_calibrate,
        plots=not args.no_plots,
    )
    _, interrupted = run_matrix(opts, argv=["pinprof", *argv])
    return {"SIGINT": 130, "SIGTERM": 143}.get(interrupted or "", 0)


def _launch(nproc: int, argv: Sequence[str]) -> int:
    """The same command in ``nproc`` ranks, ``--nproc`` left out."""
    from profiler.drivers import distributed

    if distributed.in_job():
        raise UsageError("--nproc starts its own ranks; under torchrun leave it out")
    given = list(argv[1:])  # argv[0] is the verb
    rest = [
        a
        for i, a in enumerate(given)
        if a != "--nproc" and not (i and given[i - 1] == "--nproc") and not a.startswith("--nproc=")
    ]
    return distributed.launch(nproc, rest)
