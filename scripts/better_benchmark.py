#!/usr/bin/env python3
"""The "better" benchmark people quote: batch 1024, 6 workers, non_blocking=pin_memory, 100 ms CPU work.

Instrumented by pinprof; prints the per-phase breakdown and the diagnosis (profiler/bench/quoted.py has the
exact arguments). Extra arguments go to `pinprof run`.

    python scripts/better_benchmark.py --out reports/better
    pinprof nsys --out reports/better-nsys -- python scripts/better_benchmark.py --out reports/better-nsys/run
"""

import sys

from profiler.bench.quoted import run_quoted

if __name__ == "__main__":
    sys.exit(run_quoted("better", sys.argv[1:]))
