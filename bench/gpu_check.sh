#!/usr/bin/env bash
# One-shot GPU check (issue 7): configure with CUDA, build what the check needs, run the CUDA
# tests, the GPU benchmarks and an end-to-end `kvsim replay --backend cuda` with verify(), and
# write JSON + a markdown summary to $OUT (default ./gpu-results). It cannot end without
# summary.md: the summary is written by the EXIT trap, whatever failed before, and every step runs
# under a share of one time budget (GPU_CHECK_BUDGET_S, default 420 s) that keeps 25 s for the
# summary, so a device call with timeout_s 480 always brings it back.
#
#   bash bench/gpu_check.sh                 # from the repository root (or anywhere)
#   OUT=/tmp/res bash bench/gpu_check.sh    # the device tool sets OUT itself
#
# Exit status: 0 = PASS (GPU visible; build, CUDA tests with no skip, every benchmark row, the
# end-to-end replay all ok; the targets' met/MISSED are reported, not part of the status);
# 2 = NO GPU (dry run: no GPU visible and everything that can run without one ran and passed);
# 1 = anything else (summary.md says what).
#
# Dependencies: nothing is installed here (the GPU machine has no network). With .gpu-bundle/
# present (tools/make_gpu_bundle.sh; carry it to the device machine) the build takes every
# dependency from that bundle only (preset gpu-bundle); without it the system packages of
# tools/install-deps.sh must already be there (preset gpu). See docs/cuda-backend.md,
# "Running on a GPU".
#
# $OUT ends with at most 7 files (the device tool brings back 8): summary.md, gpu_check.log,
# cuda_tests.json, bench_cuda.json, bench_host_twin.json, gpu.csv and logs.tar.gz (steps, configure
# and build logs, full test, benchmark and replay output, nvidia-smi, date, commit, and the measured
# operator profile logs/gpu_profile/ for `--step-time profile:DIR`).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-./gpu-results}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
LOGS=$OUT/logs
(cd "$OUT" && rm -rf logs logs.tar.gz summary.md gpu_check.log cuda_tests.json bench_cuda.json \
  bench_host_twin.json gpu.csv)
mkdir -p "$LOGS"
: >"$OUT/gpu_check.log"
STEPS=$LOGS/steps.tsv
: >"$STEPS"
budget=${GPU_CHECK_BUDGET_S:-420}
reserve=25 # seconds kept for the summary and packing the logs
export PATH=/usr/local/cuda/bin:$PATH
jobs=$(nproc 2>/dev/null || echo 2)

# Tests that only make sense WITHOUT a GPU: each skips by design when a device is present, so
# with a GPU they are excluded by a gtest filter (and named in the summary) instead of counting
# as skips. Everything else must run, not skip, when a GPU is visible.
NO_GPU_ONLY_TESTS=(GpuBlockAllocator.RefusesWithoutCuda)

# The end-to-end replay: 32 requests of a bundled trace, all arriving at once, replayed through
# the scheduler with the KV pool on the device (Qwen2.5-7B's shape, 1 of its 28 layers, 256
# blocks: starved, so about 20 requests are swapped out and back in), and verify() of every slot
# at the end (about 3,400 steps; the host run takes ~5 s of CPU). The same command with --backend host is the CPU reference. The trace is read
# gzip-compressed when gzip exists, so the zlib that kvsim links (the bundle's) is exercised too.
REPLAY_TRACE=traces/BurstGPT_1.head400.csv
REPLAY_ARGS=(--max-requests 32 --arrival all-at-once --num-gpu-blocks-override 256
             --backend-max-layers 1 --preemption-mode swap --swap-space-gib 1 --step-time fixed:10
             --no-progress)
