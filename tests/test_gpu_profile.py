"""The automatic hooks of ``pinprof profile`` on a real GPU: each batch's copies, timed around the
user's own ``.cuda()`` / ``.to()`` calls, against CUPTI (torch.profiler). Run: pytest -m gpu."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from profiler.bench import cupti
from profiler.capture import auto_hooks
from profiler.capture.auto_session import AutoSession

pytestmark = pytest.mark.gpu


def test_auto_copies_agree_with_cupti_batch_by_batch() -> None:
    n, bs = 16, 64
    gen = torch.Generator().manual_seed(3)
    data = TensorDataset(torch.rand(n * bs, 3, 224, 224, generator=gen), torch.randint(0, 10, (n * bs,), generator=gen))
    loader = DataLoader(data, batch_size=bs, num_workers=2, pin_memory=True)
    w = torch.randn(3 * 224 * 224, 10, device="cuda")
    session = AutoSession("cuda", nvtx=False)

    def loop() -> None:
        auto_hooks.start(session)
        try:
            for x, y in loader:  # an unmodified loop: pinprof sees it only through the hooks
                x, y = x.cuda(non_blocking=True), y.to("cuda", non_blocking=True)
                loss = torch.nn.functional.cross_entropy(x.flatten(1) @ w, y)
                loss.item()
        finally:
            auto_hooks.stop()

    trace = cupti.capture(loop, host_ops=False)
    tl = session.close()
    h2d = trace[(trace.kind == "memcpy") & trace.name.str.contains("HtoD")]
    assert len(tl) == n and (tl.copies == 2).all() and len(h2d) == 2 * n
    assert (tl.bytes == bs * (3 * 224 * 224 * 4 + 8)).all() and set(tl.src_memory) == {"pinned"}
    assert set(tl["mode"]) == {"pinned_nb"} and tl.compute_ms.notna().all()
    cupti_ms = h2d.dur_us.to_numpy().reshape(n, 2).sum(axis=1) / 1e3
    ours = tl.h2d_gpu_ms.to_numpy()
    rel = np.abs(ours - cupti_ms) / cupti_ms
    print(
        f"auto hooks: h2d_gpu_ms median {np.median(ours):.4f} ms, CUPTI memcpy sum {np.median(cupti_ms):.4f} ms, "
        f"|rel| median {np.median(rel):.4f}, max {rel.max():.4f}"
    )
    assert np.median(rel) < 0.05
    # The step asks for the data when the last copy returns; the GPU is idle during the copy (the
    # previous step ended in loss.item()), so the copy is exposed, and the diagnosis says so.
    wait, idle = tl.wait_ms.median(), tl.gpu_idle_ms.median()
    # Where the host's time went between the batch's first copy on the GPU and its ask for the data (the
    # wait's start): a slow host, or pinprof's own copy path, leaves less of the copy to wait for.
    lead = (tl.wait_start_ms - tl.h2d_start_ms).median()
    print(
        f"auto hooks: wait_ms median {wait:.4f}, gpu_idle_ms median {idle:.4f}, h2d_ms median {tl.h2d_ms.median():.4f}; "
        f"first copy's DMA start to the ask {lead:.4f} ms, h2d_call_ms median {tl.h2d_call_ms.median():.4f}, "
        f"pinprof_ms median {tl.pinprof_ms.median():.4f}, clock {sorted(set(tl.gpu_clock))}"
    )
    assert wait > 0.5 * tl.h2d_ms.median() and idle > 0.5 * tl.h2d_ms.median()
    from profiler.analysis.diagnose import diagnose

    verdicts = [f.verdict.name for s in diagnose(tl) for f in s.findings]
    assert "GPU_IDLE" in verdicts, verdicts


def test_a_loop_whose_batches_are_made_on_the_gpu_is_told_it_copies_nothing() -> None:
    """Batches made on the device (no .to(), .cuda() or copy_() of a batch): every row has its step's
    GPU time and no copy, and the diagnosis says no copy to the GPU, not "run on a CUDA machine"."""
    from profiler.analysis.diagnose import diagnose
    from profiler.analysis.findings import Verdict

    n, bs = 24, 64
    loader = DataLoader(TensorDataset(torch.arange(n * bs)), batch_size=bs)
    w = torch.randn(1024, 1024, device="cuda") / 32
    session = AutoSession("cuda", nvtx=False)
    auto_hooks.start(session)
    try:
        for (i,) in loader:
            x = torch.randn(bs, 1024, device="cuda") + float(i[0])  # made on the GPU: nothing to copy
            for _ in range(8):
                x = torch.tanh(x @ w)
            x.sum().item()
    finally:
        auto_hooks.stop()
    tl = session.close()
    assert len(tl) == n and (tl.copies == 0).all() and tl.h2d_ms.isna().all()
    assert tl.compute_ms.notna().all() and (tl.compute_ms > 0).all()
    (d,) = diagnose(tl)
    found = {f.verdict: f for f in d.findings}
    print(f"no-copy loop: compute_ms median {tl.compute_ms.median():.4f}; verdicts {[v.value for v in found]}")
    assert Verdict.NO_COPY in found and Verdict.NO_GPU not in found
    assert found[Verdict.NO_COPY].evidence.startswith("the run was on cuda")
