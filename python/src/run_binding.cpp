// plan, replay (one engine or a cluster) and sweep: the same resolution, engine and JSON/CSV
// writers as `kvsim plan`, `kvsim replay` and `kvsim sweep` (cli/*_command.cpp), with the
// results handed to Python as JSON text (parsed by the Python layer into attribute objects), CSV
// text (sweep) and NumPy columns over the replay's own record vectors (timeline, requests).
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/core.h>
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "cluster_options.h"
#include "columns.h"
#include "interruptible.h"
#include "kvsim/core/kv_backend.h"
#include "kvsim/core/model_presets.h"
#include "kvsim/core/planner.h"
#include "kvsim/cuda/backend_factory.h"
#include "kvsim/sim/cluster/cluster_replay.h"
#include "kvsim/sim/engine/replay.h"
#include "kvsim/sim/engine/replay_setup.h"
#include "kvsim/sim/engine/step_time_model.h"
#include "kvsim/sim/metrics/cluster_report.h"
#include "kvsim/sim/metrics/report.h"
#include "kvsim/sim/sweep/sweep.h"
#include "options.h"
#include "plan_json.h"
#include "trace_binding.h"
#include "trace_options.h"

namespace nb = nanobind;

namespace kvsim::python {
namespace {

// `kvsim replay`'s model when none is named (cli/replay_command.cpp).
constexpr const char* kDefaultModel = "qwen2.5-7b";
// Steps between two looks at the stop flag: a few milliseconds of replay.
constexpr int64_t kStopCheckSteps = 1024;

// The plan-only scheduler knobs (`kvsim plan --max-num-batched-tokens / --max-num-seqs /
// --no-async-scheduling`) size a hybrid model's windowed groups.
std::string plan_json(nb::dict plan_kwargs, std::optional<int64_t> concurrency,
                      std::optional<int64_t> max_num_batched_tokens,
                      std::optional<int64_t> max_num_seqs, bool async_scheduling) {
  PlanInputs in = cli::resolve_plan_inputs(plan_options_from(plan_kwargs));
  in.concurrency = concurrency;
  in.max_num_batched_tokens = max_num_batched_tokens;
  in.max_num_seqs = max_num_seqs;
  in.async_scheduling = async_scheduling;
  return cli::plan_to_json(compute_plan(in)).dump();
}

bool model_given(const cli::PlanOptions& p) {
  return !p.model.empty() || !p.config_path.empty() ||
         (p.num_layers && p.num_kv_heads && p.head_dim);
}

template <typename T>
using Storage =
    std::conditional_t<std::is_enum_v<T>, std::underlying_type<T>, std::type_identity<T>>::type;

// d[name] = zero-copy view of Row::name (enums as their integer codes).
#define KVSIM_FIELD(d, Row, rows, owner, name) \
  d[#name] = field_view<const Storage<decltype(Row::name)>>(rows, offsetof(Row, name), owner)

nb::dict timeline_columns(std::vector<TimelineRow>&& rows_in) {
  auto held = std::make_unique<std::vector<TimelineRow>>(std::move(rows_in));
  const std::vector<TimelineRow>& rows = *held;
  nb::capsule owner = make_owner(std::move(held));
  nb::dict d;
  KVSIM_FIELD(d, TimelineRow, rows, owner, step);
  KVSIM_FIELD(d, TimelineRow, rows, owner, time_ns);
  KVSIM_FIELD(d, TimelineRow, rows, owner, duration_ns);
  KVSIM_FIELD(d, TimelineRow, rows, owner, running);
  KVSIM_FIELD(d, TimelineRow, rows, owner, waiting);
  KVSIM_FIELD(d, TimelineRow, rows, owner, scheduled_reqs);
  KVSIM_FIELD(d, TimelineRow, rows, owner, scheduled_tokens);
  KVSIM_FIELD(d, TimelineRow, rows, owner, prefill_tokens);
  KVSIM_FIELD(d, TimelineRow, rows, owner, decode_tokens);
  KVSIM_FIELD(d, TimelineRow, rows, owner, used_blocks);
  KVSIM_FIELD(d, TimelineRow, rows, owner, free_blocks);
  KVSIM_FIELD(d, TimelineRow, rows, owner, cached_blocks);
  KVSIM_FIELD(d, TimelineRow, rows, owner, padding_tokens);
  KVSIM_FIELD(d, TimelineRow, rows, owner, preemptions);
  KVSIM_FIELD(d, TimelineRow, rows, owner, admission_stop);
  KVSIM_FIELD(d, TimelineRow, rows, owner, swap_out_blocks);
  KVSIM_FIELD(d, TimelineRow, rows, owner, swap_in_blocks);
  KVSIM_FIELD(d, TimelineRow, rows, owner, host_slots_used);
  return d;
}

nb::dict request_columns(std::vector<RequestRecord>&& rows_in) {
  auto held = std::make_unique<std::vector<RequestRecord>>(std::move(rows_in));
  const std::vector<RequestRecord>& rows = *held;
  nb::capsule owner = make_owner(std::move(held));
  nb::dict d;
  KVSIM_FIELD(d, RequestRecord, rows, owner, request_id);
  KVSIM_FIELD(d, RequestRecord, rows, owner, source_line);
  KVSIM_FIELD(d, RequestRecord, rows, owner, arrival_ns);
  KVSIM_FIELD(d, RequestRecord, rows, owner, prompt_tokens);
  KVSIM_FIELD(d, RequestRecord, rows, owner, max_tokens);
  KVSIM_FIELD(d, RequestRecord, rows, owner, output_tokens);
  KVSIM_FIELD(d, RequestRecord, rows, owner, priority);
  KVSIM_FIELD(d, RequestRecord, rows, owner, first_scheduled_ns);
  KVSIM_FIELD(d, RequestRecord, rows, owner, first_token_ns);
  KVSIM_FIELD(d, RequestRecord, rows, owner, finish_ns);
  KVSIM_FIELD(d, RequestRecord, rows, owner, preemptions);
  KVSIM_FIELD(d, RequestRecord, rows, owner, scheduled_tokens);
  KVSIM_FIELD(d, RequestRecord, rows, owner, recomputed_tokens);
  KVSIM_FIELD(d, RequestRecord, rows, owner, prefix_hit_tokens);
  KVSIM_FIELD(d, RequestRecord, rows, owner, finished);
  KVSIM_FIELD(d, RequestRecord, rows, owner, rejected);
  KVSIM_FIELD(d, RequestRecord, rows, owner, reject_reason);
  KVSIM_FIELD(d, RequestRecord, rows, owner, swap_outs);
  return d;
}

#undef KVSIM_FIELD

// The names of an enum's codes 0, 1, ... as the CSV writers spell them.
template <typename E>
std::vector<std::string> code_names(int count) {
  std::vector<std::string> names;
  for (int i = 0; i < count; ++i) names.emplace_back(to_string(static_cast<E>(i)));
  return names;
}
std::vector<std::string> admission_stop_names() {
  std::vector<std::string> names;
  for (int i = 0; i < 256; ++i) {
    const std::string_view s = to_string(static_cast<AdmissionStop>(i));
    if (s == "unknown") break;  // report_csv.cpp's name for a value past the last
    names.emplace_back(s);
  }
  return names;
}

// A zero-copy column over a vector of scalars (one value per timeline row or request).
template <typename T>
nb::object scalar_column(std::vector<T>&& values_in) {
  using Stored = Storage<T>;
  auto held = std::make_unique<std::vector<T>>(std::move(values_in));
  const std::vector<T>& values = *held;
  nb::capsule owner = make_owner(std::move(held));
  return nb::cast(field_view<const Stored>(values, 0, owner));
}

// `kvsim replay` (cli/replay_command.cpp run()) minus printing: returns the JSON summary (the
// same object as --json), the human report, the timeline and the request records. With
// `cluster_kwargs` (the CLI's cluster mode: any cluster or SLO flag given) the replay runs on
// the cluster engine and the JSON/report are the cluster ones; the tables then carry the CLI's
// cluster columns exactly when its CSVs do: `replica` in the timeline when replicas > 1,
// `replica` and `admission_reason` (codes of AdmissionRejectReason) in the requests when
// replicas > 1 or admission control refused a request.
nb::tuple replay(const TraceHandle& handle, nb::dict plan_kwargs, nb::dict sched_kwargs,
                 nb::dict replay_kwargs, std::optional<nb::dict> cluster_kwargs) {
  cli::PlanOptions plan_opts = plan_options_from(plan_kwargs);
  const cli::SchedulerOptions sched = scheduler_options_from(sched_kwargs);
  const ReplayOnlyOptions o = replay_options_from(replay_kwargs);
  std::optional<ClusterConfig> cluster;
  if (cluster_kwargs) {
    const cli::ClusterOptions co = cluster_options_from(*cluster_kwargs);
    if (o.backend != "null" && co.replicas > 1) {
      throw std::invalid_argument(fmt::format(
          "backend '{}': a cluster replay (replicas={}) runs the null backend only (a host/cuda "
          "KV pool per replica would not fit one machine); drop backend or use replicas=1",
          o.backend, co.replicas));
    }
    cluster = cli::to_cluster_config(co);
  }
  const Trace& trace = *handle.trace;
  cli::require_requests(trace, handle.options);

  const bool named = model_given(plan_opts);
  if (!named) plan_opts.model = kDefaultModel;
  const bool shape_flags = plan_opts.num_layers || plan_opts.num_kv_heads || plan_opts.head_dim;
  PlanInputs in = cli::resolve_plan_inputs(plan_opts);
  resolve_max_model_len(in, trace, /*model_is_default=*/!named);

  ReplaySettings settings;
  cli::apply(sched, settings);
  settings.max_num_batched_tokens = o.max_num_batched_tokens;
  settings.max_num_seqs = o.max_num_seqs;
  if (o.preemption_mode == "swap") {
    settings.scheduler.preemption_mode = PreemptionMode::SWAP;
  } else if (o.preemption_mode != "recompute") {
    throw std::invalid_argument(fmt::format(
        "preemption_mode: unknown value '{}' (expected recompute or swap)", o.preemption_mode));
  }
  settings.swap_space_gib = o.swap_space_gib;
  settings.swap_bandwidth_gbps = o.swap_bandwidth_gbps;
  settings.check_invariants = o.check_invariants;
  settings.record_timeline = o.timeline;
  settings.record_requests = o.requests;
  const Plan plan = plan_replay_pool(in, settings);
  ReplayConfig rc = make_replay_config(plan, in.gpu, settings);
  rc.progress_every_steps = kStopCheckSteps;
  const SchedulerConfig& sc = rc.scheduler;

  const std::unique_ptr<StepTimeModel> step_time = make_step_time_model(sched.step_time, in, plan);
  const KvBackendConfig bc =
      kv_backend_config_for(plan, parse_kv_backend_kind(o.backend), sc.block_size,
                            sc.num_host_swap_slots, o.backend_max_layers);

  ReportContext ctx;
  ctx.trace_path = trace.path;
  ctx.trace_format = std::string(to_string(trace.format));
  ctx.trace_rows = trace.rows_read;
  ctx.dropped_rows = describe_dropped(trace);
  ctx.dropped_by_reason = trace.dropped;
  ctx.model = plan.model_name + (named         ? ""
                                 : shape_flags ? " (default, shape overridden)"
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

  std::atomic<bool> stop{false};
  const ProgressCallback progress = [&stop](int64_t, int64_t, int64_t) {
    if (stop.load(std::memory_order_relaxed)) throw Cancelled();
  };
  const auto verify = [](const ReplaySummary& s) {
    if (s.backend_verified && !s.verification.ok) {
      throw std::runtime_error("KV backend verification failed: " + s.verification.detail);
    }
  };
  nb::object timeline = nb::none(), requests = nb::none();
  std::string json, report;
  if (cluster) {
    // The cluster engine builds its replicas' backends itself (one, with replicas=1).
    const ReplicaBackendFactory backends = [&bc](int32_t) { return make_kv_backend(bc); };
    ClusterResult result = run_interruptible(
        [&] { return run_cluster_replay(rc, *cluster, trace, backends, *step_time, progress); },
        stop);
    verify(result.cluster.summary);
    json = cluster_summary_json(result, *cluster, ctx).dump();
    report = format_cluster_report(result, *cluster, ctx);
    const bool replica_column = cluster->replicas > 1;
    if (o.timeline) {
      nb::dict cols = timeline_columns(std::move(result.cluster.timeline));
      if (replica_column) cols["replica"] = scalar_column(std::move(result.timeline_replica));
      timeline = cols;
    }
    if (o.requests) {
      nb::dict cols = request_columns(std::move(result.cluster.requests));
      if (replica_column || result.admission_rejected > 0) {
        cols["replica"] = scalar_column(std::move(result.request_replica));
        cols["admission_reason"] = scalar_column(std::move(result.admission_reason));
      }
      requests = cols;
    }
  } else {
    const std::unique_ptr<KvBackend> backend = make_kv_backend(bc);
    ReplayResult result = run_interruptible(
        [&] { return run_replay(rc, trace, *backend, *step_time, progress); }, stop);
    verify(result.summary);
    json = replay_summary_json(result.summary, ctx).dump();
    report = format_replay_report(result.summary, ctx);
    if (o.timeline) timeline = timeline_columns(std::move(result.timeline));
    if (o.requests) requests = request_columns(std::move(result.requests));
  }
  return nb::make_tuple(json, report, timeline, requests);
}

std::vector<int32_t> narrow(const char* what, const std::vector<int64_t>& v) {
  std::vector<int32_t> out;
  for (int64_t x : v) {
    if (x > INT32_MAX || x < INT32_MIN) {
      throw std::invalid_argument(fmt::format("{}: {} is too large", what, x));
    }
    out.push_back(static_cast<int32_t>(x));
  }
  return out;
}

// `kvsim sweep` (cli/sweep_command.cpp) minus printing and sharding: the CSV text.
std::string sweep(const TraceHandle& handle, nb::dict plan_kwargs, nb::dict sched_kwargs,
                  const std::vector<int64_t>& block_sizes,
                  const std::vector<double>& gpu_memory_utilizations,
                  const std::vector<int64_t>& num_gpu_blocks,
                  const std::vector<std::string>& kv_cache_dtypes,
                  const std::vector<int64_t>& max_num_seqs,
                  const std::vector<int64_t>& max_num_batched_tokens, int32_t jobs) {
  SweepAxes axes;
  axes.block_sizes = narrow("block_sizes", block_sizes);
  axes.gpu_memory_utilizations = gpu_memory_utilizations;
  axes.num_gpu_blocks = num_gpu_blocks;
  axes.kv_cache_dtypes = kv_cache_dtypes;
  axes.max_num_seqs = narrow("max_num_seqs", max_num_seqs);
  axes.max_num_batched_tokens = narrow("max_num_batched_tokens", max_num_batched_tokens);
  const std::vector<SweepPoint> points = expand_sweep(axes);

  const cli::SchedulerOptions sched = scheduler_options_from(sched_kwargs);
  SweepBase base;
  base.plan = cli::resolve_plan_inputs(plan_options_from(plan_kwargs));
  cli::apply(sched, base.settings);
  base.step_time = sched.step_time;
  const Trace& trace = *handle.trace;
  cli::require_requests(trace, handle.options);
  const std::vector<SequenceLengths> lengths = trace_lengths(trace);

  std::atomic<bool> stop{false};
  const std::vector<SweepRow> rows = run_interruptible(
      [&] {
        const auto runner = [&](const SweepPoint& p) {
          if (stop.load()) throw Cancelled();
          return replay_sweep_point(base, trace, p);
        };
        return run_sweep(points, runner, lengths, jobs);
      },
      stop);
  std::ostringstream csv;
  write_sweep_csv(csv, rows, static_cast<int64_t>(points.size()));
  return csv.str();
}

}  // namespace

void register_runs(nb::module_& m) {
  m.def("plan", &plan_json, nb::arg("plan_options"), nb::arg("concurrency").none(),
        nb::arg("max_num_batched_tokens").none(), nb::arg("max_num_seqs").none(),
        nb::arg("async_scheduling"), "`kvsim plan --json`: the plan as JSON text.");
  m.def("replay", &replay, nb::arg("trace"), nb::arg("plan_options"), nb::arg("scheduler_options"),
        nb::arg("replay_options"), nb::arg("cluster_options").none() = nb::none(),
        "`kvsim replay` (with cluster_options: its cluster mode, `--replicas N --router ...`): "
        "(JSON summary text, human report, timeline columns or None, request columns or None). "
        "Runs without the GIL; Ctrl-C raises KeyboardInterrupt.");
  m.def("sweep", &sweep, nb::arg("trace"), nb::arg("plan_options"), nb::arg("scheduler_options"),
        nb::arg("block_sizes"), nb::arg("gpu_memory_utilizations"), nb::arg("num_gpu_blocks"),
        nb::arg("kv_cache_dtypes"), nb::arg("max_num_seqs"), nb::arg("max_num_batched_tokens"),
        nb::arg("jobs"),
        "`kvsim sweep --csv -`: the CSV text. Runs without the GIL; Ctrl-C raises "
        "KeyboardInterrupt before the next grid point starts.");
  m.attr("ADMISSION_STOP_NAMES") = admission_stop_names();
  m.attr("REJECT_REASON_NAMES") = code_names<RejectReason>(kNumRejectReasons);
  m.attr("ADMISSION_REASON_NAMES") = code_names<AdmissionRejectReason>(kNumAdmissionRejectReasons);
  m.attr("ROUTER_POLICIES") = code_names<RouterPolicy>(kNumRouterPolicies);
  m.attr("MODEL_PRESETS") = model_preset_names();
  m.attr("GPU_PRESETS") = gpu_preset_names();
}

}  // namespace kvsim::python
