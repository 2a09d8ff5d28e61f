#include "kvsim/sim/stats/latency_stats.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include <fmt/core.h>

namespace kvsim {

namespace {

// A latency in seconds from a buffer's value. Nanoseconds: one correctly rounded division of the
// exact count, so a latency of an exact number of ns prints as its exact decimal seconds
// (x * 1e-9 would add a rounding step). Seconds (TPOT's buffer): as they are.
double seconds_of(int64_t ns) {
  return static_cast<double>(ns) / 1e9;
}
double seconds_of(double seconds) {
  return seconds;
}

// Sorts values that are all +0.0 or greater (no NaN, no -0.0) into std::sort's order, bit for
// bit, or non-negative integers: for such doubles IEEE 754's order is the unsigned order of their
// bit patterns, and equal values have equal bits. An LSD radix sort over 11-bit digits that skips
// a digit every value shares and the digits above the highest bit any value sets (nanosecond
// durations of a replay fit in 3 or 4 digits; doubles need all 6). Why not a library: Boost.Sort's
// float_sort (used until issue 27's sixteenth pass) splits 19k latencies into bins it then
// finishes with pdqsort, whose comparisons mispredict: its sorts were 3.6 % of a whole Azure conv
// replay's CPU (perf), and this takes about 40 % of its time on the same values
// (bench/RESULTS.md).
template <class T>
void radix_sort_nonnegative(std::span<T> values) {
  static_assert(sizeof(T) == sizeof(uint64_t));
  constexpr int kBits = 11;
  constexpr int kMaxDigits = (64 + kBits - 1) / kBits;
  constexpr uint64_t kMask = (uint64_t{1} << kBits) - 1;
  const size_t n = values.size();
  // One scratch per thread, reused by the four summaries of a report (a fresh 150 KB buffer each
  // time would be fresh pages to fault in).
  thread_local std::vector<uint64_t> scratch;
  scratch.resize(2 * n);
  uint64_t* from = scratch.data();
  uint64_t* to = from + n;
  uint64_t any = 0;
  for (size_t i = 0; i < n; ++i) {
    from[i] = std::bit_cast<uint64_t>(values[i]);
    any |= from[i];
  }
  const int digits = std::max(1, static_cast<int>((std::bit_width(any) + kBits - 1) / kBits));
  std::array<std::array<uint32_t, size_t{1} << kBits>, kMaxDigits> count{};
  for (size_t i = 0; i < n; ++i) {
    const uint64_t x = from[i];
    for (int d = 0; d < digits; ++d) ++count[static_cast<size_t>(d)][(x >> (kBits * d)) & kMask];
  }
  for (int d = 0; d < digits; ++d) {
    auto& c = count[static_cast<size_t>(d)];
    const int shift = kBits * d;
    if (c[(from[0] >> shift) & kMask] == n) continue;  // every value has this digit
    uint32_t sum = 0;
    for (uint32_t& k : c) {
      const uint32_t here = k;
      k = sum;
      sum += here;
    }
    for (size_t i = 0; i < n; ++i) {
      const uint64_t x = from[i];
      to[c[(x >> shift) & kMask]++] = x;
    }
    std::swap(from, to);
  }
  for (size_t i = 0; i < n; ++i) values[i] = std::bit_cast<T>(from[i]);
}

// Below this std::sort is as fast (the radix sort's counts are a fixed cost).
constexpr size_t kRadixSortMinValues = 256;

// Radix-sortable: no NaN and no -0.0 among doubles (negative integers and doubles take std::sort).
bool radix_sortable(double v) {
  return v >= 0.0 && !std::signbit(v);
}
bool radix_sortable(int64_t v) {
  return v >= 0;
}

// Sorts `values` in place and summarises them in seconds (seconds_of each), which keeps their
// order (an identity, or a division by a positive constant): the seconds in ascending order,
// summed small-first (deterministic) and ranked.
template <class T>
LatencySummary summarize_sorted_in_place(std::span<T> values) {
  LatencySummary s;
  if (values.empty()) return s;
  if (values.size() >= kRadixSortMinValues &&
      std::all_of(values.begin(), values.end(), [](T v) { return radix_sortable(v); })) {
    radix_sort_nonnegative(values);
  } else {
    std::sort(values.begin(), values.end());
  }
  s.count = static_cast<int64_t>(values.size());
  double sum = 0.0;
  for (const T v : values) sum += seconds_of(v);
  s.mean = sum / static_cast<double>(values.size());
  const auto at = [&](double q) {
    return seconds_of(values[static_cast<size_t>(nearest_rank_index(q, s.count))]);
  };
  s.p50 = at(0.50);
  s.p90 = at(0.90);
  s.p99 = at(0.99);
  s.max = seconds_of(values.back());
  return s;
}

}  // namespace

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

LatencySummary summarize_latencies_ns(std::span<int64_t> ns) {
  return summarize_sorted_in_place(ns);
}

LatencySummary summarize_latencies(std::span<double> values) {
  return summarize_sorted_in_place(values);
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
  const int64_t ttft = t.first_token_ns - t.arrival_ns;
  const int64_t e2e = t.finish_ns - t.arrival_ns;
  const int64_t queueing = t.first_scheduled_ns - t.arrival_ns;
  const bool has_tpot = t.output_tokens >= 2;
  const double tpot = has_tpot ? seconds_of(t.finish_ns - t.first_token_ns) /
                                     static_cast<double>(t.output_tokens - 1)
                               : 0.0;
  if (!sketched_ && size_ == exact_limit_) fold_into_sketches();
  if (sketched_) {
    add_to_sketches(seconds_of(ttft), tpot, seconds_of(e2e), seconds_of(queueing), has_tpot);
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
  auto fold = [](auto& buffer, QuantileSketch& sketch) {
    for (const auto v : buffer) sketch.add(seconds_of(v));
    std::remove_reference_t<decltype(buffer)>().swap(buffer);  // release the memory too
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
    for (const int64_t v : other.ttft_) ttft_sketch_.add(seconds_of(v));  // empty if sketched
    for (const double v : other.tpot_) tpot_sketch_.add(v);
    for (const int64_t v : other.e2e_) e2e_sketch_.add(seconds_of(v));
    for (const int64_t v : other.queueing_) queueing_sketch_.add(seconds_of(v));
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
  static_assert(sizeof(int64_t) == sizeof(double));
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
  r.ttft = summarize_latencies_ns(ttft_);
  r.tpot = summarize_latencies(tpot_);
  r.e2e = summarize_latencies_ns(e2e_);
  r.queueing = summarize_latencies_ns(queueing_);
  return r;
}

}  // namespace kvsim
