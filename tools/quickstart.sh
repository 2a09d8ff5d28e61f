#!/usr/bin/env bash
# Quick start: installs what is missing (apt-get), builds kvsim in Release and runs the main job on
# bundled data: the lesson's capacity plan, then a replay of the bundled Azure conversation trace
# through vLLM's allocator and scheduler with the same model and card.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "${KVSIM_JOBS:-$(nproc)}" --target kvsim
KVSIM=build/release/cli/kvsim
# The lesson's best plan: Qwen2.5-7B-AWQ (5.5 GiB) with an FP8 KV cache on a 24 GiB RTX 4090.
LESSON=(--model qwen2.5-7b --gpu rtx4090 --gpu-memory-utilization 0.90 --overhead-gib 1.6
        --weights-gib 5.5 --kv-cache-dtype fp8 --max-model-len 8192)
# --vllm-version 0.26: the release whose start-up lines the lesson quotes; kvsim's default, 0.33,
# reports the same capacity on one line (shown after it).
echo "== kvsim plan ${LESSON[*]} --concurrency 64 --vllm-version 0.26"
"$KVSIM" plan "${LESSON[@]}" --concurrency 64 --vllm-version 0.26
echo
echo "== the same plan as vLLM 0.33 (kvsim's default) reports it:"
"$KVSIM" plan "${LESSON[@]}" | tail -n 1
echo
echo "== kvsim replay traces/AzureLLMInferenceTrace_conv.csv ${LESSON[*]}"
"$KVSIM" replay traces/AzureLLMInferenceTrace_conv.csv "${LESSON[@]}" \
  --json build/release/azure_conv_summary.json --timeline build/release/azure_conv_timeline.csv
