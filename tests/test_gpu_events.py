"""The two raw CUDA calls pinprof makes itself, on a real GPU. Run: pytest -m gpu."""

from __future__ import annotations

import pytest
import torch

from profiler.capture.cuda import cudart
from profiler.capture.cuda import events as clock

pytestmark = pytest.mark.gpu


def test_driver_v1_elapsed_time_reads_what_torch_reads() -> None:
    """The entry point used under Nsight Systems must give torch's figure, to the float."""
    v1 = clock._driver_elapsed_v1()
    assert v1 is not None, "libcuda.so.1 has no cuEventElapsedTime"
    events = [torch.cuda.Event(enable_timing=True) for _ in range(5)]
    x = torch.randn(2048, 2048, device="cuda")
    for ev in events:
        ev.record()
        for _ in range(3):
            x = x @ x / 2048**0.5  # work between the events, so the spans differ
    torch.cuda.synchronize()
    pairs = [(events[0], e) for e in events[1:]] + [(events[1], events[3])]
    ours = [v1(a, b) for a, b in pairs]
    theirs = [a.elapsed_time(b) for a, b in pairs]
    print("cuEventElapsedTime:", ours, "torch:", theirs)
    assert ours == pytest.approx(theirs, rel=0, abs=1e-6)
    assert all(t > 0 for t in theirs)
    with pytest.raises(RuntimeError, match="cuEventElapsedTime"):
        v1(events[0], torch.cuda.Event(enable_timing=True))  # never recorded


@pytest.mark.parametrize("n", [1, 4097, (3 << 20) + 5])
def test_direct_pageable_copy_is_exact(n: int) -> None:
    rt = cudart.runtime()
    assert rt is not None, "torch's libcudart was not found in /proc/self/maps"
    gen = torch.Generator().manual_seed(n)
    src = torch.randint(-(2**31), 2**31 - 1, (n,), dtype=torch.int32, generator=gen)
    dst = torch.empty_like(src, device="cuda")
    assert cudart.direct_copy_ok(dst, src)
    stream = torch.cuda.current_stream()
    assert cudart.copy_pageable(rt, dst, src, stream)
    torch.cuda.synchronize()
    assert torch.equal(dst.cpu(), src)
    # What it must not take: views that are not one block of bytes, and conjugate views.
    assert not cudart.direct_copy_ok(torch.empty(2, 2, device="cuda"), torch.ones(2, 4)[:, ::2])
    assert not cudart.direct_copy_ok(
        torch.empty(3, dtype=torch.complex64, device="cuda"), torch.ones(3, dtype=torch.complex64).conj()
    )
