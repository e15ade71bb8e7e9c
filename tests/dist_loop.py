"""One rank of a torchrun job (gloo on CPU): a profiled loop whose report rank 0 merges.

torchrun --nproc_per_node 2 tests/dist_loop.py OUT
"""

import sys
import time

import torch
import torch.distributed as dist

from profiler import TransferProfiler

dist.init_process_group("gloo")
rank = dist.get_rank()
data = [torch.full((64, 64), float(rank)) for _ in range(10)]
dist.barrier()  # both ranks start their loops together
with TransferProfiler(mode="pageable", device="cpu", out=sys.argv[1], scenario="pageable/dist") as prof:
    for batch in prof.batches(data):
        prof.to_device(batch)
        with prof.cpu_work():
            time.sleep(0.002 * (rank + 1))  # rank 1 is the slow one
dist.destroy_process_group()
