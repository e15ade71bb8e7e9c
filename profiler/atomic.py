"""Files written atomically: a crash mid-write leaves the previous good file (or none), never half a CSV.

Each file is written to a temporary name in the same folder, flushed to disk and renamed over the
target. Any layer may write through these (pandas and the standard library only).
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

from profiler.errors import OutputNotWritableError

# mkstemp makes its file 0600; the report gets the mode any new file of the user's would (umask).
_UMASK = os.umask(0)
os.umask(_UMASK)


def write_text_atomic(path: Path, text: str) -> None:
    path = Path(path)
    # The rename would replace a symlink (not what it points to) or a device node: refuse both.
    if path.is_symlink() or (path.exists() and not path.is_file()):
        raise OutputNotWritableError(
            f"{path}: not a regular file (a link, device or folder); pinprof writes files only"
        )
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def csv_text(frame: pd.DataFrame, header: bool = True) -> str:
    """CSV with full float precision (round-trips exactly); NaN is written as an empty cell."""
    return frame.to_csv(index=False, header=header, float_format="%.17g", lineterminator="\n")


def write_csv(frame: pd.DataFrame, path: Path) -> None:
    write_text_atomic(path, csv_text(frame))


def finite(data: Any) -> Any:
    """``data`` with every NaN or infinite float made ``None``: JSON has no NaN nor Infinity, and
    ``json.dumps`` would write them anyway, giving a file other tools refuse."""
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, dict):
        return {k: finite(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [finite(v) for v in data]
    return data


def to_json(data: Any, **kwargs: Any) -> str:
    """Strict JSON text of ``data`` (non-finite floats as null; anything else unknown as its str)."""
    return json.dumps(finite(data), allow_nan=False, default=str, **kwargs)


def write_json(data: dict[str, Any], path: Path) -> None:
    write_text_atomic(path, to_json(data, indent=2, sort_keys=True) + "\n")
