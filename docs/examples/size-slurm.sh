#!/bin/bash
# A `kvsim size` search as a Slurm job array: each array task searches one shard of the
# candidates (--shard I/N), and a job that depends on the whole array (afterok) merges the shard
# reports into the ranked report an unsharded run would have written, byte for byte
# (docs/size.md). tools/check_slurm_example.sh runs this script on a one-node Slurm and checks that.
#
# Run it on a login node, from a directory on the shared filesystem (it only submits):
#   bash docs/examples/size-slurm.sh                     # 8 shards of 4 CPUs, into ./size-out
#   SHARDS=16 CPUS=8 OUT=/scratch/me/size bash docs/examples/size-slurm.sh
#   TRACE_FLAGS="--max-requests 2000" bash docs/examples/size-slurm.sh   # a quick first try
#
# `kvsim` must be on PATH on every node (the jobs inherit the submitting shell's environment) and
# the trace at the same path. kvsim writes each report to a temporary file and renames it, so a
# shard file that exists is complete.
set -euo pipefail

TRACE=${TRACE:-traces/AzureLLMInferenceTrace_conv.csv}
TRACE_FLAGS=${TRACE_FLAGS:-}  # trace window/scale flags: --max-requests N, --time-scale X, ...
OUT=${OUT:-$PWD/size-out}
SHARDS=${SHARDS:-8}
CPUS=${CPUS:-4}
# The search: every shard gets exactly these flags (the merge checks their fingerprint, size_id).
SEARCH=(--model llama-3.1-8b --max-model-len 8192
        --slo-ttft-p99 2 --slo-tpot-p99 0.1
        --gpus l40s,h100-80g,h200-141g --tp 1,2,4,8 --kv-cache-dtype auto,fp8
        --max-num-seqs 128,256 --router least-outstanding --max-replicas 64)

mkdir -p "$OUT"
rm -f "$OUT"/shard-*.json  # shards of an earlier search would be merged too
# The search's arguments, shell-quoted: the jobs run them, and so can an unsharded rerun
# (eval "kvsim size $(cat "$OUT/search.args") --json size.json").
# shellcheck disable=SC2086  # TRACE_FLAGS is a list of flags
printf '%q ' "$TRACE" $TRACE_FLAGS "${SEARCH[@]}" >"$OUT/search.args"

# One array task per shard (%a in --output = the task index).
array_job=$(sbatch --parsable --job-name=kvsim-size --array=0-$((SHARDS - 1)) \
  --cpus-per-task="$CPUS" --time=00:30:00 --output="$OUT/shard-%a.log" <<EOF
#!/bin/bash
set -euo pipefail
kvsim size $(cat "$OUT/search.args") --jobs $CPUS --quiet \\
  --shard \$SLURM_ARRAY_TASK_ID/$SHARDS --json "$OUT/shard-\$SLURM_ARRAY_TASK_ID.json"
EOF
)
echo "submitted array job $array_job ($SHARDS shards, --cpus-per-task=$CPUS)"

# Runs once every shard succeeded (afterok). A missing or failed shard makes the merge fail,
# naming the missing candidate; exit status 3 = the search ran but no candidate meets the SLO.
merge_job=$(sbatch --parsable --job-name=kvsim-size-merge --dependency=afterok:"$array_job" \
  --cpus-per-task=1 --time=00:05:00 --output="$OUT/merge.log" <<EOF
#!/bin/bash
kvsim size --merge "$OUT"/shard-*.json --json "$OUT/all.json" --csv "$OUT/all.csv"
EOF
)
echo "submitted merge job $merge_job: $OUT/all.json and $OUT/all.csv, the table in $OUT/merge.log"
