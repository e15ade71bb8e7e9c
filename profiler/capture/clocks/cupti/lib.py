"""libcupti through ctypes: the functions pinprof calls, and where the library is found.

Why ctypes and not NVIDIA's cupti-python: cupti-python hands each activity record to Python as an
object of its own. On the H200 a buffer-completed callback that read a few fields of each record
took 13-30 us a record (``scripts/cupti_probe.py``, ``cb_us_per_record``), and a resnet50 step makes
hundreds of kernel records. Here a buffer is copied out once and read with numpy
(``profiler.capture.clocks.cupti.layout``). The library is the one torch's CUDA wheels already depend on
(``nvidia-cuda-cupti``), so its version is the CUDA runtime's and nothing more is installed.

Where it is looked for, first found wins: a libcupti this process has already loaded (torch's Kineto
loads it), ``$PINPROF_CUPTI_LIB``, the ``nvidia`` wheels' folders, ``$CUDA_HOME/extras/CUPTI/lib64``,
then the loader's search path.
"""

from __future__ import annotations

import ctypes
import glob
import os
from ctypes import POINTER, c_char_p, c_size_t, c_uint8, c_uint32, c_uint64, c_void_p
from dataclasses import dataclass
from typing import Any

SUCCESS = 0
ERROR_MAX_LIMIT_REACHED = 12
ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED = 39
FLUSH_FORCED = 1
ATTR_PER_THREAD_ACTIVITY_BUFFER = 9  # CUpti_ActivityAttribute (cupti_activity.h, CUDA 12.3 and later)

_SIGNATURES: dict[str, list[Any]] = {
    "cuptiActivityRegisterCallbacks": [c_void_p, c_void_p],  # called by the shim (shim.c), not from Python
    "cuptiActivitySetAttribute": [c_uint32, POINTER(c_size_t), c_void_p],
    "cuptiActivityEnable": [c_uint32],
    "cuptiActivityDisable": [c_uint32],
    "cuptiActivityFlushAll": [c_uint32],
    "cuptiActivityFlushPeriod": [c_uint32],
    "cuptiActivityEnableLatencyTimestamps": [c_uint8],
    "cuptiActivityGetNextRecord": [POINTER(c_uint8), c_size_t, POINTER(c_void_p)],
    "cuptiActivityGetNumDroppedRecords": [c_void_p, c_uint32, POINTER(c_size_t)],
    "cuptiGetTimestamp": [POINTER(c_uint64)],
    "cuptiGetResultString": [c_uint32, POINTER(c_char_p)],
    "cuptiGetVersion": [POINTER(c_uint32)],
    "cuptiFinalize": [],
}


class CuptiCallError(RuntimeError):
    """A CUPTI call that returned an error; ``code`` is its CUptiResult."""

    def __init__(self, call: str, code: int, text: str) -> None:
        super().__init__(f"{call} failed: {text} ({code})")
        self.call, self.code = call, code


@dataclass
class Lib:
    """The loaded library: ``call(name, *args)`` raises ``CuptiCallError`` on an error result."""

    path: str
    handle: ctypes.CDLL

    def call(self, name: str, *args: Any) -> None:
        code = int(getattr(self.handle, name)(*args))
        if code != SUCCESS:
            raise CuptiCallError(name, code, self.result_string(code))

    def result_string(self, code: int) -> str:
        text = c_char_p()
        try:
            if self.handle.cuptiGetResultString(code, ctypes.byref(text)) == SUCCESS and text.value:
                return text.value.decode(errors="replace")
        except Exception:
            pass
        return f"CUptiResult {code}"

    def timestamp(self) -> int:
        """CUPTI's clock now, ns."""
        out = c_uint64()
        self.call("cuptiGetTimestamp", ctypes.byref(out))
        return int(out.value)

    def version(self) -> int:
        out = c_uint32()
        self.call("cuptiGetVersion", ctypes.byref(out))
        return int(out.value)

    def record_size(self, base: int, valid: int, offset: int) -> int:
        """Bytes of the record at ``offset`` of the buffer at address ``base``: the distance to the
        next one, or to the end."""
        rec = c_void_p(base + offset)
        code = int(
            self.handle.cuptiActivityGetNextRecord(ctypes.cast(base, POINTER(c_uint8)), valid, ctypes.byref(rec))
        )
        if code == ERROR_MAX_LIMIT_REACHED:
            return valid - offset
        if code != SUCCESS or rec.value is None:
            raise CuptiCallError("cuptiActivityGetNextRecord", code, self.result_string(code))
        return int(rec.value) - (base + offset)


def _loaded() -> list[str]:
    """libcupti files already mapped into this process."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
            paths = {line.split()[-1] for line in fh if "libcupti" in line and "/" in line}
    except OSError:
        return []
    return sorted(p for p in paths if os.path.basename(p).startswith("libcupti.so"))


def candidates(cuda_major: str | None) -> list[str]:
    """Paths (or loader names) to try, best first (see the module docstring)."""
    want = f"libcupti.so.{cuda_major}" if cuda_major else "libcupti.so"
    out = _loaded()
    if os.environ.get("PINPROF_CUPTI_LIB"):
        out.append(os.environ["PINPROF_CUPTI_LIB"])
    try:
        import nvidia  # the CUDA wheels' namespace package

        for root in list(getattr(nvidia, "__path__", [])):
            out += sorted(glob.glob(os.path.join(root, "**", "lib", f"{want}*"), recursive=True))
    except ImportError:
        pass
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home:
            out += sorted(glob.glob(os.path.join(home, "extras", "CUPTI", "lib64", f"{want}*")))
    out.append(want)
    seen: set[str] = set()
    return [p for p in out if not (p in seen or seen.add(p))]  # type: ignore[func-returns-value]


def load(cuda_major: str | None) -> tuple[Lib | None, str]:
    """(the library, "") or (None, why not, in one line)."""
    tried = []
    for path in candidates(cuda_major):
        try:
            handle = ctypes.CDLL(path)
        except OSError as err:
            tried.append(f"{path}: {err}")
            continue
        try:
            for name, argtypes in _SIGNATURES.items():
                fn = getattr(handle, name)
                fn.argtypes, fn.restype = argtypes, c_uint32
        except AttributeError as err:
            tried.append(f"{path}: {err}")
            continue
        return Lib(path, handle), ""
    hint = "pip install nvidia-cuda-cupti" + (f"-cu{cuda_major}" if cuda_major and int(cuda_major) < 13 else "")
    return None, f"libcupti (CUDA {cuda_major}) not found ({'; '.join(tried[-2:])}); {hint}, or set PINPROF_CUPTI_LIB"
