"""The one-ahead check of ``pinprof profile`` (``profiler.capture.one_ahead``) on batches it cannot trace."""

from __future__ import annotations

import torch

from profiler.capture import auto_hooks
from profiler.capture.auto_session import AutoSession


def test_a_batch_with_a_sparse_tensor_is_recorded_and_profiling_goes_on() -> None:
    """A sparse tensor has no plain storage for the one-ahead check to read: it must not stop profiling."""

    class Rows(torch.utils.data.Dataset[torch.Tensor]):
        def __len__(self) -> int:
            return 16

        def __getitem__(self, i: int) -> torch.Tensor:
            return torch.rand(4, generator=torch.Generator().manual_seed(i))

    def collate(xs: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.stack(xs)
        return x, x.to_sparse()

    session = AutoSession("cpu", nvtx=False)
    auto_hooks.start(session)
    try:
        for x, sparse in torch.utils.data.DataLoader(Rows(), batch_size=4, collate_fn=collate):
            x.to("cpu"), sparse.to("cpu")
    finally:
        auto_hooks.stop()
    assert auto_hooks.failure is None
    tl = session.close()
    assert len(tl) == 4 and (tl.copies == 2).all() and session.lagging == []


def test_a_loop_is_checked_for_its_first_batches_only() -> None:
    """One ahead shows from a loader's second batch, and a loop's order is the same in every batch:
    past ``LOOKS`` batches no batch is walked, and a loop that is one ahead is still found."""
    from profiler.capture.one_ahead import LOOKS, OneAhead

    ahead = OneAhead()
    batches = [torch.full((4,), float(i)) for i in range(LOOKS + 5)]
    walked = []
    for b in batches:  # a plain loop: each batch copied while it is the current one
        rec: dict = {}
        ahead.arrived("plain", rec, b)
        walked.append("_owners" in rec)
        ahead.copied(1, "plain", rec, b)
        ahead.ended(1, rec)
    assert ahead.found == []
    assert walked == [True] * LOOKS + [False] * 5
    prev = None
    for b in batches[:3]:  # a loop one ahead: the copy reads the previous batch
        rec = {}
        ahead.arrived("ahead", rec, b)
        if prev is not None:
            ahead.copied(2, "ahead", rec, prev)
        ahead.ended(2, rec)
        prev = b
    assert ahead.found == ["ahead"]
