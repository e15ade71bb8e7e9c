"""CUPTI's activity records as pinprof's GPU clock: exact copy and kernel times from the device itself.

- ``lib``: libcupti loaded through ctypes (torch's own ``nvidia-cuda-cupti`` wheel, so its version is
  the CUDA runtime's), the few functions pinprof calls, and why it cannot be used when it cannot;
- ``layout``: the records' binary layout, and raw activity buffers parsed into numpy columns;
- ``attribute``: records to batches (a copy by its call, a kernel by the host time of its launch);
- ``marker``: a tiny copy (or an empty kernel) on pinprof's own stream at each step window's edge,
  whose correlation id bounds the kernels launched before and after it (in place of launch times);
- ``marker_table``: the markers matched to their records, appended and dropped without copying all;
- ``batches``: a batch as the recorder holds it, and what its row reads of its records (copy times,
  memory kind, the driver's staging, the step's kernels);
- ``records``: records and the batches waiting for them, matched (no CUPTI call: replayed on a CPU);
- ``clock``: CUPTI's timestamps onto the host's clock;
- ``recorder``: the process's one CUPTI client: buffers, rows waiting for records, the handover to
  torch.profiler.

This ``__init__`` imports nothing, as ``profiler.capture``'s.
"""
