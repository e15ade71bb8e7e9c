"""``cudaMemcpyAsync`` called directly, for copies from pageable memory.

Why: a pageable copy cannot be gated (``profiler.capture.cuda.gate``: the driver stages it on the calling thread
and waits for its own DMAs, so a held stream would deadlock), so its start event fires when it is
recorded. Through ``Tensor.copy_`` the runtime call came 5-20 us after that event (torch's dispatch
and a ``cudaStreamIsCapturing`` check); called here, 3-8 us (H200 probe against CUPTI's runtime
records, 1-16 MiB). It is the very call torch's ``copy_`` makes for a contiguous same-dtype host to
device copy, in the same libcudart (the one torch loaded), so the copy itself is unchanged.

Only for pageable sources: a pinned source comes from torch's caching host allocator, which must
record an event for each non_blocking copy out of it (torch's ``copy_`` does); a pageable source is
free to reuse once the call returns (the driver has staged it). Tools that watch torch's operators
(the CUDA sanitizer, ``profiler.capture.hazards``) do not see these copies; neither needs to, as nothing of a
pageable source is read after the call returns.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import torch

_HOST_TO_DEVICE = 1  # cudaMemcpyHostToDevice


class Runtime:
    def __init__(self, lib: ctypes.CDLL) -> None:
        self.lib = lib
        self.memcpy = lib.cudaMemcpyAsync
        self.memcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
        self.memcpy.restype = ctypes.c_int
        self.clear = lib.cudaGetLastError
        self.clear.restype = ctypes.c_int


def _loaded_libcudart() -> Path | None:
    """The libcudart this process already mapped (torch's); None if there is none to share."""
    try:
        with open("/proc/self/maps", encoding="utf-8") as maps:
            for line in maps:
                path = line.rsplit(" ", 1)[-1].strip()
                if "/libcudart.so" in path:
                    return Path(path)
    except OSError:
        pass
    return None


_runtime: Runtime | bool | None = False  # False: not looked up yet


def runtime() -> Runtime | None:
    """The shared runtime, or None (not Linux, no CUDA, a static cudart): callers use ``copy_``."""
    global _runtime
    if _runtime is False:
        _runtime = None
        if torch.cuda.is_available():
            torch.cuda.init()  # makes sure torch's libcudart is loaded before we look for it
            path = _loaded_libcudart()
            if path is not None:
                try:
                    _runtime = Runtime(ctypes.CDLL(str(path)))
                except (OSError, AttributeError):
                    _runtime = None
    return _runtime  # type: ignore[return-value]


def direct_copy_ok(dst: torch.Tensor, src: torch.Tensor) -> bool:
    """Whether ``dst.copy_(src)`` is one plain memcpy of ``src``'s bytes (what torch does then too)."""
    return (
        src.layout == torch.strided
        and dst.dtype == src.dtype
        and src.numel() > 0
        and not (src.is_conj() or src.is_neg() or dst.is_conj() or dst.is_neg())
        and src.is_contiguous()
        and dst.is_contiguous()
    )


def copy_pageable(rt: Runtime, dst: torch.Tensor, src: torch.Tensor, stream: torch.cuda.Stream) -> bool:
    """Issue the H2D copy of ``src`` into ``dst`` on ``stream``; False (nothing issued, the runtime's
    error cleared so torch does not report it later) if the runtime refused it."""
    err = rt.memcpy(
        dst.data_ptr(), src.data_ptr(), src.numel() * src.element_size(), _HOST_TO_DEVICE, stream.cuda_stream
    )
    if err:
        rt.clear()
        return False
    return True
