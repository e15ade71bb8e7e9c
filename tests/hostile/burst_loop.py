"""A loop that iterates STEPS small batches as fast as it can, then exits with EXIT: a short run whose
batches all fall before the journal's first append. Args: STEPS EXIT."""

import sys

import torch
from torch.utils.data import DataLoader

steps, status = int(sys.argv[1]), int(sys.argv[2])
for batch in DataLoader([torch.full((64,), float(i)) for i in range(steps)], batch_size=None):  # type: ignore[arg-type]
    batch.to("cpu")
sys.exit(status)
