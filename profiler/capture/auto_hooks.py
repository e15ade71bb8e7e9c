"""The hooks of an automatic profile (``pinprof profile``): patched onto torch while a session runs.

``start(session)`` replaces ``_BaseDataLoaderIter.__next__`` (every DataLoader iterator, single- or
multi-process), ``Tensor.to`` / ``Tensor.cuda`` / ``Tensor.copy_`` / ``Tensor.pin_memory`` and
``torch.autograd.backward``;
``stop()`` puts the originals back. Outside a session nothing is patched, so nothing is paid.

While patched, a call pays one global read and a test or two before the original runs, unless it is
one pinprof records: a loader's ``next()`` on the main thread, or a CPU-to-CUDA copy (or a pin) of the
main thread while a batch is current. Those go through ``AutoSession`` (``profiler.capture.auto_session``).

A failure inside pinprof never breaks the program: the user's call still runs exactly once, the
error is printed once, the hooks are removed and profiling stops (what was recorded is kept).
Errors of the user's own calls pass through untouched.

A tensor subclass's ``__torch_function__`` gets the patched method as ``func``: the lazy modules'
``UninitializedParameter`` accepts only the methods on its allow-list (``.to``, ``.cuda``, ``.copy_``
among them), so the wrappers join that list while they are installed.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from threading import get_ident
from time import perf_counter_ns
from typing import Any

import torch
from torch.nn import parameter as _parameter
from torch.optim import optimizer as _optimizer
from torch.utils.data import dataloader as _dataloader

from profiler.capture import copy_hooks
from profiler.capture.auto_session import AutoSession
from profiler.capture.copy_hooks import batch_copy as _copy
from profiler.capture.copy_hooks import in_its_batch as _aimed
from profiler.capture.copy_hooks import timed_copy as _timed_copy
from profiler.capture.dense import needs_layout_into

_Iter = _dataloader._BaseDataLoaderIter
_LAZY = _parameter.UninitializedTensorMixin  # type: ignore[attr-defined]  # not in torch's stubs
_ORIGINAL: dict[str, Any] = {}
_session: AutoSession | None = None
_step_hook: Any = None  # the handle of torch's global optimizer step post-hook, while patched
failure: str | None = None  # the internal error that stopped the last session, if one did
_in_backward = False  # the main thread is inside a backward the hook let through


def start(session: AutoSession) -> None:
    """Patch torch so that ``session`` sees every batch and copy (see the module docstring)."""
    global _session, failure, _step_hook
    if _ORIGINAL:
        raise RuntimeError("an automatic profile is already running in this process")
    _ORIGINAL.update(
        next=_Iter.__next__,
        to=torch.Tensor.to,
        cuda=torch.Tensor.cuda,
        copy_=torch.Tensor.copy_,
        pin_memory=torch.Tensor.pin_memory,
        backward=torch.autograd.backward,
    )
    _session, failure = session, None
    _Iter.__next__ = _next  # type: ignore[method-assign,assignment]
    torch.Tensor.to = _to  # type: ignore[method-assign,assignment]
    torch.Tensor.cuda = _cuda  # type: ignore[method-assign,assignment]
    torch.Tensor.copy_ = _copy_  # type: ignore[method-assign,assignment]
    torch.Tensor.pin_memory = _pin_memory  # type: ignore[method-assign,assignment]
    torch.autograd.backward = _backward  # Tensor.backward calls it by this name
    _LAZY._allowed_methods.extend(WRAPPERS)
    # Every optimizer's step (Accelerate's, Lightning's and timm's wrap torch's) ends the rows of the
    # batches it consumed: profiler.capture.in_flight.
    _step_hook = _optimizer.register_optimizer_step_post_hook(_stepped)


def stop() -> AutoSession | None:
    """Put torch back as it was; returns the session that ran (None if none did)."""
    global _session
    _restore()
    session, _session = _session, None
    return session


def _restore() -> None:
    """The originals back in place, the wrappers off the allow-list, the step hook removed."""
    global _step_hook
    if _step_hook is not None:
        _step_hook.remove()
        _step_hook = None
    for name, original in _ORIGINAL.items():
        if name == "next":
            _Iter.__next__ = original  # type: ignore[method-assign]
        elif name == "backward":
            torch.autograd.backward = original
        else:
            setattr(torch.Tensor, name, original)
    _ORIGINAL.clear()
    allowed = _LAZY._allowed_methods
    allowed[:] = [m for m in allowed if m not in WRAPPERS]


def _fail(err: BaseException) -> None:
    """pinprof's own error: said once, then the hooks go and the program runs on unprofiled."""
    global _session, failure
    if _session is None:
        return
    failure = f"{type(err).__name__}: {err}"
    print(
        f"pinprof: profiling stopped after an internal error ({failure}); your program goes on, "
        "and the batches recorded so far are kept",
        file=sys.stderr,
    )
    cur, _session.cur = _session.cur, None  # the batch being recorded may be half written: not kept
    _session.flight = [b for b in _session.flight if b is not cur]
    _restore()
    _session = None


