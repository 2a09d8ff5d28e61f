#!/usr/bin/env bash
# A profile-guided Release build of the kvsim CLI (GCC's -fprofile-generate / -fprofile-use), for
# replays where speed matters (bench/vllm_replay_compare.py). Stage 1 builds an instrumented
# kvsim, which replays the training set below; stage 2 rebuilds kvsim with that profile.
#
# The training set is every bundled trace but Azure conv -- the trace the comparison with vLLM
# times -- in both scheduling modes, at the default step-time model without outputs and at a
# fixed step time with the timeline and requests CSVs: the profile is the engine's, not the
# benchmark's. A profile changes how the code is laid out and inlined, never what it computes:
# the outputs are byte for byte those of a plain Release build (check with
# bench/replay_identity.sh build/release/cli/kvsim build/pgo/cli/kvsim).
#
# Usage: bash tools/build_pgo.sh [BUILD_DIR]      (default build/pgo; the binary is BUILD_DIR/cli/kvsim)
# Takes about twice a Release build of kvsim (every object is compiled twice).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build/pgo}
jobs=${KVSIM_JOBS:-$(nproc)}
configure=(cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVSIM_CUDA=OFF
           -DKVSIM_STATIC_RUNTIME=ON)

echo "== stage 1: instrumented kvsim in $dir"
"${configure[@]}" "-DCMAKE_CXX_FLAGS=-fprofile-generate -fprofile-update=prefer-atomic" >/dev/null
cmake --build "$dir" -j "$jobs" --target kvsim
# A profile left by an earlier build would be merged into this one.
find "$dir" -name '*.gcda' -delete

echo "== training replays"
kvsim="$dir/cli/kvsim"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for trace in traces/AzureLLMInferenceTrace_code.csv traces/conversation_trace.jsonl \
             traces/splitwise_conv.csv traces/splitwise_code.csv traces/BurstGPT_1.head400.csv; do
  for mode in --no-async-scheduling --async-scheduling; do
    args=("$trace" --model qwen2.5-7b --num-gpu-blocks-override 2048 --max-model-len 8192
          --no-progress "$mode")
    "$kvsim" replay "${args[@]}" >/dev/null
    "$kvsim" replay "${args[@]}" --step-time fixed:10 --timeline "$out/timeline.csv" \
      --requests "$out/requests.csv" >/dev/null
  done
done

echo "== stage 2: kvsim built with the profile"
"${configure[@]}" "-DCMAKE_CXX_FLAGS=-fprofile-use -fprofile-partial-training -Wno-missing-profile" \
  >/dev/null
cmake --build "$dir" -j "$jobs" --target kvsim
echo "profile-guided kvsim: $kvsim"
