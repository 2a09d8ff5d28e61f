// Bad input to every command gets one line "kvsim: error: ..." naming the flag/file and exit 2:
// merge validation and fingerprints, empty results, stdout write errors, unusable pools, output
// path checks, ignored flags, range messages.
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include "cli_run.h"

namespace {

using kvsim_cli_test::cat;
using kvsim_cli_test::CliRun;
using kvsim_cli_test::run_kvsim;
using kvsim_cli_test::slurp;

namespace fs = std::filesystem;

// The output is exactly one line, and it is the expected error.
void expect_error_mentioning(const std::string& args, const std::string& message) {
  SCOPED_TRACE(args);
  const CliRun r = run_kvsim(args);
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("kvsim: error: " + message), std::string::npos) << r.out;
}

class CliBadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           cat({"kvsim_cli_bad_", std::to_string(::getpid()), "_",
                ::testing::UnitTest::GetInstance()->current_test_info()->name()});
    fs::create_directories(dir_);
    std::ofstream t(dir_ / "trace.csv");
    t << "arrived_at,num_prefill_tokens,num_decode_tokens\n";
    for (int i = 0; i < 24; ++i) t << i * 0.01 << "," << 100 + 37 * i << "," << 5 + i << "\n";
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string replay(const std::string& extra) const {
    return cat({"replay ", path("trace.csv"), " --step-time fixed:5 --no-progress ", extra});
  }
  std::string sweep(const std::string& extra) const {
    return cat({"sweep ", path("trace.csv"),
                " --model qwen2.5-7b --max-model-len 4096 --step-time fixed:5 -q ", extra});
  }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(dir_ / name, std::ios::binary) << text;
  }
  fs::path dir_;
};

// ---- 1, 2: --merge checks every field and the sweep fingerprint ----

TEST_F(CliBadInput, MergeRefusesCorruptRows) {
  ASSERT_EQ(run_kvsim(sweep("--block-sizes 16,32 --csv " + path("all.csv"))).status, 0);
  const std::string good = slurp(dir_ / "all.csv");
  write("cut.csv", good.substr(0, good.size() - 3));
  expect_error_mentioning("sweep --merge " + path("cut.csv"),
                          "--merge: " + path("cut.csv") + ":3: last line has no newline");
  std::string extra = good;
  extra.insert(extra.size() - 1, ",7");
  write("extra.csv", extra);
  expect_error_mentioning("sweep --merge " + path("extra.csv"),
                          "--merge: " + path("extra.csv") + ":3: 33 fields, the header has 32");
  const size_t row2 = good.find('\n', good.find('\n') + 1) + 1;  // start of line 3
  for (const char* bad_index : {"-0", "00", "x"}) {
    std::string s = good;
    s.replace(row2, 1, bad_index);
    write("bad.csv", s);
    expect_error_mentioning(
        "sweep --merge " + path("bad.csv"),
        cat({"--merge: ", path("bad.csv"),
             ":3: column 1 (config_index): not a non-negative integer (got '", bad_index, "')"}));
  }
}

TEST_F(CliBadInput, MergeRefusesShardsOfDifferentSweeps) {
  ASSERT_EQ(run_kvsim(sweep("--block-sizes 16,32 --shard 0/2 --csv " + path("a.csv"))).status, 0);
  ASSERT_EQ(run_kvsim(sweep("--block-sizes 16,64 --shard 1/2 --csv " + path("b.csv"))).status, 0);
  ASSERT_EQ(run_kvsim(sweep("--block-sizes 16,32 --shard 1/2 --csv " + path("c.csv"))).status, 0);
  expect_error_mentioning("sweep --merge " + path("a.csv") + " " + path("b.csv"),
                          "--merge: " + path("b.csv") + ":2: sweep_id ");
  const CliRun r = run_kvsim("sweep --merge " + path("a.csv") + " " + path("b.csv"));
  EXPECT_NE(r.out.find("in " + path("a.csv") + ":2: shards of different sweeps"), std::string::npos)
      << r.out;
  // The same sweep's shards still merge, and equal the unsharded run.
  ASSERT_EQ(run_kvsim(sweep("--block-sizes 16,32 --jobs 2 --csv " + path("all.csv"))).status, 0);
  const CliRun m = run_kvsim("sweep --merge " + path("c.csv") + " " + path("a.csv"));
  EXPECT_EQ(m.status, 0) << m.out;
  EXPECT_EQ(m.out, slurp(dir_ / "all.csv"));
}

TEST_F(CliBadInput, MergeTakesOnlyFilesAndOutput) {
  ASSERT_EQ(run_kvsim(sweep("--block-sizes 16 --csv " + path("a.csv"))).status, 0);
  expect_error_mentioning(
      "sweep --merge " + path("a.csv") + " --model qwen2.5-7b --block-sizes 16",
      "--merge takes only the shard CSVs, -o/--output and --plot (got --model)");
  expect_error_mentioning("sweep --merge " + path("a.csv") + " -o " + path("a.csv"),
                          "--output " + path("a.csv") + ": is the same file as the --merge input");
}

// ---- 3: nothing left to replay ----

