"""Render: timelines and diagnoses -> what people read: Markdown (``markdown``), JSON (``json``),
PNG plots (``plots``, matplotlib imported when drawing), the Chrome trace (``trace``), nsys
comparison lines (``compare``), the lanes pictures use (``lanes``) and one palette (``palette``).

May import: numpy, pandas, matplotlib, the foundation modules, ``profiler.timeline`` and
``profiler.analysis``. Never torch, ``capture``, ``report``, ``nsys``, ``drivers``, ``bench`` or ``cli``.
"""
