"""Rules on what sets the loop's pace: the loader, the user's CPU work, GPU compute, the host's own
work between the GPU's kernels, or no GPU at all; and what stops it now and then: Python's full
garbage collections."""

from __future__ import annotations

import numpy as np

from profiler.analysis.findings import Change, Verdict
from profiler.analysis.rules.base import TOO_SMALL_SHARE, Case, Rule, case_text, compute_of_batch, fired, fmt, share

# A loader wait of this share of the batch is worth a finding: TensorBoard's input-pipeline analyzer
# calls a step "moderately input-bound" from 5% of its time waiting for input (xprof,
# input_pipeline_analyzer.cc: kModeratelyInfeedBoundThresholdInPercent = 5).
LOADER_SHARE = 0.05
# User CPU work or GPU compute is at least half the batch: that, not the input pipeline, sets the pace.
WORK_SHARE = 0.5


def _no_gpu_evidence(c: Case) -> str:
    m = c.m
    return (
        f"no GPU phases measured; loader/pin figures are: fetch {fmt(m['fetch'])}, "
        f"pin {fmt(m['pin'])}, stage {fmt(m['stage'])}, CPU work {fmt(m['cpu_work'])} "
        f"per {fmt(c.batch)} batch. Run on a CUDA machine for the transfer verdicts."
    )


NO_GPU = Rule(Verdict.NO_GPU, "no copy was timed on a GPU", lambda c: not c.gpu and not c.on_gpu, _no_gpu_evidence)


def _no_copy_evidence(c: Case) -> str:
    m = c.m
    return (
        f"the run was on {case_text(c.cfg, 'device')}, and no tensor of a batch was copied to it by .to(), .cuda() "
        "or copy_(): batches made on the GPU have nothing to transfer, and a copy made another way "
        "(torch.as_tensor(x, device=...), torch.tensor(x, device=...)) is not seen. Measured per "
        f"{fmt(c.batch)} batch: fetch {fmt(m['fetch'])}, pin {fmt(m['pin'])}, CPU work {fmt(m['cpu_work'])}, "
        f"compute {fmt(m['compute'])}."
    )


# A GPU run whose loop copied nothing: "run on a CUDA machine" would be wrong advice there.
NO_COPY = Rule(Verdict.NO_COPY, "no batch was copied to the GPU", lambda c: not c.gpu and c.on_gpu, _no_copy_evidence)


# At least this share of the workers' time spent waiting (neither on a core nor queued for one): more
# workers than cores overlap more of those waits. Workers that sleep read 0.95 on the 2-core machine,
# workers that compute 0.06 (tests/scripts/worker_loader.py).
WAITING_SHARE = 0.5


# What a DataLoader worker's batch costs the loop to receive (pickled, sent through a queue, its
# tensors rebuilt from shared memory): TensorDataset batches of 16 small images took 0.07 ms a batch
# with no worker and 1.5-1.6 ms with one or two on the 2-core CPU machine (scripts/bench_worker_handoff.py,
# reports/README.md). A loop with no workers that waits less than this a batch loses with workers.
HANDOFF_MS = 0.5


def _loader_remedies(c: Case) -> list[Change]:
    fetch, workers, cores = c.fetch, c.workers, c.cores
    waiting = c.workers_waiting
    if workers == 0 and fetch < HANDOFF_MS:
        # The wait is the dataset's indexing and the collate in the loop's own process (an in-memory
        # dataset): a worker would add its handoff to each batch.
        changes = [
            Change(
                f"fetch whole batches at once: the loader's {fmt(fetch)} a batch is its per-item indexing and "
                "collate in the loop's process (an in-memory dataset); a worker would add its handoff "
                f"(pickling and shared memory, about {HANDOFF_MS:g} ms or more a batch), so keep num_workers=0 "
                "and index a batch in one call (sampler=BatchSampler(RandomSampler(data), batch_size, False), "
                "batch_size=None), or keep the dataset's tensors on the GPU",
                fetch,
            )
        ]
    elif cores is not None and workers is not None and workers >= cores:
        if waiting is not None and waiting >= WAITING_SHARE:
            more = max(2 * workers, workers + cores)
            changes = [
                Change(
                    f"raise num_workers past the {cores} CPU cores (now {workers}, try {more}): its workers "
                    f"waited {waiting:.0%} of their time (I/O, sleep, locks: not on a core nor queued for "
                    "one), so more of them overlap more waits",
                    fetch,
                    {"num_workers": more},
                )
            ]
        else:  # workers that compute, or not read: past the cores they only share them
            busy = "" if c.workers_busy is None else f" computed {c.workers_busy:.0%} of their time and"
            seen = "" if waiting is None else f" and its workers{busy} waited only {waiting:.0%}"
            changes = [
                Change(
                    f"make __getitem__/the transforms cheaper: num_workers ({workers}) already uses all "
                    f"{cores} CPU cores{seen}, so more workers cannot help",
                    fetch,
                )
            ]
    else:
        changes = [
            Change(f"raise num_workers (now {workers}) so batches are ready when the loop asks", fetch),
            Change("or make __getitem__/the transforms cheaper", fetch),
        ]
    pin = c.m["pin"]
    if c.pin_memory and not np.isnan(pin) and workers == 0:
        changes.append(
            Change(
                f"set pin_memory=False: with no workers the pin ({fmt(pin)}) runs inside next() on the main thread",
                pin,
                {"pin_memory": False},
            )
        )
    return changes


