// The model/card flags shared by `kvsim plan`, `kvsim replay` and `kvsim sweep`.
//
// add_model_card_options() registers the flags on a subcommand; resolve_plan_inputs() turns the
// parsed values into the planner's PlanInputs (reading presets or a config.json). The caller sets
// PlanInputs::concurrency itself when it has such a flag (plan does; replay does not).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

#include "kvsim/core/planner.h"

namespace kvsim::cli {

// Raw flag values. Empty strings / nullopt mean "not given". Defaults are vLLM's where vLLM has
// the same flag (0.92 utilization, block size 16, kv-cache-dtype auto).
struct PlanOptions {
  // Model: exactly one of --model / --config, or explicit shape flags; shape flags also override.
  std::string model;
  std::string config_path;
  std::optional<int64_t> num_layers;
  std::optional<int64_t> num_kv_heads;
  std::optional<int64_t> head_dim;
  std::optional<double> num_params;
  std::string dtype = "auto";  // the model's serving dtype; auto = the preset's / config's
  // Card.
  std::string gpu;  // empty with no --vram-gib / --gpu-spec: rtx4090 (the lesson's card)
  std::optional<double> vram_gib;
  std::string gpu_spec_path;  // --gpu-spec FILE: a card from JSON (not with --gpu / --vram-gib)
  double gpu_memory_utilization = 0.92;
  double overhead_gib = 1.6;
  std::optional<double> weights_gib;
  std::string quantization = "auto";
  std::string kv_cache_dtype = "auto";
  int64_t tensor_parallel_size = 1;
  // Pool shape.
  std::optional<int64_t> max_model_len;
  int64_t block_size = 16;
  std::optional<int64_t> num_gpu_blocks_override;
  // vLLM --kv-cache-memory-bytes: the KV budget itself (weights and overhead then do not count).
  std::optional<int64_t> kv_cache_memory_bytes;
  // vLLM --disable-hybrid-kv-cache-manager (true) / --no-disable-hybrid-kv-cache-manager (false);
  // unset: vLLM's rule (off for chunked local attention models).
  std::optional<bool> disable_hybrid_kv_cache_manager;
};

// The card used when neither --gpu nor --vram-gib is given (the lesson's RTX 4090).
inline constexpr const char* kDefaultGpu = "rtx4090";

// Registers --model --config --num-layers --num-kv-heads --head-dim --num-params --dtype --gpu
// --vram-gib --gpu-spec --gpu-memory-utilization --overhead-gib --weights-gib --quantization
// --kv-cache-dtype --tensor-parallel-size --max-model-len --block-size
// --num-gpu-blocks-override --kv-cache-memory-bytes --(no-)disable-hybrid-kv-cache-manager on
// `app`, storing into `opts` (which must outlive parsing).
void add_model_card_options(CLI::App* app, PlanOptions& opts);

// Builds the planner inputs. Throws std::invalid_argument / std::runtime_error (one line naming
// the flag or the config file and field) on bad values.
PlanInputs resolve_plan_inputs(const PlanOptions& opts);

// True when the card came from the default (no --gpu, no --vram-gib, no --gpu-spec).
bool uses_default_gpu(const PlanOptions& opts);

// Refuses a --kv-cache-dtype value vLLM does not know, listing the ones it does: "FLAG: unknown
// value 'fp88' (expected auto, ...)". fp8_ds_mla is known but needs an MLA model (the planner
// says so once the model is resolved; check_kv_cache_dtype_for_model says it up front).
void check_kv_cache_dtype(std::string_view flag, std::string_view value);
CLI::Validator kv_cache_dtype_validator();
void check_kv_cache_dtype_for_model(std::string_view flag, std::string_view value,
                                    const ModelSpec& model);

}  // namespace kvsim::cli
