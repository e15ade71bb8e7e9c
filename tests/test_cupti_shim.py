"""The C buffer callbacks CUPTI calls (``profiler/capture/clocks/cupti/shim.c``), built with the machine's C
compiler and driven from Python as CUPTI drives them: buffers handed out up to the bound, completed
buffers queued in order with their fields, given back and reused; nothing in the library can take
Python's lock (it links no Python symbol), which is the point of it."""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
import time
from ctypes import POINTER, c_size_t, c_uint8
from pathlib import Path

import pytest

from profiler.capture.clocks.cupti.shim import COMPLETED, REGISTER, REQUESTED, Shim, ShimError, build

pytestmark = pytest.mark.skipif(not (shutil.which("cc") or shutil.which("gcc")), reason="no C compiler")


def test_buffers_flow_in_order_within_their_bound(tmp_path: Path) -> None:
    shim = Shim(build(tmp_path / "cache"))
    got: dict[str, object] = {}

    def register(requested: object, completed: object) -> int:
        got["requested"], got["completed"] = requested, completed
        return 0

    fake = REGISTER(register)
    assert shim.register(ctypes.cast(fake, ctypes.c_void_p).value or 0, 4096, 3) == 0
    requested = ctypes.cast(got["requested"], REQUESTED)  # type: ignore[arg-type]
    completed = ctypes.cast(got["completed"], COMPLETED)  # type: ignore[arg-type]

    def ask() -> tuple[int, int]:
        buf, size, most = POINTER(c_uint8)(), c_size_t(), c_size_t()
        requested(ctypes.byref(buf), ctypes.byref(size), ctypes.byref(most))
        return ctypes.cast(buf, ctypes.c_void_p).value or 0, size.value

    bufs = [ask() for _ in range(3)]
    assert all(addr and size == 4096 and addr % 8 == 0 for addr, size in bufs)
    assert ask() == (0, 0)  # the fourth: all three in use, so CUPTI gets none and counts its drops
    assert shim.counts() == (3, 1)
    ctypes.memmove(bufs[1][0], b"record-one", 10)
    completed(0x1234, 7, ctypes.cast(bufs[1][0], POINTER(c_uint8)), 4096, 10)
    completed(0, 0, ctypes.cast(bufs[0][0], POINTER(c_uint8)), 4096, 0)
    first = shim.take()
    assert first == (bufs[1][0], 10, 0x1234, 7) and ctypes.string_at(first[0], 10) == b"record-one"
    assert shim.take() == (bufs[0][0], 0, 0, 0) and shim.take() is None
    shim.give(bufs[1][0])
    again, size = ask()
    assert again == bufs[1][0] and size == 4096 and shim.counts() == (3, 1)  # reused, none more made


def test_the_library_links_no_python(tmp_path: Path) -> None:
    """A callback that needs the GIL under CUPTI's lock is the deadlock the shim exists to avoid."""
    path = build(tmp_path / "cache")
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("no nm")
    undefined = subprocess.run([nm, "-D", "--undefined-only", str(path)], capture_output=True, text=True).stdout
    assert "pthread_mutex_lock" in undefined and "Py" not in undefined


def test_a_planted_library_is_refused(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    path = build(cache)
    os.chmod(path, 0o777)  # writable by anyone: someone else's code could be in it
    with pytest.raises(ShimError, match="writable by others"):
        build(cache)
    path.unlink()
    path.symlink_to("/bin/true")
    with pytest.raises(ShimError, match="not a regular file"):
        build(cache)


def test_the_flush_period_is_read_from_the_environment_and_a_bad_value_is_named() -> None:
    from profiler.capture.clocks.cupti import recorder
    from profiler.errors import UsageError
    from profiler.settings import load

    assert load({}).cupti_flush_ms == recorder.FLUSH_PERIOD_MS
    assert load({"PINPROF_CUPTI_FLUSH_MS": "0"}).cupti_flush_ms == 0
    assert load({"PINPROF_CUPTI_FLUSH_MS": "250"}).cupti_flush_ms == 250
    # kernels placed by markers unless launch times are asked for; anything else is refused by name
    assert not load({}).cupti_latency and not load({"PINPROF_CUPTI_LATENCY": "0"}).cupti_latency
    assert load({"PINPROF_CUPTI_LATENCY": "1"}).cupti_latency
    with pytest.raises(UsageError, match=r"PINPROF_CUPTI_LATENCY='on'.*give 1"):
        load({"PINPROF_CUPTI_LATENCY": "on"})
    # kernel records off unless asked for (launch times are theirs, so asking for those asks for them)
    assert not load({}).kernels and not load({"PINPROF_KERNELS": "0"}).kernels
    assert load({"PINPROF_KERNELS": "1"}).kernels and load({"PINPROF_CUPTI_LATENCY": "1"}).kernels
    with pytest.raises(UsageError, match=r"PINPROF_KERNELS='yes'.*give 1"):
        load({"PINPROF_KERNELS": "yes"})
    assert load({}).marker == "copy" and load({"PINPROF_MARKER": " Kernel "}).marker == "kernel"
    with pytest.raises(UsageError, match=r"PINPROF_MARKER='event'.*give copy"):
        load({"PINPROF_MARKER": "event"})
    for bad in ("-5", "half", "1.5"):
        with pytest.raises(UsageError, match=rf"PINPROF_CUPTI_FLUSH_MS='{re.escape(bad)}'"):
            load({"PINPROF_CUPTI_FLUSH_MS": bad})


class Lib:
    """libcupti as the recorder calls it, recording each call and answering none."""

    path = "libcupti (fake)"

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[object, ...]]] = []

    def call(self, name: str, *args: object) -> None:
        self.calls.append((name, args))

    def timestamp(self) -> int:
        return time.perf_counter_ns()