def _loader_of(c: Case) -> str:
    """What the loop waits on in next(loader)."""
    if c.workers == 0:
        return "DataLoader (no workers: its dataset and collate run in the loop's process)"
    return "DataLoader's workers"


LOADER_BOUND = Rule(
    Verdict.LOADER_BOUND,
    f"the loop waits in next(loader) for at least {LOADER_SHARE:.0%} of the batch, and not for the pin thread",
    # When the pin thread is the slow stage, more workers cannot help: that rule says what can.
    lambda c: c.fetch >= LOADER_SHARE * c.batch and not fired(c, Verdict.PIN_THREAD_BOUND),
    lambda c: (
        f"the loop waits {fmt(c.m['fetch'])} of the mean {fmt(c.batch)} batch ({share(c.fetch, c)}) on the "
        f"{_loader_of(c)}{' (of which ' + fmt(c.gc_fetch) + ' full garbage collections: see that finding)' if c.gc_fetch else ''}; "
        "pinning or copy tricks cannot help that part."
    ),
    _loader_remedies,
)


CPU_WORK_BOUND = Rule(
    Verdict.CPU_WORK_BOUND,
    f"the user's CPU work takes at least {WORK_SHARE:.0%} of the batch",
    lambda c: c.cpu >= WORK_SHARE * c.batch,
    lambda c: (
        f"CPU work takes {fmt(c.m['cpu_work'])} of the mean {fmt(c.batch)} batch ({share(c.cpu, c)}); "
        "the input pipeline and the copy are not the bottleneck."
    ),
    lambda c: [Change("make the CPU work cheaper, or move it to the DataLoader workers", c.cpu)],
)


COMPUTE_BOUND = Rule(
    Verdict.COMPUTE_BOUND,
    f"compute takes at least {WORK_SHARE:.0%} of the batch",
    lambda c: c.comp >= WORK_SHARE * c.batch,
    # Without CUDA, compute() is timed by the host clock: it is the loop's own work, not the GPU's.
    lambda c: (
        f"{'GPU compute' if c.gpu else 'compute (host clock, no GPU)'} takes {compute_of_batch(c)}: "
        "the input pipeline does not set the pace."
    ),
)


# Between the step's kernels the GPU waited for their launches at least this share of the batch
# (CUPTI's busy time against the kernels' span): the host sets the pace even where no timed phase does.
HOST_SHARE = 0.3


def host_bound(c: Case) -> bool:
    """Whether the GPU waited between the step's kernels (``Case.launch_gap``) for at least
    ``HOST_SHARE`` of the batch, GPU compute not setting the pace."""
    gap = c.launch_gap
    return not np.isnan(gap) and gap >= HOST_SHARE * c.batch and c.comp < WORK_SHARE * c.batch


def _host_evidence(c: Case) -> str:
    span = c.comp + c.launch_gap
    kernels = c.m.get("kernels", float("nan"))
    # With the count (CUPTI's rows: ``kernels``), the span per launch: the host's time for one operator,
    # its Python, torch's dispatch and the launch (CUPTI's record of it included), which a CUDA graph
    # replaces with one launch for the whole step.
    each = (
        f" ({kernels:.0f} kernels: one launch every {1e3 * span / kernels:.1f} us, CUPTI's record of each included)"
        if kernels == kernels and kernels > 0
        else ""
    )
    return (
        f"CUPTI's records: the step's kernels ran {fmt(c.comp)} of their {fmt(span)} span on the GPU{each}, so for "
        f"{fmt(c.launch_gap)} of the mean {fmt(c.batch)} batch ({share(c.launch_gap, c)}) the GPU waited "
        "between them for the host to launch the next one: the step's Python and its one launch per "
        "operator set the pace, not the input pipeline nor the GPU."
    )