copy_hooks.fail = _fail  # the copy path's errors stop the session as the other hooks' do


def _guarded(step: Callable[..., Any], *args: Any) -> None:
    try:
        step(*args)
    except Exception as err:
        _fail(err)


def _stepped(optimizer: Any, args: Any, kwargs: Any) -> None:
    s = _session
    if s is None or threading.get_ident() != s.main:
        return
    t0 = perf_counter_ns()
    _guarded(s.stepped)
    cur = s.cur
    if cur is not None and "own_sum" in cur[1]:  # pinprof_ms: the rows it closed, on the loop's thread
        cur[1]["own_sum"] += (perf_counter_ns() - t0) / 1e6


def _backward(*args: Any, **kwargs: Any) -> Any:
    """``torch.autograd.backward`` (every ``loss.backward()``): the batch it trains on is marked
    (``AutoSession.backward``), then the original runs."""
    global _in_backward
    s, original = _session, _ORIGINAL.get("backward") or torch.autograd.backward
    if s is None or not s.flight or get_ident() != s.main or _in_backward:
        # _in_backward: a backward run inside one (reentrant activation checkpointing recomputes and
        # backpropagates its segment so, on the main thread on a CPU device) is the same batch's
        return original(*args, **kwargs)
    t0 = perf_counter_ns()
    try:
        got = s.backward(t0)
    except Exception as err:
        _fail(err)
        return original(*args, **kwargs)
    cur = s.cur
    own = cur[1] if cur is not None and "own_sum" in cur[1] else None  # pinprof_ms: the hook's parts
    if own is not None:
        own["own_sum"] += (perf_counter_ns() - t0) / 1e6
    _in_backward = True
    try:
        out = original(*args, **kwargs)  # the user's backward; an error of its own propagates
    finally:
        _in_backward = False
    # Nothing more unless the batch's training end may be its row's end (``AutoSession.trained``):
    # the first code after a backward runs with its data out of the caches, and pays for it.
    if got is not None and _session is s:
        t2 = perf_counter_ns()
        _guarded(s.trained, got[0], got[1], t2)
        if own is not None:
            own["own_sum"] += (perf_counter_ns() - t2) / 1e6
    return out


def _next(it: Any) -> Any:
    s, original = _session, _ORIGINAL.get("next") or _Iter.__next__
    if s is None or threading.get_ident() != s.main:
        return original(it)
    t0 = perf_counter_ns()  # after the tests: a call pinprof does not record pays no clock read
    try:
        began = s.begin(it)
    except Exception as err:
        _fail(err)
        return original(it)
    if began is None:
        return original(it)
    t1 = perf_counter_ns()
    try:
        batch = original(it)
    except BaseException:
        _guarded(s.abandon, *began)
        raise
    t2 = perf_counter_ns()
    _guarded(s.arrived, *began, batch)
    # pinprof's own time (pinprof_ms) starts with the next() that fetched the batch, the loader's own
    # next() left out; the batch's copies and pins add theirs (a batch is current only after this)
    began[1]["own_sum"] = (perf_counter_ns() - t2 + t1 - t0) / 1e6
    return batch


def _recorded(s: AutoSession | None) -> bool:
    return s is not None and s.cur is not None and threading.get_ident() == s.main


# A device's type by the device: ``torch.device.type`` costs about 0.23 us a read on the CPU machine, a
# lookup here 0.05 us. A process has few devices, so this stays small.
_TYPES: dict[torch.device, str] = {}
_parse_to = torch._C._nn._parse_to  # .to()'s own reading of its arguments


