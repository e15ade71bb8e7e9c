"""One layout case of tests/test_gpu_layouts.py, run in its own process so a hang is a timeout.

    python tests/layout_loop.py CASE

For every mode, pinned and pageable sources: three batches through ``TransferProfiler.to_device``,
each result compared bit for bit with ``.to("cuda")`` of the same tensors; prints one JSON line
per mode with what the timeline says (src_memory, layout_ms, copies, bytes).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._pytree import tree_leaves, tree_map

from profiler import MODES, TransferProfiler

GiB = 1 << 30


def base(shape: tuple[int, ...], dtype: torch.dtype = torch.float32, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(shape, generator=gen) > 0.5
    if dtype.is_complex:
        return torch.randn(shape, dtype=dtype, generator=gen)
    if dtype == torch.uint8:
        return torch.randint(0, 256, shape, dtype=dtype, generator=gen)
    return torch.randn(shape, generator=gen).to(dtype)


def pin(t: torch.Tensor, pinned: bool) -> torch.Tensor:
    return t.pin_memory() if pinned else t


# Each case: pinned -> batch. Views are taken of the (pinned or pageable) base, as a loader's would be.
CASES: dict[str, Callable[[bool], Any]] = {
    "slice_last": lambda p: pin(base((64, 3, 32, 8)), p)[..., :3],
    "stride_2": lambda p: pin(base((128, 3, 32, 32)), p)[::2],
    "expand": lambda p: pin(base((1, 3, 32, 32)), p).expand(64, 3, 32, 32),
    "transposed": lambda p: pin(base((256, 512)), p).t(),
    "channels_last": lambda p: pin(base((32, 3, 64, 64)).contiguous(memory_format=torch.channels_last), p),
    "storage_offset": lambda p: pin(base((1000, 64)), p)[7:],
    "conj_view": lambda p: pin(base((4096,), torch.complex64), p).conj(),
    "neg_view": lambda p: torch._neg_view(pin(base((4096,), torch.complex64), p)),
    "zero_size": lambda p: (pin(base((0, 3)), p), pin(base((16,)), p)),
    "bool_complex": lambda p: {"mask": pin(base((4096,), torch.bool), p), "z": pin(base((512,), torch.complex128), p)},
    "mixed_leaves": lambda p: (pin(base((1024,)), True), base((1024,), seed=1), base((64,), seed=2).cuda()),
    "nested_views": lambda p: {
        "x": [pin(base((64, 64)), p)[:, ::3], pin(base((8, 8)), p).t()],
        "y": pin(base((64,)), p),
    },
    "2GiB": lambda p: pin(base((2 * GiB,), torch.uint8), p),
}


def run(case: str) -> None:
    for pinned in (True, False):
        batch = CASES[case](pinned)
        ref = tree_map(lambda t: t.to("cuda") if isinstance(t, torch.Tensor) else t, batch)
        ref_cpu = [t.cpu() for t in tree_leaves(ref)]
        for mode in MODES:
            prof = TransferProfiler(mode=mode, device="cuda")
            for b in prof.batches([batch] * 3):
                out = prof.to_device(b)
                torch.cuda.synchronize()
                got = tree_leaves(out)
                assert len(got) == len(ref_cpu), (case, mode)
                for o, r in zip(got, ref_cpu):
                    assert o.device.type == "cuda" and o.dtype == r.dtype and o.shape == r.shape, (case, mode)
                    assert torch.equal(o.cpu(), r), f"{case} {mode} pinned={pinned}: values differ"
                del out, got
            tl = prof.timeline()
            prof.close()
            row = tl.iloc[-1]
            print(
                json.dumps(
                    {
                        "case": case,
                        "mode": mode,
                        "pinned": pinned,
                        "src_memory": row.src_memory,
                        "layout_ms": None if row.layout_ms != row.layout_ms else float(row.layout_ms),
                        "copies": int(row.copies),
                        "bytes": int(row.bytes),
                        "h2d_ms": None if row.h2d_ms != row.h2d_ms else float(row.h2d_ms),
                    }
                )
            )
        del batch, ref, ref_cpu
        torch.cuda.empty_cache()


if __name__ == "__main__":
    run(sys.argv[1])
    print("ok")
