"""The two non_blocking races, made on purpose on a real GPU, and reported by pinprof (hazards=True)."""

from __future__ import annotations

import warnings

import pytest
import torch

from profiler import PinprofHazardWarning, TransferProfiler

pytestmark = pytest.mark.gpu
MiB = 1 << 20


def _hazard_messages(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, PinprofHazardWarning)]


@pytest.mark.parametrize("wait_first", [False, True])
def test_refilling_a_pinned_buffer_during_its_copy(wait_first: bool) -> None:
    # 256 MiB: the copy takes about 5 ms, so the refill starts while the DMA still reads the buffer.
    gen = torch.Generator().manual_seed(3)
    original = torch.randint(0, 7, (256 * MiB,), dtype=torch.uint8, generator=gen)  # never 7
    buf = original.pin_memory()
    prof = TransferProfiler("pinned_nb", "cuda", hazards=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for batch in prof.batches([buf], limit=1):
            x = prof.to_device(batch)
            if wait_first:
                torch.cuda.current_stream().synchronize()  # the fix the warning names
            batch.fill_(7)  # the classic reuse bug: refill the buffer for the next batch at once
            torch.cuda.synchronize()
    msgs = _hazard_messages(caught)
    corrupted = int((x == 7).sum())
    print(
        f"wait_first={wait_first}: {len(msgs)} hazard warning(s), {corrupted} of {x.numel()} bytes arrived "
        f"as the refill's value; {msgs[:1]}"
    )
    if wait_first:
        assert msgs == [] and corrupted == 0
    else:
        assert len(msgs) == 1 and "batch 0" in msgs[0] and "wrote a pinned tensor" in msgs[0]


@pytest.mark.parametrize("wait_first", [False, True])
def test_reading_a_nonblocking_d2h_result_early(wait_first: bool) -> None:
    data = [torch.randint(1, 255, (64 * MiB,), dtype=torch.uint8).pin_memory() for _ in range(3)]
    prof = TransferProfiler("pinned_nb", "cuda", hazards=True)
    sums = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for batch in prof.batches(data):
            x = prof.to_device(batch)
            with prof.compute():
                y = x.to(torch.int32) * 2  # some GPU work ahead of the copy back
            back = y.to("cpu", non_blocking=True)
            if wait_first:
                torch.cuda.current_stream().synchronize()
            sums.append(int(back.sum()))  # read it
            torch.cuda.synchronize()
    msgs = _hazard_messages(caught)
    expected = [int(b.to(torch.int64).sum()) * 2 for b in data]
    print(
        f"wait_first={wait_first}: {len(msgs)} hazard warning(s); sums right: "
        f"{[s == e for s, e in zip(sums, expected)]}; {msgs[:1]}"
    )
    if wait_first:
        assert msgs == [] and sums == expected
    else:
        assert len(msgs) == 1 and "batch 0" in msgs[0] and "before the copy finished" in msgs[0]
