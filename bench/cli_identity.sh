#!/usr/bin/env bash
# Byte-identity of two kvsim binaries on every command's outputs, error messages and help: 47
# commands (plan, replay plain/cluster/swap/host backend, sweep, size, gen, and the bad-input
# cases whose one-line errors the run room now words) run by both binaries; stdout, stderr and
# the exit status must match, with only wall-clock and measured device times masked and the
# binary's own path in the usage line. The companion of bench/replay_identity.sh (which covers
# the replay CSVs on the bundled traces) for a change that moves code between rooms.
#
# Usage: bench/cli_identity.sh OLD_KVSIM NEW_KVSIM   (prints the differing commands; exits 1)
set -uo pipefail
if [[ $# -ne 2 ]]; then
  echo "usage: $0 OLD_KVSIM NEW_KVSIM" >&2
  exit 2
fi
old=$(realpath "$1"); new=$(realpath "$2")
R=$(cd "$(dirname "$0")/.." && pwd); T=$R/traces; D=$R/tests/data
w=$(mktemp -d); trap 'rm -rf "$w"' EXIT
cd "$w" || exit 2
cmds=(
"plan --model qwen2.5-7b"
"plan --model qwen2.5-7b --json --concurrency 8"
"plan --model gemma-3-12b --gpu h100-80g"
"plan --config $D/hf_gpt-oss-20b.json --gpu h100-80g --json"
"plan --vram-gib 24"
"plan --model qwen2.5-7b --config $D/hf_qwen2.5-7b-instruct.json"
"plan --model qwen2.5-7b --block-size 0"
"plan --model qwen2.5-7b --kv-cache-dtype fp88"
"plan --model qwen2.5-7b --gpu-spec x.json --gpu h100-80g"
"replay $T/BurstGPT_1.head400.csv --no-progress"
"replay $T/BurstGPT_1.head400.csv --no-progress --model llama-3.1-8b --num-layers 4"
"replay $T/BurstGPT_1.head400.csv --no-progress --replicas 2 --router kv-aware --json -"
"replay $T/BurstGPT_1.head400.csv --no-progress --replicas 2 --backend host"
"replay $T/BurstGPT_1.head400.csv --no-progress --swap-space-gib 3"
"replay $T/BurstGPT_1.head400.csv --no-progress --backend-max-layers 2"
"replay $T/BurstGPT_1.head400.csv --no-progress --max-model-len 1"
"replay $T/BurstGPT_1.head400.csv --no-progress --preemption-mode swap --num-gpu-blocks-override 300 --json -"
"replay $T/BurstGPT_1.head400.csv --no-progress --rate 3"
"replay $T/BurstGPT_1.head400.csv --no-progress --arrival poisson"
"replay $T/BurstGPT_1.head400.csv --no-progress --slo-stop-early"
"replay $T/BurstGPT_1.head400.csv --no-progress --affinity-load-factor 2"
"replay $T/BurstGPT_1.head400.csv --no-progress --start 1e9"
"replay $T/BurstGPT_1.head400.csv --no-progress --backend host --backend-max-layers 2 --max-requests 50"
"replay $T/BurstGPT_1.head400.csv --no-progress --step-time fixed:x"
"replay $T/BurstGPT_1.head400.csv --no-progress --async-scheduling --preemption-mode swap"
"replay $T/BurstGPT_1.head400.csv --no-progress --replicas 3 --admission-max-waiting-tokens 1 --requests -"
"sweep $T/BurstGPT_1.head400.csv --model qwen2.5-7b --block-sizes 16,32 --max-num-seqs 8,64"
"sweep $T/BurstGPT_1.head400.csv --model qwen2.5-7b --block-sizes 16,32 --csv -"
"sweep $T/BurstGPT_1.head400.csv --model qwen2.5-7b --block-sizes ,16"
"sweep $T/BurstGPT_1.head400.csv --model qwen2.5-7b --kv-cache-dtypes fp88"
"sweep $T/BurstGPT_1.head400.csv --model qwen2.5-7b --gpu-memory-utilizations 0.9 --num-gpu-blocks 100"
"size $T/BurstGPT_1.head400.csv --model qwen2.5-7b --slo-ttft-p99 2 --slo-tpot-p99 0.1 --gpus l40s,h100-80g --tp 1 --json -"
"size $T/BurstGPT_1.head400.csv --model qwen2.5-7b --slo-ttft-p99 2 --slo-tpot-p99 0.1 --gpus l40s --tp 1,2 --csv - --max-replicas 4"
"size $T/BurstGPT_1.head400.csv --model qwen2.5-7b --slo-ttft-p99 2 --gpus l40s --tp 1"
"size $T/BurstGPT_1.head400.csv --slo-ttft-p99 2 --slo-tpot-p99 0.1 --gpus l40s --tp 1"
"size $T/BurstGPT_1.head400.csv --model qwen2.5-7b --slo-ttft-p99 2 --slo-tpot-p99 0.1 --gpus h100 --tp 1"
"size $T/BurstGPT_1.head400.csv --model qwen2.5-7b --slo-ttft-p99 0.001 --slo-tpot-p99 0.001 --gpus l40s --tp 1 --max-replicas 2"
"gen -n 20 --seed 4 --arrival gamma --cv 2"
"gen -n 20 --seed 4 --prefix-groups 3 --prefix-tokens 40 --prefix-as token-ids --vocab-size 100"
"gen -n 5 --cv 2"
"gen -n 5 --input-len normal:10,1000"
"gen -n 5 --input-len bogus:1"
"replay --help"
"sweep --help"
"size --help"
"gen --help"
"plan --help"
)
n=0; bad=0
for c in "${cmds[@]}"; do
  n=$((n+1))
  $old $c >$w/o.out 2>$w/o.err; ro=$?
  $new $c >$w/n.out 2>$w/n.err; rn=$?
  sed -i -E 's/[0-9.]+ s wall/X s wall/; s/"wall_seconds": [0-9.e-]+/"wall_seconds": X/;
    s/[0-9.]+ s device time/X s device time/; s/\([0-9.]+ GB\/s\)/(X GB\/s)/;
    s/"backend_device_seconds": [0-9.e-]+/"backend_device_seconds": X/;
    s#^Usage: [^ ]+ #Usage: kvsim #' $w/{o,n}.{out,err}
  if [[ $ro != $rn ]] || ! cmp -s $w/o.out $w/n.out || ! cmp -s $w/o.err $w/n.err; then
    bad=$((bad+1)); echo "DIFF ($ro/$rn): $c"; diff $w/o.err $w/n.err | head -4; diff $w/o.out $w/n.out | head -4
  fi
done
echo "$n commands, $bad differ"
[[ $bad -eq 0 ]] && echo "ALL IDENTICAL"
[[ $bad -eq 0 ]]
