#!/usr/bin/env bash
# Runs the CUDA tests (kvsim_cuda_tests) under NVIDIA's compute-sanitizer on this machine's GPU:
# memcheck (out-of-bounds and misaligned device accesses, leaks), racecheck (shared-memory
# hazards), initcheck (reads of device memory never written) and synccheck (barrier misuse), in
# that order, each under its own time cap, and writes each tool's log and a summary to $OUT.
#
#   bash tools/gpu_sanitize.sh               # from the repository root; carry .gpu-bundle
#
# Builds only kvsim_cuda_tests, from .gpu-bundle/ when present (preset gpu-bundle) or from the
# system packages (preset gpu). Exit status: 0 = every tool ran and reported no error; 1 = a
# tool reported errors, failed or timed out, or the build failed; 2 = no GPU or no
# compute-sanitizer (nothing checked). $OUT/sanitize_summary.txt has one line per tool.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-./gpu-sanitize}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
SUMMARY=$OUT/sanitize_summary.txt
: >"$SUMMARY"
export PATH=/usr/local/cuda/bin:$PATH
say() { echo "gpu_sanitize: $*" | tee -a "$SUMMARY"; }

if ! nvidia-smi -L >/dev/null 2>&1; then
  say "no GPU visible (nvidia-smi -L): nothing checked"
  exit 2
fi
sanitizer=$(command -v compute-sanitizer)
for c in /usr/local/cuda/compute-sanitizer/compute-sanitizer /usr/local/cuda/bin/compute-sanitizer; do
  [ -n "$sanitizer" ] || { [ -x "$c" ] && sanitizer=$c; }
done
if [ -z "$sanitizer" ]; then
  say "compute-sanitizer not found: nothing checked"
  exit 2
fi
say "$(nvidia-smi -L | head -1); $("$sanitizer" --version | tail -1)"
say "commit $(git rev-parse HEAD 2>/dev/null || echo unknown), $(date -u +%Y-%m-%dT%H:%M:%SZ)"
[ -f .gpu-bundle/MANIFEST ] && preset=gpu-bundle || preset=gpu
if ! cmake --preset "$preset" >"$OUT/build.log" 2>&1 \
  || ! cmake --build "build/$preset" -j "$(nproc)" --target kvsim_cuda_tests >>"$OUT/build.log" 2>&1; then
  say "FAILED: configure or build of kvsim_cuda_tests (preset $preset; build.log)"
  exit 1
fi
say "built kvsim_cuda_tests in ${SECONDS} s"

# GpuBlockAllocator.RefusesWithoutCuda skips by design with a GPU (bench/gpu_check.sh).
filter=--gtest_filter=-GpuBlockAllocator.RefusesWithoutCuda
status=0
# TOOL:CAP_SECONDS; memcheck first: it is the one that matters most if time runs short.
for spec in memcheck:120 racecheck:75 initcheck:60 synccheck:45; do
  tool=${spec%%:*}
  cap=${spec#*:}
  t0=$SECONDS
  extra=()
  [ "$tool" = memcheck ] && extra=(--leak-check full)
  timeout -k 5 "$cap" "$sanitizer" --tool "$tool" "${extra[@]}" --error-exitcode 99 \
    "build/$preset/tests/kvsim_cuda_tests" "$filter" >"$OUT/$tool.log" 2>&1
  rc=$?
  tests=$(grep -Eo '\[  PASSED  \] [0-9]+ tests?' "$OUT/$tool.log" | grep -Eo '[0-9]+' | head -1)
  errors=$(grep -Eo '(ERROR SUMMARY: [0-9]+ errors?|RACECHECK SUMMARY: .*)' "$OUT/$tool.log" | tail -1)
  case $rc in
    0) verdict="clean" ;;
    99) verdict="ERRORS"; status=1 ;;
    124 | 137) verdict="timeout after ${cap} s"; status=1 ;;
    *) verdict="FAILED (exit $rc)"; status=1 ;;
  esac
  say "$tool: $verdict; ${tests:-0} tests passed; ${errors:-no error summary}; $((SECONDS - t0)) s"
done
say "done in ${SECONDS} s (exit $status)"
exit "$status"
