#!/usr/bin/env bash
# One-shot GPU check for the cuda room (issue 4): configure with CUDA, build only what is needed,
# run the CUDA tests and the GPU benchmarks, and write JSON + a markdown summary to $OUT
# (default ./gpu-results). Designed to finish in well under 6 minutes on an H200.
#
#   bash bench/gpu_check.sh            # from the repository root (or anywhere)
#   OUT=/tmp/res bash bench/gpu_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-./gpu-results}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
log() { printf '\n=== %s (%ss)\n' "$*" "$SECONDS" | tee -a "$OUT/gpu_check.log"; }
status=0

log "dependencies"
if ! bash tools/install-deps.sh >>"$OUT/gpu_check.log" 2>&1; then
  echo "gpu_check: tools/install-deps.sh failed (continuing; the build may fail if packages are missing)" \
    | tee -a "$OUT/gpu_check.log"
fi
export PATH=/usr/local/cuda/bin:$PATH

log "device"
nvidia-smi 2>&1 | tee "$OUT/nvidia-smi.txt"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv \
  >"$OUT/gpu.csv" 2>&1 || true
date -u +%Y-%m-%dT%H:%M:%SZ >"$OUT/date.txt"
git rev-parse HEAD >"$OUT/commit.txt" 2>/dev/null || true

log "configure (preset gpu: Release, KVSIM_CUDA=ON, sm_90)"
if ! cmake --preset gpu -DCMAKE_CUDA_ARCHITECTURES=90 >"$OUT/configure.log" 2>&1; then
  tail -30 "$OUT/configure.log"
  echo "gpu_check: configure failed" | tee -a "$OUT/gpu_check.log"
  exit 1
fi

log "build kvsim_cuda_tests bench_cuda_kernels bench_cuda_host_twin"
if ! cmake --build build/gpu -j "$(nproc)" \
    --target kvsim_cuda_tests bench_cuda_kernels bench_cuda_host_twin >"$OUT/build.log" 2>&1; then
  tail -40 "$OUT/build.log"
  echo "gpu_check: build failed" | tee -a "$OUT/gpu_check.log"
  exit 1
fi

log "CUDA tests (device tests must run, not skip)"
timeout 120 build/gpu/tests/kvsim_cuda_tests --gtest_brief=0 \
  --gtest_output="json:$OUT/cuda_tests.json" 2>&1 | tee "$OUT/cuda_tests.txt" | tail -25
test_rc=${PIPESTATUS[0]}
[ "$test_rc" -eq 0 ] || { echo "gpu_check: CUDA tests FAILED (rc $test_rc)"; status=1; }

log "GPU benchmarks"
# Google Benchmark 1.7.1 takes --benchmark_min_time in seconds as a plain number.
timeout 240 build/gpu/bench/bench_cuda_kernels --benchmark_min_time=0.05 \
  --benchmark_out="$OUT/bench_cuda.json" --benchmark_out_format=json \
  --benchmark_counters_tabular=true 2>&1 | tee "$OUT/bench_cuda.txt"
bench_rc=${PIPESTATUS[0]}
[ "$bench_rc" -eq 0 ] || { echo "gpu_check: GPU benchmarks FAILED (rc $bench_rc)"; status=1; }

log "host twin benchmarks (for comparison)"
timeout 60 build/gpu/bench/bench_cuda_host_twin --benchmark_min_time=0.05 \
  --benchmark_out="$OUT/bench_host_twin.json" --benchmark_out_format=json \
  >"$OUT/bench_host_twin.txt" 2>&1 || echo "gpu_check: host twin benchmarks failed (ignored)"

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
