// plan and replay (one engine or a cluster): the run room's jobs (kvsim/run/), as the CLI calls
// them, with the results handed to Python as JSON text (parsed by the Python layer into attribute
// objects) and NumPy columns over the replay's own record vectors (timeline, requests).
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
#include "columns.h"
#include "interruptible.h"
#include "kvsim/core/kv_backend.h"
#include "kvsim/core/model_presets.h"
#include "kvsim/core/planner.h"
#include "kvsim/cuda/backend_factory.h"
#include "kvsim/run/plan_job.h"
#include "kvsim/run/replay_job.h"
#include "kvsim/run/trace_input.h"
#include "kvsim/sim/cluster/cluster_replay.h"
#include "kvsim/sim/engine/replay.h"
#include "kvsim/sim/engine/replay_setup.h"
#include "kvsim/sim/engine/step_time_model.h"
#include "kvsim/sim/report/cluster_report.h"
#include "kvsim/sim/report/report.h"
#include "options.h"
#include "trace_binding.h"

namespace nb = nanobind;

namespace kvsim::python {
namespace {

// Steps between two looks at the stop flag: a few milliseconds of replay.
constexpr int64_t kStopCheckSteps = 1024;

// `kvsim plan --json`; the plan-only scheduler knobs size a hybrid model's windowed groups.
std::string plan_json(nb::dict plan_kwargs, std::optional<int64_t> concurrency,
                      std::optional<int64_t> max_num_batched_tokens,
                      std::optional<int64_t> max_num_seqs, bool async_scheduling) {
  run::PlanJobOptions o;
  o.plan = plan_options_from(plan_kwargs);
  o.concurrency = concurrency;
  o.max_num_batched_tokens = max_num_batched_tokens;
  o.max_num_seqs = max_num_seqs;
  o.async_scheduling = async_scheduling;
  return run::plan_to_json(run::run_plan(o)).dump();
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

// `kvsim replay` (run::prepare_replay / run::run_replay_job, as the CLI): the JSON summary (the
// same object as --json), the human report, the timeline and the request records. With
// `cluster_kwargs` (the CLI's cluster mode: any cluster or SLO flag given) the replay runs on
// the cluster engine and the JSON/report are the cluster ones; the tables then carry the CLI's
// cluster columns exactly when its CSVs do (run::ReplayOutcome says when).
nb::tuple replay(const TraceHandle& handle, nb::dict plan_kwargs, nb::dict sched_kwargs,
                 nb::dict replay_kwargs, std::optional<nb::dict> cluster_kwargs, bool metrics,
                 bool vllm_log) {
  run::ReplayOptions o;
  o.plan = plan_options_from(plan_kwargs);
  o.sched = scheduler_options_from(sched_kwargs);
  take_replay_options(replay_kwargs, o);
  // The metrics text and vLLM log are sampled from the records; the tables asked for are kept.
  const bool keep_timeline = o.record_timeline, keep_requests = o.record_requests;
  if (metrics || vllm_log) o.record_timeline = o.record_requests = true;
  if (cluster_kwargs) o.cluster = cluster_options_from(*cluster_kwargs);
  const run::ReplayJob job = run::prepare_replay(o, *handle.trace, handle.options);

  std::atomic<bool> stop{false};
  const ProgressCallback progress = [&stop](int64_t, int64_t, int64_t) {
    if (stop.load(std::memory_order_relaxed)) throw Cancelled();
  };
  run::ReplayOutcome out =
      run_interruptible([&] { return run::run_replay_job(job, progress, kStopCheckSteps); }, stop);
  if (const std::string failure = out.verification_failure(); !failure.empty()) {
    throw std::runtime_error("KV backend verification failed: " + failure);
  }
  const std::string json = out.summary_json().dump();
  const std::string report = out.report();
  nb::object metrics_text = nb::none(), vllm_log_text = nb::none();
  if (metrics) {
    std::ostringstream os;
    out.write_metrics(os);
    metrics_text = nb::str(os.str().c_str());
  }
  if (vllm_log) {
    std::ostringstream os;
    out.write_vllm_log(os);
    vllm_log_text = nb::str(os.str().c_str());
  }
  ReplayResult& result = out.result();
  nb::object timeline = nb::none(), requests = nb::none();
  if (keep_timeline) {
    nb::dict cols = timeline_columns(std::move(result.timeline));
    if (out.timeline_has_replica()) {
      cols["replica"] = scalar_column(std::move(out.cluster->timeline_replica));
    }
    timeline = cols;
  }
  if (keep_requests) {
    nb::dict cols = request_columns(std::move(result.requests));
    if (out.requests_have_cluster_columns()) {
      cols["replica"] = scalar_column(std::move(out.cluster->request_replica));
      cols["admission_reason"] = scalar_column(std::move(out.cluster->admission_reason));
    }
    requests = cols;
  }
  nb::object all_rejected = nb::none();
  if (out.all_rejected()) all_rejected = nb::str(out.all_rejected_message().c_str());
  return nb::make_tuple(json, report, timeline, requests, all_rejected, metrics_text,
                        vllm_log_text);
}

}  // namespace

void register_runs(nb::module_& m) {
  m.def("plan", &plan_json, nb::arg("plan_options"), nb::arg("concurrency").none(),
        nb::arg("max_num_batched_tokens").none(), nb::arg("max_num_seqs").none(),
        nb::arg("async_scheduling"), "`kvsim plan --json`: the plan as JSON text.");
  m.def("replay", &replay, nb::arg("trace"), nb::arg("plan_options"), nb::arg("scheduler_options"),
        nb::arg("replay_options"), nb::arg("cluster_options").none() = nb::none(),
        nb::arg("metrics") = false, nb::arg("vllm_log") = false,
        "`kvsim replay` (with cluster_options: its cluster mode, `--replicas N --router ...`): "
        "(JSON summary text, human report, timeline columns or None, request columns or None, "
        "the all-rejected message or None, the --metrics OpenMetrics text or None, the "
        "--vllm-log lines or None). "
        "Runs without the GIL; Ctrl-C raises KeyboardInterrupt.");
  m.attr("ADMISSION_STOP_NAMES") = admission_stop_names();
  m.attr("REJECT_REASON_NAMES") = code_names<RejectReason>(kNumRejectReasons);
  m.attr("ADMISSION_REASON_NAMES") = code_names<AdmissionRejectReason>(kNumAdmissionRejectReasons);
  m.attr("ROUTER_POLICIES") = code_names<RouterPolicy>(kNumRouterPolicies);
  m.attr("PARAMETERS") = parameter_table(code_names<RouterPolicy>(kNumRouterPolicies));
  m.attr("MODEL_PRESETS") = model_preset_names();
  m.attr("GPU_PRESETS") = gpu_preset_names();
}

}  // namespace kvsim::python
