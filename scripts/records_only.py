#!/usr/bin/env python3
"""A script run with CUPTI's activity records on, as ``pinprof profile`` enables them, and nothing else
of pinprof's: no hooks, no rows, no markers, no parsing. Each buffer CUPTI completes is given back
unread (``scripts/bench_launch_cost.py``'s ``start_records``), so what the script pays here is CUPTI's
and the driver's own cost: the floor under ``pinprof profile``'s overhead while CUPTI is its GPU clock.

    python scripts/records_only.py [--memcpy-only | --none] -- python SCRIPT ARGS

``--memcpy-only`` enables the memcpy records alone, without the kernel records. ``--none`` enables no
record at all: the script run by pinprof's runner (``drivers.script.run_target``) and nothing else, the
floor under every profiled process that is not CUPTI's.

``scripts/bench_process_overhead.py --records-only`` runs it beside the bare script and ``pinprof
profile``, process against process.
"""

from __future__ import annotations

import sys

from bench_launch_cost import start_records

from profiler.capture.clocks.cupti.lib import CuptiCallError
from profiler.drivers.script import parse_target, run_target


def main() -> None:
    argv = sys.argv[1:]
    mode = argv[0] if argv[:1] in (["--memcpy-only"], ["--none"]) else None
    target = parse_target(argv[1:] if mode else argv)  # a bad command is refused before CUPTI starts
    if mode != "--none":
        try:
            # before the script's CUDA work, as pinprof profile starts CUPTI
            start_records(latency=False, kernels=mode is None)
        except CuptiCallError as err:  # no GPU, or CUPTI held by another client: no figure, said so
            sys.exit(f"records_only: CUPTI's records could not be enabled ({err}); this needs a CUDA GPU")
    run_target(target)


if __name__ == "__main__":
    main()
