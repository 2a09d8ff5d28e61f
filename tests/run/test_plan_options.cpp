// Plan-input resolution and gen's rules in the run room, with their errors in both spellings.
#include "kvsim/run/plan_options.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "kvsim/core/param.h"
#include "kvsim/run/gen_job.h"
#include "kvsim/run/plan_job.h"
#include "spelled_error.h"

namespace kvsim::run {
namespace {

TEST(PlanOptions, DefaultsAreVllmsAndTheLessonsCard) {
  const PlanOptions o;
  EXPECT_EQ(o.block_size, kDefaultBlockSize);
  EXPECT_TRUE(uses_default_gpu(o));
  EXPECT_FALSE(model_given(o));
  PlanOptions m;
  m.model = "qwen2.5-7b";
  const PlanInputs in = resolve_plan_inputs(m);
  EXPECT_EQ(in.gpu.name, kDefaultGpu);
  EXPECT_EQ(in.block_size, kDefaultBlockSize);
  EXPECT_DOUBLE_EQ(in.gpu_memory_utilization, kDefaultGpuMemoryUtilization);
}

TEST(PlanOptions, ErrorsNameTheParameterInEachSpelling) {
  PlanOptions o;
  o.model = "qwen2.5-7b";
  o.config_path = "config.json";
  const auto resolve = [&o] { (void)resolve_plan_inputs(o); };
  EXPECT_EQ(error(resolve, ParamSpelling::kCli), "give either --model or --config, not both");
  EXPECT_EQ(error(resolve, ParamSpelling::kPython), "give either model= or config=, not both");
  o.config_path.clear();
  o.vram_gib = -1;
  EXPECT_EQ(error(resolve, ParamSpelling::kPython).rfind("vram_gib= must be in (0, ", 0), 0u);
  EXPECT_EQ(error([] { check_kv_cache_dtype("kv_cache_dtypes", "fp88"); }, ParamSpelling::kCli),
            "--kv-cache-dtypes: unknown value 'fp88' (expected auto, bfloat16, float16, float32, "
            "fp8, fp8_e4m3, fp8_e5m2 or fp8_ds_mla)");
  PlanOptions shape;
  shape.num_layers = 4;
  EXPECT_EQ(error([&shape] { (void)resolve_plan_inputs(shape); }, ParamSpelling::kCli)
                .rfind("no model: pass --model NAME (", 0),
            0u);
}

TEST(PlanJob, ConcurrencyAndSchedulerKnobsReachThePlan) {
  PlanJobOptions o;
  o.plan.model = "qwen2.5-7b";
  o.concurrency = 8;
  const Plan p = run_plan(o);
  ASSERT_TRUE(p.concurrency.has_value());
  EXPECT_EQ(*p.concurrency, 8);
  EXPECT_TRUE(plan_to_json(p).contains("max_context_tokens"));
}

TEST(GenJob, SettingsThatWouldBeIgnoredAreRefused) {
  GenJobOptions o;
  o.arrival = "burst";
  o.given.insert("rate");
  EXPECT_EQ(error([&o] { (void)resolve_gen_options(o); }, ParamSpelling::kCli),
            "--rate needs --arrival poisson, gamma or constant");
  o.given.clear();
  o.gen.prefix_groups = 2;
  EXPECT_EQ(error([&o] { (void)resolve_gen_options(o); }, ParamSpelling::kPython),
            "prefix_groups= needs prefix_tokens= (tokens per shared prompt)");
  o.gen.prefix_tokens = 32;
  o.given.insert("prefix_tokens");
  o.given.insert("vocab_size");
  EXPECT_EQ(error([&o] { (void)resolve_gen_options(o); }, ParamSpelling::kCli),
            "--vocab-size needs --prefix-groups > 0 and --prefix-as token-ids");
  o.given.erase("vocab_size");
  const GenResult r = run_gen(resolve_gen_options(o));
  EXPECT_EQ(static_cast<int64_t>(r.requests.size()), o.gen.num_requests);
  EXPECT_EQ(r.summary("stdout").rfind("wrote 1000 requests to stdout (span ", 0), 0u);
}

}  // namespace
}  // namespace kvsim::run
