"""Bench: pinprof measuring itself, imported by ``scripts/`` and ``tests/`` only, never by the package.
The two quoted benchmarks as fixed ``pinprof run`` arguments (``quoted``), CUPTI records through
torch.profiler (``cupti``, the independent check), a clock around ``pinprof profile``'s hooks from
outside (``hook_timers``), a recording of CUPTI's buffers replayed through the recorder
(``cupti_replay``, ``corr_order``), the older checkout the benchmarks in ``scripts/`` run beside this
one (``baseline``), and what their rounds can tell (``rounds``: the median ratio's interval).

May import: torch, torchvision and every subpackage but ``cli`` (``quoted`` alone runs the CLI).
"""
