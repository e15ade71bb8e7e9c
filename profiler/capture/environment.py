"""What a report says about the machine it was measured on: device, driver, torch."""

from __future__ import annotations

import platform
import subprocess
from typing import Any

import torch


def driver_version() -> str | None:
    """The NVIDIA driver version from nvidia-smi, or None where there is none."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return out.strip().splitlines()[0] if out.strip() else None


def describe(device: torch.device) -> dict[str, Any]:
    """torch_version, torch_cuda, device, device_name, driver, ``gpu_clock``: what timed the GPU
    (``profiler.capture.clocks.choice.describe``), and ``gc``: the process's full garbage collections
    (``profiler.capture.gc_pauses.summary``): the device part of meta.json."""
    from profiler.capture import gc_pauses
    from profiler.capture.clocks import choice as clocks

    cuda = device.type == "cuda"
    return {
        "torch_version": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if cuda else platform.processor() or "cpu",
        "driver": driver_version() if cuda else None,
        "gpu_clock": clocks.describe() if cuda else {"backend": "none"},
        "gc": gc_pauses.summary(),
    }
