"""CUDA-only pieces of the capture: pooled events and raw event calls (``events``), clock anchors
(``anchor``), the stream gate (``gate``) and the direct ``cudaMemcpyAsync`` (``cudart``).

May import what ``profiler.capture`` may; tested on the GPU machine (``pytest -m gpu``).
"""
