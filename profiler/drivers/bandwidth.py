"""Host-device bandwidth by method and size, and the calibration ``pinprof run`` uses for the split.

Methods (columns of bandwidth.csv: method, bytes, ms (median per copy), GBps (1e9 B/s), repeats):
    pageable_h2d   pageable tensor ``.to(device)`` (the driver stages it)
    pinned_h2d     pinned tensor, non-blocking copy into a preallocated device tensor
    d2h            device tensor into a pinned host tensor
    memcpy_to_pinned  pageable -> preallocated pinned host tensor (``copy_``; the staging memcpy)
    pin_memory     ``Tensor.pin_memory()`` (allocation from torch's cached host allocator + copy)
GPU copies are timed with CUDA events around ``k`` back-to-back copies (k grows as sizes shrink, so
submission latency is amortised away); host copies with ``perf_counter``. Every source holds random
bytes (never zeros), two sources alternate so small sizes do not time a cache, the link is kept busy
first (``LINK_WARM_S``: a link that idled comes back slowly), two warm-up rounds follow, and each
figure is the median of ``repeats`` rounds.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd
import torch

from profiler.atomic import read_bounded, write_csv, write_text_atomic
from profiler.capture.cuda.events import elapsed_ms
from profiler.capture.environment import driver_version
from profiler.errors import ReportError
from profiler.report.files import parse_calibration
from profiler.settings import current
from profiler.units import GiB, KiB, MiB, format_size, parse_size

SWEEP_SIZES: tuple[int, ...] = (
    64 * KiB,
    256 * KiB,
    768 * KiB,
    MiB,
    4 * MiB,
    int(12.5 * MiB),
    16 * MiB,
    64 * MiB,
    256 * MiB,
    GiB,
)
__all__ = ["METHODS", "SWEEP_SIZES", "calibration", "format_size", "link_limit_GBps", "measure", "parse_size", "sweep"]
METHODS = ("pageable_h2d", "pinned_h2d", "d2h", "memcpy_to_pinned", "pin_memory")
# Payload bandwidth per lane after line coding, GB/s (PCIe Gen1-2 8b/10b, Gen3+ 128b/130b).
PCIE_LANE_GBps = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}


def _random(nbytes: int, pin: bool = False, device: torch.device | None = None) -> torch.Tensor:
    t = torch.randint(0, 256, (nbytes,), dtype=torch.uint8, device=device)
    return t.pin_memory() if pin else t


# How long sustained pinned copies run before a size is timed. A link that idled runs its first copies
# slowly: on an H100 (2026-12-06, `pytest -m gpu tests`) the 1 MiB copies of a test that began after
# seconds of host work read 0.080 ms in CUPTI's own records against 0.0215 later in the same run, and a
# calibration made then put the pinned rate at 13 GB/s for 1 MiB, 12 GB/s for 4 MiB and 20 GB/s for
# 16 MiB against 54 GB/s at 64 MiB; the calibration is cached, so a split made with it stays wrong.
LINK_WARM_S = 0.25
WARM_BYTES = 64 * MiB


def _warm_link(device: torch.device, stream: torch.cuda.Stream) -> None:
    """Pinned host-to-device copies of ``WARM_BYTES``, back to back for ``LINK_WARM_S``."""
    src = _random(WARM_BYTES, pin=True)
    dst = torch.empty(WARM_BYTES, dtype=torch.uint8, device=device)
    until = time.perf_counter() + LINK_WARM_S
    with torch.cuda.stream(stream):
        while time.perf_counter() < until:
            dst.copy_(src, non_blocking=True)
            stream.synchronize()


def _per_copy_ms(k: int, copy: Callable[[int], object], gpu: bool, stream: torch.cuda.Stream | None) -> float:
    if gpu:
        assert stream is not None
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(stream):
            start.record(stream)
            for i in range(k):
                copy(i)
            end.record(stream)
        end.synchronize()
        return elapsed_ms(start, end) / k
    t0 = time.perf_counter()
    for i in range(k):
        copy(i)
    return (time.perf_counter() - t0) * 1e3 / k


def measure(
    nbytes: int, methods: Sequence[str], device: torch.device, repeats: int = 5, warm_link: bool = True
) -> list[dict[str, float | str | int]]:
    """One row per method for this size (``warm_link`` False: without the sustained copies first, as
    ``scripts/bench_link_warmup.py`` times a cold link)."""
    k = max(1, min(50, (64 * MiB) // nbytes))
    stream = torch.cuda.Stream(device)
    pageable = [_random(nbytes), _random(nbytes)]
    pinned = [p.pin_memory() for p in pageable]
    dev_dst = torch.empty(nbytes, dtype=torch.uint8, device=device)
    dev_src = _random(nbytes, device=device)
    host_dst = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    ops: dict[str, tuple[Callable[[int], object], bool]] = {  # what a copy returns is dropped
        "pageable_h2d": (lambda i: dev_dst.copy_(pageable[i % 2]), True),
        "pinned_h2d": (lambda i: dev_dst.copy_(pinned[i % 2], non_blocking=True), True),
        "d2h": (lambda i: host_dst.copy_(dev_src, non_blocking=True), True),
        "memcpy_to_pinned": (lambda i: host_dst.copy_(pageable[i % 2]), False),
        "pin_memory": (lambda i: pageable[i % 2].pin_memory(), False),
    }
    rows: list[dict[str, float | str | int]] = []
    if warm_link:
        _warm_link(device, stream)  # after the allocations above (pinning a large source takes a while)
    for method in methods:
        copy, gpu = ops[method]
        for _ in range(2):
            _per_copy_ms(k, copy, gpu, stream)
        times = sorted(_per_copy_ms(k, copy, gpu, stream) for _ in range(repeats))
        ms = times[len(times) // 2]
        rows.append({"method": method, "bytes": nbytes, "ms": ms, "GBps": nbytes / ms / 1e6, "repeats": repeats})
    return rows


def sweep(
    sizes: Sequence[int] = SWEEP_SIZES,
    methods: Sequence[str] = METHODS,
    device: str | torch.device = "cuda",
    repeats: int = 5,
    progress: bool = True,
) -> pd.DataFrame:
    """The full sweep (columns in the module docstring)."""
    dev = torch.device(device)
    rows: list[dict[str, float | str | int]] = []
    from tqdm import tqdm

    for nbytes in tqdm(sizes, desc="bandwidth", unit="size", disable=not progress):
        rows.extend(measure(nbytes, methods, dev, repeats))
    return pd.DataFrame(rows)


def link_limit_GBps() -> tuple[float | None, str]:
    """The PCIe link's payload limit from nvidia-smi (max generation and width), or (None, why)."""
    try:
        out = (
            subprocess.run(
                ["nvidia-smi", "--query-gpu=pcie.link.gen.max,pcie.link.width.max", "--format=csv,noheader,nounits"],
                capture_output=True,
                text=True,
                timeout=10,
                check=True,
            )
            .stdout.strip()
            .splitlines()[0]
        )
        gen, width = (int(x) for x in out.split(","))
    except (OSError, subprocess.SubprocessError, ValueError, IndexError) as err:
        return None, f"link limit unknown ({type(err).__name__})"
    rate = PCIE_LANE_GBps.get(gen)
    if rate is None:
        return None, f"PCIe Gen{gen} x{width}: per-lane rate unknown"
    return rate * width, f"PCIe Gen{gen} x{width}"


