// The reviewer's overflow reproductions, end to end: each must exit 2 with exactly one line,
// "kvsim: error: ...", naming the flag or the file, line and field - never UB, a hang, a wrapped
// number or a silent clip.
#include <gtest/gtest.h>

#include "../scratch_dir_test.h"

#include <sys/wait.h>
#include "cli_run.h"

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace {

using kvsim_cli_test::CliRun;
using kvsim_cli_test::run_kvsim;

// Exit 2 and exactly "kvsim: error: <message>\n".
void expect_overflow_error(const std::string& args, const std::string& message) {
  const CliRun r = run_kvsim(args);
  EXPECT_EQ(r.status, 2) << args;
  EXPECT_EQ(r.out, "kvsim: error: " + message + "\n") << args;
}

using CliOverflow = kvsim_test::ScratchDirTest;

const std::string kCodeTrace = std::string(KVSIM_SOURCE_DIR) + "/traces/splitwise_code.csv";

TEST_F(CliOverflow, ReplayArrivalWithNoClockHeadroom) {
  const std::string p = write("v.csv",
                              "arrived_at,num_prefill_tokens,num_decode_tokens\n0,100,5\n"
                              "9223372036.854775807,100,5\n");
  expect_overflow_error(
      "replay '" + p + "' --no-progress",
      p + ":3: field 'arrived_at': arrival more than 2^62 ns (about 146 years) after the "
          "first request (got '9223372036.854775807 s')");
}

TEST_F(CliOverflow, ReplayStepTimeBounds) {
  expect_overflow_error(
      "replay '" + kCodeTrace + "' --no-progress --step-time fixed:1e300",
      "--step-time 'fixed:1e300': fixed step time must be in [1e-06, 3.6e+06] ms (1 ns "
      "to one hour), got 1e+300");
  expect_overflow_error(
      "replay '" + kCodeTrace + "' --no-progress --step-time fixed:1e9",
      "--step-time 'fixed:1e9': fixed step time must be in [1e-06, 3.6e+06] ms (1 ns to one hour), "
      "got 1e+09");
  expect_overflow_error("replay '" + kCodeTrace + "' --no-progress --step-time roofline:mbu=1e-300",
                        "--step-time 'roofline:mbu=1e-300': mbu must be in [0.001, 1], got 1e-300");
  expect_overflow_error(
      "replay '" + kCodeTrace + "' --no-progress --step-time roofline:overhead_ms=1e300",
      "--step-time 'roofline:overhead_ms=1e300': overhead_ms must be in [0, 3.6e+06] "
      "(one hour), got 1e+300");
}

TEST_F(CliOverflow, ReplayRequestLongerThanInt32) {
  const std::string p = write("long.csv",
                              "arrived_at,num_prefill_tokens,num_decode_tokens\n0,100,5\n"
                              "1,2147483647,5\n");
  expect_overflow_error(
      "replay '" + p + "' --no-progress",
      p + ":3: field 'num_prefill_tokens+num_decode_tokens': request of 2147483652 "
          "tokens; max_model_len (its length + 1) must fit in 2^31 - 1 tokens (got "
          "'2147483647+5')");
}

TEST_F(CliOverflow, PlanShapeFlags) {
  expect_overflow_error("plan --model qwen2.5-7b --num-layers 9223372036854775807",
                        "--num-layers must be in [1, 1024] (got 9223372036854775807)");
  expect_overflow_error("plan --model qwen2.5-7b --num-layers 4611686018427387904 --head-dim 4",
                        "--num-layers must be in [1, 1024] (got 4611686018427387904)");
  expect_overflow_error("plan --model qwen2.5-7b --num-kv-heads 70000",
                        "--num-kv-heads must be in [1, 65536] (got 70000)");
  expect_overflow_error("plan --model qwen2.5-7b --head-dim 70000",
                        "--head-dim must be in [1, 65536] (got 70000)");
  expect_overflow_error("plan --model qwen2.5-7b --vram-gib 1e308",
                        "--vram-gib must be in (0, 1e+06] (got 1e+308)");
  expect_overflow_error("plan --model qwen2.5-7b --vram-gib 1e12",
                        "--vram-gib must be in (0, 1e+06] (got 1e+12)");
  expect_overflow_error("plan --model qwen2.5-7b --num-params 1e300",
                        "--num-params must be in (0, 1e+15] (got 1e+300)");
  expect_overflow_error(
      "plan --model qwen2.5-7b --max-model-len 9000000000000000000",
      "KV bytes per sequence (kappa x max_model_len) overflows 64-bit integers (57344 x "
      "9000000000000000000)");
}

TEST_F(CliOverflow, PlanConfigFields) {
  const std::string p = write("config.json",
                              "{\"num_hidden_layers\": 9223372036854775807,\n"
                              " \"num_attention_heads\": 32, \"hidden_size\": 4096}\n");
  expect_overflow_error(
      "plan --config '" + p + "' --weights-gib 1",
      p + ":1: field 'num_hidden_layers': 9223372036854775807 is out of range [1, 1024]");
  expect_overflow_error("plan --config '" + dir_.string() + "'",
                        dir_.string() + ": is a directory, not a config.json file");
}

TEST_F(CliOverflow, GenPromptLimits) {
  const std::string out = (dir_ / "g.jsonl").string();
  expect_overflow_error(
      "gen -o '" + out +
          "' -n 2 --prefix-groups 1 --prefix-tokens 2147483000 --input-len fixed:1000 "
          "--hash-block-size 1073741824",
      "--prefix-tokens must be < 16777216 (the longest generated prompt; got 2147483000)");
  // Used to build 134M hash ids per request and hang.
  expect_overflow_error(
      "gen -o '" + out + "' -n 2 --prefix-groups 3 --prefix-tokens 2147483647",
      "--prefix-tokens must be < 16777216 (the longest generated prompt; got 2147483647)");
  expect_overflow_error(
      "gen -o '" + out + "' -n 2 --input-len fixed:99999999999",
      "--input-len: length distribution 'fixed:99999999999': N must be an integer in [1, 16777216] "
      "(expected fixed:N, uniform:LO,HI, normal:MEAN,SIGMA, lognormal:MU,SIGMA, "
      "zipf:S,MAX or empirical:PATH)");
  EXPECT_FALSE(std::filesystem::exists(out));
}

TEST_F(CliOverflow, GenGammaCv) {
  const std::string out = (dir_ / "g.jsonl").string();
  expect_overflow_error("gen -o '" + out + "' -n 3 --arrival gamma --cv 1e-300",
                        "--cv must be in [0.001, 1000] (got 1e-300)");
  expect_overflow_error("gen -o '" + out + "' -n 3 --arrival gamma --cv 1e300",
                        "--cv must be in [0.001, 1000] (got 1e+300)");
}

}  // namespace
