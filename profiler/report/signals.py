"""SIGTERM as an exception in the main thread, so that reports are written as for Ctrl-C; signals held
while a report is written, so that a second one cannot leave it unwritten."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

T = TypeVar("T")


class Terminated(BaseException):
    """SIGTERM arrived. A BaseException, as KeyboardInterrupt is, so an ``except Exception`` does not
    take it for an error and go on: pinprof's hooks guard their own code so, and a SIGTERM that landed
    inside them was read as "profiling stopped after an internal error" while the program ran on (1
    run in 40 of ``tests/scripts/endless.py`` under load, 2026-12-05); the program's own
    ``except Exception`` would swallow it as well, where the default action ends the process."""


def _on_sigterm(signum: int, frame: object) -> None:
    raise Terminated("terminated by SIGTERM")


def install_sigterm() -> Any:
    """Route SIGTERM to ``Terminated``; returns the previous handler (None off the main thread). A
    ``Terminated`` or ``KeyboardInterrupt`` that Python drops is raised again (``_Redeliver``)."""
    try:
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
    except ValueError:  # signals can only be set from the main thread; leave them alone elsewhere
        return None
    if not isinstance(sys.unraisablehook, _Redeliver):
        sys.unraisablehook = _Redeliver(sys.unraisablehook)
    return previous


# How long after a dropped stop the signal is raised again: long enough for the code that dropped it
# (a garbage-collection callback, a __del__) to have returned; if it lands in such code again, it is
# dropped and raised again, until it lands where it stops the program.
REDELIVER_S = 0.01


class _Redeliver:
    """``sys.unraisablehook``: a stop raised where Python cannot propagate it is raised again.

    A Python signal handler runs at the next bytecode of the main thread, wherever that is. Inside a
    garbage-collection callback (``profiler.capture.gc_pauses``, which pinprof profile installs) or a
    ``__del__``, what it raises is printed as "Exception ignored in" and dropped, and the program runs
    on: ``pinprof profile`` of ``tests/scripts/endless.py`` ran past its SIGTERM so (a fresh-clone CI
    run, 2026-12-05). Here the same signal is raised again, ``REDELIVER_S`` later, from a thread of its
    own (its Python handler still runs in the main thread), and the dropped exception is not printed.
    Every other unraisable exception goes to the hook that was in place."""

    def __init__(self, previous: Callable[[Any], object]) -> None:
        self.previous = previous

    def __call__(self, unraisable: Any) -> None:
        kind = unraisable.exc_type
        signum = (
            signal.SIGTERM
            if kind is not None and issubclass(kind, Terminated)
            else signal.SIGINT
            if kind is not None and issubclass(kind, KeyboardInterrupt)
            else None
        )
        if signum is None:
            self.previous(unraisable)
            return
        timer = threading.Timer(REDELIVER_S, signal.raise_signal, (signum,))
        timer.daemon = True
        try:
            timer.start()
        except RuntimeError:  # no new thread at the interpreter's exit: say what was dropped, as before
            self.previous(unraisable)


def restore_sigterm(previous: Any) -> None:
    if previous is not None:
        try:
            signal.signal(signal.SIGTERM, previous)
        except ValueError:
            pass


# Signals whose Python handlers raise in the main thread at any bytecode: Ctrl-C, SIGTERM (above), and
# the DataLoader's SIGCHLD handler, which raises "DataLoader worker ... is killed" again each time a
# worker exits once one has died -- including while the shutdown after the first error joins the others.
_HELD = tuple(s for s in (getattr(signal, n, None) for n in ("SIGINT", "SIGTERM", "SIGCHLD")) if s is not None)
_SIGCHLD = getattr(signal, "SIGCHLD", None)


class SignalsHeld:
    """``with SignalsHeld() as hold:`` Python-level signal handlers are replaced by a note-taker.

    ``hold.arrived`` lists the signals that came meanwhile; ``hold.replay()`` hands them, once each,
    to the handlers that were in place. ``hold.ready`` is True once every handler is replaced (or,
    off the main thread where handlers cannot be set, once that is known).
    """

    def __init__(self) -> None:
        self.arrived: list[int] = []
        self.previous: dict[int, Any] = {}
        self.ready = False

    def _note(self, signum: int, frame: object) -> None:
        self.arrived.append(signum)

    def __enter__(self) -> SignalsHeld:
        try:
            for s in _HELD:
                if signal.getsignal(s) is None:  # a handler set outside Python: it cannot be put back, leave it
                    continue
                self.previous[s] = signal.signal(s, self._note)
        except ValueError:  # not the main thread: nothing can be held, nothing is changed
            self._restore()
            self.previous = {}
        except BaseException:  # a pending handler ran before all were replaced: put back what was set
            self._restore()
            raise
        self.ready = True
        return self

    def __exit__(self, *exc: object) -> None:
        self._restore()

    def _restore(self) -> None:
        for s, h in self.previous.items():
            signal.signal(s, h)

    def replay(self, late: Callable[[BaseException], None] | None = None) -> None:
        """Deliver what arrived, once each in arrival order. With ``late``, only Python handlers run
        and what they raise goes to ``late`` instead of propagating (no default action is taken)."""
        for s in dict.fromkeys(self.arrived):
            if late is None:
                _deliver(s, self.previous[s])
            elif callable(self.previous[s]):
                try:
                    self.previous[s](s, None)
                except BaseException as err:
                    late(err)


def _deliver(signum: int, handler: Any) -> None:
    """What the process would have done on ``signum`` with ``handler`` installed."""
    if callable(handler):
        handler(signum, None)
    elif handler == signal.SIG_DFL and signum != _SIGCHLD:
        signal.raise_signal(signum)  # the default action (e.g. terminate), the handler being restored


def write_held(
    write: Callable[[], T],
    replay: bool = True,
    attempts: int = 3,
    late: Callable[[BaseException], None] | None = None,
    early: BaseException | None = None,
    on_held: Callable[[], None] | None = None,
) -> T:
    """``write()`` with signals held, so that a report is complete however the run ends.

    A handler can still fire in the instant before the hold is in place (a signal already pending
    runs at the next bytecode); what it raises then is kept and ``write`` is tried again. Once
    written, with ``replay`` the signals that came meanwhile reach their own handlers (a Ctrl-C
    during the write still stops the program, a worker death still raises). With ``replay=False``
    -- for a report written because an exception is already propagating -- nothing more is raised:
    what the handlers (and an early one) raise goes to ``late`` (e.g. to add it as a note to that
    exception: a worker death can first surface as a reset connection), or is dropped without it.
    An error of ``write`` itself is raised at once.

    ``early``: what a handler raised before this call, in a caller's own bytecodes (see
    ``retried_until_held``), dealt with as one raised here before the hold. ``on_held`` is called
    once the hold is in place, before ``write``.
    """
    for attempt in range(attempts):
        hold: SignalsHeld | None = None
        try:
            hold = SignalsHeld()
            with hold:
                if on_held is not None:
                    on_held()
                result = write()
        except BaseException as err:
            if (hold is not None and hold.ready) or attempt + 1 == attempts:
                raise
            early = early or err
            continue
        if replay:
            hold.replay()
            if early is not None:
                raise early
        elif late is not None:
            if early is not None:
                late(early)
            hold.replay(late)
        return result
    raise AssertionError("unreachable")  # the last attempt returns or raises


def retried_until_held(step: Callable[[BaseException | None, Callable[[], None]], T], attempts: int = 3) -> T:
    """``step(early, on_held)``, tried again while what it raised came before its signals were held.

    ``step`` passes both on to ``write_held``. A handler fires at any bytecode once its signal is
    pending, so the caller's own lines before ``write_held``'s hold are exposed too: torch's SIGCHLD
    handler raises for a DataLoader worker that died a few milliseconds after the reset connection
    that surfaced its death, and raised in a ``with`` block's ``__exit__`` it left no report at all
    (``tests/test_reliability.py``). What it raised goes to ``write_held`` as ``early``. An error
    raised once the hold was in place (the write's own) is raised at once.
    """
    early: BaseException | None = None
    for attempt in range(attempts):
        held: list[bool] = []
        try:
            return step(early, partial(held.append, True))
        except BaseException as err:
            if held or attempt + 1 == attempts:
                raise
            early = early or err
    raise AssertionError("unreachable")  # the last attempt returns or raises


def note_on(exc: BaseException) -> Callable[[BaseException], None]:
    """A ``late`` for ``write_held``: what a late handler raised becomes a note on ``exc``, shown
    under its traceback (e.g. "DataLoader worker (pid 7) is killed" under a ConnectionResetError)."""

    def add(err: BaseException) -> None:
        note = f"pinprof: then, while the report was written: {type(err).__name__}: {err}"
        # once: torch's handler says the same for every SIGCHLD after a death, a subprocess's too
        if note not in getattr(exc, "__notes__", ()):
            exc.add_note(note)

    return add
