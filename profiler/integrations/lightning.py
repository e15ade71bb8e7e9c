"""``PinprofCallback``: one line in a Lightning ``Trainer`` profiles its input pipeline.

    from profiler.integrations.lightning import PinprofCallback  # also: from profiler import PinprofCallback
    trainer = L.Trainer(callbacks=[PinprofCallback(out="reports/my-fit")])

The automatic hooks (``profiler.capture.auto_hooks``) go on when ``fit`` starts and come off when it
ends or raises; the report folder is written then (``profiler.drivers.session_report``), partial when
``fit`` raised, with the events clock's copies split as ``pinprof profile`` splits them
(``profiler.drivers.calibrate.split_profiled``). Every batch the Trainer iterates and every host-to-device copy it makes of it
(Lightning's ``batch_to_device``) is recorded, as under ``pinprof profile``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import lightning

from profiler.capture import auto_hooks
from profiler.capture.auto_session import AutoSession
from profiler.drivers.calibrate import split_profiled
from profiler.drivers.saving import claim_out
from profiler.drivers.session_report import write_session_report
from profiler.report.claim import release


class PinprofCallback(lightning.Callback):  # type: ignore[misc]  # lightning ships no stubs here
    """Profile ``Trainer.fit`` into ``out`` (see the module docstring). ``skip``: the first batches of
    each loader flagged warm-up; ``batches``: at most that many recorded per loader."""

    def __init__(
        self, out: str | Path, skip: int | None = None, batches: int | None = None, plots: bool = True
    ) -> None:
        self.out, self.skip, self.batches, self.plots = Path(out), skip, batches, plots
        self._session: AutoSession | None = None
        self._lock: Any = None

    def on_fit_start(self, trainer: Any, pl_module: Any) -> None:
        self._lock = claim_out(self.out)
        device = pl_module.device if pl_module.device.type == "cuda" else None
        self._session = AutoSession(device, skip=self.skip, limit=self.batches, run=self.out.name)
        auto_hooks.start(self._session)

    def on_fit_end(self, trainer: Any, pl_module: Any) -> None:
        self._finish(None, None)

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        self._finish(type(exception).__name__, str(exception)[:500])

    def _finish(self, why: str | None, error: str | None) -> None:
        session, self._session = self._session, None
        if session is None:
            return
        auto_hooks.stop()
        try:
            write_session_report(
                session,
                self.out,
                list(sys.argv),
                interrupted_by=why,
                error=error,
                plots=self.plots,
                split=lambda tl, info: split_profiled(tl, session.device, info, print),
            )
        finally:
            release(self._lock)
