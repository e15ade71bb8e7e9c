"""Files written atomically: a crash mid-write leaves the previous good file (or none), never half a CSV.

Each file is written to a temporary name in the same folder, flushed to disk and renamed over the
target. Any layer may write through these (pandas and the standard library only).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

from profiler.errors import OutputNotWritableError


def write_text_atomic(path: Path, text: str) -> None:
    path = Path(path)
    # The rename would replace a symlink (not what it points to) or a device node: refuse both.
    if path.is_symlink() or (path.exists() and not path.is_file()):
        raise OutputNotWritableError(
            f"{path}: not a regular file (a link, device or folder); pinprof writes files only"
        )
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_csv(frame: pd.DataFrame, path: Path) -> None:
    """CSV with full float precision (round-trips exactly); NaN is written as an empty cell."""
    write_text_atomic(path, frame.to_csv(index=False, float_format="%.17g", lineterminator="\n"))


def write_json(data: dict[str, Any], path: Path) -> None:
    write_text_atomic(path, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
