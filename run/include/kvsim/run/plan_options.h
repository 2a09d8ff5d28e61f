// The model / card / pool settings every command takes (vLLM's engine-argument names), and their
// resolution into the planner's PlanInputs: a preset, a Hugging Face config.json, or explicit
// shape values, with overrides. Both front ends fill PlanOptions (the CLI from its flags, Python
// from keywords); errors name parameters with kvsim::param (core/param.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "kvsim/core/planner.h"
#include "kvsim/core/types.h"

namespace kvsim::run {

// The lesson's model and card: what a replay uses when no model is named, and every command
// when no card is named.
inline constexpr const char* kDefaultModel = "qwen2.5-7b";
inline constexpr const char* kDefaultGpu = "rtx4090";
// vLLM's defaults for the same settings.
inline constexpr double kDefaultGpuMemoryUtilization = 0.92;
inline constexpr double kDefaultOverheadGib = 1.6;  // CUDA context + activations + framework

// Values as given. Empty strings / nullopt mean "not given".
struct PlanOptions {
  // Model: one of model / config, or all three shape values; shape values also override.
  std::string model;
  std::string config_path;
  std::optional<int64_t> num_layers;
  std::optional<int64_t> num_kv_heads;
  std::optional<int64_t> head_dim;
  std::optional<double> num_params;
  std::string dtype = "auto";  // the model's serving dtype; auto = the preset's / config's
  // Card: gpu, or vram_gib, or gpu_spec_path (a card from JSON); none: kDefaultGpu.
  std::string gpu;
  std::optional<double> vram_gib;
  std::string gpu_spec_path;
  double gpu_memory_utilization = kDefaultGpuMemoryUtilization;
  double overhead_gib = kDefaultOverheadGib;
  std::optional<double> weights_gib;
  std::string quantization = "auto";
  std::string kv_cache_dtype = "auto";
  int64_t tensor_parallel_size = 1;
  // Pool shape.
  std::optional<int64_t> max_model_len;
  int32_t block_size = kDefaultBlockSize;
  std::optional<int64_t> num_gpu_blocks_override;
  // vLLM kv_cache_memory_bytes: the KV budget itself (weights and overhead then do not count).
  std::optional<int64_t> kv_cache_memory_bytes;
  // vLLM disable_hybrid_kv_cache_manager; unset: vLLM's rule (off for chunked local attention).
  std::optional<bool> disable_hybrid_kv_cache_manager;
  // The vLLM release to clone: "0.26" or "0.33" ("0.26.0" / "0.33.0" too); empty: the default
  // (kDefaultVllmVersion, core/vllm_version.h).
  std::string vllm_version;
};

// Builds the planner inputs. Throws std::invalid_argument / std::runtime_error (one line naming
// the parameter or the config file and field) on bad values.
PlanInputs resolve_plan_inputs(const PlanOptions& opts);

// PlanOptions::vllm_version as a release: empty gives kDefaultVllmVersion; anything but a known
// release throws std::invalid_argument naming vllm_version.
VllmVersion resolve_vllm_version(std::string_view given);

// A model is named by model, config, or all three shape values.
bool model_given(const PlanOptions& opts);
// Some of num_layers / num_kv_heads / head_dim given.
bool shape_given(const PlanOptions& opts);
// True when the card comes from the default (no gpu, vram_gib or gpu_spec).
bool uses_default_gpu(const PlanOptions& opts);

// The KV cache dtypes vLLM knows, as one line ("auto, bfloat16, ..., fp8_ds_mla").
inline constexpr std::string_view kKvCacheDtypeNames =
    "auto, bfloat16, float16, float32, fp8, fp8_e4m3, fp8_e5m2 or fp8_ds_mla";
// Refuses a kv_cache_dtype value vLLM does not know: "<param>: unknown value 'fp88' (expected
// ...)", `param_id` naming the parameter (kv_cache_dtype, kv_cache_dtypes, ...). fp8_ds_mla is
// known but needs an MLA model (check_kv_cache_dtype_for_model says so once the model is known).
void check_kv_cache_dtype(std::string_view param_id, std::string_view value);
void check_kv_cache_dtype_for_model(std::string_view param_id, std::string_view value,
                                    const ModelSpec& model);

}  // namespace kvsim::run
