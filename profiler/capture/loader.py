"""What pinprof reads from the user's loader: the settings the timeline's configuration columns show."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def loader_config(loader: Iterable[Any], config: dict[str, Any]) -> None:
    """The loader settings the timeline's configuration columns show, unless given in ``config``."""
    for key in ("batch_size", "num_workers", "pin_memory", "prefetch_factor"):
        if key not in config and hasattr(loader, key):
            config[key] = getattr(loader, key)
    if config.get("num_workers") == 0:
        config["prefetch_factor"] = None  # the DataLoader ignores it without workers


def cpu_only_notes(config: dict[str, Any], hazards: bool) -> list[tuple[str, str]]:
    """(key, message) of each setting that does nothing without a CUDA device, for a warning."""
    notes = []
    if hazards:
        notes.append(
            ("hazards-no-cuda", "hazard detection watches CUDA copies and there is no CUDA device: it stays off")
        )
    if config.get("pin_memory"):
        notes.append(
            (
                "pin-no-cuda",
                "the loader has pin_memory=True but there is no CUDA device: torch skips pinning, so pin_ms stays empty",
            )
        )
    return notes
