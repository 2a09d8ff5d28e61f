#include "kvsim/run/calibrate_job.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "kvsim/core/param.h"
#include "kvsim/core/planner.h"
#include "kvsim/sim/engine/physics_step_time.h"
#include "kvsim/sim/engine/replay_setup.h"
#include "kvsim/sim/engine/step_time_model.h"

namespace kvsim::run {
namespace {

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    const size_t comma = std::min(s.find(',', pos), s.size());
    out.push_back(s.substr(pos, comma - pos));
    if (out.back().empty())
      throw std::invalid_argument(fmt::format("{}: empty item", param("fit", "'" + s + "'")));
    pos = comma + 1;
  }
  return out;
}

// The default starting point: the shipped file, under the working directory (the repository
// root, as the quick start runs) or the source tree this binary was built from.
std::string default_start_impl() {
  for (const std::string& p : {std::string(kDefaultCalibrateStart),
                               std::string(KVSIM_SOURCE_DIR) + "/" + kDefaultCalibrateStart}) {
    if (std::ifstream(p).good()) return p;
  }
  throw std::invalid_argument(
      fmt::format("{}: {} not found; give the starting coefficients with {}", param("start"),
                  kDefaultCalibrateStart, param("start", "FILE")));
}

nlohmann::ordered_json errors_json(const std::vector<StatError>& errors) {
  nlohmann::ordered_json a = nlohmann::ordered_json::array();
  for (const StatError& e : errors) {
    a.push_back({{"run", e.run},
                 {"group", e.group},
                 {"stat", to_string(e.stat)},
                 {"measured_s", e.measured_s},
                 {"predicted_s", e.predicted_s},
                 {"error_pct",
                  e.predicted_s > 0 ? 100.0 * (e.predicted_s / e.measured_s - 1) : std::nan("")}});
  }
  return a;
}

}  // namespace

std::string default_calibration_start() {
  return default_start_impl();
}

