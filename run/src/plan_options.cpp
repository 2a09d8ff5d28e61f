// Model / card / pool settings -> PlanInputs.
#include "kvsim/run/plan_options.h"

#include <stdexcept>

#include <fmt/core.h>

#include "kvsim/core/model_presets.h"
#include "kvsim/core/param.h"
#include "kvsim/sim/io/gpu_spec.h"
#include "kvsim/sim/io/model_config.h"

namespace kvsim::run {
namespace {

void require_positive(const std::optional<int64_t>& v, const char* id) {
  if (v && *v <= 0) {
    throw std::invalid_argument(fmt::format("{} must be > 0 (got {})", param(id), *v));
  }
}

// The planner's shape bounds (planner.h), checked here so that the message names the parameter.
void require_in_range(const std::optional<int64_t>& v, int64_t max, const char* id) {
  if (v && (*v < 1 || *v > max)) {
    throw std::invalid_argument(fmt::format("{} must be in [1, {}] (got {})", param(id), max, *v));
  }
}

ModelSpec resolve_model(const PlanOptions& o) {
  if (!o.model.empty() && !o.config_path.empty()) {
    throw std::invalid_argument(
        fmt::format("give either {} or {}, not both", param("model"), param("config")));
  }
  require_in_range(o.num_layers, kMaxNumLayers, "num_layers");
  require_in_range(o.num_kv_heads, kMaxHeads, "num_kv_heads");
  require_in_range(o.head_dim, kMaxHeadDim, "head_dim");
  if (o.num_params && !(*o.num_params > 0 && *o.num_params <= kMaxNumParams)) {
    throw std::invalid_argument(fmt::format("{} must be in (0, {:g}] (got {:g})",
                                            param("num_params"), kMaxNumParams, *o.num_params));
  }

  ModelSpec m;
  if (!o.model.empty()) {
    m = find_model_preset(o.model);
  } else if (!o.config_path.empty()) {
    m = load_hf_config(o.config_path);
  } else {
    if (!o.num_layers || !o.num_kv_heads || !o.head_dim) {
      throw std::invalid_argument(fmt::format("no model: pass {} ({}), {}, or all of {} {} {}",
                                              param("model", "NAME"), model_preset_names(),
                                              param("config", "config.json"), param("num_layers"),
                                              param("num_kv_heads"), param("head_dim")));
    }
    m.name = "custom";
  }
  if (o.num_layers) m.num_layers = *o.num_layers;
  if (o.num_kv_heads) {
    m.num_kv_heads = *o.num_kv_heads;
    // An attention-head count that no longer holds the KV heads is stale: forget it.
    if (m.num_attention_heads != 0 && m.num_attention_heads % m.num_kv_heads != 0) {
      m.num_attention_heads = 0;
    }
  }
  if (o.head_dim) {
    m.head_dim = *o.head_dim;
    if (m.use_mla) {
      throw std::invalid_argument(
          fmt::format("{} does not apply to an MLA model (its KV width is "
                      "kv_lora_rank + qk_rope_head_dim)",
                      param("head_dim")));
    }
  }
  if (o.num_params) {
    m.num_parameters = *o.num_params;
    m.num_active_parameters = *o.num_params;
    m.num_parameters_estimated = false;
  }
  if (o.dtype != "auto") {
    if (o.dtype != "bfloat16" && o.dtype != "float16" && o.dtype != "float32") {
      throw std::invalid_argument(
          fmt::format("{}: unknown value '{}' (expected auto, bfloat16, float16 or float32)",
                      param("dtype"), o.dtype));
    }
    m.dtype = o.dtype;
  }
  return m;
}

GpuSpec resolve_gpu(const PlanOptions& o) {
  if (!o.gpu_spec_path.empty()) {
    if (!o.gpu.empty() || o.vram_gib) {
      throw std::invalid_argument(fmt::format("give either {} or {}, not both", param("gpu_spec"),
                                              param(o.gpu.empty() ? "vram_gib" : "gpu")));
    }
    return load_gpu_spec(o.gpu_spec_path);
  }
  GpuSpec g;
  if (!o.gpu.empty()) {
    g = find_gpu_preset(o.gpu);
  } else if (!o.vram_gib) {
    g = find_gpu_preset(kDefaultGpu);
  } else {
    g.name = "custom";
  }
  if (o.vram_gib) {
    if (!(*o.vram_gib > 0 && *o.vram_gib <= kMaxVramGib)) {
      throw std::invalid_argument(fmt::format("{} must be in (0, {:g}] (got {:g})",
                                              param("vram_gib"), kMaxVramGib, *o.vram_gib));
    }
    g.vram_gib = *o.vram_gib;
  }
  return g;
}

}  // namespace

VllmVersion resolve_vllm_version(std::string_view given) {
  if (given.empty()) return kDefaultVllmVersion;
  if (const auto v = parse_vllm_version(given)) return *v;
  throw std::invalid_argument(fmt::format("{}: unknown vLLM release (expected {})",
                                          param("vllm_version", given), vllm_version_names()));
}

void check_kv_cache_dtype(std::string_view param_id, std::string_view value) {
  for (const char* d :
       {"auto", "bfloat16", "float16", "float32", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_ds_mla"}) {
    if (value == d) return;
  }
  throw std::invalid_argument(fmt::format("{}: unknown value '{}' (expected {})", param(param_id),
                                          value, kKvCacheDtypeNames));
}

void check_kv_cache_dtype_for_model(std::string_view param_id, std::string_view value,
                                    const ModelSpec& model) {
  check_kv_cache_dtype(param_id, value);
  if (value == "fp8_ds_mla" && !model.use_mla) {
    throw std::invalid_argument(fmt::format("{}: fp8_ds_mla needs an MLA model ('{}' is not one)",
                                            param(param_id), model.name));
  }
}

PlanInputs resolve_plan_inputs(const PlanOptions& o) {
  require_positive(o.max_model_len, "max_model_len");
  PlanInputs in;
  in.model = resolve_model(o);
  in.gpu = resolve_gpu(o);
  in.gpu_memory_utilization = o.gpu_memory_utilization;
  in.overhead_gib = o.overhead_gib;
  in.weights_gib = o.weights_gib;
  in.quantization = o.quantization;
  in.kv_cache_dtype = o.kv_cache_dtype;
  in.tensor_parallel_size = o.tensor_parallel_size;
  in.max_model_len = o.max_model_len.value_or(0);
  in.block_size = o.block_size;
  in.num_gpu_blocks_override = o.num_gpu_blocks_override;
  require_positive(o.kv_cache_memory_bytes, "kv_cache_memory_bytes");
  in.kv_cache_memory_bytes = o.kv_cache_memory_bytes;
  in.disable_hybrid_kv_cache_manager = o.disable_hybrid_kv_cache_manager;
  in.vllm_version = resolve_vllm_version(o.vllm_version);
  return in;
}

bool model_given(const PlanOptions& p) {
  return !p.model.empty() || !p.config_path.empty() ||
         (p.num_layers && p.num_kv_heads && p.head_dim);
}

bool shape_given(const PlanOptions& p) {
  return p.num_layers || p.num_kv_heads || p.head_dim;
}

bool uses_default_gpu(const PlanOptions& o) {
  return o.gpu.empty() && !o.vram_gib && o.gpu_spec_path.empty();
}

}  // namespace kvsim::run
