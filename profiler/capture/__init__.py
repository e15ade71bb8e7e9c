"""Capture: the loop wrapper that measures, and everything it times with.

Holds the profiler object (``profiler``), its phase contexts (``phases``), the copies of each mode
(``device_copy``, ``staged_copy``, ``staging``), the record store (``store``), pending CUDA events
(``pending``), its rows read as a timeline or flushed to disk (``rows``), the batch walk (``batch_tree``), the DataLoader pin hook, hazard detection, NVTX, the
host clock, devices and environment, ``cuda/`` (events, clock anchors, the stream gate, the direct
runtime copy), and ``clocks/``: the GPU clock of each batch (CUDA events, CUPTI's activity records or,
with no GPU, the host's), chosen there and asked nowhere else.

May import: torch, numpy, pandas, the foundation modules (``profiler.errors``, ``settings``,
``modes``, ``units``, ``atomic``), ``profiler.timeline`` and
``profiler.render.palette`` (NVTX colours). Never ``analysis``, ``nsys``, ``drivers``, ``bench`` or ``cli``.
This ``__init__`` imports nothing, so ``profiler.capture.x`` loads only what ``x`` needs.
"""
