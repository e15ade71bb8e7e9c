"""Step-window edges in CUPTI's own numbering: a tiny copy at each edge, instead of launch times.

A kernel's step is the host interval its launch fell in. CUPTI can give each kernel record its launch
time (``cuptiActivityEnableLatencyTimestamps``), but with those on the driver deadlocked (a kernel
launch and a thread of CUPTI's own, each waiting for a driver lock: ``profiler.capture.clocks.choice``), and
they cost about 0.5 us a launch. CUPTI also numbers every CUDA API call as it begins, on any thread
(its correlation id), and kernels' numbers follow their launch order: 0 of 19,867 kernels out of order
in two H200 recordings, backward's from autograd's thread included (``scripts/corr_windows.py``).

So at each moment that can end a step window (a loader's ``next()``, an optimizer step that closes
rows, a ``compute()`` block's exit, and its entry where the batch's copies are not the edge: see
``phases.Compute``), pinprof copies 1 to ``SIZES`` bytes from a pinned
buffer to the device (``PINPROF_MARKER=copy``, the default) or launches an empty kernel of 1 to
``SIZES`` threads (``kernel``), on a stream of its own (``Marker.mark``), and notes the host time just
after the call. The call and the clock read are made in C (``shim.c``'s ``pinprof_mark``): one ctypes
call of two ints, and no wait for the GIL between the call's return and the time read. Issued from
Python through ctypes, on an H100 with CUPTI's records on, a copy cost the loop's thread 2.6 us, a
kernel 4.7, a CUDA event recorded 1.3 (``scripts/bench_marker_cost.py``, 2026-12-05); issued in C,
on another H100 host whose event record cost 1.66, a copy still cost 3.28. The marker's CUPTI
record carries the call's correlation id: a kernel numbered after marker m and before marker m+1 was
launched between their host times. ``Records`` turns each window's host edges into those of the
latest marker at or before them (``Records.snap``), and a kernel's launch into its marker's time plus
1 ns, so a kernel falls in the window it would by its launch time wherever the window's edges are
markers' times; an edge between two markers takes the kernels launched between the earlier one and
it into the later window. A copy call matched to its record is such a marker too
(``Records._copy_edges``): its host end and its last record's id.

The markers go on a non-blocking stream that nothing waits on, so the user's streams are not ordered
by them; their records are told apart by that stream's CUPTI id, and the size of each (threads or
bytes: 1, 2, ..., ``SIZES``, 1, ...) matches records to the host times in order even where CUPTI drops
one. The stream is created for the markers alone (``cudaStreamCreateWithFlags``), not taken from
torch's pool: ``torch.cuda.Stream()`` hands out 32 pooled streams in turn, so a loop that makes a side
stream each epoch got the markers' own, and its copies were read as markers (an H100, 2026-12-05: the
64 KiB ``non_blocking`` case of ``tests/test_gpu_cupti.py``, which makes one a round).
"""

from __future__ import annotations

import ctypes
from collections import deque
from collections.abc import Callable
from time import perf_counter_ns
from typing import Any

import torch

from profiler.capture.clocks.cupti.lib import SUCCESS, Lib
from profiler.capture.clocks.cupti.shim import Shim
from profiler.capture.cuda.cudart import Runtime, runtime

SIZES = 251  # marker copies are 1..SIZES bytes, in turn


class MarkerError(RuntimeError):
    """Markers cannot be issued here (no shared libcudart, no CUPTI stream id)."""


def _libcuda() -> ctypes.CDLL:
    """The CUDA driver library (already mapped by torch: loading it again only finds it)."""
    try:
        return ctypes.CDLL("libcuda.so.1")
    except OSError as err:
        raise MarkerError(f"libcuda: {err}") from None


def _stream_id(lib: Lib, stream: int) -> int:
    """CUPTI's id of ``stream`` (the ``streamId`` of its records)."""
    cuda = _libcuda()
    ctx = ctypes.c_void_p()
    code = cuda.cuStreamGetCtx(ctypes.c_void_p(stream), ctypes.byref(ctx))
    if code != 0:
        raise MarkerError(f"cuStreamGetCtx failed ({code})")
    out = ctypes.c_uint32()
    fn = getattr(lib.handle, "cuptiGetStreamIdEx", None)
    if fn is not None:
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint8, ctypes.POINTER(ctypes.c_uint32)]
        fn.restype = ctypes.c_uint32
        code = fn(ctx, ctypes.c_void_p(stream), 0, ctypes.byref(out))
    else:
        fn = lib.handle.cuptiGetStreamId
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint32)]
        fn.restype = ctypes.c_uint32
        code = fn(ctx, ctypes.c_void_p(stream), ctypes.byref(out))
    if code != SUCCESS:
        raise MarkerError(f"cuptiGetStreamId failed: {lib.result_string(code)} ({code})")
    return int(out.value)


