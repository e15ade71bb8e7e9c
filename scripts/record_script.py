#!/usr/bin/env python3
"""Record what the CUPTI backend sees of a whole ``pinprof profile`` run of a script, to replay its
attribution on a CPU (``tests/test_cupti_records.py``'s replay): the raw activity buffers, each
buffer's clock pair, and every batch as the hooks handed it over, beside the run's own report.

    python scripts/record_script.py --out DIR -- python3 scripts/resnet_train.py --model small ...

Writes ``DIR/recording.npz`` (as ``scripts/record_cupti.py`` does) and the report under ``DIR/report``.
The recording holds every buffer of the run: about 14 MB for 600 steps of the short step.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch
from record_cupti import save_tap

from profiler.capture.clocks import choice as backend
from profiler.drivers import script
from profiler.settings import current


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="folder for recording.npz and report/")
    ap.add_argument("cmd", nargs=argparse.REMAINDER, help="-- the script's command line")
    args = ap.parse_args()
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if cmd[:1] and Path(cmd[0]).name.startswith("python"):
        cmd = cmd[1:]  # pinprof profile takes the script and its arguments
    if not cmd:
        ap.error("give the script's command after --")
    os.environ["PINPROF_BACKEND"] = "cupti"  # asked for by name: fail below rather than fall back
    current.cache_clear()
    rec = backend.start(torch.device("cuda"))
    if rec is None or not rec.active:
        sys.exit(f"CUPTI did not start: {backend.describe()}")
    rec.tap = []
    code = script.profile(cmd, args.out / "report", plots=False)
    saved = save_tap(rec, {}, args.out)
    print(f"exit {code}; {saved}; {backend.describe()}")


if __name__ == "__main__":
    main()
