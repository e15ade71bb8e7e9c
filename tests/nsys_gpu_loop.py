"""A minimal pinprof-instrumented GPU loop for Nsight Systems captures (scripts/nsys_profile.sh).

Usage: python tests/nsys_gpu_loop.py OUTDIR [--plain]   (--plain: the same copies without pinprof)
"""

import sys
from pathlib import Path

import torch

from profiler import TransferProfiler
from profiler.atomic import write_csv
from profiler.modes import Mode

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
gen = torch.Generator().manual_seed(0)
data = [torch.randint(0, 256, (int(12.5 * (1 << 20)),), dtype=torch.uint8, generator=gen) for _ in range(4)]
if "--plain" in sys.argv:
    for t in data * 3:
        t.to("cuda")
        t.pin_memory().to("cuda", non_blocking=True)
    torch.cuda.synchronize()
    sys.exit(0)
frames = []
runs: list[tuple[Mode, list[torch.Tensor]]] = [("pageable", data), ("pinned_nb", [t.pin_memory() for t in data])]
for mode, batches in runs:
    prof = TransferProfiler(mode, "cuda", scenario=f"{mode}/gpu-loop")
    for b in prof.batches(batches * 3):
        prof.to_device(b)
        torch.cuda.synchronize()
    frames.append(prof.timeline())
write_csv(__import__("pandas").concat(frames, ignore_index=True), out / "timeline.csv")
