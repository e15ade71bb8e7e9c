"""The one place the GPU clock is chosen: CUPTI's activity records where they can be had, CUDA events
otherwise, and the host's clock with no GPU (``profiler.capture.clocks``).

CUPTI is exact (each record is the copy or kernel as the device ran it, where an event pair around a
call also times the host's dispatch) and puts nothing around the user's copies. ``PINPROF_BACKEND``
picks: ``auto`` (the default) and ``cupti`` use CUPTI where they can, ``events`` never does; ``cupti``
also says in one line on stderr when the events time the run instead (``say``). ``describe`` gives
``meta.json`` the clock and why.

The records start before the process's CUDA work or not at all: started late, or taken back after
torch.profiler had them, they hung a resnet50 training loop in the driver (``profiler/DESIGN.md``,
"CUPTI's buffers in C"; ``reports/README.md``, "The CUPTI hang"). So ``pinprof profile`` starts them
before the script runs (``start``), and the events time the run, with the reason in the report, where:

- the process's CUDA work had begun when the records were first asked for (unless the caller starts
  late on purpose: ``start(device, late_ok=True)``);
- a CUDA tool is attached (Nsight Systems' CUPTI client refuses a second one), or torch.profiler runs;
- libcupti cannot be loaded or refuses to start, or no C compiler builds the shim;
- torch.profiler starts during the run: the recorder hands over (``CuptiRecorder.release``), and the
  batches from then on, to the run's end, are timed with events (only a test takes CUPTI back:
  ``take_back``).

CUPTI records the copies alone unless ``PINPROF_KERNELS=1`` asks for its kernel records too
(``by_cupti_copies``: each kernel record costs its launch in the driver). With them, kernels' launch
times (``PINPROF_CUPTI_LATENCY=1``) took part in every such hang, so by default markers place each
kernel in its step (``profiler.capture.clocks.cupti.marker``).
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import torch

from profiler.capture.clocks.by_cupti import CuptiClock
from profiler.capture.clocks.by_cupti_copies import CuptiCopiesClock
from profiler.capture.clocks.by_events import EventsClock
from profiler.capture.clocks.by_host import HostClock
from profiler.capture.clocks.cupti.lib import CuptiCallError, load
from profiler.capture.clocks.cupti.recorder import CuptiRecorder
from profiler.capture.clocks.cupti.shim import Shim, ShimError, build
from profiler.capture.clocks.gpu_clock import GpuClock
from profiler.settings import current

_recorder: CuptiRecorder | None = None
_tried = False
_why = ""
_said = False


LATE = (
    "pinprof's GPU clock was first asked for after this process's CUDA work had begun; CUPTI's records "
    "started that late hung a resnet50 training loop on the H200, so CUDA events time this run. Run the "
    "script under pinprof profile, which starts them before the script, or call "
    "profiler.capture.clocks.choice.start() before the first CUDA work"
)

PROFILER_RUNNING = "torch.profiler is running: its Kineto holds CUPTI"

HANDED_OVER = (
    "torch.profiler ran: CUPTI was handed to it, and the batches from then on are timed with CUDA events "
    "(taking CUPTI back while the process's CUDA work runs hung a resnet50 training loop on the H200)"
)


class Clocks:
    """A profiler's GPU clocks: CUPTI's where its records run (``recorder``), and the events (the host's
    clock with no GPU) for the batches CUPTI does not time. Each batch is given one and keeps it."""

    def __init__(self, cuda: bool, recorder: CuptiRecorder | None) -> None:
        self.recorder = recorder
        self.cupti = CuptiClock(recorder) if recorder is not None else None
        self.copies = CuptiCopiesClock(recorder) if recorder is not None else None
        self.fallback: GpuClock = EventsClock() if cuda else HostClock()

    def for_new_batch(self) -> GpuClock:
        """The clock of a batch fetched now: CUPTI's while its records are this process's, its kernel
        records too where they are on (``PINPROF_KERNELS=1``), else its copies alone."""
        r = self.recorder
        if r is None or not r.active:
            return self.fallback
        return self.cupti if r.kernels else self.copies  # type: ignore[return-value]

    def of(self, rec: dict[str, Any]) -> GpuClock:
        """The clock of batch ``rec``, given at its first ask (``TransferProfiler``'s loop asks at its
        first copy, compute or commit): CUPTI's while its records run, unless a copy of the batch was
        timed by events already (the staged pipeline keeps its own)."""
        c: GpuClock | None = rec.get("_clock")
        if c is None:
            c = rec["_clock"] = self.fallback if "_h2d" in rec else self.for_new_batch()
        return c

    def collect(self, device: torch.device, synced: bool, force: bool = False) -> None:
        """Bring the profiler's store up to date with CUPTI's records handed back so far (``force``:
        with every record so far, after a synchronize, which is made here unless ``synced``)."""
        if self.recorder is None:
            return
        if force and not synced:
            torch.cuda.synchronize(device)
        self.recorder.collect(force=force)


def clocks_for(device: torch.device, gpu_clock: str) -> Clocks:
    """A profiler's clocks on ``device``: CUPTI's records where ``gpu_clock`` is ``auto`` and they can
    be had (``start``), the events otherwise."""
    return Clocks(device.type == "cuda", recorder(device) if gpu_clock == "auto" else None)


def launch_times() -> bool:
    """Whether CUPTI's records place kernels by their launch times (``PINPROF_CUPTI_LATENCY=1``)."""
    rec = _recorder
    return rec is not None and rec.active and current().cupti_latency


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
