#include "kvsim/sim/calibrate/calibrate.h"

#include <nlopt.hpp>

#include <algorithm>
#include <cmath>
#include <future>
#include <limits>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "kvsim/core/kv_backend.h"
#include "kvsim/core/param.h"

namespace kvsim {
namespace {

using Coefficients = std::array<double, kNumPhysicsCoefficients>;

// A residual for a statistic kvsim cannot predict (no finished request in the group): large, so
// the fit moves away from coefficients that starve a group, but finite.
constexpr double kMissingResidual = 5.0;

Coefficients to_array(const PhysicsCoefficients& c) {
  Coefficients a{};
  std::copy(c.beta.begin(), c.beta.end(), a.begin());
  std::copy(c.alpha.begin(), c.alpha.end(), a.begin() + 10);
  return a;
}

PhysicsCoefficients from_array(const Coefficients& a, const PhysicsCoefficients& base) {
  PhysicsCoefficients c = base;
  std::copy(a.begin(), a.begin() + 10, c.beta.begin());
  std::copy(a.begin() + 10, a.end(), c.alpha.begin());
  return c;
}

// Upper bounds when the start is 0 (or small): dimensionless terms up to 5x their basis,
// overheads up to 1 ms per layer or sequence, 10 ms per step, 1 s queueing.
double upper_floor(size_t i) {
  static constexpr std::array<double, kNumPhysicsCoefficients> floors = {
      5, 5, 5, 5, 1000, 1000, 10000, 10000, 5, 5, 1e6, 1e5, 1e4};
  return floors[i];
}

struct Prediction {
  std::vector<StatError> errors;  // one per measured statistic of the chosen groups
};

struct Evaluator {
  const std::vector<CalibrationTarget>& targets;
  PhysicsCoefficients base;
  int32_t evaluations = 0;

  // Predicted statistics of every group of target t under coefficients c.
  std::vector<LatencyStats> predict(size_t t, const PhysicsCoefficients& c) const {
    const CalibrationTarget& target = targets[t];
    const PhysicsStepTime model(target.shape, target.gpu, target.tensor_parallel_size, c);
    NullKvBackend null;
    ReplayConfig config = target.config;
    config.record_timeline = false;
    config.record_requests = true;
    const ReplayResult r = run_replay(config, target.run->trace, null, model);
    std::vector<LatencyStats> out;
    for (const MeasuredGroup& g : target.run->groups) {
      std::vector<RequestLatency> lat;
      for (const RequestRecord& rec : r.requests) {
        if (!rec.finished || rec.arrival_ns < g.arrival_from_ns ||
            rec.arrival_ns >= g.arrival_to_ns) {
          continue;
        }
        lat.push_back({static_cast<double>(rec.first_token_ns - rec.arrival_ns) * 1e-9,
                       static_cast<double>(rec.finish_ns - rec.arrival_ns) * 1e-9,
                       rec.output_tokens});
      }
      out.push_back(lat.empty() ? no_stats() : latency_stats(lat));
    }
    return out;
  }

