// `kvsim calibrate` as one function both front ends call (the CLI command and kvsim.calibrate
// in Python): measurements in, the calibration JSON and the per-statistic errors out. Files are
// only read here; writing them is the front end's (docs/calibrate.md).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvsim/run/plan_options.h"
#include "kvsim/run/scheduler_options.h"
#include "kvsim/sim/calibrate/calibrate.h"
#include "kvsim/sim/calibrate/measurements.h"

namespace kvsim::run {

// The coefficients fitted when none are named: the terms that move TTFT and per-token time on
// any single model and card (prefill compute, decode KV reads, the fixed per-step cost through
// the weight-read term, per-sequence cost, queueing before the engine). On one dense model the
// weight reads and the per-step constant are the same term (calibrate refuses both); beta3 can
// go below its start where beta7 cannot go below 0, and did better on the 16 public H100 runs'
// leave-one-run-out folds (docs/latency-validation.md). TP and MoE terms keep the start values.
inline constexpr const char* kDefaultCalibrateFit = "beta1a,beta2b,beta3,beta6,alpha0";
inline constexpr const char* kDefaultCalibrateStart = "calibration/physics/h100-vllm-blis.json";

struct CalibrateJob {
  std::vector<std::string> measured;  // measurement files (measurements.h)
  PlanOptions plan;                   // model and card, unless a run file names them
  std::optional<int32_t> max_num_batched_tokens;
  std::optional<int32_t> max_num_seqs;
  SchedulerOptions sched;
  std::string fit = kDefaultCalibrateFit;  // comma-separated coefficient names
  std::string start;                       // empty: default_calibration_start()
  int32_t max_evaluations = 300;
  bool cross_validate = true;
  std::string measured_vllm_version;
  // Called once the files are read, before the (long) fit, with every file they name (run
  // files' traces and configs): where the CLI refuses an output that is one of them.
  std::function<void(const std::vector<std::string>& inputs)> after_read;
  std::function<void(int32_t evaluations, double objective)> progress;
};

struct CalibrateOutcome {
  nlohmann::ordered_json calibration;  // what --step-time physics:FILE reads
  nlohmann::ordered_json fit_errors;   // [{run, group, stat, measured_s, predicted_s, error_pct}]
  nlohmann::ordered_json cv_errors;
  CalibrationResult result;
  std::vector<std::string> fitted;  // the names, in the order given
  std::string start;                // the start file used
};

// The shipped start file under the working directory or the source tree kvsim was built from.
// Throws std::invalid_argument when neither has it.
std::string default_calibration_start();

// Throws std::invalid_argument (one line, naming the file, field or coefficient) on bad input.
CalibrateOutcome run_calibration(const CalibrateJob& job);

}  // namespace kvsim::run
