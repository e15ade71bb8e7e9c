"""The sidecar metadata that makes a report readable and comparable later."""
from __future__ import annotations

import os
import platform
import subprocess
import sys
from datetime import datetime, timezone
from typing import Any

import torch

from ._version import __version__


def driver_version() -> str | None:
    """The NVIDIA driver version from nvidia-smi, or None where there is none."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return out.strip().splitlines()[0] if out.strip() else None


def collect(device: torch.device, argv: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    """Device, driver, versions, host and command line; ``extra`` is merged in."""
    cuda = device.type == "cuda"
    meta: dict[str, Any] = {
        "pinprof_version": __version__,
        "torch_version": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "python": platform.python_version(),
        "host": platform.node(),
        "cpu_count": os.cpu_count(),
        "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if cuda else platform.processor() or "cpu",
        "driver": driver_version() if cuda else None,
        "command": " ".join(argv if argv is not None else sys.argv),
        "created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "partial": False,
    }
    meta.update(extra)
    return meta
