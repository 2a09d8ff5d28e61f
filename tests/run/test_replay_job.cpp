// The run room's replay job (kvsim/run/replay_job.h): its rules, spelled for both front ends,
// and what it tells the front ends about the outcome.
#include "kvsim/run/replay_job.h"

#include <gtest/gtest.h>

#include <sstream>
#include <stdexcept>
#include <string>

#include "kvsim/core/param.h"
#include "kvsim/sim/traces/trace.h"
#include "spelled_error.h"

namespace kvsim::run {
namespace {

const std::string kTrace =
    std::string(KVSIM_SOURCE_DIR) + "/traces/AzureLLMInferenceTrace_conv.csv";

TEST(ReplayOptionsRules, SwapSettingsNeedSwapPreemption) {
  ReplayOptions o;
  o.swap_space_gib = 8;
  const auto check = [&o] { check_replay_options(o); };
  EXPECT_EQ(error(check, ParamSpelling::kCli), "--swap-space-gib needs --preemption-mode swap");
  EXPECT_EQ(error(check, ParamSpelling::kPython), "swap_space_gib= needs preemption_mode=swap");
  o.preemption_mode = "swap";
  EXPECT_NO_THROW(check_replay_options(o));
  o.swap_bandwidth_gbps = 0;
  EXPECT_EQ(error(check, ParamSpelling::kCli),
            "--swap-bandwidth-gbps 0: must be a finite number > 0");
}

TEST(ReplayOptionsRules, BackendRules) {
  ReplayOptions o;
  o.backend_max_layers = 2;
  const auto check = [&o] { check_replay_options(o); };
  EXPECT_EQ(error(check, ParamSpelling::kCli), "--backend-max-layers needs --backend host or cuda");
  o.backend = "host";
  EXPECT_NO_THROW(check_replay_options(o));
  o.cluster = ClusterOptions{};
  EXPECT_NO_THROW(check_replay_options(o));  // one replica may hold a host pool
  o.cluster->replicas = 2;
  EXPECT_EQ(error(check, ParamSpelling::kPython),
            "backend=host: a cluster replay (replicas=2) runs the null backend only (a host/cuda "
            "KV pool per replica would not fit one machine); drop backend= or use replicas=1");
  o.backend = "gpu";
  o.cluster.reset();
  o.backend_max_layers.reset();
  EXPECT_THROW(check_replay_options(o), std::invalid_argument);
  o.backend = "null";
  o.preemption_mode = "evict";
  EXPECT_EQ(error(check, ParamSpelling::kPython),
            "preemption_mode=: unknown value 'evict' (expected recompute or swap)");
}

TEST(ReplayOptionsRules, ClusterValuesAreCheckedUpFront) {
  ReplayOptions o;
  o.cluster = ClusterOptions{};
  o.cluster->slo_stop_early = true;
  EXPECT_EQ(error([&o] { check_replay_options(o); }, ParamSpelling::kCli),
            "--slo-stop-early needs an objective (--slo-ttft-p99, --slo-tpot-p99 or "
            "--slo-e2e-p99)");
}

TEST(PrepareReplay, DefaultModelIsNamedAsSuch) {
  TraceReadOptions read;
  read.max_requests = 20;
  const Trace trace = read_trace(kTrace, read);
  ReplayOptions o;
  ReplayJob job = prepare_replay(o, trace, read);
  EXPECT_EQ(job.context.model, std::string(kDefaultModel) + " (default)");
  EXPECT_EQ(job.config.scheduler.block_size, kDefaultBlockSize);
  o.plan.num_layers = 4;
  job = prepare_replay(o, trace, read);
  EXPECT_EQ(job.context.model, std::string(kDefaultModel) + " (default, shape overridden)");
  o.plan.model = "llama-3.1-8b";
  job = prepare_replay(o, trace, read);
  EXPECT_EQ(job.context.model.find("(default"), std::string::npos);
}

TEST(PrepareReplay, AnEmptySelectionIsRefused) {
  TraceReadOptions read;
  read.start_s = 1e6;  // past the last arrival
  const Trace trace = read_trace(kTrace, read);
  EXPECT_NE(error([&] { (void)prepare_replay(ReplayOptions{}, trace, read); }, ParamSpelling::kCli)
                .find("no requests left after filtering"),
            std::string::npos);
}

TEST(ReplayOutcome, ClusterColumnsOnlyWithMoreThanOneReplica) {
  TraceReadOptions read;
  read.max_requests = 300;
  const Trace trace = read_trace(kTrace, read);
  ReplayOptions o;
  o.record_timeline = o.record_requests = true;
  o.cluster = ClusterOptions{};
  ReplayJob one = prepare_replay(o, trace, read);
  ReplayOutcome out = run_replay_job(one);
  ASSERT_TRUE(out.cluster.has_value());
  EXPECT_FALSE(out.timeline_has_replica());
  EXPECT_FALSE(out.requests_have_cluster_columns());
  // The cluster report of one replica matches the plain replay's counts.
  ReplayOptions plain_options = o;
  plain_options.cluster.reset();
  ReplayJob plain = prepare_replay(plain_options, trace, read);
  const ReplayOutcome plain_out = run_replay_job(plain);
  EXPECT_EQ(plain_out.result().summary.finished, out.result().summary.finished);
  EXPECT_EQ(plain_out.result().summary.steps, out.result().summary.steps);
  o.cluster->replicas = 2;
  ReplayJob two = prepare_replay(o, trace, read);
  out = run_replay_job(two);
  EXPECT_TRUE(out.timeline_has_replica());
  EXPECT_TRUE(out.requests_have_cluster_columns());
  EXPECT_EQ(out.result().timeline.size(), out.cluster->timeline_replica.size());
  EXPECT_EQ(out.result().summary.requests, 300);
}

TEST(ReplayOutcome, AllRejectedSaysWhy) {
  TraceReadOptions read;
  read.max_requests = 5;
  const Trace trace = read_trace(kTrace, read);
  ReplayOptions o;
  o.plan.model = "qwen2.5-7b";
  o.plan.max_model_len = 1;
  const ReplayJob job = prepare_replay(o, trace, read);
  const ReplayOutcome out = run_replay_job(job);
  ASSERT_TRUE(out.all_rejected());
  EXPECT_EQ(out.all_rejected_message().rfind("all 5 requests were rejected (5 ", 0), 0u)
      << out.all_rejected_message();
  EXPECT_NE(out.all_rejected_message().find("max_model_len 1"), std::string::npos);
  EXPECT_TRUE(out.verification_failure().empty());
}

// The first sample's timestamp (the last field of the first sample line).
std::string first_metrics_stamp(const ReplayOutcome& out) {
  std::ostringstream os;
  out.write_metrics(os);
  std::istringstream in(os.str());
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    return line.substr(line.rfind(' ') + 1);
  }
  return {};
}

std::string first_log_line(const ReplayOutcome& out) {
  std::ostringstream os;
  out.write_vllm_log(os);
  return os.str().substr(0, os.str().find('\n'));
}

TEST(ReplayOutcome, MetricsStartDefaultsToTheTracesClock) {
  TraceReadOptions read;
  read.max_requests = 50;
  ReplayOptions o;
  o.record_timeline = o.record_requests = true;
  // Azure: the first TIMESTAMP, 2023-11-16 18:15:46.6805900 UTC (Prometheus keeps ms).
  const Trace azure = read_trace(kTrace, read);
  const ReplayJob job = prepare_replay(o, azure, read);
  const ReplayOutcome out = run_replay_job(job);
  EXPECT_EQ(first_metrics_stamp(out), "1700158546.680");
  EXPECT_EQ(first_log_line(out).rfind("INFO 11-16 18:15:56 ", 0), 0u) << first_log_line(out);
  // Given, metrics_start wins.
  o.metrics_start = 1700000000;
  const ReplayJob given = prepare_replay(o, azure, read);
  EXPECT_EQ(first_metrics_stamp(run_replay_job(given)), "1700000000.000");
  // No trace clock (BurstGPT's relative seconds): the fixed 2025-01-01T00:00:00Z.
  o.metrics_start.reset();
  const Trace burst =
      read_trace(std::string(KVSIM_SOURCE_DIR) + "/traces/BurstGPT_1.head400.csv", read);
  const ReplayJob fixed = prepare_replay(o, burst, read);
  EXPECT_EQ(first_metrics_stamp(run_replay_job(fixed)), "1735689600.000");
}

// run_replay_job's timeline sink: the plain replay streams the held bytes and keeps no rows;
// a cluster job and a job without record_timeline refuse one; the metrics then refuse too.
TEST(ReplayOutcome, ATimelineSinkStreamsTheHeldRows) {
  TraceReadOptions read;
  read.max_requests = 300;
  const Trace trace = read_trace(kTrace, read);
  ReplayOptions o;
  o.record_timeline = o.record_requests = true;
  const ReplayJob job = prepare_replay(o, trace, read);
  const ReplayOutcome held = run_replay_job(job);
  std::ostringstream want;
  write_timeline_csv(want, held.result().timeline);
  std::ostringstream got;
  TimelineCsvWriter writer(got);
  const ReplayOutcome streamed = run_replay_job(job, {}, 0, &writer);
  writer.finish();
  EXPECT_TRUE(streamed.timeline_streamed);
  EXPECT_FALSE(held.timeline_streamed);
  EXPECT_TRUE(streamed.result().timeline.empty());
  EXPECT_EQ(got.str(), want.str());
  EXPECT_EQ(streamed.result().requests.size(), held.result().requests.size());
  std::ostringstream metrics;
  EXPECT_THROW(streamed.write_metrics(metrics), std::logic_error);
  EXPECT_THROW(streamed.write_vllm_log(metrics), std::logic_error);

  ReplayOptions no_rows = o;
  no_rows.record_timeline = false;
  const ReplayJob quiet = prepare_replay(no_rows, trace, read);
  std::ostringstream sink_os;
  TimelineCsvWriter sink(sink_os);
  EXPECT_THROW((void)run_replay_job(quiet, {}, 0, &sink), std::invalid_argument);
  ReplayOptions cluster = o;
  cluster.cluster = ClusterOptions{};
  const ReplayJob one = prepare_replay(cluster, trace, read);
  EXPECT_THROW((void)run_replay_job(one, {}, 0, &sink), std::invalid_argument);
}

}  // namespace
}  // namespace kvsim::run