HOST_BOUND = Rule(
    Verdict.HOST_BOUND,
    f"with CUPTI's records, the GPU waits between the step's kernels at least {HOST_SHARE:.0%} of the batch",
    host_bound,
    _host_evidence,
    # What removing the waits can save is at most the waits themselves: the gain given is that bound.
    lambda c: [
        Change(
            "capture the step in a CUDA graph, so its launches replay at once: torch.compile(model, "
            'mode="reduce-overhead"), or torch.cuda.make_graphed_callables (the saving given is the '
            "GPU's whole wait, the most it can be)",
            c.launch_gap,
        ),
        Change("or torch.compile(model): fused kernels, fewer launches a step", c.launch_gap),
        Change("or a larger batch: the same launches move more samples, so each sample costs less", 0.0),
    ],
)


# After a step's last kernel the GPU had none of the loop's work for at least this share of the batch:
# twice the run-to-run noise of epoch timing (rules.transfer's EPOCH_NOISE_SHARE, 5%), so the finding
# names a wait whose removal an epoch's time shows.
BETWEEN_SHARE = 0.1


def between_steps(c: Case) -> bool:
    """Whether, after the step's last kernel, the GPU waited for the host's next copy or kernel
    (``Case.after_step``, CUPTI's records) at least ``BETWEEN_SHARE`` of the batch."""
    idle = c.after_step
    return not np.isnan(idle) and idle >= BETWEEN_SHARE * c.batch


def _between_evidence(c: Case) -> str:
    return (
        f"CUPTI's records: after the step's last kernel the GPU had none of the loop's work for "
        f"{fmt(c.after_step)} of the mean {fmt(c.batch)} batch ({share(c.after_step, c)}), until the host issued "
        "the next batch's copy or kernels: the host's work between a step's end and the next one (what follows a "
        "synchronization such as loss.item(), logging, metrics, the call into the loader) ran with nothing "
        "queued on the GPU. Garbage-collection pauses are left out of it (their own finding)."
    )


BETWEEN_STEPS = Rule(
    Verdict.BETWEEN_STEPS,
    f"with CUPTI's records, the GPU has none of the loop's work after a step's last kernel at least "
    f"{BETWEEN_SHARE:.0%} of the batch",
    between_steps,
    _between_evidence,
    # Queued ahead, the host's work between steps runs under the GPU's: the gain is at most the wait.
    lambda c: [
        Change(
            "synchronize less often: read the loss (loss.item(), .cpu(), a print of a tensor) every N steps, "
            "or sum it on the GPU and read it once, so the host queues the next step while the GPU runs this "
            "one and its work between steps no longer leaves the GPU idle (the saving given is the GPU's "
            "whole wait, the most it can be)",
            c.after_step,
        )
    ],
)


def _gc_evidence(c: Case) -> str:
    m = c.m
    return (
        f"Python's full garbage collections stopped the loop in {m['gc_batches']:.0f} batch(es), "
        f"the longest for {fmt(m['gc_longest'])}: {fmt(c.gc)} of the mean {fmt(c.batch)} batch ({share(c.gc, c)})"
        f"{', ' + fmt(c.gc_fetch) + ' of it inside next(loader), where the dataset allocates' if c.gc_fetch else ''}. "
        "A collection holds the GIL on whichever thread runs it and, with torch loaded, walks hundreds of "
        "thousands of objects: the batches it falls in read long, whichever phase it lands in."
        + (
            f" gc.freeze() was in place ({c.gc_frozen} objects frozen when the loop began): these collections "
            "walked what was made after it."
            if c.gc_frozen
            else ""
        )
    )


GC_PAUSES = Rule(
    Verdict.GC_PAUSES,
    f"full garbage collections take at least {TOO_SMALL_SHARE:.0%} of the loop's time",
    lambda c: c.gc >= TOO_SMALL_SHARE * c.batch,
    _gc_evidence,
    # gc.freeze() moves every object alive to a generation no collection walks: the later full ones
    # walk only what the loop made since, so they cost a part of what they did (the saving is at most
    # the whole pause: the gain given is that bound).
    lambda c: [
        *(
            []
            if c.gc_frozen
            else [
                Change(
                    "once the model and the loader are built, before the loop: gc.collect(); gc.freeze() (full "
                    "collections then skip every object made before; the saving given is the whole pause, the most it can be)",
                    c.gc,
                )
            ]
        ),
        Change(
            f"{'' if c.gc_frozen else 'and '}keep fewer Python objects alive as the loop runs (a cache of decoded "
            "samples as lists and dicts: keep arrays or tensors instead); every full collection walks all of them",
            c.gc,
        ),
    ],
)
