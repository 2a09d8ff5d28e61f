#include "kvsim/run/size_job.h"

#include <chrono>
#include <cmath>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>

#include <fmt/core.h>

#include "kvsim/core/param.h"
#include "kvsim/run/trace_input.h"
#include "kvsim/sim/engine/replay_setup.h"
#include "kvsim/sim/sweep/size_replay.h"

namespace kvsim::run {
namespace {

// A setting's value for a replay command: text, or on/off.
using Value = std::variant<std::string, bool>;

std::string text(double v) {
  // Integral values as integers (2.0 -> "2"), others shortest round-trip ("0.05").
  if (std::isfinite(v) && v == std::trunc(v) && std::fabs(v) < 9007199254740992.0) {
    return fmt::format("{}", static_cast<int64_t>(v));
  }
  return fmt::format("{}", v);
}
template <typename T>
requires std::is_integral_v<T> std::string text(T v) {
  return fmt::format("{}", v);
}
template <typename T>
std::string text(const std::optional<T>& v) {
  return v ? text(*v) : std::string();
}

// A setting `kvsim replay` takes and size passes on to every candidate's replay command. `on`
// / `off`: whether the flag --ID / --no-ID exists (on/off settings only).
struct ReplaySetting {
  std::string_view id;
  Value (*value)(const SizeJobOptions&);
  bool on = true;
  bool off = true;
};

// In the CLI's order (the flags of `kvsim size` as registered: model/card, trace, scheduler,
// --max-num-batched-tokens, SLO, router knobs). --router is not here: every replay command names
// it at its end; nor the searched settings (card, TP, KV dtype, block size, max_num_seqs).
const ReplaySetting kReplaySettings[] = {
    {"model", [](const SizeJobOptions& o) -> Value { return o.plan.model; }},
    {"config", [](const SizeJobOptions& o) -> Value { return o.plan.config_path; }},
    {"num_layers", [](const SizeJobOptions& o) -> Value { return text(o.plan.num_layers); }},
    {"num_kv_heads", [](const SizeJobOptions& o) -> Value { return text(o.plan.num_kv_heads); }},
    {"head_dim", [](const SizeJobOptions& o) -> Value { return text(o.plan.head_dim); }},
    {"num_params", [](const SizeJobOptions& o) -> Value { return text(o.plan.num_params); }},
    {"dtype", [](const SizeJobOptions& o) -> Value { return o.plan.dtype; }},
    {"gpu_memory_utilization",
     [](const SizeJobOptions& o) -> Value { return text(o.plan.gpu_memory_utilization); }},
    {"overhead_gib", [](const SizeJobOptions& o) -> Value { return text(o.plan.overhead_gib); }},
    {"quantization", [](const SizeJobOptions& o) -> Value { return o.plan.quantization; }},
    {"max_model_len", [](const SizeJobOptions& o) -> Value { return text(o.plan.max_model_len); }},
    {"disable_hybrid_kv_cache_manager",
     [](const SizeJobOptions& o) -> Value {
       return o.plan.disable_hybrid_kv_cache_manager.value_or(false);
     }},
    {"vllm_version",
     [](const SizeJobOptions& o) -> Value {
       return std::string(to_string(resolve_vllm_version(o.plan.vllm_version)));
     }},
    {"format",
     [](const SizeJobOptions& o) -> Value { return std::string(to_string(o.trace.format)); }},
    {"max_requests", [](const SizeJobOptions& o) -> Value { return text(o.trace.max_requests); }},
    {"start", [](const SizeJobOptions& o) -> Value { return text(o.trace.start_s); }},
    {"duration", [](const SizeJobOptions& o) -> Value { return text(o.trace.duration_s); }},
    {"time_scale", [](const SizeJobOptions& o) -> Value { return text(o.trace.time_scale); }},
    {"arrival",
     [](const SizeJobOptions& o) -> Value { return std::string(to_string(o.trace.arrival)); }},
    {"rate", [](const SizeJobOptions& o) -> Value { return text(o.trace.rate); }},
    {"seed", [](const SizeJobOptions& o) -> Value { return text(o.trace.seed); }},
    {"skip_bad_rows", [](const SizeJobOptions& o) -> Value { return o.trace.skip_bad_rows; }, true,
     false},
    {"max_input_bytes",
     [](const SizeJobOptions& o) -> Value { return text(o.trace.limits.max_bytes); }},
    {"max_line_bytes",
     [](const SizeJobOptions& o) -> Value { return text(o.trace.limits.max_line_bytes); }},
    {"hash_block_size",
     [](const SizeJobOptions& o) -> Value { return text(o.trace.hash_block_size); }},
    {"long_prefill_token_threshold",
     [](const SizeJobOptions& o) -> Value { return text(o.sched.long_prefill_token_threshold); }},
    {"enable_chunked_prefill",
     [](const SizeJobOptions& o) -> Value { return o.sched.enable_chunked_prefill; }},
    {"enable_prefix_caching",
     [](const SizeJobOptions& o) -> Value { return o.sched.enable_prefix_caching; }},
    {"scheduling_policy", [](const SizeJobOptions& o) -> Value { return o.sched.policy; }},
    {"watermark", [](const SizeJobOptions& o) -> Value { return text(o.sched.watermark); }},
    {"scheduler_reserve_full_isl",
     [](const SizeJobOptions& o) -> Value { return o.sched.scheduler_reserve_full_isl; }, false,
     true},
    {"num_lookahead_tokens",
     [](const SizeJobOptions& o) -> Value { return text(o.sched.num_lookahead_tokens); }},
    {"async_scheduling",
     [](const SizeJobOptions& o) -> Value { return o.sched.async_scheduling.value_or(true); }},
    {"step_time", [](const SizeJobOptions& o) -> Value { return o.sched.step_time; }},
    {"max_num_active_seqs",
     [](const SizeJobOptions& o) -> Value { return text(o.sched.max_num_active_seqs); }},
    {"long_prefill_token_threshold_adaptive",
     [](const SizeJobOptions& o) -> Value { return o.sched.long_prefill_token_threshold_adaptive; },
     true, false},
    {"prefix_cache_retention_interval",
     [](const SizeJobOptions& o) -> Value {
       const auto v = o.sched.prefix_cache_retention_interval;
       return v && *v < 0 ? std::string("none") : text(v);
     }},
    {"max_num_batched_tokens",
     [](const SizeJobOptions& o) -> Value { return text(o.max_num_batched_tokens); }},
    {"slo_ttft_p99", [](const SizeJobOptions& o) -> Value { return text(o.cluster.slo_ttft_p99); }},
    {"slo_tpot_p99", [](const SizeJobOptions& o) -> Value { return text(o.cluster.slo_tpot_p99); }},
    {"slo_e2e_p99", [](const SizeJobOptions& o) -> Value { return text(o.cluster.slo_e2e_p99); }},
    {"router_staleness_ms",
     [](const SizeJobOptions& o) -> Value { return text(o.cluster.router_staleness_ms); }},
    {"router_seed", [](const SizeJobOptions& o) -> Value { return text(o.cluster.router_seed); }},
    {"affinity_prefix_blocks",
     [](const SizeJobOptions& o) -> Value { return text(o.cluster.affinity_prefix_blocks); }},
    {"affinity_load_factor",
     [](const SizeJobOptions& o) -> Value { return text(o.cluster.affinity_load_factor); }},
    {"kv_aware_load_weight",
     [](const SizeJobOptions& o) -> Value { return text(o.cluster.kv_aware_load_weight); }},
    {"admission_max_waiting_requests",
     [](const SizeJobOptions& o) -> Value {
       return text(o.cluster.admission_max_waiting_requests);
     }},
    {"admission_max_waiting_tokens",
     [](const SizeJobOptions& o) -> Value { return text(o.cluster.admission_max_waiting_tokens); }},
};

// "--id" as the CLI spells it.
std::string flag(std::string_view id) {
  return spell_params(param(id), ParamSpelling::kCli);
}

}  // namespace

std::string size_replay_command_prefix(const SizeJobOptions& o, const std::string& trace_path) {
  std::string s = "kvsim replay " + shell_quote(trace_path);
  for (const ReplaySetting& setting : kReplaySettings) {
    const auto given = o.given.find(setting.id);
    if (given == o.given.end()) continue;
    const Value v = setting.value(o);
    const std::string name = flag(setting.id);  // "--id"
    if (const bool* on = std::get_if<bool>(&v)) {
      if (*on && setting.on) s.append(" ").append(name);
      if (!*on && setting.off) s.append(" --no-").append(std::string_view(name).substr(2));
      continue;
    }
    const std::string& value = given->second.empty() ? std::get<std::string>(v) : given->second;
    s.append(" ").append(name).append(" ").append(shell_quote(value));
  }
  return s;
}

int64_t SizeJob::searched() const {
  int64_t n = 0;
  for (const SizeCandidate& c : candidates) n += shard.contains(c.group) ? 1 : 0;
  return n;
}

bool SizeOutcome::any_feasible(const std::vector<SizeResult>& results) {
  for (const SizeResult& r : results) {
    if (r.feasible()) return true;
  }
  return false;
}

SizeJob prepare_size(const SizeJobOptions& o) {
  if (!model_given(o.plan)) {
    throw std::invalid_argument(fmt::format("size: a model is required ({}, {}, or {}/{}/{})",
                                            param("model"), param("config"), param("num_layers"),
                                            param("num_kv_heads"), param("head_dim")));
  }
  for (const auto& [id, given] : {std::pair{"slo_ttft_p99", o.cluster.slo_ttft_p99.has_value()},
                                  std::pair{"slo_tpot_p99", o.cluster.slo_tpot_p99.has_value()}}) {
    if (!given) throw std::invalid_argument(fmt::format("size: {} is required", param(id)));
  }
  TraceSettingsGiven trace_given;
  trace_given.rate = o.given.contains("rate");
  trace_given.seed = o.given.contains("seed");
  check_trace_settings(o.trace, trace_given);
  SizeJob job;
  job.options = o;
  if (!o.shard.empty()) job.shard = parse_shard(o.shard);
  job.prices = default_gpu_prices();
  for (const std::string& p : o.gpu_prices) apply_gpu_price(job.prices, p);
  if (o.max_replicas < 1 || o.max_replicas > kMaxClusterReplicas) {
    throw std::invalid_argument(fmt::format("{}: must be in [1, {}]",
                                            param("max_replicas", std::to_string(o.max_replicas)),
                                            kMaxClusterReplicas));
  }
  // Router knobs, admission control and SLO checked as replay checks them.
  job.cluster = to_cluster_config(o.cluster);
  for (const std::string& d : o.axes.kv_cache_dtypes) check_kv_cache_dtype("kv_cache_dtype", d);
  job.candidates = expand_size_candidates(o.axes);
  return job;
}

SizeOutcome run_size_job(const SizeJob& job, const Trace& trace, const SizeHooks& hooks) {
  const SizeJobOptions& o = job.options;
  require_requests(trace, o.trace);
  SizeBase base;
  base.plan = resolve_plan_inputs(o.plan);
  for (const std::string& d : o.axes.kv_cache_dtypes) {
    check_kv_cache_dtype_for_model("kv_cache_dtype", d, base.plan.model);
  }
  resolve_max_model_len(base.plan, trace);
  apply(o.sched, base.settings);
  base.settings.max_num_batched_tokens = o.max_num_batched_tokens;
  base.step_time = o.sched.step_time;
  base.cluster = job.cluster;
  base.early_stop = o.early_stop;
  const auto check_stop = [&hooks] {
    if (hooks.check_stop) hooks.check_stop();
  };
  check_stop();

  const SizeRunner runner = [&base, &trace, &check_stop](const SizeCandidate& c) {
    check_stop();
    CandidateSetup setup = prepare_size_candidate(base, trace, c);
    if (setup.run) {
      setup.run = [run = std::move(setup.run), &check_stop](int32_t replicas) {
        check_stop();
        return run(replicas);
      };
    }
    return setup;
  };
  SizeSearchOptions search;
  search.max_replicas = o.max_replicas;
  search.jobs = o.jobs;
  search.shard = job.shard;
  search.spelling = o.reason_spelling;
  search.on_candidate_done = hooks.on_candidate_done;
  if (hooks.on_search_start) hooks.on_search_start();
  SizeOutcome out;
  const auto start = std::chrono::steady_clock::now();
  out.results = run_size(job.candidates, runner, job.prices, search);
  out.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  rank_size_results(out.results);
  const std::string prefix = size_replay_command_prefix(o, trace.path);
  for (SizeResult& r : out.results) {
    if (!r.trials.empty()) r.replay_command = size_replay_command(prefix, o.cluster.router, r);
    out.replays += static_cast<int64_t>(r.trials.size());
    for (const SizeTrial& t : r.trials) out.stopped_early += t.stopped_early ? 1 : 0;
  }

  SizeReportContext& ctx = out.context;
  ctx.trace = trace.path;
  ctx.requests = static_cast<int64_t>(trace.requests.size());
  ctx.model = base.plan.model.name;
  ctx.slo = job.cluster.slo;
  ctx.router = std::string(to_string(job.cluster.router));
  ctx.max_replicas = o.max_replicas;
  ctx.num_candidates = static_cast<int64_t>(job.candidates.size());
  return out;
}

}  // namespace kvsim::run
