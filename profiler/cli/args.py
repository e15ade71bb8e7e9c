"""What the verbs share: the protocol each verb module follows, argument types, loading a timeline.

A verb module has ``add(sub)``, which adds its parser(s) with ``set_defaults(func=run)``, and
``run(args, argv) -> int``. Nothing here imports torch: ``pinprof --help`` and the reading verbs
start without it.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from profiler.errors import UsageError
from profiler.modes import MODES

if TYPE_CHECKING:
    import pandas as pd

T = TypeVar("T")
DEFAULT_WORKERS = min(4, os.cpu_count() or 1)
# Each DataLoader worker and each rank is a process holding its batches: far past the cores, a value
# only runs the machine out of memory. The bounds refuse it with a line instead.
MAX_WORKERS = 4 * (os.cpu_count() or 1)
MAX_RANKS = os.cpu_count() or 1
MAX_PREFETCH = 64
Subparsers = Any  # argparse's _SubParsersAction, which it does not export


class Verb(Protocol):
    """A module of ``profiler.cli`` that adds one or more verbs."""

    def add(self, sub: Subparsers) -> None: ...

    def run(self, args: argparse.Namespace, argv: Sequence[str]) -> int: ...


def list_of(
    kind: Callable[[str], T], name: str, minimum: float, allow_equal: bool = True, maximum: float | None = None
) -> Callable[[str], list[T]]:
    """A comma list of distinct numbers (each value is a scenario), each finite, at least (or above)
    ``minimum`` and at most ``maximum``."""

    def parse(text: str) -> list[T]:
        values: list[T] = []
        for part in text.split(","):
            part = part.strip()
            try:
                value = kind(part)
            except ValueError:
                what = "an integer" if kind is int else "a number"
                raise argparse.ArgumentTypeError(f"{name} {part!r} is not {what}") from None
            if not math.isfinite(value):  # type: ignore[arg-type]
                raise argparse.ArgumentTypeError(f"{name} {part!r} must be a finite number")
            if value < minimum or (value == minimum and not allow_equal):  # type: ignore[operator]
                bound = f">= {minimum:g}" if allow_equal else f"> {minimum:g}"
                raise argparse.ArgumentTypeError(f"{name} {part!r} must be {bound}")
            if maximum is not None and value > maximum:  # type: ignore[operator]
                raise argparse.ArgumentTypeError(f"{name} {part!r} must be <= {maximum:g}")
            if value in values:
                raise argparse.ArgumentTypeError(f"{name} {text!r} gives {part} twice; each value is one scenario")
            values.append(value)
        return values

    return parse


def modes(text: str) -> list[str]:
    """A comma list of mode names, or ``all``."""
    values = [m.strip() for m in text.split(",") if m.strip()]
    if values == ["all"]:
        return list(MODES)
    bad = [m for m in values if m not in MODES]
    if bad or not values:
        raise argparse.ArgumentTypeError(
            f"unknown mode {', '.join(bad) or text!r}; choose from {', '.join(MODES)} or all"
        )
    return values


def int_at_least(name: str, minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} {text!r} is not an integer") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{name} {text!r} must be {'> 0' if minimum == 1 else f'>= {minimum}'}")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(f"{name} {text!r} must be <= {maximum}")
        return value

    return parse


def positive_int(name: str, maximum: int | None = None) -> Callable[[str], int]:
    return int_at_least(name, 1, maximum)


def nonneg_int(name: str) -> Callable[[str], int]:
    return int_at_least(name, 0)


def script_target(p: argparse.ArgumentParser) -> None:
    """The arguments of a verb that runs a user's program under pinprof (``profile``, ``tune``): the
    device its copies go to, and the program after ``--``."""
    p.add_argument("--device", default=None, help="the device the copies go to (default: cuda if available)")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- then the program, as you would run it")


def refuse_locked_out(out: Path | None, ranks: int) -> None:
    """``--out`` refused now, before the verb imports torch (2 s or more), where its lock is not
    pinprof's or a live run holds it (``profiler.report.claim.check``); the driver's ``claim`` takes the
    lock later. With ``ranks`` above 1, each rank writes into a folder of its own: left to the driver."""
    if out is not None and ranks <= 1:
        from profiler.report.claim import check

        check(out, "--out")


def size(text: str) -> int:
    """A byte size like ``64K``, ``12.5M``, ``1G``."""
    from profiler.units import parse_size

    try:
        return parse_size(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def load_report(
    path: Path, skip: int | None = None, columns: Sequence[str] | None = None
) -> tuple[pd.DataFrame, Path, dict[str, Any]]:
    """The timeline at ``path``, the folder it lies in and its meta.json (``{}`` when there is none);
    ``skip``: each scenario's first ``skip`` batches are warm-up, the start-up rule is off;
    ``columns``: only these are read (``files.read_timeline``)."""
    from profiler.report import files

    tl, folder = load_timeline(path, columns)
    meta = files.read_meta(folder / files.META) if (folder / files.META).is_file() else {}
    if skip is not None:
        tl = tl.assign(warmup=tl["batch"].to_numpy() < skip)
        meta = {**meta, "warmup_policy": "skip"}
    return tl, folder, meta


def load_timeline(path: Path, columns: Sequence[str] | None = None) -> tuple[pd.DataFrame, Path]:
    """The timeline at ``path`` (a report folder or a CSV) and the folder it lies in; refuses an empty one."""
    from profiler.report import files

    csv = files.resolve_timeline_path(path)
    tl = files.read_timeline(csv, columns)
    if tl.empty:
        raise UsageError(f"{csv}: the timeline has no rows; nothing was measured")
    return tl, csv.parent
