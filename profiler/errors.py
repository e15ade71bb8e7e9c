"""Every error and warning pinprof raises on purpose, under one base.

``pinprof`` (``profiler.cli``) catches ``PinprofError`` alone and exits with its ``exit_code`` after one
line that names the bad value and the fix; anything else is a bug and is shown with its traceback.
Each class also derives from the builtin a caller would catch without knowing pinprof (``ValueError``
for a bad value, ``TypeError`` for a bad batch, ...), so library code that catches those keeps working.
Imports nothing: every layer may raise these.
"""

from __future__ import annotations


class PinprofError(Exception):
    """Base of pinprof's errors; the message names the value and the fix."""

    exit_code = 2  # the CLI's exit status: 2 for bad input (argparse's), 1 for a run that failed


class UsageError(PinprofError, ValueError):
    """A value given to pinprof (an argument, an option, a setting) is wrong."""


class MisuseError(PinprofError, RuntimeError):
    """The API was called out of order (e.g. ``to_device`` outside ``prof.batches``)."""


class DeviceError(UsageError):
    """The device asked for does not exist here."""


class OutputExistsError(PinprofError, FileExistsError):
    """A report folder already holds files and overwriting was not asked for."""


class OutputNotWritableError(PinprofError, PermissionError):
    """A report folder cannot be created or written."""


class ReportError(PinprofError, ValueError):
    """A report file is missing, unreadable or not what pinprof writes."""


class DatasetError(PinprofError, ValueError):
    """A dataset cannot be built from the options given."""


class BatchTypeError(PinprofError, TypeError):
    """A batch holds something ``to_device`` cannot move."""


class NsysError(PinprofError, RuntimeError):
    """Nsight Systems is missing or one of its steps failed."""


class PinnedMemoryError(PinprofError, RuntimeError):
    """Page-locked host memory could not be allocated."""


class MissingDependencyError(PinprofError, RuntimeError):
    """An optional package is needed for this step; the message names the pip install."""


class RunFailed(PinprofError, RuntimeError):
    """The profiled loop raised; the partial report was written before this was raised."""

    exit_code = 1


class WriteFailed(RunFailed):
    """A run could not write its report any more (a full disk); what was written before is kept."""


class PinprofWarning(UserWarning):
    """A setting that makes a mode do something other than its name says."""


class PinprofHazardWarning(UserWarning):
    """A data race around a ``non_blocking`` copy (``profiler.capture.hazards``)."""
