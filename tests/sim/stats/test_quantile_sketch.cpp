// QuantileSketch (relative-error nearest-rank percentiles, exact merge), ExactSum, and the
// LatencyCollector's switch from exact samples to sketches beyond its exact limit.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kvsim/sim/stats/latency_stats.h"
#include "kvsim/sim/stats/quantile_sketch.h"

namespace kvsim {
namespace {

// Every q the checks use: the reported ones, the ends, and a fine sweep.
std::vector<double> test_quantiles() {
  std::vector<double> qs{0.0, 1e-6, 0.001, 0.01, 0.07, 0.25, 0.5, 0.9, 0.99, 0.999, 0.9999, 1.0};
  for (int i = 1; i < 200; ++i) qs.push_back(i / 200.0);
  return qs;
}

// Checks every test quantile of a sketch of `values` against the exact nearest-rank value.
void expect_within_alpha(const std::vector<double>& values, double alpha, const std::string& what) {
  QuantileSketch s(alpha);
  for (double v : values) s.add(v);
  s.check_invariants();
  std::vector<double> sorted = values;
  std::sort(sorted.begin(), sorted.end());
  ASSERT_EQ(s.count(), static_cast<int64_t>(sorted.size())) << what;
  EXPECT_EQ(s.min(), sorted.front()) << what;
  EXPECT_EQ(s.max(), sorted.back()) << what;
  for (double q : test_quantiles()) {
    const double exact = percentile_sorted(sorted, q);
    const double got = s.quantile(q);
    EXPECT_LE(std::abs(got - exact), alpha * exact)
        << what << ": q " << q << " exact " << exact << " sketch " << got;
  }
}

std::vector<double> draw(size_t n, uint64_t seed, auto&& gen) {
  std::mt19937_64 rng(seed);
  std::vector<double> v(n);
  for (double& x : v) x = gen(rng);
  return v;
}

double unit(std::mt19937_64& rng) {  // [0, 1), 53 random bits: same on every platform
  return static_cast<double>(rng() >> 11) * 0x1p-53;
}

TEST(QuantileSketch, PercentilesWithinAlphaOnRandomDistributions) {
  constexpr size_t kN = 20'000;
  for (double alpha : {0.005, 0.01, 0.0005}) {
    const std::string a = " alpha " + std::to_string(alpha);
    expect_within_alpha(draw(kN, 1, [](auto& r) { return 10.0 * unit(r); }), alpha, "uniform" + a);
    expect_within_alpha(
        draw(kN, 2,
             [](auto& r) {
               return std::exp(-3.0 + 2.0 * std::sqrt(-2.0 * std::log(1.0 - unit(r))) *
                                          std::cos(6.283185307179586 * unit(r)));
             }),
        alpha, "log-normal" + a);
    expect_within_alpha(
        draw(kN, 3, [](auto& r) { return 0.01 / std::pow(1.0 - unit(r), 1.0 / 1.1); }), alpha,
        "pareto 1.1" + a);
    expect_within_alpha(draw(kN, 4, [](auto&) { return 0.123; }), alpha, "constant" + a);
    expect_within_alpha(
        draw(kN, 5, [](auto& r) { return unit(r) < 0.3 ? 0.0 : -std::log(1.0 - unit(r)); }), alpha,
        "30% zeros" + a);
    expect_within_alpha(draw(kN, 6, [](auto&) { return 0.0; }), alpha, "all zeros" + a);
    // Latencies as the collector computes them: int64 ns from 1 ns to 2^62 ns, log-uniform,
    // divided by 1e9, and TPOT-like values divided again by a token count.
    expect_within_alpha(draw(kN, 7,
                             [](auto& r) {
                               const auto ns = static_cast<int64_t>(std::exp2(62.0 * unit(r)));
                               return static_cast<double>(ns) / 1e9 /
                                      static_cast<double>(1 + (r() % 100'000));
                             }),
                        alpha, "ns latencies" + a);
  }
  // The whole double range: subnormals to near DBL_MAX.
  expect_within_alpha(
      draw(5'000, 8,
           [](auto& r) { return std::ldexp(1.0 + unit(r), static_cast<int>(r() % 2090) - 1085); }),
      0.005, "full double range");
  std::vector<double> extremes{std::numeric_limits<double>::denorm_min(),
                               std::numeric_limits<double>::min(),
                               1e-300,
                               1.0,
                               1e300,
                               std::numeric_limits<double>::max()};
  expect_within_alpha(extremes, 0.005, "extremes");
}

TEST(QuantileSketch, SmallSetsFollowNearestRank) {
  QuantileSketch s;
  for (int i = 1; i <= 100; ++i) s.add(i);
  EXPECT_EQ(s.quantile(0.0), 1.0);                  // exact minimum
  EXPECT_EQ(s.quantile(1.0), 100.0);                // exact maximum
  EXPECT_NEAR(s.quantile(0.07), 7.0, 0.005 * 7.0);  // rank 7, not 8 (nearest_rank_index)
  EXPECT_NEAR(s.quantile(0.5), 50.0, 0.005 * 50.0);
  EXPECT_NEAR(s.quantile(0.99), 99.0, 0.005 * 99.0);
  QuantileSketch one;
  one.add(4.5);
  EXPECT_EQ(one.quantile(0.5), 4.5);
  EXPECT_EQ(one.mean(), 4.5);
}

TEST(QuantileSketch, RepresentativeWithinAlphaAtBucketBoundaries) {
  const QuantileSketch s(0.005);
  std::mt19937_64 rng(9);
  for (int i = 0; i < 20'000; ++i) {
    // Values at and next to the bucket boundaries gamma^k, where rounding could pick a neighbour.
    const auto k = static_cast<int32_t>(rng() % 140'000) - 74'000;
    const double boundary =
        std::exp(k * std::log1p(2 * 0.005 * (1 - 1e-7) / (1 - 0.005 * (1 - 1e-7))));
    if (!(boundary > 0.0) || !std::isfinite(boundary)) continue;
    for (double v : {std::nextafter(boundary, 0.0), boundary, std::nextafter(boundary, 1e308)}) {
      if (!(v > 0.0) || !std::isfinite(v) || v < std::numeric_limits<double>::min()) continue;
      const double rep = s.representative(s.key(v));
      EXPECT_LE(std::abs(rep - v), 0.005 * v) << v;
    }
  }
}

TEST(QuantileSketch, MergeEqualsTheUnionsSketch) {
  std::mt19937_64 rng(10);
  for (int trial = 0; trial < 20; ++trial) {
    QuantileSketch a, b, all;
    const size_t n = 1 + rng() % 3'000;
    for (size_t i = 0; i < n; ++i) {
      const double v =
          rng() % 10 == 0 ? 0.0 : std::exp(-20.0 + 40.0 * unit(rng));  // zeros and wide range
      (rng() % 3 == 0 ? a : b).add(v);
      all.add(v);
    }
    QuantileSketch ab = a, ba = b;
    ab.merge(b);
    ba.merge(a);
    ab.check_invariants();
    ba.check_invariants();
    EXPECT_TRUE(ab == all);
    EXPECT_TRUE(ba == all);
    EXPECT_EQ(ab.sum(), all.sum());  // the exact sum: order does not matter
    EXPECT_EQ(ab.mean(), all.mean());
    for (double q : {0.0, 0.5, 0.9, 0.99, 1.0}) EXPECT_EQ(ab.quantile(q), all.quantile(q));
  }
  // Empty sides, and a sketch merged with itself.
  QuantileSketch e, x;
  x.add(2.0);
  x.add(0.0);
  QuantileSketch xe = x;
  xe.merge(e);
  EXPECT_TRUE(xe == x);
  QuantileSketch ex = e;
  ex.merge(x);
  EXPECT_TRUE(ex == x);
  QuantileSketch xx = x;
  xx.merge(xx);
  QuantileSketch twice = x;
  twice.add(2.0);
  twice.add(0.0);
  EXPECT_TRUE(xx == twice);
  xx.check_invariants();
  EXPECT_THROW(x.merge(QuantileSketch(0.01)), std::invalid_argument);
}

TEST(QuantileSketch, DeterministicWhateverTheOrder) {
  std::vector<double> v = draw(5'000, 11, [](auto& r) { return std::exp(10.0 * unit(r) - 5.0); });
  QuantileSketch forward, backward;
  for (double x : v) forward.add(x);
  for (auto it = v.rbegin(); it != v.rend(); ++it) backward.add(*it);
  EXPECT_TRUE(forward == backward);
  EXPECT_EQ(forward.sum(), backward.sum());
}

TEST(QuantileSketch, InvariantsAfterRandomSequences) {
  std::mt19937_64 rng(12);
  QuantileSketch s;
  std::vector<double> mirror;  // the multiset the sketch should hold
  for (int step = 0; step < 4'000; ++step) {
    const uint64_t op = rng() % 100;
    if (op < 80) {
      const double v =
          rng() % 8 == 0 ? 0.0 : std::ldexp(unit(rng) + 0.5, static_cast<int>(rng() % 80) - 40);
      s.add(v);
      mirror.push_back(v);
    } else if (op < 97) {
      QuantileSketch other;
      const size_t n = rng() % 50;
      for (size_t i = 0; i < n; ++i) {
        const double v = std::ldexp(unit(rng) + 0.5, static_cast<int>(rng() % 120) - 60);
        other.add(v);
        mirror.push_back(v);
      }
      s.merge(other);
    } else {
      s.clear();
      mirror.clear();
    }
    s.check_invariants();
    ASSERT_EQ(s.count(), static_cast<int64_t>(mirror.size()));
    if (!mirror.empty() && step % 50 == 0) {
      std::vector<double> sorted = mirror;
      std::sort(sorted.begin(), sorted.end());
      for (double q : {0.0, 0.3, 0.5, 0.9, 0.99, 1.0}) {
        const double exact = percentile_sorted(sorted, q);
        EXPECT_LE(std::abs(s.quantile(q) - exact), 0.005 * exact);
      }
    }
  }
}

TEST(QuantileSketch, MemoryGrowsWithTheRangeNotTheCount) {
  QuantileSketch s;
  std::mt19937_64 rng(13);
  // 200k latencies spanning [1 ns, 2^62 ns]: at most ln(2^62) / ln(gamma) + 1 keys.
  s.add(1e-9);
  s.add(std::exp2(62.0) * 1e-9);
  for (int i = 0; i < 200'000; ++i) s.add(std::exp2(62.0 * unit(rng)) * 1e-9);
  s.check_invariants();
  EXPECT_LE(s.num_buckets(), 4'300u);
  EXPECT_LE(s.memory_bytes(), 2 * 4'300 * sizeof(int64_t) + 64 * sizeof(int64_t) + sizeof(s));
}

TEST(QuantileSketch, RejectsBadInput) {
  QuantileSketch s;
  EXPECT_THROW(s.add(-1.0), std::invalid_argument);
  EXPECT_THROW(s.add(std::numeric_limits<double>::quiet_NaN()), std::invalid_argument);
  EXPECT_THROW(s.add(std::numeric_limits<double>::infinity()), std::invalid_argument);
  EXPECT_EQ(s.count(), 0);
  s.check_invariants();
  EXPECT_THROW(s.quantile(0.5), std::invalid_argument);
  s.add(1.0);
  EXPECT_THROW(s.quantile(1.5), std::invalid_argument);
  EXPECT_THROW(QuantileSketch(0.0), std::invalid_argument);
  EXPECT_THROW(QuantileSketch(0.6), std::invalid_argument);
}

TEST(ExactSum, CorrectlyRoundedAndOrderFree) {
  ExactSum tenth;
  for (int i = 0; i < 10; ++i) tenth.add(0.1);
  EXPECT_EQ(tenth.value(), 1.0);  // sequential double addition gives 0.9999999999999999
  ExactSum tie;                   // 2^53 + 1: a tie, rounds to even 2^53
  tie.add(0x1p53);
  tie.add(1.0);
  EXPECT_EQ(tie.value(), 0x1p53);
  ExactSum sticky = tie;  // 2^53 + 1 + 2^-60: above the tie, rounds up
  sticky.add(0x1p-60);
  EXPECT_EQ(sticky.value(), 0x1p53 + 2.0);
  ExactSum odd;  // 2^53 + 3: a tie with an odd mantissa, rounds up to 2^53 + 4
  odd.add(0x1p53 + 2.0);
  odd.add(1.0);
  EXPECT_EQ(odd.value(), 0x1p53 + 4.0);
  ExactSum denormals;
  for (int i = 0; i < 3; ++i) denormals.add(std::numeric_limits<double>::denorm_min());
  EXPECT_EQ(denormals.value(), 3 * std::numeric_limits<double>::denorm_min());
  ExactSum huge;
  huge.add(std::numeric_limits<double>::max());
  EXPECT_EQ(huge.value(), std::numeric_limits<double>::max());
  huge.add(std::numeric_limits<double>::max());
  EXPECT_EQ(huge.value(), std::numeric_limits<double>::infinity());
  // Integers in [0, 2^20) summed in two orders and merged in two groupings: the exact integer.
  std::mt19937_64 rng(14);
  ExactSum a, b, c;
  int64_t exact = 0;
  for (int i = 0; i < 10'000; ++i) {
    const auto v = static_cast<int64_t>(rng() % (1 << 20));
    exact += v;
    (i % 2 == 0 ? a : b).add(static_cast<double>(v));
    c.add(static_cast<double>(v));
  }
  ExactSum ab = a;
  ab.merge(b);
  EXPECT_TRUE(ab == c);
  EXPECT_EQ(ab.value(), static_cast<double>(exact));
}

// ---- LatencyCollector: exact below its limit, sketched beyond it --------------------------------

std::vector<RequestTimestamps> random_requests(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<RequestTimestamps> out(n);
  for (RequestTimestamps& t : out) {
    t.arrival_ns = static_cast<int64_t>(rng() % 1'000'000'000'000);
    t.first_scheduled_ns =
        t.arrival_ns + (rng() % 4 == 0 ? 0 : static_cast<int64_t>(std::exp(20.0 * unit(rng))));
    t.first_token_ns = t.first_scheduled_ns + static_cast<int64_t>(rng() % 200'000'000);
    t.finish_ns = t.first_token_ns + static_cast<int64_t>(rng() % 20'000'000'000);
    t.output_tokens = 1 + static_cast<int64_t>(rng() % 2'000);
  }
  return out;
}

void expect_same(const LatencySummary& a, const LatencySummary& b, const char* what) {
  EXPECT_EQ(a.count, b.count) << what;
  EXPECT_EQ(a.mean, b.mean) << what;
  EXPECT_EQ(a.p50, b.p50) << what;
  EXPECT_EQ(a.p90, b.p90) << what;
  EXPECT_EQ(a.p99, b.p99) << what;
  EXPECT_EQ(a.max, b.max) << what;
}

void expect_same(const LatencyReport& a, const LatencyReport& b) {
  expect_same(a.ttft, b.ttft, "ttft");
  expect_same(a.tpot, b.tpot, "tpot");
  expect_same(a.e2e, b.e2e, "e2e");
  expect_same(a.queueing, b.queueing, "queueing");
  EXPECT_EQ(a.percentiles_exact, b.percentiles_exact);
  EXPECT_EQ(a.percentile_relative_error, b.percentile_relative_error);
}

// The exact summaries, computed as the collector did before it had sketches.
LatencyReport exact_report(const std::vector<RequestTimestamps>& reqs) {
  std::vector<double> ttft, tpot, e2e, queueing;
  for (const RequestTimestamps& t : reqs) {
    ttft.push_back(static_cast<double>(t.first_token_ns - t.arrival_ns) / 1e9);
    e2e.push_back(static_cast<double>(t.finish_ns - t.arrival_ns) / 1e9);
    queueing.push_back(static_cast<double>(t.first_scheduled_ns - t.arrival_ns) / 1e9);
    if (t.output_tokens >= 2) {
      tpot.push_back(static_cast<double>(t.finish_ns - t.first_token_ns) / 1e9 /
                     static_cast<double>(t.output_tokens - 1));
    }
  }
  LatencyReport r;
  r.ttft = summarize_latencies(ttft);
  r.tpot = summarize_latencies(tpot);
  r.e2e = summarize_latencies(e2e);
  r.queueing = summarize_latencies(queueing);
  return r;
}

TEST(LatencyCollectorSketch, ExactUpToTheLimit) {
  const std::vector<RequestTimestamps> reqs = random_requests(500, 20);
  LatencyCollector limited(500);  // exactly at the limit: still exact
  LatencyCollector plain;         // the default limit
  limited.reserve(1'000'000);     // capped at the limit
  for (const RequestTimestamps& t : reqs) {
    limited.add(t);
    plain.add(t);
  }
  EXPECT_FALSE(limited.sketched());
  EXPECT_LE(limited.memory_bytes(), 4 * 500 * sizeof(double) + 4 * sizeof(QuantileSketch));
  const LatencyReport r = limited.report();
  EXPECT_TRUE(r.percentiles_exact);
  EXPECT_EQ(r.percentile_relative_error, 0.0);
  expect_same(r, exact_report(reqs));
  expect_same(plain.report(), exact_report(reqs));
  EXPECT_EQ(limited.size(), 500u);
}

void expect_within(const LatencySummary& got, const LatencySummary& exact, double alpha,
                   const char* what) {
  EXPECT_EQ(got.count, exact.count) << what;
  EXPECT_EQ(got.max, exact.max) << what;
  EXPECT_NEAR(got.mean, exact.mean, 1e-12 * exact.mean) << what;
  EXPECT_LE(std::abs(got.p50 - exact.p50), alpha * exact.p50) << what;
  EXPECT_LE(std::abs(got.p90 - exact.p90), alpha * exact.p90) << what;
  EXPECT_LE(std::abs(got.p99 - exact.p99), alpha * exact.p99) << what;
}

TEST(LatencyCollectorSketch, WithinAlphaBeyondTheLimit) {
  const std::vector<RequestTimestamps> reqs = random_requests(20'000, 21);
  LatencyCollector c(100);
  c.reserve(reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    c.add(reqs[i]);
    EXPECT_EQ(c.sketched(), i + 1 > 100);
    if (i == 99) {
      const LatencyReport early = c.report();  // report() before the fold, then more add()s
      EXPECT_TRUE(early.percentiles_exact);
    }
  }
  EXPECT_EQ(c.size(), reqs.size());
  const LatencyReport r = c.report();
  const LatencyReport exact = exact_report(reqs);
  EXPECT_FALSE(r.percentiles_exact);
  EXPECT_EQ(r.percentile_relative_error, QuantileSketch::kDefaultRelativeAccuracy);
  const double alpha = r.percentile_relative_error;
  expect_within(r.ttft, exact.ttft, alpha, "ttft");
  expect_within(r.tpot, exact.tpot, alpha, "tpot");
  expect_within(r.e2e, exact.e2e, alpha, "e2e");
  expect_within(r.queueing, exact.queueing, alpha, "queueing");
  // The buffers are gone: memory is the sketches', far below 20k requests' 640 KB of doubles.
  EXPECT_LT(c.memory_bytes(), 200'000u);
  LatencyCollector fine(100, 0.001);
  for (const RequestTimestamps& t : reqs) fine.add(t);
  EXPECT_EQ(fine.report().percentile_relative_error, 0.001);
  expect_within(fine.report().e2e, exact.e2e, 0.001, "e2e at alpha 0.001");
}

TEST(LatencyCollectorSketch, MergeEqualsOneCollectorOfBoth) {
  const std::vector<RequestTimestamps> reqs = random_requests(3'000, 22);
  // Below the limit (exact), across it by the merge, and with either side already sketched.
  for (size_t limit : {size_t{10'000}, size_t{2'000}, size_t{500}}) {
    for (size_t split : {size_t{0}, size_t{700}, size_t{2'500}}) {
      LatencyCollector a(limit), b(limit), all(limit);
      for (size_t i = 0; i < reqs.size(); ++i) {
        (i < split ? a : b).add(reqs[i]);
        all.add(reqs[i]);
      }
      LatencyCollector ab = a, ba = b;
      ab.merge(b);
      ba.merge(a);
      EXPECT_EQ(ab.size(), reqs.size());
      EXPECT_EQ(ab.sketched(), reqs.size() > limit);
      const LatencyReport want = all.report();
      expect_same(ab.report(), want);
      expect_same(ba.report(), want);
    }
  }
  LatencyCollector self(2'000);
  for (size_t i = 0; i < 1'500; ++i) self.add(reqs[i]);
  self.merge(self);  // 3,000 > 2,000: folds
  EXPECT_TRUE(self.sketched());
  EXPECT_EQ(self.size(), 3'000u);
  EXPECT_THROW(self.merge(LatencyCollector(2'000, 0.01)), std::invalid_argument);
}

TEST(LatencyCollectorSketch, LimitZeroSketchesEverything) {
  LatencyCollector c(0);
  c.add({0, 0, 250'000'000, 250'000'000, 1});
  EXPECT_TRUE(c.sketched());
  const LatencyReport r = c.report();
  EXPECT_EQ(r.ttft.p50, 0.25);  // a single value: the exact minimum and maximum
  EXPECT_EQ(r.tpot.count, 0);
  EXPECT_EQ(r.queueing.max, 0.0);
  EXPECT_THROW(c.add({10, 5, 20, 30, 2}), std::invalid_argument);
  EXPECT_EQ(c.size(), 1u);
}

}  // namespace
}  // namespace kvsim
