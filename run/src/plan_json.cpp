// The plan as one JSON object (plan_job.h).
#include "kvsim/run/plan_job.h"

#include <string>
#include <vector>

namespace kvsim::run {

nlohmann::ordered_json plan_to_json(const Plan& p) {
  nlohmann::ordered_json j;
  j["vllm_version"] = std::string(to_string(p.vllm_version));
  j["model"] = p.model_name;
  j["gpu"] = p.gpu_name;
  j["vram_gib"] = p.vram_gib;
  j["gpu_memory_utilization"] = p.gpu_memory_utilization;
  j["overhead_gib"] = p.overhead_gib;
  j["tensor_parallel_size"] = p.tensor_parallel_size;
  j["num_layers"] = p.num_layers;
  j["num_kv_heads_per_rank"] = p.num_kv_heads_per_rank;
  j["head_dim"] = p.head_dim;
  j["kv_cache_dtype"] = p.kv_cache_dtype;
  j["quantization"] = p.quantization;
  j["weights_bytes"] = p.weights_bytes;
  j["weights_gib"] = p.weights_gib;
  j["usable_gib"] = p.usable_gib;
  j["kappa_bytes"] = p.kappa_bytes;
  j["kv_budget_bytes"] = p.kv_budget_bytes;
  j["kv_budget_gib"] = p.kv_budget_gib;
  j["max_model_len"] = p.max_model_len;
  j["kv_per_seq_bytes"] = p.kv_per_seq_bytes;
  j["max_concurrency"] = p.max_concurrency;
  if (p.concurrency) j["concurrency"] = *p.concurrency;
  if (p.max_context_tokens) j["max_context_tokens"] = *p.max_context_tokens;
  j["block_size"] = p.block_size;
  j["page_size_bytes"] = p.page_size_bytes;
  j["bytes_per_block"] = p.bytes_per_block;
  j["num_gpu_blocks"] = p.num_gpu_blocks;
  j["num_gpu_blocks_overridden"] = p.num_gpu_blocks_overridden;
  j["usable_blocks"] = p.usable_blocks;
  j["blocks_per_request"] = p.blocks_per_request;
  j["gpu_kv_cache_tokens"] = p.gpu_kv_cache_tokens;
  j["vllm_max_concurrency"] = p.vllm_max_concurrency;
  if (p.vllm_max_context_tokens) j["vllm_max_context_tokens"] = *p.vllm_max_context_tokens;
  j["full_length_request_unservable"] = p.full_length_request_unservable;
  // Scheduler knobs and the KV cache layout (hybrid models: several groups; docs/hybrid-kv.md).
  j["max_num_batched_tokens"] = p.max_num_batched_tokens;
  j["async_scheduling"] = p.async_scheduling;
  j["max_in_flight_tokens"] = p.max_in_flight_tokens;
  j["kv_cache_memory_from_flag"] = p.kv_cache_memory_from_flag;
  j["hybrid_model"] = p.hybrid_model;
  j["hybrid_kv_cache_manager"] = p.hybrid_kv_cache_manager;
  if (p.hybrid_model) j["hybrid_manager_reason"] = p.hybrid_manager_reason;
  j["kv_cache_group_size"] = p.kv_cache_group_size;
  nlohmann::ordered_json groups = nlohmann::ordered_json::array();
  for (size_t g = 0; g < p.kv_cache_groups.size(); ++g) {
    const PlanKVCacheGroup& k = p.kv_cache_groups[g];
    nlohmann::ordered_json o;
    o["kind"] = std::string(to_string(k.kind));
    o["window_tokens"] = k.window_tokens;
    o["layers"] = g < p.kv_cache_config.kv_cache_groups.size()
                      ? p.kv_cache_config.kv_cache_groups[g].layer_indices
                      : std::vector<int32_t>{};
    o["num_padding_layers"] = k.num_padding_layers;
    o["tokens_per_request"] = k.tokens_per_request;
    o["blocks_per_request"] = k.blocks_per_request;
    o["max_memory_usage_bytes"] = k.max_memory_usage_bytes;
    groups.push_back(std::move(o));
  }
  j["kv_cache_groups"] = std::move(groups);
  j["num_kv_cache_tensors"] = p.kv_cache_config.kv_cache_tensors.size();
  j["kappa_full_bytes"] = p.kappa_full_bytes;
  j["kappa_windowed_bytes"] = p.kappa_windowed_bytes;
  j["windowed_tokens_cap"] = p.windowed_tokens_cap;
  j["hybrid_kv_per_seq_bytes"] = p.hybrid_kv_per_seq_bytes;
  j["hybrid_max_concurrency"] = p.hybrid_max_concurrency;
  if (p.hybrid_max_context_tokens) j["hybrid_max_context_tokens"] = *p.hybrid_max_context_tokens;
  j["vllm_log_lines"] = vllm_kv_cache_report_lines(p);
  j["notes"] = p.notes;
  j["warnings"] = p.warnings;
  return j;
}

}  // namespace kvsim::run
