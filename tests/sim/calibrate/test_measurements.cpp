// The measurement readers of `kvsim calibrate`: each format, the statistics, and bad input named
// by file, line and field.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "kvsim/sim/calibrate/measurements.h"

namespace kvsim {
namespace {

std::string write_temp(const std::string& name, const std::string& text) {
  const auto dir = std::filesystem::temp_directory_path() / "kvsim_calibrate_tests";
  std::filesystem::create_directories(dir);
  const auto p = dir / name;
  std::ofstream(p, std::ios::binary) << text;
  return p.string();
}

double stat(const MeasuredGroup& g, LatencyStat s) {
  return g.stats[static_cast<size_t>(s)];
}

// numpy's default percentile: linear between closest ranks.
double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

TEST(LatencyStats, MeansAndPercentilesOfTtftTpotE2e) {
  const std::vector<RequestLatency> r = {
      {0.1, 1.1, 11}, {0.2, 2.2, 21}, {0.4, 0.4, 1}, {0.3, 3.3, 31}};
  const LatencyStats s = latency_stats(r);
  EXPECT_DOUBLE_EQ(s[0], (0.1 + 0.2 + 0.4 + 0.3) / 4);
  EXPECT_DOUBLE_EQ(s[1], percentile({0.1, 0.2, 0.4, 0.3}, 0.5));
  EXPECT_DOUBLE_EQ(s[2], percentile({0.1, 0.2, 0.4, 0.3}, 0.9));
  // TPOT: (e2e - ttft) / (output - 1), requests with one output token left out: 0.1 each.
  EXPECT_NEAR(s[3], 0.1, 1e-12);
  EXPECT_DOUBLE_EQ(s[6], (1.1 + 2.2 + 0.4 + 3.3) / 4);
  EXPECT_DOUBLE_EQ(s[8], percentile({1.1, 2.2, 0.4, 3.3}, 0.9));
}

TEST(Measurements, CsvTableWithDurationsSplitsIntoTwoHalves) {
  std::string csv = "request_id,arrival_s,prompt_tokens,output_tokens,ttft_s,e2e_s,status\n";
  for (int i = 0; i < 10; ++i) {
    csv += std::to_string(i) + "," + std::to_string(100 + i) + ".5,50,10,0.0" +
           std::to_string(i + 1) + "," + std::to_string(1 + i) + ".0,finished\n";
  }
  const MeasuredRun run = read_measurements(write_temp("table.csv", csv));
  EXPECT_EQ(run.kind, "requests");
  ASSERT_EQ(run.trace.requests.size(), 10u);
  EXPECT_EQ(run.trace.requests[0].arrival_ns, 0);  // relative to the first arrival
  EXPECT_EQ(run.trace.requests[9].arrival_ns, 9'000'000'000);
  EXPECT_EQ(run.trace.requests[3].input_tokens, 50);
  ASSERT_EQ(run.groups.size(), 2u);
  EXPECT_EQ(run.groups[0].arrival_to_ns, run.groups[1].arrival_from_ns);
  EXPECT_DOUBLE_EQ(stat(run.groups[0], LatencyStat::kTtftMean),
                   (0.01 + 0.02 + 0.03 + 0.04 + 0.05) / 5);
  EXPECT_DOUBLE_EQ(stat(run.groups[1], LatencyStat::kE2eMean), (6.0 + 7 + 8 + 9 + 10) / 5);
  EXPECT_NE(run.data_hash, 0u);
}

TEST(Measurements, JsonlWithTokenTimes) {
  std::string text;
  for (int i = 0; i < 4; ++i) {
    text += R"({"arrival_s": )" + std::to_string(10 + i) + R"(, "prompt_tokens": 100, )" +
            R"("output_tokens": 5, "first_token_s": )" + std::to_string(10 + i) + R"(.25, )" +
            R"("last_token_s": )" + std::to_string(11 + i) + "}\n";
  }
  const MeasuredRun run = read_measurements(write_temp("table.jsonl", text));
  EXPECT_EQ(run.kind, "requests");
  EXPECT_DOUBLE_EQ(stat(run.groups[0], LatencyStat::kTtftMean), 0.25);
  EXPECT_DOUBLE_EQ(stat(run.groups[0], LatencyStat::kTpotMean), 0.75 / 4);
}

TEST(Measurements, VllmBenchResultSkipsFailedRequests) {
  const std::string json = R"({"duration": 3.0, "completed": 3,
    "start_times": [100.0, 100.5, 101.0, 101.5],
    "input_lens": [20, 30, 40, 50], "output_lens": [3, 0, 2, 4],
    "ttfts": [0.1, 0.0, 0.2, 0.3],
    "itls": [[0.05, 0.05], [], [0.1], [0.02, 0.02, 0.02]],
    "errors": ["", "timeout", "", ""]})";
  const MeasuredRun run = read_measurements(write_temp("bench.json", json));
  EXPECT_EQ(run.kind, "vllm-bench");
  EXPECT_EQ(run.skipped_requests, 1);
  ASSERT_EQ(run.trace.requests.size(), 3u);
  EXPECT_EQ(run.trace.requests[1].arrival_ns, 1'000'000'000);
  EXPECT_EQ(run.trace.requests[2].output_tokens, 4);
  // Halves: [request 0] and [requests 2, 3]; E2E = TTFT + sum(ITL).
  EXPECT_DOUBLE_EQ(stat(run.groups[0], LatencyStat::kE2eMean), 0.2);
  EXPECT_DOUBLE_EQ(stat(run.groups[1], LatencyStat::kE2eMean), (0.3 + 0.36) / 2);
}

TEST(Measurements, RunFileWithStagesAndSettings) {
  const std::string trace =
      write_temp("run_trace.jsonl", R"({"arrival_s": 0, "input_tokens": 10, "output_tokens": 4})"
                                    "\n"
                                    R"({"arrival_s": 5, "input_tokens": 12, "output_tokens": 4})"
                                    "\n");
  const std::string run_json = R"({"format": "kvsim-calibration-run/1", "trace": "run_trace.jsonl",
    "settings": {"model": "llama-3.1-8b", "gpu": "h100-80g", "tensor_parallel_size": 2,
                 "max_num_seqs": 64},
    "groups": [{"name": "stage 0", "arrival_from_s": 0, "arrival_to_s": 2,
                "ttft_mean_s": 0.05, "e2e_p90_s": 1.5},
               {"name": "stage 1", "arrival_from_s": 2, "tpot_mean_s": 0.01}]})";
  const MeasuredRun run = read_measurements(write_temp("run.json", run_json));
  EXPECT_EQ(run.kind, "run");
  EXPECT_EQ(run.trace.requests.size(), 2u);
  EXPECT_EQ(run.settings.model, "llama-3.1-8b");
  EXPECT_EQ(run.settings.tensor_parallel_size, 2);
  EXPECT_EQ(run.settings.max_num_seqs, 64);
  ASSERT_EQ(run.groups.size(), 2u);
  EXPECT_EQ(run.groups[0].arrival_to_ns, 2'000'000'000);
  EXPECT_DOUBLE_EQ(stat(run.groups[0], LatencyStat::kE2eP90), 1.5);
  EXPECT_TRUE(std::isnan(stat(run.groups[0], LatencyStat::kTpotMean)));
  EXPECT_DOUBLE_EQ(stat(run.groups[1], LatencyStat::kTpotMean), 0.01);
}

TEST(Measurements, BadInputNamesFileLineAndField) {
  struct Case {
    const char* name;
    std::string text;
    std::string expect;
  };
  const Case cases[] = {
      {"missing.csv", "arrival_s,prompt_tokens,output_tokens,ttft_s\n1,2,3,0.1\n2,2,3,0.1\n",
       "missing.csv:2: missing field \"e2e_s\""},
      {"badnum.csv", "arrival_s,prompt_tokens,output_tokens,ttft_s,e2e_s\n1,2,x,0.1,1\n",
       "badnum.csv:2, field output_tokens: must be a token count"},
      {"neg.jsonl",
       "{\"arrival_s\": 1, \"prompt_tokens\": 2, \"output_tokens\": 3, \"ttft_s\": -1, "
       "\"e2e_s\": 1}\n{\"arrival_s\": 2}\n",
       "neg.jsonl:1, field ttft_s: must be a finite number of seconds"},
      {"order.csv", "arrival_s,prompt_tokens,output_tokens,ttft_s,e2e_s\n1,2,3,0.5,0.1\n",
       "order.csv:2: the last token comes before the first"},
      {"fields.csv", "arrival_s,prompt_tokens,output_tokens,ttft_s,e2e_s\n1,2,3,0.5\n",
       "fields.csv:2: 4 fields, the header has 5"},
      {"bench.json", R"({"ttfts": [0.1], "start_times": [1]})", "without \"input_lens\""},
      {"run.json", R"({"format": "kvsim-calibration-run/2", "trace": "x"})",
       "\"format\" must be \"kvsim-calibration-run/1\""},
      {"other.json", R"({"hello": 1})", "neither a vllm bench result"},
      {"one.csv", "arrival_s,prompt_tokens,output_tokens,ttft_s,e2e_s\n1,2,3,0.1,1\n",
       "needs at least 2 measured requests"},
  };
  for (const Case& c : cases) {
    const std::string path = write_temp(c.name, c.text);
    try {
      read_measurements(path);
      ADD_FAILURE() << "accepted " << c.name;
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find(c.expect), std::string::npos)
          << c.name << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find(c.name), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace kvsim