# The hybrid layout (docs/cuda-backend.md): gpt-oss-20b's 12 KV cache tensors shared by its
# full-attention and sliding-window groups (2 tensors kept), 32 requests at once on 768 blocks, so
# window blocks are dropped and reused by the other group; verify() at the end.
HYBRID_REPLAY_ARGS=(--model gpt-oss-20b --gpu h100-80g --max-model-len 4096 --max-requests 32
                    --arrival all-at-once --num-gpu-blocks-override 768 --backend-max-layers 2
                    --step-time fixed:10 --no-progress)

log() { printf '\n=== %s (%ss)\n' "$*" "$SECONDS" | tee -a "$OUT/gpu_check.log"; }
say() { echo "gpu_check: $*" | tee -a "$OUT/gpu_check.log"; }
# step NAME STATUS START DETAIL: one row of steps.tsv (tabs and newlines removed from DETAIL).
step() {
  local detail=${4:-}
  detail=${detail//$'\t'/ }
  detail=${detail//$'\n'/ }
  printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$((SECONDS - $3))" "$detail" >>"$STEPS"
  say "step $1: $2${detail:+ ($detail)}"
}
# left CAP: seconds a step may use: CAP (scaled by budget/420, so a slow machine's rehearsal with
# a larger GPU_CHECK_BUDGET_S gets longer steps), or less when the budget (minus the reserve) is
# short.
left() {
  local l=$((budget - reserve - SECONDS)) cap=$(($1 * budget / 420))
  [ "$cap" -ge "$1" ] || cap=$1
  [ "$l" -lt "$cap" ] && echo "$l" || echo "$cap"
}
# run_step NAME CAP LOGFILE CMD...: runs CMD under `timeout`; returns its status (124: timeout,
# 125: no time left in the budget).
run_step() {
  local name=$1 cap=$2 logf=$3 t
  shift 3
  t=$(left "$cap")
  if [ "$t" -lt 5 ]; then
    echo "not run: time budget spent" >"$logf"
    return 125
  fi
  timeout -k 5 "$t" "$@" >"$logf" 2>&1
}
status_of() { # status_of RC: ok / timeout / time budget spent / exit N
  case $1 in 0) echo ok ;; 124 | 137) echo "timeout" ;; 125) echo "not run: time budget spent" ;;
  *) echo "FAILED (exit $1)" ;; esac
}

have_gpu=0
excluded_csv=""
replay_metas=()
finish() {
  local rc=$?
  trap - EXIT
  log "summary"
  local args=(-o "$OUT/summary.md" --bench "$OUT/bench_cuda.json" --tests "$OUT/cuda_tests.json"
              --tests-log "$LOGS/cuda_tests.txt" --excluded-tests "$excluded_csv"
              --gpu "$OUT/gpu.csv" --steps "$STEPS"
              --meta "commit=$(cat "$LOGS/commit.txt" 2>/dev/null || echo unknown)"
              --meta "date=$(cat "$LOGS/date.txt" 2>/dev/null || echo unknown)"
              --meta "host=$(hostname 2>/dev/null || echo unknown)"
              --meta "check wall time=${SECONDS} s")
  [ "$have_gpu" -eq 1 ] || args+=(--no-gpu)
  local m
  for m in "${replay_metas[@]}"; do args+=(--replay "$m"); done
  local verdict=""
  if command -v python3 >/dev/null; then
    verdict=$(timeout 20 python3 tools/summarize_gpu_bench.py "${args[@]}" 2>>"$OUT/gpu_check.log")
    verdict=${verdict%%$'\n'*} # first line: PASS, NO_GPU or FAIL
  fi
  if [ ! -s "$OUT/summary.md" ]; then # no python3 or the summarizer died: a plain summary
    {
      echo "# kvsim GPU check"
      echo
      echo "**Result: FAIL: tools/summarize_gpu_bench.py did not run (python3 missing or crashed);"
      echo "the raw results are in bench_cuda.json, cuda_tests.json and logs.tar.gz**"
      echo
      echo "| step | status | seconds | detail |"
      echo "|---|---|---:|---|"
      sed 's/|/\\|/g; s/\t/ | /g; s/^/| /; s/$/ |/' "$STEPS"
    } >"$OUT/summary.md"
    verdict=FAIL
  fi
  cat "$OUT/summary.md"
  local code=1
  case $verdict in PASS*) code=0 ;; NO_GPU*) code=2 ;; esac
  [ "$rc" -eq 0 ] || [ "$rc" -eq 3 ] || code=1 # 3: a step stopped the script (already counted)
  log "done (exit $code); results in $OUT"
  tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$LOGS"
  exit "$code"
}
trap finish EXIT
trap 'say "interrupted"; exit 143' TERM INT
stop() { # a step whose failure makes the rest pointless: the summary still gets written
  say "$*"
  exit 3
}

