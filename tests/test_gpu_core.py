"""Core recorder on a real GPU, checked against CUPTI (torch.profiler). Run: pytest -m gpu."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch

from profiler import TransferProfiler
from profiler.bench import cupti
from profiler.modes import MODES, Mode

pytestmark = pytest.mark.gpu
MiB = 1 << 20


def batches_of(nbytes: int, count: int, pinned: bool, seed: int = 0) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(count):
        t = torch.randint(0, 256, (nbytes,), dtype=torch.uint8, generator=gen)  # never zeros
        out.append(t.pin_memory() if pinned else t)
    return out


def profile_loop(mode: Mode, data: list, cpu_ms: float = 0.0, warmup: int = 3) -> TransferProfiler:
    prof = TransferProfiler(mode=mode, device="cuda", warmup=warmup)
    for batch in prof.batches(data):
        x = prof.to_device(batch)
        with prof.cpu_work():
            end = time.perf_counter() + cpu_ms / 1e3
            while time.perf_counter() < end:
                pass
        with prof.compute():
            torch.cuda._sleep(1000)  # a little GPU work so the compute stream really waits
            x.float().sum()
        torch.cuda.synchronize()
    return prof


@pytest.mark.parametrize("mode", MODES)
def test_mode_reaches_the_memcpy_kind_its_name_says(mode: Mode) -> None:
    pinned_src = mode in ("pinned", "pinned_nb", "prefetch")
    data = batches_of(2 * MiB, 6, pinned_src)
    trace = cupti.capture(lambda: profile_loop(mode, data).timeline())
    h2d = trace[(trace.kind == "memcpy") & trace.name.str.contains("HtoD") & (trace.bytes >= MiB / 4)]
    expected = "pageable" if mode in ("pageable", "pageable_nb") else "pinned"
    print(f"{mode}: {sorted(set(h2d.name))}")
    assert len(h2d) >= 6
    assert set(h2d.src_memory) == {expected}, set(h2d.name)


@pytest.mark.parametrize("mode", ["pinned_nb", "pinned"])
@pytest.mark.parametrize("size_mib", [1, 4, 12.5, 64])
def test_pinned_h2d_ms_agrees_with_cupti(size_mib: float, mode: Mode) -> None:
    n = 24
    data = batches_of(int(size_mib * MiB), n, pinned=True, seed=1)
    holder: list = []
    trace = cupti.capture(lambda: holder.append(profile_loop(mode, data, warmup=0).timeline()))
    tl = holder[0]
    memcpy = trace[(trace.kind == "memcpy") & (trace.bytes == size_mib * MiB)]
    assert len(memcpy) == n
    ours = tl["h2d_ms"].to_numpy()
    cupti_ms = memcpy["dur_us"].to_numpy() / 1e3
    rel = np.abs(ours - cupti_ms) / cupti_ms
    # the first copies pay one-off costs on both sides; agreement is judged on the warm batches
    warm = rel[3:]
    print(
        f"{mode} {size_mib} MiB: ours median {np.median(ours[3:]):.4f} ms, CUPTI median "
        f"{np.median(cupti_ms[3:]):.4f} ms, per-batch rel diff median {np.median(warm):.4f} max {warm.max():.4f}, "
        f"abs diff median {np.median(ours[3:] - cupti_ms[3:]) * 1e3:.2f} us"
    )
    # This module's clock is the events (conftest): they read a fixed few microseconds high at every size
    # (2.60-2.66 us on the H100 at 1 to 64 MiB, 2026-12-05; 2.6-2.7 on the H200), 12% of a 1 MiB copy.
    # So the offset is bounded at every size and the share where it is small; 1 MiB within 2% is what
    # CUPTI's records give (tests/test_gpu_cupti.py).
    assert np.median(np.abs(ours[3:] - cupti_ms[3:])) * 1e3 < 4.0
    if size_mib >= 4:
        assert np.median(warm) < 0.05
        assert np.quantile(warm, 0.9) < 0.05


def test_overlap_pinned_nb_versus_pageable() -> None:
    size = int(12.5 * MiB)
    nb = profile_loop("pinned_nb", batches_of(size, 30, True), cpu_ms=1.0).timeline()
    pg = profile_loop("pageable", batches_of(size, 30, False), cpu_ms=1.0).timeline()
    nb, pg = nb[~nb.warmup], pg[~pg.warmup]
    ratio = (nb.overlap_ms / nb.h2d_ms).median()
    print(
        f"pinned_nb: h2d {nb.h2d_ms.median():.4f} ms overlap {nb.overlap_ms.median():.4f} ms "
        f"(ratio {ratio:.3f}) wait {nb.wait_ms.median():.4f} ms"
    )
    print(
        f"pageable: h2d {pg.h2d_ms.median():.4f} ms overlap {pg.overlap_ms.median():.4f} ms "
        f"wait {pg.wait_ms.median():.4f} ms"
    )
    assert ratio > 0.9
    assert pg.overlap_ms.median() < 0.05 * pg.h2d_ms.median()
    assert nb.wait_ms.median() < 0.1 * nb.h2d_ms.median()
    assert pg.wait_ms.median() >= 0.9 * pg.h2d_ms.median()


def _make_batch(gen: torch.Generator) -> dict:
    img = torch.randn(64, 3, 33, 31, generator=gen)
    return {
        "img_t": img.transpose(2, 3),  # non-contiguous
        "labels": torch.randint(0, 10, (64,), generator=gen),
        "half": torch.randn(17, 5, generator=gen).half(),
        "nested": (
            torch.randint(-5, 5, (3, 7), generator=gen, dtype=torch.int8),
            [torch.rand(1001, generator=gen) > 0.5],
        ),
    }


@pytest.mark.parametrize("mode", MODES)
def test_every_mode_is_bit_exact_with_plain_to(mode: Mode) -> None:
    gen = torch.Generator().manual_seed(7)
    data = [_make_batch(gen) for _ in range(5)]
    if mode in ("pinned", "pinned_nb", "prefetch"):
        from torch.utils.data._utils.pin_memory import pin_memory

        data = [pin_memory(b) for b in data]
    prof = TransferProfiler(mode=mode, device="cuda")
    got = []
    for batch in prof.batches(data):
        out = prof.to_device(batch)
        with prof.compute():
            got.append(torch.utils._pytree.tree_map(lambda t: t.clone(), out))
    torch.cuda.synchronize()
    for batch, out in zip(data, got):
        ref_leaves = torch.utils._pytree.tree_leaves(batch)
        out_leaves = torch.utils._pytree.tree_leaves(out)
        assert len(ref_leaves) == len(out_leaves)
        for r, o in zip(ref_leaves, out_leaves):
            assert o.device.type == "cuda" and o.dtype == r.dtype and o.shape == r.shape
            assert torch.equal(o.cpu(), r), mode
    tl = prof.timeline()
    assert (tl.bytes == sum(t.numel() * t.element_size() for t in torch.utils._pytree.tree_leaves(data[0]))).all()


def test_batch_already_on_device_is_not_a_copy() -> None:
    data = [torch.randn(1000, device="cuda") for _ in range(3)]
    prof = TransferProfiler(mode="pinned_nb", device="cuda")
    for batch in prof.batches(data):
        prof.to_device(batch)
    tl = prof.timeline()
    assert set(tl.src_memory) == {"device"}
    assert tl.h2d_ms.isna().all() and tl.wait_ms.isna().all()


def test_pin_thread_time_is_attributed_to_its_batch() -> None:
    from torch.utils.data import DataLoader

    from profiler.drivers.datasets import SyntheticImages

    loader = DataLoader(SyntheticImages(size=4096), batch_size=256, num_workers=2, pin_memory=True)
    prof = TransferProfiler(mode="pinned_nb", device="cuda")
    for batch in prof.batches(loader):
        prof.to_device(batch)
    tl = prof.timeline()
    print(f"pin_ms median {tl.pin_ms.median():.3f} ms over {len(tl)} batches; src {set(tl.src_memory)}")
    assert tl.pin_ms.notna().all() and (tl.pin_ms > 0).all()
    assert (tl.pin_end_ms <= tl.fetch_end_ms + 1e-6).all()  # pinned before the loop received it
    assert set(tl.src_memory) == {"pinned"}
