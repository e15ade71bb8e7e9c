"""The sidecar metadata (meta.json) that makes a report readable and comparable later."""

from __future__ import annotations

import os
import platform
import sys
from datetime import datetime, timezone
from typing import Any

from profiler._version import __version__


def collect(device: dict[str, Any], argv: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    """Versions, host and command line around ``device`` (``profiler.capture.environment.describe``);
    ``extra`` is merged in."""
    meta: dict[str, Any] = {
        "pinprof_version": __version__,
        "python": platform.python_version(),
        "host": platform.node(),
        "cpu_count": os.cpu_count(),
        **device,
        "command": " ".join(argv if argv is not None else sys.argv),
        "created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "partial": False,
    }
    meta.update(extra)
    return meta
