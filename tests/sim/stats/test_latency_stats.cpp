// Latency statistics: nearest-rank percentile edge cases and the TTFT/TPOT/e2e/queueing formulas.
#include <algorithm>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

#include "kvsim/sim/stats/latency_stats.h"

namespace kvsim {
namespace {

TEST(Percentile, NearestRankDefinition) {
  // 1..100: p50 = sorted[ceil(50)-1] = 50, p90 = 90, p99 = 99, p100 = 100.
  std::vector<double> v;
  for (int i = 1; i <= 100; ++i) v.push_back(i);
  EXPECT_EQ(percentile_sorted(v, 0.50), 50);
  EXPECT_EQ(percentile_sorted(v, 0.90), 90);
  EXPECT_EQ(percentile_sorted(v, 0.99), 99);
  EXPECT_EQ(percentile_sorted(v, 1.00), 100);
  EXPECT_EQ(percentile_sorted(v, 0.0), 1);
  // 0.07 * 100 = 7.000000000000001 in binary floating point: still rank 7, not 8.
  EXPECT_EQ(percentile_sorted(v, 0.07), 7);
  EXPECT_EQ(percentile_sorted(v, 0.071), 8);
}

TEST(Percentile, SmallSets) {
  const std::vector<double> one{4.5};
  EXPECT_EQ(percentile_sorted(one, 0.0), 4.5);
  EXPECT_EQ(percentile_sorted(one, 0.5), 4.5);
  EXPECT_EQ(percentile_sorted(one, 0.99), 4.5);
  const std::vector<double> two{1.0, 2.0};
  EXPECT_EQ(percentile_sorted(two, 0.5), 1.0);   // ceil(1.0) - 1 = 0
  EXPECT_EQ(percentile_sorted(two, 0.51), 2.0);  // ceil(1.02) - 1 = 1
  const std::vector<double> ten{1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  EXPECT_EQ(percentile_sorted(ten, 0.99), 10);  // ceil(9.9) = 10
  EXPECT_EQ(percentile_sorted(ten, 0.90), 9);   // ceil(9.0) = 9
}

TEST(Percentile, RejectsEmptyAndBadQ) {
  const std::vector<double> empty;
  EXPECT_THROW(percentile_sorted(empty, 0.5), std::invalid_argument);
  const std::vector<double> v{1.0};
  EXPECT_THROW(percentile_sorted(v, -0.1), std::invalid_argument);
  EXPECT_THROW(percentile_sorted(v, 1.5), std::invalid_argument);
}

TEST(SummarizeLatencies, SortsAndSummarizes) {
  std::vector<double> v{5, 1, 4, 2, 3};
  const LatencySummary s = summarize_latencies(v);
  EXPECT_EQ(s.count, 5);
  EXPECT_DOUBLE_EQ(s.mean, 3.0);
  EXPECT_EQ(s.p50, 3);  // ceil(2.5) = 3
  EXPECT_EQ(s.p90, 5);  // ceil(4.5) = 5
  EXPECT_EQ(s.p99, 5);
  EXPECT_EQ(s.max, 5);
  EXPECT_EQ(v, (std::vector<double>{1, 2, 3, 4, 5}));
  std::vector<double> none;
  const LatencySummary z = summarize_latencies(none);
  EXPECT_EQ(z.count, 0);
  EXPECT_EQ(z.max, 0.0);
}

// The sort (a radix sort of the bit patterns for non-negative values) orders like std::sort: the
// same sequence bit for bit, so the ascending-order mean and the percentiles are the same. Latency
// lists: many exact repeats (a fixed step time), zeros, wide ranges, tiny and huge values.
TEST(SummarizeLatencies, SortsExactlyAsStdSort) {
  std::mt19937_64 rng(27);
  std::lognormal_distribution<double> spread(0.0, 2.0);
  std::uniform_int_distribution<int> pick(0, 9);
  for (size_t n : {size_t{1}, size_t{2}, size_t{255}, size_t{256}, size_t{999}, size_t{1000},
                   size_t{5000}, size_t{19365}, size_t{100000}}) {
    std::vector<double> v(n);
    for (double& x : v) {
      const int k = pick(rng);
      x = k == 0 ? 0.0 : k <= 3 ? 0.01 * k : k == 4 ? 1e-300 * spread(rng) : spread(rng);
    }
    std::vector<double> reference = v;
    std::sort(reference.begin(), reference.end());
    double sum = 0.0;
    for (double x : reference) sum += x;
    const LatencySummary s = summarize_latencies(v);
    ASSERT_EQ(0, std::memcmp(v.data(), reference.data(), n * sizeof(double))) << n;
    EXPECT_EQ(s.count, static_cast<int64_t>(n));
    EXPECT_EQ(s.mean, sum / static_cast<double>(n)) << n;
    EXPECT_EQ(s.p50, percentile_sorted(reference, 0.50));
    EXPECT_EQ(s.p90, percentile_sorted(reference, 0.90));
    EXPECT_EQ(s.p99, percentile_sorted(reference, 0.99));
    EXPECT_EQ(s.max, reference.back());
  }
}

// Values the radix sort does not take (a negative value, -0.0) are sorted by std::sort; values it
// takes include subnormals, the largest double and +infinity, whose bit patterns are still in
// order.
TEST(SummarizeLatencies, SortsOddValuesAsStdSort) {
  std::mt19937_64 rng(2027);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const double odd[] = {5e-324, 1e-310, std::numeric_limits<double>::max(),
                        std::numeric_limits<double>::infinity(), 0.0};
  for (const double extra : {0.0, -1.5, -0.0}) {
    std::vector<double> v(4096);
    for (size_t i = 0; i < v.size(); ++i) v[i] = i % 7 == 0 ? odd[i % 5] : unit(rng) * 1e3;
    v[1234] = extra;
    std::vector<double> reference = v;
    std::sort(reference.begin(), reference.end());
    const LatencySummary s = summarize_latencies(v);
    for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(v[i], reference[i]) << i << " " << extra;
    EXPECT_EQ(s.p50, percentile_sorted(reference, 0.50));
    EXPECT_EQ(s.max, reference.back());
  }
}

TEST(LatencyCollector, Formulas) {
  LatencyCollector c;
  c.reserve(2);
  // Arrives at 1 s, scheduled at 1.5 s, first token at 2 s, 11 tokens done at 3 s.
  c.add({1'000'000'000, 1'500'000'000, 2'000'000'000, 3'000'000'000, 11});
  // Single-token request: no TPOT sample.
  c.add({0, 0, 250'000'000, 250'000'000, 1});
  const LatencyReport r = c.report();
  EXPECT_EQ(r.ttft.count, 2);
  EXPECT_DOUBLE_EQ(r.ttft.max, 1.0);
  EXPECT_DOUBLE_EQ(r.ttft.p50, 0.25);
  EXPECT_EQ(r.tpot.count, 1);
  EXPECT_DOUBLE_EQ(r.tpot.p50, 0.1);  // (3 - 2) s / (11 - 1)
  EXPECT_DOUBLE_EQ(r.e2e.max, 2.0);
  EXPECT_DOUBLE_EQ(r.e2e.mean, (2.0 + 0.25) / 2);
  EXPECT_DOUBLE_EQ(r.queueing.max, 0.5);
  EXPECT_DOUBLE_EQ(r.queueing.p50, 0.0);
  EXPECT_EQ(c.size(), 2u);
}

TEST(LatencyCollector, RejectsOutOfOrderTimestamps) {
  LatencyCollector c;
  EXPECT_THROW(c.add({10, 5, 20, 30, 2}), std::invalid_argument);
  EXPECT_THROW(c.add({0, 5, 20, 10, 2}), std::invalid_argument);
  EXPECT_THROW(c.add({0, 0, 0, 0, 0}), std::invalid_argument);
  EXPECT_EQ(c.size(), 0u);
}

}  // namespace
}  // namespace kvsim

namespace kvsim {
namespace {

TEST(LatencyStats, NearestRankIndex) {
  EXPECT_EQ(nearest_rank_index(0.5, 4), 1);     // ceil(2) - 1
  EXPECT_EQ(nearest_rank_index(0.07, 100), 6);  // 7.000000000000001 is rank 7, not 8
  EXPECT_EQ(nearest_rank_index(0.99, 10), 9);
  EXPECT_EQ(nearest_rank_index(0.0, 5), 0);
  EXPECT_EQ(nearest_rank_index(1.0, 5), 4);
  EXPECT_THROW(nearest_rank_index(0.5, 0), std::invalid_argument);
  EXPECT_THROW(nearest_rank_index(1.5, 3), std::invalid_argument);
}

}  // namespace
}  // namespace kvsim
