"""Eight batches; in the fifth's step the loop's thread stops moving for ``SECONDS`` (argv[2], default
3): ``blocked`` waits on a lock (no CPU, as a thread deadlocked in the CUDA driver does), ``busy``
computes (as a long step does); ``after`` waits as ``blocked`` does, but after the loop (a barrier, an
upload). tests/test_stall.py runs it under ``pinprof profile`` with ``PINPROF_STALL_S=1``."""

from __future__ import annotations

import sys
import threading
import time

import torch
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    how = sys.argv[1]
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 3.0
    data = TensorDataset(torch.rand(64, 3, 8, 8, generator=torch.Generator().manual_seed(0)))
    for b, (x,) in enumerate(DataLoader(data, batch_size=8)):
        x = x.to("cpu")
        time.sleep(0.01)
        if b == 4 and how == "blocked":
            threading.Event().wait(seconds)
        elif b == 4 and how == "busy":
            end, n = time.monotonic() + seconds, 0
            while time.monotonic() < end:
                n += 1
    if how == "after":
        threading.Event().wait(seconds)
    print("done", flush=True)


if __name__ == "__main__":
    main()
