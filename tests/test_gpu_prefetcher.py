"""``profiler.prefetch`` on a real GPU: bit-exact over thousands of batches while the allocator reuses
memory, and the copy ahead runs on its side stream. Run: pytest -m gpu (scripts/gpu_check.sh)."""

from __future__ import annotations

import pytest
import torch

from profiler import prefetch

pytestmark = pytest.mark.gpu


def test_bit_exact_over_thousands_of_batches_with_memory_reused() -> None:
    """Each batch is checked on the GPU against its own seed, after a step that frees and allocates
    device memory of the batch's size (so a destination still being read would be handed out), and
    the host's pinned source is overwritten as soon as the next batch is made (a copy read late would
    see the next batch's bytes)."""
    n, size = 3000, (64, 1024)
    src = [torch.empty(size, pin_memory=True) for _ in range(3)]  # sources reused in turn

    def batches():
        for i in range(n):
            buf = src[i % 3]
            buf.copy_(torch.full(size, float(i)))  # a pageable batch copied into a reused pinned buffer
            yield {"x": buf, "i": torch.tensor(i)}

    wrong = torch.zeros((), device="cuda", dtype=torch.int64)
    seen = 0
    for batch in prefetch(batches(), "cuda"):
        x, i = batch["x"], int(batch["i"])
        scratch = torch.empty_like(x).fill_(-1.0)  # a block of the batch's size taken and freed each step
        wrong += (x != float(i)).sum() + (scratch == x).all().long()
        del scratch
        seen += 1
    torch.cuda.synchronize()
    assert seen == n
    assert int(wrong) == 0
