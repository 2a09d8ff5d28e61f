// Latency statistics from the replay's simulated clock: nearest-rank percentiles and per-metric
// summaries of TTFT, TPOT, end-to-end latency and queueing delay.
//
// Definitions (per finished request; times are the replay clock's integer nanoseconds, results
// are seconds):
//   TTFT     = first_token - arrival
//   TPOT     = (finish - first_token) / (output_tokens - 1), only for output_tokens >= 2
//              (kvsim records no per-token times, so ITL is reported as this per-request mean)
//   e2e      = finish - arrival
//   queueing = first_scheduled - arrival
// Percentile (nearest rank, as in traces/README.md): sorted[ceil(q * n) - 1], q in [0, 1],
// q = 0 gives the minimum; ceil is taken with a 1e-9 relative tolerance so that q * n that is an
// integer up to floating-point error (0.07 * 100) is not rounded up to the next rank.
//
// Exact up to a limit, sketched beyond it (docs/metrics-sketch.md): a collector keeps every
// sample and reports exact nearest-rank percentiles while it holds at most its exact limit of
// requests (kExactLatencySamples by default); beyond it, it folds its samples into
// QuantileSketches and frees them, so memory no longer grows with the trace, and percentiles are
// within the sketch's relative error (LatencyReport::percentiles_exact says which).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "kvsim/sim/stats/quantile_sketch.h"

namespace kvsim {

// The nearest-rank percentile's 0-based index into n ascending values: ceil(q * n) - 1 with the
// tolerance above, clamped to [0, n - 1]. Used for latencies and for the replay's
// running-requests histogram alike. Throws std::invalid_argument if n == 0 or q is outside [0, 1].
int64_t nearest_rank_index(double q, int64_t n);

// Nearest-rank percentile of an ascending-sorted range. Throws std::invalid_argument if `sorted`
// is empty or q is outside [0, 1].
double percentile_sorted(std::span<const double> sorted, double q);

// Summary of one latency metric. count == 0 means "no samples" and every statistic is 0.
struct LatencySummary {
  int64_t count = 0;
  double mean = 0.0;
  double p50 = 0.0;
  double p90 = 0.0;
  double p99 = 0.0;
  double max = 0.0;
};

// Sorts `values` in place and summarises them (a per-thread scratch buffer, reused).
LatencySummary summarize_latencies(std::span<double> values);
// The same for durations in integer nanoseconds, summarised in seconds (each ns / 1e9, one
// correctly rounded division): bit for bit summarize_latencies of those seconds, since the
// division keeps their order, with a sort of integers (fewer radix digits than doubles).
// Sorts `ns` in place.
LatencySummary summarize_latencies_ns(std::span<int64_t> ns);

// The timestamps of one finished request, in replay-clock nanoseconds.
// Precondition: arrival <= first_scheduled <= first_token <= finish, output_tokens >= 1.
struct RequestTimestamps {
  int64_t arrival_ns = 0;
  int64_t first_scheduled_ns = 0;
  int64_t first_token_ns = 0;
  int64_t finish_ns = 0;
  int64_t output_tokens = 0;
};

struct LatencyReport {
  LatencySummary ttft;
  LatencySummary tpot;
  LatencySummary e2e;
  LatencySummary queueing;
  // True when p50/p90/p99 are the exact nearest-rank values (count, max and the minimum are
  // always exact). False when the collector held more than its exact limit of requests: then
  // each percentile y satisfies |y - x| <= percentile_relative_error * x for the exact value x,
  // and mean is the correctly rounded exact sum divided by count (where the exact path sums in
  // ascending order in double precision).
  bool percentiles_exact = true;
  double percentile_relative_error = 0.0;  // 0 when exact, the sketches' alpha otherwise
};

// Requests whose latencies a LatencyCollector keeps exactly by default: 4 doubles each, 32 MB at
// the limit. Traces up to this many requests report exactly as before the sketch existed.
inline constexpr size_t kExactLatencySamples = 1'000'000;

// Collects finished requests and summarises them. Usage:
//   LatencyCollector c; c.reserve(n);
//   for (each finished request) c.add({arrival, first_scheduled, first_token, finish, out});
//   LatencyReport r = c.report();
// Up to exact_limit requests, add() appends four values (no allocation after reserve, which
// reserves at most exact_limit) and report() sorts the buffers in place and summarises them
// exactly. The add() of request exact_limit + 1 folds the buffers into four QuantileSketches
// (relative accuracy `relative_accuracy`) and frees them; from then on add() goes to the sketches
// (O(1) amortised, memory O(buckets), see quantile_sketch.h) and report() reads them. report() may
// be called again after more add()s. Throws std::invalid_argument from add() when the timestamps
// are out of order or output_tokens < 1 (the collector is unchanged).
// Invariants: size() == number of requests added (or merged in); sketched() <=>
// size() > exact_limit(); sketched() => the buffers are empty and released and the sketches'
// counts are size() (TPOT: the requests with output_tokens >= 2); !sketched() => the sketches
// are empty and e2e_.size() == size().
class LatencyCollector {
 public:
  explicit LatencyCollector(size_t exact_limit = kExactLatencySamples,
                            double relative_accuracy = QuantileSketch::kDefaultRelativeAccuracy);
  void reserve(size_t num_requests);
  void add(const RequestTimestamps& t);
  LatencyReport report();
  size_t size() const noexcept { return size_; }

  // Pools another collector's requests into this one (for a cluster's replicas): afterwards this
  // collector reports what one collector with this one's limit and accuracy would report had it
  // been given both sets of requests, in either order, bit for bit (exact or sketched alike).
  // Throws std::invalid_argument if the relative accuracies differ.
  void merge(const LatencyCollector& other);

  size_t exact_limit() const noexcept { return exact_limit_; }
  bool sketched() const noexcept { return sketched_; }
  // Bytes held by the buffers (capacity) and the sketches.
  size_t memory_bytes() const noexcept;

 private:
  void fold_into_sketches();
  void add_to_sketches(double ttft, double tpot, double e2e, double queueing, bool has_tpot);

  size_t exact_limit_;
  size_t size_ = 0;
  bool sketched_ = false;
  // TTFT, e2e and queueing in nanoseconds (summarize_latencies_ns), TPOT in seconds.
  std::vector<int64_t> ttft_, e2e_, queueing_;
  std::vector<double> tpot_;
  QuantileSketch ttft_sketch_, tpot_sketch_, e2e_sketch_, queueing_sketch_;
};

}  // namespace kvsim
