// --vllm-version: which vLLM release plan, replay, sweep and size clone (docs/conformance.md).
#include <gtest/gtest.h>

#include <string>

#include "cli_run.h"

namespace {

using kvsim_cli_test::run_kvsim;

const std::string kVersionLesson =
    "--model qwen2.5-7b --gpu rtx4090 --gpu-memory-utilization 0.90 --overhead-gib 1.6 "
    "--weights-gib 5.5 --kv-cache-dtype fp8 --max-model-len 8192";

std::string version_trace() {
  return std::string("'") + KVSIM_SOURCE_DIR + "/traces/BurstGPT_1.head400.csv'";
}

TEST(CliVllmVersion, PlanPrintsEachReleasesStartupLines) {
  const auto old = run_kvsim("plan " + kVersionLesson + " --vllm-version 0.26");
  ASSERT_EQ(old.status, 0) << old.out;
  EXPECT_NE(old.out.find("GPU KV cache size: 543,008 tokens\n"), std::string::npos) << old.out;
  EXPECT_NE(old.out.find("Maximum concurrency for 8,192 tokens per request: 66.29x"),
            std::string::npos);
  const auto now = run_kvsim("plan " + kVersionLesson);  // the default: 0.33
  ASSERT_EQ(now.status, 0) << now.out;
  EXPECT_NE(now.out.find("GPU KV cache size: 543,008 tokens, Maximum concurrency for 8,192 "
                         "tokens per request: 66.29x"),
            std::string::npos)
      << now.out;
  EXPECT_EQ(run_kvsim("plan " + kVersionLesson + " --vllm-version 0.33.0").out, now.out);
}

TEST(CliVllmVersion, UnknownReleaseIsABadFlag) {
  const auto r = run_kvsim("plan " + kVersionLesson + " --vllm-version 0.27");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--vllm-version"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("unknown vLLM release '0.27' (expected 0.26 or 0.33)"), std::string::npos)
      << r.out;
}

TEST(CliVllmVersion, ReplayRefusesArgumentsTheReleaseLacks) {
  for (const char* flag : {"--max-num-active-seqs 4", "--long-prefill-token-threshold-adaptive"}) {
    const auto r = run_kvsim("replay " + version_trace() +
                             " --model qwen2.5-7b --no-progress --vllm-version 0.26 " + flag);
    EXPECT_EQ(r.status, 2) << flag << ": " << r.out;
    EXPECT_NE(r.out.find("is not an engine argument of vLLM 0.26"), std::string::npos) << r.out;
    const auto ok =
        run_kvsim("replay " + version_trace() + " --model qwen2.5-7b --no-progress " + flag);
    EXPECT_EQ(ok.status, 0) << flag << ": " << ok.out;
  }
}

TEST(CliVllmVersion, RetentionIntervalTakesNoneOrATokenCount) {
  const std::string base = "replay " + version_trace() +
                           " --model gpt-oss-20b --gpu h100-80g "
                           "--max-model-len 8192 --no-progress --prefix-cache-retention-interval ";
  EXPECT_EQ(run_kvsim(base + "none").status, 0);
  EXPECT_EQ(run_kvsim(base + "0").status, 0);
  EXPECT_EQ(run_kvsim(base + "256 --vllm-version 0.26").status, 0);
  for (const char* bad : {"-16", "x", "1.5", "99999999999"}) {
    const auto r = run_kvsim(base + bad);
    EXPECT_EQ(r.status, 2) << bad << ": " << r.out;
    EXPECT_NE(r.out.find("--prefix-cache-retention-interval"), std::string::npos) << r.out;
  }
  // Not a multiple of the block size (vLLM's rule for windowed models).
  const auto odd = run_kvsim(base + "100");
  EXPECT_EQ(odd.status, 2) << odd.out;
  EXPECT_NE(odd.out.find("prefix-cache-retention-interval"), std::string::npos) << odd.out;
}

}  // namespace
