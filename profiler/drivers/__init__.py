"""Drivers: one way in each, what a verb of the CLI runs. ``pinprof profile`` of an unmodified script,
in-process (``script``, with the interpreter's flags passed through: ``interpreter``), and the report folder of an automatic profile (``session_report``, also the Lightning callback's); ``pinprof tune``'s
runs (``tune``, each a process: ``trial_process``); ``pinprof run``'s scenario matrix (``options``,
``runner``), the sizes it serves (``limits``), what it keeps however it ends (``keeping``), the
end-of-run split (``calibrate``), its datasets and stand-in workloads (``datasets``, ``workload``) and
its multi-rank launch (``distributed``); the bandwidth sweep and calibration (``bandwidth``); the library's ``TransferProfiler`` with its
``out=`` folder (``library``), and how a profiler's folder is written (``saving``).

May import: torch, torchvision and every subpackage but ``bench`` and ``cli``.
"""
