#!/usr/bin/env python3
"""What each call on the recorder's per-batch path costs on the host, and what its alternatives cost.

Each call is repeated ``--calls`` times in a tight loop, after a warm-up, in ``--reps`` repetitions;
printed: the median over repetitions of the mean time per call, in microseconds. These are host
costs of the calls alone (no GPU work waits behind them), to choose between ways of making the same
call; the recorder's cost per batch, side by side with the bare loop, is ``scripts/bench_overhead.py``.

    python scripts/bench_primitives.py [--calls 20000] [--reps 5] [--records none|memcpy|kernels]

``--records`` enables CUPTI's activity records first, as ``pinprof profile`` does before the script's
CUDA work (``scripts/bench_launch_cost.py``'s ``start_records``; buffers given back unread): ``memcpy``
its memcpy records alone (the default clock's), ``kernels`` the kernel records too. Each CUDA call
then pays what CUPTI adds to it; one process a setting, so run it once for each.
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import time
from collections.abc import Callable

import torch

from profiler.capture.batch_tree import memory_kind
from profiler.capture.clock import now_ms
from profiler.capture.cuda.events import EventPool, current_stream, query, record, set_stream
from profiler.capture.cuda.gate import make_gate
from profiler.capture.store import TEMPLATE, Store


def per_call_us(fn: Callable[[], object], calls: int, reps: int) -> float:
    for _ in range(min(calls, 2000)):  # warm-up
        fn()
    torch.cuda.synchronize()
    got = []
    for _ in range(reps):
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            fn()
        got.append((time.perf_counter_ns() - t0) / calls / 1e3)
        torch.cuda.synchronize()  # what the calls queued drains between repetitions, outside the timing
    return statistics.median(got)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=20000, help="calls per repetition (default 20000)")
    ap.add_argument("--reps", type=int, default=5, help="repetitions (default 5)")
    ap.add_argument(
        "--records",
        choices=("none", "memcpy", "kernels"),
        default="none",
        help="CUPTI's records on first: memcpy alone, or with kernels (default none)",
    )
    args = ap.parse_args()
    if args.records != "none":  # before any CUDA work, as pinprof profile starts them
        from bench_launch_cost import start_records

        start_records(latency=False, kernels=args.records == "kernels")
    dev = torch.device("cuda")
    idx = torch.cuda.current_device()
    side = torch.cuda.Stream(dev)
    main_stream = current_stream(idx)
    src = torch.randint(0, 255, (1024,), dtype=torch.uint8).pin_memory()
    pageable = torch.randint(0, 255, (1024,), dtype=torch.uint8)
    dst = torch.empty_like(src, device=dev)
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    record(a, side)
    record(b, side)
    torch.cuda.synchronize()
    elapsed_torch = torch._C._CudaEventBase.elapsed_time
    libcuda = ctypes.CDLL("libcuda.so.1")
    drv_elapsed = libcuda.cuEventElapsedTime
    drv_elapsed.argtypes = [ctypes.POINTER(ctypes.c_float), ctypes.c_void_p, ctypes.c_void_p]
    out = ctypes.c_float()
    ha, hb = a.cuda_event, b.cuda_event
    drv_query = libcuda.cuEventQuery
    drv_query.argtypes = [ctypes.c_void_p]
    gate = make_gate(dev)
    drv_wait = libcuda.cuStreamWaitValue32_v2
    drv_wait.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint]
    side_handle = side.cuda_stream
    pool = EventPool(dev)
    store = Store()
    rec = dict(TEMPLATE)  # a batch's record as the loop's fetch makes it (profiler.capture.loop.fetch_begin)
    rec.update(batch=0, warmup=False, epoch=0, src_memory="pinned")

    def hold_bindings() -> None:
        gate.hold(side)  # type: ignore[union-attr]
        gate.release()  # type: ignore[union-attr]

    # The same flag, so the two ways hold and release alike (GEQ waits on a growing value).
    flag_dptr = int(gate._dptr) if gate is not None else 0
    cell = gate._cell if gate is not None else None

    def hold_ctypes() -> None:
        gate._value = value = (gate._value + 1) & 0x7FFFFFFF  # type: ignore[union-attr]
        drv_wait(side_handle, flag_dptr, value, 0)  # 0: CU_STREAM_WAIT_VALUE_GEQ
        cell.value = value  # type: ignore[union-attr]

    def alloc_side() -> None:
        set_stream(side)
        torch.empty_like(src, device=dev)
        set_stream(main_stream)

    def pool_cycle() -> None:
        pool.put(pool.get(), pool.get())

    def store_append() -> None:
        store.append(rec)

    cases: list[tuple[str, Callable[[], object]]] = [
        ("now_ms()", now_ms),
        ("current_stream(idx)", lambda: current_stream(idx)),
        ("set_stream(s)", lambda: set_stream(main_stream)),
        ("Event.record (C method)", lambda: record(a, side)),
        ("Event.query (C method), done", lambda: query(b)),
        ("cuEventQuery (ctypes), done", lambda: drv_query(hb)),
        ("Event.elapsed_time (C method)", lambda: elapsed_torch(a, b)),
        ("cuEventElapsedTime v1 (ctypes)", lambda: drv_elapsed(ctypes.byref(out), ha, hb)),
        ("Tensor.is_pinned(), pinned", src.is_pinned),
        ("Tensor.is_pinned(), pageable", pageable.is_pinned),
        ("memory_kind(pinned)", lambda: memory_kind(src)),
        ("gate hold+release (cuda.bindings)", hold_bindings),
        ("gate hold+release (ctypes)", hold_ctypes),
        ("empty_like on a side stream (+2 set_stream)", alloc_side),
        ("torch.empty_like(device=cuda)", lambda: torch.empty_like(src, device=dev)),
        ("dst.copy_(pinned 1 KiB, non_blocking)", lambda: dst.copy_(src, non_blocking=True)),
        ("src.to(cuda, non_blocking) 1 KiB", lambda: src.to(dev, non_blocking=True)),
        ("dst.record_stream(s)", lambda: dst.record_stream(main_stream)),
        ("side.wait_stream(main)", lambda: side.wait_stream(main_stream)),
        ("EventPool get x2 + put", pool_cycle),
        ("dict(TEMPLATE)", lambda: dict(TEMPLATE)),
        ("Store.append(rec)", store_append),
    ]
    if gate is None:
        cases = [c for c in cases if not c[0].startswith("gate")]
        print("no stream gate here (cuda.bindings or stream memory operations missing)")
    print(
        f"host cost per call, us (median of {args.reps} repetitions of {args.calls} calls), torch {torch.__version__}, "
        f"CUPTI's records: {args.records}"
    )
    for name, fn in cases:
        print(f"  {name:48s} {per_call_us(fn, args.calls, args.reps):8.3f}")


if __name__ == "__main__":
    main()
