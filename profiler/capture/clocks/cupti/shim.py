"""The C buffer callbacks of ``shim.c``, built once per machine and loaded with ctypes.

``build`` compiles ``shim.c`` with the C compiler (``$CC``, else ``cc``, ``gcc``) into
``$PINPROF_CACHE`` (``~/.cache/pinprof``), named by the hash of the source and the compiler, written
to a temporary file and renamed, so two processes building at once both end with a whole library.
A cached library is loaded only if it is a regular file owned by this user and writable by no one
else: a library planted in a shared cache would run inside the training process.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Callable
from ctypes import POINTER, c_int, c_int64, c_size_t, c_uint8, c_uint32, c_uint64, c_void_p
from pathlib import Path

SOURCE = Path(__file__).with_name("shim.c")


class ShimError(RuntimeError):
    """The shim could not be built or loaded; the message says why, in one line."""


def _compiler() -> str:
    for name in (os.environ.get("CC", ""), "cc", "gcc"):
        found = shutil.which(name) if name else None
        if found:
            return found
    raise ShimError("no C compiler (cc, gcc, or $CC) to build pinprof's CUPTI buffer callbacks")


def _safe(path: Path) -> bool:
    st = path.lstat()
    return stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def build(cache_dir: Path) -> Path:
    """The shim's shared library, compiled into ``cache_dir`` unless a safe one is there."""
    cc = _compiler()
    key = hashlib.sha256(SOURCE.read_bytes() + cc.encode()).hexdigest()[:16]
    out = cache_dir / f"cupti_shim-{key}.so"
    if out.exists() or out.is_symlink():
        if _safe(out):
            return out
        raise ShimError(f"{out}: not a regular file of this user, or writable by others; remove it")
    cache_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(prefix=".cupti_shim-", suffix=".so", dir=cache_dir)
    os.close(fd)
    try:
        cmd = [cc, "-O2", "-shared", "-fPIC", "-o", tmp, str(SOURCE), "-lpthread"]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            raise ShimError(f"building pinprof's CUPTI buffer callbacks failed ({cc}): {last[0][:200]}")
        os.chmod(tmp, 0o755)
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out


class Shim:
    """The loaded shim: ``register`` hands CUPTI its callbacks; ``take`` and ``give`` move buffers."""

    def __init__(self, path: Path) -> None:
        self.path = path
        h = ctypes.CDLL(str(path))
        h.pinprof_cupti_register.argtypes, h.pinprof_cupti_register.restype = [c_void_p, c_size_t, c_size_t], c_int
        h.pinprof_cupti_take.argtypes = [POINTER(c_void_p), POINTER(c_size_t), POINTER(c_void_p), POINTER(c_uint32)]
        h.pinprof_cupti_take.restype = c_int
        h.pinprof_cupti_give.argtypes, h.pinprof_cupti_give.restype = [c_void_p], None
        h.pinprof_cupti_counts.argtypes, h.pinprof_cupti_counts.restype = [POINTER(c_uint64), POINTER(c_uint64)], None
        h.pinprof_clock_reads.argtypes = [c_void_p, POINTER(c_int64), POINTER(c_uint64), POINTER(c_int64)]
        h.pinprof_clock_reads.restype = c_int
        h.pinprof_marker_new.argtypes = [c_int, c_void_p, c_void_p, c_void_p, c_void_p]
        h.pinprof_marker_new.restype = c_int
        h.pinprof_mark.argtypes, h.pinprof_mark.restype = [c_int, ctypes.c_uint], c_int64
        self.handle = h

    def register(self, register_fn: int, buffer_bytes: int, most: int) -> int:
        """Call ``register_fn`` (the address of ``cuptiActivityRegisterCallbacks``) with the shim's
        callbacks; CUPTI's result code."""
        return int(self.handle.pinprof_cupti_register(register_fn, buffer_bytes, most))

    def take(self) -> tuple[int, int, int, int] | None:
        """The oldest completed buffer: (address, valid bytes, context, stream), or None."""
        buf, valid, ctx, stream = c_void_p(), c_size_t(), c_void_p(), c_uint32()
        if not self.handle.pinprof_cupti_take(
            ctypes.byref(buf), ctypes.byref(valid), ctypes.byref(ctx), ctypes.byref(stream)
        ):
            return None
        return int(buf.value or 0), int(valid.value), int(ctx.value or 0), int(stream.value)

    def give(self, address: int) -> None:
        self.handle.pinprof_cupti_give(address)

    def clock_reads(self, timestamp_fn: int) -> Callable[[], tuple[int, int, int]]:
        """A reader of (host ns before, CUPTI's clock, host ns after), taken back to back in C with no
        wait for Python's lock between them; ``timestamp_fn``: the address of ``cuptiGetTimestamp`` (or
        of a function of its signature). A reading that fails raises ``OSError``."""
        fn, before, cupti, after = self.handle.pinprof_clock_reads, c_int64(), c_uint64(), c_int64()
        refs = ctypes.byref(before), ctypes.byref(cupti), ctypes.byref(after)

        def read() -> tuple[int, int, int]:
            code = fn(timestamp_fn, *refs)
            if code:
                raise OSError(f"cuptiGetTimestamp returned {code}")
            return int(before.value), int(cupti.value), int(after.value)

        return read

    def marker(self, kernel: bool, call: int, target: int, src: int, stream: int) -> Callable[[int], int]:
        """An issuer of one marker (``profiler.capture.clocks.cupti.marker``): ``call`` is the address of
        ``cuLaunchKernel`` (``kernel``; ``target`` the CUfunction) or of ``cudaMemcpyAsync`` (``target``
        and ``src`` the device and pinned buffers); ``stream`` the stream's handle. The issuer takes the
        marker's size and returns the host ns just after the call, or minus the CUDA error code."""
        slot = int(self.handle.pinprof_marker_new(int(kernel), call, target, src, stream))
        if slot < 0:
            raise ShimError("no marker slot left in pinprof's CUPTI shim (8 a process)")
        return functools.partial(self.handle.pinprof_mark, slot)

    def counts(self) -> tuple[int, int]:
        """(buffers in existence, requests refused because all were in use)."""
        live, refused = c_uint64(), c_uint64()
        self.handle.pinprof_cupti_counts(ctypes.byref(live), ctypes.byref(refused))
        return int(live.value), int(refused.value)


# For tests: CUPTI's side of the shim, called from Python as CUPTI would call it.
REQUESTED = ctypes.CFUNCTYPE(None, POINTER(POINTER(c_uint8)), POINTER(c_size_t), POINTER(c_size_t))
COMPLETED = ctypes.CFUNCTYPE(None, c_void_p, c_uint32, POINTER(c_uint8), c_size_t, c_size_t)
REGISTER = ctypes.CFUNCTYPE(c_int, REQUESTED, COMPLETED)
