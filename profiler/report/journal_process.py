"""timeline.csv's appends, built and written by a process of their own while ``pinprof profile`` or
``pinprof run`` runs.

An append builds the timeline of the batches completed since the last and formats them as CSV: Python
work that, on a thread of the profiled process, holds Python's lock while the loop waits for it. On an
H100 (2026-12-06) that thread's CPU time was 0.044-0.053 ms a batch on
``scripts/resident_loop.py`` (pinprof's own time on the loop's thread: 0.11-0.14 ms) and 0.10-0.16 ms
on the short step. The profiled process now hands the rows over as plain data (``RawRows``: the
store's columns, the clock, the loader's settings) through a pipe, and this process builds and writes
them (``Journal.append``, as before): what the loop's process still pays is reading the rows out of the
store and pickling them. Side by side in one call against the commit before (``bench_process_overhead.py
--baseline``), the thread's time fell to 0.0001-0.0035 ms a batch on the resident loop (from
0.0075-0.0124) and to 0.002-0.018 on the short step (from 0.053-0.105).

The protocol is a stream of messages on the child's standard input, each an 8-byte little-endian
length and a pickle: ``(ROWS, [RawRows, ...])`` or ``(STOP, None)``. At a stop, or at the end of its
input (the profiled process died: a ``kill -9`` keeps every row handed over), the child writes one JSON
line on its standard output, ``{"rows": n, "error": text or null, "errno": n or null, "cpu_ms": its CPU
time, "start_ms": of which its start-up}``, and exits. A full disk stops the appends as before: the child says so in one line on the
shared standard error, reads and drops what comes after, and reports the error at its end; for
``pinprof run``, whose loop stops at a failed append (``bench.keeping.appending``), it ends at once,
unsaid, and the profiled process raises the error (``rows.Flusher``). Ctrl-C reaches the whole process
group; the child ignores it, since the profiled process decides when the run ends.

The child imports numpy, pandas and pinprof's timeline and report modules, not torch. It is started
at the first append that has rows (``AutoSession.flush``, ``rows.Flusher``): a run or a scenario
shorter than the append interval starts none.
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

from profiler.report.journal import Journal, stopped_line
from profiler.timeline.build import RawRows, build_rows

ROWS, STOP = "rows", "stop"
_LENGTH = struct.Struct("<Q")
# How long the profiled process waits for the child to write what it was handed, at the run's end.
CLOSE_WAIT_S = 60.0
NICE = 10  # the child's scheduling priority, below the profiled process's (0)


class JournalProcess:
    """The child that appends to ``journal``'s file (``start``, ``send``, ``close``). ``journal``'s
    header is written by the caller first (``Journal.start``); at ``close`` its ``rows`` counts what
    the child appended."""

    def __init__(self, journal: Journal, say: bool = True) -> None:
        """``say``: a failed append is said by the child, which goes on reading (``pinprof profile``);
        else the child ends unsaid, and ``failure`` has the error for the caller to raise."""
        self.journal, self.say = journal, say
        self.error: str | None = None  # why the appends stopped (a full disk), as the child said it
        self.failure: OSError | None = None  # the same as the error the append raised (its errno)
        self.cpu_ms: float | None = None  # the child's CPU time for the rows, as it said at its end
        self.start_ms: float | None = None  # and to start (the interpreter, its imports)
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> bool:
        """Start the child; False where no process can be started (the caller appends itself then)."""
        if not sys.executable:
            return False
        # This pinprof, first on the path: ``-m`` would look in the working directory first, where the
        # profiled program may have a package of the same name.
        root = str(Path(__file__).resolve().parents[2])
        code = f"import sys; sys.path.insert(0, {root!r}); from profiler.report.journal_process import main; main()"
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-c", code, str(self.journal.path), *([] if self.say else ["quiet"])],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                close_fds=True,
            )
        except OSError:
            return False
        try:
            # Background work: on a machine whose cores are all busy (2 on the development machine),
            # the profiled loop goes first; the child catches up while the loop waits.
            os.setpriority(os.PRIO_PROCESS, self._proc.pid, NICE)
        except (OSError, AttributeError):
            pass  # not permitted, or not a POSIX system: the child runs at the loop's priority
        return True

    @property
    def running(self) -> bool:
        return self._proc is not None

    def send(self, rows: list[RawRows]) -> bool:
        """Hand ``rows`` over; False where the child is gone (it is closed then, and its ``error``
        read: the caller appends these rows itself, unless the child stopped at an error)."""
        if self._proc is None:
            return False
        data = pickle.dumps((ROWS, rows), protocol=pickle.HIGHEST_PROTOCOL)
        try:
            stdin = self._proc.stdin
            assert stdin is not None
            stdin.write(_LENGTH.pack(len(data)) + data)
            stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            self.close()
            return False
        return True

    def close(self) -> None:
        """Tell the child to stop, wait for it to write what it has (``CLOSE_WAIT_S`` at most), and
        read its count and error."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        stdin, stdout = proc.stdin, proc.stdout
        assert stdin is not None and stdout is not None
        try:
            data = pickle.dumps((STOP, None))
            stdin.write(_LENGTH.pack(len(data)) + data)
            stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            pass  # gone already: communicate() reads what it said
        try:
            out, _ = proc.communicate(timeout=CLOSE_WAIT_S)  # closes its input: the end, had it missed the stop
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        said: dict[str, Any] = {}
        try:
            said = json.loads(out.decode().strip().splitlines()[-1])
        except (ValueError, IndexError, UnicodeDecodeError):
            pass
        self.journal.rows += int(said.get("rows", 0) or 0)
        error, code, cpu, start = said.get("error"), said.get("errno"), said.get("cpu_ms"), said.get("start_ms")
        self.error = error if isinstance(error, str) else None
        if isinstance(cpu, (int, float)) and isinstance(start, (int, float)):
            self.cpu_ms, self.start_ms = float(cpu) - float(start), float(start)
        if self.error is not None:
            self.failure = OSError(code if isinstance(code, int) else 0, self.error, str(self.journal.path))


