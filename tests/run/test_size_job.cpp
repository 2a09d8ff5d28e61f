// The run room's size and sweep jobs (kvsim/run/size_job.h, sweep_job.h): the rules both front
// ends share, spelled for each, and each candidate's replay command written once for both.
#include "kvsim/run/size_job.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "kvsim/core/param.h"
#include "kvsim/run/grid_values.h"
#include "kvsim/run/sweep_job.h"
#include "spelled_error.h"

namespace kvsim::run {
namespace {

SizeJobOptions valid() {
  SizeJobOptions o;
  o.plan.model = "qwen2.5-7b";
  o.cluster.slo_ttft_p99 = 1;
  o.cluster.slo_tpot_p99 = 0.05;
  o.axes.gpus = {"l40s"};
  o.axes.tensor_parallel_sizes = {1};
  return o;
}

TEST(SizeJob, RulesNameTheParameterInEachFrontEndsSpelling) {
  SizeJobOptions o = valid();
  o.plan.model.clear();
  EXPECT_EQ(error([&] { prepare_size(o); }, ParamSpelling::kCli),
            "size: a model is required (--model, --config, or "
            "--num-layers/--num-kv-heads/--head-dim)");
  o = valid();
  o.cluster.slo_tpot_p99.reset();
  EXPECT_EQ(error([&] { prepare_size(o); }, ParamSpelling::kPython),
            "size: slo_tpot_p99= is required");
  o = valid();
  o.max_replicas = 5000;
  EXPECT_EQ(error([&] { prepare_size(o); }, ParamSpelling::kCli),
            "--max-replicas 5000: must be in [1, 1024]");
  EXPECT_EQ(error([&] { prepare_size(o); }, ParamSpelling::kPython),
            "max_replicas=5000: must be in [1, 1024]");
  o = valid();
  o.axes.kv_cache_dtypes = {"fp88"};
  EXPECT_NE(error([&] { prepare_size(o); }, ParamSpelling::kPython).find("kv_cache_dtype=: "),
            std::string::npos);
  o = valid();
  o.given["seed"] = "3";  // a seed without arrival poisson would be ignored
  EXPECT_NE(error([&] { prepare_size(o); }, ParamSpelling::kCli).find("--seed"), std::string::npos);
  EXPECT_EQ(prepare_size(valid()).searched(), 1);
}

TEST(SizeJob, ReplayCommandPrefixRepeatsTheGivenSettingsInTheClisOrder) {
  SizeJobOptions o = valid();
  o.plan.num_params = 7.6e9;
  o.trace.max_requests = 300;
  o.trace.time_scale = 0.2;
  o.sched.enable_prefix_caching = false;
  o.sched.scheduler_reserve_full_isl = false;
  o.trace.skip_bad_rows = false;  // given as False: no --no-skip-bad-rows exists
  o.sched.step_time = "fixed:15";
  o.cluster.router_seed = 3;
  // Python: ids only, values written from the option structs.
  for (const char* id : {"router_seed", "slo_tpot_p99", "step_time", "scheduler_reserve_full_isl",
                         "skip_bad_rows", "enable_prefix_caching", "time_scale", "max_requests",
                         "num_params", "slo_ttft_p99", "model", "router"}) {
    o.given[id] = "";
  }
  EXPECT_EQ(size_replay_command_prefix(o, "traces/a b.csv"),
            "kvsim replay 'traces/a b.csv' --model qwen2.5-7b --num-params 7600000000 "
            "--max-requests 300 --time-scale 0.2 --no-enable-prefix-caching "
            "--no-scheduler-reserve-full-isl --step-time fixed:15 --slo-ttft-p99 1 "
            "--slo-tpot-p99 0.05 --router-seed 3");
  // The CLI: each value as typed.
  o.given["num_params"] = "7.6e9";
  o.given["slo_tpot_p99"] = "0.050";
  EXPECT_EQ(size_replay_command_prefix(o, "t.csv"),
            "kvsim replay t.csv --model qwen2.5-7b --num-params 7.6e9 --max-requests 300 "
            "--time-scale 0.2 --no-enable-prefix-caching --no-scheduler-reserve-full-isl "
            "--step-time fixed:15 --slo-ttft-p99 1 --slo-tpot-p99 0.050 --router-seed 3");
}

TEST(GridValues, NarrowsTo32BitsNamingTheParameter) {
  EXPECT_EQ(to_int32_values("tp", {1, 2}), (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(error(
                [] {
                  to_int32_values("block_sizes", {16, 99999999999});
                },
                ParamSpelling::kCli),
            "--block-sizes: 99999999999 is too large");
  EXPECT_EQ(error(
                [] {
                  to_int32_values("block_sizes", {16, 99999999999});
                },
                ParamSpelling::kPython),
            "block_sizes=: 99999999999 is too large");
}

TEST(SweepJob, KvDtypesAreCheckedBeforeTheGridAndAgainstTheModel) {
  SweepJobOptions o;
  o.plan.model = "qwen2.5-7b";
  o.axes.kv_cache_dtypes = {"fp88"};
  EXPECT_NE(error([&] { prepare_sweep(o); }, ParamSpelling::kCli).find("--kv-cache-dtypes: "),
            std::string::npos);
  o.axes.kv_cache_dtypes = {"fp8_ds_mla"};
  EXPECT_EQ(error([&] { prepare_sweep(o); }, ParamSpelling::kPython),
            "kv_cache_dtypes=: fp8_ds_mla needs an MLA model ('qwen2.5-7b' is not one)");
  o.axes.kv_cache_dtypes = {"fp8"};
  o.axes.block_sizes = {16, 32};
  o.shard = "1/2";
  const SweepJob job = prepare_sweep(o);
  EXPECT_EQ(job.points.size(), 2u);
  EXPECT_TRUE(job.shard.contains(1) && !job.shard.contains(0));
}

}  // namespace
}  // namespace kvsim::run
