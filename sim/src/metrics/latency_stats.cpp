#include "kvsim/sim/metrics/latency_stats.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/core.h>

namespace kvsim {

int64_t nearest_rank_index(double q, int64_t n) {
  if (n <= 0) throw std::invalid_argument("percentile of an empty set");
  if (!(q >= 0.0 && q <= 1.0)) {
    throw std::invalid_argument(fmt::format("percentile q must be in [0, 1], got {}", q));
  }
  const double count = static_cast<double>(n);
  const double rank = q * count;
  const double k = std::ceil(rank - 1e-9 * std::max(1.0, rank));
  return static_cast<int64_t>(std::clamp(k, 1.0, count)) - 1;
}

double percentile_sorted(std::span<const double> sorted, double q) {
  return sorted[static_cast<size_t>(nearest_rank_index(q, static_cast<int64_t>(sorted.size())))];
}

LatencySummary summarize_latencies(std::span<double> values) {
  LatencySummary s;
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  s.count = static_cast<int64_t>(values.size());
  double sum = 0.0;
  for (double v : values) sum += v;  // ascending order: deterministic, small-first summation
  s.mean = sum / static_cast<double>(values.size());
  s.p50 = percentile_sorted(values, 0.50);
  s.p90 = percentile_sorted(values, 0.90);
  s.p99 = percentile_sorted(values, 0.99);
  s.max = values.back();
  return s;
}

void LatencyCollector::reserve(size_t num_requests) {
  ttft_.reserve(num_requests);
  tpot_.reserve(num_requests);
  e2e_.reserve(num_requests);
  queueing_.reserve(num_requests);
}

void LatencyCollector::add(const RequestTimestamps& t) {
  if (!(t.arrival_ns <= t.first_scheduled_ns && t.first_scheduled_ns <= t.first_token_ns &&
        t.first_token_ns <= t.finish_ns) ||
      t.output_tokens < 1) {
    throw std::invalid_argument(fmt::format(
        "request timestamps out of order: arrival {} ns, first scheduled {} ns, first token {} "
        "ns, finish {} ns, output tokens {}",
        t.arrival_ns, t.first_scheduled_ns, t.first_token_ns, t.finish_ns, t.output_tokens));
  }
  // One correctly rounded division of the exact nanosecond count, so a latency of an exact
  // number of ns prints as its exact decimal seconds (x * 1e-9 would add a rounding step).
  constexpr double kNsPerSecond = 1e9;
  ttft_.push_back(static_cast<double>(t.first_token_ns - t.arrival_ns) / kNsPerSecond);
  e2e_.push_back(static_cast<double>(t.finish_ns - t.arrival_ns) / kNsPerSecond);
  queueing_.push_back(static_cast<double>(t.first_scheduled_ns - t.arrival_ns) / kNsPerSecond);
  if (t.output_tokens >= 2) {
    tpot_.push_back(static_cast<double>(t.finish_ns - t.first_token_ns) / kNsPerSecond /
                    static_cast<double>(t.output_tokens - 1));
  }
}

LatencyReport LatencyCollector::report() {
  LatencyReport r;
  r.ttft = summarize_latencies(ttft_);
  r.tpot = summarize_latencies(tpot_);
  r.e2e = summarize_latencies(e2e_);
  r.queueing = summarize_latencies(queueing_);
  return r;
}

}  // namespace kvsim
