// TraceReadOptions: window, max_requests, time scale and synthetic arrival modes.
#include <gtest/gtest.h>

#include <string>

#include "kvsim/sim/traces/trace.h"
#include "kvsim/sim/traces/trace_random.h"

namespace kvsim {
namespace {

const std::string kConv = KVSIM_SOURCE_DIR "/traces/AzureLLMInferenceTrace_conv.csv";
const std::string kMooncake = KVSIM_SOURCE_DIR "/traces/conversation_trace.jsonl";
const std::string kShareGpt =
    KVSIM_SOURCE_DIR "/traces/sharegpt_8k_filtered_stats_llama2_tokenizer.csv";

TEST(TraceOptions, FormatNamesRoundTrip) {
  for (const auto f :
       {TraceFormat::AUTO, TraceFormat::AZURE, TraceFormat::VIDUR, TraceFormat::BURSTGPT,
        TraceFormat::MOONCAKE, TraceFormat::BAILIAN, TraceFormat::SHAREGPT, TraceFormat::KVSIM}) {
    EXPECT_EQ(parse_trace_format(to_string(f)), f);
  }
  EXPECT_THROW(parse_trace_format("csv"), std::invalid_argument);
  EXPECT_EQ(parse_arrival_mode("all-at-once"), ArrivalMode::ALL_AT_ONCE);
  EXPECT_THROW(parse_arrival_mode("now"), std::invalid_argument);
}

TEST(TraceOptions, WindowRebasesToTheFirstRequestInside) {
  const Trace full = read_trace(kConv);
  TraceReadOptions o;
  o.start_s = 600;
  o.duration_s = 60;
  const Trace w = read_trace(kConv, o);
  // Expected from the full trace: arrivals in [600 s, 660 s).
  size_t first = 0;
  while (full.requests[first].arrival_ns < 600'000'000'000) ++first;
  size_t last = first;
  while (full.requests[last].arrival_ns < 660'000'000'000) ++last;
  ASSERT_EQ(w.requests.size(), last - first);
  ASSERT_GT(w.requests.size(), 100u);
  EXPECT_EQ(w.requests[0].arrival_ns, 0);
  EXPECT_EQ(w.requests[0].source_line, full.requests[first].source_line);
  EXPECT_EQ(w.requests.back().arrival_ns,
            full.requests[last - 1].arrival_ns - full.requests[first].arrival_ns);
}

TEST(TraceOptions, MaxRequestsAndTimeScale) {
  TraceReadOptions o;
  o.max_requests = 3;
  o.time_scale = 0.5;
  const Trace t = read_trace(kConv, o);
  ASSERT_EQ(t.requests.size(), 3u);
  EXPECT_EQ(t.requests[1].arrival_ns, 2'157'289'500);  // 4.314579 s / 2
  EXPECT_EQ(t.requests[2].arrival_ns, 2'270'938'500);
}

TEST(TraceOptions, MooncakeTicksStayExactMultiplesOfTheirMilliseconds) {
  const Trace t = read_trace(kMooncake);
  for (const auto& r : t.requests) ASSERT_EQ(r.arrival_ns % 1'000'000, 0);
}

TEST(TraceOptions, AllAtOnceKeepsFileOrder) {
  TraceReadOptions o;
  o.arrival = ArrivalMode::ALL_AT_ONCE;
  o.max_requests = 100;
  const Trace t = read_trace(KVSIM_SOURCE_DIR "/tests/data/traces/kvsim_sample.jsonl", o);
  ASSERT_EQ(t.requests.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(t.requests[i].arrival_ns, 0);
    EXPECT_EQ(t.requests[i].source_line, static_cast<int64_t>(i) + 1);
  }
}

TEST(TraceOptions, PoissonArrivalsForShareGpt) {
  TraceReadOptions o;
  o.arrival = ArrivalMode::POISSON;
  o.rate = 4.0;
  o.seed = 7;
  const Trace a = read_trace(kShareGpt, o);
  const Trace b = read_trace(kShareGpt, o);
  EXPECT_EQ(a.arrival_mode, ArrivalMode::POISSON);
  ASSERT_EQ(a.requests.size(), 30'731u);
  EXPECT_EQ(a.requests[0].arrival_ns, 0);
  EXPECT_EQ(a.requests[0].input_tokens, 74);  // file order kept
  for (size_t i = 0; i < a.requests.size(); ++i) {
    ASSERT_EQ(a.requests[i].arrival_ns, b.requests[i].arrival_ns);
    if (i > 0) {
      ASSERT_GE(a.requests[i].arrival_ns, a.requests[i - 1].arrival_ns);
    }
  }
  // Mean gap 1/rate = 0.25 s; with 30,730 gaps the standard error is 0.25/sqrt(30730) = 1.4 ms.
  const double mean_gap =
      static_cast<double>(a.requests.back().arrival_ns) / 1e9 / (a.requests.size() - 1);
  EXPECT_NEAR(mean_gap, 0.25, 0.01);
  o.seed = 8;
  const Trace c = read_trace(kShareGpt, o);
  EXPECT_NE(c.requests[1].arrival_ns, a.requests[1].arrival_ns);
}

TEST(TraceOptions, BadOptionsAreRejected) {
  TraceReadOptions o;
  o.arrival = ArrivalMode::POISSON;
  EXPECT_THROW(read_trace(kConv, o), std::invalid_argument);  // no rate
  o = {};
  o.time_scale = 0;
  EXPECT_THROW(read_trace(kConv, o), std::invalid_argument);
  o = {};
  o.start_s = 10;
  EXPECT_THROW(read_trace(kShareGpt, o), std::invalid_argument);  // no timestamps to window
}

TEST(TraceRandom, DerivedStreamsDifferAndRepeat) {
  EXPECT_EQ(derive_seed(1, 2), derive_seed(1, 2));
  EXPECT_NE(derive_seed(1, 2), derive_seed(1, 3));
  EXPECT_NE(derive_seed(1, 2), derive_seed(2, 2));
  Rng a(5);
  Rng b(5);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(a.next_u64(), b.next_u64());
  // mt19937_64's 10000th output is fixed by the standard.
  std::mt19937_64 ref;
  ref.discard(9999);
  EXPECT_EQ(ref(), 9981545732273789042ULL);
}

TEST(TraceRandom, VariateMoments) {
  Rng rng(123);
  constexpr int kN = 200'000;
  double s_exp = 0, s_norm = 0, s_norm2 = 0, s_gamma = 0, s_gamma_small = 0;
  int64_t s_int = 0;
  for (int i = 0; i < kN; ++i) {
    s_exp += rng.exponential(2.0);
    const double z = rng.normal();
    s_norm += z;
    s_norm2 += z * z;
    s_gamma += rng.gamma(4.0);
    s_gamma_small += rng.gamma(0.25);
    const int64_t u = rng.uniform_int(3, 7);
    ASSERT_GE(u, 3);
    ASSERT_LE(u, 7);
    s_int += u;
  }
  EXPECT_NEAR(s_exp / kN, 0.5, 0.01);
  EXPECT_NEAR(s_norm / kN, 0.0, 0.01);
  EXPECT_NEAR(s_norm2 / kN, 1.0, 0.02);
  EXPECT_NEAR(s_gamma / kN, 4.0, 0.03);
  EXPECT_NEAR(s_gamma_small / kN, 0.25, 0.01);
  EXPECT_NEAR(static_cast<double>(s_int) / kN, 5.0, 0.02);
}

}  // namespace
}  // namespace kvsim