def _read(stream: IO[bytes]) -> tuple[str, Any] | None:
    """The next message, or None at the end of the input: a message cut short or unreadable included
    (two writers on the pipe, where a stop came while the journal's thread, given up on after
    ``JournalWriter.stop``'s wait, was still writing). What was written before stays."""
    head = stream.read(_LENGTH.size)
    if len(head) < _LENGTH.size:
        return None
    (size,) = _LENGTH.unpack(head)
    body = stream.read(size)
    if len(body) < size:
        return None
    try:
        message = pickle.loads(body)  # our own parent's data, through our own pipe
    except Exception:
        return None
    return message if isinstance(message, tuple) and len(message) == 2 else None


def serve(path: Path, stream: IO[bytes], say: bool = True) -> dict[str, Any]:
    """Append every message's rows to ``path`` until a stop or the end of ``stream``; the count, the
    error that stopped the appends, if any, and the CPU time. ``say``: a failed append is said in a
    line and what follows is read and dropped; else it ends the child at once, unsaid, and the
    sender, whose next message finds no reader, says it (``pinprof run`` stops there)."""
    start_ms = time.process_time() * 1e3  # the interpreter's start and the imports: the child's start-up
    journal = Journal(path)
    error: str | None = None
    code: int | None = None
    while (message := _read(stream)) is not None and message[0] != STOP:
        if error is not None:
            continue  # the appends stopped: what comes is read and dropped, so the sender never blocks
        try:
            for rows in message[1]:
                journal.append(build_rows(rows))
        except OSError as err:
            error, code = stopped_line(path, err, journal.rows), err.errno
            if not say:
                error = err.strerror or str(err)
                break
            print(f"pinprof: {error}", file=sys.stderr, flush=True)
        except Exception as err:  # a bug of ours: the appends stop, the run goes on measuring in memory
            error = f"the journal stopped ({type(err).__name__}: {err}); the run goes on"
            if not say:
                break
            print(f"pinprof: {error}", file=sys.stderr, flush=True)
    cpu_ms = time.process_time() * 1e3
    return {
        "rows": journal.rows,
        "error": error,
        "errno": code,
        "cpu_ms": round(cpu_ms, 3),
        "start_ms": round(start_ms, 3),
    }


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the group: the profiled process decides
    said = serve(Path(sys.argv[1]), sys.stdin.buffer, say=sys.argv[2:] != ["quiet"])
    sys.stdout.write(json.dumps(said) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
