"""The GPU clocks: what times a batch's copies and its step, behind one interface.

- ``gpu_clock``: the interface (``GpuClock``), what a clock is asked in a batch's order;
- ``by_cupti_copies`` (the default where CUPTI runs), ``by_cupti``, ``by_events``, ``by_host``:
  CUPTI's memcpy records and the step's events, CUPTI's memcpy and kernel records
  (``PINPROF_KERNELS=1``), CUDA events, the host's clock (no GPU);
- ``choice``: the one place the clock is chosen: CUPTI's records started before the script's CUDA
  work where they can be had (and why not where they cannot), a profiler's clocks (``Clocks``), and
  each batch's;
- ``cupti/``: the CUPTI recorder the ``by_cupti*`` clocks read.

No module outside this package asks which clock runs (``tests/test_layers.py``). May import what
``profiler.capture`` may. This ``__init__`` imports nothing.
"""
