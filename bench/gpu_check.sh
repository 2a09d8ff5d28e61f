#!/usr/bin/env bash
# One-shot GPU check for the cuda room (issue 4): configure with CUDA, build only what is needed,
# run the CUDA tests and the GPU benchmarks, and write JSON + a markdown summary to $OUT
# (default ./gpu-results). Designed to finish in well under 6 minutes on an H200.
#
#   bash bench/gpu_check.sh            # from the repository root (or anywhere)
#   OUT=/tmp/res bash bench/gpu_check.sh
#
# Dependencies: nothing is installed here (the GPU machine has no network). With .gpu-bundle/
# present (tools/make_gpu_bundle.sh; carry it to the device machine) the build takes gtest,
# benchmark, fmt and xxhash from that bundle only (preset gpu-bundle: core + cuda, no sim/cli);
# without it the system packages of tools/install-deps.sh must already be there (preset gpu).
# See docs/cuda-backend.md, "Running on a GPU".
#
# $OUT ends with at most 7 files (the device tool brings back 8): summary.md, gpu_check.log,
# cuda_tests.json, bench_cuda.json, bench_host_twin.json, gpu.csv and logs.tar.gz (configure and
# build logs, full test and benchmark output, nvidia-smi, date, commit), packed on exit.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-./gpu-results}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
LOGS=$OUT/logs
(cd "$OUT" && rm -rf logs logs.tar.gz summary.md cuda_tests.json bench_cuda.json bench_host_twin.json gpu.csv)
mkdir -p "$LOGS"
: >"$OUT/gpu_check.log"
pack_logs() { tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$LOGS"; }
trap pack_logs EXIT
trap 'exit 143' TERM INT
log() { printf '\n=== %s (%ss)\n' "$*" "$SECONDS" | tee -a "$OUT/gpu_check.log"; }
fail() { echo "gpu_check: $*" | tee -a "$OUT/gpu_check.log"; exit 1; }
status=0
export PATH=/usr/local/cuda/bin:$PATH
jobs=$(nproc)

log "dependencies"
system_pkgs=(libfmt-dev libcli11-dev nlohmann-json3-dev libgtest-dev libbenchmark-dev libxxhash-dev
             libabsl-dev zlib1g-dev)
have_system_pkgs() {
  command -v dpkg-query >/dev/null || return 1
  local p
  for p in "${system_pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || return 1
  done
}
if [ -f .gpu-bundle/MANIFEST ]; then
  preset=gpu-bundle
  echo "gpu_check: dependencies from .gpu-bundle (system packages ignored):" | tee -a "$OUT/gpu_check.log"
  sed -n '4,9p' .gpu-bundle/MANIFEST | cut -c1-100 | tee -a "$OUT/gpu_check.log"
elif have_system_pkgs; then
  preset=gpu
  echo "gpu_check: dependencies from the system packages" | tee -a "$OUT/gpu_check.log"
else
  fail "no .gpu-bundle and the system packages are missing: run tools/make_gpu_bundle.sh (on a" \
    "machine with Debian's packages) and carry .gpu-bundle, or run tools/install-deps.sh here"
fi
command -v nvcc >/dev/null || fail "nvcc not found (PATH, /usr/local/cuda/bin)"
command -v cmake >/dev/null || fail "cmake not found"
gen=()
command -v ninja >/dev/null || gen=(-G "Unix Makefiles") # the presets name Ninja
build=build/$preset
[ ${#gen[@]} -eq 0 ] || build=build/$preset-make
{ cmake --version | head -1; nvcc --version | tail -2; c++ --version | head -1; } 2>&1 \
  | tee -a "$OUT/gpu_check.log"

log "device"
nvidia-smi >"$LOGS/nvidia-smi.txt" 2>&1
head -20 "$LOGS/nvidia-smi.txt"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv \
  >"$OUT/gpu.csv" 2>&1 || true
have_gpu=1
nvidia-smi -L 2>/dev/null | grep -q '^GPU ' || have_gpu=0
[ "$have_gpu" -eq 1 ] || echo "gpu_check: no NVIDIA GPU visible (nvidia-smi -L): the build and host" \
  "tests still run, the GPU benchmarks are skipped and the check fails" | tee -a "$OUT/gpu_check.log"
date -u +%Y-%m-%dT%H:%M:%SZ >"$LOGS/date.txt"
git rev-parse HEAD >"$LOGS/commit.txt" 2>/dev/null || true

log "configure (preset $preset: Release, KVSIM_CUDA=ON, sm_90)"
if ! cmake --preset "$preset" "${gen[@]}" -B "$build" -DCMAKE_CUDA_ARCHITECTURES=90 \
    >"$LOGS/configure.log" 2>&1; then
  tail -30 "$LOGS/configure.log"
  fail "configure failed (log: logs/configure.log)"
fi
grep 'kvsim:' "$LOGS/configure.log" | tee -a "$OUT/gpu_check.log"

log "build kvsim_cuda_tests bench_cuda_kernels bench_cuda_host_twin (-j $jobs)"
if ! cmake --build "$build" -j "$jobs" \
    --target kvsim_cuda_tests bench_cuda_kernels bench_cuda_host_twin >"$LOGS/build.log" 2>&1; then
  tail -40 "$LOGS/build.log"
  fail "build failed (log: logs/build.log)"
fi

log "CUDA tests (device tests must run, not skip)"
timeout 120 "$build/tests/kvsim_cuda_tests" --gtest_brief=0 \
  --gtest_output="json:$OUT/cuda_tests.json" 2>&1 | tee "$LOGS/cuda_tests.txt" | tail -25
test_rc=${PIPESTATUS[0]}
[ "$test_rc" -eq 0 ] || { echo "gpu_check: CUDA tests FAILED (rc $test_rc)"; status=1; }
if [ "$have_gpu" -eq 1 ] && grep -q '^\[  SKIPPED \] [0-9]* test' "$LOGS/cuda_tests.txt"; then
  echo "gpu_check: device tests SKIPPED although a GPU is visible" | tee -a "$OUT/gpu_check.log"
  status=1
fi

log "GPU benchmarks"
if [ "$have_gpu" -eq 1 ]; then
  # Google Benchmark 1.7.1 takes --benchmark_min_time in seconds as a plain number.
  timeout 240 "$build/bench/bench_cuda_kernels" --benchmark_min_time=0.05 \
    --benchmark_out="$OUT/bench_cuda.json" --benchmark_out_format=json \
    --benchmark_counters_tabular=true 2>&1 | tee "$LOGS/bench_cuda.txt"
  bench_rc=${PIPESTATUS[0]}
  [ "$bench_rc" -eq 0 ] || { echo "gpu_check: GPU benchmarks FAILED (rc $bench_rc)"; status=1; }
else
  echo "gpu_check: GPU benchmarks SKIPPED: no GPU" | tee "$LOGS/bench_cuda.txt"
fi

log "host twin benchmarks (for comparison)"
timeout 60 "$build/bench/bench_cuda_host_twin" --benchmark_min_time=0.05 \
  --benchmark_out="$OUT/bench_host_twin.json" --benchmark_out_format=json \
  >"$LOGS/bench_host_twin.txt" 2>&1 || echo "gpu_check: host twin benchmarks failed (ignored)"

log "summary"
if [ -s "$OUT/bench_cuda.json" ]; then
  python3 tools/summarize_gpu_bench.py "$OUT/bench_cuda.json" --tests "$OUT/cuda_tests.json" \
    --gpu "$OUT/gpu.csv" >"$OUT/summary.md" || status=1
  cat "$OUT/summary.md"
else
  echo "gpu_check: no benchmark JSON to summarise" | tee "$OUT/summary.md"
  status=1
fi
log "done (status $status); results in $OUT"
exit "$status"
