#!/usr/bin/env bash
# Byte-identity of two kvsim binaries on the bundled traces: the check behind every "outputs
# unchanged" claim of an engine-speed change (issue #10, docs/lazy-decodes.md).
#
# For 10 cases - Azure conv and code (async default, fixed:10, sync), Mooncake async and sync,
# BurstGPT without prefix caching, a 900-block pool that preempts thousands of times, the
# priority policy, max_model_len 2048 at twice the rate - each replayed streamed (the trace file
# read twice) with --requests, whole (the trace through a pipe, which is read once and held),
# also with --requests, and streamed without a timeline or --requests (the engine takes other
# shortcuts when no per-step row is read), it compares the timeline CSV, the requests CSV and
# the JSON summary without wall_seconds. Prints one line per case and ALL IDENTICAL or the differing
# files (kept in a temporary folder); exits 1 on any difference.
#
# Usage: bench/replay_identity.sh OLD_KVSIM NEW_KVSIM
# Example: bench/replay_identity.sh /work/baseline/build/cli/kvsim build/release/cli/kvsim
set -uo pipefail
if [[ $# -ne 2 ]]; then
  echo "usage: $0 OLD_KVSIM NEW_KVSIM" >&2
  exit 2
fi
old=$1
new=$2
for bin in "$old" "$new"; do
  [[ -x $bin ]] || { echo "$0: $bin is not an executable" >&2; exit 2; }
done
T=$(cd "$(dirname "$0")/.." && pwd)/traces
w=$(mktemp -d)
base=(--model qwen2.5-7b --gpu rtx4090 --gpu-memory-utilization 0.90 --overhead-gib 1.6
  --weights-gib 5.5 --kv-cache-dtype fp8 --max-model-len 8192 --no-progress)
declare -A cases
cases[conv_default]="$T/AzureLLMInferenceTrace_conv.csv ${base[*]}"
cases[conv_fixed10]="$T/AzureLLMInferenceTrace_conv.csv ${base[*]} --step-time fixed:10"
cases[code_default]="$T/AzureLLMInferenceTrace_code.csv ${base[*]}"
cases[code_sync]="$T/AzureLLMInferenceTrace_code.csv ${base[*]} --step-time fixed:10 --no-async-scheduling"
cases[mooncake_async]="$T/conversation_trace.jsonl ${base[*]}"
cases[mooncake_sync]="$T/conversation_trace.jsonl ${base[*]} --no-async-scheduling"
cases[burst_nocache]="$T/BurstGPT_1.head400.csv ${base[*]} --no-enable-prefix-caching"
cases[conv_900]="$T/AzureLLMInferenceTrace_conv.csv ${base[*]} --num-gpu-blocks-override 900"
cases[conv_priority]="$T/AzureLLMInferenceTrace_conv.csv ${base[*]} --scheduling-policy priority --num-gpu-blocks-override 2000"
cases[conv_l2k]="$T/AzureLLMInferenceTrace_conv.csv --model qwen2.5-7b --gpu rtx4090 --max-model-len 2048 --num-gpu-blocks-override 3000 --no-progress --time-scale 0.5"
strip_wall() {  # the JSON without wall_seconds, keys sorted
  python3 - "$1" <<'PY'
import json, sys
p = sys.argv[1]
try:
    d = json.load(open(p))
except Exception:
    sys.exit(0)
def strip(o):
    if isinstance(o, dict):
        return {k: strip(v) for k, v in o.items() if k != "wall_seconds"}
    if isinstance(o, list):
        return [strip(x) for x in o]
    return o
json.dump(strip(d), open(p, "w"), sort_keys=True, indent=1)
PY
}
fail=0
for c in $(printf '%s\n' "${!cases[@]}" | sort); do
  for mode in stream whole untimed; do
    for b in old new; do
      bin=${!b}
      extra=()
      [[ $mode != untimed ]] && extra+=(--timeline "$w/$c.$mode.$b.tl.csv")
      [[ $mode != untimed ]] && extra+=(--requests "$w/$c.$mode.$b.req.csv")
      read -r trace args <<< "${cases[$c]}"
      if [[ $mode == whole ]]; then
        # shellcheck disable=SC2086  # the case strings are word lists
        "$bin" replay <(cat "$trace") $args --json "$w/$c.$mode.$b.json" "${extra[@]}" \
          > "$w/$c.$mode.$b.out" 2>&1 || { echo "$c $mode $b: exit $?"; fail=1; }
      else
        # shellcheck disable=SC2086
        "$bin" replay "$trace" $args --json "$w/$c.$mode.$b.json" "${extra[@]}" \
          > "$w/$c.$mode.$b.out" 2>&1 || { echo "$c $mode $b: exit $?"; fail=1; }
      fi
      strip_wall "$w/$c.$mode.$b.json"
    done
    files=(json)
    [[ $mode != untimed ]] && files+=(tl.csv req.csv)
    for f in "${files[@]}"; do
      cmp -s "$w/$c.$mode.old.$f" "$w/$c.$mode.new.$f" || { echo "DIFF $c $mode $f"; fail=1; }
    done
  done
  echo "$c: $(wc -l < "$w/$c.stream.new.tl.csv") timeline rows"
done
if [[ $fail == 0 ]]; then
  echo "ALL IDENTICAL"
  rm -rf "$w"
else
  echo "DIFFERENCES (outputs in $w)"
  exit 1
fi
