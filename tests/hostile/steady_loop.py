"""A loop that iterates small batches at a steady pace and logs each one's iteration time (the kill
test compares what reached timeline.csv with what the program iterated). Args: LOG STEPS [EXIT [PACE_MS]]
(PACE_MS: the sleep a step, 4 ms unless given)."""

import os
import sys
import time

import torch
from torch.utils.data import DataLoader

log, steps = sys.argv[1], int(sys.argv[2])
pace_s = float(sys.argv[4]) / 1e3 if len(sys.argv) > 4 else 0.004
data = [torch.full((64,), float(i)) for i in range(steps)]
with open(log, "w", buffering=1) as fh:
    for i, batch in enumerate(DataLoader(data, batch_size=None)):  # type: ignore[arg-type]
        batch.to("cpu")
        fh.write(f"{i} {time.time():.6f}\n")
        time.sleep(pace_s)
        if len(sys.argv) > 3 and i == 3 and sys.argv[3].startswith("_exit"):
            os._exit(int(sys.argv[3][5:]))
if len(sys.argv) > 3:
    sys.exit(int(sys.argv[3]))
