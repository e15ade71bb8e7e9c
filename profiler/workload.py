"""Stand-in work for scenarios: busy CPU work to overlap, and GPU work of a chosen length."""
from __future__ import annotations

import time

import torch

from .clock import elapsed_ms


def busy_cpu(ms: float) -> None:
    """Spin the CPU for ``ms`` milliseconds, holding the GIL as Python augmentation code does."""
    if ms <= 0:
        return
    end = time.perf_counter() + ms / 1e3
    while time.perf_counter() < end:
        pass


class GpuWork:
    """A chain of matrix products calibrated to take about ``ms`` of GPU time, fed by the batch.

    The batch enters the result (its mean is added), so the work really depends on the copy.
    """

    def __init__(self, device: torch.device, ms: float, side: int = 2048) -> None:
        self.device, self.ms, self.iters = device, ms, 0
        if ms <= 0 or device.type != "cuda":
            return
        gen = torch.Generator(device=device).manual_seed(0)
        self.a = torch.randn(side, side, device=device, generator=gen) / side**0.5
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        y = self.a
        for _ in range(3):  # warm-up: cuBLAS handle and kernel selection
            y = self.a @ y
        start.record()
        for _ in range(20):
            y = self.a @ y
        end.record()
        end.synchronize()
        per = elapsed_ms(start, end) / 20
        self.iters = max(1, round(ms / per))

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.iters == 0:
            return x.float().mean()
        y = self.a + x.float().mean()
        for _ in range(self.iters):
            y = self.a @ y
        return y.mean()
