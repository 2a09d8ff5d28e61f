#!/usr/bin/env bash
# Builds and runs the whole test suite: the CI configuration (Release, -Werror, CUDA targets
# compiled when nvcc exists, GPU tests skip without a device), then the host code again under
# AddressSanitizer + UndefinedBehaviorSanitizer. This is exactly what .ci/run executes.
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
