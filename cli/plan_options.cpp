// Model/card flags -> PlanInputs.
#include "plan_options.h"

#include <stdexcept>

#include <fmt/core.h>

#include "kvsim/core/model_presets.h"
#include "kvsim/sim/io/gpu_spec.h"
#include "kvsim/sim/io/model_config.h"

namespace kvsim::cli {
namespace {

void require_positive(const std::optional<int64_t>& v, const char* flag) {
  if (v && *v <= 0) throw std::invalid_argument(fmt::format("{} must be > 0 (got {})", flag, *v));
}

// The planner's shape bounds (planner.h), checked here so that the message names the flag.
void require_in_range(const std::optional<int64_t>& v, int64_t max, const char* flag) {
  if (v && (*v < 1 || *v > max)) {
    throw std::invalid_argument(fmt::format("{} must be in [1, {}] (got {})", flag, max, *v));
  }
}

ModelSpec resolve_model(const PlanOptions& o) {
  if (!o.model.empty() && !o.config_path.empty()) {
    throw std::invalid_argument("give either --model or --config, not both");
  }
  require_in_range(o.num_layers, kMaxNumLayers, "--num-layers");
  require_in_range(o.num_kv_heads, kMaxHeads, "--num-kv-heads");
  require_in_range(o.head_dim, kMaxHeadDim, "--head-dim");
  if (o.num_params && !(*o.num_params > 0 && *o.num_params <= kMaxNumParams)) {
    throw std::invalid_argument(
        fmt::format("--num-params must be in (0, {:g}] (got {:g})", kMaxNumParams, *o.num_params));
  }

  ModelSpec m;
  if (!o.model.empty()) {
    m = find_model_preset(o.model);
  } else if (!o.config_path.empty()) {
    m = load_hf_config(o.config_path);
  } else {
    if (!o.num_layers || !o.num_kv_heads || !o.head_dim) {
      throw std::invalid_argument(fmt::format(
          "no model: pass --model NAME ({}), --config config.json, or all of --num-layers "
          "--num-kv-heads --head-dim",
          model_preset_names()));
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
          "--head-dim does not apply to an MLA model (its KV width is "
          "kv_lora_rank + qk_rope_head_dim)");
    }
  }
  if (o.num_params) {
    m.num_parameters = *o.num_params;
    m.num_active_parameters = *o.num_params;
    m.num_parameters_estimated = false;
  }
  if (o.dtype != "auto") {
    if (o.dtype != "bfloat16" && o.dtype != "float16" && o.dtype != "float32") {
      throw std::invalid_argument(fmt::format(
          "--dtype: unknown value '{}' (expected auto, bfloat16, float16 or float32)", o.dtype));
    }
    m.dtype = o.dtype;
  }
  return m;
}

GpuSpec resolve_gpu(const PlanOptions& o) {
  if (!o.gpu_spec_path.empty()) {
    if (!o.gpu.empty() || o.vram_gib) {
      throw std::invalid_argument(fmt::format("give either --gpu-spec or {}, not both",
                                              o.gpu.empty() ? "--vram-gib" : "--gpu"));
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
      throw std::invalid_argument(
          fmt::format("--vram-gib must be in (0, {:g}] (got {:g})", kMaxVramGib, *o.vram_gib));
    }
    g.vram_gib = *o.vram_gib;
  }
  return g;
}

}  // namespace

void check_kv_cache_dtype(std::string_view flag, std::string_view value) {
  for (const char* d :
       {"auto", "bfloat16", "float16", "float32", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_ds_mla"}) {
    if (value == d) return;
  }
  throw std::invalid_argument(fmt::format(
      "{}: unknown value '{}' (expected auto, bfloat16, float16, float32, fp8, fp8_e4m3, "
      "fp8_e5m2 or fp8_ds_mla)",
      flag, value));
}

CLI::Validator kv_cache_dtype_validator() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        try {
          check_kv_cache_dtype("", s);
        } catch (const std::invalid_argument& e) {
          return std::string(e.what()).substr(2);  // CLI11 prefixes the flag itself
        }
        return "";
      },
      "");
}

void check_kv_cache_dtype_for_model(std::string_view flag, std::string_view value,
                                    const ModelSpec& model) {
  check_kv_cache_dtype(flag, value);
  if (value == "fp8_ds_mla" && !model.use_mla) {
    throw std::invalid_argument(
        fmt::format("{}: fp8_ds_mla needs an MLA model ('{}' is not one)", flag, model.name));
  }
}

