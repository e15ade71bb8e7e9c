"""Command line: ``pinprof VERB ...`` (also ``python -m profiler VERB ...``).

Every verb is ``main(argv) -> int``-style: usage errors and bad values exit 2 with one line that names
the value; Ctrl-C exits 130 after writing what was measured.
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from ._version import __version__
from .modes import MODES

T = TypeVar("T")


class UsageError(Exception):
    """A value the user gave is wrong; the message names it and the fix."""


def _list_of(kind: Callable[[str], T], name: str, minimum: float, allow_equal: bool = True) -> Callable[[str], list[T]]:
    def parse(text: str) -> list[T]:
        values: list[T] = []
        for part in text.split(","):
            part = part.strip()
            try:
                value = kind(part)
            except ValueError:
                raise argparse.ArgumentTypeError(f"{name} {part!r} is not a {kind.__name__}") from None
            if value < minimum or (value == minimum and not allow_equal):  # type: ignore[operator]
                bound = f">= {minimum:g}" if allow_equal else f"> {minimum:g}"
                raise argparse.ArgumentTypeError(f"{name} {part!r} must be {bound}")
            values.append(value)
        return values
    return parse


def _modes(text: str) -> list[str]:
    values = [m.strip() for m in text.split(",") if m.strip()]
    if values == ["all"]:
        return list(MODES)
    bad = [m for m in values if m not in MODES]
    if bad or not values:
        raise argparse.ArgumentTypeError(f"unknown mode {', '.join(bad) or text!r}; choose from "
                                         f"{', '.join(MODES)} or all")
    return values


def _positive_int(name: str) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} {text!r} is not an integer") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"{name} {text!r} must be > 0")
        return value
    return parse


def _nonneg_int(name: str) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} {text!r} is not an integer") from None
        if value < 0:
            raise argparse.ArgumentTypeError(f"{name} {text!r} must be >= 0")
        return value
    return parse


def _add_run(sub: Any) -> None:
    p = sub.add_parser("run", help="profile the scenario matrix and write a report folder",
                       description="Profile transfer modes x loader settings; several values per axis "
                                   "(e.g. --batch-size 64,1024) run the cross product.")
    p.add_argument("--modes", type=_modes, default=list(MODES), help=f"comma list of {', '.join(MODES)} or all")
    p.add_argument("--batch-size", type=_list_of(int, "--batch-size", 0, False), default=[64, 1024])
    p.add_argument("--num-workers", type=_list_of(int, "--num-workers", 0), default=[4])
    p.add_argument("--prefetch-factor", type=_list_of(int, "--prefetch-factor", 0, False), default=[2])
    p.add_argument("--cpu-work-ms", type=_list_of(float, "--cpu-work-ms", 0), default=[2.0],
                   help="busy CPU work per batch, meant to overlap the copy (ms)")
    p.add_argument("--compute-ms", type=_list_of(float, "--compute-ms", 0), default=[2.0],
                   help="GPU work per batch (ms; skipped without CUDA)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--batches", type=_positive_int("--batches"), default=40, help="measured batches per scenario")
    g.add_argument("--epochs", type=_positive_int("--epochs"), default=None, help="whole epochs instead of --batches")
    p.add_argument("--warmup", type=_nonneg_int("--warmup"), default=5, help="batches flagged warm-up, not summarised")
    p.add_argument("--dataset", choices=["synthetic", "cifar10", "imagefolder"], default="synthetic")
    p.add_argument("--data-root", default=None, help="folder for cifar10 / imagefolder")
    p.add_argument("--download", action="store_true", help="let torchvision download CIFAR-10")
    p.add_argument("--image-size", type=_positive_int("--image-size"), default=None)
    p.add_argument("--dataset-size", type=_positive_int("--dataset-size"), default=50_000)
    p.add_argument("--device", default=None, help="default: cuda if available, else cpu")
    p.add_argument("--out", type=Path, default=None, help="report folder (default reports/run-<timestamp>)")
    p.add_argument("--force", action="store_true", help="overwrite a non-empty --out")
    p.add_argument("--no-nvtx", action="store_true")
    p.add_argument("--no-calibrate", action="store_true", help="skip the bandwidth calibration")
    p.add_argument("--no-plots", action="store_true")
    p.set_defaults(func=_cmd_run)


def _cmd_run(args: argparse.Namespace, argv: Sequence[str]) -> int:
    from .runner import RunOptions, run_matrix

    if args.dataset == "synthetic" and args.data_root:
        raise UsageError("--data-root is only read by --dataset cifar10 or imagefolder")
    opts = RunOptions(modes=args.modes, batch_sizes=args.batch_size, num_workers=args.num_workers,
                      prefetch_factors=args.prefetch_factor, cpu_work_ms=args.cpu_work_ms,
                      compute_ms=args.compute_ms, batches=None if args.epochs else args.batches,
                      epochs=args.epochs, warmup=args.warmup, dataset=args.dataset, data_root=args.data_root,
                      download=args.download, image_size=args.image_size, dataset_size=args.dataset_size,
                      device=args.device, out=args.out, force=args.force, nvtx=not args.no_nvtx,
                      calibrate=not args.no_calibrate, plots=not args.no_plots)
    _, interrupted = run_matrix(opts, argv=["pinprof", *argv])
    return 130 if interrupted else 0


COMMANDS: list[Callable[[Any], None]] = [_add_run]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pinprof", description="Per-batch profiler for the host-to-device "
                                     "path of PyTorch input pipelines.")
    parser.add_argument("--version", action="version", version=f"pinprof {__version__}")
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    sub.required = True
    for add in COMMANDS:
        add(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    from .batch_tree import BatchTypeError
    from .datasets import DatasetError
    from .report_io import ReportError

    try:
        return int(args.func(args, argv))
    except (UsageError, DatasetError, ReportError, BatchTypeError, FileExistsError, PermissionError,
            ValueError) as err:
        print(f"pinprof {args.verb}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"pinprof {args.verb}: interrupted", file=sys.stderr)
        return 130