TEST_F(CliBadInput, NoRequestsLeftAfterFiltering) {
  expect_error_mentioning(
      replay("--start 100000"),
      path("trace.csv") +
          ": no requests left after filtering (24 data rows read; none in the window "
          "--start 100000 --duration 0)");
  expect_error_mentioning(sweep("--block-sizes 16 --start 100000"),
                          path("trace.csv") + ": no requests left after filtering");
  write("failed.csv",
        "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
        "5,ChatGPT,472,0,472,Conversation log\n"
        "6,ChatGPT,100,0,100,Conversation log\n");
  const CliRun r = run_kvsim(cat({"replay ", path("failed.csv"), " --no-progress"}));
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("no requests left after filtering (2 data rows read; 2 "), std::string::npos)
      << r.out;
  // The first skipped rows' messages follow the dropped-rows summary on stderr.
  write("some_bad.csv",
        "arrived_at,num_prefill_tokens,num_decode_tokens\n0,100,10\nx,1,1\n1,50,5\n");
  for (const std::string cmd : {"replay --no-progress", "sweep --block-sizes 16 --quiet"}) {
    const CliRun s =
        run_kvsim(cat({cmd, " ", path("some_bad.csv"), " --skip-bad-rows --model qwen2.5-7b"}),
                  "2>&1 >/dev/null");
    EXPECT_EQ(s.status, 0) << s.out;
    EXPECT_NE(s.out.find(cat({"kvsim ", cmd.substr(0, cmd.find(' ')),
                              ": 1 of 3 rows dropped: 1 field 'arrived_at': not a number of "
                              "seconds; first bad rows:\n  ",
                              path("some_bad.csv"), ":3: field 'arrived_at'"})),
              std::string::npos)
        << s.out;
  }
  write("bad_rows.csv", "arrived_at,num_prefill_tokens,num_decode_tokens\nx,1,1\ny,2,2\n");
  const CliRun b = run_kvsim(cat({"replay ", path("bad_rows.csv"), " --skip-bad-rows"}));
  EXPECT_EQ(b.status, 2) << b.out;
  EXPECT_NE(b.out.find("no requests left after filtering (2 data rows read; 2 "), std::string::npos)
      << b.out;
}

// ---- 4: stdout write errors ----

TEST_F(CliBadInput, StdoutWriteErrorsFail) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  for (const std::string& args :
       {replay(""), sweep("--block-sizes 16 --csv -"), std::string("plan --model qwen2.5-7b"),
        std::string("gen -n 10")}) {
    SCOPED_TRACE(args);
    const CliRun r = run_kvsim(args, "2>&1 >/dev/full");  // stderr captured, stdout full
    EXPECT_EQ(r.status, 2) << r.out;
    EXPECT_NE(r.out.find("kvsim: error: writing standard output failed"), std::string::npos)
        << r.out;
  }
}

// ---- 5: unusable pools ----

TEST_F(CliBadInput, UnusablePoolsAreRefused) {
  // vLLM 0.26 starts with a pool of one block (the null block): the replay refuses it.
  expect_error_mentioning(
      replay("--block-size 100000 --vllm-version 0.26"),
      "the KV pool has 1 block(s) of 100000 tokens, 0 usable (block 0 is the null "
      "block)");
  // vLLM 0.33 holds the null block back in its start-up check: the plan itself does not fit.
  expect_error_mentioning(
      replay("--block-size 100000"),
      "model 'qwen2.5-7b' does not fit on 'rtx4090': one request of max_model_len 980 "
      "needs 5.34 GiB of KV cache (1 blocks of 100000 tokens), the available KV cache "
      "memory is 0.96 GiB (0 blocks beside the null block)");
  // Every request rejected: the report is printed, then a summary error line and exit 2.
  const CliRun r = run_kvsim(replay("--max-model-len 2"));
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("requests"), std::string::npos);
  EXPECT_NE(r.out.find("kvsim: error: all 24 requests were rejected (24 "), std::string::npos)
      << r.out;
}

TEST_F(CliBadInput, SweepRefusesUnusablePoolsAndAllDeadConfigs) {
  expect_error_mentioning(
      sweep("--block-sizes 16,100000 --vllm-version 0.26"),
      "sweep config 1 (block_size=100000): the KV pool has 1 block(s) of 100000 tokens, 0 usable");
  // Every config rejects everything: exit 2.
  const CliRun all = run_kvsim(cat({"sweep ", path("trace.csv"),
                                    " --model qwen2.5-7b --max-model-len 2 --step-time fixed:5 "
                                    "--block-sizes 16,32"}));
  EXPECT_EQ(all.status, 2) << all.out;
  EXPECT_NE(
      all.out.find("kvsim sweep: warning: config 1 (block_size=32): all 24 requests rejected"),
      std::string::npos)
      << all.out;
  EXPECT_NE(all.out.find("pad%"), std::string::npos) << "the table is still printed";
  EXPECT_NE(all.out.find("kvsim: error: every configuration rejected all 24 requests"),
            std::string::npos)
      << all.out;
}

// ---- 6: output paths are checked before the run ----

