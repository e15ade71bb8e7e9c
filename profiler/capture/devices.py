"""Which device a profiler copies to, and which rank of a distributed job it runs in."""

from __future__ import annotations

import torch

from profiler.errors import DeviceError
from profiler.settings import current


def rank_info() -> dict[str, int]:
    """rank, local_rank and world_size of this process: torch.distributed if initialised, else the
    variables torchrun sets, else a single process (0, 0, 1)."""
    env = current()
    info = {"rank": env.rank, "local_rank": env.local_rank, "world_size": env.world_size}
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        info["rank"], info["world_size"] = dist.get_rank(), dist.get_world_size()
    return info


def resolve_device(device: str | torch.device | None) -> torch.device:
    """The device to copy to, checked: a clear error for one that does not exist here."""
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise DeviceError(f"device {device!r} is not a device string; use e.g. 'cuda', 'cuda:0' or 'cpu'") from err
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise DeviceError(
                f"device {str(device)!r} needs CUDA, but torch.cuda.is_available() is False here; pass "
                "device='cpu' to measure only the loader, pin and CPU-work phases"
            )
        count = torch.cuda.device_count()
        if dev.index is not None and dev.index >= count:
            raise DeviceError(
                f"device {str(device)!r} does not exist: this machine has {count} CUDA "
                f"device(s), cuda:0 to cuda:{count - 1}"
            )
        if dev.index is None:
            dev = torch.device("cuda", torch.cuda.current_device())
    elif dev.type != "cpu":
        raise DeviceError(f"device {str(device)!r}: pinprof profiles copies to 'cuda' devices (or 'cpu')")
    return dev
