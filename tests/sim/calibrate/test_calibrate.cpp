// The coefficient fit of `kvsim calibrate`: measurements made by the model itself with known
// coefficients are fitted back from another starting point; coefficients the data cannot
// identify are refused with the reason; cross-validation holds out what it says.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kvsim/core/kv_backend.h"
#include "kvsim/core/model_presets.h"
#include "kvsim/sim/calibrate/calibrate.h"
#include "kvsim/sim/engine/physics_step_time.h"
#include "kvsim/sim/engine/replay.h"

namespace kvsim {
namespace {

PhysicsCoefficients shipped() {
  return read_physics_coefficients(std::string(KVSIM_SOURCE_DIR) +
                                   "/calibration/physics/h100-vllm-blis.json");
}

Trace poisson_trace(uint64_t seed, int n, double rate) {
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> gap(rate);
  std::uniform_int_distribution<int32_t> in(100, 1500), out(10, 200);
  Trace t;
  double at = 0;
  for (int i = 0; i < n; ++i) {
    at += gap(rng);
    TraceRequest r;
    r.arrival_ns = std::llround(at * 1e9);
    r.input_tokens = in(rng);
    r.output_tokens = out(rng);
    t.requests.push_back(r);
  }
  return t;
}

struct Fixture {
  std::vector<MeasuredRun> runs;
  std::vector<CalibrationTarget> targets;
};

// Runs measured "on the model itself": replayed with `truth`, statistics per half as the readers
// make them from per-request data.
Fixture measured_by_model(const PhysicsCoefficients& truth, int num_runs) {
  Fixture f;
  const ModelSpec& llama = find_model_preset("llama-3.1-8b");
  const PhysicsShape shape = physics_shape(llama, 2.0, 2.0);
  const RooflineGpu gpu{"h100-80g", 989.4e12, 3.35e12};
  ReplayConfig config;
  config.scheduler.block_size = 16;
  config.scheduler.num_gpu_blocks = 20000;
  config.scheduler.max_model_len = 4096;
  config.scheduler.max_num_batched_tokens = 2048;
  config.scheduler.max_num_seqs = 128;
  f.runs.resize(static_cast<size_t>(num_runs));
  for (int k = 0; k < num_runs; ++k) {
    MeasuredRun& run = f.runs[static_cast<size_t>(k)];
    run.path = "run" + std::to_string(k);
    run.trace = poisson_trace(static_cast<uint64_t>(k) + 1, 600, 12.0 + 8.0 * k);
    const PhysicsStepTime model(shape, gpu, 1, truth);
    NullKvBackend null;
    const ReplayResult r = run_replay(config, run.trace, null, model);
    const int64_t split = run.trace.requests[300].arrival_ns;
    std::vector<RequestLatency> a, b;
    for (const RequestRecord& rec : r.requests) {
      const RequestLatency l{static_cast<double>(rec.first_token_ns - rec.arrival_ns) * 1e-9,
                             static_cast<double>(rec.finish_ns - rec.arrival_ns) * 1e-9,
                             rec.output_tokens};
      (rec.arrival_ns < split ? a : b).push_back(l);
    }
    run.groups.push_back({"first half", 0, split, latency_stats(a)});
    run.groups.push_back(
        {"second half", split, std::numeric_limits<int64_t>::max(), latency_stats(b)});
  }
  for (const MeasuredRun& run : f.runs) {
    CalibrationTarget t;
    t.run = &run;
    t.config = config;
    t.shape = shape;
    t.gpu = gpu;
    f.targets.push_back(t);
  }
  return f;
}

TEST(Calibrate, RecoversCoefficientsTheDataWasMadeWith) {
  const PhysicsCoefficients start = shipped();
  PhysicsCoefficients truth = start;
  truth.beta[9] = 1.2;       // decode KV reads (start 1.947)
  truth.alpha[0] = 30000.0;  // queueing before the engine, us (start 15563)
  const Fixture f = measured_by_model(truth, 2);
  CalibrateOptions o;
  o.fit = {"beta2b", "alpha0"};
  o.start = start;
  const CalibrationResult r = calibrate(f.targets, o);
  EXPECT_NEAR(r.fitted.beta[9], 1.2, 0.06);
  EXPECT_NEAR(r.fitted.alpha[0], 30000.0, 1500.0);
  // Unfitted coefficients keep the start's values.
  EXPECT_EQ(r.fitted.beta[0], start.beta[0]);
  EXPECT_EQ(r.fitted.alpha[2], start.alpha[2]);
  EXPECT_LT(r.fit_error, 0.01);
  EXPECT_EQ(r.cv_scheme, "leave one run out");
  EXPECT_GE(r.cv_error, 0.0);
  EXPECT_LT(r.cv_error, 0.02);
  // Every measured statistic of every group of both runs has its held-out prediction.
  EXPECT_EQ(r.cv_errors.size(), r.fit_errors.size());
  // The start was off: its error is several times the fit's.
  CalibrateOptions none = o;
  none.fit = {};
  none.cross_validate = false;
  EXPECT_GT(calibrate(f.targets, none).fit_error, 5 * r.fit_error);
}

// Terms that the data barely tell apart (decode KV reads and the per-step constant at these
// loads) may land away from the truth, but the fitted model still predicts the measurements.
TEST(Calibrate, SloppyTermsStillPredict) {
  const PhysicsCoefficients start = shipped();
  PhysicsCoefficients truth = start;
  truth.beta[9] = 1.5;
  truth.beta[6] = 400.0;
  truth.alpha[0] = 30000.0;
  const Fixture f = measured_by_model(truth, 2);
  CalibrateOptions o;
  o.fit = {"beta2b", "beta7", "alpha0"};
  o.start = start;
  o.cross_validate = false;
  const CalibrationResult r = calibrate(f.targets, o);
  EXPECT_LT(r.fit_error, 0.01);
  EXPECT_NEAR(r.fitted.alpha[0], 30000.0, 3000.0);
}

TEST(Calibrate, RefusesWhatTheDataCannotIdentify) {
  const PhysicsCoefficients start = shipped();
  const Fixture f = measured_by_model(start, 1);
  CalibrateOptions o;
  o.start = start;
  o.cross_validate = false;
  o.max_evaluations = 5;
  auto refused = [&](std::vector<std::string> fit, const std::string& expect) {
    o.fit = std::move(fit);
    try {
      calibrate(f.targets, o);
      ADD_FAILURE() << "accepted --fit " << o.fit.front();
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(expect), std::string::npos) << e.what();
    }
  };
  // One model at one TP: the weight reads take the same time every step, like the constant.
  refused({"beta7", "beta3"}, "beta3 (weight reads) is exactly a combination");
  refused({"beta4"}, "beta4 (TP all-reduce) is 0 in every step");
  refused({"beta8"}, "beta8 (per-MoE-layer overhead, us) is 0 in every step");
  refused({"beta9"}, "unknown coefficient 'beta9'");
  refused({"beta7", "beta7"}, "'beta7' given twice");
}

TEST(Calibrate, SingleRunCrossValidatesOverItsGroups) {
  const PhysicsCoefficients start = shipped();
  const Fixture f = measured_by_model(start, 1);
  CalibrateOptions o;
  o.start = start;
  o.fit = {"beta7"};
  o.max_evaluations = 40;
  const CalibrationResult r = calibrate(f.targets, o);
  EXPECT_EQ(r.cv_scheme, "leave one group out");
  EXPECT_LT(r.fit_error, 0.01);  // the data were made with the start itself
  EXPECT_NEAR(r.fitted.beta[6], start.beta[6], 15.0);
}

TEST(Calibrate, MedianAbsoluteError) {
  std::vector<StatError> e = {{"r", "g", LatencyStat::kTtftMean, 1.0, 1.1},
                              {"r", "g", LatencyStat::kTpotMean, 2.0, 1.0},
                              {"r", "g", LatencyStat::kE2eMean, 4.0, 4.2}};
  EXPECT_NEAR(median_abs_error(e), 0.1, 1e-12);
  e.push_back({"r", "g", LatencyStat::kE2eP50, 1.0, 0.0});  // unpredicted counts as worst
  EXPECT_NEAR(median_abs_error(e), 0.3, 1e-12);
}

}  // namespace
}  // namespace kvsim
