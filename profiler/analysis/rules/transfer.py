"""Rules on the copy itself: hidden staging, layout copies, non_blocking on pageable memory, the two
kinds of exposed transfer (the host blocked by the copy; the GPU idle waiting for it), and too small
to matter."""

from __future__ import annotations

from typing import Any

import numpy as np

from profiler.analysis.findings import Change, Verdict
from profiler.analysis.rules.base import EXPOSED_SHARE, TOO_SMALL_SHARE, Case, Rule, fired, fmt, spent

# A pageable copy this many times slower than a pinned one of the same size is mostly the driver's
# hidden staging (1.51 ms against 0.25 ms for 12.5 MiB on the H200, a factor 5.9: reports/h200-bandwidth/).
HIDDEN_STAGING_FACTOR = 2.0
# Epoch-time benchmarks differ by several percent from run to run (the naive benchmark's pinned-minus-
# pageable batch time was -13.8% in one H200 run and +14.4% in another). A saving below this share of
# the batch is invisible to them, although pinprof measures it per batch.
EPOCH_NOISE_SHARE = 0.05


def _staging_saving(c: Case) -> float:
    return max(0.0, c.h2d - c.predicted)


HIDDEN_STAGING = Rule(
    Verdict.HIDDEN_STAGING,
    f"a pageable copy takes more than {HIDDEN_STAGING_FACTOR:g}x what the measured pinned bandwidth predicts",
    lambda c: bool(
        c.gpu
        and c.pageable
        and not _bypassed(c)  # pinned already: the layout copy is what goes pageable (PINNED_BYPASSED)
        and not np.isnan(c.predicted)
        and c.h2d > HIDDEN_STAGING_FACTOR * c.predicted
    ),
    lambda c: (
        f"the pageable copy of {c.m['bytes'] / 2**20:.2f} MiB takes {fmt(c.h2d)} where the pinned "
        f"bandwidth ({c.rate:.1f} GB/s) predicts {fmt(c.predicted)}: {c.h2d / c.predicted:.1f}x, the "
        "driver's hidden CPU-to-CPU staging."
    ),
    # overlapped behind CPU work the whole wait can go; at worst the staging goes
    lambda c: [
        Change(
            "set pin_memory=True and copy with non_blocking=True on a side stream (mode pinned_nb)",
            max(c.wait, _staging_saving(c)),
            {"mode": "pinned_nb"},
        ),
        Change(
            "or stage explicitly (mode staged) when pinning in the loader is too slow",
            _staging_saving(c),
            {"mode": "staged"},
        ),
    ],
)


def _leaves(c: Case) -> list[dict[str, Any]]:
    """The leaves the loop's copies made contiguous (meta.json's ``layout_leaves``, largest layout
    time first; ``profiler.capture.dense``), the well-formed ones."""
    got = c.loader.get("layout_leaves")
    return [x for x in got if isinstance(x, dict) and "path" in x] if isinstance(got, list) else []


def _leaf_words(leaf: dict[str, Any]) -> str:
    """``batch['image'] (uint8 [64, 224, 224, 3], strides [200704, 896, 4, 1])``."""
    path = leaf.get("path") or "a tensor of the batch"
    return f"{path} ({leaf.get('dtype', '?')} {list(leaf.get('shape', []))}, strides {list(leaf.get('strides', []))})"


def _named(c: Case) -> str:
    """The leaves, by name, the largest layout time first: one named in full, the others by path."""
    leaves = _leaves(c)
    if not leaves:
        return "non-dense tensors (slices, expand(), strided views)"
    rest = [x.get("path") or "?" for x in leaves[1:]]
    return _leaf_words(leaves[0]) + (f" and {', '.join(rest)}" if rest else "")


def _dense_code(c: Case) -> str:
    """The change as code: each leaf made contiguous where the batch is made."""
    paths = [x["path"] for x in _leaves(c) if x.get("path") and "(" not in x["path"]]
    if not paths:
        return "return each tensor of the batch .contiguous() from __getitem__ or the collate_fn"
    lines = "; ".join(f"{p} = {p}.contiguous()" for p in paths[:3])
    return f"in the collate_fn, before it returns the batch: {lines}"


def _bypassed(c: Case) -> bool:
    """pin_memory pinned a leaf whose copy read pageable memory all the same (a layout copy of it)."""
    return any(x.get("pinned") for x in _leaves(c))


