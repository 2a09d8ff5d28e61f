#!/usr/bin/env bash
# Re-records every golden in tests/data/vllm_goldens from vLLM 0.26.0's real scheduler.
#   tools/vllm_conformance/regenerate.sh /path/to/venv [--only CASE ...]
# The venv needs `pip install vllm==0.26.0` (CPU is enough: no model, no GPU is used).
# Then run the C++ side: ctest -R VllmGolden (or kvsim_sim_tests --gtest_filter='*VllmGolden*').
set -euo pipefail
if [ $# -lt 1 ] || [ ! -x "$1/bin/python" ]; then
  echo "usage: $0 VENV_DIR [--only CASE ...]   (VENV_DIR/bin/python must have vllm==0.26.0)" >&2
  exit 2
fi
venv=$1
shift
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root/tools/vllm_conformance"
# Offline: the recorder writes its own minimal HF config; nothing is downloaded.
HF_HUB_OFFLINE=1 PYTHONHASHSEED=0 "$venv/bin/python" record.py --out "$root/tests/data/vllm_goldens" "$@"