class NoBuffers:
    """A shim with no completed buffer to hand over."""

    def take(self) -> None:
        return None

    def counts(self) -> tuple[int, int]:
        return 0, 0


def test_only_a_forced_collect_flushes_cupti() -> None:
    """A flush while the loop launches work hung on the H200; the journal's collects must not flush."""
    from profiler.capture.clocks.cupti.lib import FLUSH_FORCED
    from profiler.capture.clocks.cupti.recorder import CuptiRecorder

    lib = Lib()
    rec = CuptiRecorder(lib, NoBuffers())  # type: ignore[arg-type]
    rec.active = True
    for _ in range(3):
        rec.collect()
    assert [c for c in lib.calls if c[0] == "cuptiActivityFlushAll"] == []
    rec.collect(force=True)
    assert [c for c in lib.calls if c[0] == "cuptiActivityFlushAll"] == [("cuptiActivityFlushAll", (FLUSH_FORCED,))]


def test_a_paused_recorder_enables_its_records_again_without_registering() -> None:
    """``release(paused=True)`` then ``resume``: the records enabled again under the callbacks CUPTI
    has, not registered again (a late registration is what the resnet50 benchmark's hangs shared); a
    handover to another client registers them again on ``resume``."""
    from profiler.capture.clocks.cupti.recorder import CuptiRecorder
    from profiler.capture.clocks.cupti.records import KERNEL, MEMCPY

    lib = Lib()
    rec = CuptiRecorder(lib, NoBuffers())  # type: ignore[arg-type]
    starts: list[int] = []
    rec.start = lambda: starts.append(1) or setattr(rec, "active", True)  # type: ignore[method-assign,func-returns-value]
    rec.active = True
    rec.release("a bare block", paused=True)
    assert not rec.active and ("cuptiActivityDisable", (KERNEL,)) in lib.calls
    lib.calls.clear()
    assert rec.resume() and rec.active
    # the copies' records alone, as the recorder was started (PINPROF_KERNELS unset)
    assert lib.calls == [("cuptiActivityEnable", (MEMCPY,))] and starts == []
    # a test that switched the kernel records on keeps them on through a pause
    rec.kernel_records(True)
    assert lib.calls[-1] == ("cuptiActivityEnable", (KERNEL,)) and rec.records.marked
    rec.release("a bare block", paused=True)
    lib.calls.clear()
    assert rec.resume() and rec.kernels
    assert lib.calls == [("cuptiActivityEnable", (MEMCPY,)), ("cuptiActivityEnable", (KERNEL,))] and starts == []
    rec.release("torch.profiler ran")
    lib.calls.clear()
    assert rec.resume() and rec.active and starts == [1]
    assert [c for c in lib.calls if c[0] == "cuptiActivityEnable"] == []
    assert rec.stats.handovers == 3


TIMESTAMP = ctypes.CFUNCTYPE(ctypes.c_int, POINTER(ctypes.c_uint64))


def test_the_clock_readings_bracket_cuptis_on_perf_counters_clock(tmp_path: Path) -> None:
    """``pinprof_clock_reads``: the host clock it reads is ``perf_counter_ns``'s, one reading on each
    side of the timestamp function's; a failing one raises; the recorder's clock takes them, and
    refuses readings of another host clock."""
    from profiler.capture.clocks.cupti.clock import CuptiClock

    shim = Shim(build(tmp_path / "cache"))

    def now(out: object) -> int:
        out[0] = time.perf_counter_ns()  # type: ignore[index]  # CUPTI's clock: here the host's own
        return 0

    fn = TIMESTAMP(now)
    read = shim.clock_reads(ctypes.cast(fn, ctypes.c_void_p).value or 0)
    a = time.perf_counter_ns()
    before, cupti, after = read()
    b = time.perf_counter_ns()
    assert a <= before <= cupti <= after <= b
    failing = TIMESTAMP(lambda out: 17)
    with pytest.raises(OSError, match="17"):
        shim.clock_reads(ctypes.cast(failing, ctypes.c_void_p).value or 0)()
    clock = CuptiClock(time.perf_counter_ns, read)
    assert clock._reads is read
    p, c = clock.last
    assert abs(p - c) < 1_000_000  # both clocks are perf_counter_ns here: the pair maps one onto the other

    def wall() -> tuple[int, int, int]:  # another host clock (the wall clock) is not used
        t = time.time_ns()
        return t, time.perf_counter_ns(), t

    assert CuptiClock(time.perf_counter_ns, wall)._reads is None


