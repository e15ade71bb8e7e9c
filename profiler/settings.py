"""Every environment variable pinprof reads, read in this one place.

| variable | default | effect |
|---|---|---|
| ``PINPROF_GATE`` | on | ``0``: copies from pinned memory are not held behind a stream gate |
| ``PINPROF_HAZARDS`` | off | ``1``: watch the loop for ``non_blocking`` races (``TransferProfiler(hazards=None)``) |
| ``PINPROF_NVTX`` | off | ``1``: emit NVTX ranges even when no tool is attached |
| ``PINPROF_ELAPSED`` | | ``torch``: read events through torch under a CUDA tool too |
| ``PINPROF_CACHE`` | ``~/.cache/pinprof`` | folder of the bandwidth calibration cache |
| ``PINPROF_NSYS`` | | the ``nsys`` binary, or a folder holding it, when none is on PATH |
| ``PINPROF_BACKEND`` | ``auto`` | what times the GPU: ``auto`` (CUPTI's activity records where they can start before the process's CUDA work, CUDA events otherwise; ``meta.json`` says which and why), ``events`` (CUDA events), ``cupti`` (as ``auto``, and a fall-back to events is said in one line on stderr): ``profiler.capture.clocks.choice`` |
| ``PINPROF_KERNELS`` | ``0`` | when CUPTI times the GPU: ``1`` (or ``pinprof profile --kernels``), its kernel records too, so a row's ``compute_ms`` is its step's kernels' busy time and the report can tell the GPU's waits between launches; each launch then pays for its record in the driver (about 1.2 us: 4% of a short step on an H100, ``reports/README.md``). ``0``: CUPTI records the copies alone and CUDA events time the step (``profiler.capture.clocks``) |
| ``PINPROF_CUPTI_FLUSH_MS`` | ``500`` | when CUPTI times the GPU: CUPTI's own flush period, ms (``0``: buffers come back when full and at the end) |
| ``PINPROF_CUPTI_LATENCY`` | ``0`` | when CUPTI's kernel records are on (``1`` turns them on), what places each kernel in its batch's step: ``0``, markers (an empty kernel or a tiny copy at each step window's edge, ``profiler.capture.clocks.cupti.marker``); ``1``, kernels' launch times in CUPTI's records, which took part in a driver deadlock in every run of the resnet50 benchmark on an H100 (``profiler.capture.clocks.choice``) |
| ``PINPROF_MARKER`` | ``copy`` | when markers place kernels: ``copy``, a copy of a few bytes from pinned memory at each edge, on a stream of pinprof's own; ``kernel``, an empty kernel instead (``profiler.capture.clocks.cupti.marker``) |
| ``PINPROF_CUPTI_LIB`` | | the libcupti to load, when torch's own cannot be found (``profiler.capture.clocks.cupti.lib``) |
| ``PINPROF_TUNE`` | | set by ``pinprof tune`` for each trial: a JSON object of the settings the trial changes (``profiler.capture.knobs``) |
| ``PINPROF_TUNE_STOP`` | | set by ``pinprof tune``: the trial stops once this many batches are recorded |
| ``PINPROF_STALL_S`` | ``120`` | ``pinprof profile``: seconds with no new batch inside a loader's loop, the loop's thread blocked, before one line on stderr says so and what to do (``profiler.capture.stall``); ``0``: never |
| ``PINPROF_FLUSH_S`` | ``2`` | seconds between appends of completed batches to ``timeline.csv`` during ``pinprof run`` and ``pinprof profile``, from a thread of pinprof's own (``profiler.capture.rows.JournalWriter``), which hands them to a process that builds and writes them (``profiler.report.journal_process``) |

Read, not set, by pinprof: ``NVTX_INJECTION64_PATH`` (an NVTX tool is attached),
``CUDA_INJECTION64_PATH`` (a CUDA tool such as Nsight Systems is attached), and torchrun's ``RANK``,
``LOCAL_RANK``, ``WORLD_SIZE``.

``current()`` reads them once per process, at first use; ``load()`` reads them afresh (tests).
Imports only the standard library.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path


@dataclass(frozen=True)
class Settings:
    """pinprof's view of the environment (see the module docstring for each variable)."""

    gate: bool
    hazards: bool
    nvtx_forced: bool
    nvtx_tool: bool
    cuda_tool: bool
    elapsed: str
    cache_dir: Path
    nsys: str | None
    flush_s: float
    flush_fixed: bool  # PINPROF_FLUSH_S was given: keep that interval exactly
    backend: str
    cupti_flush_ms: int  # CUPTI's own flush period; 0: none
    cupti_latency: bool  # kernels' launch times in CUPTI's records
    kernels: bool  # CUPTI's kernel records on: the step timed by its kernels, not by CUDA events
    marker: str  # what marks a step window's edge for CUPTI: "copy" (a tiny one) or "kernel" (an empty one)
    cupti_queues: str  # "thread": a queue of CUPTI's buffers a launching thread (CUPTI's default); "process": one
    stall_s: float  # pinprof profile: seconds without a batch, the loop's thread blocked, before saying so; 0: never
    tune: str  # PINPROF_TUNE: a trial's changes, JSON ("" outside pinprof tune)
    tune_stop: int  # PINPROF_TUNE_STOP: batches after which the trial stops; 0: never
    rank: int
    local_rank: int
    world_size: int

    @property
    def nvtx_wanted(self) -> bool:
        """Whether NVTX calls are worth making: a tool listens, or the user forced them."""
        return self.nvtx_tool or self.nvtx_forced


