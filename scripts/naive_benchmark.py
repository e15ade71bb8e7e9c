#!/usr/bin/env python3
"""The naive benchmark people quote: batch 64, no workers, blocking .cuda(), pin_memory off and on.

Instrumented by pinprof; prints the per-phase breakdown and the diagnosis (profiler/bench/quoted.py has the
exact arguments). Extra arguments go to `pinprof run`.

    python scripts/naive_benchmark.py --out reports/naive
    pinprof nsys --out reports/naive-nsys -- python scripts/naive_benchmark.py --out reports/naive-nsys/run
"""

import sys

from profiler.bench.quoted import run_quoted

if __name__ == "__main__":
    sys.exit(run_quoted("naive", sys.argv[1:]))
