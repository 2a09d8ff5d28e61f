#!/bin/bash
# A `kvsim size` search as a Slurm job array: each array task searches one shard of the
# candidates (--shard I/N), and a dependent job merges the shard reports into the ranked
# report an unsharded run would have written (byte-identical; docs/size.md).
#
# Run it on a login node (it only submits):
#   bash docs/examples/size-slurm.sh                   # 8 shards
#   SHARDS=16 CPUS=8 bash docs/examples/size-slurm.sh
#
# Assumes a shared filesystem holding the kvsim build and the trace at the same path on every
# node (set KVSIM, TRACE and OUT). Each task uses --jobs = its CPUs. kvsim writes each report to
# a temporary file and renames it, so a shard file that exists is complete.
set -euo pipefail

KVSIM=${KVSIM:-$PWD/build/cli/kvsim}
TRACE=${TRACE:-$PWD/traces/AzureLLMInferenceTrace_conv.csv}
OUT=${OUT:-$PWD/size-out}
SHARDS=${SHARDS:-8}
CPUS=${CPUS:-4}
# The search: every shard must get exactly the same flags (the merge checks their fingerprint).
SEARCH=(--model llama-3.1-8b --max-model-len 8192
        --slo-ttft-p99 2 --slo-tpot-p99 0.1
        --gpus l40s,h100-80g,h200-141g --tp 1,2,4,8 --kv-cache-dtype auto,fp8
        --max-num-seqs 128,256 --router least-outstanding --max-replicas 64)

mkdir -p "$OUT"
# One array task per shard. %A = array job id, %a = task index.
array_job=$(sbatch --parsable --array=0-$((SHARDS - 1)) --cpus-per-task="$CPUS" \
  --time=00:30:00 --job-name=kvsim-size --output="$OUT/shard-%a.log" \
  --wrap="'$KVSIM' size '$TRACE' ${SEARCH[*]} --jobs $CPUS --quiet \
          --shard \$SLURM_ARRAY_TASK_ID/$SHARDS --json '$OUT'/shard-\$SLURM_ARRAY_TASK_ID.json")
echo "submitted array job $array_job ($SHARDS shards)"

# The merge runs once every shard succeeded (afterok); a missing or failed shard makes the
# merge fail with the missing candidate's index. Exit status 3 = no candidate meets the SLO.
merge_job=$(sbatch --parsable --dependency=afterok:"$array_job" --cpus-per-task=1 \
  --time=00:05:00 --job-name=kvsim-size-merge --output="$OUT/merge.log" \
  --wrap="'$KVSIM' size --merge '$OUT'/shard-*.json --json '$OUT'/size.json \
          --csv '$OUT'/size.csv")
echo "submitted merge job $merge_job: $OUT/size.json, $OUT/size.csv, table in $OUT/merge.log"