def _int(env: Mapping[str, str], name: str, default: int) -> int:
    text = env.get(name, "").strip()
    try:
        return int(text) if text else default
    except ValueError:
        from profiler.errors import UsageError

        raise UsageError(f"${name}={text!r} is not an integer; torchrun sets it, or unset it") from None


def _seconds(env: Mapping[str, str], name: str, default: float) -> float:
    text = env.get(name, "").strip()
    try:
        value = float(text) if text else default
    except ValueError:
        value = -1.0
    if not 0 < value < 86400:  # nan fails this too
        from profiler.errors import UsageError

        raise UsageError(f"${name}={text!r}: give seconds, more than 0 and less than 86400 (default {default:g})")
    return value


def _nonneg(env: Mapping[str, str], name: str, default: int, ask: str) -> int:
    """A whole number 0 or more; ``ask``: what the error asks for instead of a bad value."""
    text = env.get(name, "").strip()
    try:
        value = int(text) if text else default
    except ValueError:
        value = -1
    if value < 0:
        from profiler.errors import UsageError

        raise UsageError(f"${name}={text!r}: {ask}")
    return value


def _stall(env: Mapping[str, str]) -> float:
    text = env.get("PINPROF_STALL_S", "").strip()
    try:
        value = float(text) if text else 120.0
    except ValueError:
        value = -1.0
    if not 0 <= value < 86400:  # nan fails this too
        from profiler.errors import UsageError

        raise UsageError(
            f"$PINPROF_STALL_S={text!r}: give seconds, 0 (never say) or more, less than 86400 (default 120)"
        )
    return value


def _millis(env: Mapping[str, str], name: str, default: int) -> int:
    return _nonneg(env, name, default, f"give whole milliseconds, 0 or more (default {default})")


def _count(env: Mapping[str, str], name: str) -> int:
    return _nonneg(env, name, 0, "give a whole number of batches, 0 or more (0: no limit)")


BACKENDS = ("auto", "events", "cupti")


def _backend(env: Mapping[str, str]) -> str:
    text = env.get("PINPROF_BACKEND", "").strip().lower() or "auto"
    if text not in BACKENDS:
        from profiler.errors import UsageError

        raise UsageError(f"$PINPROF_BACKEND={text!r}: give one of {', '.join(BACKENDS)} (default auto)")
    return text