def cache_key(device: torch.device) -> str:
    ident = f"{torch.cuda.get_device_name(device)}|{driver_version()}|{torch.__version__}"
    return hashlib.sha1(ident.encode()).hexdigest()[:12]


def _read_cache(path: Path) -> pd.DataFrame:
    """The cached calibration, or an empty one where there is none or it is not one (said in a line:
    the sizes are measured again)."""
    empty = pd.DataFrame(columns=["bytes", "pinned_GBps", "pageable_GBps"])
    if not (path.exists() or path.is_symlink()):
        return empty
    try:
        cal = parse_calibration(read_bounded(path, 16 << 20, "calibration cache"), path)
    except ReportError as err:
        print(f"pinprof: {err}; measuring again", file=sys.stderr)
        return empty
    return cal if "pageable_GBps" in cal else empty


def calibration(sizes: Sequence[int], device: torch.device, cache_dir: Path | None = None) -> pd.DataFrame:
    """Pinned and pageable H2D rates at ``sizes`` (columns bytes, pinned_GBps, pageable_GBps),
    cached per device, driver and torch version under ``cache_dir`` (default ~/.cache/pinprof)."""
    cache_dir = Path(cache_dir or current().cache_dir)
    path = cache_dir / f"calibration-{cache_key(device)}.csv"
    cached = _read_cache(path)
    missing = sorted({int(s) for s in sizes} - set(cached.bytes.astype(int)))
    if missing:
        rows = []
        for nbytes in missing:
            r = {m["method"]: m["GBps"] for m in measure(nbytes, ("pinned_h2d", "pageable_h2d"), device, repeats=5)}
            rows.append({"bytes": nbytes, "pinned_GBps": r["pinned_h2d"], "pageable_GBps": r["pageable_h2d"]})
        cached = pd.concat([cached, pd.DataFrame(rows)], ignore_index=True).sort_values("bytes")
        try:
            cache_dir.mkdir(parents=True, exist_ok=True)
            write_csv(cached, path)
            write_text_atomic(cache_dir / "README.json", json.dumps({"what": "pinprof bandwidth calibration cache"}))
        except OSError:
            pass  # an unwritable cache only costs a re-measurement next time
    return cached[cached.bytes.isin([int(s) for s in sizes])].reset_index(drop=True)
