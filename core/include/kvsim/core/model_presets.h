// Model shapes and GPU cards: the plain data the capacity planner and the step-time model read.
//
// ModelSpec holds what a Hugging Face config.json says about one checkpoint (field names follow
// HF where they exist). GpuSpec holds the numbers of a card the planner and the step-time
// models read (memory, peak FLOP/s, memory and interconnect bandwidth). Presets are compiled-in
// tables of real published values; their sources are listed in docs/planner.md.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvsim/core/kv_cache_spec.h"

namespace kvsim {

// One decoder-only transformer checkpoint.
// Invariants of a usable spec (validate_model_spec checks them): num_layers, num_kv_heads,
// head_dim > 0; num_attention_heads >= num_kv_heads when known; for MLA (use_mla) kv_lora_rank +
// qk_rope_head_dim > 0. Fields that are unknown are 0 (sizes) or empty (strings).
struct ModelSpec {
  std::string name;                 // preset name, or the config path it was read from
  int64_t num_layers = 0;           // num_hidden_layers (attention layers holding KV)
  int64_t num_attention_heads = 0;  // query heads
  int64_t num_kv_heads = 0;         // num_key_value_heads (total, before tensor parallelism)
  int64_t head_dim = 0;             // per-head K/V width
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;  // dense MLP width (MoE: the dense layers' width)
  int64_t vocab_size = 0;
  bool tie_word_embeddings = false;       // lm_head shares the embedding matrix
  double num_parameters = 0;              // total parameters (all experts for MoE); 0 = unknown
  bool num_parameters_estimated = false;  // true when derived from shapes, not published
  double num_active_parameters = 0;  // parameters touched per token (== total for dense models)
  std::string dtype = "bfloat16";    // torch_dtype: bfloat16 | float16 | float32
  // Weight quantization of the checkpoint itself ("none", "fp8", "awq", "gptq"); the planner
  // uses it when --quantization is not given.
  std::string checkpoint_quantization = "none";
  int64_t max_position_embeddings = 0;  // default max_model_len

  // Multi-head latent attention (DeepSeek V2/V3): the cache holds one latent vector of
  // kv_lora_rank + qk_rope_head_dim per token and layer, no separate K and V.
  bool use_mla = false;
  int64_t kv_lora_rank = 0;
  int64_t qk_rope_head_dim = 0;

  // Sliding-window attention width in tokens (0 = none); sliding_window_note explains the pattern
  // (e.g. alternate layers).
  int64_t sliding_window = 0;
  std::string sliding_window_note;
  // Llama 4's chunked local attention: tokens per chunk (0 = none).
  int64_t attention_chunk_size = 0;
  // The KV cache spec kind of each layer, as vLLM's model code builds it (gpt-oss: even layers
  // sliding; Gemma 2/3: transformers' layer_types; Llama 4: RoPE layers chunked, NoPE layers
  // full). Empty: every layer is full attention. When set it has num_layers entries; a
  // kSlidingWindow entry needs sliding_window > 0 and a kChunkedLocalAttention entry
  // attention_chunk_size > 0 (validate_model_spec checks both).
  std::vector<KVCacheSpecKind> layer_types;

  // Mixture of experts (0 = dense). Used by the step-time model for active weight reads.
  int64_t num_experts = 0;
  int64_t num_experts_per_tok = 0;
};

// One GPU card (a single device; the plan is per GPU).
// Invariants (validate_gpu_spec checks them): name is not empty; every number is finite;
// vram_gib > 0; the others are >= 0, where 0 means "not known" (or, for peak_fp8_tflops, "no
// FP8 tensor cores"). A preset's figures are the vendor's (docs/planner.md lists the sources);
// a card from --gpu-spec FILE must give vram_gib, peak_bf16_tflops and hbm_gb_per_s > 0.
struct GpuSpec {
  std::string name;
  double vram_gib = 0;          // memory capacity in GiB (2^30 bytes): the vendor's nominal figure
  double peak_bf16_tflops = 0;  // dense BF16 tensor-core peak, TFLOP/s (no sparsity)
  double hbm_gb_per_s = 0;      // memory bandwidth, GB/s (10^9 bytes per second)
  double peak_fp8_tflops = 0;   // dense FP8 tensor-core peak, TFLOP/s (no sparsity)
  // GPU-to-GPU bandwidth of one GPU, GB/s, as the vendor quotes it (both directions together):
  // NVLink or Infinity Fabric (xGMI) where the card has it, else its PCIe slot.
  double interconnect_gb_per_s = 0;
  // A small-message all-reduce across the card's usual tensor-parallel group, microseconds
  // (measured; docs/planner.md names the measurement).
  double interconnect_latency_us = 0;
};

// Compiled-in presets, in a fixed order (as listed by --help and error messages).
std::span<const ModelSpec> model_presets();
std::span<const GpuSpec> gpu_presets();

// Case-insensitive lookup. Throws std::invalid_argument listing the known names when absent.
const ModelSpec& find_model_preset(std::string_view name);
const GpuSpec& find_gpu_preset(std::string_view name);

// "a, b, c": the preset names, for messages.
std::string model_preset_names();
std::string gpu_preset_names();

// Throws std::invalid_argument naming the first field that breaks ModelSpec's invariants.
void validate_model_spec(const ModelSpec& m);
// Throws std::invalid_argument naming the first field that breaks GpuSpec's invariants.
void validate_gpu_spec(const GpuSpec& g);

// The spec kind of layer `layer` (kFullAttention when layer_types is empty).
KVCacheSpecKind layer_type(const ModelSpec& m, int64_t layer);
// Number of layers of kind `kind`.
int64_t count_layers(const ModelSpec& m, KVCacheSpecKind kind);

// Layer patterns of the hybrid families (what transformers' configs and vLLM's model code
// derive when config.json lists no layer_types).
//   every_nth_full(n, k): layers i with (i + 1) % k == 0 are full, the others `other`
//     (Gemma 3: k = sliding_window_pattern = 6; Gemma 2: k = 2; Llama 4: k =
//     no_rope_layer_interval = 4 with `other` = chunked).
//   alternating_sliding(n): even layers sliding, odd full (gpt-oss's layer_idx % 2 == 0).
std::vector<KVCacheSpecKind> every_nth_full(int64_t n, int64_t k, KVCacheSpecKind other);
std::vector<KVCacheSpecKind> alternating_sliding(int64_t n);

// Parameters estimated from the shapes (embeddings, attention or MLA projections, gated MLP or
// experts, norms). Used when a config.json does not state a parameter count. Returns 0 when the
// shapes needed (hidden_size, vocab_size, intermediate_size) are missing.
struct ParameterShapes {
  int64_t moe_intermediate_size = 0;       // expert MLP width (0 = dense)
  int64_t num_shared_experts = 0;          // DeepSeek shared experts
  int64_t shared_expert_intermediate = 0;  // Qwen-MoE style shared expert width (0 = none)
  int64_t first_k_dense_replace = 0;       // leading dense layers in a MoE model
  int64_t q_lora_rank = 0;                 // MLA query compression (0 = direct projection)
  int64_t qk_nope_head_dim = 0;            // MLA
  int64_t v_head_dim = 0;                  // MLA
  bool attention_bias = false;             // q/k/v biases (Qwen2)
};
struct ParameterEstimate {
  double total = 0;
  double active = 0;
};
ParameterEstimate estimate_parameters(const ModelSpec& m, const ParameterShapes& extra);

}  // namespace kvsim
