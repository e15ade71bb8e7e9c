#!/usr/bin/env python3
"""What the resnet50 bench's CUPTI hang needs (on a GPU; ``scripts/gpu_check.sh`` step ``cupti-hang``).

``scripts/bench_profile_overhead.py --cupti --late-cupti`` starts CUPTI's records after its 40-step
warm-up, hands them back for its first bare block and takes them again for its first profiled block.
On the H200 it hung there every time: the autograd engine's thread in ``cuLaunchKernelEx`` (cuBLASLt
under cuDNN's weight gradient) waiting for a driver lock, every other thread idle. This runs that
bench with one part taken away:

- ``as-is``: nothing changed;
- ``quiet-drainer``: the recorder's thread reads buffers but calls nothing of CUPTI (no dropped
  count, no new clock pair off the main thread);
- ``no-drainer``: no recorder thread; buffers are read at the forced collects only;
- ``flush-off``: no periodic flush by CUPTI's own thread (``PINPROF_CUPTI_FLUSH_MS=0``): buffers come
  back when full;
- ``quiet-flush-off``: both ``quiet-drainer`` and ``flush-off``;
- ``gate-off``: no stream gate (``PINPROF_GATE=0``);
- ``early``: the bench's default without ``--late-cupti``: the records start before the model is
  built, as ``pinprof profile`` starts them before the script. (On the H200 this variant started them
  once the model was built, before the warm-up: the bench's order then.)

On the H200 (2026-12-04): ``as-is``, ``flush-off``, ``quiet-drainer``, ``quiet-flush-off``,
``gate-off``, and ``as-is`` with ``CUDA_MODULE_LOADING=EAGER`` hung; ``early`` ran to its end.

On an H100 (2026-12-05), ``early -- --handover none`` hung in its fourth
block in each run with kernels' launch times on, also under ``PINPROF_CUPTI_FLUSH_MS=0``,
``CUDA_MODULE_LOADING=EAGER`` and ``PINPROF_CUPTI_QUEUES=process``; with ``PINPROF_CUPTI_LATENCY=0``
it ran to its end, as did ``as-is`` and ``early`` (records handed over between blocks). The stacks
(``scripts/gpu_check.sh``'s step ``cupti-hang``, every thread through ``eu-stack``): a kernel launch
waiting to write-lock a driver lock, a thread of CUPTI's waiting to read-lock (once ``cuMemHostAlloc``
waiting to write-lock too). The launch times are off unless
``PINPROF_CUPTI_LATENCY=1`` asks for them (markers place the kernels instead).

    python scripts/cupti_hang.py VARIANT -- [bench_profile_overhead.py arguments]
"""

from __future__ import annotations

import os
import runpy
import sys
import threading
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
VARIANTS = ("as-is", "quiet-drainer", "no-drainer", "flush-off", "quiet-flush-off", "gate-off", "early")


def patch(variant: str) -> None:
    """Take away the part ``variant`` names (see the module's docstring)."""
    from profiler.capture.clocks.cupti.clock import CuptiClock
    from profiler.capture.clocks.cupti.recorder import CuptiRecorder

    if variant == "gate-off":
        os.environ["PINPROF_GATE"] = "0"
    if variant in ("flush-off", "quiet-flush-off"):
        os.environ["PINPROF_CUPTI_FLUSH_MS"] = "0"
    if variant in ("quiet-drainer", "quiet-flush-off"):
        update = CuptiClock.update

        def main_only(self: CuptiClock, wait: bool = False) -> None:
            if threading.current_thread() is threading.main_thread():
                update(self, wait)

        CuptiClock.update = main_only  # type: ignore[method-assign]
        CuptiRecorder._count_dropped = lambda self, ctx, stream: None  # type: ignore[method-assign]
    elif variant == "no-drainer":

        def idle(self: Any) -> None:
            return None

        CuptiRecorder._drain_loop = idle  # type: ignore[method-assign]


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in VARIANTS:
        raise SystemExit(f"usage: cupti_hang.py {{{','.join(VARIANTS)}}} -- [bench arguments]")
    variant = sys.argv[1]
    rest = sys.argv[2:]
    if rest[:1] == ["--"]:
        rest = rest[1:]
    patch(variant)
    print(f"cupti_hang: {variant}", flush=True)
    late = [] if variant == "early" else ["--late-cupti"]
    sys.argv = [str(HERE / "bench_profile_overhead.py"), "--cupti", *late, *rest]
    sys.path.insert(0, str(HERE))
    runpy.run_path(sys.argv[0], run_name="__main__")


if __name__ == "__main__":
    main()
