"""An older checkout measured beside this one: the ``--baseline PATH`` of the benchmarks in ``scripts/``.

Each side runs in processes of its own, with its checkout first on ``PYTHONPATH`` (an editable install's
finder comes after it), so a change to the hot path shows against the commit before it, side by side
on one machine.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

HINT = "git worktree add PATH <commit>"


def checkout(path: str) -> str:
    """``path`` made absolute, once it holds a ``profiler`` package; else the script stops, saying how to
    make one."""
    root = os.path.abspath(path)
    if not os.path.isfile(os.path.join(root, "profiler", "__init__.py")):
        raise SystemExit(f"--baseline {path}: no profiler package there (make one: {HINT})")
    return root


def env_for(root: str, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: this process's) with the checkout at ``root`` first on ``PYTHONPATH``."""
    base = dict(os.environ if env is None else env)
    rest = base.get("PYTHONPATH", "")
    base["PYTHONPATH"] = root + (os.pathsep + rest if rest else "")
    return base


def check_package(line: str, root: str, side: str) -> None:
    """A child's ``package <file>`` line (``profiler.__file__``): the script stops unless that file is
    the checkout's at ``root``, so a side never passes for the other."""
    path = os.path.abspath(line.split(" ", 1)[1].strip())
    if not path.startswith(os.path.abspath(root) + os.sep):
        raise SystemExit(f"{side}: imported {path}, not the checkout at {root}")