  // Errors of the groups selected by `use(target, group)`, replaying targets in parallel.
  template <typename Use>
  std::vector<StatError> errors(const Coefficients& a, Use use) {
    ++evaluations;
    const PhysicsCoefficients c = from_array(a, base);
    std::vector<std::future<std::vector<LatencyStats>>> jobs;
    std::vector<std::vector<LatencyStats>> done(targets.size());
    const size_t workers =
        std::max<size_t>(1, std::min<size_t>(std::thread::hardware_concurrency(), targets.size()));
    for (size_t first = 0; first < targets.size(); first += workers) {
      jobs.clear();
      const size_t last = std::min(targets.size(), first + workers);
      for (size_t t = first; t < last; ++t) {
        bool needed = false;
        for (size_t g = 0; g < targets[t].run->groups.size(); ++g) needed |= use(t, g);
        if (!needed) {
          jobs.emplace_back();
          continue;
        }
        jobs.push_back(std::async(std::launch::async, [this, t, &c] { return predict(t, c); }));
      }
      for (size_t t = first; t < last; ++t) {
        if (jobs[t - first].valid()) done[t] = jobs[t - first].get();
      }
    }
    std::vector<StatError> out;
    for (size_t t = 0; t < targets.size(); ++t) {
      const MeasuredRun& run = *targets[t].run;
      for (size_t g = 0; g < run.groups.size(); ++g) {
        if (!use(t, g)) continue;
        for (int s = 0; s < kNumLatencyStats; ++s) {
          const double m = run.groups[g].stats[static_cast<size_t>(s)];
          if (!(m > 0)) continue;
          out.push_back({run.path, run.groups[g].name, static_cast<LatencyStat>(s), m,
                         done[t][g][static_cast<size_t>(s)]});
        }
      }
    }
    return out;
  }
};

double residual(const StatError& e) {
  return e.predicted_s > 0 ? std::log(e.predicted_s / e.measured_s) : kMissingResidual;
}

double sum_squares(const std::vector<StatError>& errors) {
  double s = 0;
  for (const StatError& e : errors) s += residual(e) * residual(e);
  return s;
}

struct FitSetup {
  std::vector<size_t> index;  // fitted coefficients' positions
  Coefficients start{};
  std::vector<double> upper;
};

template <typename Use>
Coefficients fit(Evaluator& ev, const FitSetup& setup, int32_t max_evaluations, Use use,
                 const std::function<void(int32_t, double)>& progress) {
  const size_t n = setup.index.size();
  Coefficients best = setup.start;
  if (n == 0) return best;
  // Optimised in u = x / upper in [0, 1], so every coordinate has the same scale.
  nlopt::opt opt(n >= 2 ? nlopt::LN_BOBYQA : nlopt::LN_COBYLA, static_cast<unsigned>(n));
  opt.set_lower_bounds(std::vector<double>(n, 0.0));
  opt.set_upper_bounds(std::vector<double>(n, 1.0));
  opt.set_maxeval(max_evaluations);
  opt.set_xtol_rel(1e-4);
  opt.set_ftol_abs(1e-8);
  std::vector<double> u(n);
  for (size_t k = 0; k < n; ++k)
    u[k] = std::clamp(setup.start[setup.index[k]] / setup.upper[k], 0.0, 1.0);
  struct Ctx {
    Evaluator* ev;
    const FitSetup* setup;
    Use* use;
    const std::function<void(int32_t, double)>* progress;
  } ctx{&ev, &setup, &use, &progress};
  opt.set_min_objective(
      [](unsigned m, const double* x, double*, void* data) -> double {
        auto* c = static_cast<Ctx*>(data);
        Coefficients a = c->setup->start;
        for (unsigned k = 0; k < m; ++k) a[c->setup->index[k]] = x[k] * c->setup->upper[k];
        const double f = sum_squares(c->ev->errors(a, *c->use));
        if (*c->progress) (*c->progress)(c->ev->evaluations, f);
        return f;
      },
      &ctx);
  // Two passes: a replay is a discrete process, so the objective has small steps that can stop
  // the trust region early; a restart from the first pass's point with a smaller step refines it.
  double f = 0;
  for (const double step : {0.05, 0.01}) {
    opt.set_initial_step(step);
    try {
      opt.optimize(u, f);
    } catch (const nlopt::roundoff_limited&) {
      // The best point found is still in u.
    }
  }
  for (size_t k = 0; k < n; ++k) best[setup.index[k]] = u[k] * setup.upper[k];
  return best;
}

// Records the basis of every step a replay takes (the values the ten betas multiply), so that
// identifiability is judged on the terms themselves rather than on noisy replay differences.
class BasisRecorder final : public StepTimeModel {
 public:
  BasisRecorder(const PhysicsStepTime& model, const PhysicsShape& shape,
                std::vector<std::array<double, 10>>& rows)
      : model_(model), layers_(shape.num_layers), rows_(rows) {}
  StepTimeBreakdown estimate(const StepWork& w) const override {
    if (!w.empty()) {
      const PhysicsStepTime::Terms t = model_.terms(w);
      rows_.push_back({t.pf_compute, t.dc_compute, t.weight, t.tp, layers_ * 1e-6,
                       w.num_seqs * 1e-6, 1e-6, 0.0, t.pf_kv, t.dc_kv});
    }
    return model_.estimate(w);
  }
  std::string describe() const override { return model_.describe(); }
  std::string calibration() const override { return model_.calibration(); }
  RequestOverheads request_overheads() const override { return model_.request_overheads(); }