def _switch(env: Mapping[str, str], name: str, on: str, off: str) -> bool:
    """A ``0``/``1`` variable (unset: 0); ``on``, ``off``: what each means, for the error's line."""
    text = env.get(name, "").strip()
    if text not in ("", "0", "1"):
        from profiler.errors import UsageError

        raise UsageError(f"${name}={text!r}: give 1 ({on}) or 0 ({off}, the default)")
    return text == "1"


def _latency(env: Mapping[str, str]) -> bool:
    return _switch(env, "PINPROF_CUPTI_LATENCY", "kernels placed by their launch times", "by markers")


def _kernels(env: Mapping[str, str]) -> bool:
    return _switch(env, "PINPROF_KERNELS", "CUPTI's kernel records time the step", "CUDA events do")


def _marker(env: Mapping[str, str]) -> str:
    text = env.get("PINPROF_MARKER", "").strip().lower() or "copy"
    if text not in ("kernel", "copy"):
        from profiler.errors import UsageError

        raise UsageError(f"$PINPROF_MARKER={text!r}: give copy (the default) or kernel")
    return text


def _queues(env: Mapping[str, str]) -> str:
    text = env.get("PINPROF_CUPTI_QUEUES", "").strip().lower() or "thread"
    if text not in ("process", "thread"):
        from profiler.errors import UsageError

        raise UsageError(f"$PINPROF_CUPTI_QUEUES={text!r}: give thread (the default) or process")
    return text


def _ranks(env: Mapping[str, str]) -> tuple[int, int, int]:
    """(RANK, LOCAL_RANK, WORLD_SIZE), checked: torchrun sets 0 <= RANK < WORLD_SIZE."""
    rank, local, world = _int(env, "RANK", 0), _int(env, "LOCAL_RANK", 0), _int(env, "WORLD_SIZE", 1)
    from profiler.errors import UsageError

    if world < 1:
        raise UsageError(f"$WORLD_SIZE={world}: a job has at least 1 process; torchrun sets it, or unset it")
    if not 0 <= rank < world:
        raise UsageError(f"$RANK={rank} with $WORLD_SIZE={world}: a rank is 0 to WORLD_SIZE-1; torchrun sets both")
    if not 0 <= local < world:
        raise UsageError(f"$LOCAL_RANK={local} with $WORLD_SIZE={world}: 0 to WORLD_SIZE-1; torchrun sets it")
    return rank, local, world


def load(env: Mapping[str, str] | None = None) -> Settings:
    """The settings as the environment says now."""
    env = os.environ if env is None else env
    rank, local_rank, world_size = _ranks(env)
    cache = env.get("PINPROF_CACHE", "").strip()  # empty means the default folder
    return Settings(
        gate=env.get("PINPROF_GATE", "").strip() != "0",
        hazards=env.get("PINPROF_HAZARDS", "").strip() == "1",
        nvtx_forced=env.get("PINPROF_NVTX", "") == "1",
        nvtx_tool=bool(env.get("NVTX_INJECTION64_PATH")),
        cuda_tool=bool(env.get("CUDA_INJECTION64_PATH")),
        elapsed=env.get("PINPROF_ELAPSED", ""),
        cache_dir=Path(cache) if cache else Path.home() / ".cache" / "pinprof",
        nsys=env.get("PINPROF_NSYS") or None,
        flush_s=_seconds(env, "PINPROF_FLUSH_S", 2.0),
        flush_fixed=bool(env.get("PINPROF_FLUSH_S", "").strip()),
        backend=_backend(env),
        cupti_flush_ms=_millis(env, "PINPROF_CUPTI_FLUSH_MS", 500),
        stall_s=_stall(env),
        tune=env.get("PINPROF_TUNE", "").strip(),
        tune_stop=_count(env, "PINPROF_TUNE_STOP"),
        cupti_latency=_latency(env),
        kernels=_kernels(env) or _latency(env),  # launch times are kernel records' fields
        marker=_marker(env),
        cupti_queues=_queues(env),
        rank=rank,
        local_rank=local_rank,
        world_size=world_size,
    )


@lru_cache(maxsize=1)
def current() -> Settings:
    """The settings of this process, read once."""
    return load()
