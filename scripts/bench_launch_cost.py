#!/usr/bin/env python3
"""What CUPTI's activity records cost each kernel launch on the host, one setting a process.

A short training step launches about a hundred kernels (a four-layer CNN's step: 108), so a fixed cost
per kernel record in the driver weighs on it far more than on resnet50's. This times, in one process,
``--kernels`` small launches (``x.add_(1)`` on 4 KiB, host-bound: the GPU runs each in about 2 us) a
step, ``--steps`` steps after ``--warm``, with CUPTI's records:

- ``off``: none;
- ``records``: MEMCPY and CONCURRENT_KERNEL records, as pinprof enables them by default (no launch
  times: markers place the kernels, ``profiler.capture.clocks.cupti.marker``);
- ``latency``: the same and the kernels' launch times (``cuptiActivityEnableLatencyTimestamps``), as
  ``PINPROF_CUPTI_LATENCY=1`` asks.

The records are enabled before CUDA starts (as ``pinprof profile`` does) through pinprof's own C
buffer callbacks; a thread gives each completed buffer back unread every 0.1 s, so this is CUPTI's and
the driver's cost, not pinprof's parsing. Printed: the median over steps of host us a launch, and the
records CUPTI delivered. One process holds one setting (CUPTI is process-wide); alternate processes
to compare, as ``scripts/gpu_check.sh`` step ``launch-cost`` does:

    python scripts/bench_launch_cost.py --mode latency [--kernels 100 --steps 400 --warm 50]
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import sys
import threading
import time

import torch

from profiler.capture.clocks.cupti.lib import FLUSH_FORCED

MODES = ("off", "records", "latency")


def start_records(latency: bool, kernels: bool = True) -> tuple[object, list[int], threading.Event]:
    """CUPTI's records on, through pinprof's shim; (library, [record bytes given back], stop event).
    ``kernels=False`` enables the memcpy records alone: the per-launch kernel record is what costs a
    launch-bound step its time, so the two are measured apart."""
    from profiler.capture.clocks.cupti.lib import load
    from profiler.capture.clocks.cupti.recorder import BUFFER_BYTES, DRAIN_S, FLUSH_PERIOD_MS, MAX_BUFFERS
    from profiler.capture.clocks.cupti.records import KERNEL, MEMCPY
    from profiler.capture.clocks.cupti.shim import Shim, build
    from profiler.settings import current

    cuda = torch.version.cuda
    lib, why = load(cuda.split(".")[0] if cuda else None)
    if lib is None:
        sys.exit(f"bench_launch_cost: no CUPTI library: {why}")
    shim = Shim(build(current().cache_dir))
    register = ctypes.cast(lib.handle.cuptiActivityRegisterCallbacks, ctypes.c_void_p).value or 0
    code = shim.register(register, BUFFER_BYTES, MAX_BUFFERS)
    if code:
        sys.exit(f"bench_launch_cost: cuptiActivityRegisterCallbacks returned {lib.result_string(code)}")
    if latency:
        lib.call("cuptiActivityEnableLatencyTimestamps", 1)
    for kind in (MEMCPY, KERNEL) if kernels else (MEMCPY,):  # what the recorder enables (CuptiRecorder._enable)
        lib.call("cuptiActivityEnable", kind)
    lib.call("cuptiActivityFlushPeriod", FLUSH_PERIOD_MS)
    given, stop = [0], threading.Event()

    def drain() -> None:
        while not stop.wait(DRAIN_S):
            while (got := shim.take()) is not None:
                shim.give(got[0])
                given[0] += got[1]

    threading.Thread(target=drain, daemon=True).start()
    return lib, given, stop


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=MODES, required=True)
    ap.add_argument("--kernels", type=int, default=100, help="launches a step (default 100)")
    ap.add_argument("--steps", type=int, default=400, help="timed steps (default 400)")
    ap.add_argument("--warm", type=int, default=50, help="steps before timing (default 50)")
    args = ap.parse_args()
    if args.kernels < 1 or args.steps < 1 or args.warm < 0:
        ap.error(f"--kernels {args.kernels} and --steps {args.steps} must be at least 1, --warm {args.warm} at least 0")
    if not torch.cuda.is_available():
        sys.exit("bench_launch_cost: needs a CUDA GPU")
    lib, given, stop = start_records(args.mode == "latency") if args.mode != "off" else (None, [0], None)
    x = torch.randn(1024, device="cuda")
    per_launch = []
    for i in range(args.warm + args.steps):
        t0 = time.perf_counter_ns()
        for _ in range(args.kernels):
            x.add_(1.0)
        t1 = time.perf_counter_ns()
        torch.cuda.synchronize()  # the queue drained between steps, outside the timing
        if i >= args.warm:
            per_launch.append((t1 - t0) / args.kernels / 1e3)
    if lib is not None:
        lib.call("cuptiActivityFlushAll", FLUSH_FORCED)  # type: ignore[attr-defined]
        time.sleep(0.3)  # the drain thread's next turn takes the flushed buffers
        stop.set()  # type: ignore[union-attr]
    q = statistics.quantiles(per_launch, n=10)
    print(
        f"launch-cost {args.mode}: {statistics.median(per_launch):.3f} us a launch (p10 {q[0]:.3f}, p90 {q[-1]:.3f}; "
        f"{args.steps} steps of {args.kernels}), record bytes delivered {given[0]}",
        flush=True,
    )


if __name__ == "__main__":
    main()
