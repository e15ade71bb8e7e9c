"""The copy path of the automatic hooks (``profiler.capture.auto_hooks``): a CPU-to-CUDA ``.to()``,
``.cuda()`` or ``copy_()`` of the batch in flight, taken over by pinprof's own pinned copy where it
can (``AutoSession.copy_pinned``), else the user's call timed around, a layout copy torch would make
inside it made and timed apart (``profiler.capture.dense``), aimed at the batch its tensor belongs to.

An error of pinprof's on the way goes to ``fail`` (``auto_hooks`` sets it: the session stops, the
user's call still runs once); the user's own errors pass through.
"""

from __future__ import annotations

from collections.abc import Callable
from time import perf_counter_ns
from typing import Any

import torch

from profiler.capture.auto_session import AutoSession
from profiler.capture.dense import needs_layout

# A layout copy the hooks make for torch (``dense``): the copy, and the user's call on its result.
Relaid = tuple[Callable[[], torch.Tensor], Callable[[torch.Tensor], Any]]


def _unset(err: BaseException) -> None:
    raise err


fail: Callable[[BaseException], None] = _unset  # auto_hooks' _fail once it is imported


def timed_copy(
    s: AutoSession,
    src: torch.Tensor,
    non_blocking: bool,
    call: Callable[[], Any],
    alt_bytes: int | None,
    t0: int,
    relaid: Relaid | None = None,
) -> Any:
    """The user's copy ``call`` of ``src``, timed around (CUPTI's records or the events time its GPU
    side). ``relaid``, given where torch would make ``src`` contiguous inside the call
    (``profiler.capture.dense``): that layout copy, and the user's call on another source. The layout
    copy is then made here, timed and ranged (NVTX ``layout`` inside ``h2d``), and the user's call
    copies the dense tensor: ``layout_ms`` apart from the copy proper, whose call time
    (``h2d_call_ms``) starts where the layout copy ended."""
    prof, rec = s.cur  # type: ignore[misc]  # a recorded copy: a batch is current
    # The batch's clock times it: events around the call, or (CUPTI's records, a CPU device) the host
    # clock around it alone. Its NVTX ``h2d`` range too.
    try:
        clock = rec["_clock"]
        began = clock.copy_begin(s, prof)
    except Exception as err:
        fail(err)
        return call()
    t1 = perf_counter_ns()
    if relaid is None:
        out = call()  # the user's copy; an error of its own propagates (the batch keeps its earlier copies)
        copied, driver = src, t1
    else:
        copied, driver = layout_copy(prof, relaid[0])
        out = relaid[1](copied)
    t2 = perf_counter_ns()
    try:  # _guarded's work, written out: a frame less on every copy
        clock.copy_end(s, prof, rec, began, copied, non_blocking, alt_bytes, driver, t2, copied is not src)
        if copied is not src:
            s.layout_noted(src, t1, driver)
    except Exception as err:
        fail(err)
    rec["own_sum"] += (perf_counter_ns() - t2 + t1 - t0) / 1e6  # the user's copy call left out
    return out


def layout_copy(prof: Any, made: Callable[[], torch.Tensor]) -> tuple[torch.Tensor, int]:
    """The layout copy ``made()`` in an NVTX ``layout`` range: the dense tensor, and when the copy
    proper begins (``perf_counter_ns``)."""
    prof.nvtx.push("layout")
    dense = made()
    t = perf_counter_ns()
    prof.nvtx.pop()
    return dense, t


def batch_copy(
    s: AutoSession,
    src: torch.Tensor,
    device: torch.device | None,
    dtype: Any,
    extra: bool,
    non_blocking: bool,
    call: Callable[[], Any],
    t0: int,
    aimed: bool = False,
    relay: Callable[[torch.Tensor], Any] | None = None,
) -> Any:
    """A ``.to()``/``.cuda()`` of ``src`` in a batch: pinprof's own copy when it can make it
    (``AutoSession.copy_pinned``), else the user's ``call`` timed around; if pinprof fails on the
    way, the user's call runs instead, once. ``t0``: when the hook was entered (``perf_counter_ns``).
    pinprof's own copy stands for the user's: it counts as the copy, not as pinprof's time.
    ``relay``: the user's call on another source, given for a non-contiguous ``src``: where torch
    would make ``src`` contiguous inside the call, the hooks make that copy (``timed_copy``)."""
    if not aimed and len(s.flight) > 1 and "_ptrs" in s.cur[1]:  # type: ignore[index]  # the copy is its tensor's batch's
        again = lambda: batch_copy(s, src, device, dtype, extra, non_blocking, call, t0, True, relay)  # noqa: E731
        return in_its_batch(s, src, call, again)
    relaid = None
    if relay is not None and s.cuda and not extra and (dtype is None or dtype == src.dtype):
        try:
            if needs_layout(src):
                relaid = (src.contiguous, relay)
        except Exception as err:
            fail(err)
    # takes_over's first tests, here: with CUPTI (its records time the user's own copy) or on a CPU
    # device it is never asked, a call less on every copy; a layout copy is never taken over (its
    # events would time torch's layout copy as the DMA)
    if relaid is None and non_blocking and s.cuda and not s.cur[1]["_clock"].records_copies:  # type: ignore[index]
        try:
            if s.takes_over(src, device, dtype, extra):
                return s.copy_pinned(src)
        except Exception as err:
            fail(err)
            return call()
    alt = None if dtype is None or dtype == src.dtype else src.numel() * dtype.itemsize
    return timed_copy(s, src, non_blocking, call, alt, t0, relaid)


def in_its_batch(s: AutoSession, src: torch.Tensor, call: Callable[[], Any], copy: Callable[[], Any]) -> Any:
    """``copy()`` with the batch that ``src`` belongs to as the current one (``AutoSession.aim``);
    ``call``: the user's own call, run instead if pinprof fails here."""
    try:
        was = s.aim(src)
    except Exception as err:
        fail(err)
        return call()
    try:
        return copy()
    finally:
        s.cur = was
