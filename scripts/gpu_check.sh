#!/usr/bin/env bash
# Everything that needs the GPU, in one call of the device tool (from the repository root):
#   GPU tests (pytest -m gpu), the scenario matrix, the quoted scenarios, the benchmarks.
# Results go under $OUT (default /tmp/pinprof-gpu-check). Carry .whl (the nvtx cp312 wheel) and, for the
# nsys checks, .nsys/target.deb (from scripts/get_nsys.sh); for the hang steps, .dbg (py-spy's manylinux
# wheel, and `apt-get download elfutils libdw1 libelf1 libasm1` from a Debian machine for eu-stack).
set -uo pipefail
OUT=${OUT:-/tmp/pinprof-gpu-check}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
fi
export PYTHONPATH=/tmp/site:$PWD
# Nsight Systems target (capture side); the report is imported on the development machine.
if [ -f .nsys/target.deb ]; then
  mkdir -p /tmp/nsys && dpkg -x .nsys/target.deb /tmp/nsys
  export PINPROF_NSYS=$(find /tmp/nsys -path '*target-linux-x64/nsys' -type f | head -n 1)
fi
log="$OUT/gpu_check.log"
{
  nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.current,pcie.link.width.current --format=csv
  python3 -c 'import torch, nvtx; print("torch", torch.__version__, "cuda", torch.version.cuda, "nvtx", nvtx.__version__ if hasattr(nvtx, "__version__") else "?")'
  steps=${GPU_CHECK_STEPS:-tests run bench}
  for step in $steps; do
    echo "=== $step ($(date +%T))"
    case $step in
      # Each step has a time limit: a hung GPU call must not eat the session's device time.
      # Each test has a limit of its own too (pytest-timeout, on the GPU machine; one test runs a
      # script under a limit of 180 s): a test that hangs prints its threads' stacks and the others
      # still run (test_gpu_cupti's view-0 hung so, once, after the modules before it, 2026-12-05).
      # GPU_TESTS_K: a pytest -k expression, for a call with less device time left than the whole suite
      tests) timeout "${GPU_TESTS_TIMEOUT:-540}" python3 -m pytest -m gpu -v -s -p no:cacheprovider \
               --timeout=${GPU_TEST_LIMIT:-240} --durations=40 ${GPU_TESTS_K:+-k "$GPU_TESTS_K"} tests ;;
      # The whole GPU suite of an older checkout (BASELINE, carried: a folder holding its profiler,
      # tests and scripts) and of this one, in one call: side by side on two GPUs where the machine has
      # two (each suite on its own card and its own cores), one after the other on one. One suite ran
      # past 430 s on an H100 (2026-12-07, cut in test_gpu_split.py), so on one card the two take two
      # calls (SUITES=before, then SUITES=after) on the same warm machine.
      suite-before-after) base=$(cd "${BASELINE:-.base}" && pwd); here=$PWD
        # each with its own temporary and cache folders (the CUPTI shim is built there)
        suite() { (t=$(basename "$3" .txt); cd "$1" && CUDA_VISIBLE_DEVICES=$2 PYTHONPATH=/tmp/site:$1 PINPROF_CACHE=/tmp/cache-$t \
                   timeout "${GPU_TESTS_TIMEOUT:-540}" python3 -m pytest -m gpu -v -s -p no:cacheprovider \
                   --basetemp=/tmp/$t --timeout=${GPU_TEST_LIMIT:-240} tests > "$3" 2>&1
                   echo "exit status $?" >> "$3") }
        if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
          suite "$base" 0 "$OUT/suite-before.txt" & suite "$here" 1 "$OUT/suite-after.txt"; wait
        else  # SUITES: which of the two this call runs (both unless told)
          for f in ${SUITES:-before after}; do d=$here; [ "$f" = before ] && d=$base; suite "$d" 0 "$OUT/suite-$f.txt"; done
        fi
        for f in ${SUITES:-before after}; do echo "-- $f: $(tail -n 2 "$OUT/suite-$f.txt" | tr '\n' ' ')"; done ;;
      run) timeout 180 python3 -m profiler run --out "$OUT/run-default" --force ;;
      quoted) timeout 120 python3 scripts/naive_benchmark.py --out "$OUT/naive" && timeout 120 python3 scripts/better_benchmark.py --out "$OUT/better" ;;
      bench) timeout 180 python3 scripts/bench_overhead.py ;;
      # pinprof profile on a real training step: the hooks' cost side by side, CUPTI per batch, and the
      # report of the unmodified script (README, "Profile your own script").
      # The report as a user meets it: pinprof profile's terminal (start-up found, no --skip), then a
      # before/after compare of one change (0 to 4 workers on a loader whose items wait 3 ms).
      report) timeout 150 python3 -m profiler profile --out "$OUT/profile-resnet" -- \
                python3 scripts/resnet_train.py --steps 60 2>&1 | tee "$OUT/profile-resnet.txt"
              for w in 0 4; do
                timeout 120 python3 -m profiler profile --out "$OUT/fake-w$w" --no-plots -- \
                  python3 tests/scripts/fake_cnn.py --workers $w --io-ms 3 --epochs 1 > "$OUT/fake-w$w.txt" 2>&1
              done
              python3 -m profiler compare "$OUT/fake-w0" "$OUT/fake-w4" | tee "$OUT/compare.txt" ;;
      profile) timeout 170 python3 scripts/bench_profile_overhead.py
               timeout 170 python3 scripts/bench_profile_overhead.py --isolate
               timeout 150 python3 -m profiler profile --out "$OUT/profile-resnet" --skip 5 -- \
                 python3 scripts/resnet_train.py --steps 45 ;;
      # The same unmodified script under Nsight Systems and pinprof profile together: the hooks' NVTX
      # ranges and CUPTI's memcpy records of each batch (import the .qdstrm on the development machine).
      profile-nsys) timeout 200 python3 -m profiler nsys --out "$OUT/profile-nsys" -- python3 -m profiler profile \
                      --out "$OUT/profile-nsys/profile" --skip 5 --no-plots -- python3 scripts/resnet_train.py --steps 30 ;;
      # The diagnosis cases recorded for tests/data: GPU-bound loops (20 ms of compute; 36.75 and 73.5
      # MiB batches) in pinned_nb and prefetch, and a loop bound by the pin thread (55 MiB batches, 1 ms
      # of compute). 7,000 images of 224x224 stay pregenerated (under 1 GiB): the workers only decode.
      cases) timeout 240 python3 -m profiler run --out "$OUT/gpu-bound" --force --modes pinned_nb,prefetch \
               --batch-size 64,128 --image-size 224 --dataset-size 7000 --num-workers 12 --cpu-work-ms 0 --compute-ms 20
             timeout 180 python3 -m profiler run --out "$OUT/pin-bound" --force --modes pinned_nb \
               --batch-size 96 --image-size 224 --dataset-size 7000 --num-workers 12 --cpu-work-ms 0 --compute-ms 1 \
               --batches 60 ;;
      transfer) timeout 180 python3 scripts/bench_transfer.py ;;
      # dict_batches.py's copies in three set-ups (view pinned, dense pageable, dense pinned), rounds of:
      # the bare script under torch.profiler (scripts/copy_anatomy.py, pinprof off), then the same script
      # under pinprof profile with each clock (HIDDEN_CLOCKS=none: the reference alone); each run's medians
      # and verdict.
      hidden) for r in $(seq 1 ${HIDDEN_ROUNDS:-1}); do for v in "view" "dense --no-pin" "dense"; do n=$(echo $v | tr -d ' -')
                timeout 120 python3 scripts/copy_anatomy.py --csv "$OUT/hidden/r$r-$n-ref.csv" -- \
                  tests/scripts/dict_batches.py --layout $v --steps 60 2>&1 | grep -E "copy_anatomy|steady mean|Error"
                for clock in ${HIDDEN_CLOCKS:-cupti events}; do d="$OUT/hidden/r$r-$n-$clock"; [ "$clock" = none ] && continue
                  PINPROF_BACKEND=$clock timeout 120 python3 -m profiler profile --out "$d" --no-plots -- \
                    python3 tests/scripts/dict_batches.py --layout $v --steps 60 > "$d.txt" 2>&1
                  echo "-- r$r $v ($clock): $(grep -h 'steady mean' "$d.txt")"
                  python3 scripts/split_medians.py "$d"
                  grep -hE "Headline|Verdict" "$d/diagnosis.md" | head -n 4; done; done; done ;;
      # The split's GPU tests; their report folders kept under $OUT (tests/data recordings come from them).
      hidden-tests) timeout 560 python3 -m pytest -m gpu -v -s -p no:cacheprovider --timeout=240 \
                      --basetemp="$OUT/hidden-tests" tests/test_gpu_hidden_copies.py
                    # each run's timeline.csv one folder deep, so that the device tool brings it back
                    find "$OUT/hidden-tests" -path '*current*' -prune -o -name timeline.csv -print | while read -r f; do
                      cp "$f" "$OUT/hidden-$(basename "$(dirname "$(dirname "$f")")")-$(basename "$(dirname "$f")").csv"; done ;;
      # The view under pinprof profile (CUPTI), run after run: the split's parts over the calls and tail,
      # batch by batch, and each batch past the test's 5% (scripts/split_medians.py).
      view-split) for r in $(seq 1 ${SPLIT_ROUNDS:-3}); do
                    PINPROF_BACKEND=cupti timeout 100 python3 -m profiler profile --out "$OUT/view-split-$r" --no-plots -- \
                      python3 tests/scripts/dict_batches.py --layout view --steps 60 > "$OUT/view-split-$r.txt" 2>&1
                    echo "-- run $r"; python3 scripts/split_medians.py "$OUT/view-split-$r"; done ;;
      # How far the view's copy (its layout copy above all) moves between identical processes: the bare
      # script under torch.profiler and under pinprof profile (CUPTI), alternated, torch's intra-op threads
      # at their default and at one (OMP_NUM_THREADS=1).
      hidden-spread) nproc; for r in $(seq 1 ${SPREAD_ROUNDS:-3}); do for th in default 1; do
                       env_th=""; [ "$th" = 1 ] && env_th="OMP_NUM_THREADS=1"
                       echo "-- r$r threads $th: reference"
                       env $env_th timeout 120 python3 scripts/copy_anatomy.py -- tests/scripts/dict_batches.py \
                         --layout view --steps 60 2>&1 | grep -E "copy_anatomy|Error"
                       d="$OUT/spread/r$r-t$th"; mkdir -p "$OUT/spread"
                       env $env_th PINPROF_BACKEND=cupti timeout 120 python3 -m profiler profile --out "$d" --no-plots \
                         -- python3 tests/scripts/dict_batches.py --layout view --steps 60 > "$d.txt" 2>&1
                       echo "-- r$r threads $th: pinprof (cupti) $(grep -h 'steady mean' "$d.txt")"
                       python3 scripts/split_medians.py "$d" | grep medians; done; done ;;
      # PinprofCallback in a Lightning fit on the GPU, beside pinprof profile of the same script: rows,
      # bytes and clock of each.
      lightning-callback) timeout 150 python3 tests/scripts/lightning_fit.py --steps 30 --matmuls 4 \
                            --callback-out "$OUT/lightning-callback"
                          timeout 150 python3 -m profiler profile --out "$OUT/lightning-profile" --no-plots -- \
                            python3 tests/scripts/lightning_fit.py --steps 30 --matmuls 4 | tail -n 3
                          for d in lightning-callback lightning-profile; do python3 -c "import pandas as pd, sys
