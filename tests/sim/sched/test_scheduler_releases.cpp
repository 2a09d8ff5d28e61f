// What differs between the vLLM releases the scheduler clones (core/vllm_version.h), each rule
// checked on a hand-made case under both releases. The recorded goldens of both wheels
// (test_vllm_goldens.cpp) check the same rules step by step; these name them one at a time.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "kvsim/core/param.h"
#include "kvsim/core/vllm_version.h"
#include "kvsim/sim/sched/scheduler.h"
#include "scheduler_harness.h"

namespace kvsim {
namespace {

using namespace scheduler_test;

using ReleaseHarness = SyncHarness;

SchedulerConfig release(SchedulerConfig c, VllmVersion v) {
  c.behavior = vllm_behavior(v);
  return c;
}

TEST(SchedulerReleases, BehaviourTableIsTheReleaseRule) {
  const VllmBehavior old = vllm_behavior(VllmVersion::kV0_26);
  const VllmBehavior now = vllm_behavior(VllmVersion::kV0_33);
  EXPECT_EQ(old.version, VllmVersion::kV0_26);
  EXPECT_FALSE(old.prefix_cache_stats_at_admission);
  EXPECT_FALSE(old.lone_request_ignores_threshold);
  EXPECT_FALSE(old.priority_preemption_continues);
  EXPECT_EQ(old.default_prefix_cache_retention_interval, -1);
  EXPECT_TRUE(now.prefix_cache_stats_at_admission);
  EXPECT_TRUE(now.lone_request_ignores_threshold);
  EXPECT_TRUE(now.priority_preemption_continues);
  EXPECT_EQ(now.default_prefix_cache_retention_interval, 0);
  EXPECT_EQ(now.large_card_batched_tokens, 16384);
  // The struct default is 0.26's (tests that build a SchedulerConfig by hand keep 0.26).
  EXPECT_EQ(SchedulerConfig{}.behavior.version, VllmVersion::kV0_26);
  EXPECT_EQ(parse_vllm_version("0.33.0"), VllmVersion::kV0_33);
  EXPECT_EQ(parse_vllm_version("0.26"), VllmVersion::kV0_26);
  EXPECT_FALSE(parse_vllm_version("0.27").has_value());
  EXPECT_FALSE(parse_vllm_version("").has_value());
}

// A head-of-line request blocked by the pool is looked up every step: 0.26 counts each lookup,
// 0.33 only the admission.
TEST(SchedulerReleases, PrefixCacheStatsCountAdmissionsIn033) {
  for (const VllmVersion v : {VllmVersion::kV0_26, VllmVersion::kV0_33}) {
    // bs 4, 6 blocks (5 usable): the first request holds 4 blocks for 3 steps.
    ReleaseHarness h(release(small(6, 4, true), v));
    h.add_unique(13, 3);  // 4 blocks at admission (13 + 3 tokens)
    h.add_unique(8, 1);   // needs 2 blocks + gate: waits while the first runs
    int steps = 0;
    while (h.s.has_unfinished_requests() && steps < 20) {
      h.step();
      ++steps;
    }
    const PrefixCacheStats& st = h.s.kv_cache_manager().prefix_cache_stats();
    if (v == VllmVersion::kV0_33) {
      EXPECT_EQ(st.requests, 2) << "0.33 records each admission once";
      EXPECT_EQ(st.queries, 13 + 8);
    } else {
      EXPECT_GT(st.requests, 2) << "0.26 records the blocked head's every lookup";
    }
  }
}

// One request alone: 0.33 prefills it at the full budget, 0.26 at the threshold.
TEST(SchedulerReleases, LoneRequestIgnoresThresholdIn033) {
  for (const VllmVersion v : {VllmVersion::kV0_26, VllmVersion::kV0_33}) {
    SchedulerConfig c = release(small(100, 4, false), v);
    c.long_prefill_token_threshold = 16;
    ReleaseHarness h(c);
    h.add_unique(100, 2);
    const SchedulerOutput& o = h.step();
    ASSERT_EQ(o.scheduled.size(), 1u);
    EXPECT_EQ(o.scheduled[0].num_tokens, v == VllmVersion::kV0_33 ? 100 : 16);
  }
  // Two requests: the threshold holds in both releases.
  for (const VllmVersion v : {VllmVersion::kV0_26, VllmVersion::kV0_33}) {
    SchedulerConfig c = release(small(100, 4, false), v);
    c.long_prefill_token_threshold = 16;
    ReleaseHarness h(c);
    h.add_unique(100, 2);
    h.add_unique(100, 2);
    const SchedulerOutput& o = h.step();
    EXPECT_EQ(scheduled_tokens(o), (std::vector<int32_t>{16, 16}));
  }
}

// --long-prefill-token-threshold-adaptive (0.33): max(threshold, budget / requests).
TEST(SchedulerReleases, AdaptiveThresholdRaisesToBudgetShare) {
  SchedulerConfig c = release(small(200, 4, false), VllmVersion::kV0_33);
  c.max_num_batched_tokens = 120;
  c.long_prefill_token_threshold = 16;
  c.long_prefill_token_threshold_adaptive = true;
  ReleaseHarness h(c);
  h.add_unique(100, 2);
  h.add_unique(100, 2);
  h.add_unique(100, 2);
  const SchedulerOutput& o = h.step();
  EXPECT_EQ(scheduled_tokens(o), (std::vector<int32_t>{40, 40, 40}));  // 120 / 3 > 16
}

// --max-num-active-seqs (0.33) caps admissions, not the running set's limit.
TEST(SchedulerReleases, MaxNumActiveSeqsCapsAdmission) {
  SchedulerConfig c = release(small(200, 4, false), VllmVersion::kV0_33);
  c.max_num_seqs = 8;
  c.max_num_active_seqs = 2;
  ReleaseHarness h(c);
  for (int i = 0; i < 4; ++i) h.add_unique(8, 5);
  const SchedulerOutput& o = h.step();
  EXPECT_EQ(o.scheduled.size(), 2u);
  EXPECT_EQ(o.admission_stop, AdmissionStop::MAX_NUM_SEQS);
}

std::string config_error_of(const SchedulerConfig& c) {
  try {
    validate(c);
  } catch (const std::invalid_argument& e) {
    return spell_params(e.what(), ParamSpelling::kCli);
  }
  return "";
}

TEST(SchedulerReleases, RefusesArgumentsTheReleaseDoesNotHave) {
  SchedulerConfig c = small(100, 4, false);
  c.max_num_active_seqs = 2;
  EXPECT_NE(config_error_of(release(c, VllmVersion::kV0_26))
                .find("--max-num-active-seqs is not an "
                      "engine argument of vLLM 0.26"),
            std::string::npos)
      << config_error_of(release(c, VllmVersion::kV0_26));
  EXPECT_EQ(config_error_of(release(c, VllmVersion::kV0_33)), "");
  c.max_num_active_seqs = c.max_num_seqs + 1;
  EXPECT_NE(config_error_of(release(c, VllmVersion::kV0_33)).find("--max-num-active-seqs"),
            std::string::npos);
  c.max_num_active_seqs = 0;
  c.long_prefill_token_threshold_adaptive = true;
  EXPECT_NE(config_error_of(release(c, VllmVersion::kV0_26))
                .find("--long-prefill-token-threshold-"
                      "adaptive is not an engine argument"),
            std::string::npos);
  EXPECT_EQ(config_error_of(release(c, VllmVersion::kV0_33)), "");
  // 0.33 refuses a threshold above max_model_len; 0.26 (without partial prefills) did not.
  c.long_prefill_token_threshold_adaptive = false;
  c.long_prefill_token_threshold = c.max_model_len + 1;
  EXPECT_EQ(config_error_of(release(c, VllmVersion::kV0_26)), "");
  EXPECT_NE(config_error_of(release(c, VllmVersion::kV0_33))
                .find("cannot be greater than the "
                      "max_model_len"),
            std::string::npos);
}

}  // namespace
}  // namespace kvsim
