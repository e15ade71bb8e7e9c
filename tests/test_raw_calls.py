"""CPU checks of the two raw CUDA paths' decisions (the calls themselves: tests/test_gpu_events.py)."""

from __future__ import annotations

import pytest
import torch

from profiler.capture.cuda import cudart
from profiler.capture.cuda import events as clock


def _dst(src: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(src)  # stands in for the device tensor: only its layout and dtype matter


@pytest.mark.parametrize(
    "src, ok",
    [
        (torch.arange(12, dtype=torch.float32), True),
        (torch.arange(12).reshape(3, 4)[:, :2], False),  # a view that is not one block of bytes
        (torch.arange(12).reshape(3, 4).t(), False),  # transposed: empty_like keeps the strides, but not contiguous
        (torch.ones(3, dtype=torch.complex64).conj(), False),  # a lazy conjugate: memcpy would drop it
        (torch.ones(3).neg().neg()._neg_view(), False),  # a lazy negation
        (torch.empty(0), False),  # nothing to copy
    ],
)
def test_direct_copy_only_for_one_plain_block(src: torch.Tensor, ok: bool) -> None:
    assert cudart.direct_copy_ok(_dst(src), src) is ok


def test_direct_copy_needs_the_same_dtype() -> None:
    src = torch.ones(4, dtype=torch.float16)
    assert not cudart.direct_copy_ok(torch.empty(4, dtype=torch.float32), src)


def test_event_reads_use_the_v1_entry_point_only_under_a_cuda_tool(monkeypatch: pytest.MonkeyPatch) -> None:
    torch_read = torch._C._CudaEventBase.elapsed_time

    def v1(a: object, b: object) -> float:
        return 0.0

    monkeypatch.setattr(clock, "_driver_elapsed_v1", lambda: v1)
    monkeypatch.delenv("CUDA_INJECTION64_PATH", raising=False)
    assert clock._pick_elapsed() is torch_read
    monkeypatch.setenv("CUDA_INJECTION64_PATH", "/opt/nsys/libToolsInjection64.so")
    assert clock._pick_elapsed() is v1
    monkeypatch.setenv("PINPROF_ELAPSED", "torch")  # the way back, should the driver call misbehave
    assert clock._pick_elapsed() is torch_read
    monkeypatch.delenv("PINPROF_ELAPSED")
    monkeypatch.setattr(clock, "_driver_elapsed_v1", lambda: None)  # no libcuda: torch's read
    assert clock._pick_elapsed() is torch_read
