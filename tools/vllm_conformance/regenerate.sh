#!/usr/bin/env bash
# Re-records the conformance goldens from the vLLM release installed in a venv (0.26.0 or 0.33.0):
#   tools/vllm_conformance/regenerate.sh VENV_DIR [all|sched|plan] [--only CASE ...]
# sched: tests/data/vllm_goldens/<release>/*.json.gz      (record.py)
# plan:  tests/data/vllm_plan_goldens/<release>/*.json    (plan_record.py)
# all (default): both. <release> is "0.26" or "0.33", from the venv's wheel; any other version is
# refused. --only needs sched or plan (the two scripts have different case names).
# CPU is enough: no model, no GPU is used.
# Then run the C++ side: ctest -R VllmGolden (or kvsim_sim_tests --gtest_filter='*VllmGolden*').
set -euo pipefail
usage() {
  echo "usage: $0 VENV_DIR [all | sched [--only CASE ...] | plan [--only CASE ...]]" >&2
  echo "  VENV_DIR/bin/python must have vllm==0.26.0 or vllm==0.33.0" >&2
  exit 2
}
if [ $# -lt 1 ] || [ ! -x "$1/bin/python" ]; then usage; fi
venv=$1
shift
what=all
case "${1:-}" in
  all|sched|plan) what=$1; shift ;;
  "") ;;
  *) usage ;;
esac
if [ "$what" = all ] && [ $# -gt 0 ]; then usage; fi
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root/tools/vllm_conformance"
# Refuse an unknown version before anything is written.
"$venv/bin/python" -c 'from versions import installed_release; v, r = installed_release(); print(f"vLLM {v} -> release folder {r}")'
# Offline: the recorders write their own minimal HF config; nothing is downloaded.
export HF_HUB_OFFLINE=1 PYTHONHASHSEED=0
if [ "$what" != plan ]; then
  "$venv/bin/python" record.py --out "$root/tests/data/vllm_goldens" "$@"
fi
if [ "$what" != sched ]; then
  "$venv/bin/python" plan_record.py --out "$root/tests/data/vllm_plan_goldens" "$@"
fi
