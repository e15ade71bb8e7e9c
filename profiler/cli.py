"""Command line: ``pinprof VERB ...`` (also ``python -m profiler VERB ...``).

Every verb is ``main(argv) -> int``-style: usage errors and bad values exit 2 with one line that names
the value; Ctrl-C exits 130 after writing what was measured.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd

from ._version import __version__
from .modes import MODES

T = TypeVar("T")
DEFAULT_WORKERS = min(4, os.cpu_count() or 1)


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
            if not math.isfinite(value):  # type: ignore[arg-type]
                raise argparse.ArgumentTypeError(f"{name} {part!r} must be a finite number")
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


def _int_at_least(name: str, minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} {text!r} is not an integer") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{name} {text!r} must be {'> 0' if minimum == 1 else f'>= {minimum}'}")
        return value
    return parse


def _positive_int(name: str) -> Callable[[str], int]:
    return _int_at_least(name, 1)


def _nonneg_int(name: str) -> Callable[[str], int]:
    return _int_at_least(name, 0)


def _add_run(sub: Any) -> None:
    p = sub.add_parser("run", help="profile the scenario matrix and write a report folder",
                       description="Profile transfer modes x loader settings; several values per axis "
                                   "(e.g. --batch-size 64,1024) run the cross product.")
    p.add_argument("--modes", type=_modes, default=list(MODES), help=f"comma list of {', '.join(MODES)} or all")
    p.add_argument("--batch-size", type=_list_of(int, "--batch-size", 0, False), default=[64, 1024])
    p.add_argument("--num-workers", type=_list_of(int, "--num-workers", 0), default=[DEFAULT_WORKERS],
                   help=f"default {DEFAULT_WORKERS}: 4, or the CPU cores if fewer")
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
    p.add_argument("--nproc", type=_positive_int("--nproc"), default=1,
                   help="run the matrix in N ranks at once (one GPU each; gloo on CPU), merged into one report")
    p.set_defaults(func=_cmd_run)


def _cmd_run(args: argparse.Namespace, argv: Sequence[str]) -> int:
    from .runner import RunOptions, run_matrix

    if args.dataset == "synthetic" and args.data_root:
        raise UsageError("--data-root is only read by --dataset cifar10 or imagefolder")
    if args.nproc > 1:
        from . import distributed

        if distributed.in_job():
            raise UsageError("--nproc starts its own ranks; under torchrun leave it out")
        given = list(argv[1:])  # argv[0] is the verb
        rest = [a for i, a in enumerate(given) if a != "--nproc" and not (i and given[i - 1] == "--nproc")
                and not a.startswith("--nproc=")]
        return distributed.launch(args.nproc, rest)
    opts = RunOptions(modes=args.modes, batch_sizes=args.batch_size, num_workers=args.num_workers,
                      prefetch_factors=args.prefetch_factor, cpu_work_ms=args.cpu_work_ms,
                      compute_ms=args.compute_ms, batches=None if args.epochs else args.batches,
                      epochs=args.epochs, warmup=args.warmup, dataset=args.dataset, data_root=args.data_root,
                      download=args.download, image_size=args.image_size, dataset_size=args.dataset_size,
                      device=args.device, out=args.out, force=args.force, nvtx=not args.no_nvtx,
                      calibrate=not args.no_calibrate, plots=not args.no_plots)
    _, interrupted = run_matrix(opts, argv=["pinprof", *argv])
    return {"SIGINT": 130, "SIGTERM": 143}.get(interrupted or "", 0)


def _add_nsys(sub: Any) -> None:
    p = sub.add_parser("nsys", help="run a command under Nsight Systems and import the capture",
                       description="pinprof nsys [--out DIR] -- COMMAND ...: CUDA + NVTX tracing, then "
                                   "nsys_timeline.csv (and nsys_compare.csv when DIR holds a pinprof timeline).")
    p.add_argument("--out", type=Path, default=Path("nsys-report"), help="folder for the capture and tables")
    p.add_argument("--capture-range", default=None, help="start capturing at this pinprof NVTX range (e.g. 'batch 10')")
    p.add_argument("--compare", type=Path, default=None, help="pinprof timeline (or report folder) to compare with")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command to profile")
    p.set_defaults(func=_cmd_nsys)
    p = sub.add_parser("nsys-import", help="turn an nsys capture (.sqlite, .nsys-rep, .qdstrm) into nsys_timeline.csv")
    p.add_argument("report", type=Path)
    p.add_argument("--compare", type=Path, default=None, help="pinprof timeline (or report folder) to compare with")
    p.add_argument("--out", type=Path, default=None, help="folder for the tables (default: next to the report)")
    p.set_defaults(func=_cmd_nsys_import)
    p = sub.add_parser("nsys-compare", help="pinprof's CUDA-event h2d_ms next to CUPTI's, per batch")
    p.add_argument("timeline", type=Path, help="pinprof timeline.csv or report folder")
    p.add_argument("nsys_timeline", type=Path, help="nsys_timeline.csv from nsys-import")
    p.set_defaults(func=_cmd_nsys_compare)


def _print_compare(table: Any) -> None:
    if table.empty:
        print("no batch matched between the two tables (scenario and batch must agree)")
        return
    big = table[table.bytes >= 1 << 20]
    for (scen, mem), g in table.groupby(["scenario", "src_memory"], sort=False):
        gb = big[(big.scenario == scen) & (big.src_memory == mem)]
        rel = gb.rel_diff.abs() if len(gb) else g.rel_diff.abs()
        ref = g.reference.iloc[0] if "reference" in g else "memcpy"
        print(f"{scen} [{mem}]: {len(g)} batches, pinprof h2d {g.h2d_ms_pinprof.median():.4f} ms, CUPTI ({ref}) "
              f"{g.h2d_ms_cupti.median():.4f} ms, |rel diff| median {rel.median():.2%} p90 {rel.quantile(0.9):.2%}")


def _cmd_nsys(args: argparse.Namespace, argv: Sequence[str]) -> int:
    import torch

    from . import nsys_run

    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        raise UsageError("give the command to profile after --, e.g. pinprof nsys -- python train.py")
    captured = nsys_run.profile(command, args.out, gpu=torch.cuda.is_available(), capture_range=args.capture_range)
    print(f"pinprof nsys: captured {captured}")
    if captured.suffix == ".qdstrm" and nsys_run.importer_for(nsys_run.find_nsys()) is None:
        print(f"pinprof nsys: this nsys has no importer; run `pinprof nsys-import {captured}` where Nsight "
              "Systems' host part is (scripts/get_nsys.sh)")
        return 0
    compare_with = args.compare or next(iter(sorted(args.out.rglob("timeline.csv"))), None)
    done = nsys_run.import_report(captured, args.out, compare_with)
    print(f"pinprof nsys: {len(done.table)} batches -> {done.out_dir / 'nsys_timeline.csv'}")
    if done.comparison is not None:
        _print_compare(done.comparison)
    return 0


def _cmd_nsys_import(args: argparse.Namespace, argv: Sequence[str]) -> int:
    from . import nsys_run

    done = nsys_run.import_report(args.report, args.out, args.compare)
    print(done.table[["scenario", "batch", "bytes", "src_memory", "h2d_ms", "api_ms", "h2d_call_ms", "fetch_ms",
                      "batch_ms"]].head(12).to_string(index=False))
    print(f"pinprof nsys-import: {len(done.table)} batches -> {done.out_dir / 'nsys_timeline.csv'}")
    if done.comparison is not None:
        _print_compare(done.comparison)
    return 0


def _cmd_nsys_compare(args: argparse.Namespace, argv: Sequence[str]) -> int:
    from . import report_io
    from .nsys_import import compare

    ours = report_io.read_timeline(args.timeline)
    theirs = pd.read_csv(args.nsys_timeline)
    if "api_ms" not in theirs:
        raise UsageError(f"{args.nsys_timeline}: not an nsys_timeline.csv (no api_ms column); make one with "
                         "pinprof nsys-import")
    theirs = theirs.assign(scenario=theirs.scenario.fillna("").astype(str))
    table = compare(ours.assign(scenario=ours.scenario.fillna("").astype(str)), theirs)
    _print_compare(table)
    return 0


def _add_analysis(sub: Any) -> None:
    p = sub.add_parser("diagnose", help="name each scenario's bottleneck and the change that pays most")
    p.add_argument("path", type=Path, help="report folder or timeline CSV (pinprof's or nsys_timeline.csv)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.set_defaults(func=_cmd_diagnose)
    p = sub.add_parser("plot", help="write gantt.png and phases.png (and bandwidth.png) for a report")
    p.add_argument("path", type=Path, help="report folder or timeline CSV")
    p.add_argument("--out", type=Path, default=None, help="folder for the PNGs (default: the report folder)")
    p.add_argument("--batches", type=_positive_int("--batches"), default=6, help="batches per scenario in the Gantt")
    p.set_defaults(func=_cmd_plot)
    p = sub.add_parser("trace", help="write the timeline as Chrome trace JSON (Perfetto, chrome://tracing)")
    p.add_argument("path", type=Path, help="report folder or timeline CSV")
    p.add_argument("-o", "--out", type=Path, default=Path("trace.json"))
    p.set_defaults(func=_cmd_trace)


def _load(path: Path) -> tuple[Any, Path]:
    from . import report_io

    csv = report_io.resolve_timeline_path(path)
    tl = report_io.read_timeline(csv)
    if tl.empty:
        raise UsageError(f"{csv}: the timeline has no rows; nothing was measured")
    return tl, csv.parent


def _cmd_diagnose(args: argparse.Namespace, argv: Sequence[str]) -> int:
    import json

    from . import report_io
    from .diagnose import compare_modes, diagnose, diagnose_ranks, render_text, to_json

    tl, folder = _load(args.path)
    cal = report_io.read_calibration(folder)
    meta = report_io.read_json(folder / "meta.json") if (folder / "meta.json").is_file() else {}
    diags = diagnose(tl, cal, meta.get("cpu_count"))
    text = render_text(diags, compare_modes(tl), diagnose_ranks(tl, cal))
    if args.path.is_dir():
        report_io.write_text_atomic(folder / "diagnosis.md", f"# pinprof diagnosis: {folder.name}\n\n{text}")
    print(json.dumps(to_json(diags), indent=2) if args.json else text)
    return 0


def _cmd_plot(args: argparse.Namespace, argv: Sequence[str]) -> int:
    from . import plots

    tl, folder = _load(args.path)
    out = args.out or folder
    out.mkdir(parents=True, exist_ok=True)
    made = plots.write_all(tl, out, source=folder, first=args.batches)
    print("pinprof plot: wrote " + ", ".join(str(p) for p in made))
    return 0


def _cmd_trace(args: argparse.Namespace, argv: Sequence[str]) -> int:
    from . import trace

    tl, _ = _load(args.path)
    print(f"pinprof trace: wrote {trace.write(tl, args.out)} (open in https://ui.perfetto.dev or chrome://tracing)")
    return 0


def _size(text: str) -> int:
    from .bandwidth import parse_size

    try:
        return parse_size(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _add_bandwidth(sub: Any) -> None:
    p = sub.add_parser("bandwidth", help="sweep copy bandwidth by size: pageable/pinned H2D, D2H, memcpy, pin_memory()")
    p.add_argument("--sizes", type=lambda t: [_size(x) for x in t.split(",")], default=None,
                   help="comma list like 64K,1M,1G (default 64 KiB .. 1 GiB)")
    p.add_argument("--repeats", type=_positive_int("--repeats"), default=5)
    p.add_argument("--out", type=Path, default=None, help="folder for bandwidth.csv and bandwidth.png")
    p.add_argument("--device", default="cuda")
    p.set_defaults(func=_cmd_bandwidth)


def _cmd_bandwidth(args: argparse.Namespace, argv: Sequence[str]) -> int:
    from . import bandwidth, plots, report_io
    from .devices import resolve_device

    dev = resolve_device(args.device)
    if dev.type != "cuda":
        raise UsageError(f"--device {args.device!r}: the bandwidth sweep needs a CUDA device")
    out = args.out or Path("reports") / f"bandwidth-{pd.Timestamp.now():%Y%m%d-%H%M%S}"
    out.mkdir(parents=True, exist_ok=True)
    table = bandwidth.sweep(args.sizes or bandwidth.SWEEP_SIZES, device=dev, repeats=args.repeats)
    report_io.write_csv(table, out / "bandwidth.csv")
    limit, link = bandwidth.link_limit_GBps()
    plots.bandwidth(table, out / "bandwidth.png", limit)
    wide = table.pivot(index="bytes", columns="method", values="GBps")[list(bandwidth.METHODS)]
    wide.index = [bandwidth.format_size(b) for b in wide.index]
    print(wide.round(2).to_string())
    best = table[table.method.isin(["pinned_h2d", "d2h"])].GBps.max()
    print(f"peak pinned copy {best:.1f} GB/s; {link}" + (f": limit {limit:.1f} GB/s, {best / limit:.0%} of it" if limit else ""))
    print(f"pinprof bandwidth: wrote {out / 'bandwidth.csv'} and {out / 'bandwidth.png'}")
    return 0


def _add_merge(sub: Any) -> None:
    p = sub.add_parser("merge", help="merge per-rank reports (rank<k>/ folders from torchrun) into one")
    p.add_argument("path", type=Path, help="folder holding rank0/, rank1/, ...")
    p.set_defaults(func=_cmd_merge)


def _cmd_merge(args: argparse.Namespace, argv: Sequence[str]) -> int:
    from .merge import merge, write_merged

    folder = write_merged(args.path)
    tl, meta = merge(folder)
    print(f"pinprof merge: {len(tl)} batches from ranks {meta['ranks']} -> {folder / 'timeline.csv'}"
          + ("" if meta["clock_aligned"] else " (ranks on different hosts: clocks not aligned)"))
    return 0


COMMANDS: list[Callable[[Any], None]] = [_add_run, _add_nsys, _add_analysis, _add_bandwidth, _add_merge]


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
    from .nsys_run import NsysError
    from .runner import RunFailed

    try:
        return int(args.func(args, argv))
    except (UsageError, DatasetError, ReportError, BatchTypeError, FileExistsError, PermissionError,
            NsysError, ValueError) as err:
        print(f"pinprof {args.verb}: error: {err}", file=sys.stderr)
        return 2
    except RunFailed as err:
        print(f"pinprof {args.verb}: error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"pinprof {args.verb}: interrupted", file=sys.stderr)
        return 130
    except OSError as err:  # a file or folder the user named cannot be read or written
        print(f"pinprof {args.verb}: error: {err.strerror or err}: {err.filename or ''}".rstrip(": "), file=sys.stderr)
        return 2
