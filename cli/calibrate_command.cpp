// `kvsim calibrate MEASURED...`: fit a physics step-time model to measured vLLM latencies and
// write a calibration JSON that `--step-time physics:FILE` reads (docs/calibrate.md).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "interrupt.h"
#include "kvsim/core/planner.h"
#include "kvsim/sim/calibrate/calibrate.h"
#include "kvsim/sim/calibrate/measurements.h"
#include "kvsim/sim/engine/physics_step_time.h"
#include "kvsim/sim/engine/replay_setup.h"
#include "kvsim/sim/engine/step_time_model.h"
#include "output_files.h"
#include "plan_options.h"
#include "scheduler_options.h"
#include "validators.h"

namespace kvsim::cli {
namespace {

// The coefficients fitted when --fit is not given: the terms that move TTFT and per-token time
// on any single model and card (prefill compute, decode KV reads, the fixed per-step cost through
// the weight-read term, per-sequence cost, queueing before the engine). On one dense model the
// weight reads and the per-step constant are the same term (calibrate refuses both); beta3 can
// go below its start where beta7 cannot go below 0, and did better on the 16 public H100 runs'
// leave-one-run-out folds (docs/latency-validation.md). TP and MoE terms keep the start values.
constexpr const char* kDefaultFit = "beta1a,beta2b,beta3,beta6,alpha0";
constexpr const char* kDefaultStart = "calibration/physics/h100-vllm-blis.json";

struct CalibrateOptions {
  std::vector<std::string> measured;
  PlanOptions plan;
  std::optional<int32_t> max_num_batched_tokens;
  std::optional<int32_t> max_num_seqs;
  SchedulerOptions sched;
  std::string fit = kDefaultFit;
  std::string start;
  std::string output;
  std::string json_path;
  int32_t max_evaluations = 300;
  bool no_cross_validation = false;
  std::string measured_vllm_version;
};

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    const size_t comma = std::min(s.find(',', pos), s.size());
    out.push_back(s.substr(pos, comma - pos));
    if (out.back().empty()) throw std::invalid_argument(fmt::format("--fit '{}': empty item", s));
    pos = comma + 1;
  }
  return out;
}

