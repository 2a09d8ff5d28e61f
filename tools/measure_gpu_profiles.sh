#!/usr/bin/env bash
# Measures operator profiles (`kvsim_gpu_profile`, Vidur's mlp.csv layout) for several models on
# this machine's GPU, for `--step-time profile:DIR`, in one device call. Each model's directory is
# packed into $OUT/<model>.tar.gz as soon as it is written, so a run stopped by its time limit
# still returns the models it finished; $OUT/measure_gpu_profiles.log has the commands and times.
# The device tool brings back 8 files: the log and 7 models a call.
#
#   bash tools/measure_gpu_profiles.sh                          # the default models below
#   bash tools/measure_gpu_profiles.sh llama-3.1-8b:8192 ...    # MODEL[:MAX_TOKENS] ...
#   DRY_RUN=1 CARD=h200 bash tools/measure_gpu_profiles.sh      # rehearsal without a GPU (FAKE)
#
# Builds only kvsim_gpu_profile, from .gpu-bundle/ when present (tools/make_gpu_bundle.sh; preset
# gpu-bundle) or from the system packages (preset gpu). Each archive holds
# calibration/kvsim-<card>/<model>/ (card: CARD, or the GPU's name without "NVIDIA", lower case,
# words joined by '-': "NVIDIA H200" -> h200, "NVIDIA GeForce RTX 4090" -> geforce-rtx-4090), so
# `tar -xzf` in the repository root puts it where its README.md says.
# Exit status: 0 = every model written; 1 = a build step or a model failed (the log says which).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-./gpu-profiles}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
LOG=$OUT/measure_gpu_profiles.log
: >"$LOG"
export PATH=/usr/local/cuda/bin:$PATH
say() { echo "measure_gpu_profiles: $*" | tee -a "$LOG"; }

# 7-8B models to 8192 tokens a step; the larger ones to Vidur's 4096 (their GEMMs at 8192 would
# take about a minute each on an H200).
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(llama-3.1-8b:8192 qwen2.5-7b:8192 qwen3-8b:8192 mistral-7b:8192
                                   llama-3.1-70b:4096 qwen2.5-72b:4096 qwen3-32b:4096)
[ -f .gpu-bundle/MANIFEST ] && preset=gpu-bundle || preset=gpu
commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
say "commit $commit, preset $preset, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader \
  2>&1 | tee -a "$LOG"
card=${CARD:-$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 \
  | tr 'A-Z' 'a-z' | sed -e 's/^nvidia //' -e 's/[^a-z0-9]\{1,\}/-/g' -e 's/-$//')}
card=${card:-unknown}

if ! cmake --preset "$preset" >"$OUT/configure.txt" 2>&1 \
  || ! cmake --build "build/$preset" -j "$(nproc)" --target kvsim_gpu_profile >>"$OUT/configure.txt" 2>&1; then
  tail -20 "$OUT/configure.txt" | tee -a "$LOG"
  say "FAILED: configure or build of kvsim_gpu_profile (preset $preset)"
  exit 1
fi
rm -f "$OUT/configure.txt"
say "built kvsim_gpu_profile in ${SECONDS} s"

work=$(mktemp -d)
profiler=$PWD/build/$preset/cuda/kvsim_gpu_profile
status=0
for spec in "${models[@]}"; do
  model=${spec%%:*}
  max_tokens=4096
  [ "$spec" = "$model" ] || max_tokens=${spec#*:}
  t0=$SECONDS
  dir=calibration/kvsim-$card/$model # relative, so the README's paths are the repository's
  if (cd "$work" && "$profiler" --model "$model" --max-tokens "$max_tokens" --commit "$commit" \
    --out "$dir" ${DRY_RUN:+--dry-run}) >>"$LOG" 2>&1; then
    tar -czf "$OUT/$model.tar.gz" -C "$work" "$dir"
    say "$model (to $max_tokens tokens): ok in $((SECONDS - t0)) s"
  else
    say "$model (to $max_tokens tokens): FAILED after $((SECONDS - t0)) s"
    status=1
  fi
done
rm -rf "$work"
say "done in ${SECONDS} s (exit $status)"
exit "$status"
