#include "plan_flags.h"

#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "kvsim/core/model_presets.h"
#include "kvsim/core/vllm_version.h"

namespace kvsim::cli {

CLI::Validator kv_cache_dtype_validator() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        try {
          run::check_kv_cache_dtype("kv_cache_dtype", s);
        } catch (const std::invalid_argument& e) {
          // CLI11 prefixes the flag itself: keep what follows the parameter's name.
          const std::string what = e.what();
          return what.substr(what.find(": ") + 2);
        }
        return "";
      },
      "");
}

void add_model_card_options(CLI::App* app, run::PlanOptions& o) {
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
  app->add_option("--gpu", o.gpu, "GPU preset: " + gpus + " (default " + run::kDefaultGpu + ")")
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
  app->add_option("--vllm-version", o.vllm_version,
                  fmt::format("The vLLM release to clone: {} (default {}); its defaults, "
                              "scheduler and start-up report (docs/conformance.md)",
                              vllm_version_names(), to_string(kDefaultVllmVersion)))
      ->check(CLI::Validator(
          [](std::string& s) -> std::string {
            return parse_vllm_version(s) ? ""
                                         : fmt::format("unknown vLLM release '{}' (expected {})", s,
                                                       vllm_version_names());
          },
          "VERSION"))
      ->group("vLLM");
}

}  // namespace kvsim::cli
