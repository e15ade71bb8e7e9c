#!/usr/bin/env bash
# Run pageable and pinned_nb scenarios under Nsight Systems (CUDA + NVTX), with pinprof's own timeline
# in the same folder for the comparison. Usage: scripts/nsys_profile.sh OUTDIR [extra pinprof run args]
# On a machine with only the Nsight Systems target, this leaves OUTDIR/report.qdstrm; import it with
#   pinprof nsys-import OUTDIR/report.qdstrm --compare OUTDIR/run
set -euo pipefail
out=${1:?usage: scripts/nsys_profile.sh OUTDIR}; shift || true
py=${PYTHON:-python3}
"$py" -m profiler nsys --out "$out" -- "$py" -m profiler run --modes pageable,pinned_nb --batch-size 1024 \
  --num-workers 0 --batches 30 --skip 3 --cpu-work-ms 1 --compute-ms 1 --no-plots --out "$out/run" --force "$@"
