"""Mode prefetch on a real GPU: the copy runs under the previous step's compute, and the data is right.

Run: pytest -m gpu. A step that ends in ``loss.item()`` (one sync per step, as training loops have)
leaves ``pinned_nb``'s copy on an idle GPU (``gpu_idle_ms`` about the whole copy); ``prefetch`` issues
it before the previous step's compute and brings ``gpu_idle_ms`` to about 0.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from profiler import TransferProfiler
from profiler.drivers.workload import GpuWork
from profiler.modes import Mode

pytestmark = pytest.mark.gpu


class Numbered(Dataset[torch.Tensor]):
    """Random float images whose first element is their index, so a batch that arrives before its
    copy has finished, or the wrong batch, is seen."""

    def __init__(self, n: int, side: int) -> None:
        self.n, self.side = n, side

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        x = torch.rand(3, self.side, self.side, generator=torch.Generator().manual_seed(i))
        x[0, 0, 0] = float(i)
        return x


def run(mode: Mode, batches: int = 30, bs: int = 64) -> tuple[pd.DataFrame, list[float]]:
    loader = DataLoader(Numbered(bs * (batches + 1), 224), batch_size=bs, num_workers=4, pin_memory=True)
    work = GpuWork(torch.device("cuda"), 8.0)
    prof = TransferProfiler(mode, device="cuda", warmup=5)
    firsts = []
    for x in prof.device_batches(loader, limit=batches):
        with prof.compute():
            loss = work(x)
        firsts.append(x[:, 0, 0, 0].clone())  # on the compute stream, after the copy it waited for
        loss.item()
    tl = prof.timeline()
    got = torch.cat(firsts).cpu().tolist()
    return tl[~tl.warmup], got


def test_prefetch_hides_the_copy_that_pinned_nb_leaves_on_an_idle_gpu() -> None:
    base, got_base = run("pinned_nb")
    pre, got_pre = run("prefetch")
    expected = [float(i) for i in range(len(got_pre))]
    assert got_base == expected and got_pre == expected  # every batch whole, in order
    b, p = base.median(numeric_only=True), pre.median(numeric_only=True)
    print(
        f"pinned_nb: h2d {b.h2d_ms:.3f} gpu_idle {b.gpu_idle_ms:.3f} wait {b.wait_ms:.3f} batch {b.batch_ms:.3f} ms; "
        f"prefetch: h2d {p.h2d_ms:.3f} gpu_idle {p.gpu_idle_ms:.3f} wait {p.wait_ms:.3f} batch {p.batch_ms:.3f} ms"
    )
    assert b.gpu_idle_ms >= 0.8 * b.h2d_ms  # issued after the sync: nothing of the loop under it
    assert p.gpu_idle_ms <= 0.05 * b.gpu_idle_ms
    assert p.wait_ms <= 0.05 * max(b.wait_ms, 1e-3)
    # the copy really ran while the previous batch's compute did
    under = np.minimum(pre.h2d_end_ms.to_numpy(), pre.compute_end_ms.shift(1).to_numpy()) - pre.h2d_start_ms.to_numpy()
    assert np.nanmedian(under) >= 0.9 * p.h2d_ms


def test_prefetch_rows_are_one_per_batch_with_their_own_bytes() -> None:
    pre, _ = run("prefetch", batches=12)
    assert list(pre.batch) == list(range(5, 12))
    assert (pre.bytes == 64 * 3 * 224 * 224 * 4).all()
    assert (pre.fetch_start_ms < pre.batch_start_ms).all()  # fetched during the step before
    assert (pre.batch_end_ms.iloc[:-1].to_numpy() == pre.batch_start_ms.iloc[1:].to_numpy()).all()
