// kvsim size: the replica search per candidate, and the search over all candidates.
#include <algorithm>
#include <exception>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/core.h>

#include "kvsim/core/param.h"
#include "kvsim/sim/sweep/run_units_in_order.h"
#include "kvsim/sim/sweep/size.h"

namespace kvsim {

std::string_view to_string(SizeVerdict v) {
  switch (v) {
    case SizeVerdict::FEASIBLE:
      return "feasible";
    case SizeVerdict::SLO_UNREACHABLE:
      return "slo_unreachable";
    case SizeVerdict::DOES_NOT_FIT:
      return "does_not_fit";
    case SizeVerdict::INVALID:
      return "invalid";
  }
  return "invalid";
}

const SizeTrial& ReplicaSearch::reported() const {
  if (trials.empty()) throw std::logic_error("ReplicaSearch::reported: no trial was run");
  if (replicas) {
    for (const SizeTrial& t : trials) {
      if (t.replicas == *replicas) return t;
    }
  }
  return trials.back();
}

ReplicaSearch search_min_replicas(const ReplicaTrial& trial, int32_t max_replicas, int32_t guess) {
  if (max_replicas < 1) {
    throw std::invalid_argument(
        fmt::format("{} must be >= 1, got {}", param("max_replicas"), max_replicas));
  }
  if (guess < 1 || guess > max_replicas) {
    throw std::invalid_argument(
        fmt::format("replica search: guess {} outside [1, {}]", guess, max_replicas));
  }
  ReplicaSearch s;
  const auto run = [&](int32_t n) {
    SizeTrial t = trial(n);
    t.replicas = n;  // the count asked for, whatever the trial wrote
    s.trials.push_back(t);
    return t.meets_slo;
  };
  // The next gallop step: doubled, never past what int32 and max_replicas allow.
  const auto grow = [max_replicas](int32_t step) {
    return step > max_replicas / 2 ? max_replicas : 2 * step;
  };
  // Invariant: `lo` failed (0 = no failing count known below hi), `hi` passed.
  int32_t lo = 0;
  int32_t hi = 0;
  if (run(guess)) {
    hi = guess;
    // Gallop down: hi - 1, hi - 2, hi - 4, ... (not below 1) until one fails.
    for (int32_t step = 1; hi > 1; step = grow(step)) {
      const int32_t n = hi - std::min(step, hi - 1);
      if (!run(n)) {
        lo = n;
        break;
      }
      hi = n;
    }
  } else {
    lo = guess;
    // Gallop up: lo + 1, lo + 2, lo + 4, ... (capped at max_replicas) until one passes.
    for (int32_t step = 1;; step = grow(step)) {
      if (lo == max_replicas) return s;  // unreachable: the last trial is at max_replicas
      const int32_t n = lo + std::min(step, max_replicas - lo);
      if (run(n)) {
        hi = n;
        break;
      }
      lo = n;
    }
  }
  // Binary phase between a verified failure and a verified pass. `hi` only ever moves to a count
  // that passed, so the answer was verified even when the runner is not monotone.
  while (hi - lo > 1) {
    const int32_t mid = lo + (hi - lo) / 2;
    (run(mid) ? hi : lo) = mid;
  }
  s.replicas = hi;
  return s;
}

namespace {

SizeResult search_candidate(const SizeCandidate& c, const SizeRunner& runner,
                            const PriceTable& prices, int32_t max_replicas, int32_t guess,
                            ParamSpelling spelling) {
  SizeResult r;
  r.candidate = c;
  const auto price = prices.find(c.gpu);
  if (price == prices.end()) {
    throw std::invalid_argument(
        fmt::format("no price for GPU '{}' (give {})", c.gpu, param("gpu_price", c.gpu + "=USD")));
  }
  r.price_per_gpu_hour = price->second;
  CandidateSetup setup = runner(c);
  if (!setup.infeasible_reason.empty()) {
    // Nothing was resolved: the configuration fields stay zero (SizeResult's invariant).
    r.verdict = setup.does_not_fit ? SizeVerdict::DOES_NOT_FIT : SizeVerdict::INVALID;
    r.reason = spell_params(setup.infeasible_reason, spelling);
    return r;
  }
  r.block_size = setup.block_size;
  r.max_num_seqs = setup.max_num_seqs;
  r.max_num_batched_tokens = setup.max_num_batched_tokens;
  r.kv_cache_dtype = setup.kv_cache_dtype;
  r.num_gpu_blocks = setup.num_gpu_blocks;
  r.formula_max_concurrency = setup.formula_max_concurrency;
  r.vllm_max_concurrency = setup.vllm_max_concurrency;
  if (!setup.run) throw std::logic_error("SizeRunner returned a feasible setup without `run`");
  ReplicaSearch s = search_min_replicas(setup.run, max_replicas, guess);
  r.reported = s.reported();
  r.trials = std::move(s.trials);
  if (s.replicas) {
    r.verdict = SizeVerdict::FEASIBLE;
    r.replicas = *s.replicas;
  } else {
    r.verdict = SizeVerdict::SLO_UNREACHABLE;
    r.replicas = max_replicas;
    r.reason = spell_params(
        fmt::format("SLO unreachable at {}", param("max_replicas", std::to_string(max_replicas))),
        spelling);
  }
  r.cost_per_hour = static_cast<double>(r.gpus()) * r.price_per_gpu_hour;
  return r;
}

}  // namespace

std::vector<SizeResult> run_size(std::span<const SizeCandidate> candidates,
                                 const SizeRunner& runner, const PriceTable& prices,
                                 const SizeSearchOptions& options) {
  if (options.jobs < 1) {
    throw std::invalid_argument(
        fmt::format("{} must be >= 1, got {}", param("jobs"), options.jobs));
  }
  if (options.max_replicas < 1) {
    throw std::invalid_argument(
        fmt::format("{} must be >= 1, got {}", param("max_replicas"), options.max_replicas));
  }
  std::vector<const SizeCandidate*> mine;
  for (const SizeCandidate& c : candidates) {
    if (options.shard.contains(c.group)) mine.push_back(&c);
  }
  // Work units: runs of consecutive candidates of one group, [begin, end) into `mine`.
  std::vector<std::pair<size_t, size_t>> units;
  for (size_t i = 0; i < mine.size(); ++i) {
    if (i == 0 || mine[i]->group != mine[i - 1]->group) units.emplace_back(i, i);
    units.back().second = i + 1;
  }
  std::vector<SizeResult> results(mine.size());
  // A group's candidates run in order on one thread, each search starting from the last answer
  // (the same on any thread: jobs-independent). `at[u]` is the candidate unit u was running, so
  // a failure is reported against it.
  std::vector<size_t> at(units.size());
  const std::vector<std::exception_ptr> errors =
      run_units_in_order(units.size(), options.jobs, [&](size_t u) {
        int32_t guess = 1;
        for (size_t i = units[u].first; i < units[u].second; ++i) {
          at[u] = i;
          results[i] = search_candidate(*mine[i], runner, prices, options.max_replicas, guess,
                                        options.spelling);
          if (!results[i].trials.empty()) guess = results[i].replicas;
          if (options.on_candidate_done) options.on_candidate_done();
        }
      });
  for (size_t u = 0; u < units.size(); ++u) {
    if (errors[u]) {
      const SizeCandidate& c = *mine[at[u]];
      rethrow_with_context(errors[u], fmt::format("size candidate {} ({})", c.index, c.describe()));
    }
  }
  return results;
}

void rank_size_results(std::vector<SizeResult>& results) {
  const auto key = [](const SizeResult& r) {
    const bool f = r.feasible();
    return std::make_tuple(static_cast<int>(r.verdict), f ? r.cost_per_hour : 0.0,
                           f ? r.gpus() : int64_t{0}, f ? r.reported.ttft_p99_s : 0.0,
                           r.candidate.index);
  };
  std::sort(results.begin(), results.end(),
            [&](const SizeResult& a, const SizeResult& b) { return key(a) < key(b); });
}

}  // namespace kvsim
