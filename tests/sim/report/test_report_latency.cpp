// The replay report says how its latency percentiles were obtained: exact nearest-rank values up
// to kExactLatencySamples finished requests, mergeable sketches beyond (docs/metrics-sketch.md).
#include <gtest/gtest.h>

#include <string>

#include "kvsim/sim/report/report.h"
#include "kvsim/sim/stats/latency_stats.h"

namespace kvsim {
namespace {

ReplaySummary summary_with(const LatencyCollector& c) {
  ReplaySummary s;
  LatencyCollector copy = c;
  s.latency = copy.report();
  s.finished = static_cast<int64_t>(c.size());
  return s;
}

TEST(ReportLatency, ExactPercentilesAreSaidSoAndAddNoTextLine) {
  LatencyCollector c;
  for (int64_t i = 1; i <= 100; ++i) c.add({0, i, 2 * i, 3 * i, 2});
  const ReplaySummary s = summary_with(c);
  ReportContext ctx;
  const auto j = replay_summary_json(s, ctx);
  EXPECT_EQ(j.at("latency_percentiles"), "exact");
  EXPECT_EQ(j.at("latency_percentile_relative_error"), 0.0);
  EXPECT_EQ(format_replay_report(s, ctx).find("sketches"), std::string::npos);
}

TEST(ReportLatency, SketchedPercentilesNameTheirErrorBound) {
  LatencyCollector c(/*exact_limit=*/10);
  for (int64_t i = 1; i <= 100; ++i) c.add({0, i, 2 * i, 3 * i, 2});
  const ReplaySummary s = summary_with(c);
  ASSERT_FALSE(s.latency.percentiles_exact);
  ReportContext ctx;
  const auto j = replay_summary_json(s, ctx);
  EXPECT_EQ(j.at("latency_percentiles"), "sketch");
  EXPECT_GT(j.at("latency_percentile_relative_error").get<double>(), 0.0);
  EXPECT_LE(j.at("latency_percentile_relative_error").get<double>(), 0.01);
  const std::string text = format_replay_report(s, ctx);
  EXPECT_NE(text.find("percentiles from mergeable sketches, within 0.5% of the exact values"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace kvsim