void add_model_card_options(CLI::App* app, PlanOptions& o) {
  const std::string models = model_preset_names();
  const std::string gpus = gpu_preset_names();
  app->add_option("--model", o.model, "Model preset: " + models)->group("Model");
  app->add_option("--config", o.config_path, "Hugging Face config.json to read the shape from")
      ->group("Model");
  app->add_option("--num-layers", o.num_layers, "Number of layers (overrides the model)")
      ->group("Model");
  app->add_option("--num-kv-heads", o.num_kv_heads, "Total KV heads (overrides the model)")
      ->group("Model");
  app->add_option("--head-dim", o.head_dim, "Head dimension (overrides the model)")->group("Model");
  app->add_option("--num-params", o.num_params, "Parameter count, e.g. 7.6e9 (overrides)")
      ->group("Model");
  app->add_option("--dtype", o.dtype, "Model dtype: auto|bfloat16|float16|float32")
      ->group("Model")
      ->capture_default_str();
  app->add_option("--gpu", o.gpu, "GPU preset: " + gpus + " (default " + kDefaultGpu + ")")
      ->group("Card");
  app->add_option("--vram-gib", o.vram_gib, "Card memory in GiB (overrides the preset)")
      ->group("Card");
  app->add_option("--gpu-spec", o.gpu_spec_path,
                  "Any other card, from a JSON file: name, vram_gib (or memory_gb), "
                  "peak_bf16_tflops, hbm_gb_per_s [, peak_fp8_tflops, interconnect_gb_per_s, "
                  "interconnect_latency_us] (not with --gpu / --vram-gib)")
      ->group("Card");
  app->add_option("--gpu-memory-utilization", o.gpu_memory_utilization,
                  "Fraction of the card vLLM may use, in (0, 1]")
      ->group("Card")
      ->capture_default_str();
  app->add_option("--overhead-gib", o.overhead_gib,
                  "CUDA context + activations + framework overhead, GiB")
      ->group("Card")
      ->capture_default_str();
  app->add_option("--weights-gib", o.weights_gib, "Weight memory per GPU in GiB (overrides)")
      ->group("Card");
  app->add_option("--quantization", o.quantization,
                  "Weight quantization: auto|none|awq|gptq|fp8 (auto = the checkpoint's)")
      ->group("Card")
      ->capture_default_str();
  app->add_option("--kv-cache-dtype", o.kv_cache_dtype,
                  "auto|bfloat16|float16|fp8|fp8_e4m3|fp8_e5m2|float32|fp8_ds_mla (auto = model "
                  "dtype; fp8_ds_mla: MLA models)")
      ->check(kv_cache_dtype_validator())
      ->group("Card")
      ->capture_default_str();
  app->add_option("--tensor-parallel-size,--tp", o.tensor_parallel_size,
                  "Tensor-parallel GPUs; the plan is per GPU")
      ->group("Card")
      ->capture_default_str();
  app->add_option("--max-model-len", o.max_model_len,
                  "Tokens per request (default: the model's max_position_embeddings)")
      ->group("Pool");
  app->add_option("--block-size", o.block_size, "Tokens per KV block")
      ->group("Pool")
      ->capture_default_str();
  app->add_option("--num-gpu-blocks-override", o.num_gpu_blocks_override,
                  "Use this many blocks instead of the computed pool")
      ->group("Pool");
  app->add_option("--kv-cache-memory-bytes", o.kv_cache_memory_bytes,
                  "KV cache budget in bytes (vLLM's flag: replaces utilization x card - weights - "
                  "overhead)")
      ->group("Pool");
  app->add_flag_callback(
         "--disable-hybrid-kv-cache-manager", [&o] { o.disable_hybrid_kv_cache_manager = true; },
         "Size sliding-window and chunked layers as full attention (vLLM's flag; default: off "
         "for chunked local attention models only)")
      ->group("Pool");
  app->add_flag_callback(
         "--no-disable-hybrid-kv-cache-manager",
         [&o, app] {
           if (app->get_option("--disable-hybrid-kv-cache-manager")->count() > 0) {
             throw CLI::ValidationError("--no-disable-hybrid-kv-cache-manager",
                                        "conflicts with --disable-hybrid-kv-cache-manager");
           }
           o.disable_hybrid_kv_cache_manager = false;
         },
         "Keep the hybrid KV cache manager on (also for chunked local attention models)")
      ->group("Pool");
}

PlanInputs resolve_plan_inputs(const PlanOptions& o) {
  require_positive(o.max_model_len, "--max-model-len");
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
  require_positive(o.kv_cache_memory_bytes, "--kv-cache-memory-bytes");
  in.kv_cache_memory_bytes = o.kv_cache_memory_bytes;
  in.disable_hybrid_kv_cache_manager = o.disable_hybrid_kv_cache_manager;
  return in;
}

bool uses_default_gpu(const PlanOptions& o) {
  return o.gpu.empty() && !o.vram_gib && o.gpu_spec_path.empty();
}

}  // namespace kvsim::cli
