#!/usr/bin/env python3
"""Cut a CUPTI recording (``recording.npz`` of ``scripts/record_script.py`` or ``record_cupti.py``) to
its first N activity buffers, with the batches the recorder had been handed before the last of them
was taken: small enough for ``tests/data``, still replayable in the order the recorder met it.

    python scripts/trim_recording.py IN.npz OUT.npz --buffers 4
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--buffers", type=int, required=True, help="activity buffers to keep, from the first")
    args = ap.parse_args()
    rec = np.load(args.src)
    meta = json.loads(str(rec["meta"]))
    n = args.buffers
    if not 0 < n <= len(rec["buffer_lengths"]):
        ap.error(f"--buffers {n}: the recording has {len(rec['buffer_lengths'])} buffers")
    lengths = rec["buffer_lengths"][:n]
    taken = meta["clocks"][n - 1]["host_ns"]
    meta = {**meta, "clocks": meta["clocks"][:n], "batches": [b for b in meta["batches"] if b["end_ns"] < taken]}
    if meta.get("markers"):  # markers issued before then (those after could not be in the buffers kept)
        meta["markers"] = [m for m in meta["markers"] if m[0] < taken]
    np.savez_compressed(
        args.out,
        buffer_bytes=rec["buffer_bytes"][: int(lengths.sum())],
        buffer_lengths=lengths,
        meta=np.array(json.dumps(meta)),
    )
    print(f"{n} buffers, {int(lengths.sum())} bytes, {len(meta['batches'])} batches into {args.out}")


if __name__ == "__main__":
    main()
