#!/usr/bin/env bash
# The `kvsim size` performance target (issue 11): a search over >= 48 candidate configurations
# on the whole Azure conversation trace in under 60 s on the 2-core development machine.
#
#   bash bench/size_bench.sh                          # uses build/size/cli/kvsim
#   KVSIM=build/release/cli/kvsim JOBS=2 bash bench/size_bench.sh
#   EARLY_STOP=0 bash bench/size_bench.sh             # the same search without early stop
#   TIME_SCALE=0.1 bash bench/size_bench.sh           # 10x the request rate: a harder search
#
# The grid: 3 cards x TP 1,2,4,8 x KV auto,fp8 x max_num_seqs 128,256 = 48 candidates of
# llama-3.1-8b (max_model_len 8192), SLO TTFT p99 <= 2 s and TPOT p99 <= 0.1 s, least-outstanding
# router, up to 64 replicas. Prints the load average before and after (the machine is shared:
# read the wall time with it), the wall time, and the search's own summary line; writes the
# report to $OUT (default /tmp/kvsim-size-bench).
set -euo pipefail
cd "$(dirname "$0")/.."
KVSIM=${KVSIM:-build/size/cli/kvsim}
JOBS=${JOBS:-2}
OUT=${OUT:-/tmp/kvsim-size-bench}
EARLY_STOP=${EARLY_STOP:-1}
TIME_SCALE=${TIME_SCALE:-1}
TRACE=traces/AzureLLMInferenceTrace_conv.csv
mkdir -p "$OUT"
extra=()
[ "$EARLY_STOP" = 1 ] || extra+=(--no-early-stop)

echo "kvsim:   $KVSIM ($(git rev-parse --short HEAD 2>/dev/null || echo '?'))"
echo "machine: $(nproc) cores; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "time scale: $TIME_SCALE, early stop: $EARLY_STOP, jobs: $JOBS"
start=$(date +%s.%N)
/usr/bin/time -f "cpu: %U s user, %S s system" -o "$OUT/time.txt" \
  "$KVSIM" size "$TRACE" --time-scale "$TIME_SCALE" --model llama-3.1-8b --max-model-len 8192 \
  --slo-ttft-p99 2 --slo-tpot-p99 0.1 \
  --gpus l40s,h100-80g,h200-141g --tp 1,2,4,8 --kv-cache-dtype auto,fp8 \
  --max-num-seqs 128,256 --router least-outstanding --max-replicas 64 \
  --jobs "$JOBS" "${extra[@]}" --json "$OUT/size.json" --csv "$OUT/size.csv" \
  >"$OUT/table.txt" 2>"$OUT/stderr.txt" || status=$?
end=$(date +%s.%N)
echo "load average after:  $(cut -d' ' -f1-3 /proc/loadavg)"
cat "$OUT/stderr.txt" "$OUT/time.txt"
head -8 "$OUT/table.txt"
wall=$(echo "$end - $start" | bc)
echo "wall: ${wall} s (target < 60 s), exit status ${status:-0}; report in $OUT"
