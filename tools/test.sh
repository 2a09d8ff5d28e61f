#!/usr/bin/env bash
# Builds and runs the whole test suite: the CI configuration (GCC, Release, -Werror, CUDA targets
# compiled when nvcc exists, GPU tests skip without a device; the fuzz targets replay their seeds
# and regressions), then the host code again with Clang under AddressSanitizer +
# UndefinedBehaviorSanitizer, where the fuzz targets are libFuzzer binaries and ctest runs their
# smoke passes (docs/fuzzing.md). This is exactly what .ci/run executes.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
jobs=${KVSIM_JOBS:-$(nproc)}
cmake --preset ci >/dev/null
cmake --build --preset ci -j "$jobs"
ctest --preset ci
if [ "${KVSIM_SKIP_ASAN:-0}" != "1" ]; then
  cmake --preset asan >/dev/null
  cmake --build --preset asan -j "$jobs"
  ctest --preset asan
fi
