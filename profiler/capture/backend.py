"""Which clock times the GPU: CUPTI's activity records where they can be had, CUDA events otherwise.

CUPTI is exact (each record is the copy or kernel as the device ran it; an event pair around a host
call also times the host's dispatch: 0.164 ms against CUPTI's 0.0155 ms for the blocking copies of an
Accelerate batch on the H200), and cheaper on the host: no events to record, no stream gate, nothing
to read per batch (on the H200, ``scripts/bench_overhead.py --backends``: 18.2 against
46.1 us a batch of one tensor, 26.7 against 45.6 us for three). ``PINPROF_BACKEND`` picks: ``auto`` (the
default) and ``cupti`` use CUPTI where they can, ``events`` never does; ``cupti`` also says in one
line on stderr when the events time the run instead. ``describe`` gives ``meta.json`` the clock and
why.

When the records start matters. On the H200 (2026-12-04, ``scripts/cupti_hang.py``), the resnet50
bench (``scripts/bench_profile_overhead.py --cupti``, 12 loader workers) hung every time its records
started after its 40-step warm-up (handed back for a bare block, taken again for the first profiled
one): the autograd engine's thread waited for a driver lock in ``cuLaunchKernelEx`` (cuBLASLt under
cuDNN's weight gradient), every other thread idle. It hung the same with no periodic flush, with the recorder's thread making no CUPTI call,
with no stream gate, and with eager module loading. Started once the model was built, before the
warm-up's first step, the same bench ran to its end (109,434 kernel records; its loader's workers
started after the records), and started before the process's first CUDA work it ran again (2026-12-04,
4 pairs of blocks). So the records start as early as pinprof can start
them: ``pinprof profile`` starts them before the script runs (``start``); a ``TransferProfiler``
created after the process's CUDA work began gets the events instead, and the report says why, unless
the caller started CUPTI on purpose (``start(device, late_ok=True)``).

CUPTI falls back to the events, and the report says why, where:

- the process's CUDA work had begun when the records were first asked for (above);
- a CUDA tool is attached (``CUDA_INJECTION64_PATH``: Nsight Systems, whose CUPTI client refuses a
  second one), or torch.profiler is running (enabling records under Kineto hung the process on the
  H200);
- libcupti cannot be loaded, or refuses to start, or no C compiler builds the shim;
- torch.profiler runs for a while in the middle of the run: the recorder hands over
  (``CuptiRecorder.release``), and the batches from then on, to the end of the run, are timed with
  events. CUPTI is not taken back when the profile ends: that would enable the records again in a
  process whose CUDA work runs, which is what a late first start does, and on the H200 (2026-12-04)
  the resnet50 bench, handing its records over and taking them back between blocks of 40 steps, hung
  in each of its four runs of 8 rounds or more (one queue or a queue a thread, callbacks registered
  again or not; 4 rounds ran), the autograd thread's launch waiting as in the late starts.

What the hang is (an H100, 2026-12-05, ``scripts/cupti_hang.py``; reports/README.md, "The CUPTI
hang"): every thread's native stack
shows a deadlock in the driver. A kernel launch waits to take a driver lock for writing, and a
thread of CUPTI's own waits to take one for reading (in one run a pinned allocation,
``cuMemHostAlloc``, waited to write too). It came
in every run with kernels' launch times on (``cuptiActivityEnableLatencyTimestamps``), however the
records were started or handed over, and in none of three runs without them
(``PINPROF_CUPTI_LATENCY=0``), the late start and the handovers included. So by default they are
not asked for: markers find each kernel's step (``profiler.capture.cupti.marker``); with
``PINPROF_CUPTI_LATENCY=1`` they are, and ``pinprof profile`` says when its loop is blocked
(``profiler.capture.stall``).
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import torch

from profiler.capture.cupti.lib import CuptiCallError, load
from profiler.capture.cupti.recorder import CuptiRecorder
from profiler.capture.cupti.shim import Shim, ShimError, build
from profiler.settings import current

_recorder: CuptiRecorder | None = None
_tried = False
_why = ""
_said = False


LATE = (
    "pinprof's GPU clock was first asked for after this process's CUDA work had begun; CUPTI's records "
    "started that late hung a resnet50 training loop on the H200, so CUDA events time this run. Run the "
    "script under pinprof profile, which starts them before the script, or call "
    "profiler.capture.backend.start() before the first CUDA work"
)

PROFILER_RUNNING = "torch.profiler is running: its Kineto holds CUPTI"

HANDED_OVER = (
    "torch.profiler ran: CUPTI was handed to it, and the batches from then on are timed with CUDA events "
    "(taking CUPTI back while the process's CUDA work runs hung a resnet50 training loop on the H200)"
)


def recorder(device: torch.device) -> CuptiRecorder | None:
    """The process's CUPTI recorder, started on first use unless CUDA work has begun (see the module's
    docstring); None where the events time the GPU."""
    return start(device)


def edge_ms(device: torch.device) -> float | None:
    """A step window's edge now, as a marker where CUPTI's records place kernels by markers
    (``CuptiRecorder.mark``): its host time in ms; None elsewhere (the caller reads the clock)."""
    rec = _recorder
    return rec.mark(device) if rec is not None else None


def start(device: torch.device, *, late_ok: bool = False) -> CuptiRecorder | None:
    """Start CUPTI's records now, unless ``PINPROF_BACKEND=events`` (once a process: later calls
    return the same recorder). ``late_ok``: start even though CUDA work has begun (a test or a
    script that starts late on purpose)."""
    global _recorder, _tried, _why
    if device.type != "cuda":
        return None
    # A caller that starts late on purpose may after a refusal that no longer holds: lateness, a
    # torch.profiler that has stopped since, or the events asked for then (a test module that asks for
    # CUPTI after others that timed by events, in one pytest process). A real failure is not tried again.
    if not _tried or (late_ok and _recorder is None and _why in ("", LATE, PROFILER_RUNNING)):
        _tried = True
        _recorder, _why = _start(late_ok)
    return _recorder  # it may be handed over now and then (``active``): callers ask per batch


def _start(late_ok: bool) -> tuple[CuptiRecorder | None, str]:
    s = current()
    if s.backend == "events":
        return None, ""  # asked for: nothing to say
    if s.cuda_tool:
        return None, "a CUDA tool is attached (Nsight Systems, or another CUPTI client): CUPTI's records are its"
    if torch.autograd.profiler._is_profiler_enabled:
        return None, PROFILER_RUNNING
    if not late_ok and torch.cuda.is_initialized():
        return None, LATE
    cuda = torch.version.cuda
    lib, why = load(cuda.split(".")[0] if cuda else None)
    if lib is None:
        return None, why
    try:
        shim = Shim(build(current().cache_dir))
    except (ShimError, OSError, subprocess.SubprocessError) as err:
        return None, str(err)
    rec = CuptiRecorder(lib, shim)
    try:
        rec.start()
    except CuptiCallError as err:
        return None, str(err)
    _watch_torch_profiler()
    return rec, ""


def _watch_torch_profiler() -> None:
    """torch.profiler (and ``torch.autograd.profiler.profile``) prepare Kineto in ``_prepare_trace``:
    CUPTI is handed over just before, for the rest of the run (not taken back: see the module's
    docstring)."""
    profile = torch.autograd.profiler.profile
    prepare = profile._prepare_trace
    if getattr(prepare, "_pinprof", False):
        return

    def _prepare_trace(self: Any) -> Any:
        rec = _recorder
        if rec is not None and rec.active:
            rec.release(HANDED_OVER)
        return prepare(self)

    _prepare_trace._pinprof = True  # type: ignore[attr-defined]
    profile._prepare_trace = _prepare_trace  # type: ignore[method-assign]


def take_back() -> bool:
    """CUPTI's records again after torch.profiler had them: for a test or a benchmark that alternates
    the two on purpose, in a loop known not to hang so; a profiled run never calls it (the module's
    docstring). False where no recorder was handed over, or CUPTI refuses."""
    rec = _recorder
    if rec is None or rec.active or rec.why_not != HANDED_OVER:
        return False
    if not rec.resume():
        return False
    rec.why_not = ""  # CUPTI's again: the line no longer holds
    return True


def describe() -> dict[str, Any]:
    """For ``meta.json``: which clock timed the GPU, why not CUPTI where it did not, what CUPTI saw."""
    if not _tried:
        return {"backend": "events" if torch.cuda.is_available() else "none"}
    rec = _recorder
    if rec is None:
        return {"backend": "events", **({"why": _why} if _why else {})}
    info: dict[str, Any] = {"backend": "cupti" if rec.active else "cupti+events", **rec.summary()}
    if rec.why_not:
        info["why"] = rec.why_not
    return info


def say(echo: Any = None) -> None:
    """One line on stderr, once, when ``PINPROF_BACKEND=cupti`` asked for CUPTI and the events timed the
    GPU instead (with ``auto``, ``meta.json`` and the report say it)."""
    global _said
    info = describe()
    why = info.get("why")
    if _said or not why or current().backend != "cupti":
        return
    _said = True
    line = f"pinprof: GPU times from CUDA events, not CUPTI: {why}"
    (echo or (lambda m: print(m, file=sys.stderr)))(line)
