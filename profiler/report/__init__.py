"""Report: the report folder: its file names and readers (``files``), the whole folder written
(``folder``), meta.json (``meta``), the timeline a running run appends to (``journal``) and the
process that appends its rows (``journal_process``), the folder lock (``claim``), ranks merged
(``merge``) and writing with signals held (``signals``).

May import: numpy, pandas, the foundation modules, ``profiler.timeline``, ``profiler.analysis`` and
``profiler.render``. Never torch, ``capture``, ``nsys``, ``drivers``, ``bench`` or ``cli``.
"""
