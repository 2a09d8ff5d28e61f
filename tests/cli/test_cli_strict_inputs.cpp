// Inputs that used to be accepted or half-accepted are refused up front, with one line naming
// the flag and the value (issue 23, section 3): an unknown command even with --help, router
// knobs for a router that is not chosen, KV dtypes nobody knows.
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "cli_run.h"

namespace {

using kvsim_cli_test::cat;
using kvsim_cli_test::CliRun;
using kvsim_cli_test::run_kvsim;

const std::string kTrace = cat({KVSIM_SOURCE_DIR, "/tests/data/traces/azure_head.csv.gz"});

void expect_exact_error(const std::string& args, const std::string& message) {
  SCOPED_TRACE(args);
  const CliRun r = run_kvsim(args);
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_EQ(r.out, cat({"kvsim: error: ", message, "\n"}));
}

TEST(CliStrictInputs, UnknownCommandIsAnErrorEvenWithHelp) {
  for (const char* args : {"NOSUCHCOMMAND --help", "--version NOSUCHCOMMAND"}) {
    SCOPED_TRACE(args);
    const CliRun r = run_kvsim(args);
    EXPECT_EQ(r.status, 2) << r.out;
    EXPECT_EQ(
        r.out.rfind("kvsim: error: unknown command 'NOSUCHCOMMAND' (expected plan, replay, gen, "
                    "sweep, size",
                    0),
        0U)
        << r.out;
  }
  EXPECT_EQ(run_kvsim("--help", "2>/dev/null >/dev/null").status, 0);
  EXPECT_EQ(run_kvsim("replay --help", "2>/dev/null >/dev/null").status, 0);
}

TEST(CliStrictInputs, RouterKnobsNeedTheirRouter) {
  const std::string replay =
      cat({"replay '", kTrace, "' --model qwen2.5-7b --no-progress --replicas 2 "});
  expect_exact_error(
      cat({replay, "--affinity-load-factor 2"}),
      "--affinity-load-factor needs --router prefix-affinity (got --router round-robin)");
  expect_exact_error(
      cat({replay, "--router kv-aware --affinity-prefix-blocks 8"}),
      "--affinity-prefix-blocks needs --router prefix-affinity (got --router kv-aware)");
  expect_exact_error(
      cat({replay, "--router prefix-affinity --kv-aware-load-weight 2"}),
      "--kv-aware-load-weight needs --router kv-aware (got --router prefix-affinity)");
  EXPECT_EQ(run_kvsim(cat({replay, "--router prefix-affinity --affinity-load-factor 2"}),
                      "2>/dev/null >/dev/null")
                .status,
            0);
}

TEST(CliStrictInputs, KvCacheDtypesAreCheckedUpFront) {
  const std::string list =
      "(expected auto, bfloat16, float16, float32, fp8, fp8_e4m3, fp8_e5m2 or fp8_ds_mla)";
  expect_exact_error("plan --model qwen2.5-7b --kv-cache-dtype fp88",
                     cat({"--kv-cache-dtype: unknown value 'fp88' ", list}));
  expect_exact_error(cat({"sweep '", kTrace, "' --model qwen2.5-7b --kv-cache-dtypes auto,fp88"}),
                     cat({"--kv-cache-dtypes: unknown value 'fp88' ", list}));
  const std::string size = cat({"size '", kTrace,
                                "' --model qwen2.5-7b --gpus l40s --tp 1 --slo-ttft-p99 1 "
                                "--slo-tpot-p99 1 --kv-cache-dtype "});
  expect_exact_error(cat({size, "auto,fp88"}),
                     cat({"--kv-cache-dtype: unknown value 'fp88' ", list}));
  expect_exact_error(cat({size, "auto,fp8_ds_mla"}),
                     "--kv-cache-dtype: fp8_ds_mla needs an MLA model ('qwen2.5-7b' is not one)");
  expect_exact_error(cat({"sweep '", kTrace, "' --model qwen2.5-7b --kv-cache-dtypes fp8_ds_mla"}),
                     "--kv-cache-dtypes: fp8_ds_mla needs an MLA model ('qwen2.5-7b' is not one)");
}

TEST(CliStrictInputs, AllRejectedNamesTheReasonsAlsoForAdmissionControl) {
  const CliRun r = run_kvsim(cat({"replay '", kTrace,
                                  "' --model qwen2.5-7b --no-progress --replicas 2 "
                                  "--admission-max-waiting-tokens 1"}),
                             "2>&1 >/dev/null");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("kvsim: error: all 4 requests were rejected (4 admission_token_limit); "),
            std::string::npos)
      << r.out;
}

TEST(CliStrictInputs, NulByteInAColumnKvsimDoesNotReadIsRefused) {
  const std::string path =
      (std::filesystem::temp_directory_path() / "kvsim_strict_inputs_nul.csv").string();
  const std::string csv = std::string("arrived_at,num_prefill_tokens,num_decode_tokens,note\n") +
                          "0,10,2,ok\n1,20,3,a" + std::string(1, '\0') + "b\n";
  std::ofstream(path, std::ios::binary) << csv;
  const CliRun r = run_kvsim(cat({"replay '", path, "' --model qwen2.5-7b --no-progress"}));
  std::filesystem::remove(path);
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find(cat({"kvsim: error: ", path, ":3: field 'note': NUL byte (got 'a\\x00b')"})),
            std::string::npos)
      << r.out;
}

}  // namespace
