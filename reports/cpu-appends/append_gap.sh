#!/usr/bin/env bash
# The append-gap loop of tests/test_own_time.py (40 ms steps, an append every 0.25 s) under pinprof
# profile, 8 alternated rounds of the checkout at $1 (a worktree of 56d0685) and this one; prints
# per run the checkout, the steady median and max batch_ms less gc_ms, and max / median.
# bash reports/cpu-appends/append_gap.sh /tmp/base   (run from the repository's root)
set -euo pipefail
here=$(pwd)
for i in 1 2 3 4 5 6 7 8; do
  for side in "$1" "$here"; do
    out=$(mktemp -d)
    (cd "$side" && PINPROF_FLUSH_S=0.25 "$here/.venv/bin/python" -m profiler profile --out "$out/r" --no-plots -- \
      python "$here/tests/scripts/waiting_steps.py" --batches 36 --step-ms 40 >/dev/null 2>&1)
    "$here/.venv/bin/python" -c "
import pandas as pd
t = pd.read_csv('$out/r/timeline.csv'); s = t[~t.warmup].iloc[:-1]; o = s.batch_ms - s.gc_ms
print('$side', round(o.median(), 2), round(o.max(), 2), round(o.max() / o.median(), 3))"
    rm -rf "$out"
  done
done
