"""A two-rank data-parallel training script for torchrun (gloo on CPU, NCCL on GPUs), nothing of
pinprof in it (tests/test_profile.py).

    torchrun --nproc_per_node 2 tests/scripts/ddp_train.py [--batch-size 8] [--linger S]

``--linger S``: rank 1 stays S seconds after its loop, as a rank that saves a checkpoint would, so it
ends after rank 0.
"""

from __future__ import annotations

import argparse
import os
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--linger", type=float, default=0.0)
    args = p.parse_args()
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    local = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local % torch.cuda.device_count()) if cuda else torch.device("cpu")
    gen = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.rand(96, 3, 8, 8, generator=gen), torch.randint(0, 10, (96,), generator=gen))
    loader = DataLoader(data, batch_size=args.batch_size, sampler=DistributedSampler(data, shuffle=False))
    model = DistributedDataParallel(nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 10)).to(device))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    rank = dist.get_rank()
    dist.destroy_process_group()
    if rank == 1:
        time.sleep(args.linger)
    print(f"rank {rank} done")


if __name__ == "__main__":
    main()
