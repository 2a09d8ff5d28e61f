// Flag values are taken as typed or refused, quoting the text: an empty value is never "unset",
// integers are decimal and in range (no hex, no octal, no clamping at 2^63 - 1), lengths that
// round to 0 ns are refused, and gen's size is bounded before anything is generated.
#include <string>

#include <gtest/gtest.h>

#include "../scratch_dir_test.h"
#include "cli_run.h"

namespace {

using kvsim_cli_test::cat;
using kvsim_cli_test::CliRun;
using kvsim_cli_test::run_kvsim;

class CliFlags : public kvsim_test::ScratchDirTest {
 protected:
  void SetUp() override {
    ScratchDirTest::SetUp();
    trace_ = write("t.csv", "arrived_at,num_prefill_tokens,num_decode_tokens\n0,10,2\n1,20,3\n");
  }
  void expect_error(const std::string& args, const std::string& message) const {
    SCOPED_TRACE(args);
    const CliRun r = run_kvsim(args);
    EXPECT_EQ(r.status, 2) << r.out;
    EXPECT_NE(r.out.find("kvsim: error: " + message), std::string::npos) << r.out;
  }
  std::string replay(const std::string& extra) const {
    return cat({"replay ", trace_, " --step-time fixed:5 --no-progress ", extra});
  }
  std::string trace_;
};

TEST_F(CliFlags, EmptyValuesAreRefusedForEveryFlag) {
  for (const char* flag : {"--model", "--gpu", "--max-model-len", "--num-gpu-blocks-override",
                           "--config", "--json", "--step-time", "--format", "--time-scale"}) {
    expect_error(replay(cat({flag, " ''"})),
                 cat({flag, ": empty value (give a value or leave the flag out)"}));
  }
  expect_error(cat({"sweep ", trace_, " --shard ''"}), "--shard: empty value");
  expect_error("plan --model ''", "--model: empty value");
  expect_error("gen --hash-block-size ''", "--hash-block-size: empty value");
  expect_error("gen -o ''", "--output: empty value");
}

TEST_F(CliFlags, GenHashBlockSizeZeroIsAnErrorNotSigfpe) {
  expect_error("gen --prefix-groups 1 --prefix-tokens 8 --hash-block-size 0",
               "--hash-block-size: must be > 0, got 0");
}

TEST_F(CliFlags, IntegersAreDecimalAndInRangeQuotingTheText) {
  expect_error("plan --model qwen2.5-7b --max-model-len 9223372036854775808",
               "--max-model-len: '9223372036854775808' is out of range (at most 2^63 - 1)");
  expect_error("plan --model qwen2.5-7b --max-model-len 0x1000",
               "--max-model-len: '0x1000' is not a decimal integer");
  expect_error("plan --model qwen2.5-7b --max-model-len 1e3",
               "--max-model-len: '1e3' is not a decimal integer");
  expect_error("plan --model qwen2.5-7b --vram-gib 0x1p4",
               "--vram-gib: '0x1p4' is not a finite decimal number");
  expect_error("plan --model qwen2.5-7b --vram-gib inf",
               "--vram-gib: 'inf' is not a finite decimal number");
  // "010" is ten (CLI11 alone reads it as octal 8).
  const CliRun r = run_kvsim("plan --model qwen2.5-7b --max-model-len 010 --json", "2>/dev/null");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("\"max_model_len\": 10,"), std::string::npos) << r.out;
}

TEST_F(CliFlags, DurationsThatRoundToZeroAreRefused) {
  expect_error(replay("--duration 1e-12"),
               "--duration 1e-12: rounds to 0 ns; give at least 1e-9 seconds, or 0");
  expect_error("gen --arrival burst --burst-period 1e-12",
               "burst arrivals need --burst-size >= 1 and --burst-period >= 1 ns");
}

TEST_F(CliFlags, GenSizeIsBoundedUpFront) {
  expect_error("gen -n 2147483647", "--num-requests must be in [1, 16777216] (got 2147483647)");
}

TEST_F(CliFlags, LimitFlagsAreAccepted) {
  EXPECT_EQ(
      run_kvsim(replay("--max-input-bytes 100000 --max-line-bytes 1000"), "2>/dev/null").status, 0);
  expect_error(replay("--max-line-bytes 10"),
               cat({trace_, ":1: line longer than the limit of 10 bytes"}));
}

TEST_F(CliFlags, DevZeroInputsHitALimitNamingTheInput) {
  expect_error("replay /dev/zero --no-progress",
               "/dev/zero:1: line longer than the limit of 256 MiB; not a text trace?");
  expect_error("plan --config /dev/zero", "/dev/zero: input larger than the limit of 16 MiB");
  expect_error("sweep --merge /dev/zero",
               "/dev/zero:1: line longer than the limit of 256 MiB; not a text trace?");
}

}  // namespace
