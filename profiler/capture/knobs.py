"""One trial's settings under ``pinprof tune``, applied in the profiled process through the hooks.

``pinprof tune`` runs the user's script once per configuration (``profiler.cli.tune``); each run is a
``pinprof profile`` whose environment says what to change (``PINPROF_TUNE``, a JSON object of the
``Knobs`` fields that differ from the script's own; ``profiler.settings``). Nothing is written into
the user's code:

- ``num_workers``, ``pin_memory``, ``prefetch_factor``, ``persistent_workers``: every DataLoader the
  script builds gets them (``DataLoader.__init__`` wrapped; frameworks' loaders are DataLoaders);
  ``prefetch_factor`` and ``persistent_workers`` only where there are workers, as the DataLoader
  requires;
- ``non_blocking``: a ``.to()``/``.cuda()`` of a pinned tensor to the device is made with
  ``non_blocking=True`` (``AutoSession.force_non_blocking``, read by the hooks);
- ``prefetcher``: every DataLoader's iteration is wrapped in ``profiler.prefetch`` (batch n+1 fetched
  and copied on a side stream while step n runs).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from typing import Any

from torch.utils.data import DataLoader

from profiler.errors import UsageError

LOADER = ("num_workers", "pin_memory", "prefetch_factor", "persistent_workers")


@dataclass(frozen=True)
class Knobs:
    """What a trial changes; None: as the script has it."""

    num_workers: int | None = None
    pin_memory: bool | None = None
    prefetch_factor: int | None = None
    persistent_workers: bool | None = None
    non_blocking: bool | None = None
    prefetcher: bool | None = None

    def changes(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    def to_json(self) -> str:
        return json.dumps(self.changes(), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Knobs:
        try:
            raw = json.loads(text) if text else {}
        except json.JSONDecodeError as err:
            raise UsageError(
                f"PINPROF_TUNE={text!r} is not a JSON object ({err.msg}); it is set by pinprof tune"
            ) from None
        names = {f.name for f in fields(cls)}
        if not isinstance(raw, dict) or set(raw) - names:
            raise UsageError(f"PINPROF_TUNE={text!r}: expected a JSON object of {sorted(names)}")
        return cls(**raw)


def apply(knobs: Knobs, device: Any) -> Callable[[], None]:
    """Put ``knobs`` in place for the DataLoaders built and iterated from now on; returns the undo."""
    init, iterate = DataLoader.__init__, DataLoader.__iter__
    loader_changes = {k: v for k, v in knobs.changes().items() if k in LOADER}
    signature = inspect.signature(init)

    def patched_init(self: DataLoader[Any], *args: Any, **kwargs: Any) -> None:
        bound = signature.bind(self, *args, **kwargs)
        bound.arguments.update(loader_changes)
        params = bound.arguments
        if not params.get("num_workers"):  # what the DataLoader refuses without workers
            params.pop("prefetch_factor", None)
            params.pop("persistent_workers", None)
        init(*bound.args, **bound.kwargs)

    def patched_iter(self: DataLoader[Any]) -> Any:
        from profiler.capture.device_prefetch import prefetch

        return prefetch(iterate(self), device)

    if loader_changes:
        DataLoader.__init__ = patched_init  # type: ignore[method-assign]
    if knobs.prefetcher:
        DataLoader.__iter__ = patched_iter  # type: ignore[method-assign,assignment]

    def undo() -> None:
        DataLoader.__init__ = init  # type: ignore[method-assign]
        DataLoader.__iter__ = iterate  # type: ignore[method-assign]

    return undo
