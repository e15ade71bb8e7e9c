"""A report folder claimed by one run at a time: a lock file made with O_EXCL when the run starts.

Two runs on one folder used to both pass the emptiness check and one report silently replaced the
other. The lock (``.pinprof.lock``: the pid and host of the run holding it) is removed when the run
ends; one left by a run that died (``kill -9``) names a pid that no longer exists on this host and
is taken over.
"""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path

from profiler.atomic import read_bounded
from profiler.errors import OutputExistsError, OutputNotWritableError, ReportError

LOCK = ".pinprof.lock"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, as another user's process
    return True


# A lock pinprof writes is a few dozen bytes; anything larger, or not a regular file, was put there by
# someone else (a link to /dev/zero took 23.7 GB of memory when read whole; a FIFO hung the run).
LOCK_BYTES = 4096


def _holder(lock: Path) -> tuple[int, str] | None:
    """(pid, host) written in ``lock``, or None if it holds no such thing (a torn write); raises
    ``OutputExistsError`` if it is not a lock pinprof could have made (a link, a FIFO, a device, a
    large file)."""
    try:
        raw = read_bounded(lock, LOCK_BYTES, "pinprof lock file")
    except ReportError as err:
        if not lock.exists() and not lock.is_symlink():
            return None  # gone meanwhile: its run ended
        raise OutputExistsError(
            f"{err}: it is not a lock pinprof made; remove it if you trust this folder, or choose another folder"
        ) from None
    try:
        data = json.loads(raw.decode("utf-8"))
        pid, host = data["pid"], data["host"]
        if not isinstance(pid, int) or isinstance(pid, bool) or not 0 < pid < 2**31 or not isinstance(host, str):
            return None
        return pid, host[:255]
    except (ValueError, KeyError, TypeError, RecursionError):
        return None


def _refuse_held(folder: Path, lock: Path, what: str) -> None:
    """Raise ``OutputExistsError`` if ``lock`` is not a lock pinprof made, or a live run holds it."""
    holder = _holder(lock)
    if holder is not None and (holder[1] != platform.node() or _alive(holder[0])):
        raise OutputExistsError(
            f"{what} {str(folder)!r} is being written by another pinprof run (pid {holder[0]} on "
            f"{holder[1]}); choose another folder, or wait for that run to end"
        ) from None


def check(folder: Path, what: str) -> None:
    """Refuse ``folder`` as ``claim`` would for its lock, creating nothing: a verb calls this before it
    imports torch (2 s or more), so that a folder it cannot have is said at once. ``claim`` still takes
    the lock, and refuses what came meanwhile."""
    lock = Path(folder) / LOCK
    try:
        there = lock.exists() or lock.is_symlink()
    except OSError:  # a folder this user may not read: claim says why, with the run's own words
        return
    if there:
        _refuse_held(Path(folder), lock, what)


def claim(folder: Path, what: str) -> Path:
    """Create ``folder`` if needed and take its lock; refuse if a live run holds it.

    ``what`` names the option that chose the folder (``--out``, ``out=``) in the errors."""
    folder = Path(folder)
    lock = folder / LOCK
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for _ in range(2):  # a second try after removing a dead run's lock
            try:
                fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                _refuse_held(folder, lock, what)
                lock.unlink(missing_ok=True)  # its run is gone
                continue
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump({"pid": os.getpid(), "host": platform.node()}, fh)
            return lock
    except OSError as err:
        if isinstance(err, OutputExistsError):
            raise
        raise OutputNotWritableError(f"{what} {str(folder)!r} is not writable ({err.strerror or err})") from err
    raise OutputExistsError(f"{what} {str(folder)!r}: its lock {LOCK} keeps coming back; another run is starting there")


def release(lock: Path | None) -> None:
    """Remove the lock if this process holds it."""
    if lock is None:
        return
    try:
        holder = _holder(lock)
    except OutputExistsError:
        return  # replaced under the run by something that is not ours: left alone
    if holder is not None and holder[0] == os.getpid():
        lock.unlink(missing_ok=True)
