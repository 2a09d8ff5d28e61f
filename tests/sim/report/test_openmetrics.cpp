// The OpenMetrics writer and the vLLM log (openmetrics.h, vllm_log.h): the sampling rule on a
// hand-made replay, vLLM's names, labels and buckets, the "# EOF" ending, the log line.
// (tools/check_prometheus_roundtrip.py imports real files into a real Prometheus.)
#include <gtest/gtest.h>

#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "kvsim/sim/report/openmetrics.h"
#include "kvsim/sim/report/vllm_log.h"

namespace kvsim {
namespace {

constexpr int64_t kS = 1'000'000'000;

TimelineRow row(int64_t time_ns, int64_t duration_ns, int32_t running, int32_t waiting,
                int32_t used, int64_t tokens, int32_t preemptions = 0) {
  TimelineRow r;
  r.time_ns = time_ns;
  r.duration_ns = duration_ns;
  r.running = running;
  r.waiting = waiting;
  r.used_blocks = used;
  r.free_blocks = 100 - used;
  r.scheduled_tokens = tokens;
  r.preemptions = preemptions;
  return r;
}

RequestRecord request(int64_t arrival, int64_t first_token, int64_t finish, int32_t prompt,
                      int32_t output) {
  RequestRecord q;
  q.arrival_ns = arrival;
  q.first_scheduled_ns = arrival;
  q.first_token_ns = first_token;
  q.finish_ns = finish;
  q.prompt_tokens = prompt;
  q.output_tokens = output;
  q.finished = true;
  return q;
}

struct Fixture {
  // Busy from 0 to 20 s (two 10 s steps), idle to 40 s, one step 40-41 s.
  std::vector<TimelineRow> rows = {row(0, 10 * kS, 2, 1, 30, 500),
                                   row(10 * kS, 10 * kS, 1, 0, 10, 1),
                                   row(40 * kS, 1 * kS, 1, 0, 5, 100, 1)};
  std::vector<RequestRecord> requests = {request(0, 10 * kS, 20 * kS, 400, 11),
                                         request(40 * kS, 41 * kS, 41 * kS, 100, 1)};
  MetricsSampling sampling{"m\"x", 15 * kS, 1735689600 * kS};
  std::vector<EngineRecords> engines() const { return {{rows, requests}}; }
};

std::string metrics_text(const Fixture& f) {
  std::ostringstream os;
  const std::vector<EngineRecords> e = f.engines();
  write_openmetrics(os, e, f.sampling);
  return os.str();
}

TEST(OpenMetrics, SamplesTheStepInProgressAndZeroWhenIdle) {
  const std::string text = metrics_text(Fixture{});
  const std::string labels = "{model_name=\"m\\\"x\",engine=\"0\"}";
  // Scrapes at 0, 15, 30, 45 s (the first at or after the end, 41 s).
  EXPECT_NE(text.find("vllm:num_requests_running" + labels + " 2 1735689600.000\n"),
            std::string::npos);
  EXPECT_NE(text.find("vllm:num_requests_running" + labels + " 1 1735689615.000\n"),
            std::string::npos);
  EXPECT_NE(text.find("vllm:num_requests_running" + labels + " 0 1735689630.000\n"),
            std::string::npos);  // idle gap
  EXPECT_NE(text.find("vllm:num_requests_running" + labels + " 0 1735689645.000\n"),
            std::string::npos);  // after the run
  EXPECT_EQ(text.find("1735689660.000"), std::string::npos);
  EXPECT_NE(text.find("vllm:num_requests_waiting" + labels + " 1 1735689600.000\n"),
            std::string::npos);
  EXPECT_NE(text.find("vllm:kv_cache_usage_perc" + labels + " 0.3 1735689600.000\n"),
            std::string::npos);
  EXPECT_NE(text.find("# TYPE vllm:num_preemptions counter\n"), std::string::npos);
  EXPECT_NE(text.find("vllm:num_preemptions_total" + labels + " 1 1735689645.000\n"),
            std::string::npos);
  EXPECT_NE(text.find("vllm:generation_tokens_total" + labels + " 12 1735689645.000\n"),
            std::string::npos);
  // Request 0's 11 tokens spread from 10 s to 20 s: at 15 s, 1 + floor(5/10 * 10) = 6.
  EXPECT_NE(text.find("vllm:generation_tokens_total" + labels + " 6 1735689615.000\n"),
            std::string::npos);
  EXPECT_NE(text.find("vllm:prompt_tokens_total" + labels + " 500 1735689645.000\n"),
            std::string::npos);
  const std::string success = "vllm:request_success_total{model_name=\"m\\\"x\",engine=\"0\",";
  EXPECT_NE(text.find(success + "finished_reason=\"length\"} 2 1735689645.000\n"),
            std::string::npos);
  EXPECT_NE(text.find(success + "finished_reason=\"repetition\"} 0 1735689645.000\n"),
            std::string::npos);
  // vLLM's buckets, written as prometheus_client writes them.
  EXPECT_NE(text.find("vllm:time_to_first_token_seconds_bucket{model_name=\"m\\\"x\","
                      "engine=\"0\",le=\"2560.0\"} 2 1735689645.000\n"),
            std::string::npos);
  EXPECT_NE(text.find("vllm:iteration_tokens_total_bucket{model_name=\"m\\\"x\",engine=\"0\","
                      "le=\"512.0\"} 3 1735689645.000\n"),
            std::string::npos);
  // ITL: request 0's 10 gaps of 1 s each.
  EXPECT_NE(text.find("vllm:inter_token_latency_seconds_count" + labels + " 10 1735689645.000\n"),
            std::string::npos);
  EXPECT_NE(text.find("vllm:inter_token_latency_seconds_sum" + labels + " 10.0 1735689645.000\n"),
            std::string::npos);
  ASSERT_GE(text.size(), 6U);
  EXPECT_EQ(text.substr(text.size() - 6), "# EOF\n");
}

TEST(OpenMetrics, RejectsAnIntervalThatIsNotWholeMilliseconds) {
  Fixture f;
  f.sampling.interval_ns = 1'500'000 + 1;
  EXPECT_THROW(metrics_text(f), std::invalid_argument);
  f.sampling.interval_ns = 10'000'000;  // 10 ms over 41 s: 4101 scrapes, allowed
  EXPECT_NO_THROW(metrics_text(f));
}

TEST(VllmLog, WritesVllmsLineAndLeavesIdleIntervalsOut) {
  Fixture f;
  f.sampling.interval_ns = 10 * kS;
  std::ostringstream os;
  const std::vector<EngineRecords> e = f.engines();
  write_vllm_log(os, e, f.sampling);
  const std::string log = os.str();
  EXPECT_NE(log.find("INFO 01-01 00:00:10 [loggers.py:310] Engine 000: Avg prompt throughput: "
                     "40.0 tokens/s, Avg generation throughput: 0.1 tokens/s, Running: 1 reqs, "
                     "Waiting: 0 reqs, GPU KV cache usage: 10.0%, Prefix cache hit rate: 0.0%\n"),
            std::string::npos)
      << log;
  // 30 s: no token in (20, 30] but some in (10, 20]: still logged; 40 s: idle, left out.
  EXPECT_NE(log.find("INFO 01-01 00:00:30 "), std::string::npos) << log;
  EXPECT_EQ(log.find("INFO 01-01 00:00:40 "), std::string::npos) << log;
  EXPECT_NE(log.find("INFO 01-01 00:00:50 [loggers.py:310] Engine 000: Avg prompt throughput: "
                     "10.0 tokens/s, Avg generation throughput: 0.1 tokens/s, Running: 0 reqs, "
                     "Waiting: 0 reqs, Preemptions: 1, GPU KV cache usage: 0.0%"),
            std::string::npos)
      << log;
}

}  // namespace
}  // namespace kvsim
