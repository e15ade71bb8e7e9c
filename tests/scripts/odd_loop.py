"""A small DataLoader loop that does one odd thing a user's script may do, for pinprof tune and
pinprof profile (tests/test_tune_safety.py). Args: WHAT [N].

- ``block``: after its 3rd batch the loop's thread waits forever on a lock (no CPU: a deadlock);
- ``raise``: its 3rd batch raises ``ValueError("odd_loop failed on purpose")``;
- ``print N``: N MB written to stdout and to stderr before the loop, then 40 batches;
- ``chdir``: changes directory (into a new temporary folder, left for the caller's ``TMPDIR`` to
  hold) before the loop, then 40 batches.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time

import torch
from torch.utils.data import DataLoader, TensorDataset

what = sys.argv[1]
if what == "print":
    line = "x" * 1023 + "\n"
    for _ in range(int(sys.argv[2]) * 1024):
        sys.stdout.write(line)
        sys.stderr.write(line)
if what == "chdir":
    os.chdir(tempfile.mkdtemp(prefix="odd-loop-"))
loader = DataLoader(TensorDataset(torch.rand(320, 16, generator=torch.Generator().manual_seed(0))), batch_size=8)
for i, (x,) in enumerate(loader):
    x = x.to("cpu")
    time.sleep(0.005)
    if i == 3 and what == "block":
        lock = threading.Lock()  # a second acquire never returns
        lock.acquire()
        lock.acquire()
    if i == 3 and what == "raise":
        raise ValueError("odd_loop failed on purpose")