def test_torch_profiler_takes_cupti_for_the_rest_of_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """A torch.profiler session in the middle of a run: pinprof's recorder hands CUPTI over as it
    starts and does not take it back when it ends (the batches after are timed by events, and the
    report's line says why); ``take_back``, for a test or a bench, does, once."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from profiler.capture.clocks import choice as backend
    from profiler.capture.clocks.cupti.recorder import CuptiRecorder

    rec = CuptiRecorder(Lib(), NoBuffers())  # type: ignore[arg-type]
    rec.start = lambda: setattr(rec, "active", True)  # type: ignore[method-assign]
    rec.active = True
    monkeypatch.setattr(backend, "_recorder", rec)
    monkeypatch.setattr(backend, "_tried", True)
    original = torch.autograd.profiler.profile._prepare_trace
    monkeypatch.setattr(torch.autograd.profiler.profile, "_prepare_trace", original)  # put back after
    backend._watch_torch_profiler()
    with profile(activities=[ProfilerActivity.CPU]):
        torch.ones(4).sum()
        assert not rec.active
    assert not rec.active and rec.why_not == backend.HANDED_OVER and rec.stats.handovers == 1
    info = backend.describe()
    assert info["backend"] == "cupti+events" and info["why"] == backend.HANDED_OVER
    assert backend.take_back() and rec.active and rec.why_not == ""
    assert not backend.take_back()  # nothing handed over now


MEMCPY = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p
)
_u = ctypes.c_uint
LAUNCH = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.c_void_p, _u, _u, _u, _u, _u, _u, _u, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p
)


def test_a_marker_is_issued_in_c_with_its_arguments_and_timed_after_the_call(tmp_path: Path) -> None:
    """``pinprof_mark``: a copy marker calls cudaMemcpyAsync's signature with its buffers, the size and
    host-to-device on its stream; a kernel marker calls cuLaunchKernel's with one block of n threads;
    the time returned is perf_counter_ns's, read after the call; a failing call returns minus its
    code; slots run out after eight."""
    shim = Shim(build(tmp_path / "cache"))
    calls: list[tuple[object, ...]] = []
    ended: list[int] = []
    result = [0]

    def memcpy(dst: int, src: int, n: int, kind: int, stream: int) -> int:
        calls.append(("copy", dst, src, n, kind, stream))
        ended.append(time.perf_counter_ns())
        return result[0]

    def launch(
        fn: int, gx: int, gy: int, gz: int, bx: int, by: int, bz: int, shared: int, stream: int, p: int, e: int
    ) -> int:
        calls.append(("kernel", fn, gx, gy, gz, bx, by, bz, shared, stream, p, e))
        ended.append(time.perf_counter_ns())
        return result[0]

    m_fn, l_fn = MEMCPY(memcpy), LAUNCH(launch)
    copy = shim.marker(False, ctypes.cast(m_fn, ctypes.c_void_p).value or 0, 0x1000, 0x2000, 0x3000)
    kernel = shim.marker(True, ctypes.cast(l_fn, ctypes.c_void_p).value or 0, 0x4000, 0, 0x5000)
    got = copy(7)
    assert calls[-1] == ("copy", 0x1000, 0x2000, 7, 1, 0x3000)
    assert ended[-1] <= got <= time.perf_counter_ns()
    got = kernel(200)
    assert calls[-1] == ("kernel", 0x4000, 1, 1, 1, 200, 1, 1, 0, 0x5000, None, None)
    assert ended[-1] <= got <= time.perf_counter_ns()
    result[0] = 700  # cudaErrorIllegalAddress
    assert copy(3) == -700 and kernel(3) == -700
    for _ in range(6):  # 2 of 8 slots taken above
        shim.marker(False, ctypes.cast(m_fn, ctypes.c_void_p).value or 0, 1, 2, 3)
    with pytest.raises(ShimError, match="no marker slot"):
        shim.marker(False, ctypes.cast(m_fn, ctypes.c_void_p).value or 0, 1, 2, 3)
    assert shim.handle.pinprof_mark(8, 1) == -1 and shim.handle.pinprof_mark(-1, 1) == -1
