"""The layout copy inside a host-to-device copy of a non-dense tensor, made by the hooks so it is timed,
and the batch leaf it was made for.

torch's ``.to(device)`` allocates its result as ``torch.empty_like`` would: with the source's strides
where the source is dense (contiguous, channels-last, any permutation without gaps), else contiguous.
Where the strides differ, ATen's copy (``copy_kernel_cuda``) first makes the source contiguous on the
calling thread, in ordinary pageable memory, and the DMA reads that copy: a pinned view (a slice with
gaps, a transposed or expanded tensor) is copied from pageable memory, staged by the driver, as if
``pin_memory`` had not run. The hooks make that same contiguous copy before calling torch, so the
host time of each part can be read (``layout_ms``); torch then copies the dense tensor as it is, the
same bytes to the same result.

Left to torch (not split, ``layout_ms`` empty): a copy that converts the dtype or asks for a memory
format (torch converts before or after its own layout copy), and a source whose result torch would
lay out other than contiguous (a non-dense channels-last view).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch


def needs_layout(src: torch.Tensor) -> bool:
    """Whether ``src.to(device)`` makes ``src`` contiguous inside the call, as ``src.contiguous()``
    makes it; False where the call copies ``src`` as it is (dense) or pinprof leaves the layout to torch
    (see the module)."""
    if src.is_contiguous():
        return False
    want = torch.empty_like(src, device="meta")  # the result's layout, nothing allocated
    return want.stride() != src.stride() and want.is_contiguous()


def needs_layout_into(dst: torch.Tensor, src: torch.Tensor) -> bool:
    """Whether ``dst.copy_(src)`` makes ``src`` contiguous inside the call, as
    ``src.expand_as(dst).contiguous()`` makes it."""
    return not src.is_contiguous() and dst.is_contiguous() and dst.dtype == src.dtype


def leaves(batch: Any, path: str = "batch") -> Iterator[tuple[str, torch.Tensor]]:
    """(key path, tensor) of each tensor in ``batch`` (dicts, lists, tuples, named tuples), as the
    script would write it: ``batch['meta']['boxes']``, ``batch[0]``."""
    if isinstance(batch, torch.Tensor):
        yield path, batch
    elif isinstance(batch, dict):
        for k, v in batch.items():
            yield from leaves(v, f"{path}[{k!r}]")
    elif isinstance(batch, (list, tuple)):
        fields = getattr(batch, "_fields", None)
        for i, v in enumerate(batch):
            yield from leaves(v, f"{path}.{fields[i]}" if fields else f"{path}[{i}]")


def leaf_path(batch: Any, src: torch.Tensor) -> str:
    """The key path of ``src`` in ``batch``: the leaf itself, else the leaf it is a view of (its
    storage), as ``batch['image'] (a view of it)``; empty where neither is found."""
    try:
        ptr = src.untyped_storage().data_ptr()
    except RuntimeError:  # no storage (a nested or sparse tensor)
        ptr = None
    viewed = ""
    for path, t in leaves(batch):
        if t is src:
            return path
        if not viewed and ptr is not None and t.layout == torch.strided and t.untyped_storage().data_ptr() == ptr:
            viewed = f"{path} (a view of it)"
    return viewed


@dataclass
class Leaf:
    """One leaf's layout copies over a run: which tensor, and what its copies cost.

    Fields: path (str), shape, strides (tuples of int), dtype (str), pinned (bool: the source was
    pinned memory, so ``pin_memory`` ran on it for nothing), copies (int), bytes (int, one copy),
    layout_ms (float: all its layout copies, summed)."""

    path: str
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: str
    pinned: bool
    copies: int = 0
    bytes: int = 0
    layout_ms: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "shape": list(self.shape),
            "strides": list(self.strides),
            "dtype": self.dtype,
            "pinned": self.pinned,
            "copies": self.copies,
            "bytes": self.bytes,
            "layout_ms": round(self.layout_ms, 4),
        }


class Leaves:
    """The leaves each scenario made layout copies of (meta.json's ``loaders[scenario]["layout_leaves"]``)."""

    MAX = 16  # a scenario's leaves kept: a loop that copies ever new views (a key per batch) stays small

    def __init__(self) -> None:
        self._by: dict[str, dict[tuple[Any, ...], Leaf]] = {}

    def note(self, scenario: str, path: str, src: torch.Tensor, pinned: bool, ms: float) -> None:
        """One layout copy of ``src`` (the non-dense source), found at ``path``, that took ``ms``."""
        seen = self._by.setdefault(scenario, {})
        key = (path, tuple(src.shape), tuple(src.stride()), src.dtype)
        leaf = seen.get(key)
        if leaf is None:
            if len(seen) >= self.MAX:
                return
            dtype = str(src.dtype).removeprefix("torch.")
            leaf = seen[key] = Leaf(path, tuple(src.shape), tuple(src.stride()), dtype, pinned)
        leaf.copies += 1
        leaf.bytes = src.numel() * src.element_size()
        leaf.layout_ms += ms

    def summary(self) -> dict[str, list[dict[str, Any]]]:
        """Per scenario, its leaves by layout time, largest first."""
        return {
            scen: [leaf.as_dict() for leaf in sorted(seen.values(), key=lambda x: -x.layout_ms)]
            for scen, seen in self._by.items()
        }