log "dependencies"
t0=$SECONDS
system_pkgs=(libfmt-dev libcli11-dev nlohmann-json3-dev libgtest-dev libbenchmark-dev libxxhash-dev
             libabsl-dev zlib1g-dev)
have_system_pkgs() {
  command -v dpkg-query >/dev/null || return 1
  local p
  for p in "${system_pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || return 1
  done
}
date -u +%Y-%m-%dT%H:%M:%SZ >"$LOGS/date.txt"
git rev-parse HEAD >"$LOGS/commit.txt" 2>/dev/null || echo "unknown (no git)" >"$LOGS/commit.txt"
if [ -f .gpu-bundle/MANIFEST ]; then
  preset=gpu-bundle
  say "dependencies from .gpu-bundle (system packages ignored):"
  grep -E '^[a-z0-9]+ +[^ ]' .gpu-bundle/MANIFEST | grep -v '^kvsim\|^Used\|^Licence' \
    | cut -c1-100 | tee -a "$OUT/gpu_check.log"
elif have_system_pkgs; then
  preset=gpu
  say "dependencies from the system packages"
else
  step dependencies FAILED "$t0" "no .gpu-bundle and the system packages are missing"
  stop "run tools/make_gpu_bundle.sh (on a machine with Debian's packages) and carry .gpu-bundle," \
    "or run tools/install-deps.sh here"
fi
missing=""
for tool in nvcc cmake c++; do command -v "$tool" >/dev/null || missing+=" $tool"; done
# A C compiler builds the bundle's zlib (cmake/kvsim_deps.cmake): cc, or gcc where cc is absent.
if ! command -v cc >/dev/null; then
  if command -v gcc >/dev/null; then export CC=gcc; else missing+=" cc/gcc"; fi
fi
if [ -n "$missing" ]; then
  step dependencies FAILED "$t0" "not found:$missing"
  stop "not found:$missing (PATH includes /usr/local/cuda/bin)"
