#include "kvsim/run/replay_job.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include <fmt/core.h>

#include "kvsim/core/param.h"
#include "kvsim/run/trace_input.h"
#include "kvsim/sim/engine/replay_setup.h"
#include "kvsim/sim/report/cluster_report.h"
#include "kvsim/sim/report/openmetrics.h"
#include "kvsim/sim/report/vllm_log.h"

namespace kvsim::run {
namespace {

// "2 prompt_too_long, 1 empty_prompt": the reasons with their counts, a cluster's admission
// control refusals too (without them the message read "all 200 requests were rejected ()").
std::string describe_rejections(const ReplaySummary& s, const ClusterResult* cluster) {
  std::string out;
  for (int i = 0; i < kNumRejectReasons; ++i) {
    if (s.rejected_by_reason[static_cast<size_t>(i)] == 0) continue;
    out += fmt::format("{}{} {}", out.empty() ? "" : ", ",
                       s.rejected_by_reason[static_cast<size_t>(i)],
                       to_string(static_cast<RejectReason>(i)));
  }
  for (int i = 0; cluster != nullptr && i < kNumAdmissionRejectReasons; ++i) {
    const int64_t n = cluster->admission_rejected_by_reason[static_cast<size_t>(i)];
    if (n == 0) continue;
    out += fmt::format("{}{} {}", out.empty() ? "" : ", ", n,
                       to_string(static_cast<AdmissionRejectReason>(i)));
  }
  return out;
}

// metrics_interval / vllm_log_interval: a whole number of ms in (0, 1e9] s; metrics_start: a
// Unix time in [0, 1e11) s (Prometheus keeps ms timestamps in int64).
void check_metrics_options(const ReplayOptions& o) {
  for (const auto& [id, v] : {std::pair{"metrics_interval", o.metrics_interval},
                              std::pair{"vllm_log_interval", o.vllm_log_interval}}) {
    if (!std::isfinite(v) || v < 0.001 || v > 1e9 ||
        std::fabs(v * 1e3 - std::round(v * 1e3)) > 1e-6) {
      throw std::invalid_argument(
          fmt::format("{}: must be a whole number of milliseconds, from 0.001 to 1e9 s",
                      param(id, fmt::format("{}", v))));
    }
  }
  if (o.metrics_start &&
      (!std::isfinite(*o.metrics_start) || *o.metrics_start < 0 || *o.metrics_start >= 1e11)) {
    throw std::invalid_argument(
        fmt::format("{}: must be a Unix time in seconds, from 0 to 1e11",
                    param("metrics_start", fmt::format("{}", *o.metrics_start))));
  }
}

int64_t whole_ms_as_ns(double seconds) {
  return std::llround(seconds * 1e3) * 1'000'000;
}

// The wall-clock time of simulated t = 0: metrics_start when given; else the trace's own clock
// (Azure's absolute TIMESTAMP, Trace::clock_start_unix_ns) when it has one at or after the Unix
// epoch (int64 ns end in 2262, inside metrics_start's range of [0, 1e11) s); else
// kDefaultMetricsStartUnixS.
int64_t metrics_start_unix_ns(const ReplayOptions& o, const Trace& trace) {
  if (o.metrics_start) return whole_ms_as_ns(*o.metrics_start);
  if (trace.clock_start_unix_ns && *trace.clock_start_unix_ns >= 0) {
    return *trace.clock_start_unix_ns;
  }
  return whole_ms_as_ns(kDefaultMetricsStartUnixS);
}

}  // namespace

void check_replay_options(const ReplayOptions& o) {
  if (o.preemption_mode != "recompute" && o.preemption_mode != "swap") {
    throw std::invalid_argument(fmt::format("{}: unknown value '{}' (expected recompute or swap)",
                                            param("preemption_mode"), o.preemption_mode));
  }
  if (o.preemption_mode != "swap") {
    for (const auto& [id, given] :
         {std::pair{"swap_space_gib", o.swap_space_gib.has_value()},
          std::pair{"swap_bandwidth_gbps", o.swap_bandwidth_gbps.has_value()}}) {
      if (given) {
        throw std::invalid_argument(
            fmt::format("{} needs {}", param(id), param("preemption_mode", "swap")));
      }
    }
  }
  (void)parse_kv_backend_kind(o.backend);  // names the valid backends
  if (o.backend == "null" && o.backend_max_layers) {
    throw std::invalid_argument(
        fmt::format("{} needs {} or cuda", param("backend_max_layers"), param("backend", "host")));
  }
  if (o.backend_max_layers && *o.backend_max_layers < 0) {
    throw std::invalid_argument(fmt::format("{} must be >= 0 (got {})", param("backend_max_layers"),
                                            *o.backend_max_layers));
  }
  if (o.backend != "null" && o.cluster && o.cluster->replicas > 1) {
    throw std::invalid_argument(fmt::format(
        "{}: a cluster replay ({}) runs the null backend only (a host/cuda KV pool per replica "
        "would not fit one machine); drop {} or use {}",
        param("backend", o.backend), param("replicas", std::to_string(o.cluster->replicas)),
        param("backend"), param("replicas", "1")));
  }
  if (o.cluster) (void)to_cluster_config(*o.cluster);
  const double swap_space = o.swap_space_gib.value_or(kDefaultSwapSpaceGib);
  if (!std::isfinite(swap_space) || swap_space < 0) {
    throw std::invalid_argument(
        fmt::format("{}: must be a finite number >= 0",
                    param("swap_space_gib", fmt::format("{}", swap_space))));
  }
  const double bandwidth = o.swap_bandwidth_gbps.value_or(kDefaultSwapBandwidthGbps);
  if (!std::isfinite(bandwidth) || bandwidth <= 0) {
    throw std::invalid_argument(
        fmt::format("{}: must be a finite number > 0",
                    param("swap_bandwidth_gbps", fmt::format("{}", bandwidth))));
  }
  check_metrics_options(o);
}

bool replay_can_stream(const ReplayOptions& o, const std::string& trace_path) {
  return !o.cluster && o.backend == "null" && trace_is_rereadable(trace_path);
}

ReplayJob prepare_replay(const ReplayOptions& options, const Trace& trace,
                         const TraceReadOptions& read_options, TraceStream* stream) {
  check_replay_options(options);
  ReplayJob job;
  job.options = options;
  job.trace = &trace;
  job.stream = stream;
  const ReplayOptions& o = job.options;
  if (o.cluster) job.cluster = to_cluster_config(*o.cluster);

  require_requests(trace,
                   stream ? stream->num_requests() : static_cast<int64_t>(trace.requests.size()),
                   read_options);
  const bool named = model_given(o.plan);
  PlanOptions plan_options = o.plan;
  if (!named) plan_options.model = kDefaultModel;
  job.inputs = resolve_plan_inputs(plan_options);
  if (stream) {
    resolve_max_model_len(job.inputs, *stream, /*model_is_default=*/!named);
  } else {
    resolve_max_model_len(job.inputs, trace, /*model_is_default=*/!named);
  }

  ReplaySettings settings;
  apply(o.sched, settings);
  settings.max_num_batched_tokens = o.max_num_batched_tokens;
  settings.max_num_seqs = o.max_num_seqs;
  if (o.preemption_mode == "swap") settings.scheduler.preemption_mode = PreemptionMode::SWAP;
  settings.swap_space_gib = o.swap_space_gib.value_or(kDefaultSwapSpaceGib);
  settings.swap_bandwidth_gbps = o.swap_bandwidth_gbps.value_or(kDefaultSwapBandwidthGbps);
  settings.check_invariants = o.check_invariants;
  settings.steady_decode = o.steady_decode;
  settings.record_timeline = o.record_timeline;
  settings.record_requests = o.record_requests;
  job.plan = plan_replay_pool(job.inputs, settings);
  job.config = make_replay_config(job.plan, job.inputs.gpu, settings);
  const SchedulerConfig& sc = job.config.scheduler;

  job.step_time = make_step_time_model(o.sched.step_time, job.inputs, job.plan);
  // Shape, dtype and (hybrid models) the KV cache groups sharing the pool's tensors.
  job.backend_config =
      kv_backend_config_for(job.plan, parse_kv_backend_kind(o.backend), sc.block_size,
                            sc.num_host_swap_slots, o.backend_max_layers.value_or(0));

  ReportContext& ctx = job.context;
  const Plan& plan = job.plan;
  ctx.trace_path = trace.path;
  ctx.trace_format = std::string(to_string(trace.format));
  ctx.trace_rows = trace.rows_read;
  ctx.dropped_rows = describe_dropped(trace);
  ctx.dropped_by_reason = trace.dropped;
  ctx.model = plan.model_name + (named                 ? ""
                                 : shape_given(o.plan) ? " (default, shape overridden)"
                                                       : " (default)");
  ctx.gpu = plan.gpu_name;
  ctx.kv_cache_dtype = plan.kv_cache_dtype;
  ctx.pool_overridden = plan.num_gpu_blocks_overridden;
  ctx.formula_max_concurrency = formula_max_concurrency(plan);
  ctx.vllm_max_concurrency = plan.vllm_max_concurrency;
  ctx.vllm_log_lines = vllm_kv_cache_report_lines(plan);
  ctx.scheduler = sc;
  ctx.preemption_mode = o.preemption_mode;
  ctx.num_layers = plan.num_layers;
  ctx.backend_layers = job.backend_config.pool_model_layers();
  return job;
}

ReplayOutcome run_replay_job(const ReplayJob& job, const ProgressCallback& progress,
                             int64_t progress_every_steps, TimelineSink* timeline_sink,
                             RequestSink* request_sink) {
  ReplayConfig rc = job.config;
  if (progress_every_steps > 0) rc.progress_every_steps = progress_every_steps;
  if (timeline_sink != nullptr) {
    if (job.cluster) {
      throw std::invalid_argument(
          "a cluster replay merges its replicas' timelines: it cannot stream them to a sink");
    }
    if (!rc.record_timeline) {
      throw std::invalid_argument("a timeline sink needs the job's record_timeline");
    }
  }
  if (request_sink != nullptr) {
    if (job.cluster) {
      throw std::invalid_argument(
          "a cluster replay merges its replicas' request records: it cannot stream them to a "
          "sink");
    }
    if (!rc.record_requests) {
      throw std::invalid_argument("a request sink needs the job's record_requests");
    }
  }
  rc.timeline_sink = timeline_sink;
  rc.request_sink = request_sink;
  const KvBackendConfig& bc = job.backend_config;
  ReplayOutcome out;
  out.job = &job;
  out.timeline_streamed = timeline_sink != nullptr;
  out.requests_streamed = request_sink != nullptr;
  if (job.cluster) {
    // The cluster engine builds its replicas' backends itself (one, with replicas=1).
    const ReplicaBackendFactory backends = [&bc](int32_t) { return make_kv_backend(bc); };
    out.cluster =
        run_cluster_replay(rc, *job.cluster, *job.trace, backends, *job.step_time, progress);
  } else {
    const std::unique_ptr<KvBackend> backend = make_kv_backend(bc);
    out.plain = job.stream ? run_replay(rc, *job.stream, *backend, *job.step_time, progress)
                           : run_replay(rc, *job.trace, *backend, *job.step_time, progress);
  }
  return out;
}

std::string ReplayOutcome::report() const {
  return cluster ? format_cluster_report(*cluster, *job->cluster, job->context)
                 : format_replay_report(plain.summary, job->context);
}

nlohmann::ordered_json ReplayOutcome::summary_json() const {
  return cluster ? cluster_summary_json(*cluster, *job->cluster, job->context)
                 : replay_summary_json(plain.summary, job->context);
}

bool ReplayOutcome::timeline_has_replica() const {
  return cluster && job->cluster->replicas > 1;
}

bool ReplayOutcome::requests_have_cluster_columns() const {
  return timeline_has_replica() || (cluster && cluster->admission_rejected > 0);
}

std::string ReplayOutcome::verification_failure() const {
  const ReplaySummary& s = result().summary;
  return s.backend_verified && !s.verification.ok ? s.verification.detail : std::string();
}

bool ReplayOutcome::all_rejected() const {
  const ReplaySummary& s = result().summary;
  return s.requests > 0 && s.rejected == s.requests;
}

std::string ReplayOutcome::all_rejected_message() const {
  const ReplaySummary& s = result().summary;
  const SchedulerConfig& sc = job->config.scheduler;
  return fmt::format(
      "all {} requests were rejected ({}); max_model_len {}, {} usable blocks of {} tokens",
      s.requests, describe_rejections(s, cluster ? &*cluster : nullptr), sc.max_model_len,
      sc.num_gpu_blocks - 1, sc.block_size);
}

namespace {

// The records per engine and the sampling: one engine for a plain replay, one per replica.
template <typename Write>
void write_sampled(const ReplayOutcome& out, double interval_s, const Write& write) {
  const ReplayJob& job = *out.job;
  if (!job.options.record_timeline || !job.options.record_requests || out.timeline_streamed ||
      out.requests_streamed) {
    throw std::logic_error("the metrics and the vLLM log need the timeline and request records");
  }
  MetricsSampling sampling;
  sampling.model_name = job.plan.model_name;
  sampling.interval_ns = whole_ms_as_ns(interval_s);
  sampling.start_unix_ns = metrics_start_unix_ns(job.options, *job.trace);
  const ReplayResult& r = out.result();
  if (!out.cluster) {
    const EngineRecords engine{r.timeline, r.requests};
    write(std::span<const EngineRecords>(&engine, 1), sampling);
    return;
  }
  const ReplicaRecords split =
      split_by_replica(r.timeline, out.cluster->timeline_replica, r.requests,
                       out.cluster->request_replica, job.cluster->replicas);
  const std::vector<EngineRecords> engines = split.engines();
  write(std::span<const EngineRecords>(engines), sampling);
}

}  // namespace

void ReplayOutcome::write_metrics(std::ostream& os) const {
  write_sampled(*this, job->options.metrics_interval,
                [&os](std::span<const EngineRecords> e, const MetricsSampling& s) {
                  write_openmetrics(os, e, s);
                });
}

void ReplayOutcome::write_vllm_log(std::ostream& os) const {
  write_sampled(*this, job->options.vllm_log_interval,
                [&os](std::span<const EngineRecords> e, const MetricsSampling& s) {
                  kvsim::write_vllm_log(os, e, s);
                });
}

}  // namespace kvsim::run
