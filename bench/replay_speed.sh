#!/usr/bin/env bash
# Replay speed, old engine vs new, in one sitting (issue #10's replay targets).
#
# Runs the README's whole Azure conv replay with two kvsim binaries, interleaved (old, new, old,
# new, ...) so that both see the same machine load, at `--step-time fixed:10` and at the default
# step time, and prints for each the median of
#   * wall: the JSON report's wall_seconds (the replay loop only: no trace parsing, no start-up);
#   * cpu: user + system CPU seconds of the whole process (/usr/bin/time), trace parsing included.
# On a loaded machine (load average above the core count) wall time mostly measures waiting for a
# core; the CPU time still measures the work, so read the cpu ratio there.
#
# Usage: bench/replay_speed.sh OLD_KVSIM NEW_KVSIM [REPEATS]   (REPEATS: odd, default 3)
# Example: bench/replay_speed.sh /work/baseline/build/cli/kvsim build/release/cli/kvsim 5
set -euo pipefail

if [[ $# -lt 2 || $# -gt 3 ]]; then
  echo "usage: $0 OLD_KVSIM NEW_KVSIM [REPEATS]" >&2
  exit 2
fi
old=$1
new=$2
repeats=${3:-3}
for bin in "$old" "$new"; do
  [[ -x $bin ]] || { echo "$0: $bin is not an executable" >&2; exit 2; }
done
[[ $repeats =~ ^[1-9][0-9]*$ ]] || { echo "$0: REPEATS must be a positive integer" >&2; exit 2; }

root=$(cd "$(dirname "$0")/.." && pwd)
trace=$root/traces/AzureLLMInferenceTrace_conv.csv
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The README's replay (qwen2.5-7b on an RTX 4090, fp8 KV, max_model_len 8192).
args=(replay "$trace" --model qwen2.5-7b --gpu rtx4090 --gpu-memory-utilization 0.90
  --overhead-gib 1.6 --weights-gib 5.5 --kv-cache-dtype fp8 --max-model-len 8192 --no-progress)

measure() {  # binary, json path, extra args...: prints "wall_seconds cpu_seconds"
  local bin=$1 json=$2
  shift 2
  if ! /usr/bin/time -f '%U %S' -o "$work/time" "$bin" "${args[@]}" "$@" --json "$json" \
    > /dev/null 2> "$work/stderr"; then
    echo "$0: $bin failed:" >&2
    cat "$work/stderr" >&2
    exit 1
  fi
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["wall_seconds"])' "$json" |
    tr '\n' ' '
  awk '{print $1 + $2}' "$work/time"
}

median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR + 1) / 2)]}'; }

ratio() { python3 -c "import sys; print(f'{float(sys.argv[1]) / float(sys.argv[2]):.2f}x')" "$1" "$2"; }

run_case() {  # label, extra args...
  local label=$1
  shift
  local o_wall=() n_wall=() o_cpu=() n_cpu=() m
  for ((k = 0; k < repeats; ++k)); do
    read -r -a m <<< "$(measure "$old" "$work/old.json" "$@")"
    [[ ${#m[@]} -eq 2 ]] || exit 1  # measure() printed why
    o_wall+=("${m[0]}") && o_cpu+=("${m[1]}")
    read -r -a m <<< "$(measure "$new" "$work/new.json" "$@")"
    [[ ${#m[@]} -eq 2 ]] || exit 1
    n_wall+=("${m[0]}") && n_cpu+=("${m[1]}")
  done
  local ow nw oc nc
  ow=$(printf '%s\n' "${o_wall[@]}" | median)
  nw=$(printf '%s\n' "${n_wall[@]}" | median)
  oc=$(printf '%s\n' "${o_cpu[@]}" | median)
  nc=$(printf '%s\n' "${n_cpu[@]}" | median)
  printf '%-22s wall: old %7.3f s  new %7.3f s  ratio %s\n' "$label" "$ow" "$nw" "$(ratio "$ow" "$nw")"
  printf '%-22s cpu:  old %7.3f s  new %7.3f s  ratio %s\n' "" "$oc" "$nc" "$(ratio "$oc" "$nc")"
  printf '%-22s runs (wall/cpu) old: %s / %s; new: %s / %s\n' "" "${o_wall[*]}" "${o_cpu[*]}" \
    "${n_wall[*]}" "${n_cpu[*]}"
}

echo "old: $old"
echo "new: $new"
echo "median of $repeats interleaved runs"
echo "loadavg before: $(cat /proc/loadavg)"
run_case "--step-time fixed:10" --step-time fixed:10
run_case "default step time"
echo "loadavg after: $(cat /proc/loadavg)"
