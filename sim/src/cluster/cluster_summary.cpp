#include "kvsim/sim/cluster/cluster_summary.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace kvsim {
namespace {

void add_into(std::vector<double>& into, const std::vector<double>& from) {
  if (into.size() < from.size()) into.resize(from.size(), 0.0);
  for (size_t i = 0; i < from.size(); ++i) into[i] += from[i];
}

void max_into(std::vector<double>& into, const std::vector<double>& from) {
  if (into.size() < from.size()) into.resize(from.size(), 0.0);
  for (size_t i = 0; i < from.size(); ++i) into[i] = std::max(into[i], from[i]);
}

}  // namespace

ReplaySummary merge_replica_summaries(std::span<const ReplaySummary> summaries,
                                      std::span<const ReplayStepSums> sums) {
  if (summaries.empty() || summaries.size() != sums.size()) {
    throw std::invalid_argument("merge_replica_summaries: one summary and one sums per replica");
  }
  const ReplaySummary& first = summaries.front();
  ReplaySummary c;
  // One replica's shape and names.
  c.num_gpu_blocks = first.num_gpu_blocks;
  c.block_size = first.block_size;
  c.max_model_len = first.max_model_len;
  c.host_swap_slots = first.host_swap_slots;
  c.swap_bytes_per_block = first.swap_bytes_per_block;
  c.swap_bandwidth_bytes_per_s = first.swap_bandwidth_bytes_per_s;
  c.async_scheduling = first.async_scheduling;
  c.backend = first.backend;
  c.step_time_model = first.step_time_model;
  c.step_time_calibration = first.step_time_calibration;
  c.kv_cache_groups = first.kv_cache_groups;
  for (KVCacheGroupSummary& g : c.kv_cache_groups) g.blocks_freed_out_of_window = 0;
  ReplayStepSums pooled;
  bool all_verified = true;
  for (size_t r = 0; r < summaries.size(); ++r) {
    const ReplaySummary& s = summaries[r];
    c.requests += s.requests;
    c.finished += s.finished;
    c.finished_at_max_model_len += s.finished_at_max_model_len;
    c.rejected += s.rejected;
    for (size_t i = 0; i < c.rejected_by_reason.size(); ++i) {
      c.rejected_by_reason[i] += s.rejected_by_reason[i];
    }
    c.steps += s.steps;
    c.sim_ns = std::max(c.sim_ns, s.sim_ns);
    c.busy_ns += s.busy_ns;
    c.peak_running = std::max(c.peak_running, s.peak_running);
    if (c.running_histogram.size() < s.running_histogram.size()) {
      c.running_histogram.resize(s.running_histogram.size(), 0);
    }
    for (size_t k = 0; k < s.running_histogram.size(); ++k) {
      c.running_histogram[k] += s.running_histogram[k];
    }
    c.preemptions += s.preemptions;
    c.preempted_requests += s.preempted_requests;
    c.recomputed_tokens += s.recomputed_tokens;
    c.swap_outs += s.swap_outs;
    c.swap_ins += s.swap_ins;
    c.swap_fallbacks += s.swap_fallbacks;
    c.swap_out_blocks += s.swap_out_blocks;
    c.swap_in_blocks += s.swap_in_blocks;
    c.swap_out_bytes += s.swap_out_bytes;
    c.swap_in_bytes += s.swap_in_bytes;
    c.swap_ns += s.swap_ns;
    c.peak_host_slots_used = std::max(c.peak_host_slots_used, s.peak_host_slots_used);
    c.scheduled_tokens += s.scheduled_tokens;
    c.prefill_tokens += s.prefill_tokens;
    c.decode_tokens += s.decode_tokens;
    c.generated_tokens += s.generated_tokens;
    c.padding_tokens_peak = std::max(c.padding_tokens_peak, s.padding_tokens_peak);
    c.peak_kv_usage = std::max(c.peak_kv_usage, s.peak_kv_usage);
    for (size_t g = 0; g < c.kv_cache_groups.size() && g < s.kv_cache_groups.size(); ++g) {
      c.kv_cache_groups[g].blocks_freed_out_of_window +=
          s.kv_cache_groups[g].blocks_freed_out_of_window;
    }
    c.window_blocks_freed += s.window_blocks_freed;
    c.async_ahead_tokens += s.async_ahead_tokens;
    c.async_ahead_blocks += s.async_ahead_blocks;
    c.async_late_free_blocks += s.async_late_free_blocks;
    c.async_late_free_requests += s.async_late_free_requests;
    c.prefix_cache.requests += s.prefix_cache.requests;
    c.prefix_cache.queries += s.prefix_cache.queries;
    c.prefix_cache.hits += s.prefix_cache.hits;
    c.prefix_cache.preempted_requests += s.prefix_cache.preempted_requests;
    c.prefix_cache.preempted_queries += s.prefix_cache.preempted_queries;
    c.prefix_cache.preempted_hits += s.prefix_cache.preempted_hits;
    c.prefix_hit_tokens += s.prefix_hit_tokens;
    c.admission_prefix_query_tokens += s.admission_prefix_query_tokens;
    c.evictions += s.evictions;
    c.steps_token_budget_bound += s.steps_token_budget_bound;
    c.steps_max_num_seqs_bound += s.steps_max_num_seqs_bound;
    c.steps_kv_bound += s.steps_kv_bound;
    c.steps_with_waiting += s.steps_with_waiting;
    c.backend_device_seconds += s.backend_device_seconds;
    c.backend_bytes_read += s.backend_bytes_read;
    c.backend_bytes_written += s.backend_bytes_written;
    all_verified = all_verified && s.backend_verified;
    if (s.backend_verified) {
      c.verification.slots_checked += s.verification.slots_checked;
      // The first failing replica's detail; else the first replica's summary line.
      if (!s.verification.ok && c.verification.ok) {
        c.verification.ok = false;
        c.verification.detail = summaries.size() > 1
                                    ? "replica " + std::to_string(r) + ": " + s.verification.detail
                                    : s.verification.detail;
      } else if (c.verification.ok && c.verification.detail.empty()) {
        c.verification.detail = s.verification.detail;
      }
    }
    const ReplayStepSums& p = sums[r];
    pooled.sum_running += p.sum_running;
    pooled.sum_padding += p.sum_padding;
    pooled.sum_padding_fraction += p.sum_padding_fraction;
    pooled.padding_fraction_steps += p.padding_fraction_steps;
    pooled.sum_usage += p.sum_usage;
    pooled.usage_steps += p.usage_steps;
    pooled.finished_length += p.finished_length;
    add_into(pooled.group_usage_sum, p.group_usage_sum);
    max_into(pooled.group_usage_peak, p.group_usage_peak);
    add_into(pooled.group_padding_sum, p.group_padding_sum);
  }
  c.backend_verified = all_verified;
  derive_replay_summary(pooled, c);
  return c;
}

}  // namespace kvsim