LAYOUT_COPY = Rule(
    Verdict.LAYOUT_COPY,
    f"the main thread spends at least {TOO_SMALL_SHARE:.0%} of the batch making non-dense tensors contiguous",
    lambda c: c.layout > 0 and c.layout >= TOO_SMALL_SHARE * c.batch,
    lambda c: (
        f"the main thread spends {fmt(c.m['layout'])} of the mean {fmt(c.batch)} batch making {_named(c)} "
        "contiguous before their copy: torch does so inside .to() for a tensor with gaps, where it looks like "
        "transfer time. Their DMA then reads that pageable copy, pinned or not"
        + (f"; the driver stages it first ({fmt(c.m['hidden_stage'])} a batch)." if spent(c.m, "hidden_stage") else ".")
    ),
    lambda c: [
        Change(
            f"make it dense in the DataLoader workers, where the batch is made, so the main thread copies it as it "
            "is and pin_memory pins "
            f"the dense tensor ({_dense_code(c)}); or copy the dense parent and slice on the GPU "
            "(parent.to(device, non_blocking=True)[..., :3])",
            c.layout + (spent(c.m, "hidden_stage") if c.pin_memory else 0.0),
        )
    ],
)

PINNED_BYPASSED = Rule(
    Verdict.PINNED_BYPASSED,
    "pin_memory pinned a batch tensor whose copy still reads pageable memory (it is not dense)",
    lambda c: bool(c.gpu and _bypassed(c) and c.layout > 0),
    lambda c: (
        f"pin_memory=True pinned {_named(c)}, but its copy reads pageable memory: the tensor is not dense, so "
        f".to() first makes a contiguous copy of it in pageable memory ({fmt(c.m['layout'])} a batch) and the "
        f"driver stages that copy ({fmt(c.m['hidden_stage'])}) before its DMA ({fmt(c.m['dma'])}); the pin "
        "step's work on it buys nothing."
    ),
    lambda c: [
        Change(
            f"pin a dense tensor: {_dense_code(c)}",
            c.layout + spent(c.m, "hidden_stage"),
        )
    ],
)

NON_BLOCKING_PAGEABLE = Rule(
    Verdict.NON_BLOCKING_PAGEABLE,
    "non_blocking=True on a pageable batch",
    lambda c: bool(c.gpu and not _bypassed(c) and (c.mode == "pageable_nb" or (c.non_blocking and c.pageable))),
    lambda c: (
        f"non_blocking=True on a pageable batch has no effect: the loop still waits {fmt(c.wait)} "
        f"for a {fmt(c.h2d)} copy. The driver must copy pageable memory into its own pinned "
        "buffer before the DMA, and does so inside the call."
    ),
    lambda c: [Change("pin the batch (pin_memory=True) so non_blocking can overlap", c.wait, {"pin_memory": True})],
)


def _under(c: Case) -> float:
    """The work a copy issued one step early can run under: the step's compute and CPU work."""
    return c.comp + c.cpu


def _ahead(c: Case, exposed: float) -> list[Change]:
    """The change that issues the copy a step early, in the words of the loop's own code: none for a
    loop that does so already (mode prefetch, timm's PrefetchLoader, a side-stream prefetcher);
    Accelerate's own switch for its prepared loader, which copies batch n and then fetches n+1."""
    if c.mode == "prefetch" or c.loop == "device-prefetch":
        return []
    if c.framework == "accelerate":
        return [
            Change(
                "Accelerate: Accelerator(dataloader_config=DataLoaderConfiguration(non_blocking=True)) and "
                "pin_memory=True on the DataLoader: the prepared loader then copies batch n without blocking "
                "and fetches batch n+1 while the copy runs",
                min(exposed, _under(c)),
                {"pin_memory": True, "non_blocking": True},
            )
        ]
    return [_prefetch(c, exposed)]


def _prefetch(c: Case, exposed: float) -> Change:
    return Change(
        "prefetch: fetch batch n+1 and issue its copy on a side stream before step n's compute, and make "
        "the compute stream wait for it only when batch n+1 is used (mode prefetch)",
        min(exposed, _under(c)),
        {"mode": "prefetch"},
    )


