"""A user loop under the context-manager profiler, for the subprocess reliability tests.

python tests/reliability_loop.py OUT slow | raise N | kill-worker N
"""

import os
import signal
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset

from profiler import TransferProfiler


class Items(Dataset):
    def __init__(self, how: str, at: int) -> None:
        self.how, self.at = how, at

    def __len__(self) -> int:
        return 100_000

    def __getitem__(self, i: int) -> torch.Tensor:
        if i == self.at and self.how == "raise":
            raise ValueError(f"bad item {i}")
        if i == self.at and self.how == "kill-worker":
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(0.0005)
        return torch.full((3, 8, 8), float(i))


out, how = sys.argv[1], sys.argv[2]
at = int(sys.argv[3]) if len(sys.argv) > 3 else -1
loader = DataLoader(Items(how, at), batch_size=4, num_workers=2 if how == "kill-worker" else 0)
with TransferProfiler(mode="pageable", device="cpu", out=out) as prof:
    for n, batch in enumerate(prof.batches(loader)):
        prof.to_device(batch)
        with prof.cpu_work():
            time.sleep(0.002)
        print(f"batch {n}", flush=True)
