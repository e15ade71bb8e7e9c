"""When CUPTI's records start (``profiler.capture.clocks.choice``): before the script under ``pinprof profile``,
and never by surprise after the process's CUDA work began (on the H200 a late start hung a resnet50
loop: ``scripts/cupti_hang.py``). CPU only: CUDA's state and libcupti's loading are stood in for."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from profiler.capture.auto_session import AutoSession
from profiler.capture.clocks import choice as backend
from profiler.drivers import script
from profiler.settings import current

CUDA = torch.device("cuda")


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bool]]:
    """The backend as in a new process with ``PINPROF_BACKEND=cupti``; libcupti's loading stands in
    (it says no library here) and the returned list records, per load, whether CUDA had begun."""
    monkeypatch.setattr(backend, "_recorder", None)
    monkeypatch.setattr(backend, "_tried", False)
    monkeypatch.setattr(backend, "_why", "")
    monkeypatch.setenv("PINPROF_BACKEND", "cupti")
    monkeypatch.delenv("CUDA_INJECTION64_PATH", raising=False)
    current.cache_clear()
    loads: list[bool] = []

    def load(cuda_major: str | None) -> tuple[None, str]:
        loads.append(torch.cuda.is_initialized())
        return None, "libcupti: none here (the test's stand-in)"

    monkeypatch.setattr(backend, "load", load)
    yield loads
    current.cache_clear()


def test_a_first_ask_after_cuda_work_began_gets_the_events_and_says_why(
    fresh: list[bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    assert backend.recorder(CUDA) is None
    assert fresh == []  # CUPTI was not even loaded
    info = backend.describe()
    assert info["backend"] == "events"
    assert info["why"] == backend.LATE
    assert "pinprof profile" in info["why"] and "clocks.choice.start()" in info["why"]
    # Asked again (the next loader's profiler), it stays refused: one clock for the whole run.
    assert backend.recorder(CUDA) is None and fresh == []


def test_a_late_start_on_purpose_is_tried_even_after_a_refusal(
    fresh: list[bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    assert backend.recorder(CUDA) is None
    assert backend.start(CUDA, late_ok=True) is None  # tried: libcupti's stand-in says there is none
    assert fresh == [True]
    assert backend.describe()["why"] == "libcupti: none here (the test's stand-in)"
    backend.start(CUDA, late_ok=True)
    assert fresh == [True]  # once a process: a real refusal is not tried again


def test_a_late_start_on_purpose_is_tried_once_a_torch_profiler_has_stopped(
    fresh: list[bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    """In one pytest process of every GPU test, the first ask for a clock came from a loop run under
    torch.profiler: refused then, CUPTI's own test module found it refused for good (21 GPU tests failed
    on the H100, 2026-12-05). A start on purpose tries again once torch.profiler is off."""
    monkeypatch.setattr(torch.autograd.profiler, "_is_profiler_enabled", True)
    assert backend.recorder(CUDA) is None and fresh == []
    assert backend.describe()["why"] == backend.PROFILER_RUNNING
    assert backend.start(CUDA, late_ok=True) is None and fresh == []  # still running: not tried
    monkeypatch.setattr(torch.autograd.profiler, "_is_profiler_enabled", False)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    assert backend.recorder(CUDA) is None and fresh == []  # by itself, never
    backend.start(CUDA, late_ok=True)
    assert fresh == [True]  # on purpose: tried


def test_a_late_start_on_purpose_is_tried_after_the_events_were_asked_for(
    fresh: list[bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PINPROF_BACKEND", "events")
    current.cache_clear()
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    assert backend.recorder(CUDA) is None and fresh == []
    monkeypatch.setenv("PINPROF_BACKEND", "cupti")  # a test module that asks for CUPTI, after others
    current.cache_clear()
    assert backend.recorder(CUDA) is None and fresh == []  # by itself, never
    backend.start(CUDA, late_ok=True)
    assert fresh == [True]


def test_before_cuda_work_the_records_are_tried(fresh: list[bool], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    backend.recorder(CUDA)
    assert fresh == [False]


def test_events_asked_for_are_never_refused_for_lateness(fresh: list[bool], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PINPROF_BACKEND", "events")
    current.cache_clear()
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    assert backend.recorder(CUDA) is None
    assert "why" not in backend.describe() and fresh == []
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    backend._tried = False
    assert backend.recorder(CUDA) is None and fresh == []  # nor is CUPTI ever tried


def test_by_default_cupti_is_tried_before_cuda_work(fresh: list[bool], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PINPROF_BACKEND")
    current.cache_clear()
    assert current().backend == "auto"
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    backend.recorder(CUDA)
    assert fresh == [False]


@pytest.mark.parametrize("asked", ["auto", "cupti"])
def test_a_late_default_falls_back_quietly_and_cupti_asked_for_says_so(
    fresh: list[bool], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], asked: str
) -> None:
    """With the default, the report and meta.json say which clock timed the run; a user who set
    PINPROF_BACKEND=cupti also gets one line on stderr."""
    monkeypatch.setenv("PINPROF_BACKEND", asked)
    monkeypatch.setattr(backend, "_said", False)
    current.cache_clear()
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    assert backend.recorder(CUDA) is None and fresh == []
    assert backend.describe() == {"backend": "events", "why": backend.LATE}
    backend.say()
    err = capsys.readouterr().err
    assert err == ("" if asked == "auto" else f"pinprof: GPU times from CUDA events, not CUPTI: {backend.LATE}\n")


def test_pinprof_profile_starts_the_records_before_the_scripts_first_line(
    fresh: list[bool], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The script reads, on its first line, whether the backend had been asked already; pinprof profile
    asks before it runs the script, for a session on CUDA."""
    seen = tmp_path / "seen.txt"
    prog = tmp_path / "train.py"
    prog.write_text(
        f"from profiler.capture.clocks import choice as backend\nopen({str(seen)!r}, 'w').write(str(backend._tried))\n",
        encoding="utf-8",
    )
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    session = AutoSession("cpu")
    session.cuda, session.device = True, CUDA  # a CUDA run, as far as the start is concerned
    code, why, _ = script.run_profiled(script.parse_target([sys.executable, str(prog)]), session)
    assert (code, why) == (0, None)
    assert seen.read_text(encoding="utf-8") == "True"
    assert fresh == [False]  # tried once, before the script, with no CUDA work begun


def test_on_the_cpu_pinprof_profile_leaves_the_backend_alone(fresh: list[bool], tmp_path: Path) -> None:
    prog = tmp_path / "train.py"
    prog.write_text("x = 1\n", encoding="utf-8")
    code, _, _ = script.run_profiled(script.parse_target([str(prog)]), AutoSession("cpu"))
    assert code == 0 and not backend._tried and fresh == []
