// `kvsim calibrate`: fits a physics step-time model's coefficients (physics_step_time.h) to
// measured vLLM latencies by replaying the measured requests through the exact scheduler.
//
// Method: each evaluation replays every run with the candidate coefficients and computes, per
// measured group and statistic, r = ln(predicted / measured); the fit minimises sum r^2 over the
// training groups with NLopt's BOBYQA (bounded, derivative-free) in coefficient space, each
// coefficient bounded to [0, max(10 x start, floor)]. Before fitting, identifiability is checked
// on finite-difference sensitivities of r to each fitted coefficient: one with no effect, or
// whose effect is (nearly) a combination of the others' (e.g. a per-step constant and the
// weight-read term on a single model and TP), is refused with the reason.
// Errors are median |predicted / measured - 1| over (group, statistic) pairs: the fit error on
// all groups after fitting all, the cross-validated error on each held-out fold (runs when there
// are several, else groups) after fitting the rest.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kvsim/sim/calibrate/measurements.h"
#include "kvsim/sim/engine/physics_step_time.h"
#include "kvsim/sim/engine/replay.h"

namespace kvsim {

// One measured run ready to replay: the engine configuration and the model the coefficients
// apply to (resolved by the front end from the run's settings and the command line).
struct CalibrationTarget {
  const MeasuredRun* run = nullptr;
  ReplayConfig config;
  PhysicsShape shape;
  RooflineGpu gpu;
  int32_t tensor_parallel_size = 1;
};

// Coefficient names, in PhysicsCoefficients order: beta1a beta2a beta3 beta4 beta5 beta6 beta7
// beta8 beta1b beta2b, then alpha0 alpha1 alpha2.
inline constexpr int kNumPhysicsCoefficients = 13;
const std::vector<std::string>& physics_coefficient_names();
// What each coefficient scales, for messages ("beta7 (per-step constant, us)").
std::string describe_coefficient(const std::string& name);

struct CalibrateOptions {
  std::vector<std::string> fit;  // coefficient names to fit; the others stay at `start`
  PhysicsCoefficients start;     // starting point and fixed values
  int32_t max_evaluations = 400;
  bool cross_validate = true;
  // Called after each evaluation (evaluations so far, objective); may throw to stop.
  std::function<void(int32_t, double)> progress;
};

struct StatError {
  std::string run;
  std::string group;
  LatencyStat stat{};
  double measured_s = 0;
  double predicted_s = 0;
};

struct CalibrationResult {
  PhysicsCoefficients fitted;
  std::vector<StatError> fit_errors;  // every (group, statistic) after the final fit
  std::vector<StatError> cv_errors;   // each held-out fold's, after fitting the other folds
  double fit_error = 0;               // median |pred/meas - 1| of fit_errors
  double cv_error = -1;               // same of cv_errors; -1 when there is a single fold
  std::string cv_scheme;              // "leave one run out" | "leave one group out" | "none"
  int32_t evaluations = 0;
};

// Throws std::invalid_argument for an unknown coefficient name, a coefficient the data cannot
// identify (with the reason), or runs without a measured statistic.
CalibrationResult calibrate(const std::vector<CalibrationTarget>& targets,
                            const CalibrateOptions& options);

// Median |predicted / measured - 1| of errors (0 for none).
double median_abs_error(const std::vector<StatError>& errors);

}  // namespace kvsim