fi
gen=()
command -v ninja >/dev/null || gen=(-G "Unix Makefiles") # the presets name Ninja
build=build/$preset
[ ${#gen[@]} -eq 0 ] || build=build/$preset-make
{ cmake --version | head -1; nvcc --version | tail -2; c++ --version | head -1; } 2>&1 \
  | tee -a "$OUT/gpu_check.log"
step dependencies ok "$t0" "preset $preset, $( [ ${#gen[@]} -eq 0 ] && echo Ninja || echo make)"

log "device"
t0=$SECONDS
if command -v nvidia-smi >/dev/null; then
  timeout 30 nvidia-smi >"$LOGS/nvidia-smi.txt" 2>&1
  head -20 "$LOGS/nvidia-smi.txt"
  timeout 30 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit \
    --format=csv >"$OUT/gpu.csv" 2>&1 || true
  timeout 30 nvidia-smi -L 2>/dev/null | grep -q '^GPU ' && have_gpu=1
else
  echo "nvidia-smi not found" >"$LOGS/nvidia-smi.txt"
fi
if [ "$have_gpu" -eq 1 ]; then
  step device ok "$t0" "$(timeout 10 nvidia-smi -L 2>/dev/null | head -1)"
else
  step device "no GPU" "$t0" "no NVIDIA GPU visible (nvidia-smi -L): a dry run; GPU rows will read 'no GPU'"
fi

log "configure (preset $preset: Release, KVSIM_CUDA=ON, sm_90)"
t0=$SECONDS
run_step configure 150 "$LOGS/configure.log" \
  cmake --preset "$preset" "${gen[@]}" -B "$build" -DCMAKE_CUDA_ARCHITECTURES=90
rc=$?
grep 'kvsim:' "$LOGS/configure.log" | tee -a "$OUT/gpu_check.log"
if [ "$rc" -ne 0 ]; then
  tail -30 "$LOGS/configure.log"
  step configure "$(status_of $rc)" "$t0" "log: logs/configure.log"
  stop "configure failed"
fi
step configure ok "$t0"

targets=(kvsim_cuda_tests bench_cuda_kernels kvsim bench_cuda_host_twin kvsim_gpu_profile)
log "build ${targets[*]} (-j $jobs)"
t0=$SECONDS
keep_going=(-k 0) # ninja: build every target that can be built, even after a failure
[ ${#gen[@]} -eq 0 ] || keep_going=(-k)
run_step build 300 "$LOGS/build.log" cmake --build "$build" -j "$jobs" --target "${targets[@]}" \
  -- "${keep_going[@]}"
rc=$?
tests_bin=$build/tests/kvsim_cuda_tests
bench_bin=$build/bench/bench_cuda_kernels
twin_bin=$build/bench/bench_cuda_host_twin
kvsim_bin=$build/cli/kvsim
profile_bin=$build/cuda/kvsim_gpu_profile
absent=""
for b in "$tests_bin" "$bench_bin" "$kvsim_bin" "$twin_bin" "$profile_bin"; do [ -x "$b" ] || absent+=" ${b##*/}"; done
if [ "$rc" -ne 0 ]; then
  grep -E 'error|FAILED' "$LOGS/build.log" | head -20
  step build "$(status_of $rc)" "$t0" "not built:${absent:- none}; log: logs/build.log"
else
  step build ok "$t0"
fi

log "CUDA tests (with a GPU, device tests must run, not skip)"
t0=$SECONDS
filter=()
if [ "$have_gpu" -eq 1 ]; then
  excluded_csv=$(IFS=,; echo "${NO_GPU_ONLY_TESTS[*]}")
  filter=("--gtest_filter=-$(IFS=:; echo "${NO_GPU_ONLY_TESTS[*]}")")
fi
if [ -x "$tests_bin" ]; then
  listed=$("$tests_bin" --gtest_list_tests 2>/dev/null | awk '/^[^ ]/ {s=$1} /^  / {print s $1}')
  for t in "${NO_GPU_ONLY_TESTS[@]}"; do
    grep -qx "$t" <<<"$listed" || say "note: no-GPU-only test $t is not in kvsim_cuda_tests (renamed?)"
  done
  run_step cuda_tests 150 "$LOGS/cuda_tests.txt" "$tests_bin" "${filter[@]}" \
    --gtest_output="json:$OUT/cuda_tests.json"
  rc=$?
  tail -15 "$LOGS/cuda_tests.txt"
  skipped=$(grep -o '^\[  SKIPPED \] [A-Za-z][^ ]*' "$LOGS/cuda_tests.txt" | sort -u | wc -l)
  if [ "$rc" -ne 0 ]; then
    step cuda_tests "$(status_of $rc)" "$t0" "log: logs/cuda_tests.txt"
  elif [ "$have_gpu" -eq 1 ] && [ "$skipped" -gt 0 ]; then
    step cuda_tests "FAILED ($skipped skipped with a GPU)" "$t0" "excluded: ${excluded_csv}"
  elif [ "$have_gpu" -eq 0 ]; then
    step cuda_tests "no GPU" "$t0" "passed; $skipped device tests skipped (no GPU)"
  else
    step cuda_tests ok "$t0" "excluded as no-GPU-only: ${excluded_csv}"
  fi
else
  echo "not built" >"$LOGS/cuda_tests.txt"
  step cuda_tests "not run" "$t0" "kvsim_cuda_tests not built"
fi

log "GPU benchmarks"
t0=$SECONDS
if [ -x "$bench_bin" ]; then
  # Without a GPU the binary still runs: every row is the error "no CUDA device" (quick), which
  # checks the error-row path and the summary here. Google Benchmark 1.7.1 takes
  # --benchmark_min_time in seconds as a plain number.
  run_step bench_cuda 200 "$LOGS/bench_cuda.txt" "$bench_bin" --benchmark_min_time=0.05 \
    --benchmark_out="$OUT/bench_cuda.json" --benchmark_out_format=json \
    --benchmark_counters_tabular=true
  rc=$?
  cat "$LOGS/bench_cuda.txt"
  errors=$(grep -c '"error_occurred": true' "$OUT/bench_cuda.json" 2>/dev/null)
  if [ "$rc" -ne 0 ]; then
    step bench_cuda "$(status_of $rc)" "$t0" "log: logs/bench_cuda.txt"
  elif [ "$have_gpu" -eq 0 ]; then
    step bench_cuda "no GPU" "$t0" "every row: no CUDA device ($errors rows)"
  elif [ "${errors:-0}" -gt 0 ]; then
    step bench_cuda "FAILED ($errors rows with an error)" "$t0" "see summary"
  else
    step bench_cuda ok "$t0"
  fi
else
  step bench_cuda "not run" "$t0" "bench_cuda_kernels not built"
fi

# The measured operator profile (docs/step-time-model.md, "Profiling your own card"):
# kvsim_gpu_profile times cuBLAS GEMMs, the memory-bound operators and the paged KV read at
# PROFILE_MODEL's per-rank shapes (TP 1, 2, 4, 8) on the coarse token grid (24 points to 4096;
# the full Vidur grid is the standalone command's default) and writes logs/gpu_profile/ (in
# logs.tar.gz); then a replay on that profile checks the directory reads back as
# `--step-time profile:DIR`. Without a GPU the same runs as --dry-run (fake timings, README.md
# says FAKE), which checks the pipeline only.
PROFILE_MODEL=llama-3.1-8b
log "operator profile ($PROFILE_MODEL)"
t0=$SECONDS
if [ -x "$profile_bin" ]; then
  profile_dir=$LOGS/gpu_profile
  profile_args=(--model "$PROFILE_MODEL" --grid coarse --reps 10 --out "$profile_dir"
                --commit "$(cat "$LOGS/commit.txt")")
  [ "$have_gpu" -eq 1 ] || profile_args+=(--dry-run --gpu h200-141g)
  run_step gpu_profile 60 "$LOGS/gpu_profile.txt" "$profile_bin" "${profile_args[@]}"
  rc=$?
  cat "$LOGS/gpu_profile.txt"
  # stdout's last line: --model M --gpu G --step-time profile:DIR[,attn_mbu=X]
  use=$(grep -- '--step-time profile:' "$LOGS/gpu_profile.txt" | tail -1)
  if [ "$rc" -eq 0 ] && [ -n "$use" ] && [ -x "$kvsim_bin" ]; then
    read -r -a use_args <<<"$use"
    run_step gpu_profile_replay 30 "$LOGS/gpu_profile_replay.txt" "$kvsim_bin" replay \
      "$REPLAY_TRACE" --max-requests 32 --no-progress "${use_args[@]}"
    rc=$?
    cat "$LOGS/gpu_profile_replay.txt"
    detail="${use#--model } ($(grep -c . "$profile_dir/mlp.csv") lines of mlp.csv); replay on it: $(status_of $rc)"
    detail=${detail//$LOGS\//logs/}
  else
    detail="$(tail -1 "$LOGS/gpu_profile.txt")"
  fi
  if [ "$rc" -ne 0 ]; then
    step gpu_profile "$(status_of $rc)" "$t0" "$detail; log: logs/gpu_profile.txt"
  elif [ "$have_gpu" -eq 0 ]; then
    step gpu_profile "no GPU" "$t0" "dry run, FAKE timings: $detail"
  else
    step gpu_profile ok "$t0" "measured: $detail"
  fi
else
  step gpu_profile "not run" "$t0" "kvsim_gpu_profile not built"
fi

# run_replay NAME BACKEND ARGS...: one end-to-end replay, recorded as logs/replay_NAME.meta.json.
run_replay() {
  local name=$1 backend=$2 t0=$SECONDS
  shift 2
  local meta=$LOGS/replay_$name.meta.json report=$LOGS/replay_$name.json
  local err=$LOGS/replay_$name.stderr.txt
  local cmd=(kvsim replay "$@" --backend "$backend" --json "$report")
  replay_metas+=("$meta")
  log "end-to-end: ${cmd[*]}"
  if [ ! -x "$kvsim_bin" ]; then
    printf '{"backend": "%s", "command": "%s", "rc": null, "reason": "kvsim not built"}\n' \
      "$backend" "${cmd[*]}" >"$meta"
    step "replay_$name" "not run" "$t0" "kvsim not built"
    return
  fi
  local start=$SECONDS rc shown
  shown="${cmd[*]}"
  shown=${shown//$OUT\//}
  run_step "replay_$name" 90 "$err" "$kvsim_bin" "${cmd[@]:1}"
  rc=$?
  tail -5 "$err"
  printf '{"backend": "%s", "command": "%s", "rc": %d, "seconds": %d, "report_json": "%s", "stderr": "%s"}\n' \
    "$backend" "$shown" "$rc" "$((SECONDS - start))" "$report" "$err" >"$meta"
  if [ "$rc" -eq 0 ] && grep -q '"backend_verification_ok": true' "$report" 2>/dev/null; then
    step "replay_$name" ok "$t0" "verified"
  elif [ "$backend" = cuda ] && [ "$have_gpu" -eq 0 ]; then
    step "replay_$name" "no GPU" "$t0" "$(grep -i error "$err" | tail -1)"
  else
    step "replay_$name" "$(status_of $rc)" "$t0" "$(tail -1 "$err")"
  fi
}
if command -v gzip >/dev/null && gzip -c "$REPLAY_TRACE" >"$LOGS/replay_trace.csv.gz"; then
  REPLAY_TRACE=$LOGS/replay_trace.csv.gz
fi
run_replay cuda cuda "$REPLAY_TRACE" "${REPLAY_ARGS[@]}"
run_replay host host "$REPLAY_TRACE" "${REPLAY_ARGS[@]}"
run_replay hybrid_cuda cuda "$REPLAY_TRACE" "${HYBRID_REPLAY_ARGS[@]}"
run_replay hybrid_host host "$REPLAY_TRACE" "${HYBRID_REPLAY_ARGS[@]}"

log "host twin benchmarks (for comparison; not judged)"
t0=$SECONDS
if [ -x "$twin_bin" ]; then
  run_step bench_host_twin 60 "$LOGS/bench_host_twin.txt" "$twin_bin" --benchmark_min_time=0.05 \
    --benchmark_out="$OUT/bench_host_twin.json" --benchmark_out_format=json
  rc=$?
  # Informational: a slow host or a spent budget is no failure of the GPU check.
  step bench_host_twin "$([ $rc -eq 0 ] && echo ok || echo skipped)" "$t0" \
    "$([ $rc -eq 0 ] || status_of $rc)"
else
  step bench_host_twin skipped "$t0" "bench_cuda_host_twin not built"
fi
exit 0
