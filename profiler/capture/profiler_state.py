"""What the loop's parts (``loop``, ``phases``, ``prefetch``, ``rows``; ``profiler.drivers.saving`` too) read and write of
the profiler that drives them: ``TransferProfiler``'s state, declared as a protocol, so that those
modules depend on this declaration and not on the class that imports them (an import circle of eight
modules through ``TransferProfiler`` before).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    import pandas as pd
    import torch

    from profiler.capture.clocks.choice import Clocks
    from profiler.capture.cuda.anchor import Anchor
    from profiler.capture.cuda.events import EventPool
    from profiler.capture.cuda.gate import StreamGate
    from profiler.capture.nvtx import NvtxEmitter
    from profiler.capture.pending import PendingEvents
    from profiler.capture.store import Store
    from profiler.modes import Mode


class ProfilerState(Protocol):
    """The profiler's settings, per-run state and the steps the loop's parts call back."""

    mode: Mode | Literal["auto"]
    device: torch.device
    cuda: bool
    nvtx: NvtxEmitter
    run: str
    scenario: str | None
    warmup: int
    _origin: float | None
    _config: dict[str, Any]
    _store: Store
    _cur: dict[str, Any] | None
    _next_batch: int
    _epoch: int
    _anchor: Anchor | None
    _gate: StreamGate | None
    _hazards: bool
    _index: int
    _clocks: Clocks
    _exit_ms: float
    _pool: EventPool
    _pending: PendingEvents

    def _begin(self, loader: Iterable[Any]) -> None: ...

    def _new_epoch(self, it: Any) -> None: ...

    def _commit(self, rec: dict[str, Any]) -> None: ...

    def _copy_into(self, rec: dict[str, Any], batch: Any, defer: bool = False) -> Any: ...

    def cpu_work(self) -> Any: ...

    def compute(self) -> Any: ...

    def timeline(self) -> pd.DataFrame: ...