HOST_BLOCKED = Rule(
    Verdict.HOST_BLOCKED,
    f"a blocking copy from pinned memory holds the host for at least {EXPOSED_SHARE:.0%} of the copy "
    f"and {TOO_SMALL_SHARE:.0%} of the batch",
    lambda c: bool(
        c.gpu
        and not c.pageable
        and not c.asynchronous
        and c.h2d > 0
        and c.wait >= EXPOSED_SHARE * c.h2d
        and c.copy_exposed >= TOO_SMALL_SHARE * c.batch  # not the wait for the step before: compute
    ),
    lambda c: (
        f"the host is blocked {fmt(c.wait)} in the copy call for a {fmt(c.h2d)} copy; "
        + (
            f"the GPU idles {fmt(c.copy_exposed)} of it (the rest is the step before, still running)."
            if c.copy_exposed < c.wait
            else f"only {fmt(c.m['overlap'])} of it overlaps other work."
        )
    ),
    lambda c: [
        *(  # only CPU work between the copy and its use can hide it in pinned_nb
            [
                Change(
                    "copy with non_blocking=True on a side stream and do the CPU work before using the batch "
                    "(mode pinned_nb)",
                    min(c.copy_exposed, c.cpu),
                    {"mode": "pinned_nb"},
                )
            ]
            if c.cpu > 0 and c.framework != "accelerate"
            else []
        ),
        *_ahead(c, c.copy_exposed),
    ],
)


def _gpu_idle_evidence(c: Case) -> str:
    idle = c.m.get("gpu_idle", np.nan)
    if np.isnan(idle):
        return f"the step waits {fmt(c.wait)} for a {fmt(c.h2d)} asynchronous copy (GPU idle time not recorded)."
    return (
        f"the copy is issued after the previous step has finished: for {fmt(idle)} of its {fmt(c.h2d)} the GPU "
        f"runs none of the loop's work, and the step waits {fmt(c.copy_exposed)} for it."
    )


def _gpu_idle_remedies(c: Case) -> list[Change]:
    changes = _ahead(c, c.copy_exposed)
    if c.mode == "prefetch" or c.loop == "device-prefetch":  # already one step ahead: the copy outlasts its step
        changes.append(
            Change(
                f"the copy ({fmt(c.h2d)}) outlasts the step it runs under ({fmt(_under(c))}): send fewer "
                "bytes (uint8 images, converted and normalised on the GPU)",
                0.0,
            )
        )
    return changes


GPU_IDLE = Rule(
    Verdict.GPU_IDLE,
    f"an asynchronous copy runs on an otherwise idle GPU and the step's compute waits for it, at least "
    f"{TOO_SMALL_SHARE:.0%} of the batch",
    # a step to hide the copy under: without compute the loop has nothing for the GPU to overlap
    lambda c: bool(
        c.asynchronous and c.h2d > 0 and not np.isnan(c.m["compute"]) and c.copy_exposed >= TOO_SMALL_SHARE * c.batch
    ),
    _gpu_idle_evidence,
    _gpu_idle_remedies,
)

TRANSFER = (Verdict.HIDDEN_STAGING, Verdict.NON_BLOCKING_PAGEABLE, Verdict.HOST_BLOCKED, Verdict.GPU_IDLE)


def _best_saving(c: Case) -> float:
    return max([c.exposed] + [ch.gain_ms for x in c.found if x.verdict in TRANSFER for ch in x.changes])


def _too_small(c: Case) -> bool:
    if not c.gpu or not c.batch:
        return False
    return c.exposed < TOO_SMALL_SHARE * c.batch or _best_saving(c) < EPOCH_NOISE_SHARE * c.batch


def _too_small_evidence(c: Case) -> str:
    exposed, batch = c.exposed, c.batch
    if exposed < TOO_SMALL_SHARE * batch:
        return f"the exposed transfer is {fmt(exposed)}, {exposed / batch:.2%} of the {fmt(batch)} batch: too small to matter."
    saving = _best_saving(c)
    return (
        f"the best transfer change saves about {fmt(saving)} per batch, {saving / batch:.1%} of "
        f"the {fmt(batch)} batch: below the ~{EPOCH_NOISE_SHARE:.0%} run-to-run noise of "
        "epoch timing, so a benchmark that times epochs cannot see it; pinprof measures it per batch."
    )


TOO_SMALL = Rule(
    Verdict.TOO_SMALL,
    f"the exposed transfer is under {TOO_SMALL_SHARE:.0%} of the batch, or the best transfer change saves "
    f"under {EPOCH_NOISE_SHARE:.0%}",
    # last among the transfer rules: it weighs their findings
    lambda c: _too_small(c) and not (fired(c, Verdict.NO_GPU) or fired(c, Verdict.NO_COPY)),
    _too_small_evidence,
)