def _to(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
    s = _session
    # _recorded(s), written out: every .to() of the program comes through here
    if s is None or s.cur is None or not self.is_cpu or get_ident() != s.main:
        return (_ORIGINAL.get("to") or torch.Tensor.to)(self, *args, **kwargs)
    original = _ORIGINAL.get("to") or torch.Tensor.to
    t0 = perf_counter_ns()
    try:
        parsed = _parse_to(*args, **kwargs)
    except Exception:
        parsed = None
    if parsed is None:  # arguments .to() itself refuses: let it say so, outside this handler (no chain)
        return original(self, *args, **kwargs)
    device, _dtype, non_blocking, _fmt = parsed
    if device is None:
        return original(self, *args, **kwargs)
    kind = _TYPES.get(device)
    if kind is None:
        kind = _TYPES[device] = device.type
    if kind != s.device_type or (not s.cuda and not self.dim()):
        # On a CPU device a .to() of a scalar is torch's own bookkeeping, not a batch's copy:
        # clip_grad_norm_ moves its clip coefficient so, and counted as the batch's last copy it put
        # the step's start after the backward (compute_ms 0.5 ms for 20 with --clip).
        return original(self, *args, **kwargs)
    extra = bool(_fmt is not None and _fmt != torch.preserve_format) or bool(kwargs.get("copy"))
    if s.force_non_blocking and not non_blocking and not extra and s.cuda and self.is_pinned():
        # pinprof tune's trial of non_blocking=True (profiler.capture.knobs): the same copy, asked so
        forced = lambda: original(self, device, _dtype, non_blocking=True)  # noqa: E731
        again = None if self.is_contiguous() else lambda t: original(t, device, _dtype, non_blocking=True)
        return _copy(s, self, device, _dtype, False, True, forced, t0, False, again)
    relay = None if self.is_contiguous() else lambda t: original(t, *args, **kwargs)  # see _copy
    return _copy(
        s, self, device, _dtype, extra, bool(non_blocking), lambda: original(self, *args, **kwargs), t0, False, relay
    )


def _cuda(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
    s, original = _session, _ORIGINAL.get("cuda") or torch.Tensor.cuda
    if not (self.is_cpu and _recorded(s) and s.cuda):  # type: ignore[union-attr]
        return original(self, *args, **kwargs)
    t0 = perf_counter_ns()
    non_blocking = kwargs.get("non_blocking", args[1] if len(args) > 1 else False)
    device = kwargs.get("device", args[0] if args else None)
    device = (
        None if device is None else torch.device("cuda", device) if isinstance(device, int) else torch.device(device)
    )
    extra = "memory_format" in kwargs or len(args) > 2
    if s.force_non_blocking and not non_blocking and not extra and self.is_pinned():  # type: ignore[union-attr]
        # pinprof tune's trial of non_blocking=True (profiler.capture.knobs)
        return _copy(s, self, device, None, False, True, lambda: original(self, device, non_blocking=True), t0)  # type: ignore[arg-type]
    relay = None if self.is_contiguous() else lambda t: original(t, *args, **kwargs)  # see _copy
    call = lambda: original(self, *args, **kwargs)  # noqa: E731
    return _copy(s, self, device, None, extra, bool(non_blocking), call, t0, False, relay)  # type: ignore[arg-type]


def _copy_(self: torch.Tensor, src: Any, *args: Any, **kwargs: Any) -> Any:
    s, original = _session, _ORIGINAL.get("copy_") or torch.Tensor.copy_
    if not (self.is_cuda and isinstance(src, torch.Tensor) and src.is_cpu and _recorded(s)):  # CUDA only
        return original(self, src, *args, **kwargs)
    t0 = perf_counter_ns()
    non_blocking = kwargs.get("non_blocking", args[0] if args else False)
    alt = None if self.dtype == src.dtype else src.numel() * self.element_size()
    call = lambda: original(self, src, *args, **kwargs)  # noqa: E731
    relaid = None
    # torch may make a non-contiguous source contiguous inside the call: made here, timed (timed_copy)
    if not src.is_contiguous():
        try:
            if needs_layout_into(self, src):
                relaid = (lambda: src.expand_as(self).contiguous(), lambda t: original(self, t, *args, **kwargs))
        except Exception as err:
            _fail(err)
    if len(s.flight) > 1 and "_ptrs" in s.cur[1]:  # type: ignore[union-attr,index]  # the copy is its source's batch's
        copy = lambda: _timed_copy(s, src, bool(non_blocking), call, alt, t0, relaid)  # type: ignore[arg-type]  # noqa: E731
        return _aimed(s, src, call, copy)  # type: ignore[arg-type]
    return _timed_copy(s, src, bool(non_blocking), call, alt, t0, relaid)  # type: ignore[arg-type]


def _pin_memory(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
    s, original = _session, _ORIGINAL.get("pin_memory") or torch.Tensor.pin_memory
    if not _recorded(s):
        return original(self, *args, **kwargs)
    from profiler.capture.clock import now_ms

    start = now_ms()
    out = original(self, *args, **kwargs)
    t1 = perf_counter_ns()
    rec = s.cur[1]  # type: ignore[union-attr,index]
    _guarded(s.pin_end, start)  # type: ignore[union-attr]
    rec["own_sum"] += (perf_counter_ns() - t1) / 1e6
    return out


WRAPPERS = (_to, _cuda, _copy_, _pin_memory)
