// The model / card / pool flags of `kvsim plan`, `replay`, `sweep`, `size` and `calibrate`
// (vLLM's names), stored into the run room's PlanOptions (kvsim/run/plan_options.h), which also
// resolves them.
#pragma once

#include <CLI/CLI.hpp>

#include "kvsim/run/plan_options.h"

namespace kvsim::cli {

// Registers --model --config --num-layers --num-kv-heads --head-dim --num-params --dtype --gpu
// --vram-gib --gpu-spec --gpu-memory-utilization --overhead-gib --weights-gib --quantization
// --kv-cache-dtype --tensor-parallel-size --max-model-len --block-size
// --num-gpu-blocks-override --kv-cache-memory-bytes --(no-)disable-hybrid-kv-cache-manager on
// `app`, storing into `opts` (which must outlive parsing).
void add_model_card_options(CLI::App* app, run::PlanOptions& opts);

// Refuses, at parse time, a --kv-cache-dtype value vLLM does not know (run::check_kv_cache_dtype).
CLI::Validator kv_cache_dtype_validator();

}  // namespace kvsim::cli