// The default starting point: the shipped file, under the working directory (the repository
// root, as the quick start runs) or the source tree this binary was built from.
std::string default_start() {
  for (const std::string& p :
       {std::string(kDefaultStart), std::string(KVSIM_SOURCE_DIR) + "/" + kDefaultStart}) {
    if (std::ifstream(p).good()) return p;
  }
  throw std::invalid_argument(fmt::format(
      "--start: {} not found; give the starting coefficients with --start FILE", kDefaultStart));
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

void run(CalibrateOptions& o) {
  OutputFiles outputs;
  outputs.add("-o", o.output);
  outputs.add("--json", o.json_path);
  for (const std::string& m : o.measured) outputs.add_input("a measurement file", m);
  outputs.add_input("--config", o.plan.config_path);
  outputs.add_input("--gpu-spec", o.plan.gpu_spec_path);
  outputs.refuse_inputs();
  if (o.start.empty()) o.start = default_start();
  outputs.add_input("--start", o.start);
  outputs.refuse_inputs();

  ::kvsim::CalibrateOptions co;
  co.fit = split_list(o.fit);
  co.start = read_physics_coefficients(o.start);
  co.max_evaluations = o.max_evaluations;
  co.cross_validate = !o.no_cross_validation;

  std::vector<MeasuredRun> runs;
  runs.reserve(o.measured.size());
  for (const std::string& path : o.measured) {
    runs.push_back(read_measurements(path));
    // What a run file names is an input too: -o must not replace its trace or config.
    outputs.add_input("a run file's trace", runs.back().trace_path);
    outputs.add_input("a run file's config", runs.back().settings.config);
  }
  outputs.refuse_inputs();
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
  outputs.open_all();
  co.progress = [](int32_t evals, double objective) {
    throw_if_interrupted();
    if (evals % 25 == 0) {
      fmt::print(stderr, "kvsim calibrate: {} evaluations, objective {:.5f}\n", evals, objective);
    }
  };
  const CalibrationResult r = calibrate(targets, co);

  nlohmann::ordered_json j;
  j["format"] = "kvsim-physics/1";
  j["source"] = fmt::format("kvsim calibrate on {} measurement file(s), starting from {}",
                            runs.size(), o.start);
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

  fmt::print(stderr, "kvsim calibrate: {} evaluations; fit error {:.1f} %, cross-validated {}\n",
             r.evaluations, 100 * r.fit_error,
             r.cv_error < 0 ? std::string("n/a") : fmt::format("{:.1f} %", 100 * r.cv_error));
  for (size_t i = 0; i < co.fit.size(); ++i) {
    const auto& names = physics_coefficient_names();
    const auto k =
        static_cast<size_t>(std::find(names.begin(), names.end(), co.fit[i]) - names.begin());
    const double v = k < 10 ? r.fitted.beta[k] : r.fitted.alpha[k - 10];
    fmt::print(stderr, "  {:<40} {:g}\n", describe_coefficient(co.fit[i]), v);
  }
  outputs.stream("-o") << j.dump(2) << "\n";
  outputs.finish("-o");
  if (outputs.requested("--json")) {
    nlohmann::ordered_json report;
    report["calibration"] = j;
    report["fit_errors"] = errors_json(r.fit_errors);
    report["cv_errors"] = errors_json(r.cv_errors);
    outputs.stream("--json") << report.dump(2) << "\n";
    outputs.finish("--json");
  }
  outputs.commit_all();
}

}  // namespace

void register_calibrate_command(CLI::App& app) {
  auto o = std::make_shared<CalibrateOptions>();
  CLI::App* cmd = app.add_subcommand(
      "calibrate",
      "Fit a physics step-time model to measured vLLM latencies; write --step-time physics:FILE");
  cmd->add_option("measured", o->measured,
                  "Measurements: vllm bench serve --save-detailed JSON, a per-request CSV/JSONL, "
                  "or a kvsim run file (docs/calibrate.md)")
      ->required();
  add_model_card_options(cmd, o->plan);
  cmd->add_option("--max-num-batched-tokens", o->max_num_batched_tokens,
                  "Token budget per step of the measured server (default: vLLM's for the card)")
      ->check(positive())
      ->group("Scheduler");
  cmd->add_option("--max-num-seqs", o->max_num_seqs,
                  "Maximum running requests of the measured server (default: vLLM's for the card)")
      ->check(positive())
      ->group("Scheduler");
  add_scheduler_options(cmd, o->sched);
  cmd->add_option("-o,--output", o->output, "Calibration JSON to write (--step-time physics:FILE)")
      ->required();
  cmd->add_option("--json", o->json_path, "Per-statistic fit and cross-validation errors (JSON)");
  cmd->add_option("--fit", o->fit,
                  "Coefficients to fit (beta1a beta2a beta3 beta4 beta5 beta6 beta7 beta8 beta1b "
                  "beta2b alpha0 alpha1 alpha2)")
      ->capture_default_str();
  cmd->add_option("--start", o->start,
                  fmt::format("Starting (and fixed) coefficients (default {})", kDefaultStart));
  cmd->add_option("--max-evaluations", o->max_evaluations, "Replays of every run per fit, at most")
      ->check(positive())
      ->capture_default_str();
  cmd->add_flag("--no-cross-validation", o->no_cross_validation,
                "Skip the held-out folds (one fit only)");
  cmd->add_option("--measured-vllm-version", o->measured_vllm_version,
                  "vLLM version of the measured server, recorded in the file");
  cmd->callback([o] { run(*o); });
}

}  // namespace kvsim::cli
