"""SIGTERM as an exception in the main thread, so that reports are written as for Ctrl-C."""
from __future__ import annotations

import signal
from typing import Any


class Terminated(Exception):
    """SIGTERM arrived."""


def _on_sigterm(signum: int, frame: object) -> None:
    raise Terminated("terminated by SIGTERM")


def install_sigterm() -> Any:
    """Route SIGTERM to ``Terminated``; returns the previous handler (None off the main thread)."""
    try:
        return signal.signal(signal.SIGTERM, _on_sigterm)
    except ValueError:  # signals can only be set from the main thread; leave them alone elsewhere
        return None


def restore_sigterm(previous: Any) -> None:
    if previous is not None:
        try:
            signal.signal(signal.SIGTERM, previous)
        except ValueError:
            pass
