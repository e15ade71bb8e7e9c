"""The NVTX emitter (profiler.capture.nvtx) against the nvtx package's real low-level handles."""

from __future__ import annotations

from typing import Any

import pytest

from profiler.capture.nvtx import COLORS, NvtxEmitter

lib = pytest.importorskip("nvtx._lib").lib
PHASES = [p for p in COLORS if p != "batch"]


def test_phase_names_are_registered_before_the_loop_not_inside_a_phase(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under nsys a string registration cost 10-100 us (2.6 ms on a loaded CPU); made at a phase's
    first push, it landed inside that phase's clock window and was counted as the user's time."""
    registered: list[str] = []
    real = lib.StringHandle

    def counting(domain: Any, text: str) -> Any:
        registered.append(text)
        return real(domain, text)

    monkeypatch.setattr(lib, "StringHandle", counting)
    emitter = NvtxEmitter(backend="nvtx")
    assert emitter.backend == "nvtx"
    assert sorted(registered) == sorted(PHASES)
    registered.clear()
    for _ in range(3):
        for phase in PHASES:
            emitter.push(phase)
            emitter.pop()
    assert registered == []  # every phase push: a cache hit
    emitter.push("batch 0")  # batch names are unique per batch: registered as they come, not cached
    emitter.pop()
    emitter.push("batch 0")
    emitter.pop()
    assert registered == ["batch 0", "batch 0"]
