"""``pinprof run`` as one rank of a job: under torchrun, or started N times by ``pinprof run --nproc N``.

Every rank runs the same scenario matrix on its own device (``cuda:<local_rank>``, or the CPU), and
all ranks start each scenario together (a barrier), so their copies really share the host's memory
bandwidth and PCIe switches. Rank 0 picks the report folder and tells the others; each rank writes
only ``<out>/rank<k>/``; rank 0 merges them into ``<out>/`` on one clock (``profiler.merge``).
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import torch
import torch.distributed as dist

from profiler.capture.devices import rank_info
from profiler.settings import current


def in_job() -> bool:
    """Whether this process is one of several ranks (torchrun's variables say so)."""
    return current().world_size > 1


def init(device: str | None) -> torch.device | None:
    """Join the process group (NCCL on GPUs, gloo on CPU); returns this rank's device."""
    info = rank_info()
    cuda = torch.cuda.is_available() and (device is None or device.startswith("cuda"))
    if not dist.is_initialized():
        dist.init_process_group("nccl" if cuda else "gloo")
    if cuda:
        torch.cuda.set_device(info["local_rank"] % torch.cuda.device_count())
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu") if device in (None, "cpu") else None


def agree(value: object) -> object:
    """Rank 0's value, on every rank."""
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def barrier() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.barrier()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def launch(nproc: int, argv: Sequence[str]) -> int:
    """Start ``nproc`` ranks of ``python -m profiler run ARGV`` through torch.distributed.run."""
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        str(nproc),
        "--master_addr",
        "127.0.0.1",
        "--master_port",
        str(free_port()),
        "-m",
        "profiler",
        "run",
        *argv,
    ]
    return subprocess.call(cmd)


def rank_folder(out: Path) -> Path:
    return Path(out) / f"rank{rank_info()['rank']}"
