"""What the frames above the hooks and the loader's iterator say about the loop: the loader's settings
(``iterator_config``), the framework whose code fetches the batches (``calling_framework``: its
remedies name its own switches), and whether it fetches a window of batches before training any
(``fetches_windows``: Hugging Face's ``Trainer`` with gradient accumulation)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from types import FrameType
from typing import Any


def iterator_config(it: Any) -> dict[str, Any]:
    """The loader settings a DataLoader iterator carries (the configuration columns)."""
    sampler = getattr(it, "_index_sampler", None)
    workers = int(getattr(it, "_num_workers", 0))
    return {
        "batch_size": getattr(sampler, "batch_size", None),
        "num_workers": workers,
        "pin_memory": bool(getattr(it, "_pin_memory", False)),
        "prefetch_factor": getattr(it, "_prefetch_factor", None) if workers else None,
    }


FRAMEWORKS = ("accelerate", "timm", "lightning", "pytorch_lightning", "transformers")


def _callers(frame: FrameType | None, depth: int) -> Iterator[FrameType]:
    """``frame`` and up to ``depth - 1`` of its callers, innermost first."""
    for _ in range(depth):
        if frame is None:
            return
        yield frame
        frame = frame.f_back


def calling_framework() -> str | None:
    """The framework whose code called the loader's ``next()`` (the hooks' callers, a few frames up):
    its remedies name its own switches (Accelerate's ``DataLoaderConfiguration``). None for a loop
    of the script's own."""
    for frame in _callers(sys._getframe(3), 6):
        top = str(frame.f_globals.get("__name__", "")).split(".", 1)[0]
        if top in FRAMEWORKS:
            return "lightning" if top == "pytorch_lightning" else top
    return None


def fetches_windows() -> bool:
    """Whether the loader's ``next()`` was called to fetch a window of batches before any is trained:
    Hugging Face's ``Trainer.get_batch_samples`` (``gradient_accumulation_steps``), a few frames up
    from the hooks' callers, as ``calling_framework`` looks."""
    return any(
        frame.f_code.co_name == "get_batch_samples"
        and str(frame.f_globals.get("__name__", "")).startswith("transformers.")
        for frame in _callers(sys._getframe(3), 10)
    )