CalibrateOutcome run_calibration(const CalibrateJob& o) {
  CalibrateOutcome out;
  out.start = o.start.empty() ? default_start_impl() : o.start;

  ::kvsim::CalibrateOptions co;
  co.fit = split_list(o.fit);
  co.start = read_physics_coefficients(out.start);
  co.max_evaluations = o.max_evaluations;
  co.cross_validate = o.cross_validate;
  co.progress = o.progress;

  std::vector<MeasuredRun> runs;
  runs.reserve(o.measured.size());
  std::vector<std::string> named;  // what run files name: inputs too
  for (const std::string& path : o.measured) {
    runs.push_back(read_measurements(path));
    for (const std::string* p : {&runs.back().trace_path, &runs.back().settings.config}) {
      if (!p->empty()) named.push_back(*p);
    }
  }
  if (o.after_read) o.after_read(named);
  std::vector<CalibrationTarget> targets;
  std::string model_name, gpu_name, kv_dtype;
  std::vector<int32_t> tps;
  for (const MeasuredRun& run : runs) {
    // A run file's settings take the place of the command line's.
    PlanOptions p = o.plan;
    const RunSettings& s = run.settings;
    if (!s.model.empty() || !s.config.empty()) {
      p.model = s.model;
      p.config_path = s.config;
    }
    if (!s.gpu.empty()) {
      p.gpu = s.gpu;
      p.gpu_spec_path.clear();  // the run's card replaces a --gpu-spec card too
    }
    if (s.tensor_parallel_size) p.tensor_parallel_size = *s.tensor_parallel_size;
    if (s.max_model_len) p.max_model_len = *s.max_model_len;
    if (s.gpu_memory_utilization) p.gpu_memory_utilization = *s.gpu_memory_utilization;
    if (p.model.empty() && p.config_path.empty()) {
      throw std::invalid_argument(fmt::format(
          "{}: no model: give --model or --config (or \"settings\" in a run file)", run.path));
    }
    PlanInputs in = resolve_plan_inputs(p);
    resolve_max_model_len(in, run.trace, false);
    ReplaySettings settings;
    apply(o.sched, settings);
    settings.max_num_batched_tokens =
        s.max_num_batched_tokens ? s.max_num_batched_tokens : o.max_num_batched_tokens;
    settings.max_num_seqs = s.max_num_seqs ? s.max_num_seqs : o.max_num_seqs;
    const Plan plan = plan_replay_pool(in, settings);
    CalibrationTarget t;
    t.run = &run;
    t.config = make_replay_config(plan, in.gpu, settings);
    const double params = in.model.num_parameters;
    if (!(params > 0)) {
      throw std::invalid_argument(
          fmt::format("{}: model '{}' has no parameter count", run.path, in.model.name));
    }
    const auto tp = static_cast<int32_t>(plan.tensor_parallel_size);
    const std::string kv = plan.kv_cache_dtype == "auto" ? in.model.dtype : plan.kv_cache_dtype;
    t.shape = physics_shape(in.model, static_cast<double>(plan.weights_bytes) * tp / params,
                            dtype_bytes(kv));
    t.gpu = roofline_gpu(in.gpu);
    t.tensor_parallel_size = tp;
    targets.push_back(std::move(t));
    auto join = [](std::string& all, const std::string& v) {
      if (all.find(v) == std::string::npos) all += (all.empty() ? "" : ",") + v;
    };
    // A model read from a config.json is named by its path: keep it readable.
    join(model_name, std::filesystem::path(plan.model_name).lexically_normal().string());
    join(gpu_name, plan.gpu_name);
    join(kv_dtype, kv);
    tps.push_back(tp);
  }
  const CalibrationResult r = calibrate(targets, co);

  nlohmann::ordered_json j;
  j["format"] = "kvsim-physics/1";
  j["source"] = fmt::format("kvsim calibrate on {} measurement file(s), starting from {}",
                            runs.size(), out.start);
  j["gpu"] = gpu_name;
  j["beta"] = r.fitted.beta;
  j["alpha"] = r.fitted.alpha;
  j["validation"] = fmt::format(
      "fit: median |error| {:.1f} % over {} measured statistics; cross-validated ({}): {}",
      100 * r.fit_error, r.fit_errors.size(), r.cv_scheme,
      r.cv_error < 0 ? std::string("none (one fold)") : fmt::format("{:.1f} %", 100 * r.cv_error));
  nlohmann::ordered_json fit;
  fit["model"] = model_name;
  fit["tensor_parallel_size"] = tps;
  fit["kv_cache_dtype"] = kv_dtype;
  fit["measured_vllm_version"] = o.measured_vllm_version;
  fit["method"] =
      "BOBYQA (NLopt) on sum of squared log(predicted/measured) over every measured statistic";
  fit["fitted"] = co.fit;
  fit["evaluations"] = r.evaluations;
  fit["fit_error_pct"] = 100 * r.fit_error;
  fit["cv_scheme"] = r.cv_scheme;
  fit["cv_error_pct"] =
      r.cv_error < 0 ? nlohmann::ordered_json() : nlohmann::ordered_json(100 * r.cv_error);
  nlohmann::ordered_json data = nlohmann::ordered_json::array();
  for (const MeasuredRun& run : runs) {
    data.push_back({{"path", run.path},
                    {"kind", run.kind},
                    {"xxh3_64", fmt::format("{:016x}", run.data_hash)},
                    {"requests", run.trace.requests.size()},
                    {"skipped_requests", run.skipped_requests}});
  }
  fit["data"] = data;
  j["fit"] = fit;

  out.calibration = std::move(j);
  out.fit_errors = errors_json(r.fit_errors);
  out.cv_errors = errors_json(r.cv_errors);
  out.result = r;
  out.fitted = co.fit;
  return out;
}

}  // namespace kvsim::run