 private:
  const PhysicsStepTime& model_;
  double layers_;
  std::vector<std::array<double, 10>>& rows_;
};

// Refuses coefficients the data cannot identify (see calibrate.h). Betas: their basis over
// every step of every run (a column per coefficient) must be non-zero and not (nearly) a
// combination of the other fitted columns; alphas: raising one must move some statistic.
void check_identifiable(Evaluator& ev, const FitSetup& setup,
                        const std::vector<std::string>& names) {
  std::vector<std::array<double, 10>> rows;
  const PhysicsCoefficients start = from_array(setup.start, ev.base);
  for (const CalibrationTarget& t : ev.targets) {
    const PhysicsStepTime model(t.shape, t.gpu, t.tensor_parallel_size, start);
    const BasisRecorder recorder(model, t.shape, rows);
    NullKvBackend null;
    ReplayConfig config = t.config;
    config.record_timeline = false;
    config.record_requests = false;
    run_replay(config, t.run->trace, null, recorder);
  }
  std::vector<size_t> fitted_betas;
  for (size_t i : setup.index) {
    if (i < 10) fitted_betas.push_back(i);
  }
  std::vector<std::vector<double>> basis;
  std::vector<std::vector<double>> originals;
  for (size_t i : fitted_betas) {
    std::vector<double> col(rows.size());
    double norm = 0;
    for (size_t r = 0; r < rows.size(); ++r) {
      col[r] = rows[r][i];
      norm += col[r] * col[r];
    }
    norm = std::sqrt(norm);
    if (!(norm > 0)) {
      throw std::invalid_argument(fmt::format(
          "{}: {} is 0 in every step of these runs (e.g. TP all-reduce at TP 1, a MoE term on a "
          "dense model); leave it out of {}",
          param("fit", names[i]), describe_coefficient(names[i]), param("fit")));
    }
    for (double& v : col) v /= norm;
    std::vector<double> v = col;
    size_t closest = 0;
    double closest_dot = -1;
    for (size_t b = 0; b < basis.size(); ++b) {
      double dot = 0, raw = 0;
      for (size_t r = 0; r < v.size(); ++r) {
        dot += basis[b][r] * col[r];
        raw += originals[b][r] * col[r];
      }
      for (size_t r = 0; r < v.size(); ++r) v[r] -= dot * basis[b][r];
      if (std::abs(raw) > closest_dot) {
        closest_dot = std::abs(raw);
        closest = b;
      }
    }
    double left = 0;
    for (double x : v) left += x * x;
    left = std::sqrt(left);
    if (left < 0.01) {
      const std::string& a = names[i];
      const std::string& b = names[fitted_betas[closest]];
      throw std::invalid_argument(fmt::format(
          "{}: on these runs {} is {} a combination of the other fitted terms (e.g. the "
          "weight-read time is the same in every step, like the per-step constant); fit one of "
          "them, or add runs that separate them (another model, TP or load)",
          param("fit", b + "," + a), describe_coefficient(a), left < 1e-9 ? "exactly" : "almost"));
    }
    for (double& x : v) x /= left;
    basis.push_back(std::move(v));
    originals.push_back(std::move(col));
  }
  const auto all = [](size_t, size_t) { return true; };
  std::vector<StatError> base;
  for (size_t k = 0; k < setup.index.size(); ++k) {
    const size_t i = setup.index[k];
    if (i < 10) continue;
    if (base.empty()) base = ev.errors(setup.start, all);
    Coefficients a = setup.start;
    a[i] += 0.1 * setup.upper[k];
    const std::vector<StatError> moved = ev.errors(a, all);
    double change = 0;
    for (size_t r = 0; r < base.size(); ++r) {
      change = std::max(change, std::abs(residual(moved[r]) - residual(base[r])));
    }
    if (change < 1e-6) {
      throw std::invalid_argument(fmt::format(
          "{}: {} moves no measured statistic (is TTFT or E2E measured?); leave it out of {}",
          param("fit", names[i]), describe_coefficient(names[i]), param("fit")));
    }
  }
}

}  // namespace

const std::vector<std::string>& physics_coefficient_names() {
  static const std::vector<std::string> names = {"beta1a", "beta2a", "beta3", "beta4",  "beta5",
                                                 "beta6",  "beta7",  "beta8", "beta1b", "beta2b",
                                                 "alpha0", "alpha1", "alpha2"};
  return names;
}

std::string describe_coefficient(const std::string& name) {
  static const std::vector<std::pair<std::string, std::string>> what = {
      {"beta1a", "prefill compute"},
      {"beta2a", "decode compute"},
      {"beta3", "weight reads"},
      {"beta4", "TP all-reduce"},
      {"beta5", "per-layer overhead, us"},
      {"beta6", "per-sequence overhead, us"},
      {"beta7", "per-step constant, us"},
      {"beta8", "per-MoE-layer overhead, us"},
      {"beta1b", "prefill KV writes"},
      {"beta2b", "decode KV reads"},
      {"alpha0", "queueing before the engine, us"},
      {"alpha1", "per-request completion, us"},
      {"alpha2", "per-output-token host cost, us"}};
  for (const auto& [n, w] : what) {
    if (n == name) return fmt::format("{} ({})", n, w);
  }
  return name;
}

double median_abs_error(const std::vector<StatError>& errors) {
  if (errors.empty()) return 0;
  std::vector<double> v;
  for (const StatError& e : errors) {
    v.push_back(e.predicted_s > 0 ? std::abs(e.predicted_s / e.measured_s - 1.0)
                                  : std::numeric_limits<double>::infinity());
  }
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

CalibrationResult calibrate(const std::vector<CalibrationTarget>& targets,
                            const CalibrateOptions& options) {
  if (targets.empty()) throw std::invalid_argument("calibrate: no measured runs");
  const std::vector<std::string>& names = physics_coefficient_names();
  FitSetup setup;
  setup.start = to_array(options.start);
  for (const std::string& f : options.fit) {
    const auto it = std::find(names.begin(), names.end(), f);
    if (it == names.end()) {
      throw std::invalid_argument(
          fmt::format("{}: unknown coefficient '{}' (known: beta1a, beta2a, beta3, beta4, "
                      "beta5, beta6, beta7, beta8, beta1b, beta2b, alpha0, alpha1, alpha2)",
                      param("fit"), f));
    }
    const auto i = static_cast<size_t>(it - names.begin());
    if (std::find(setup.index.begin(), setup.index.end(), i) != setup.index.end()) {
      throw std::invalid_argument(fmt::format("{}: '{}' given twice", param("fit"), f));
    }
    setup.index.push_back(i);
    setup.upper.push_back(std::max(10.0 * setup.start[i], upper_floor(i)));
  }
  Evaluator ev{targets, options.start};
  check_identifiable(ev, setup, names);

  CalibrationResult result;
  const auto all = [](size_t, size_t) { return true; };
  const Coefficients fitted = fit(ev, setup, options.max_evaluations, all, options.progress);
  result.fitted = from_array(fitted, options.start);
  result.fit_errors = ev.errors(fitted, all);
  result.fit_error = median_abs_error(result.fit_errors);

  size_t groups = 0;
  for (const CalibrationTarget& t : targets) groups += t.run->groups.size();
  result.cv_scheme = targets.size() > 1 ? "leave one run out"
                     : groups > 1       ? "leave one group out"
                                        : "none";
  if (options.cross_validate && result.cv_scheme != "none") {
    const bool by_run = targets.size() > 1;
    const size_t folds = by_run ? targets.size() : groups;
    for (size_t fold = 0; fold < folds; ++fold) {
      const auto train = [&](size_t t, size_t g) { return (by_run ? t : g) != fold; };
      const auto held = [&](size_t t, size_t g) { return (by_run ? t : g) == fold; };
      const Coefficients c = fit(ev, setup, options.max_evaluations, train, options.progress);
      for (StatError& e : ev.errors(c, held)) result.cv_errors.push_back(std::move(e));
    }
    result.cv_error = median_abs_error(result.cv_errors);
  }
  result.evaluations = ev.evaluations;
  return result;
}

}  // namespace kvsim
