"""Analysis: timeline DataFrames -> statistics and diagnoses, as data (rendering is ``profiler.render``).

Holds per-scenario statistics (``summary``), the pinned rate a scenario would reach (``rates``), the
diagnosis data types (``findings``), the bottleneck rules (``rules``), the per-scenario diagnosis
(``diagnose``), the mode comparison (``compare``) and the findings across ranks (``ranks``).

May import: numpy, pandas, the foundation modules and ``profiler.timeline``. Never torch,
``capture``, ``render``, ``report``, ``nsys``, ``drivers``, ``bench`` or ``cli``.
"""
