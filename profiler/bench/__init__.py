"""Bench: ``pinprof run``'s scenario matrix (``options``, ``runner``), the sizes it serves
(``limits``), what it keeps however it ends (``keeping``), the end-of-run split (``calibrate``), its datasets and stand-in
workloads, the bandwidth sweep and calibration (``bandwidth``), multi-rank launch
(``distributed``), the two quoted benchmarks (``quoted``) and CUPTI records through torch.profiler
(``cupti``, the independent check), a clock around ``pinprof profile``'s hooks from outside
(``hook_timers``), a recording of CUPTI's buffers replayed through the recorder (``cupti_replay``), and
the older checkout the benchmarks in ``scripts/`` run beside this one (``baseline``), and what their
rounds can tell (``rounds``: the median ratio's interval).

May import: torch, torchvision and every subpackage but ``cli`` (``quoted`` alone runs the CLI).
"""
