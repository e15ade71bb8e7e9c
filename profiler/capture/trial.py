"""Which batches a ``pinprof tune`` trial measures, from its loader's settings (``AutoSession``).

A trial is ``pinprof profile --skip SKIP`` stopped after ``SKIP + STEPS`` batches
(``PINPROF_TUNE_STOP``); two things of the loader move that:

- ``queued``: the batches its workers can hold ready (``num_workers x prefetch_factor``) are warm-up
  too. A slow first step lets them fill, and a short trial would read that queue, not the workers:
  on the H200 a first step of 0.37 s let 16 workers queue 32 batches, and a 30-batch trial read them
  at 2.7 ms a batch (mean) where past it they made one every 3.8-4.6 ms (by hand 18.6x, where tune said 27.3x).
- ``window``: where an epoch is short (at most ``EPOCH_SPAN`` times ``STEPS`` batches), the trial
  measures whole epochs, so each epoch's start (the workers' queue filled again from nothing, the
  sampler's new order) weighs as it does in training. With 128 batches an epoch a 30-batch trial
  inside the first epoch said 19.0x for 16 workers, and by hand they ran 15.0x.
"""

from __future__ import annotations

from typing import Any

# Epochs of up to this many times a trial's steps are measured whole (30 steps: up to 300 batches).
EPOCH_SPAN = 10


def queued(config: dict[str, Any]) -> int:
    """Batches a loader's workers can hold ready: ``num_workers x prefetch_factor`` (0 without)."""
    return int(config.get("num_workers") or 0) * int(config.get("prefetch_factor") or 0)


def epoch_batches(it: Any) -> int | None:
    """Batches in an epoch of the loader iterator ``it`` (None where it has no length: an iterable
    dataset, a sampler of no length)."""
    try:
        n = len(it)
    except Exception:  # TypeError for no length; a dataset's own __len__ may raise anything
        return None
    return n if isinstance(n, int) and n > 0 else None


def window(steps: int, epoch: int | None) -> int:
    """The steady batches a trial of ``steps`` measures: ``steps``, or the whole epochs that hold them
    where an epoch has at most ``EPOCH_SPAN x steps`` batches."""
    if epoch is None or steps <= 0 or epoch > EPOCH_SPAN * steps:
        return steps
    return epoch * -(-steps // epoch)
