"""The pin-thread rule: the DataLoader's one pin thread cannot keep up, and why.

The causes come from what the pin hook measured on the pinning thread (``profiler.capture.pin_hook``):
its CPU time against its wall time (the rest it waited, for the GIL or a core), its minor page faults
against the batch's pages (the first touch of the worker's shared memory), and the pinned allocator's
time in cudaHostAlloc (``torch.cuda.host_memory_stats``).
"""

from __future__ import annotations

import math

import numpy as np

from profiler.analysis.findings import Change, Verdict
from profiler.analysis.rules.base import Case, Rule, fmt
from profiler.analysis.rules.pace import LOADER_SHARE

# The pin thread waited for at least this share of its pin: the GIL (held by the main thread's Python
# between its releases, up to sys.getswitchinterval() = 5 ms at a time) or a free core.
WAITED_SHARE = 0.3
# Minor faults cover at least this share of the batch: the pin copy is the first to read the
# worker's shared memory in this process. Shared memory is file-backed, and Linux maps up to 16 pages
# per such fault (fault_around_bytes, 64 KiB by default): on the H200 machine 1,177 faults per 73.5
# MiB batch, 64 KiB each (tests/data/h200_gpu_bound).
FIRST_TOUCH_SHARE = 0.5
FAULT_BYTES = 64 * 1024
# cudaHostAlloc/cudaHostRegister take at least this share of the pin: the allocator grows per batch.
ALLOC_SHARE = 0.2


def _fires(c: Case) -> bool:
    pin = c.m["pin"]
    # The loop must also wait in next(): a pin thread slower than the loop that the loop never waits
    # for (batches pinned ahead, during a long first fetch) costs nothing.
    waits = c.fetch >= LOADER_SHARE * c.batch
    return bool(c.pin_memory and not np.isnan(pin) and c.workers and pin > c.consumer and waits)


def _excess(c: Case) -> float:
    """What a pin thread as fast as the loop would save: the pin's excess, at most the loop's wait."""
    return min(c.m["pin"] - c.consumer, c.fetch)


def _waited(c: Case) -> bool:
    return bool(c.m["pin"] - c.m.get("pin_cpu", np.nan) >= WAITED_SHARE * c.m["pin"])


def _first_touch(c: Case) -> bool:
    return bool(c.m.get("pin_faults", np.nan) * FAULT_BYTES >= FIRST_TOUCH_SHARE * c.m["bytes"])


def _allocating(c: Case) -> bool:
    return bool(c.m.get("pin_alloc", np.nan) >= ALLOC_SHARE * c.m["pin"])


def _causes(c: Case) -> list[str]:
    m, pin = c.m, c.m["pin"]
    out = []
    if _waited(c):
        waited = pin - m["pin_cpu"]
        out.append(f"the pin thread waited {fmt(waited)} of its {fmt(pin)} ({waited / pin:.0%}) for the GIL or a core")
    if _allocating(c):
        out.append(
            f"page-locked allocation: {m.get('pin_allocs', np.nan):.0f} new pinned block(s) per batch, "
            f"{fmt(m['pin_alloc'])} in cudaHostAlloc"
        )
    cpu = m.get("pin_cpu", np.nan)
    if not out and cpu >= (1 - WAITED_SHARE) * pin:
        out.append(
            f"the copy itself: the pin thread runs {fmt(cpu)} of CPU for {m['bytes'] / 2**20:.1f} MiB, "
            f"{m['bytes'] / cpu / 1e6:.1f} GB/s on one core"
        )
    if _first_touch(c):
        out.append(
            f"it is the first to touch the workers' shared memory ({m['pin_faults']:,.0f} page faults per batch, "
            "their time inside the copy's)"
        )
    return out


def _evidence(c: Case) -> str:
    causes = _causes(c)
    known = not all(np.isnan(c.m.get(k, np.nan)) for k in ("pin_cpu", "pin_faults", "pin_alloc"))
    why = "; ".join(causes) if causes else ("no single cause stands out" if known else "causes not recorded")
    return (
        f"the single pin thread needs {fmt(c.m['pin'])} per batch but the loop consumes one every "
        f"{fmt(c.consumer)}: batches wait for pinning (fetch {fmt(c.m['fetch'])}). Why: {why}. "
        "Pinning inside the workers is no remedy: memory pinned in another process is not pinned here."
    )


def _in_flight_mib(c: Case) -> int:
    """Pinned MiB of the batches alive at once: workers x prefetch_factor + the two the loop holds."""
    alive = (c.workers or 0) * (c.prefetch_factor or 2) + 2
    return max(1, math.ceil(alive * c.m["bytes"] / 2**20))


def _remedies(c: Case) -> list[Change]:
    m, excess = c.m, _excess(c)
    changes = [
        Change(
            "use the staged mode: the main thread copies into reused pinned buffers in chunks, overlapped "
            "with the DMA, and no pin thread is needed",
            excess,
            {"mode": "staged"},
        )
    ]
    if _waited(c):
        changes += [
            Change(
                f"raise prefetch_factor (now {c.prefetch_factor}): more batches wait for the pin thread when "
                "the main thread releases the GIL (in next(), in CUDA calls)",
                0.0,
            ),
            Change("use fewer, larger batches: the pin thread takes the GIL per batch and per tensor", 0.0),
        ]
    if not _waited(c):  # the pin thread's time is its copy: fewer bytes, less of it
        changes.append(
            Change(
                "send fewer bytes: uint8 images (converted and normalised on the GPU) are a quarter of "
                "float32's to copy and to fault in",
                0.0,
            )
        )
    alloc = m.get("pin_alloc", np.nan)
    if _allocating(c):
        changes.append(
            Change(
                f"reserve pinned memory up front: PYTORCH_CUDA_ALLOC_CONF=pinned_reserve_segment_size_mb:"
                f"{_in_flight_mib(c)} (the batches alive at once)",
                min(alloc, excess),
            )
        )
    return changes


PIN_THREAD_BOUND = Rule(
    Verdict.PIN_THREAD_BOUND,
    "pin_memory=True with workers, the pin step of a batch takes longer than the loop's own time per batch, "
    f"and the loop waits in next(loader) for at least {LOADER_SHARE:.0%} of the batch",
    _fires,
    _evidence,
    _remedies,
)
