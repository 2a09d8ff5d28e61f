// Reads a Hugging Face config.json into a ModelSpec (the planner's model shape).
//
// Fields read (HF names): num_hidden_layers, num_attention_heads, num_key_value_heads (default
// num_attention_heads), head_dim (default hidden_size / num_attention_heads), hidden_size,
// intermediate_size, vocab_size, tie_word_embeddings, torch_dtype (or dtype),
// max_position_embeddings, sliding_window (+ use_sliding_window, layer_types,
// sliding_window_pattern), attention_chunk_size (+ no_rope_layers, no_rope_layer_interval) turned
// into per-layer KV spec kinds as vLLM's model code builds them (model_config.cpp), MLA fields
// (kv_lora_rank, qk_rope_head_dim, qk_nope_head_dim, v_head_dim, q_lora_rank), MoE fields
// (n_routed_experts | num_local_experts | num_experts, num_experts_per_tok,
// moe_intermediate_size, n_shared_experts, shared_expert_intermediate_size,
// first_k_dense_replace) and quantization_config.quant_method (fp8, awq, gptq, mxfp4). A
// multimodal config's text_config is used when the top level has no num_hidden_layers.
// The parameter count is estimated from the shapes (num_parameters_estimated = true).
// Errors throw std::runtime_error as one line naming the file, the line and the field.
#pragma once

#include <string>
#include <string_view>

#include "kvsim/core/model_presets.h"

namespace kvsim {

// `source` names the input in messages and becomes ModelSpec::name.
ModelSpec parse_hf_config(std::string_view json_text, const std::string& source);

// Reads and parses the file at `path`.
ModelSpec load_hf_config(const std::string& path);

}  // namespace kvsim
