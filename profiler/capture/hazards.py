"""Opt-in detection of the two ``non_blocking`` pitfalls, while the loop runs.

1. A pinned host tensor is written (in place) while a ``non_blocking`` copy from it to the GPU has
   not finished: the GPU may receive the new values instead of the old ones.
2. The result of a ``non_blocking`` device-to-host copy is read before that copy has finished: the
   reader sees whatever the buffer held before (often zeros, or the previous batch).

How: a ``TorchDispatchMode`` sees every torch operator the loop runs on its thread. After each
non_blocking H2D (from pinned memory) or D2H copy it records a CUDA event on the current stream and
remembers the host storage involved; before each operator it asks whether that operator writes a
storage with an H2D still in flight, or reads (or writes) one with a D2H still in flight
(``Event.query()``, no waiting). Each kind is warned about once, naming the batch and the fix.

Cost and limits: every torch operator on the loop's thread then goes through Python (microseconds
each), so it is off unless asked for (``TransferProfiler(hazards=True)`` or ``PINPROF_HAZARDS=1``).
It sees torch operators only: reads through ``.numpy()``, ``.tolist()`` or the buffer protocol, and
writes by other threads or processes (DataLoader workers) do not go through the dispatcher. A hazard
is reported when the conflicting operator runs while the copy is still in flight, which is exactly
when it corrupts data.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from profiler.errors import PinprofHazardWarning
from profiler.settings import current

_COPY = torch.ops.aten.copy_.default
_TO_COPY = torch.ops.aten._to_copy.default


def hazards_wanted(flag: bool | None) -> bool:
    """The constructor's choice, else ``PINPROF_HAZARDS=1`` in the environment."""
    if flag is not None:
        return flag
    return current().hazards


def written_and_read(
    func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """The tensor arguments ``func`` writes (its schema marks them ``(a!)``, or ``out=``) and reads."""
    written: list[torch.Tensor] = []
    read: list[torch.Tensor] = []
    schema_args = func._schema.arguments
    for i, arg in enumerate(args):
        is_write = i < len(schema_args) and schema_args[i].alias_info is not None and schema_args[i].alias_info.is_write
        for leaf in tree_leaves(arg):
            if isinstance(leaf, torch.Tensor):
                (written if is_write else read).append(leaf)
    by_name = {a.name: a for a in schema_args}
    for name, value in kwargs.items():
        info = by_name[name].alias_info if name in by_name else None
        for leaf in tree_leaves(value):
            if isinstance(leaf, torch.Tensor):
                (written if (info is not None and info.is_write) else read).append(leaf)
    return written, read


def _storage(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


def nonblocking_copy(
    func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any
) -> tuple[str, torch.Tensor] | None:
    """("h2d", pinned source) or ("d2h", host destination) for a non_blocking copy; else None."""
    if func is _COPY:
        dst, src = args[0], args[1]
        nb = bool(args[2]) if len(args) > 2 else bool(kwargs.get("non_blocking", False))
    elif func is _TO_COPY and isinstance(out, torch.Tensor):
        src, dst = args[0], out
        nb = bool(kwargs.get("non_blocking", False))
    else:
        return None
    if not nb or not isinstance(src, torch.Tensor) or not isinstance(dst, torch.Tensor):
        return None
    if src.device.type == "cpu" and dst.device.type == "cuda" and src.is_pinned():
        return "h2d", src
    if src.device.type == "cuda" and dst.device.type == "cpu":
        return "d2h", dst
    return None


class HazardWatch(TorchDispatchMode):
    """Watches the loop's torch operators for the two non_blocking races (module docstring).

    batch: returns the number of the batch being processed, for the messages.
    """

    def __init__(self, batch: Callable[[], int]) -> None:
        super().__init__()
        self._batch = batch
        # storage pointer -> (event recorded after the copy, batch that issued it)
        self._h2d: dict[int, tuple[torch.cuda.Event, int]] = {}
        self._d2h: dict[int, tuple[torch.cuda.Event, int]] = {}
        self.warned: set[str] = set()

    @staticmethod
    def _in_flight(table: dict[int, tuple[torch.cuda.Event, int]], tensors: list[torch.Tensor]) -> int | None:
        """The batch that issued a still-running copy of one of ``tensors``' host storages, if any
        (entries whose copy has finished are dropped on the way)."""
        for t in tensors:
            if t.device.type != "cpu":
                continue
            key = _storage(t)
            entry = table.get(key)
            if entry is None:
                continue
            if entry[0].query():
                del table[key]
                continue
            return entry[1]
        return None

    def _warn(self, kind: str, message: str) -> None:
        if kind not in self.warned:
            self.warned.add(kind)
            warnings.warn(message, PinprofHazardWarning, stacklevel=4)

    def _check(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        written, read = written_and_read(func, args, kwargs)
        issued = self._in_flight(self._h2d, written) if self._h2d else None
        if issued is not None:
            self._warn(
                "h2d-source-written",
                (
                    f"pinprof: batch {self._batch()}: {func} wrote a pinned tensor while the non_blocking copy "
                    f"from it to the GPU (issued in batch {issued}) was still running, so the GPU may get the "
                    "new values. Fix: wait for the copy first (e.g. torch.cuda.current_stream().synchronize(), "
                    "or an event recorded after the copy), or fill a different pinned buffer."
                ),
            )
        issued = self._in_flight(self._d2h, read + written) if self._d2h else None
        if issued is not None:
            self._warn(
                "d2h-result-read",
                (
                    f"pinprof: batch {self._batch()}: {func} used the result of a non_blocking device-to-host "
                    f"copy (issued in batch {issued}) before the copy finished, so it saw stale values. Fix: "
                    "synchronize before using it (torch.cuda.current_stream().synchronize(), or record an "
                    "event after the copy and call event.synchronize()), or copy with non_blocking=False."
                ),
            )

    def __torch_dispatch__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        kwargs = kwargs or {}
        if self._h2d or self._d2h:
            self._check(func, args, kwargs)
        out = func(*args, **kwargs)
        copy = nonblocking_copy(func, args, kwargs, out)
        if copy is not None:
            kind, host = copy
            event = torch.cuda.Event()
            event.record()  # the current stream: the one the copy was just queued on
            (self._h2d if kind == "h2d" else self._d2h)[_storage(host)] = (event, self._batch())
        return out