TEST_F(CliBadInput, OutputPathsAreCheckedFirst) {
  expect_error_mentioning(replay("--json /nonexistent/x.json"),
                          "--json /nonexistent/x.json: cannot open for writing");
  expect_error_mentioning(replay("--json " + path("o") + " --timeline " + path("o")),
                          "--json and --timeline name the same file");
  expect_error_mentioning(replay("--json - --requests -"),
                          "--json - and --requests - both write to stdout; give at most one '-'");
  expect_error_mentioning(sweep("--block-sizes 16 --csv /nonexistent/x.csv"),
                          "--csv /nonexistent/x.csv: cannot open for writing");
  // The bad path failed before the run: no replay summary on stderr.
  const CliRun r = run_kvsim(replay("--json /nonexistent/x.json"));
  EXPECT_EQ(r.out.find("kvsim replay:"), std::string::npos) << r.out;
}

// ---- 7: flags that would be ignored or coerced ----

TEST_F(CliBadInput, IgnoredOrCoercedFlagsAreErrors) {
  expect_error_mentioning("gen --seed -1", "--seed: '-1' is not a non-negative integer");
  expect_error_mentioning("gen --seed 18446744073709551616",
                          "--seed: 18446744073709551616 is out of range [0, 18446744073709551615]");
  expect_error_mentioning("gen --seed 99999999999999999999999",
                          "--seed: 99999999999999999999999 is out");
  EXPECT_EQ(run_kvsim("gen -n 1 -q --seed 18446744073709551615").status, 0);
  expect_error_mentioning(replay("--rate 5"), "--rate needs --arrival poisson");
  expect_error_mentioning(replay("--seed 3"), "--seed needs --arrival poisson");
  expect_error_mentioning(replay("--arrival poisson"), "--arrival poisson needs --rate");
  expect_error_mentioning("gen --prefix-tokens 100", "--prefix-tokens needs --prefix-groups > 0");
  expect_error_mentioning("gen --cv 2", "--cv needs --arrival gamma");
  expect_error_mentioning("gen --arrival all-at-once --rate 3",
                          "--rate needs --arrival poisson, gamma or constant");
  expect_error_mentioning(replay("--swap-space-gib 8"),
                          "--swap-space-gib needs --preemption-mode swap");
  expect_error_mentioning(sweep("--block-sizes ,16"), "--block-sizes: item 1 of ',16' is empty");
  expect_error_mentioning(sweep("--block-sizes 16,,32"),
                          "--block-sizes: item 2 of '16,,32' is empty");
  expect_error_mentioning(sweep("--block-sizes 16,x"), "--block-sizes: 'x' is not an integer");
  expect_error_mentioning(sweep("--kv-cache-dtypes \"\""), "--kv-cache-dtypes: empty value");
}

// ---- 8: --help tells the truth; shape flags work on the default model ----

TEST_F(CliBadInput, HelpIsTruthful) {
  for (const char* cmd : {"replay", "sweep"}) {
    SCOPED_TRACE(cmd);
    const CliRun r = run_kvsim(cat({cmd, " --help"}));
    EXPECT_EQ(r.status, 0);
    EXPECT_EQ(r.out.find("{false}"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("--scheduling-policy TEXT:{fcfs,priority}=fcfs"), std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("1 + the trace's longest input + output"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("--no-enable-chunked-prefill"), std::string::npos);
  }
  const CliRun r = run_kvsim(replay("--num-layers 4"));
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("qwen2.5-7b (default, shape overridden)"), std::string::npos) << r.out;
}

// ---- 9, 10: one scheduler flag set, short range messages ----

TEST_F(CliBadInput, RangeMessagesAreShortAndShared) {
  expect_error_mentioning(replay("--time-scale 0"), "--time-scale: must be > 0, got 0");
  expect_error_mentioning(replay("--hash-block-size 0"), "--hash-block-size: must be > 0, got 0");
  expect_error_mentioning("gen -n 0", "--num-requests: must be > 0, got 0");
  expect_error_mentioning("gen --arrival gamma --cv 0", "--cv: must be > 0, got 0");
  expect_error_mentioning("gen --arrival burst --burst-size 0", "--burst-size: must be > 0, got 0");
  expect_error_mentioning("gen --priority-levels 0", "--priority-levels: must be > 0, got 0");
  expect_error_mentioning(sweep("--block-sizes 16 -j 0"), "--jobs: must be > 0, got 0");
  expect_error_mentioning(replay("--watermark 1"), "--watermark: must be in [0, 1), got 1");
  expect_error_mentioning(sweep("--block-sizes 16 --watermark 1"),
                          "--watermark: must be in [0, 1), got 1");
  for (const std::string& args : {replay(""), sweep("--block-sizes 16")}) {
    expect_error_mentioning(args + " --enable-prefix-caching --no-enable-prefix-caching",
                            "--no-enable-prefix-caching: conflicts with --enable-prefix-caching");
  }
  const CliRun r = run_kvsim(replay("--rate 0 --arrival poisson"));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("--rate: must be > 0, got 0"), std::string::npos) << r.out;
  EXPECT_LT(r.out.size(), 200u) << r.out;
}

}  // namespace
