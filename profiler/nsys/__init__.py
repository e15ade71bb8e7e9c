"""Nsight Systems: running a command under nsys (``run``), what an SQLite export holds across
versions (``schema``), the import into pinprof's per-batch table (``importer``) and the comparison
with pinprof's own figures (``compare``).

May import: numpy, pandas, the foundation modules, ``profiler.timeline``, ``profiler.analysis``,
``profiler.render`` and ``profiler.report``. Never torch, ``capture``, ``drivers``, ``bench`` or ``cli``.
"""
