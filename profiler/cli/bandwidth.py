"""``pinprof bandwidth``: copy bandwidth by size: pageable/pinned H2D, D2H, memcpy, pin_memory()."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from profiler.cli.args import Subparsers, positive_int, size
from profiler.errors import UsageError


def add(sub: Subparsers) -> None:
    p = sub.add_parser("bandwidth", help="sweep copy bandwidth by size: pageable/pinned H2D, D2H, memcpy, pin_memory()")
    p.add_argument(
        "--sizes",
        type=lambda t: [size(x) for x in t.split(",")],
        default=None,
        help="comma list like 64K,1M,1G (default 64 KiB .. 1 GiB)",
    )
    p.add_argument(
        "--repeats", type=positive_int("--repeats"), default=5, help="timed copies per size and method (default: 5)"
    )
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="folder for bandwidth.csv and bandwidth.png (default: reports/bandwidth-<time>)",
    )
    p.add_argument("--device", default="cuda", help="the CUDA device to copy to (default: cuda, the current one)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace, argv: Sequence[str]) -> int:
    import pandas as pd
    import torch

    from profiler.capture.devices import resolve_device
    from profiler.drivers import bandwidth
    from profiler.render import plots
    from profiler.report import files
    from profiler.units import format_size

    if not torch.cuda.is_available() and str(args.device).startswith("cuda"):
        raise UsageError(
            "the bandwidth sweep times host-to-device copies and needs a CUDA GPU; torch.cuda.is_available() "
            "is False here (run it on the GPU machine)"
        )
    dev = resolve_device(args.device)
    if dev.type != "cuda":
        raise UsageError(f"--device {args.device!r}: the bandwidth sweep needs a CUDA device")
    out = args.out or Path("reports") / f"bandwidth-{pd.Timestamp.now():%Y%m%d-%H%M%S}"
    out.mkdir(parents=True, exist_ok=True)
    table = bandwidth.sweep(args.sizes or bandwidth.SWEEP_SIZES, device=dev, repeats=args.repeats)
    files.write_csv(table, out / "bandwidth.csv")
    limit, link = bandwidth.link_limit_GBps()
    plots.bandwidth(table, out / "bandwidth.png", limit)
    wide = table.pivot(index="bytes", columns="method", values="GBps")[list(bandwidth.METHODS)]
    wide.index = [format_size(b) for b in wide.index]
    print(wide.round(2).to_string())
    best = table[table.method.isin(["pinned_h2d", "d2h"])].GBps.max()
    print(
        f"peak pinned copy {best:.1f} GB/s; {link}"
        + (f": limit {limit:.1f} GB/s, {best / limit:.0%} of it" if limit else "")
    )
    print(f"pinprof bandwidth: wrote {out / 'bandwidth.csv'} and {out / 'bandwidth.png'}")
    return 0
