"""One run of ``pinprof tune``: ``pinprof profile`` of the script in a process of its own, bounded in
time, its output streamed to files in the trial's folder (``stdout.log``, ``stderr.log``) so that a
script that prints gigabytes costs disk, not memory; the stall line ``pinprof profile`` prints for a
loop that stops moving is shown as it comes, and a failed run is told by the script's own last line
of error (its exception, as its report keeps it), not by pinprof's lines.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from profiler.atomic import read_bounded
from profiler.errors import OutputNotWritableError

STDOUT, STDERR = "stdout.log", "stderr.log"
STALL_LINE = "pinprof: no new batch for"  # profiler.capture.stall's line
POLL_S = 0.5
_CHUNK = 1 << 16  # the most bytes of stderr read at a time, and the longest line looked at


def make_folder(path: Path) -> Path:
    """Make ``path`` (its parent exists): refused where something, a planted link above all, is there."""
    try:
        os.mkdir(path)
    except FileExistsError:
        raise OutputNotWritableError(
            f"{path}: already there; pinprof tune writes each run into a new folder: choose another --out, or delete it"
        ) from None
    return path


def _log(path: Path) -> int:
    """A new file for a run's output, never through a link."""
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)


class StderrTail:
    """Reads what a run adds to its stderr.log, a chunk at a time: each whole line goes to ``line``;
    the last lines that are not pinprof's own are kept (the script's error)."""

    def __init__(self, path: Path, line: Callable[[str], None]) -> None:
        self.path, self._line = path, line
        self._at = 0
        self._part = b""
        self.last_own: str = ""  # the script's own last line (not pinprof's)

    def read(self) -> None:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self._at)
                while chunk := fh.read(_CHUNK):
                    self._at += len(chunk)
                    *whole, self._part = (self._part + chunk).split(b"\n")
                    self._part = self._part[-_CHUNK:]  # a line longer than that: its end alone
                    for raw in whole:
                        self._take(raw.decode("utf-8", "replace").rstrip())
        except OSError:
            return

    def _take(self, text: str) -> None:
        if text.startswith(STALL_LINE):
            self._line(text)
        if text.strip() and not text.startswith("pinprof"):
            self.last_own = text.strip()[:300]


def run_trial(
    cmd: Sequence[str], env: dict[str, str], folder: Path, limit_s: float, say: Callable[[str], None]
) -> tuple[int | None, str]:
    """Run ``cmd`` (``pinprof profile --out folder ...``) for ``limit_s`` seconds at most: (its exit
    status, None where it was stopped at the limit; the script's last line of error, or "")."""
    out_fd, err_fd = _log(folder / STDOUT), _log(folder / STDERR)
    try:
        proc = subprocess.Popen(list(cmd), env=env, stdin=subprocess.DEVNULL, stdout=out_fd, stderr=err_fd)
    finally:
        os.close(out_fd)
        os.close(err_fd)
    tail = StderrTail(folder / STDERR, say)
    deadline = time.monotonic() + limit_s
    try:
        while True:
            try:
                code: int | None = proc.wait(timeout=POLL_S)
                break
            except subprocess.TimeoutExpired:
                tail.read()
                if time.monotonic() >= deadline:
                    proc.kill()
                    proc.wait()
                    code = None
                    break
    except BaseException:  # Ctrl-C: the run got it too (one process group); it writes its report
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
        raise
    tail.read()
    return code, _error_of(folder) or tail.last_own


def _error_of(folder: Path) -> str:
    """The script's exception as its report's meta.json keeps it (``TypeName: text``), or ""."""
    try:
        info = json.loads(read_bounded(folder / "meta.json", 1 << 20, "meta.json"))
    except (OSError, ValueError):
        return ""
    kind, text = info.get("interrupted_by"), info.get("error")
    return f"{kind}: {text}"[:300] if isinstance(kind, str) and isinstance(text, str) and text else ""
