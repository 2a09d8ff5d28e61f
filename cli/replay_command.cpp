// `kvsim replay TRACE`: replay a trace through the vLLM 0.26 scheduler/allocator clone and
// report observed concurrency against the capacity formula (docs/scheduler.md).
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include <fmt/core.h>

#include "cluster_options.h"
#include "commands.h"
#include "interrupt.h"
#include "kvsim/core/kv_backend.h"
#include "kvsim/core/planner.h"
#include "kvsim/cuda/backend_factory.h"
#include "kvsim/sim/cluster/cluster_replay.h"
#include "kvsim/sim/engine/replay.h"
#include "kvsim/sim/engine/replay_setup.h"
#include "kvsim/sim/engine/step_time_model.h"
#include "kvsim/sim/metrics/cluster_report.h"
#include "kvsim/sim/metrics/report.h"
#include "kvsim/sim/traces/trace.h"
#include "kvsim/sim/traces/trace_stream.h"
#include "output_files.h"
#include "plan_options.h"
#include "scheduler_options.h"
#include "trace_options.h"
#include "validators.h"

namespace kvsim::cli {
namespace {

// The lesson's model, used when no model flag is given (the pool needs a model shape).
constexpr const char* kDefaultModel = "qwen2.5-7b";

struct ReplayOptions {
  std::string trace_path;
  PlanOptions plan;
  TraceReadOptions trace;
  std::optional<int32_t> max_num_batched_tokens;
  std::optional<int32_t> max_num_seqs;
  SchedulerOptions sched;
  ClusterOptions cluster;
  std::string backend = "null";
  int32_t backend_max_layers = 0;
  std::string preemption_mode = "recompute";
  double swap_space_gib = 4.0;        // vLLM V0's --swap-space default (GiB per GPU)
  double swap_bandwidth_gbps = 25.0;  // PCIe 4.0 x16, effective
  std::string json_path;
  std::string timeline_path;
  std::string requests_path;
  bool no_progress = false;
  bool check_invariants = false;
  bool no_steady_decode = false;
};

// A model is named by --model, --config, or all three shape flags; a subset of the shape flags
// overrides the default model's.
bool model_given(const PlanOptions& p) {
  return !p.model.empty() || !p.config_path.empty() ||
         (p.num_layers && p.num_kv_heads && p.head_dim);
}

bool shape_flags_given(const PlanOptions& p) {
  return p.num_layers || p.num_kv_heads || p.head_dim;
}

// Flags that only mean something together with another flag's value: refuse them rather than
// ignore them.
void check_flag_combinations(const CLI::App& cmd, const ReplayOptions& o) {
  if (o.preemption_mode != "swap") {
    for (const char* flag : {"--swap-space-gib", "--swap-bandwidth-gbps"}) {
      if (cmd.get_option(flag)->count() > 0) {
        throw std::invalid_argument(fmt::format("{} needs --preemption-mode swap", flag));
      }
    }
  }
  if (o.backend == "null" && cmd.get_option("--backend-max-layers")->count() > 0) {
    throw std::invalid_argument("--backend-max-layers needs --backend host or cuda");
  }
  if (o.backend != "null" && o.cluster.replicas > 1) {
    throw std::invalid_argument(fmt::format(
        "--backend {}: a cluster replay (--replicas {}) runs the null backend only (a host/cuda "
        "KV pool per replica would not fit one machine); drop --backend or use --replicas 1",
        o.backend, o.cluster.replicas));
  }
}

// The cluster engine runs when a cluster or SLO flag is given; otherwise the plain replay, whose
// outputs stay exactly those of kvsim before clusters existed.
bool cluster_mode(const CLI::App& cmd) {
  for (const CLI::Option* opt : cmd.get_options()) {
    const std::string group = opt->get_group();
    if ((group == "Cluster" || group == "SLO") && opt->count() > 0) return true;
  }
  return false;
}

// "2 prompt_too_long, 1 empty_prompt" for the rejection summary line.
// The reasons with their counts; a cluster's admission control refusals too (without them the
// message read "all 200 requests were rejected ()").
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

void run(const CLI::App& cmd, ReplayOptions& o) {
  check_trace_options(cmd, o.trace);
  check_flag_combinations(cmd, o);
  const ClusterConfig cluster = to_cluster_config(o.cluster);
  const bool clustered = cluster_mode(cmd);
  OutputFiles outputs;
  outputs.add("--json", o.json_path);
  outputs.add("--timeline", o.timeline_path);
  outputs.add("--requests", o.requests_path);
  outputs.add_input("the trace", o.trace_path);
  outputs.add_input("--config", o.plan.config_path);
  outputs.add_input("--gpu-spec", o.plan.gpu_spec_path);
  outputs.refuse_inputs();
  if (!std::isfinite(o.swap_space_gib) || o.swap_space_gib < 0) {
    throw std::invalid_argument(
        fmt::format("--swap-space-gib {}: must be a finite number >= 0", o.swap_space_gib));
  }
  if (!std::isfinite(o.swap_bandwidth_gbps) || o.swap_bandwidth_gbps <= 0) {
    throw std::invalid_argument(fmt::format("--swap-bandwidth-gbps {}: must be a finite number > 0",
                                            o.swap_bandwidth_gbps));
  }
  // A plain replay that writes no per-request rows streams the trace (memory follows the
  // requests in flight: trace_stream.h), unless the trace must be sorted first; a cluster
  // replay, per-request rows and host/cuda pools keep the trace read whole.
  // A pipe or FIFO cannot be read twice: read whole, once.
  std::optional<TraceStream> stream;
  if (!clustered && o.backend == "null" && o.requests_path.empty() &&
      trace_is_rereadable(o.trace_path)) {
    stream = TraceStream::open(o.trace_path, o.trace);
  }
  const Trace whole = stream ? Trace{} : read_cli_trace(o.trace_path, o.trace);
  const Trace& trace = stream ? stream->header() : whole;
  fmt::print(stderr, "{}", format_bad_rows(trace, "kvsim replay"));
  require_requests(trace,
                   stream ? stream->num_requests() : static_cast<int64_t>(trace.requests.size()),
                   o.trace);
  const bool named = model_given(o.plan);
  if (!named) o.plan.model = kDefaultModel;
  PlanInputs in = resolve_plan_inputs(o.plan);
  if (stream) {
    resolve_max_model_len(in, *stream, /*model_is_default=*/!named);
  } else {
    resolve_max_model_len(in, trace, /*model_is_default=*/!named);
  }

  ReplaySettings settings;
  apply(o.sched, settings);
  settings.max_num_batched_tokens = o.max_num_batched_tokens;
  settings.max_num_seqs = o.max_num_seqs;
  if (o.preemption_mode == "swap") settings.scheduler.preemption_mode = PreemptionMode::SWAP;
  settings.swap_space_gib = o.swap_space_gib;
  settings.swap_bandwidth_gbps = o.swap_bandwidth_gbps;
  settings.check_invariants = o.check_invariants;
  settings.steady_decode = !o.no_steady_decode;
  settings.record_timeline = !o.timeline_path.empty();
  settings.record_requests = !o.requests_path.empty();
  const Plan plan = plan_replay_pool(in, settings);
  const ReplayConfig rc = make_replay_config(plan, in.gpu, settings);
  const SchedulerConfig& sc = rc.scheduler;

  const std::unique_ptr<StepTimeModel> step_time =
      make_step_time_model(o.sched.step_time, in, plan);
  // Shape, dtype and (hybrid models) the KV cache groups sharing the pool's tensors.
  const KvBackendConfig bc =
      kv_backend_config_for(plan, parse_kv_backend_kind(o.backend), sc.block_size,
                            sc.num_host_swap_slots, o.backend_max_layers);
  // The cluster engine builds its replicas' backends itself (one, with --replicas 1).
  const std::unique_ptr<KvBackend> backend = clustered ? nullptr : make_kv_backend(bc);
  // Last check before the run: every output path can be written.
  outputs.open_all();

  // Always installed: it is where a SIGINT/SIGTERM stops the replay (interrupt.h).
  const bool draw = !o.no_progress && isatty(STDERR_FILENO) != 0;
  ProgressCallback progress = [draw](int64_t done, int64_t total, int64_t sim_ns) {
    throw_if_interrupted();
    if (draw) {
      const int width = 40;
      const int fill = total > 0 ? static_cast<int>(width * done / total) : width;
      fmt::print(stderr, "\r[{:<{}}] {}/{} requests, t={:.1f} s", std::string(fill, '#'), width,
                 done, total, static_cast<double>(sim_ns) * 1e-9);
      if (done == total) fmt::print(stderr, "\n");
      std::fflush(stderr);
    }
  };
  std::optional<ClusterResult> cluster_result;
  ReplayResult plain_result;
  if (clustered) {
    const ReplicaBackendFactory backends = [&bc](int32_t) { return make_kv_backend(bc); };
    cluster_result = run_cluster_replay(rc, cluster, trace, backends, *step_time, progress);
  } else {
    plain_result = stream ? run_replay(rc, *stream, *backend, *step_time, progress)
                          : run_replay(rc, trace, *backend, *step_time, progress);
  }
  const ReplayResult& result = clustered ? cluster_result->cluster : plain_result;

  ReportContext ctx;
  ctx.trace_path = o.trace_path;
  ctx.trace_format = std::string(to_string(trace.format));
  ctx.trace_rows = trace.rows_read;
  ctx.dropped_rows = describe_dropped(trace);
  ctx.dropped_by_reason = trace.dropped;
  ctx.model = plan.model_name + (named                       ? ""
                                 : shape_flags_given(o.plan) ? " (default, shape overridden)"
                                                             : " (default)");
  ctx.gpu = plan.gpu_name;
  ctx.kv_cache_dtype = plan.kv_cache_dtype;
  ctx.pool_overridden = plan.num_gpu_blocks_overridden;
  ctx.formula_max_concurrency = formula_max_concurrency(plan);
  ctx.vllm_max_concurrency = plan.vllm_max_concurrency;
  ctx.vllm_log_lines = {vllm_kv_cache_size_line(plan), vllm_max_concurrency_line(plan)};
  ctx.scheduler = sc;
  ctx.preemption_mode = o.preemption_mode;
  ctx.num_layers = plan.num_layers;
  ctx.backend_layers = bc.pool_model_layers();

  // The human report goes to stdout unless an output file already does.
  if (!outputs.uses_stdout()) {
    std::cout << (clustered ? format_cluster_report(*cluster_result, cluster, ctx)
                            : format_replay_report(result.summary, ctx))
              << std::flush;
  }
  if (outputs.requested("--json")) {
    outputs.stream("--json") << (clustered ? cluster_summary_json(*cluster_result, cluster, ctx)
                                           : replay_summary_json(result.summary, ctx))
                                    .dump(2)
                             << "\n";
    outputs.finish("--json");
  }
  // With one replica the CSVs keep the single-replica columns (the same bytes as a plain replay).
  const bool replica_column = clustered && cluster.replicas > 1;
  if (outputs.requested("--timeline")) {
    if (replica_column) {
      write_cluster_timeline_csv(outputs.stream("--timeline"), result.timeline,
                                 cluster_result->timeline_replica);
    } else {
      write_timeline_csv(outputs.stream("--timeline"), result.timeline);
    }
    outputs.finish("--timeline");
  }
  if (outputs.requested("--requests")) {
    // A request refused by admission control needs the cluster columns to show its reason.
    if (replica_column || (clustered && cluster_result->admission_rejected > 0)) {
      write_cluster_requests_csv(outputs.stream("--requests"), result.requests,
                                 cluster_result->request_replica, cluster_result->admission_reason);
    } else {
      write_requests_csv(outputs.stream("--requests"), result.requests);
    }
    outputs.finish("--requests");
  }
  fmt::print(stderr, "kvsim replay: {} requests, {} steps in {:.3f} s wall\n",
             result.summary.requests, result.summary.steps, result.summary.wall_seconds);
  // Every failure is decided before anything is renamed into place: a failed run leaves each
  // destination as it was (its temporaries go with `outputs`), whatever stdout showed.
  if (result.summary.backend_verified && !result.summary.verification.ok) {
    throw std::runtime_error("KV backend verification failed: " +
                             result.summary.verification.detail + "; no output file was changed");
  }
  // A replay in which nothing could run measured nothing: the report stays printed, but the
  // configuration is unusable for this trace, so exit as for bad input.
  if (result.summary.requests > 0 && result.summary.rejected == result.summary.requests) {
    fmt::print(stderr,
               "kvsim: error: all {} requests were rejected ({}); max_model_len {}, {} usable "
               "blocks of {} tokens; no output file was changed\n",
               result.summary.requests,
               describe_rejections(result.summary, clustered ? &*cluster_result : nullptr),
               sc.max_model_len, sc.num_gpu_blocks - 1, sc.block_size);
    set_exit_code(kExitBadInput);
    return;
  }
  outputs.commit_all();
}

}  // namespace

void register_replay_command(CLI::App& app) {
  auto o = std::make_shared<ReplayOptions>();
  CLI::App* cmd = app.add_subcommand(
      "replay",
      "Replay a trace through vLLM 0.26's scheduler and KV allocator; report concurrency");
  cmd->add_option("trace", o->trace_path, "Trace file (Azure, Vidur, BurstGPT, Mooncake, ...)")
      ->required();
  add_model_card_options(cmd, o->plan);
  add_trace_options(cmd, o->trace);
  cmd->add_option("--max-num-batched-tokens", o->max_num_batched_tokens,
                  "Token budget per step (default: vLLM's for the card)")
      ->check(positive())
      ->group("Scheduler");
  cmd->add_option("--max-num-seqs", o->max_num_seqs,
                  "Maximum running requests (default: vLLM's for the card)")
      ->check(positive())
      ->group("Scheduler");
  add_scheduler_options(cmd, o->sched);
  add_cluster_options(*cmd, o->cluster);
  cmd->add_option("--backend", o->backend, "KV storage: null | host | cuda")
      ->check(CLI::IsMember({"null", "host", "cuda"}))
      ->capture_default_str();
  cmd->add_option("--backend-max-layers", o->backend_max_layers,
                  "Keep only this many layers in a host/cuda pool (0 = all)")
      ->check(non_negative());
  cmd->add_option("--preemption-mode", o->preemption_mode,
                  "recompute (vLLM v1's only mode, default) | swap (KV to host and back, as vLLM "
                  "V0)")
      ->check(CLI::IsMember({"recompute", "swap"}));
  cmd->add_option("--swap-space-gib", o->swap_space_gib,
                  "Host swap space for --preemption-mode swap, GiB (default 4, vLLM V0's)");
  cmd->add_option("--swap-bandwidth-gbps", o->swap_bandwidth_gbps,
                  "Host<->device swap bandwidth, GB/s (default 25: PCIe 4.0 x16 effective)");
  cmd->add_option("--json", o->json_path,
                  "Write the JSON summary to PATH ('-' = stdout instead of the report)");
  cmd->add_option("--timeline", o->timeline_path,
                  "Write one CSV row per step to PATH ('-' = stdout instead of the report)");
  cmd->add_option("--requests", o->requests_path,
                  "Write one CSV row per request to PATH ('-' = stdout instead of the report)");
  cmd->add_flag("--no-progress", o->no_progress, "No progress bar on stderr");
  cmd->add_flag("--check-invariants", o->check_invariants,
                "Check the allocator's invariants after every step (slow)");
  cmd->add_flag("--no-steady-decode", o->no_steady_decode,
                "Run every step through the general scheduler path (speed only: outputs are "
                "identical; for checking and benchmarking)");
  cmd->get_option("--max-model-len")
      ->description(
          "Context length (default: the model's max_position_embeddings with --model or "
          "--config; else 1 + the trace's longest input + output)");
  for (const char* flag : {"--num-layers", "--num-kv-heads", "--head-dim"}) {
    CLI::Option* opt = cmd->get_option(flag);
    std::string d = opt->get_description();
    if (const auto at = d.find(" (overrides the model)"); at != std::string::npos) d.erase(at);
    opt->description(fmt::format(
        "{} (overrides --model/--config, else the default {}; all three alone: a custom model)", d,
        kDefaultModel));
  }
  cmd->callback([o, cmd] { run(*cmd, *o); });
}

}  // namespace kvsim::cli