t = pd.read_csv(sys.argv[1] + '/timeline.csv'); s = t[~t.warmup.astype(bool)]
print(sys.argv[1].split('/')[-1], len(t), 'rows, bytes', sorted(set(t.bytes)), 'clock', set(t.gpu_clock),
      'compute_ms median', round(s.compute_ms.median(), 4), 'h2d_gpu_ms median', round(s.h2d_gpu_ms.median(), 4))" "$OUT/$d"; done ;;
      # What a DataLoader worker's handoff costs a batch on this host (rules.pace.HANDOFF_MS reads it).
      handoff) timeout 120 python3 scripts/bench_worker_handoff.py ;;
      # Pinned copies after the link idled, without and with bandwidth.measure's sustained warm-up.
      link-warm) timeout 90 python3 scripts/bench_link_warmup.py ;;
      # Where the 1 MiB pinned blocking copies' slow tail falls (position, tensor, SM clock), pinprof off.
      copy-tail) timeout 240 python3 scripts/copy_tail.py --rounds ${TAIL_ROUNDS:-12} ;;
      # The view case with torch.profiler's API records on pinprof's side too (launch times): does the
      # records' configuration move a staged copy's GPU time?
      view-latency) for v in 0 1 0 1; do PINPROF_CUPTI_LATENCY=$v timeout 120 python3 -m pytest -m gpu -s -q \
                      -p no:cacheprovider tests/test_gpu_cupti.py -k "view-0 or accelerate-0" 2>&1 | grep -E "(view|accelerate)-0: " | sed "s/^/latency $v: /"; done ;;
      # The view case per copy: pinprof's raw memcpy records, its rows, torch.profiler's records.
      view-records) timeout 150 python3 scripts/view_records.py --rounds ${VIEW_ROUNDS:-8} ;;
      # torch.profiler's records of the same copies with pinprof's hooks on and off: do the hooks change them?
      hook-perturb) PINPROF_BACKEND=events timeout 240 python3 scripts/hook_perturb.py --rounds ${PERTURB_ROUNDS:-16} ;;
      # The CUPTI backend: a recording for the CPU tests (tests/data/h200_cupti), its agreement with
      # torch.profiler, and its cost against the events' side by side.
      record-cupti) timeout 120 python3 scripts/record_cupti.py --out "$OUT/record-cupti" ;;
      cupti) timeout 400 python3 -m pytest -m gpu -v -s -p no:cacheprovider --timeout=${GPU_TEST_LIMIT:-240} \
               tests/test_gpu_cupti.py ;;
      backends) timeout 300 python3 scripts/bench_overhead.py --backends --backend-rounds ${BACKEND_ROUNDS:-4} ;;
      # The library's CUPTI recorder cost split in one process: its markers, its recorder thread's reading.
      recorder-parts) timeout 240 python3 scripts/bench_recorder_parts.py --rounds ${PARTS_ROUNDS:-9} ;;
      # What one CUPTI marker costs the loop's thread (kernel, copy), against an event record.
      marker-cost) timeout 120 python3 scripts/bench_marker_cost.py ;;
      # The recorder's cost, this checkout against an older one (BASE_CLOCK on both: events unless
      # told cupti), side by side. Carry the older package as .base:
      #   mkdir .base && git archive COMMIT profiler | tar x -C .base
      bench-base) timeout 300 python3 scripts/bench_overhead.py --backends --backend-rounds ${BACKEND_ROUNDS:-4} \
                    --baseline "${BASELINE:-.base}" --clock ${BASE_CLOCK:-events} ;;
      # Where the recorder's cost goes: py-spy (carried as .dbg/*.whl) samples the no-op-loader loop of
      # bench_overhead.py --recorder-only, without pausing it; scripts/spy_lines.py sums the samples.
      recorder-spy) python3 -m pip install -q --no-index --no-deps --target /tmp/dbg .dbg/*.whl
                    for clock in ${SPY_CLOCKS:-events cupti}; do
                      PINPROF_BACKEND=$clock timeout 240 /tmp/dbg/bin/py-spy record -r ${SPY_RATE:-500} -f raw \
                        --nonblocking -o "$OUT/spy-$clock.txt" -- python3 scripts/bench_overhead.py --recorder-only \
                        --recorder-batches ${SPY_BATCHES:-10000}
                    done ;;
      # Where the resident loop's cost goes, under pinprof profile (the hooks) and the library (CUPTI).
      spy-resident) python3 -m pip install -q --no-index --no-deps --target /tmp/dbg .dbg/*.whl
                    timeout 60 /tmp/dbg/bin/py-spy record -r 500 -f raw --nonblocking -o "$OUT/spy-resident-profile.txt" -- \
                      python3 -m profiler profile --out "$OUT/spy-resident" --no-plots -- python3 scripts/resident_loop.py --steps 4000
                    timeout 60 /tmp/dbg/bin/py-spy record -r 500 -f raw --nonblocking -o "$OUT/spy-resident-lib.txt" -- \
                      python3 scripts/resident_loop.py --library --blocks 200 ;;
      # A whole pinprof profile run of the short step with CUPTI's raw buffers kept, to replay on a CPU.
      record-short) timeout 150 python3 scripts/record_script.py --out "$OUT/record-short" -- \
                      python3 scripts/resnet_train.py --model small --image-size 96 --batch-size 128 --steps 600 --warm 100 ;;
      # How far identical bare processes of the short step differ, free and held to 8 cores, and why.
      noise-short) lscpu | grep -E '^(Model name|CPU\(s\)|Thread|Core|Socket|NUMA|CPU max|CPU min)'; nvidia-smi topo -m
                   cat /sys/fs/cgroup/cpu.max 2>/dev/null; cat /sys/devices/system/cpu/cpu0/cpufreq/scaling_governor 2>/dev/null
                   short="scripts/resnet_train.py --model small --image-size 96 --batch-size 128 --steps 400 --warm 100"
                   for r in 1 2 3 4; do echo "free: $(timeout 60 python3 $short | tail -n 1)"
                     echo "cores 0-7: $(timeout 60 taskset -c 0-7 python3 $short | tail -n 1)"; done ;;
      # The host cost of each call on the recorder's per-batch path, and of its alternatives.
      primitives) timeout 150 python3 scripts/bench_primitives.py ;;
      # The same with CUPTI's records on (memcpy alone: the default clock's; then with kernels), one process
      # each, beside a process without: what CUPTI adds to each CUDA call on the loop's thread.
      primitives-records) for r in none memcpy kernels none memcpy; do
                            timeout 100 python3 scripts/bench_primitives.py --calls 10000 --reps 5 --records $r; done ;;
      # Where pinprof profile's cost goes on the short step: py-spy samples the profiled script and the bare one.
      spy-short) python3 -m pip install -q --no-index --no-deps --target /tmp/dbg .dbg/*.whl
                 short="scripts/resnet_train.py --model small --image-size 96 --batch-size 128 --steps 1500 --warm 100"
                 timeout 60 /tmp/dbg/bin/py-spy record -r 250 -f raw --nonblocking -o "$OUT/spy-short-profiled.txt" -- \
                   python3 -m profiler profile --out "$OUT/short-profiled" --no-plots -- python3 $short
                 timeout 45 /tmp/dbg/bin/py-spy record -r 250 -f raw --nonblocking -o "$OUT/spy-short-bare.txt" -- \
                   python3 $short ;;
      # The resnet50 loop with CUPTI's records, started before the model is built (as pinprof profile
      # starts them). Started after the warm-up (--late-cupti) it hung on the H200 every time (step
      # cupti-hang); handed over and taken back between blocks, it hung in every run of 8 rounds or
      # more (2026-12-04), so keep PROFILE_ROUNDS at 4. Step process measures the same loop process
      # against process, with no handover.
      profile-cupti) timeout ${PROFILE_TIMEOUT:-240} python3 scripts/bench_profile_overhead.py --cupti \
                       --watchdog $(( ${PROFILE_TIMEOUT:-240} - 40 )) --rounds ${PROFILE_ROUNDS:-4} ;;
      # The hooks' cost on resnet50 with CUPTI as the clock, in one process: the records stay on for the
      # bare blocks too (nothing handed over), so blocks alternate as in step profile.
      profile-hooks-cupti) timeout 300 python3 scripts/bench_profile_overhead.py --cupti --handover none \
                             --watchdog 260 --rounds ${PROFILE_ROUNDS:-10} ;;
      # What the "GPU waits for the host between steps" finding's advice saves on resnet50: the bare
      # script reading its loss each step against every 10 steps, alternated processes.
      sync-every) for r in $(seq ${SYNC_ROUNDS:-2}); do for n in 1 10; do
                    timeout 90 python3 scripts/resnet_train.py --steps 100 --log-every $n | grep "steady mean"; done; done
                  for n in 1 10; do  # and what pinprof's diagnosis says of each
                    timeout 120 python3 -m profiler profile --out "$OUT/sync-every-$n" --no-plots -- \
                      python3 scripts/resnet_train.py --steps 100 --log-every $n > "$OUT/sync-every-$n.txt" 2>&1
                    grep -E "Headline|Verdict" "$OUT/sync-every-$n/diagnosis.md"; done ;;
      # pinprof profile against the bare script, process against process (CUPTI is process-wide);
      # PINPROF_BACKEND picks the clock.
      # Each round's pinprof output is kept: which phase of the profiled rows grew (wait, pin, compute).
      process) timeout 420 python3 scripts/bench_process_overhead.py --rounds ${PROCESS_ROUNDS:-4} --timeout 90 \
                 --keep "$OUT/process-resnet-${PINPROF_BACKEND:-auto}" -- python3 scripts/resnet_train.py --steps 100 ;;
      # Where resnet50's process excess goes (1.10-1.27 on an H100 host, 2026-12-05, either clock): the
      # same rounds with one part of pinprof's run taken away each time (CUPTI: events; the journal's
      # appends during the run), each line with both sides' waits for a batch.
      resnet-ablate) for v in PINPROF_BACKEND=auto PINPROF_BACKEND=events PINPROF_FLUSH_S=1000; do
                       echo "--- $v"; env $v timeout 180 python3 scripts/bench_process_overhead.py --rounds ${PROCESS_ROUNDS:-3} \
                         --timeout 90 -- python3 scripts/resnet_train.py --steps 100; done ;;
      # The same on a short step (a four-layer CNN on 96x96 images, batch 128, two copies a step).
      # Each round's pinprof output is kept: its copy calls left unmatched and its compute_ms spread.
      process-short) timeout 420 python3 scripts/bench_process_overhead.py --rounds ${PROCESS_ROUNDS:-4} --timeout 90 \
                       --keep "$OUT/process-short-${PINPROF_BACKEND:-auto}" -- \
                       python3 scripts/resnet_train.py --model small --image-size 96 --batch-size 128 --steps 600 --warm 100 ;;
      # The same with the events as the GPU clock, for the cost of each clock on the same step.
      process-short-events) PINPROF_BACKEND=events timeout 420 python3 scripts/bench_process_overhead.py \
                       --rounds ${PROCESS_ROUNDS:-4} --timeout 90 --keep "$OUT/process-short-events" -- \
                       python3 scripts/resnet_train.py --model small --image-size 96 --batch-size 128 --steps 600 --warm 100 ;;
      # Resident three-leaf dict batches, 2 ms of CPU work a step: pinprof profile process against
      # process (the default clock), then the library's blocks against bare ones, one process per clock.
      process-resident) timeout 300 python3 scripts/bench_process_overhead.py --rounds ${PROCESS_ROUNDS:-4} --timeout 60 \
                       --keep "$OUT/process-resident" -- python3 scripts/resident_loop.py --steps 1500 --warm 100 ;;
      # Both, each round with an older checkout's pinprof profile too (BASELINE, carried: a folder that
      # holds its profiler package), the three kinds' order rotated round by round.
      # process-base-resident and process-base-short: one loop each.
      process-base|process-base-resident|process-base-short)
        if [ "$step" != process-base-short ]; then
          timeout 290 python3 scripts/bench_process_overhead.py --rounds ${PROCESS_ROUNDS:-4} --timeout 60 \
            --baseline "${BASELINE:-.base}" -- python3 scripts/resident_loop.py --steps 1500 --warm 100
        fi
        if [ "$step" != process-base-resident ]; then
          timeout 300 python3 scripts/bench_process_overhead.py --rounds ${PROCESS_ROUNDS:-4} --timeout 90 \
            --baseline "${BASELINE:-.base}" -- python3 scripts/resnet_train.py --model small --image-size 96 \
            --batch-size 128 --steps 600 --warm 100
        fi ;;
      # tests/test_gpu_profile.py with this checkout's package, then with an older one's (BASELINE, carried:
      # a folder that holds its profiler package; run from there, python -m finds it first), one machine.
      gpu-profile-base) timeout 150 python3 -m pytest -m gpu -s -q -p no:cacheprovider tests/test_gpu_profile.py
                        here=$PWD; (cd "${BASELINE:-.base}" && timeout 150 python3 -m pytest -m gpu -s -q -p no:cacheprovider \
                          -c "$here/setup.cfg" --rootdir "$here" "$here/tests/test_gpu_profile.py") ;;
      # CUPTI's own share of both ratios: each round runs the script bare, with CUPTI's records on and
      # nothing else of pinprof's (scripts/records_only.py: buffers given back unread), and under pinprof
      # profile, the three kinds' order rotated round by round.
      process-records) timeout 200 python3 scripts/bench_process_overhead.py --rounds ${PROCESS_ROUNDS:-4} --timeout 60 \
                         --records-only -- python3 scripts/resident_loop.py --steps 1500 --warm 100
                       timeout 330 python3 scripts/bench_process_overhead.py --rounds ${PROCESS_ROUNDS:-4} --timeout 90 \
                         --records-only -- python3 scripts/resnet_train.py --model small --image-size 96 \
                         --batch-size 128 --steps 600 --warm 100 ;;
      # Where process-resident's excess goes: the same rounds with one part of pinprof's run changed
      # each time: kernels placed by CUPTI's launch times instead of markers (PINPROF_CUPTI_LATENCY=1),
      # the journal's appends during the run (PINPROF_FLUSH_S=1000: written at the end only), CUPTI
      # altogether (events); the default first, in the same call, to compare against.
      resident-ablate) for v in PINPROF_BACKEND=auto PINPROF_CUPTI_LATENCY=1 PINPROF_FLUSH_S=1000 PINPROF_BACKEND=events; do
                         echo "--- $v"; env $v timeout 100 python3 scripts/bench_process_overhead.py --rounds ${PROCESS_ROUNDS:-4} \
                           --timeout 60 -- python3 scripts/resident_loop.py --steps 1500 --warm 100 | tail -n 2; done ;;
      # What each GPU clock costs a launch-bound short step (resnet18 on 96x96, batch 128, 6 workers):
      # the bare script, CUPTI's memcpy and kernel records alone, its memcpy records alone, pinprof
      # profile at its default (CUPTI's memcpy records, the step's events), with the events clock, and
      # with CUPTI's kernel records (--kernels), rotated round by round.
      cost-clocks) timeout 570 python3 scripts/bench_process_overhead.py --rounds ${PROCESS_ROUNDS:-5} --timeout 60 \
                     --records-only --events --kernels -- python3 scripts/resnet_train.py --model resnet18 --image-size 96 \
                     --batch-size 128 --workers 6 --steps ${SHORT_STEPS:-350} --warm 100 ;;
      # Where the default's cost on the short step comes from, each kind its own process in the same
      # rounds: a second bare process (the floor of the ratio), pinprof's runner alone, CUPTI's memcpy
      # records alone, the events clock, the default.
      cost-split) timeout 570 python3 scripts/bench_process_overhead.py --rounds ${PROCESS_ROUNDS:-5} --timeout 60 \
                    --bare-twice --runner --memcpy-records --events -- python3 scripts/resnet_train.py --model resnet18 \
                    --image-size 96 --batch-size 128 --workers 6 --steps ${SHORT_STEPS:-350} --warm 100 ;;
      # The default and the events clock on a long step: resnet50 at 224x224, batch 128.
      cost-resnet50) timeout 400 python3 scripts/bench_process_overhead.py --rounds ${PROCESS_ROUNDS:-5} --timeout 60 \
                       --events -- python3 scripts/resnet_train.py --model resnet50 --batch-size 128 \
                       --steps ${LONG_STEPS:-100} --warm 30 ;;
      # The same for the short step, whose host launches set its pace: what CUPTI's kernel records cost
      # each launch, with markers (the default) or launch times (PINPROF_CUPTI_LATENCY=1, which can
      # deadlock: see cupti-hang). A round (two processes) took 37 s on an H100 (2026-12-05).
      short-ablate) for v in ${SHORT_VARIANTS:-PINPROF_BACKEND=auto PINPROF_CUPTI_LATENCY=1 PINPROF_BACKEND=events}; do
                      echo "--- $v"; env $v timeout $(( 40 + 40 * ${PROCESS_ROUNDS:-4} )) python3 scripts/bench_process_overhead.py \
                        --rounds ${PROCESS_ROUNDS:-4} --timeout 90 -- python3 scripts/resnet_train.py --model small --image-size 96 --batch-size 128 \
                        --steps 600 --warm 100 | tail -n 2; done ;;
      # CUPTI's own cost a kernel launch: off, records, records with launch times, alternated processes
      # (scripts/bench_launch_cost.py); the short step launches about a hundred kernels a step.
      launch-cost) for r in $(seq ${LAUNCH_ROUNDS:-4}); do for m in off records latency; do
                     timeout 60 python3 scripts/bench_launch_cost.py --mode $m; done; done ;;
      resident-lib) for b in cupti events cupti events; do PINPROF_BACKEND=$b timeout 60 python3 scripts/resident_loop.py --library; done ;;
      # The hooks alone on the resident loop, bare and hooked blocks in one process, CUPTI on for both
      # (then events): what of process-resident's ratio is the hooks', and what is CUPTI's own.
      resident-hooks) for b in cupti events; do PINPROF_BACKEND=$b timeout 90 python3 scripts/resident_loop.py --hooks --blocks 60; done ;;
      # The same hooks' blocks, this checkout against an older one's package (BASELINE, carried, put first
      # on PYTHONPATH), alternated process by process, CUPTI the clock.
      resident-hooks-base) here=$PWD
                           for r in $(seq ${HOOK_ROUNDS:-4}); do for side in head base; do
                             if [ $(( r % 2 )) = 0 ]; then side=$([ $side = head ] && echo base || echo head); fi
                             dir=$([ $side = head ] && echo "$here" || echo "${BASELINE:-.base}")
                             echo "$side: $(PYTHONPATH="/tmp/site:$dir" timeout 90 python3 "$here/scripts/resident_loop.py" --hooks --blocks 60 2>/dev/null | tail -n 1)"
                           done; done ;;
      # Where pinprof profile's own time goes on the loop's thread, part by part (scripts/hook_parts.py),
      # on the short step and on the resident loop, each with the default clock (CUPTI where it runs).
      parts) timeout 120 python3 scripts/hook_parts.py --out "$OUT/parts-short" -- python3 scripts/resnet_train.py \
               --model small --image-size 96 --batch-size 128 --steps 600 --warm 100
             timeout 90 python3 scripts/hook_parts.py --out "$OUT/parts-resident" -- python3 scripts/resident_loop.py \
               --steps 1500 --warm 100 ;;
      # The same parts on cost-clocks' short step under each clock (the default, the events, --kernels'
      # records), alternated twice: where the default's pinprof_ms goes that the events clock's does not.
      parts-clocks) short="scripts/resnet_train.py --model resnet18 --image-size 96 --batch-size 128 --workers 6 --steps 350 --warm 100"
                    for r in 1 2; do for v in PINPROF_BACKEND=auto PINPROF_BACKEND=events PINPROF_KERNELS=1; do
                      echo "--- round $r, $v"; env $v timeout 90 python3 scripts/hook_parts.py --out "$OUT/parts-$r-${v#*=}" -- \
                        python3 $short | grep -A30 "parts on the loop"; done; done ;;
      # CUPTI's records started before any step, and after three (the bench's hang, 2026-12-03).
      # Then a flush halfway, forced and plain, with the loader running: the suspect since.
      cupti-late) for b in 0 3; do timeout 60 python3 scripts/cupti_late_start.py --before $b --after 15 --watchdog 35; done
                  for f in forced plain; do timeout 60 python3 scripts/cupti_late_start.py --before 3 --after 30 \
                    --flush-mid $f --workers 12 --watchdog 45; done ;;
      # Handing CUPTI over and taking it back with the loader running (the bench's blocks do; so does
      # a torch.profiler started mid-run), after each 2nd step, then after each 5th.
      cupti-toggle) for t in 2 5; do timeout 80 python3 scripts/cupti_late_start.py --before 3 --after 30 \
                      --toggle $t --workers 12 --watchdog 60; done ;;
      # The bench's CUPTI hang, with one of pinprof's CUPTI calls taken away per run (scripts/cupti_hang.py).
      # A run still going after HANG_WAIT s is hung: the native stacks of its Python threads (py-spy,
      # carried as .dbg/*.whl) and each thread's kernel wait channel are printed, then it is killed.
      # HANG_ARGS: more of the bench's arguments (--handover none: the records on throughout, which
      # hung on an H100 in every run with kernels' launch times on, 2026-12-05: HANG_VARIANTS=early
      # HANG_ARGS="--handover none" HANG_ROUNDS=10; with HANG_ENVS=PINPROF_CUPTI_LATENCY=0 none hung;
      # launch times are no longer the default: HANG_ENVS=PINPROF_CUPTI_LATENCY=1 asks for them).
      cupti-hang) if ls .dbg/*.whl >/dev/null 2>&1; then python3 -m pip install -q --no-index --no-deps --target /tmp/dbg .dbg/*.whl; fi
                  for d in .dbg/*.deb; do [ -f "$d" ] && dpkg -x "$d" /tmp/eu; done
                  # HANG_ENVS: one environment setting a run, each variant under each ("-": none)
                  for e in ${HANG_ENVS:--}; do [ "$e" = - ] && e=PINPROF_HANG_ENV=none
                  for v in ${HANG_VARIANTS:-as-is flush-off quiet-drainer quiet-flush-off}; do
                    echo "--- $v, $e"
                    env "$e" python3 scripts/cupti_hang.py $v -- --rounds ${HANG_ROUNDS:-2} --steps 40 ${HANG_ARGS:-} & pid=$!
                    for _ in $(seq ${HANG_WAIT:-75}); do kill -0 $pid 2>/dev/null || break; sleep 1; done
                    if kill -0 $pid 2>/dev/null; then
                      echo "cupti-hang $v: HUNG (still running after ${HANG_WAIT:-75} s)"
                      [ "${HANG_STACKS:-1}" = 1 ] && [ -x /tmp/dbg/bin/py-spy ] && timeout 60 /tmp/dbg/bin/py-spy dump --native --pid $pid
                      # every thread, CUDA's and CUPTI's own included (py-spy shows Python's only): elfutils'
                      # eu-stack, carried as .dbg/*.deb (Debian's elfutils, libdw1, libelf1, libasm1)
                      if [ "${HANG_STACKS:-1}" = 1 ] && [ -x /tmp/eu/usr/bin/eu-stack ]; then
                        LD_LIBRARY_PATH=/tmp/eu/usr/lib/x86_64-linux-gnu timeout 90 /tmp/eu/usr/bin/eu-stack -m -p $pid 2>&1 | head -n 600
                      fi
                      for t in /proc/$pid/task/*; do echo "task $(basename $t) $(cat $t/comm): $(cat $t/wchan)"; done
                      kill -9 $pid
                    fi
                    wait $pid; echo "cupti-hang $v rc=$?"
                  done; done ;;
      # Whose step each row holds (issue: a row is a batch): Accelerate, timm, Lightning on an iterable
      # dataset, a prefetcher, each step k x M matmuls set by its batch, against CUPTI's unit.
      rows) PINPROF_BACKEND=events timeout 400 python3 scripts/rows_check.py --out "$OUT/rows" ;;
      rows-default) timeout 400 python3 scripts/rows_check.py --out "$OUT/rows-default" ;;
      rows-kernels) PINPROF_KERNELS=1 timeout 400 python3 scripts/rows_check.py --out "$OUT/rows-kernels" ;;
      rows-cupti) PINPROF_BACKEND=cupti timeout 400 python3 scripts/rows_check.py --out "$OUT/rows-cupti" ;;
      # pinprof tune of four scripts as people write them, each winner applied by hand and timed
      # against the original (issue: pinprof tune); TUNE_CASES picks some, a call holds two or so;
      # TUNE_ONLY=pin_memory,prefetcher tries those knobs only.
      tune-check) timeout 580 python3 scripts/tune_check.py --out "$OUT/tune-check" \
                    --cases "${TUNE_CASES:-naive,better,resnet,loader}" --budget-s ${TUNE_BUDGET_S:-150} \
                    --only "${TUNE_ONLY:-}" ;;
      # Some GPU test files only: GPU_TEST_FILES="tests/test_gpu_prefetcher.py tests/test_gpu_profile.py".
      gpu-some) timeout "${GPU_TESTS_TIMEOUT:-540}" python3 -m pytest -m gpu -v -s -p no:cacheprovider \
                  --timeout=${GPU_TEST_LIMIT:-240} ${GPU_TEST_FILES:-tests} ;;
      gpu-profile) timeout 400 python3 -m pytest -m gpu -v -s -p no:cacheprovider tests/test_gpu_profile.py ;;
      # What CUPTI's Activity API gives and costs in a torch process (scripts/cupti_probe.py).
      cupti-probe) python3 -m pip show nvidia-cuda-cupti cuda-bindings 2>/dev/null | grep -E '^(Name|Version)'
                   timeout 420 python3 scripts/cupti_probe.py ;;
      # What latency timestamps cost a launch (mk_latency less mk), and whether CUDA_EVENT records'
      # correlation ids could bound a step's kernels without them (records_cudaevent).
      cupti-boundary) timeout 300 python3 scripts/cupti_probe.py --rounds ${PROBE_ROUNDS:-3} \
                        --only none mk mk_latency mk_cudaevent records_cudaevent ;;
      bandwidth) timeout 240 python3 -m profiler bandwidth --out "$OUT/bandwidth" ;;
      nsys) timeout 180 bash scripts/nsys_profile.sh "$OUT/nsys"
            # A small loop of both modes, 12 batches each: every batch's memcpy record must come back.
            timeout 60 python3 -m profiler nsys --out "$OUT/nsys-loop" -- python3 tests/nsys_gpu_loop.py "$OUT/nsys-loop" ;;
      *) echo "unknown step $step" ;;
    esac
    echo "=== $step rc=$? ($(date +%T))"
    # Packed after every step: a call cut short at its limit still brings back the steps that ended.
    # Written beside, then moved in: tar reading the folder it writes into exits 1 (a file changed).
    (cd "$OUT" && tar czf /tmp/results.tgz --exclude results.tgz --exclude gpu_check.log . 2>/dev/null
     mv -f /tmp/results.tgz results.tgz) || true
  done
} 2>&1 | tee "$log"
