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
