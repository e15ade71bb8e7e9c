#!/usr/bin/env python3
"""Which of pinprof's own CUPTI calls the bench's hang needs (on a GPU; ``scripts/gpu_check.sh`` step
``cupti-hang``).

``scripts/bench_profile_overhead.py --cupti`` hung on the H200 (2026-12-03) with the autograd
engine's thread in ``cuLaunchKernelEx`` waiting for a lock in the driver, while the recorder's own
thread (``pinprof-cupti``) calls CUPTI for every buffer it reads: ``cuptiGetTimestamp`` for the
clock's pair and ``cuptiActivityGetNumDroppedRecords``, concurrently with the loop's launches. This
runs the bench with one part of that taken away:

- ``as-is``: nothing changed;
- ``quiet-drainer``: the recorder's thread reads buffers but calls nothing of CUPTI (no dropped
  count, no new clock pair off the main thread);
- ``no-drainer``: no recorder thread; buffers are read at the forced collects only;
- ``flush-off``: no periodic flush by CUPTI's own thread (``PINPROF_CUPTI_FLUSH_MS=0``): buffers come
  back when full;
- ``quiet-flush-off``: both ``quiet-drainer`` and ``flush-off``;
- ``gate-off``: no stream gate (``PINPROF_GATE=0``): the session's first anchor, right after the
  recorder starts, holds no stream and writes no flag back;
- ``early``: nothing taken away, but the recorder starts as soon as the model is built, before the
  warm-up's first step (the bench starts it at its first profiled block, after 80 steps).

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
    from profiler.capture.cupti.recorder import CuptiClock, CuptiRecorder

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
    elif variant == "early":
        sys.path.insert(0, str(HERE))
        import resnet_train
        import torch

        from profiler.capture import backend

        build = resnet_train.build

        def built(*args: Any, **kwargs: Any) -> Any:
            got = build(*args, **kwargs)
            os.environ["PINPROF_BACKEND"] = "cupti"
            from profiler.settings import current

            current.cache_clear()
            rec = backend.recorder(torch.device("cuda"))
            print(f"cupti_hang: recorder started before the warm-up: {rec is not None and rec.active}", flush=True)
            return got

        resnet_train.build = built  # the bench imports it by name after this
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
    sys.argv = [str(HERE / "bench_profile_overhead.py"), "--cupti", *rest]
    sys.path.insert(0, str(HERE))
    runpy.run_path(sys.argv[0], run_name="__main__")


if __name__ == "__main__":
    main()
