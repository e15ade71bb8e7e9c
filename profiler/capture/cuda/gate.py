"""Hold a stream until the host has submitted a whole copy, so its start event times the copy alone.

On an idle stream a CUDA event fires as soon as it is submitted, before the copy behind it is
(torch's dispatch, the allocator and the runtime call take tens of microseconds: measured on the
H200, events around a 12.5 MiB pinned copy read 55 us more than CUPTI's record). Mapping host
submission times onto the GPU clock is not precise enough to correct that.

So for copies that do not block the host (pinned sources), pinprof enqueues ``cuStreamWaitValue32``
on a pinned flag before the start event, submits the copies and the end event, then writes the flag:
the stream resumes with everything queued, and the start event fires right before the DMA. The copy
waits only for the rest of its own submission (the host returns from the last copy call and writes
one word); nothing else is delayed.

Never used for pageable sources or inside the staged pipeline's buffer waits: there the host itself
waits for the DMA, which a held stream would never run (a deadlock). Needs ``cuda.bindings`` (shipped
with CUDA builds of torch); without it, events are recorded ungated and ``h2d_ms`` of an idle
stream includes the submission time.
"""

from __future__ import annotations

import ctypes
from typing import Any

import torch

from profiler.settings import current


class StreamGate:
    """A pinned int32 flag that streams wait on and the host releases."""

    def __init__(self, device: torch.device) -> None:
        from cuda.bindings import driver  # type: ignore[import-untyped]

        self._flag, self._dptr, self._cell = _pinned_flag(driver)
        # A second flag that a stream writes back, for round-trip clock anchors (profiler.capture.cuda.anchor).
        self._echo, self._echo_dptr, self._echo_cell = _pinned_flag(driver)
        self._write = driver.cuStreamWriteValue32
        self._wait = driver.cuStreamWaitValue32
        self._geq = driver.CUstreamWaitValue_flags.CU_STREAM_WAIT_VALUE_GEQ
        self._ok = driver.CUresult.CUDA_SUCCESS
        self._value = 0

    def hold(self, stream: torch.cuda.Stream) -> bool:
        """Make ``stream`` wait for the next release; False (stream untouched) if the driver refuses."""
        self._value = (self._value + 1) & 0x7FFFFFFF
        (err,) = self._wait(stream.cuda_stream, self._dptr, self._value, self._geq)
        return bool(err == self._ok)

    def release(self) -> None:
        """Let every stream held so far go on (one host store into pinned memory)."""
        self._cell.value = self._value

    def echo(self, stream: torch.cuda.Stream) -> bool:
        """Make ``stream`` write the current hold value back to the host once it gets this far."""
        (err,) = self._write(stream.cuda_stream, self._echo_dptr, self._value, 0)
        return bool(err == self._ok)

    def echoed(self) -> bool:
        """Whether the stream has written back the current hold value."""
        return bool(self._echo_cell.value == self._value)


def _pinned_flag(driver: Any) -> tuple[torch.Tensor, Any, ctypes.c_int32]:
    """A pinned int32 (kept alive by the returned tensor), its device address and a host view."""
    flag = torch.zeros(1, dtype=torch.int32, pin_memory=True)
    host_ptr = flag.data_ptr()
    err, dptr = driver.cuMemHostGetDevicePointer(host_ptr, 0)
    # With unified addressing pinned memory is mapped at the same address; use it if the call fails.
    return flag, dptr if err == driver.CUresult.CUDA_SUCCESS else host_ptr, ctypes.c_int32.from_address(host_ptr)


def gate_wanted() -> bool:
    """Whether to gate copies: yes unless ``PINPROF_GATE=0`` (then ``h2d_ms`` of pinned copies
    includes their submission time, as plain events around a copy do)."""
    return current().gate


def make_gate(device: torch.device) -> StreamGate | None:
    """A gate for ``device``, or None where cuda.bindings or stream memory operations are missing."""
    try:
        gate = StreamGate(device)
        stream = torch.cuda.Stream(device)
        if not gate.hold(stream):
            return None
        gate.release()
        stream.synchronize()
        return gate
    except (ImportError, RuntimeError, AttributeError, OSError):
        return None