def _own_stream(rt: Runtime, device: torch.device) -> int:
    """A new stream on ``device`` for the markers alone, non-blocking (the legacy default stream does
    not wait on it), never destroyed (one a process)."""
    create = rt.lib.cudaStreamCreateWithFlags
    create.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint]
    create.restype = ctypes.c_int
    handle = ctypes.c_void_p()
    with torch.cuda.device(device):
        code = create(ctypes.byref(handle), 1)  # cudaStreamNonBlocking
    if code or not handle.value:
        rt.clear()
        raise MarkerError(f"cudaStreamCreateWithFlags failed (cudaError {code})")
    return int(handle.value)


# An empty kernel, JIT-compiled by the driver for whatever GPU it runs on.
PTX = b"""
.version 6.0
.target sm_52
.address_size 64
.visible .entry pinprof_marker()
{
    ret;
}
\0"""


def _address(fn: Any) -> int:
    """A ctypes function's address, for the shim to call."""
    return int(ctypes.cast(fn, ctypes.c_void_p).value or 0)


def _kernel(shim: Shim, stream: int) -> Callable[[int], int]:
    """``pinprof_marker<<<1, n, 0, stream>>>()`` through the driver API (``cuLaunchKernel``)."""
    cuda = _libcuda()
    module, fn = ctypes.c_void_p(), ctypes.c_void_p()
    code = cuda.cuModuleLoadData(ctypes.byref(module), ctypes.c_char_p(PTX))
    if code == 0:
        code = cuda.cuModuleGetFunction(ctypes.byref(fn), module, b"pinprof_marker")
    if code != 0:
        raise MarkerError(f"the marker kernel could not be loaded (CUresult {code})")
    return shim.marker(True, _address(cuda.cuLaunchKernel), int(fn.value or 0), 0, stream)


class _Buffers:
    """The marker copies' pinned source and device destination, kept alive as long as the marker."""

    def __init__(self, device: torch.device) -> None:
        self.src = torch.zeros(SIZES, dtype=torch.uint8).pin_memory()
        self.dst = torch.empty(SIZES, dtype=torch.uint8, device=device)


class Marker:
    """The markers and their host times. ``issued`` (host ns, sequence) is appended by the loop's
    thread and consumed, in order, by ``Records`` on the recorder's thread (a deque: both ends are
    atomic). ``kind``: ``copy``, 1..``SIZES`` bytes copied (its record's ``bytes``), or ``kernel``, an
    empty kernel of 1..``SIZES`` threads (its record's ``block_x``)."""

    def __init__(self, lib: Lib, shim: Shim, device: torch.device, kind: str = "copy") -> None:
        rt = runtime()
        if rt is None:
            raise MarkerError("no shared libcudart to issue markers with")
        self._clear = rt.clear
        self._handle = _own_stream(rt, device)
        self._buffers: _Buffers | None = None
        with torch.cuda.device(device):
            if kind == "kernel":
                self._issue = _kernel(shim, self._handle)
            else:
                b = self._buffers = _Buffers(device)
                self._issue = shim.marker(False, _address(rt.memcpy), b.dst.data_ptr(), b.src.data_ptr(), self._handle)
        self.kind = kind
        self.stream_id = _stream_id(lib, self._handle)
        self.issued: deque[tuple[int, int]] = deque()
        self.last = (0, 0)  # the latest marker issued: host ns, sequence
        self.count = 0
        self.failure: str | None = None

    def mark(self) -> float:
        """Issue the next marker; its host time in ms (the edge's time: pass it as the edge)."""
        n = 1 + self.count % SIZES
        got = self._issue(n)  # host ns just after the call, read in C (shim.c), or -error
        if got < 0:
            self._clear()  # not left for torch to report as its own error
            if self.failure is None:
                self.failure = f"marker {self.kind} failed (error {-got})"
            return perf_counter_ns() / 1e6
        self.count += 1
        ms = got / 1e6
        ns = round(ms * 1e6)  # as Records reads an edge given in ms (batches._ns): the two agree to the ns
        self.last = (ns, n)
        self.issued.append(self.last)
        return ms
