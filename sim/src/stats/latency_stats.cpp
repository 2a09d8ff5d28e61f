#include "kvsim/sim/stats/latency_stats.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/core.h>
#if KVSIM_HAVE_BOOST_SORT
#include <boost/sort/spreadsort/float_sort.hpp>
#endif

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
#if KVSIM_HAVE_BOOST_SORT
  boost::sort::spreadsort::float_sort(values.begin(), values.end());
#else
  std::sort(values.begin(), values.end());
#endif
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

LatencyCollector::LatencyCollector(size_t exact_limit, double relative_accuracy)
    : exact_limit_(exact_limit),
      ttft_sketch_(relative_accuracy),
      tpot_sketch_(relative_accuracy),
      e2e_sketch_(relative_accuracy),
      queueing_sketch_(relative_accuracy) {}

void LatencyCollector::reserve(size_t num_requests) {
  if (sketched_) return;
  // Never more than the exact limit: a 10^7-request trace must not reserve 320 MB up front.
  const size_t n = std::min(num_requests, exact_limit_);
  ttft_.reserve(n);
  tpot_.reserve(n);
  e2e_.reserve(n);
  queueing_.reserve(n);
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
  const double ttft = static_cast<double>(t.first_token_ns - t.arrival_ns) / kNsPerSecond;
  const double e2e = static_cast<double>(t.finish_ns - t.arrival_ns) / kNsPerSecond;
  const double queueing = static_cast<double>(t.first_scheduled_ns - t.arrival_ns) / kNsPerSecond;
  const bool has_tpot = t.output_tokens >= 2;
  const double tpot = has_tpot ? static_cast<double>(t.finish_ns - t.first_token_ns) /
                                     kNsPerSecond / static_cast<double>(t.output_tokens - 1)
                               : 0.0;
  if (!sketched_ && size_ == exact_limit_) fold_into_sketches();
  if (sketched_) {
    add_to_sketches(ttft, tpot, e2e, queueing, has_tpot);
  } else {
    ttft_.push_back(ttft);
    e2e_.push_back(e2e);
    queueing_.push_back(queueing);
    if (has_tpot) tpot_.push_back(tpot);
  }
  ++size_;
}

void LatencyCollector::add_to_sketches(double ttft, double tpot, double e2e, double queueing,
                                       bool has_tpot) {
  ttft_sketch_.add(ttft);
  e2e_sketch_.add(e2e);
  queueing_sketch_.add(queueing);
  if (has_tpot) tpot_sketch_.add(tpot);
}

void LatencyCollector::fold_into_sketches() {
  auto fold = [](std::vector<double>& buffer, QuantileSketch& sketch) {
    for (double v : buffer) sketch.add(v);
    std::vector<double>().swap(buffer);  // release the memory, not just the size
  };
  fold(ttft_, ttft_sketch_);
  fold(tpot_, tpot_sketch_);
  fold(e2e_, e2e_sketch_);
  fold(queueing_, queueing_sketch_);
  sketched_ = true;
}

void LatencyCollector::merge(const LatencyCollector& other) {
  if (other.ttft_sketch_.relative_accuracy() != ttft_sketch_.relative_accuracy()) {
    throw std::invalid_argument(
        fmt::format("cannot merge latency collectors of relative accuracy {} and {}",
                    ttft_sketch_.relative_accuracy(), other.ttft_sketch_.relative_accuracy()));
  }
  if (&other == this) {
    const LatencyCollector copy = other;
    merge(copy);
    return;
  }
  const size_t total = size_ + other.size_;
  if (!sketched_ && total > exact_limit_) fold_into_sketches();
  if (sketched_) {
    ttft_sketch_.merge(other.ttft_sketch_);  // empty unless other is sketched
    tpot_sketch_.merge(other.tpot_sketch_);
    e2e_sketch_.merge(other.e2e_sketch_);
    queueing_sketch_.merge(other.queueing_sketch_);
    for (double v : other.ttft_) ttft_sketch_.add(v);  // empty if other is sketched
    for (double v : other.tpot_) tpot_sketch_.add(v);
    for (double v : other.e2e_) e2e_sketch_.add(v);
    for (double v : other.queueing_) queueing_sketch_.add(v);
  } else {
    // Both exact and the union fits: report() sorts, so appending equals adding in any order.
    ttft_.insert(ttft_.end(), other.ttft_.begin(), other.ttft_.end());
    tpot_.insert(tpot_.end(), other.tpot_.begin(), other.tpot_.end());
    e2e_.insert(e2e_.end(), other.e2e_.begin(), other.e2e_.end());
    queueing_.insert(queueing_.end(), other.queueing_.begin(), other.queueing_.end());
  }
  size_ = total;
}

size_t LatencyCollector::memory_bytes() const noexcept {
  return (ttft_.capacity() + tpot_.capacity() + e2e_.capacity() + queueing_.capacity()) *
             sizeof(double) +
         ttft_sketch_.memory_bytes() + tpot_sketch_.memory_bytes() + e2e_sketch_.memory_bytes() +
         queueing_sketch_.memory_bytes();
}

namespace {

LatencySummary summarize_sketch(const QuantileSketch& s) {
  LatencySummary r;
  if (s.count() == 0) return r;
  r.count = s.count();
  r.mean = s.mean();
  r.p50 = s.quantile(0.50);
  r.p90 = s.quantile(0.90);
  r.p99 = s.quantile(0.99);
  r.max = s.max();
  return r;
}

}  // namespace

LatencyReport LatencyCollector::report() {
  LatencyReport r;
  if (sketched_) {
    r.ttft = summarize_sketch(ttft_sketch_);
    r.tpot = summarize_sketch(tpot_sketch_);
    r.e2e = summarize_sketch(e2e_sketch_);
    r.queueing = summarize_sketch(queueing_sketch_);
    r.percentiles_exact = false;
    r.percentile_relative_error = ttft_sketch_.relative_accuracy();
    return r;
  }
  r.ttft = summarize_latencies(ttft_);
  r.tpot = summarize_latencies(tpot_);
  r.e2e = summarize_latencies(e2e_);
  r.queueing = summarize_latencies(queueing_);
  return r;
}

}  // namespace kvsim
