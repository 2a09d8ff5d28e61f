// `kvsim calibrate MEASURED...`: fit a physics step-time model to measured vLLM latencies and
// write a calibration JSON that `--step-time physics:FILE` reads (docs/calibrate.md). The work is
// run::run_calibration (kvsim/run/calibrate_job.h, shared with Python); here: flags, files,
// printing.
#include <algorithm>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "commands.h"
#include "interrupt.h"
#include "kvsim/run/calibrate_job.h"
#include "output_files.h"
#include "plan_flags.h"
#include "scheduler_flags.h"
#include "validators.h"

namespace kvsim::cli {
namespace {

struct CalibrateOptions {
  run::CalibrateJob job;
  std::string output;
  std::string json_path;
  bool no_cross_validation = false;
};

void run(CalibrateOptions& o) {
  run::CalibrateJob& job = o.job;
  OutputFiles outputs;
  outputs.add("-o", o.output);
  outputs.add("--json", o.json_path);
  for (const std::string& m : job.measured) outputs.add_input("a measurement file", m);
  outputs.add_input("--config", job.plan.config_path);
  outputs.add_input("--gpu-spec", job.plan.gpu_spec_path);
  outputs.refuse_inputs();
  if (job.start.empty()) job.start = run::default_calibration_start();
  outputs.add_input("--start", job.start);
  outputs.refuse_inputs();
  job.cross_validate = !o.no_cross_validation;
  job.after_read = [&outputs](const std::vector<std::string>& named) {
    // What a run file names is an input too: -o must not replace its trace or config.
    for (const std::string& p : named) outputs.add_input("a file a run file names", p);
    outputs.open_all();  // refuses those, and fails on a bad path before the long fit
  };
  job.progress = [](int32_t evals, double objective) {
    throw_if_interrupted();
    if (evals % 25 == 0) {
      fmt::print(stderr, "kvsim calibrate: {} evaluations, objective {:.5f}\n", evals, objective);
    }
  };
  const run::CalibrateOutcome out = run::run_calibration(job);
  const CalibrationResult& r = out.result;
  fmt::print(stderr, "kvsim calibrate: {} evaluations; fit error {:.1f} %, cross-validated {}\n",
             r.evaluations, 100 * r.fit_error,
             r.cv_error < 0 ? std::string("n/a") : fmt::format("{:.1f} %", 100 * r.cv_error));
  const auto& names = physics_coefficient_names();
  for (const std::string& name : out.fitted) {
    const auto k = static_cast<size_t>(std::find(names.begin(), names.end(), name) - names.begin());
    const double v = k < 10 ? r.fitted.beta[k] : r.fitted.alpha[k - 10];
    fmt::print(stderr, "  {:<40} {:g}\n", describe_coefficient(name), v);
  }
  outputs.stream("-o") << out.calibration.dump(2) << "\n";
  outputs.finish("-o");
  if (outputs.requested("--json")) {
    nlohmann::ordered_json report;
    report["calibration"] = out.calibration;
    report["fit_errors"] = out.fit_errors;
    report["cv_errors"] = out.cv_errors;
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
  cmd->add_option("measured", o->job.measured,
                  "Measurements: vllm bench serve --save-detailed JSON, a per-request CSV/JSONL, "
                  "or a kvsim run file (docs/calibrate.md)")
      ->required();
  add_model_card_options(cmd, o->job.plan);
  cmd->add_option("--max-num-batched-tokens", o->job.max_num_batched_tokens,
                  "Token budget per step of the measured server (default: vLLM's for the card)")
      ->check(positive())
      ->group("Scheduler");
  cmd->add_option("--max-num-seqs", o->job.max_num_seqs,
                  "Maximum running requests of the measured server (default: vLLM's for the card)")
      ->check(positive())
      ->group("Scheduler");
  add_scheduler_options(cmd, o->job.sched);
  cmd->add_option("-o,--output", o->output, "Calibration JSON to write (--step-time physics:FILE)")
      ->required();
  cmd->add_option("--json", o->json_path, "Per-statistic fit and cross-validation errors (JSON)");
  cmd->add_option("--fit", o->job.fit,
                  "Coefficients to fit (beta1a beta2a beta3 beta4 beta5 beta6 beta7 beta8 beta1b "
                  "beta2b alpha0 alpha1 alpha2)")
      ->capture_default_str();
  cmd->add_option(
      "--start", o->job.start,
      fmt::format("Starting (and fixed) coefficients (default {})", run::kDefaultCalibrateStart));
  cmd->add_option("--max-evaluations", o->job.max_evaluations,
                  "Replays of every run per fit, at most")
      ->check(positive())
      ->capture_default_str();
  cmd->add_flag("--no-cross-validation", o->no_cross_validation,
                "Skip the held-out folds (one fit only)");
  cmd->add_option("--measured-vllm-version", o->job.measured_vllm_version,
                  "vLLM version of the measured server, recorded in the file");
  cmd->callback([o] { run(*o); });
}

}  // namespace kvsim::cli
