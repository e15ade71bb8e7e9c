"""Stand-in work for scenarios: busy CPU work to overlap, and GPU work of a chosen length."""

from __future__ import annotations

import time

import torch

from profiler.capture.cuda.events import elapsed_ms


def busy_cpu(ms: float) -> None:
    """Spin the CPU for ``ms`` milliseconds, holding the GIL as Python augmentation code does."""
    if ms <= 0:
        return
    end = time.perf_counter() + ms / 1e3
    while time.perf_counter() < end:
        pass


class GpuWork:
    """A chain of elementwise kernels calibrated to take about ``ms`` of GPU time, fed by the batch.

    The batch enters the result (its mean is added), so the work really depends on the copy.
    Elementwise on purpose, not matrix products: on the H200 with CUDA 13, the first cuBLAS call
    stopped Nsight Systems 2023.4 recording every later CUDA activity (a probe kept 8 of 24 copies
    after one matmul, all 24 after a plain kernel), and ``pinprof nsys`` captures must show the
    whole run. 128 MiB per step (about 60 us on the H200) keeps the launches few.
    """

    def __init__(self, device: torch.device, ms: float, numel: int = 1 << 25) -> None:
        self.device, self.ms, self.iters = device, ms, 0
        if ms <= 0 or device.type != "cuda":
            return
        gen = torch.Generator(device=device).manual_seed(0)
        self.a = torch.rand(numel, device=device, generator=gen)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        scratch = self.a.clone()
        self._chain(scratch, 5)  # warm-up
        start.record()
        self._chain(scratch, 50)
        end.record()
        end.synchronize()
        per = elapsed_ms(start, end) / 50
        self.iters = max(1, round(ms / per))

    @staticmethod
    def _chain(y: torch.Tensor, n: int) -> torch.Tensor:
        for _ in range(n):
            y.sin_()  # in place: read and written once per step, no allocation
        return y

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.iters == 0:
            return x.float().mean()
        y = self.a + x.float().mean()
        return self._chain(y, self.iters).mean()
