"""Walk a batch: a tensor, or tuples, lists, dicts and dataclasses of tensors, nested.

One concept: the structure of a batch. Counting bytes, telling where its memory lives and moving it
to a device all walk the same tree, so the walk lives here once.
"""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Literal

import torch

from profiler.errors import BatchTypeError

MemoryKind = Literal["pageable", "pinned", "device", "mixed"]


def iter_tensors(batch: Any) -> Iterator[torch.Tensor]:
    """Yield every tensor in ``batch``, depth first, in a stable order."""
    if isinstance(batch, torch.Tensor):
        yield batch
    elif isinstance(batch, Mapping):
        for value in batch.values():
            yield from iter_tensors(value)
    elif isinstance(batch, (list, tuple)):
        for value in batch:
            yield from iter_tensors(value)
    elif dataclasses.is_dataclass(batch) and not isinstance(batch, type):
        # The same fields map_tensors rebuilds (init fields; the others are derived in
        # __post_init__): the two walks must visit tensors in the same order.
        for field in dataclasses.fields(batch):
            if field.init:
                yield from iter_tensors(getattr(batch, field.name))


def storage_of(t: torch.Tensor) -> int | None:
    """The address of ``t``'s storage: a view or slice of a tensor (``x[:, 0]``) has its storage, so
    a copy of it can be traced back to the tensor. None for a tensor with no plain storage (sparse,
    nested, a subclass that refuses): those are not traced."""
    if t.layout != torch.strided:
        return None
    try:
        return int(t.untyped_storage().data_ptr())
    except (RuntimeError, NotImplementedError, TypeError):
        return None


def owners(batch: Any) -> dict[int, list[weakref.ref[torch.Tensor]]]:
    """``batch``'s CPU tensors by storage address (``storage_of``; those with none are left out), as
    weak references: what is still alive of the batch later, without keeping it."""
    out: dict[int, list[weakref.ref[torch.Tensor]]] = {}
    for t in iter_tensors(batch):
        if t.is_cpu and (p := storage_of(t)) is not None:
            out.setdefault(p, []).append(weakref.ref(t))
    return out


def map_tensors(batch: Any, fn: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    """Rebuild ``batch`` with ``fn`` applied to every tensor; other leaves are kept as they are."""
    if isinstance(batch, torch.Tensor):
        return fn(batch)
    if isinstance(batch, Mapping):
        return type(batch)({k: map_tensors(v, fn) for k, v in batch.items()})  # type: ignore[call-arg]
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):  # namedtuple
        return type(batch)(*(map_tensors(v, fn) for v in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(map_tensors(v, fn) for v in batch)
    if dataclasses.is_dataclass(batch) and not isinstance(batch, type):
        changes = {f.name: map_tensors(getattr(batch, f.name), fn) for f in dataclasses.fields(batch) if f.init}
        return dataclasses.replace(batch, **changes)
    return batch


def tensor_bytes(t: torch.Tensor) -> int:
    """Bytes a copy of ``t`` moves: its elements, not its storage (a view moves only its part)."""
    return t.numel() * t.element_size()


def batch_bytes(batch: Any) -> int:
    """Total bytes of all tensors in ``batch``."""
    return sum(tensor_bytes(t) for t in iter_tensors(batch))


def memory_kind(t: torch.Tensor) -> MemoryKind:
    """Where ``t``'s memory lives: on a device, in page-locked host memory, or pageable."""
    if not t.is_cpu:  # cheaper than t.device.type (no device object)
        return "device"
    # is_pinned() asks the CUDA runtime; on a CPU-only build it is always False, which is the truth.
    return "pinned" if t.is_pinned() else "pageable"


def batch_memory_kind(tensors: list[torch.Tensor]) -> MemoryKind:
    """One memory kind for a whole batch; ``mixed`` when its tensors differ."""
    return combined_kind([memory_kind(t) for t in tensors])


def combined_kind(kinds: list[MemoryKind]) -> MemoryKind:
    """One memory kind for several; ``mixed`` when they differ."""
    first = kinds[0]
    return first if all(k == first for k in kinds) else "mixed"


def require_tensors(batch: Any) -> list[torch.Tensor]:
    """The batch's tensors, or a clear error that names the batch's type."""
    # The common shapes (a tensor, a flat tuple or list of tensors) without the recursive walk.
    if isinstance(batch, torch.Tensor):
        return [batch]
    if type(batch) in (tuple, list) and batch and all(isinstance(v, torch.Tensor) for v in batch):
        return list(batch)
    tensors = list(iter_tensors(batch))
    if not tensors:
        raise BatchTypeError(
            f"batch of type {type(batch).__name__} holds no torch.Tensor; pinprof moves tensors found "
            "in tensors, tuples, lists, dicts and dataclasses. Convert the batch (e.g. with "
            "torch.as_tensor) or pass only its tensor part to to_device()."
        )
    return tensors
