// The JSON summary and the human report of one replay.
#include "kvsim/sim/report/report.h"

#include <algorithm>

#include <fmt/format.h>

namespace kvsim {
namespace {

nlohmann::ordered_json latency_json(const LatencySummary& l) {
  nlohmann::ordered_json j;
  j["count"] = l.count;
  j["mean_s"] = l.mean;
  j["p50_s"] = l.p50;
  j["p90_s"] = l.p90;
  j["p99_s"] = l.p99;
  j["max_s"] = l.max;
  return j;
}

double pct(double num, double den) {
  return den > 0 ? 100.0 * num / den : 0.0;
}

const char* on_off(bool b) {
  return b ? "on" : "off";
}

// Seconds from the integer-nanosecond clock: one correctly rounded division, so a clock of
// 3505402975000 ns prints as 3505.402975 (a multiplication by 1e-9 would give
// 3505.4029750000004).
double ns_to_seconds(int64_t ns) {
  return static_cast<double>(ns) / 1e9;
}

}  // namespace

std::string format_bad_rows(const Trace& trace, std::string_view prefix) {
  if (trace.bad_row_examples.empty()) return {};
  std::string out = fmt::format("{}: {}; first bad rows:\n", prefix, describe_dropped(trace));
  for (const std::string& e : trace.bad_row_examples) out += fmt::format("  {}\n", e);
  return out;
}

nlohmann::ordered_json replay_summary_json(const ReplaySummary& s, const ReportContext& ctx) {
  nlohmann::ordered_json j;
  j["trace"] = ctx.trace_path;
  j["format"] = ctx.trace_format;
  // With --json - the dropped-rows line on stderr may be lost: the counts are here too.
  j["rows_read"] = ctx.trace_rows;
  nlohmann::ordered_json dropped = nlohmann::ordered_json::object();
  int64_t dropped_total = 0;
  for (const auto& [reason, count] : ctx.dropped_by_reason) {
    dropped[reason] = count;
    dropped_total += count;
  }
  j["rows_dropped"] = dropped_total;
  j["rows_dropped_by_reason"] = dropped;
  j["model"] = ctx.model;
  j["gpu"] = ctx.gpu;
  j["vllm_version"] = to_string(ctx.scheduler.behavior.version);
  j["requests"] = s.requests;
  j["finished"] = s.finished;
  j["finished_at_max_model_len"] = s.finished_at_max_model_len;
  j["rejected"] = s.rejected;
  nlohmann::ordered_json by_reason = nlohmann::ordered_json::object();
  for (int i = 0; i < kNumRejectReasons; ++i) {
    by_reason[std::string(to_string(static_cast<RejectReason>(i)))] =
        s.rejected_by_reason[static_cast<size_t>(i)];
  }
  j["rejected_by_reason"] = by_reason;
  j["steps"] = s.steps;
  j["sim_seconds"] = ns_to_seconds(s.sim_ns);
  j["busy_seconds"] = ns_to_seconds(s.busy_ns);
  j["num_gpu_blocks"] = s.num_gpu_blocks;
  j["block_size"] = s.block_size;
  j["max_model_len"] = s.max_model_len;
  j["max_num_batched_tokens"] = ctx.scheduler.max_num_batched_tokens;
  j["max_num_seqs"] = ctx.scheduler.max_num_seqs;
  j["scheduling_policy"] = ctx.scheduler.policy == SchedulingPolicy::FCFS ? "fcfs" : "priority";
  j["enable_prefix_caching"] = ctx.scheduler.enable_prefix_caching;
  j["enable_chunked_prefill"] = ctx.scheduler.enable_chunked_prefill;
  j["async_scheduling"] = s.async_scheduling;
  j["pool_overridden"] = ctx.pool_overridden;
  j["peak_running"] = s.peak_running;
  j["mean_running"] = s.mean_running;
  j["p50_running"] = s.p50_running;
  j["p99_running"] = s.p99_running;
  j["formula_max_concurrency"] = ctx.formula_max_concurrency;
  j["vllm_max_concurrency"] = ctx.vllm_max_concurrency;
  j["preemptions"] = s.preemptions;
  j["preempted_requests"] = s.preempted_requests;
  j["recomputed_tokens"] = s.recomputed_tokens;
  j["host_swap_slots"] = s.host_swap_slots;
  j["swap_bytes_per_block"] = s.swap_bytes_per_block;
  j["swap_bandwidth_gbps"] = s.swap_bandwidth_bytes_per_s * 1e-9;
  j["swap_outs"] = s.swap_outs;
  j["swap_ins"] = s.swap_ins;
  j["swap_fallbacks"] = s.swap_fallbacks;
  j["swap_out_blocks"] = s.swap_out_blocks;
  j["swap_in_blocks"] = s.swap_in_blocks;
  j["swap_out_bytes"] = s.swap_out_bytes;
  j["swap_in_bytes"] = s.swap_in_bytes;
  j["swap_seconds"] = ns_to_seconds(s.swap_ns);
  j["peak_host_swap_slots_used"] = s.peak_host_slots_used;
  j["async_ahead_tokens"] = s.async_ahead_tokens;
  j["async_ahead_blocks"] = s.async_ahead_blocks;
  j["async_late_free_blocks"] = s.async_late_free_blocks;
  j["async_late_free_requests"] = s.async_late_free_requests;
  j["scheduled_tokens"] = s.scheduled_tokens;
  j["prefill_tokens"] = s.prefill_tokens;
  j["decode_tokens"] = s.decode_tokens;
  j["generated_tokens"] = s.generated_tokens;
  j["mean_finished_length"] = s.mean_finished_length;
  j["padding_tokens_mean"] = s.padding_tokens_mean;
  j["padding_tokens_peak"] = s.padding_tokens_peak;
  j["padding_fraction_mean"] = s.padding_fraction_mean;
  j["peak_kv_usage"] = s.peak_kv_usage;
  j["mean_kv_usage"] = s.mean_kv_usage;
  if (!s.kv_cache_groups.empty()) {  // hybrid layouts only: full-attention summaries unchanged
    nlohmann::ordered_json groups = nlohmann::ordered_json::array();
    for (const KVCacheGroupSummary& g : s.kv_cache_groups) {
      nlohmann::ordered_json o;
      o["kind"] = g.kind;
      o["window"] = g.window;
      o["num_layers"] = g.num_layers;
      o["mean_kv_usage"] = g.mean_kv_usage;
      o["peak_kv_usage"] = g.peak_kv_usage;
      o["padding_tokens_mean"] = g.padding_tokens_mean;
      o["blocks_freed_out_of_window"] = g.blocks_freed_out_of_window;
      groups.push_back(std::move(o));
    }
    j["kv_cache_groups"] = std::move(groups);
    j["window_blocks_freed"] = s.window_blocks_freed;
  }
  // vLLM's counters (vllm:prefix_cache_queries / _hits), then the admission share.
  j["prefix_cache_hit_rate"] = s.prefix_cache_hit_rate;
  j["prefix_cache_queries"] = s.prefix_cache.queries;
  j["prefix_cache_hits"] = s.prefix_cache.hits;
  j["prefix_cache_requests"] = s.prefix_cache.requests;
  j["preempted_prefix_cache_queries"] = s.prefix_cache.preempted_queries;
  j["preempted_prefix_cache_hits"] = s.prefix_cache.preempted_hits;
  j["preempted_prefix_cache_requests"] = s.prefix_cache.preempted_requests;
  j["admission_prefix_hit_rate"] = s.admission_prefix_hit_rate;
  j["admission_prefix_hit_tokens"] = s.prefix_hit_tokens;
  j["admission_prefix_query_tokens"] = s.admission_prefix_query_tokens;
  j["prefix_blocks_saved"] = s.prefix_blocks_saved;
  j["evictions"] = s.evictions;
  j["steps_with_waiting"] = s.steps_with_waiting;
  j["steps_token_budget_bound"] = s.steps_token_budget_bound;
  j["steps_max_num_seqs_bound"] = s.steps_max_num_seqs_bound;
  j["steps_kv_bound"] = s.steps_kv_bound;
  j["ttft_p50_s"] = s.latency.ttft.p50;
  j["ttft_p99_s"] = s.latency.ttft.p99;
  j["tpot_p50_s"] = s.latency.tpot.p50;
  j["tpot_p99_s"] = s.latency.tpot.p99;
  j["ttft"] = latency_json(s.latency.ttft);
  j["tpot"] = latency_json(s.latency.tpot);
  j["itl"] = latency_json(s.latency.tpot);  // per-request mean ITL == TPOT (no per-token times)
  j["e2e"] = latency_json(s.latency.e2e);
  j["queueing"] = latency_json(s.latency.queueing);
  // Exact nearest-rank percentiles up to kExactLatencySamples finished requests; beyond, from
  // mergeable sketches within the stated relative error (docs/metrics-sketch.md).
  j["latency_percentiles"] = s.latency.percentiles_exact ? "exact" : "sketch";
  j["latency_percentile_relative_error"] = s.latency.percentile_relative_error;
  j["step_time_model"] = s.step_time_model;
  j["step_time_calibration"] = s.step_time_calibration;
  j["backend"] = s.backend;
  j["preemption_mode"] = ctx.preemption_mode;
  if (s.backend_verified) {
    j["num_layers"] = ctx.num_layers;
    j["backend_layers"] = ctx.backend_layers;  // the backend numbers below cover these only
    j["backend_device_seconds"] = s.backend_device_seconds;
    j["backend_bytes_read"] = s.backend_bytes_read;
    j["backend_bytes_written"] = s.backend_bytes_written;
    j["backend_verification_ok"] = s.verification.ok;
    j["backend_slots_checked"] = s.verification.slots_checked;
    j["backend_verification"] = s.verification.detail;
  }
  j["wall_seconds"] = s.wall_seconds;  // last: the only field that varies between runs
  return j;
}

std::string format_replay_report(const ReplaySummary& s, const ReportContext& ctx) {
  std::string o;
  auto out = std::back_inserter(o);
  const SchedulerConfig& sc = ctx.scheduler;
  fmt::format_to(out, "kvsim replay: {} ({}, {} requests)\n", ctx.trace_path, ctx.trace_format,
                 s.requests);
  if (!ctx.dropped_rows.empty()) fmt::format_to(out, "  {}\n", ctx.dropped_rows);
  fmt::format_to(out, "model {} on {}, KV dtype {}; step time: {}; backend: {}\n", ctx.model,
                 ctx.gpu, ctx.kv_cache_dtype, s.step_time_model, s.backend);
  if (!s.step_time_calibration.empty()) {
    fmt::format_to(out, "clock: {}\n", s.step_time_calibration);
  }
  fmt::format_to(out,
                 "pool: {} blocks x {} tokens{} = {} token slots ({} usable blocks), "
                 "max_model_len {}\n",
                 s.num_gpu_blocks, s.block_size, ctx.pool_overridden ? " (overridden)" : "",
                 static_cast<int64_t>(s.num_gpu_blocks) * s.block_size, s.num_gpu_blocks - 1,
                 s.max_model_len);
  fmt::format_to(out,
                 "scheduler (vLLM {}): {}, max_num_batched_tokens {}, max_num_seqs {}, chunked "
                 "prefill {}, prefix caching {}, watermark {}, full-ISL gate {}, preemption {}, {} "
                 "scheduling\n\n",
                 to_string(sc.behavior.version), sc.policy == SchedulingPolicy::FCFS ? "fcfs" : "priority",
                 sc.max_num_batched_tokens, sc.max_num_seqs, on_off(sc.enable_chunked_prefill),
                 on_off(sc.enable_prefix_caching), sc.watermark,
                 on_off(sc.scheduler_reserve_full_isl), ctx.preemption_mode,
                 s.async_scheduling ? "async (vLLM's default)" : "sync");

  fmt::format_to(out, "Concurrency: formula vs observed\n");
  fmt::format_to(out, "  lesson N_seq = floor(KV budget / (kappa * {})) {:>12}\n", s.max_model_len,
                 ctx.formula_max_concurrency);
  fmt::format_to(out, "  vLLM \"Maximum concurrency\"                  {:>12.2f}x\n",
                 ctx.vllm_max_concurrency);
  for (const std::string& line : ctx.vllm_log_lines) fmt::format_to(out, "    ({})\n", line);
  fmt::format_to(out,
                 "  observed running requests (over {} steps): mean {:.2f}, p50 {}, p99 {}, "
                 "peak {}\n\n",
                 s.steps, s.mean_running, s.p50_running, s.p99_running, s.peak_running);

  fmt::format_to(out, "Requests: {} finished", s.finished);
  if (s.finished_at_max_model_len > 0) {
    fmt::format_to(out, " ({} cut short at max_model_len {})", s.finished_at_max_model_len,
                   s.max_model_len);
  }
  fmt::format_to(out, ", {} rejected", s.rejected);
  bool first = true;
  for (int i = 0; i < kNumRejectReasons; ++i) {
    const int64_t n = s.rejected_by_reason[static_cast<size_t>(i)];
    if (n == 0) continue;
    fmt::format_to(out, "{}{} {}", first ? " (" : ", ", n, to_string(static_cast<RejectReason>(i)));
    first = false;
  }
  fmt::format_to(out, "{}\n\n", first ? "" : ")");

  fmt::format_to(out, "Why observed differs from the formula\n");
  fmt::format_to(out,
                 "  length: the formula reserves max_model_len = {} tokens per request; vLLM "
                 "allocates blocks as tokens arrive (finished requests hold {:.0f} tokens on "
                 "average at the end "
                 "here)\n",
                 s.max_model_len, s.mean_finished_length);
  fmt::format_to(out, "  KV usage: peak {:.1f}%, mean {:.1f}% of the {} usable blocks\n",
                 100.0 * s.peak_kv_usage, 100.0 * s.mean_kv_usage, s.num_gpu_blocks - 1);
  fmt::format_to(out,
                 "  padding (last-block waste): mean {:.1f} tokens, peak {}, {:.2f}% of used KV "
                 "on average\n",
                 s.padding_tokens_mean, s.padding_tokens_peak, 100.0 * s.padding_fraction_mean);
  if (!s.kv_cache_groups.empty()) {
    fmt::format_to(out,
                   "  hybrid KV cache: {} groups share the pool; a block holds one group's page "
                   "of each of its layers\n",
                   s.kv_cache_groups.size());
    for (size_t g = 0; g < s.kv_cache_groups.size(); ++g) {
      const KVCacheGroupSummary& k = s.kv_cache_groups[g];
      fmt::format_to(out,
                     "    group {} ({}{}, {} layers): KV usage mean {:.1f}%, peak {:.1f}%; "
                     "padding mean {:.1f} tokens; {} blocks freed out of the window\n",
                     g, k.kind, k.window > 0 ? fmt::format(" {}", k.window) : std::string(),
                     k.num_layers, 100.0 * k.mean_kv_usage, 100.0 * k.peak_kv_usage,
                     k.padding_tokens_mean, k.blocks_freed_out_of_window);
    }
    fmt::format_to(out,
                   "  sliding-window saving: {} blocks fell out of a window or chunk and were "
                   "freed while their requests ran (vLLM replaces them by the null block); the "
                   "formula's kappa counts every layer as full attention for all max_model_len "
                   "tokens\n",
                   s.window_blocks_freed);
  }
  fmt::format_to(out, "  preemption: {} preemptions of {} requests, {} tokens recomputed",
                 s.preemptions, s.preempted_requests, s.recomputed_tokens);
  if (ctx.scheduler.preemption_mode == PreemptionMode::SWAP) {
    fmt::format_to(out,
                   "; swap: {} swapped out ({} blocks, {:.3f} GiB), {} swapped in ({} blocks), "
                   "{} fell back to recompute (host slots full, peak {} of {} used), {:.3f} s "
                   "of transfers at {:.1f} GB/s",
                   s.swap_outs, s.swap_out_blocks, static_cast<double>(s.swap_out_bytes) / kGiB,
                   s.swap_ins, s.swap_in_blocks, s.swap_fallbacks, s.peak_host_slots_used,
                   s.host_swap_slots, ns_to_seconds(s.swap_ns),
                   s.swap_bandwidth_bytes_per_s * 1e-9);
  }
  fmt::format_to(out, "\n");
  if (s.async_scheduling) {
    fmt::format_to(out,
                   "  async scheduling: {} tokens scheduled one step ahead (at the position of a "
                   "token still in flight), {} blocks allocated a step early for them; {} blocks "
                   "of {} finished requests freed a step late (after the next schedule)\n",
                   s.async_ahead_tokens, s.async_ahead_blocks, s.async_late_free_blocks,
                   s.async_late_free_requests);
  }
  fmt::format_to(out,
                 "  prefix sharing: {:.2f}% of admitted tokens served from the cache ({} of {}), "
                 "{} blocks saved, {} evictions\n",
                 100.0 * s.admission_prefix_hit_rate, s.prefix_hit_tokens,
                 s.admission_prefix_query_tokens, s.prefix_blocks_saved, s.evictions);
  fmt::format_to(out,
                 "    vLLM's prefix-cache counters: hit rate {:.2f}% ({} of {} queried tokens; "
                 "preempted requests apart: {} of {})\n",
                 100.0 * s.prefix_cache_hit_rate, s.prefix_cache.hits, s.prefix_cache.queries,
                 s.prefix_cache.preempted_hits, s.prefix_cache.preempted_queries);
  if (ctx.scheduler.behavior.prefix_cache_stats_at_admission) {
    fmt::format_to(out,
                   "    (vLLM {} counts each admission once, as the share does, but keeps "
                   "preempted requests apart)\n",
                   to_string(ctx.scheduler.behavior.version));
  } else {
    fmt::format_to(out,
                   "    (they differ: vLLM {} counts every lookup, again on each step a request "
                   "waits for KV, and keeps preempted requests apart; the share counts each "
                   "admission once)\n",
                   to_string(ctx.scheduler.behavior.version));
  }
  fmt::format_to(out, "  queueing: mean {:.3f} s, p50 {:.3f} s, p99 {:.3f} s\n",
                 s.latency.queueing.mean, s.latency.queueing.p50, s.latency.queueing.p99);
  const auto w = static_cast<double>(s.steps_with_waiting);
  fmt::format_to(out,
                 "  binding limit, over {} steps that left requests waiting: token budget {} "
                 "({:.1f}%), max_num_seqs {} ({:.1f}%), KV cache {} ({:.1f}%)\n",
                 s.steps_with_waiting, s.steps_token_budget_bound,
                 pct(static_cast<double>(s.steps_token_budget_bound), w),
                 s.steps_max_num_seqs_bound,
                 pct(static_cast<double>(s.steps_max_num_seqs_bound), w), s.steps_kv_bound,
                 pct(static_cast<double>(s.steps_kv_bound), w));
  const int64_t most =
      std::max({s.steps_token_budget_bound, s.steps_max_num_seqs_bound, s.steps_kv_bound});
  const char* verdict = most == 0                            ? "none (the queue never backed up)"
                        : most == s.steps_kv_bound           ? "the KV cache"
                        : most == s.steps_token_budget_bound ? "the token budget, not KV"
                                                             : "max_num_seqs, not KV";
  fmt::format_to(out, "  => the binding limit was {}\n\n", verdict);

  fmt::format_to(out, "Latency (s)      {:>10} {:>10} {:>10} {:>10} {:>10}\n", "mean", "p50", "p90",
                 "p99", "max");
  auto row = [&](const char* name, const LatencySummary& l) {
    fmt::format_to(out, "  {:<14} {:>10.4f} {:>10.4f} {:>10.4f} {:>10.4f} {:>10.4f}\n", name,
                   l.mean, l.p50, l.p90, l.p99, l.max);
  };
  row("TTFT", s.latency.ttft);
  row("TPOT", s.latency.tpot);
  row("end-to-end", s.latency.e2e);
  row("queueing", s.latency.queueing);
  if (!s.latency.percentiles_exact) {
    fmt::format_to(out,
                   "  (percentiles from mergeable sketches, within {:.2g}% of the exact values: "
                   "more than {} finished requests; means and max are exact)\n",
                   100 * s.latency.percentile_relative_error, kExactLatencySamples);
  }
  fmt::format_to(out,
                 "\nsimulated {:.3f} s ({:.3f} s busy) in {} steps; {} tokens scheduled ({} "
                 "prefill, {} decode)\n",
                 ns_to_seconds(s.sim_ns), ns_to_seconds(s.busy_ns), s.steps, s.scheduled_tokens,
                 s.prefill_tokens, s.decode_tokens);
  if (s.backend_verified) {
    const double gbps = s.backend_device_seconds > 0
                            ? static_cast<double>(s.backend_bytes_read + s.backend_bytes_written) /
                                  s.backend_device_seconds * 1e-9
                            : 0.0;
    fmt::format_to(out,
                   "backend {}{}: {:.3f} s device time, {} B read, {} B written ({:.1f} GB/s); "
                   "verification {} ({} slots): {}\n",
                   s.backend,
                   ctx.backend_layers > 0 && ctx.backend_layers < ctx.num_layers
                       ? fmt::format(" ({} of {} layers; bytes and time cover those only)",
                                     ctx.backend_layers, ctx.num_layers)
                       : "",
                   s.backend_device_seconds, s.backend_bytes_read, s.backend_bytes_written, gbps,
                   s.verification.ok ? "OK" : "FAILED", s.verification.slots_checked,
                   s.verification.detail);
  }
  return o;
}

}  // namespace kvsim
